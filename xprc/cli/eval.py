"""`xprc eval RUN [--data DATASET]`: PSNR and SSIM of a trained scene on the held-out views, per
view and their mean, to a JSON file (default RUN/eval.json). Without --data, the dataset and the
options the run was trained with (config.json's `data`). See `xprc.evaluate`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DataError, XprError, printable
from .args import (
    DATASET_DEFAULTS,
    INT32_MAX,
    SCENE_HELP,
    dataset_options,
    load_dataset,
    no_file_above,
    path_arg,
    rgb,
    spec_option,
)

EVAL_FILE = "eval.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scene", type=path_arg, help=SCENE_HELP)
    spec_option(p, scene=True)
    p.add_argument(
        "--data",
        type=path_arg,
        default=None,
        help="dataset folder (Blender or COLMAP) (default: the one the run was trained on, with "
        "its --downscale, --images, --test-every and --undistort, from the run's config.json)",
    )
    dataset_options(p, from_run=True)
    p.add_argument(
        "--background",
        type=rgb,
        default=None,
        help="R,G,B in [0, 1] (default: the background the scene was trained with)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=path_arg,
        default=None,
        help=f"the JSON report (default: {EVAL_FILE} in the run folder; eval.json beside a "
        "checkpoint or PLY given as a file)",
    )


def _test_every(args) -> int | None:
    """The held-out split of a COLMAP scene (None: a Blender scene's files name it)."""
    from ..data.datasets import TEST_EVERY
    from ..data.scene_folder import COLMAP_MARK, dataset_mark

    if dataset_mark(args.data) != COLMAP_MARK:
        return None
    return TEST_EVERY if args.test_every is None else args.test_every


DATA_CHECKS = {  # config.json's `data` fields besides the path, and what a recorded one may be
    "downscale": lambda v: v is None or (type(v) is int and 1 <= v <= INT32_MAX),
    "images": lambda v: v is None or (isinstance(v, str) and 0 < len(v) < 4096),
    "test_every": lambda v: v is None or (type(v) is int and 2 <= v <= INT32_MAX),
    "undistort": lambda v: type(v) is bool,
}


def _option_text(key: str, value) -> str:
    """How the command line would say a recorded option ('' for its default or None)."""
    name = "--" + key.replace("_", "-")
    if value is None:
        return ""
    if isinstance(value, bool):
        return name if value else ""
    return "" if (key == "downscale" and value == 1) else f"{name} {value}"


def recorded_dataset(args, folder: Path) -> None:
    """Fill args.data and the dataset options not given on the command line from the run's
    config.json (`data`, written by a run trained on a dataset `load_scene` read), and say what
    was taken; a DataError naming config.json when it is missing, records no dataset, or holds
    a malformed one."""
    from ..data.files import json_object
    from ..train.folder import CONFIG

    path = folder / CONFIG
    given = "give --data DATASET (the folder the scene was trained on)"
    if not path.is_file():
        raise DataError(path, f"not found, so the run's dataset is unknown: {given}")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(path, f"cannot read it ({e.strerror or e}): {given}") from None
    data = json_object(path, raw, "run record").get("data")
    if data is None:
        raise DataError(path, f"records no dataset (a run of an older xprc, or trained from "
                              f"Python on a dataset not read by load_scene): {given}")  # fmt: skip
    folder_ok = isinstance(data, dict) and isinstance(data.get("path"), str)
    if not folder_ok or not Path(data["path"]).is_absolute():
        raise DataError(path, f"its `data` record is malformed (no absolute path): {given}")
    for key, ok in DATA_CHECKS.items():
        if not ok(data.get(key)):
            raise DataError(path, f"its `data` record has a malformed {key!r}: {given}")
    args.data = data["path"]
    taken = []
    for key in DATA_CHECKS:
        if getattr(args, key) is None:  # not given: the run's
            setattr(args, key, data[key])
            taken.append(_option_text(key, data[key]))
    taken = [t for t in taken if t]
    options = f" with {', '.join(taken)}" if taken else ""
    print(printable(f"dataset (from {path}): {args.data}{options}"))


def run(args) -> int:
    import numpy as np

    from ..evaluate import LPIPS_NOTE, evaluate, write_report
    from ..pipeline.params import prepare_params
    from ..runtime import check_views_camera
    from ..trained import load_trained, scene_method, scene_params

    scene = Path(args.scene)
    if not scene.exists():  # (before a config.json beside where it would be is read)
        raise DataError(scene, "not found: give a run folder, a checkpoint or a PLY file")
    folder = scene if scene.is_dir() else scene.parent
    if args.data is None:
        recorded_dataset(args, folder)
    for key, default in DATASET_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, default)
    train_set, test_set = load_dataset(args)
    trained = load_trained(args.scene, train_set.views)
    method = scene_method(trained, args.spec, args.defines)
    trained.params = scene_params(trained, method)  # a 3DGS PLY's fields: the spec's names
    check_views_camera(method, test_set.views, "test", scene=True)
    try:
        prepare_params(method, trained.params)
    except XprError as e:
        raise DataError(trained.source, f"{e.message}; a scene of another --spec?") from None
    out = Path(args.output) if args.output is not None else folder / EVAL_FILE
    no_file_above("-o", str(out))
    if out.is_dir():
        raise XprError(f"-o '{args.output}' is a folder: give a file name ending in .json")
    choices = (args.background, trained.background, (0.0, 0.0, 0.0))
    bg = np.asarray(next(b for b in choices if b is not None), np.float32)
    report = evaluate(method, trained, train_set, test_set, bg, log=lambda m: print(printable(m)))
    report = {
        "scene": str(trained.source),
        "data": str(Path(args.data).resolve()),
        "images": args.images,
        "downscale": args.downscale,
        "test_every": _test_every(args),
        **report,
    }
    try:
        write_report(out, report)
    except OSError as e:
        raise XprError(f"cannot write: {e.strerror or e}", filename=str(out)) from None
    mean = report["mean"]
    print(printable(f"{report['views']} test views: PSNR {mean['psnr']:.2f} dB, SSIM "
                    f"{mean['ssim']:.4f}; LPIPS {LPIPS_NOTE} -> {out}"))  # fmt: skip
    return 0
