"""The argument types and options the commands share, and the checks of their paths.

Every user mistake is an XprError (or argparse's usage error, for a type below), which the CLI
prints without a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from ..conventions import HOST_NAME_PATTERN, IP_ADDRESS_PATTERN
from ..distributed import ENV_HELP
from ..errors import XprError, cut_to, printable
from ..train.folder import CHECKPOINT, METRICS, PLY, RENDERS, RUN_FILES

SCENE_HELP = f"a run folder (its {CHECKPOINT}, else {PLY}), a checkpoint (.npz) or a 3DGS PLY"


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
    from ..train.config import SEED_MAX

    return int_range(0, SEED_MAX, "an integer >= 0")(text)


def shown(text: str, limit: int = 60) -> str:
    """An argument quoted for a message: escaped (printable) and cut to `limit` characters."""
    return f"'{printable(cut_to(text, limit))}'"


def path_arg(text: str) -> str:
    """argparse type: a path; an empty one (an unset shell variable) would mean '.'."""
    if not text:
        raise argparse.ArgumentTypeError("expected a path, got '' (an empty string)")
    return text


def host_name(text: str) -> str:
    """argparse type: a host name or IP address to listen on."""
    if not re.fullmatch(f"{HOST_NAME_PATTERN}|{IP_ADDRESS_PATTERN}", text):
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
    from ..resources import DEFAULT_SPEC_NAME, shipped_specs

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
    from ..compiler.driver import load, parse_defines

    return load(args.spec, defines=parse_defines(args.defines) or None)


def devices_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--devices",
        default="1",
        help=f"devices to use: a number or 'all' (multi-host: {ENV_HELP})",
    )


VIEWER_HOST, VIEWER_PORT = "127.0.0.1", 8080


def viewer_options(p: argparse.ArgumentParser) -> None:
    """--host and --port; None when not given (`viewer_address` fills in the defaults), so
    that `train` can refuse them without --view instead of ignoring them."""
    p.add_argument(
        "--host", type=host_name, default=None,
        help=f"viewer: address to listen on (default: {VIEWER_HOST})",
    )  # fmt: skip
    p.add_argument(
        "--port", type=port_number, default=None, help=f"viewer: port (default: {VIEWER_PORT})"
    )


def viewer_address(args) -> tuple[str, int]:
    """(host, port) of the viewer options, defaults filled in."""
    host = VIEWER_HOST if args.host is None else args.host
    return host, VIEWER_PORT if args.port is None else args.port


def spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "spec", type=path_arg, help="a .xpr file, or the name of a shipped spec (e.g. 3dgs)"
    )
    add_define_option(p)


def read_spec(spec: str) -> tuple[str, str]:
    """A spec argument (a path, or a shipped spec's name) -> (text, the name errors show)."""
    from ..compiler import driver
    from ..resources import spec_path

    path = spec_path(spec)
    return driver.read_spec(path), spec if path == Path(spec) else str(path)


def no_file_above(option: str, output: str) -> None:
    """XprError when a folder `output` needs (one of its parents) is a file: found before the
    work, not at its first write."""
    out = Path(output)
    above = next(p for p in (out, *out.parents) if p.exists() or p == p.parent)
    if above != out and not above.is_dir():
        raise XprError(f"{option} '{output}': {above} is a file, not a folder")


def check_run_folder(
    out: str, data: str | None = None, resume: bool = False, files=RUN_FILES
) -> None:
    """--out of train / demo: a folder, or where one can be made; not a file (it was a
    traceback at the first checkpoint, 1000 steps in), nor a dataset folder, nor (without
    --resume) a folder holding any of `files` (the names the run writes, from
    `xprc.train.folder`): an earlier run's, whose checkpoint and results would be replaced, or
    a user's own scene.ply or config.json, which were replaced without a word."""
    no_file_above("--out", out)
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise XprError(f"--out '{out}' is a file, not a folder")
    # --resume without a checkpoint starts a new run: the same files would be replaced
    new_run = not resume or not (path / CHECKPOINT).is_file()
    if path.is_dir() and new_run:
        held = [name for name in (CHECKPOINT, METRICS) if (path / name).is_file()]
        if held and not resume:
            raise XprError(
                f"--out '{out}' already holds a run ({held[0]}): continue it with --resume, "
                "or give another folder (or remove this one) to start a new run"
            )
        found = [n + "/" * (path / n).is_dir() for n in files if os.path.lexists(path / n)]
        if found:
            more = f" and {len(found) - 3} more" if len(found) > 3 else ""
            raise XprError(
                f"--out '{out}' already holds files a new run writes ({', '.join(found[:3])}"
                f"{more}) and no {CHECKPOINT} to resume from: they would be replaced; give "
                "another folder, or move them away"
            )
    if data is not None and path.is_dir() and Path(data).is_dir() and os.path.samefile(path, data):
        raise XprError(
            f"--out '{out}' is the dataset folder --data: the run's files ({METRICS}, "
            f"{RENDERS}/, {CHECKPOINT}, ...) would go among its own; give a run folder"
        )
    from ..data.scene_folder import dataset_mark  # (its loaders are not needed for --help)

    mark = dataset_mark(path)
    if mark is not None:
        raise XprError(
            f"--out '{out}' holds a dataset ({mark}): the run's files would go among its "
            "own; give a run folder"
        )


DATASET_DEFAULTS = {"downscale": 1, "undistort": False}  # the loader's, where not from a run


def dataset_options(p: argparse.ArgumentParser, from_run: bool = False) -> None:
    """--downscale, --images, --test-every and --undistort: which images of a dataset are read,
    and (COLMAP) which views are held out and whether lens cameras become pinholes. from_run:
    --downscale and --undistort are None when not given (the run's record fills them, then the
    loader's defaults), so that a given option is never taken for one left at its default."""
    run = "the run's (config.json), else "
    p.add_argument(
        "--downscale", type=positive_int,
        default=None if from_run else DATASET_DEFAULTS["downscale"],
        help="image downscale factor" + (f" (default: {run}1)" if from_run else ""),
    )  # fmt: skip
    p.add_argument(
        "--images",
        type=path_arg,
        default=None,
        help="COLMAP: the image folder to read (default: images, or images_N for --downscale N "
        "when it exists); images_N (e.g. images_4, the Mip-NeRF 360 layout) holds the images "
        "shrunk N times and is read as it is",
    )
    p.add_argument(
        "--test-every",
        type=int_range(2, INT32_MAX, "an integer >= 2"),
        default=None,
        help="COLMAP: hold out every N-th view, sorted by name, from 0 (default: 8, the "
        "Mip-NeRF 360 protocol of 3DGS and gsplat)",
    )
    p.add_argument(
        "--undistort",
        action="store_true",
        help="resample the images of lens cameras (COLMAP's SIMPLE_RADIAL, RADIAL, OPENCV, "
        "FULL_OPENCV, OPENCV_FISHEYE; a transforms.json camera_model) to pinhole cameras as "
        "COLMAP's image_undistorter does, for specs that render only pinholes (3dgs); see "
        "docs/photos.md" + (f" (default: {run}off)" if from_run else ""),
        default=None if from_run else DATASET_DEFAULTS["undistort"],
    )


def load_dataset(args, **kwargs):
    """(train, test) of --data with the `dataset_options`."""
    from ..data.scene_folder import load_scene

    return load_scene(args.data, downscale=args.downscale, test_every=args.test_every,
                      images=args.images, undistort=args.undistort, **kwargs)  # fmt: skip
