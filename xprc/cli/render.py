"""`xprc render SCENE --data DATASET`: render a trained scene from dataset cameras."""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

from ..conventions import is_name
from ..errors import DataError, XprError, printable
from ..method_info import MethodInfo
from ..plots import BUILT_IN_KINDS, needs_outputs
from .args import (
    SCENE_HELP,
    dataset_options,
    load_dataset,
    no_file_above,
    path_arg,
    positive_int,
    rgb,
    spec_option,
)

_BUILT_IN = ", ".join(BUILT_IN_KINDS)  # rgb, depth, alpha


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scene", type=path_arg, help=SCENE_HELP)
    spec_option(p, scene=True)
    p.add_argument(
        "--data", type=path_arg, required=True, help="dataset folder (Blender or COLMAP)"
    )
    p.add_argument("--split", default="test", choices=("train", "test"), help="dataset split")
    p.add_argument(
        "--view",
        default="0",
        help="view index (or '#3'), image name (e.g. r_0, test/r_0.png) or 'all'",
    )
    dataset_options(p)
    p.add_argument(
        "--background",
        type=rgb,
        default=None,
        help="R,G,B in [0, 1] (default: the background the scene was trained with, "
        "recorded in its run folder; black when unknown)",
    )
    p.add_argument(
        "--max-entries",
        type=positive_int,
        default=None,
        help="static (primitive, tile) capacity (default: counted per render)",
    )
    p.add_argument(
        "--kind",
        default="rgb",
        type=_kind_name,
        help=f"what to write: {_BUILT_IN}, or a per-pixel output the spec declares (its "
        "PIXEL_OUTPUTS, e.g. normal for 2dgs)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=path_arg,
        default="render.png",
        help="a .png (8-bit) or .npy (float32) file; a folder with --view all",
    )


def _kind_name(text: str) -> str:
    """--kind: a built-in kind or a name a spec's output can have (checked against the spec
    once it is known: `_kinds`)."""
    if not is_name(text):
        raise argparse.ArgumentTypeError(
            f"invalid kind: {printable(text[:80])!r} ({_BUILT_IN}, or the name of a "
            "per-pixel output the spec declares)"
        )
    return text


def _kinds(method, kind: str, spec_name: str) -> list[int] | None:
    """The channels of `kind` when it is one of the spec's per-pixel outputs, None for a
    built-in kind; an XprError listing the kinds otherwise."""
    from ..compiler.names import suggest
    from ..plots import output_kinds

    outputs = output_kinds(MethodInfo.of(method).pixel_outputs)
    if kind in BUILT_IN_KINDS:
        return None
    if kind in outputs:
        return outputs[kind]
    every = [*BUILT_IN_KINDS, *outputs]
    declared = f"its per-pixel outputs: {', '.join(outputs)}" if outputs else "no per-pixel outputs"
    raise XprError(
        f"--kind {kind}: {spec_name} declares {declared}{suggest(kind, every)}; the kinds are "
        f"{', '.join(every)}"
    )


def _pick_views(views, view: str, split: str) -> list:
    if view == "all":
        return list(enumerate(views))
    index = view.removeprefix("#")
    named = [] if view.startswith("#") else _named_views(views, view)
    if index.isascii() and index.isdigit() and not (named and int(index) >= len(views)):
        i = int(index)  # (int() takes other scripts' digits too; '12' past the views: a name)
        if i >= len(views):
            raise XprError(
                f"--view {view}: the {split} split has {len(views)} views (0..{len(views) - 1})"
            )
        others = [(j, v) for j, v in named if j != i]
        if others:  # digits that also name another view (COLMAP's 0.png, 1.png, ...)
            j, v = others[0]
            raise XprError(
                f"--view {view} is ambiguous: view {i} is '{views[i].name}', and view {j} is "
                f"named '{v.name}'; give '#{i}' for the index, or the image's file name for the "
                "other"
            )
        return [(i, views[i])]
    if not named:
        shown = ", ".join(Path(v.name).name for v in views[:12])
        more = f", ... ({len(views)} in all)" if len(views) > 12 else ""
        raise XprError(
            f"--view '{view}': no such image in the {split} split; its views are {shown}{more} "
            f"(or an index 0..{len(views) - 1}, or 'all')"
        )
    exact = [(i, v) for i, v in named if _clean(v.name) == _clean(view)]
    if len(named) > 1 and len(exact) != 1:  # r_0 of test/a/ and test/b/, or r_0.png and .jpg
        shown = ", ".join(f"'{v.name}'" for _, v in named[:6])
        raise XprError(
            f"--view '{view}' names {len(named)} views of the {split} split ({shown}); give the "
            "name with its folder and extension, or an index"
        )
    return exact or named


def _depth_note(out) -> str:
    """What a depth PNG's grey levels mean (each view is scaled on its own)."""
    import numpy as np

    from ..plots import depth_scale

    covered, lo, hi = depth_scale(out)
    if lo is None:
        return "  depth: no pixel is covered (alpha > 0.5): the PNG is black"
    depth = np.asarray(out.depth, np.float32)[covered, 0]
    clipped = int(np.sum((depth < lo) | (depth > hi)))
    return (
        f"  depth: {lo:.4g} (white) to {hi:.4g} (black), this view's 1st to 99th percentile; "
        f"{clipped} covered pixel(s) beyond them clipped; pixels with alpha <= 0.5 black; "
        "-o NAME.npy keeps the values"
    )


def _clean(name: str) -> str:
    return name.replace("\\", "/").removeprefix("./")


