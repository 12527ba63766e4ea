"""`xprc capture`: generate (or reuse) the benchmark capture, a COLMAP scene in the Mip-NeRF
360 layout ray traced from a loop of cameras (no download). See `xprc.data.capture`."""

from __future__ import annotations

import argparse
import re

from ..errors import XprError, printable
from .args import int_range, no_file_above, path_arg, positive_int, seed_int

MAX_SIDE = 8192


def image_size(text: str) -> tuple[int, int]:
    """argparse type: WIDTHxHEIGHT, each 8 to MAX_SIDE pixels."""
    m = re.fullmatch(r"([0-9]{1,5})[xX]([0-9]{1,5})", text)
    if m is None or not all(8 <= int(g) <= MAX_SIDE for g in m.groups()):
        raise argparse.ArgumentTypeError(
            f"expected WIDTHxHEIGHT with each side 8 to {MAX_SIDE} pixels (e.g. 1296x840), got "
            f"'{printable(text[:40])}'"
        )
    return int(m[1]), int(m[2])


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        type=path_arg,
        default=None,
        help="the capture's folder (default: ~/.cache/xprc/captures/ and a name made of the "
        "parameters); a folder holding the same capture is reused",
    )
    p.add_argument("--views", type=int_range(2, 100_000, "an integer >= 2"), default=150,
                   help="cameras on the loop")  # fmt: skip
    p.add_argument("--size", type=image_size, default="1296x840",
                   help="WIDTHxHEIGHT of images_4 (the camera is 4 times that)")  # fmt: skip
    p.add_argument("--seed", type=seed_int, default=0, help="random seed")
    p.add_argument("--objects", type=int_range(0, 10_000, "an integer in 0..10000"), default=90,
                   help="textured shapes in the scene")  # fmt: skip
    p.add_argument("--points", type=int_range(0, 10_000_000, "an integer in 0..10000000"),
                   default=150_000, help="sparse points in points3D.bin")  # fmt: skip
    p.add_argument("--aa", type=int_range(1, 8, "an integer in 1..8"), default=1,
                   help="rays a pixel per side (anti-aliased edges; aa x aa the time)")  # fmt: skip
    p.add_argument(
        "--full-size",
        action="store_true",
        help="also trace images/ at 4 x --size (16 times the time; about 2 GB for 150 views "
        "of 1296x840) and shrink it to images_4/",
    )
    p.add_argument("--jobs", type=positive_int, default=1, help="processes tracing views")


def run(args) -> int:
    from ..data.capture import CaptureParams, default_capture_dir, generate_capture, size_problem

    problem = size_problem(args.size, args.full_size)
    if problem is not None:
        raise XprError(f"--size: {problem.replace('full_size', '--full-size')}")
    params = CaptureParams(views=args.views, size=args.size, seed=args.seed,
                           objects=args.objects, points=args.points, aa=args.aa,
                           full_size=args.full_size)  # fmt: skip
    out = args.out if args.out is not None else str(default_capture_dir(params))
    no_file_above("--out", out)
    info = generate_capture(out, params, jobs=args.jobs, log=print)
    if info["cached"]:
        print(printable(f"reused the capture in {out} (same parameters; made in "
                        f"{info.get('seconds', '?')} s)"))  # fmt: skip
    else:
        print(printable(f"wrote {out}: {info['views']} views, {info['points']:,} points, "
                        f"{info['objects']} objects in {info['seconds']} s"))  # fmt: skip
    print(info["layout"])
    print(printable(f"train: xprc train --data {out} --images images_4 --out RUN"))
    return 0
