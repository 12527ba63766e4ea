"""`xprc demo`: generate the bundled demo scene and train a spec on it (no download)."""

from __future__ import annotations

import argparse

from ..train.folder import DEMO_FILES
from .args import check_run_folder, path_arg, positive_int
from .train import exit_status, report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=path_arg, default="xprc-demo", help="run folder")
    p.add_argument("--steps", type=positive_int, default=1500, help="optimisation steps")
    p.add_argument(
        "--spec", type=path_arg, default="3dgs", help="a .xpr file or the name of a shipped spec"
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from the run folder's checkpoint"
    )


def run(args) -> int:
    from ..compiler.driver import load
    from ..train import demo

    check_run_folder(args.out, resume=args.resume, files=DEMO_FILES)
    result = demo(args.out, method=load(args.spec), steps=args.steps, resume=args.resume)
    report(result)
    return exit_status(result)
