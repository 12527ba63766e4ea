"""`xprc train --data DATASET --out RUN`: train any spec on a Blender or COLMAP dataset."""

from __future__ import annotations

import argparse
import shlex
import signal
from pathlib import Path

from ..errors import XprError, printable
from ..train.config import APPEARANCE, PRESETS, default_of
from ..train.folder import CHECKPOINT
from ..train.progress import format_rate
from ..train.strategies import STRATEGIES
from .args import (
    check_run_folder,
    dataset_options,
    devices_option,
    load_dataset,
    load_method,
    non_negative_int,
    path_arg,
    positive_int,
    seed_int,
    spec_option,
    viewer_address,
    viewer_options,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    spec_option(p)
    p.add_argument(
        "--data", type=path_arg, required=True, help="dataset folder (Blender or COLMAP)"
    )
    p.add_argument("--out", type=path_arg, required=True, help="run folder")
    p.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default=None,
        help="a named set of training options (3dgs-30k: the 3DGS paper's 30k-step schedule "
        "and densification, strategy adc; see docs/training.md); options given here override it "
        "(default: none)",
    )
    p.add_argument(
        "--steps", type=positive_int, default=None,
        help=f"optimisation steps (default: {default_of('steps')}, or the preset's)",
    )  # fmt: skip
    dataset_options(p)
    p.add_argument(
        "--capacity",
        type=positive_int,
        default=None,
        help="static primitive count (default: the number of initial points)",
    )
    p.add_argument("--seed", type=seed_int, default=0, help="random seed")
    p.add_argument(
        "--eval-every", type=non_negative_int, default=None,
        help=f"test every N steps, 0: off (default: {default_of('eval_every')}, or the preset's)",
    )  # fmt: skip
    p.add_argument(
        "--checkpoint-every",
        type=non_negative_int,
        default=None,
        help=f"write {CHECKPOINT} every N steps, 0: only at the end (default: "
        f"{default_of('checkpoint_every')}, or the preset's)",
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from the run folder's checkpoint"
    )
    p.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default=None,
        help="densification: mcmc (3DGS-MCMC relocation) or adc (3DGS clone/split/prune); "
        "see docs/training.md (default: mcmc, or the preset's)",
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
        "--appearance",
        choices=APPEARANCE,
        default="off",
        help="per-view exposure and white-balance compensation for photos taken with automatic "
        "exposure (affine: a colour transform per training view, in the loss only; test views "
        "are rendered without it); see docs/training.md (default: off)",
    )
    p.add_argument(
        "--regularisers",
        choices=("auto", "on", "off"),
        default="auto",
        help="the 2DGS depth distortion and normal consistency (auto: on for a spec that emits "
        "per-pixel depth and normal); see docs/2dgs.md",
    )
    devices_option(p)
    p.add_argument(
        "--view",
        action="store_true",
        help="show training live in the browser viewer (needs xprc[viewer]); the scene is "
        "reloaded from each checkpoint, so combine with --checkpoint-every",
    )
    viewer_options(p)


def run(args) -> int:
    from ..distributed import collective_error, leave, setup_devices

    given = [o for o, v in (("--host", args.host), ("--port", args.port)) if v is not None]
    if given and not args.view:  # (they were ignored without a word)
        raise XprError(f"{' and '.join(given)} set the viewer's address: add --view to start it")
    check_run_folder(args.out, args.data, resume=args.resume)
    devices = setup_devices(args.devices)
    status = 1  # an exception (when the other processes do not finish: the exit status)
    try:
        status = train_on(args, devices)
    except RuntimeError as e:
        said = collective_error(e)  # a multi-host step failing with a process gone
        if said is None:
            raise
        raise said from None
    finally:
        status = leave(status)  # a multi-host run: wait for the other processes, then leave
    return status


def train_on(args, devices: int) -> int:
    """`run` after the devices are set up: train, report, keep viewing; the exit status."""
    from ..train import train

    method = load_method(args)
    train_set, test_set = load_dataset(args)
    config = train_config(args)
    kwargs = {"devices": devices} if devices > 1 else {}
    server = None
    if args.view:
        from ..trained import inferred_background
        from ..viewer import Viewer

        host, port = viewer_address(args)
        server = Viewer(
            method,
            Path(args.out),
            train_set.views,
            background=inferred_background(train_set.views),
            host=host,
            port=port,
            wait=True,
        )
        server.watch()
        for line in server.access_lines():
            print(printable(line.replace(" (Ctrl-C", " (updates with each checkpoint; Ctrl-C")))
    try:
        result = train(method, train_set, test_set, args.out, config, resume=args.resume, **kwargs)
    except BaseException:
        if server is not None:
            server.stop()
        raise
    report(result)
    if server is not None:
        keep_viewing(server, result, args.out)
    return exit_status(result)


def exit_status(result) -> int:
    """0 for a run that ended; a run a signal stopped (after its checkpoint) exits with the
    conventional 128 + the signal's number, so that `timeout`, schedulers and `&&` chains see
    it was cut short; one a KeyboardInterrupt stopped (a callback's): 130, as for SIGINT."""
    if not result.interrupted:
        return 0
    name = getattr(result, "signal", None)
    return 128 + (signal.Signals[name] if name else signal.SIGINT)


def keep_viewing(server, result, out) -> None:
    """After `train --view`: a person at a terminal keeps the final scene in the viewer until
    Ctrl-C; a run nobody can interrupt (no terminal: CI, a pipe, a batch job) or one stopped
    early stops the viewer at once, and both say how to reopen it."""
    from .view import interactive, serve_until_interrupted

    reopen = printable(f"xprc view {shlex.quote(str(out))}")
    if result.interrupted or not interactive():
        server.stop()
        why = "the run was interrupted" if result.interrupted else "no terminal to stop it from"
        print(f"viewer stopped ({why}); to look at the scene: {reopen}", flush=True)
        return
    server.reload()  # the final checkpoint, without waiting for the watch
    print(printable(f"training done: the viewer keeps showing the final scene at {server.url} "
                    f"until Ctrl-C (later: {reopen})"), flush=True)  # fmt: skip
    serve_until_interrupted(server)


def train_config(args):
    """The TrainConfig of the options: the preset's fields (if any), then each option given."""
    from ..train.config import TrainConfig

    given = {
        "steps": args.steps, "eval_every": args.eval_every, "strategy": args.strategy,
        "checkpoint_every": args.checkpoint_every,
    }  # fmt: skip
    options = {
        **(PRESETS[args.preset] if args.preset else {}),
        **{k: v for k, v in given.items() if v is not None},
        "seed": args.seed, "capacity": args.capacity, "pose_opt": args.pose_opt,
        "intrinsics_opt": args.intrinsics_opt, "random_background": args.random_background,
        "regularisers": args.regularisers, "appearance": args.appearance,
    }  # fmt: skip
    return TrainConfig(**options)


def report(result) -> None:
    m = result.metrics or {}
    start = "" if result.initial_psnr is None else f" (start {result.initial_psnr:.2f} dB)"
    if m:
        print(
            f"step {result.step}: test PSNR {m.get('psnr', float('nan')):.2f} dB{start}, "
            f"SSIM {m.get('ssim', float('nan')):.4f}, {m.get('primitives', '?')} primitives, "
            + printable(f"{format_rate(result.steps_per_second)} -> {result.out_dir}")
        )
    if result.interrupted:
        by = f" by {result.signal}" if getattr(result, "signal", None) else ""
        print(f"interrupted{by}: checkpoint saved; continue with --resume "
              f"(exit status {exit_status(result)})")  # fmt: skip
