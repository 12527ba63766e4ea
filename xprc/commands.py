"""`xprc render`, `train`, `view` and `demo`: the command-line face of the pipeline and trainer,
and the argument types every command shares.

Listed in `xprc.cli.COMMANDS` (this module never imports `xprc.cli`); every user mistake is an
XprError, which the CLI prints without a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from .errors import DataError, XprError, printable

SCENE_HELP = "a run folder (its checkpoint.npz, else scene.ply), a checkpoint (.npz) or a 3DGS PLY"
RENDER_KINDS = ("rgb", "depth", "alpha")


INT32_MAX = 2**31 - 1  # counts, sizes and seeds end up in int32 arrays and XLA shapes


def int_range(low: int, high: int, what: str):
    """argparse type: an integer in low..high written in ASCII digits; `what` names the
    allowed values in the error, which also names the option (argparse adds it)."""

    def parse(text: str) -> int:
        digits = re.fullmatch(r"[+-]?([0-9]+)", text)
        value = None if digits is None else int(text) if len(digits[1]) <= 30 else high + 1
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {shown(text)}")
        if value > high:
            most = "" if str(high) in what else f" up to {high}"
            raise argparse.ArgumentTypeError(f"expected {what}{most}, got {shown(text)}")
        return value

    return parse


positive_int = int_range(1, INT32_MAX, "a positive integer (1, 2, ...)")
non_negative_int = int_range(0, INT32_MAX, "an integer >= 0")
port_number = int_range(1, 65535, "a port number in 1..65535")


def seed_int(text: str) -> int:
    """argparse type of --seed: the trainer's range (`xprc.train.config.SEED_MAX`)."""
    from .train.config import SEED_MAX

    return int_range(0, SEED_MAX, "an integer >= 0")(text)


def shown(text: str, limit: int = 60) -> str:
    """An argument quoted for a message: escaped (printable) and cut to `limit` characters."""
    cut = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"'{printable(cut)}'"


def path_arg(text: str) -> str:
    """argparse type: a path; an empty one (an unset shell variable) would mean '.'."""
    if not text:
        raise argparse.ArgumentTypeError("expected a path, got '' (an empty string)")
    return text