def _named_views(views, view: str) -> list:
    """The (index, view) pairs whose image `view` names: its full name, its file name, either
    without the extension."""

    def stem(name: str) -> str:  # 'test/r_0.png' -> 'test/r_0'; '' and '.' have no suffix
        return str(Path(name).with_suffix("")) if Path(name).name else name

    def names(v) -> set[str]:
        full = _clean(v.name)
        return {v.name, full, Path(full).name, Path(full).stem, stem(full)}

    query = _clean(view)
    wanted = {query, stem(query)}
    return [(i, v) for i, v in enumerate(views) if wanted & names(v)]


def _output_paths(output: str, chosen, split: str, many: bool) -> list[Path]:
    out = Path(output)
    no_file_above("-o", output)
    if many:
        if out.exists() and not out.is_dir():
            raise XprError(f"-o '{output}': with --view all, -o is a folder; this is a file")
        return [out / f"{split}_{i:03d}.png" for i, _ in chosen]
    if out.is_dir():
        raise XprError(f"-o '{output}' is a folder: give a file name ending in .png or .npy")
    if out.suffix.lower() not in (".png", ".npy"):
        raise XprError(f"-o '{output}': give a file name ending in .png or .npy")
    return [out]


def _refuse_inputs(output: str, targets: list[Path], data: Path, inputs) -> None:
    """-o never writes over what the render reads: a file in the dataset folder (its images,
    its cameras), the scene or the spec. inputs: (path, what it is) pairs."""
    for target in targets:
        real = target.resolve()  # what the write will open ('..' after a folder it creates too)
        if not real.exists():
            continue
        for path, what in inputs:
            if path.name and path.exists() and os.path.samefile(real, path):
                raise XprError(f"-o '{output}': {target} is the {what} being rendered")
        if _inside(target, data) or _inside(real, data):
            raise XprError(
                f"-o '{output}': {target} is a file in the dataset {data}; a render never "
                "writes over its input (give an -o outside the dataset)"
            )


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path` lies in `folder`, as written or with links resolved."""
    pairs = ((path.absolute(), folder.absolute()), (path.resolve(), folder.resolve()))
    return any(p.is_relative_to(f) for p, f in pairs)


def run(args) -> int:
    import numpy as np

    from ..data.files import write_atomic
    from ..pipeline import RenderConfig, render
    from ..pipeline.params import prepare_params
    from ..plots import kind_image, output_image, save_png
    from ..resources import spec_path
    from ..runtime import check_views_camera
    from ..trained import load_trained, scene_method, scene_params

    train_set, test_set = load_dataset(args)
    views = (test_set if args.split == "test" else train_set).views
    if not views:
        raise XprError(f"{args.data}: the {args.split} split has no views")
    chosen = _pick_views(views, args.view, args.split)
    targets = _output_paths(args.output, chosen, args.split, args.view == "all")
    trained = load_trained(args.scene, train_set.views)
    method = scene_method(trained, args.spec, args.defines)
    trained.params = scene_params(trained, method)
    channels = _kinds(method, args.kind, MethodInfo.of(method).name)
    check_views_camera(method, [view for _, view in chosen], args.split, scene=True)
    try:  # before any render: a scene of another spec is a message about its file
        prepare_params(method, trained.params)
    except XprError as e:
        raise DataError(trained.source, f"{e.message}; a scene of another --spec?") from None
    inputs = [(trained.source, "scene")]
    if args.spec is not None:
        inputs.append((spec_path(args.spec), "spec"))
    if trained.spec is not None and trained.spec.path:  # the user's spec file the run recorded
        inputs.append((Path(trained.spec.path), "spec"))
    _refuse_inputs(args.output, targets, Path(args.data), inputs)
    choices = (args.background, trained.background, (0.0, 0.0, 0.0))
    bg = np.asarray(next(b for b in choices if b is not None), np.float32)
    # without the spec's per-pixel outputs unless the kind reads them (2DGS: about twice as fast)
    outputs = needs_outputs(MethodInfo.of(method).pixel_outputs, args.kind)
    config = RenderConfig(max_entries=args.max_entries, pixel_outputs=outputs)
    mode = "RGB+ED" if args.kind == "depth" else "RGB"
    made = sorted({str(t.parent) for t in targets if not t.parent.exists()})
    for (i, view), target in zip(chosen, targets, strict=True):
        # Lossless unless --max-entries is given; then a drop warns with the count (render).
        out = render(method, trained.params, view.camera(), background=bg, mode=mode, config=config)
        if int(np.sum(out.stats["entries_per_tile"])) == 0:  # none kept, culled ones too
            warnings.warn(
                f"view {i} ({view.name}): nothing is visible: no primitive of the scene reaches "
                "the image (all behind the camera, outside the view, or rejected by the spec's "
                "projection; check the -D values and --spec)",
                RuntimeWarning,
                stacklevel=1,
            )
        npy = target.suffix.lower() == ".npy"
        if channels is not None:
            image, note = output_image(out, channels, raw=npy)
        else:
            image, note = kind_image(out, args.kind, raw=npy), ""
        try:  # a new file renamed into place: a symlink at `target` is replaced, not written
            if npy:
                write_atomic(target, lambda f, image=image: np.save(f, image))
            else:
                write_atomic(target, lambda f, image=image: save_png(f, image))
        except OSError as e:
            raise XprError(f"cannot write: {e.strerror or e}", filename=str(target)) from None
        print(printable(f"view {i} ({view.name}): {view.width}x{view.height} -> {target}"))
        if args.kind == "depth" and not npy:
            print(_depth_note(out))
        elif note:
            print(printable(f"  {args.kind}: {note}; -o NAME.npy keeps the values"))
    for folder in made:  # write_atomic makes a missing folder; said, not silent
        print(printable(f"created the folder {folder}"))
    return 0