def host_name(text: str) -> str:
    """argparse type: a host name or IP address to listen on."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,253}|[0-9A-Fa-f:.]{2,45}", text):
        raise argparse.ArgumentTypeError(
            "expected a host name or IP address (e.g. 127.0.0.1, or 0.0.0.0 for every "
            f"interface), got {shown(text)}"
        )
    return text


def rgb(text: str) -> tuple[float, float, float]:
    """argparse type: `R,G,B`, three numbers in [0, 1]."""
    try:
        values = tuple(float(c) for c in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or not all(0.0 <= v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected three numbers in [0, 1] as R,G,B (e.g. 1,1,1 for white), got {shown(text)}"
        )
    return values


def add_define_option(p: argparse.ArgumentParser) -> None:
    """`-D NAME=VALUE`, repeatable: override a constant of the spec."""
    p.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a constant of the spec (repeatable)",
    )


def spec_option(p: argparse.ArgumentParser, scene: bool = False) -> None:
    """--spec and -D; scene: the command reads a trained scene, which records its spec."""
    from .resources import DEFAULT_SPEC_NAME, shipped_specs

    shipped = "a .xpr file, or the name of a shipped spec (" + ", ".join(shipped_specs()) + ")"
    default = (
        f" (default: the spec the scene records it was trained with; {DEFAULT_SPEC_NAME} for a "
        "scene that records none, such as a PLY from elsewhere)"
    )
    p.add_argument(
        "--spec",
        type=path_arg,
        default=None if scene else DEFAULT_SPEC_NAME,
        help=shipped + (default if scene else ""),
    )
    add_define_option(p)


def load_method(args):
    from .compiler.driver import load, parse_defines

    return load(args.spec, defines=parse_defines(args.defines) or None)


def _devices_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--devices",
        default="1",
        help="devices to use: a number or 'all' (multi-host: set XPRC_COORDINATOR, "
        "XPRC_NUM_PROCESSES, XPRC_PROCESS_ID, and XPRC_COORDINATOR_TIMEOUT, the seconds to wait "
        "for the other processes: 60 unless set)",
    )


# ------------------------------------------------------------------------------------ render


def add_render_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scene", type=path_arg, help=SCENE_HELP)
    spec_option(p, scene=True)
    p.add_argument(
        "--data", type=path_arg, required=True, help="dataset folder (Blender or COLMAP)"
    )
    p.add_argument("--split", default="test", choices=("train", "test"), help="dataset split")
    p.add_argument(
        "--view", default="0", help="view index, image name (e.g. r_0, test/r_0.png) or 'all'"
    )
    p.add_argument("--downscale", type=positive_int, default=1, help="image downscale factor")
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
    p.add_argument("--kind", default="rgb", choices=RENDER_KINDS, help="what to write")
    p.add_argument(
        "-o",
        "--output",
        type=path_arg,
        default="render.png",
        help="a .png (8-bit) or .npy (float32) file; a folder with --view all",
    )


def _pick_views(views, view: str, split: str) -> list:
    if view == "all":
        return list(enumerate(views))
    if view.isascii() and view.isdigit():  # (int() takes other scripts' digits too)
        i = int(view)
        if i >= len(views):
            raise XprError(
                f"--view {i}: the {split} split has {len(views)} views (0..{len(views) - 1})"
            )
        return [(i, views[i])]

    def stem(name: str) -> str:  # 'test/r_0.png' -> 'test/r_0'; '' and '.' have no suffix
        return str(Path(name).with_suffix("")) if Path(name).name else name

    def names(v) -> set[str]:
        full = v.name.replace("\\", "/").removeprefix("./")
        return {v.name, full, Path(full).name, Path(full).stem, stem(full)}

    query = view.replace("\\", "/").removeprefix("./")
    wanted = {query, stem(query)}
    chosen = [(i, v) for i, v in enumerate(views) if wanted & names(v)]
    if not chosen:
        shown = ", ".join(Path(v.name).name for v in views[:12])
        more = f", ... ({len(views)} in all)" if len(views) > 12 else ""
        raise XprError(
            f"--view '{view}': no such image in the {split} split; its views are {shown}{more} "
            f"(or an index 0..{len(views) - 1}, or 'all')"
        )
    return chosen


def _no_file_above(option: str, output: str) -> None:
    """XprError when a folder `output` needs (one of its parents) is a file: found before the
    work, not at its first write."""
    out = Path(output)
    above = next(p for p in (out, *out.parents) if p.exists() or p == p.parent)
    if above != out and not above.is_dir():
        raise XprError(f"{option} '{output}': {above} is a file, not a folder")


def check_run_folder(out: str, data: str | None = None) -> None:
    """--out of train / demo: a folder, or where one can be made; not a file (it was a
    traceback at the first checkpoint, 1000 steps in) nor the dataset folder itself."""
    _no_file_above("--out", out)
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise XprError(f"--out '{out}' is a file, not a folder")
    if data is not None and path.is_dir() and Path(data).is_dir() and os.path.samefile(path, data):
        raise XprError(
            f"--out '{out}' is the dataset folder --data: the run's files (metrics.json, "
            "renders/, checkpoint.npz, ...) would go among its own; give a run folder"
        )


def _output_paths(output: str, chosen, split: str, many: bool) -> list[Path]:
    out = Path(output)
    _no_file_above("-o", output)
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


def run_render(args) -> int:
    import numpy as np

    from .datasets import load_scene
    from .pipeline import RenderConfig, render
    from .pipeline.params import prepare_params
    from .plots import kind_image, save_png
    from .resources import spec_path
    from .trained import load_trained, scene_method

    train_set, test_set = load_scene(args.data, downscale=args.downscale)
    views = (test_set if args.split == "test" else train_set).views
    if not views:
        raise XprError(f"{args.data}: the {args.split} split has no views")
    chosen = _pick_views(views, args.view, args.split)
    targets = _output_paths(args.output, chosen, args.split, args.view == "all")
    trained = load_trained(args.scene, train_set.views)
    method = scene_method(trained, args.spec, args.defines)
    try:  # before any render: a scene of another spec is a message about its file
        prepare_params(method, trained.params)
    except XprError as e:
        raise DataError(trained.source, f"{e.message}; a scene of another --spec?") from None
    inputs = [(trained.source, "scene")]
    if args.spec is not None:  # (a recorded spec is a shipped .xpr, never a .png or .npy)
        inputs.append((spec_path(args.spec), "spec"))
    _refuse_inputs(args.output, targets, Path(args.data), inputs)
    choices = (args.background, trained.background, (0.0, 0.0, 0.0))
    bg = np.asarray(next(b for b in choices if b is not None), np.float32)
    config = RenderConfig(max_entries=args.max_entries)
    mode = "RGB+ED" if args.kind == "depth" else "RGB"
    for (i, view), target in zip(chosen, targets, strict=True):
        # Lossless unless --max-entries is given; then a drop warns with the count (render).
        out = render(method, trained.params, view.camera(), background=bg, mode=mode, config=config)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.suffix.lower() == ".npy":
                np.save(target, kind_image(out, args.kind, raw=True))
            else:
                save_png(target, kind_image(out, args.kind))
        except OSError as e:
            raise XprError(f"cannot write: {e.strerror or e}", filename=str(target)) from None
        print(printable(f"view {i} ({view.name}): {view.width}x{view.height} -> {target}"))
    return 0


# ------------------------------------------------------------------------------------- train


def add_train_args(p: argparse.ArgumentParser) -> None:
    spec_option(p)
    p.add_argument(
        "--data", type=path_arg, required=True, help="dataset folder (Blender or COLMAP)"
    )
    p.add_argument("--out", type=path_arg, required=True, help="run folder")
    p.add_argument("--steps", type=positive_int, default=7000, help="optimisation steps")
    p.add_argument("--downscale", type=positive_int, default=1, help="image downscale factor")
    p.add_argument(
        "--capacity",
        type=positive_int,
        default=None,
        help="static primitive count (default: the number of initial points)",
    )
    p.add_argument("--seed", type=seed_int, default=0, help="random seed")
    p.add_argument(
        "--eval-every", type=non_negative_int, default=1000, help="test every N steps (0: off)"
    )
    p.add_argument(
        "--checkpoint-every",
        type=non_negative_int,
        default=1000,
        help="write checkpoint.npz every N steps (0: only at the end)",
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from the run folder's checkpoint"
    )
    p.add_argument(
        "--strategy",
        choices=("mcmc", "adc"),
        default="mcmc",
        help="densification: mcmc (3DGS-MCMC relocation) or adc (3DGS clone/split/prune); "
        "see docs/training.md",
    )
    p.add_argument("--pose-opt", action="store_true", help="learn per-view camera pose corrections")
    p.add_argument(
        "--intrinsics-opt",
        action="store_true",
        help="learn shared intrinsics and lens coefficients",
    )
    p.add_argument(
        "--random-background",
        action="store_true",
        help="each step, composite the ground truth on a random colour and render on it "
        "(needs RGBA training images); see docs/training.md",
    )
    p.add_argument(
        "--regularisers",
        choices=("auto", "on", "off"),
        default="auto",
        help="the 2DGS depth distortion and normal consistency (auto: on for a spec that emits "
        "per-pixel depth and normal); see docs/2dgs.md",
    )
    _devices_option(p)
    p.add_argument(
        "--view",
        action="store_true",
        help="show training live in the browser viewer (needs xprc[viewer]); the scene is "
        "reloaded from each checkpoint, so combine with --checkpoint-every",
    )
    viewer_options(p)


def viewer_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host", type=host_name, default="127.0.0.1", help="viewer: address to listen on"
    )
    p.add_argument("--port", type=port_number, default=8080, help="viewer: port")


def run_train(args) -> int:
    from .datasets import load_scene
    from .distributed import setup_devices
    from .train import TrainConfig, train

    check_run_folder(args.out, args.data)
    devices = setup_devices(args.devices)
    method = load_method(args)
    train_set, test_set = load_scene(args.data, downscale=args.downscale)
    config = TrainConfig(
        steps=args.steps,
        seed=args.seed,
        capacity=args.capacity,
        eval_every=args.eval_every,
        checkpoint_every=args.checkpoint_every,
        strategy=args.strategy,
        pose_opt=args.pose_opt,
        intrinsics_opt=args.intrinsics_opt,
        random_background=args.random_background,
        regularisers=args.regularisers,
    )
    kwargs = {"devices": devices} if devices > 1 else {}
    server = None
    if args.view:
        from .trained import inferred_background
        from .viewer import Viewer

        server = Viewer(
            method,
            Path(args.out),
            train_set.views,
            background=inferred_background(train_set.views),
            host=args.host,
            port=args.port,
            wait=True,
        )
        server.watch()
        print(printable(f"viewer: {server.url} (updates with each checkpoint)"))
    try:
        result = train(method, train_set, test_set, args.out, config, resume=args.resume, **kwargs)
    finally:
        if server is not None:
            server.stop()
    _report(result)
    return 0


def _report(result) -> None:
    m = result.metrics or {}
    start = "" if result.initial_psnr is None else f" (start {result.initial_psnr:.2f} dB)"
    if m:
        print(
            f"step {result.step}: test PSNR {m.get('psnr', float('nan')):.2f} dB{start}, "
            f"SSIM {m.get('ssim', float('nan')):.4f}, {m.get('primitives', '?')} primitives, "
            + printable(f"{result.steps_per_second:.1f} steps/s -> {result.out_dir}")
        )
    if result.interrupted:
        print("interrupted: checkpoint saved; continue with --resume")


# -------------------------------------------------------------------------------------- demo


def add_demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=path_arg, default="xprc-demo", help="run folder")
    p.add_argument("--steps", type=positive_int, default=1500, help="optimisation steps")
    p.add_argument(
        "--spec", type=path_arg, default="3dgs", help="a .xpr file or the name of a shipped spec"
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from the run folder's checkpoint"
    )


def run_demo(args) -> int:
    from .compiler.driver import load
    from .train import demo

    check_run_folder(args.out)
    result = demo(args.out, method=load(args.spec), steps=args.steps, resume=args.resume)
    _report(result)
    return 0


# -------------------------------------------------------------------------------------- view


def add_view_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scene", type=path_arg, help=SCENE_HELP)
    spec_option(p, scene=True)
    p.add_argument(
        "--data",
        type=path_arg,
        default=None,
        help="dataset folder: its cameras are drawn and the first one starts the view "
        "(default: the run folder's scene/ when it has one, as a demo run does; else none)",
    )
    p.add_argument(
        "--background",
        type=rgb,
        default=None,
        help="R,G,B in [0, 1] (default: the background the scene was trained with; black when "
        "unknown)",
    )
    viewer_options(p)


def run_view(args) -> int:
    from .viewer import serve

    return serve(args)
