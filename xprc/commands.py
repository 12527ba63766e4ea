"""`xprc render`, `xprc train` and `xprc demo`: the command-line face of the pipeline and trainer.

Registered into `xprc.cli` (see `register` there); every user mistake is an XprError, which the
CLI prints without a traceback.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .cli import add_define_option, register
from .errors import XprError

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = ROOT / "specs" / "3dgs.xpr"


def _spec_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", default=str(DEFAULT_SPEC), help="the .xpr spec (default: 3DGS)")
    add_define_option(p)


def _load_method(args):
    from .compiler.driver import load, parse_defines

    return load(args.spec, defines=parse_defines(args.defines) or None)


def _devices_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--devices",
        default="1",
        help="devices to use: a number or 'all' (multi-host: set XPRC_COORDINATOR, "
        "XPRC_NUM_PROCESSES, XPRC_PROCESS_ID)",
    )


def _setup_devices(args) -> int:
    import jax

    from .distributed import initialize

    if os.environ.get("XPRC_COORDINATOR"):
        initialize(
            os.environ["XPRC_COORDINATOR"],
            int(os.environ["XPRC_NUM_PROCESSES"]),
            int(os.environ["XPRC_PROCESS_ID"]),
        )
    if args.devices == "all":
        return jax.device_count()
    try:
        n = int(args.devices)
    except ValueError:
        raise XprError(f"--devices must be a number or 'all', not '{args.devices}'") from None
    if not 1 <= n <= jax.device_count():
        raise XprError(
            f"--devices {n}: {jax.device_count()} device(s) available ({jax.default_backend()})"
        )
    return n


# ------------------------------------------------------------------------------------ render


def _render_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scene", help="a PLY (3DGS layout) or a native checkpoint (.npz)")
    _spec_option(p)
    p.add_argument("--data", required=True, help="dataset folder (Blender or COLMAP)")
    p.add_argument("--split", default="test", choices=("train", "test"))
    p.add_argument("--view", default="0", help="view index or image name, or 'all'")
    p.add_argument("--downscale", type=int, default=1)
    p.add_argument("--background", default="0,0,0", help="R,G,B in [0, 1]")
    p.add_argument("--max-entries", type=int, default=None)
    p.add_argument(
        "-o", "--output", default="render.png", help="PNG path (a folder when --view all)"
    )


def _render(args) -> int:
    import numpy as np

    from .datasets import load_scene
    from .io import load_checkpoint, load_ply
    from .pipeline import RenderConfig, render, warn_if_dropped
    from .plots import save_png

    method = _load_method(args)
    scene = Path(args.scene)
    if scene.suffix == ".ply":
        params = load_ply(scene)
    else:
        params, _ = load_checkpoint(scene)
    train_set, test_set = load_scene(args.data, downscale=args.downscale)
    views = (test_set if args.split == "test" else train_set).views
    if not views:
        raise XprError(f"{args.data}: the {args.split} split has no views")
    if args.view == "all":
        chosen = list(enumerate(views))
    elif args.view.isdigit():
        i = int(args.view)
        if i >= len(views):
            raise XprError(f"--view {i}: the {args.split} split has {len(views)} views")
        chosen = [(i, views[i])]
    else:
        chosen = [(i, v) for i, v in enumerate(views) if v.name == args.view]
        if not chosen:
            raise XprError(f"--view '{args.view}': no such image in the {args.split} split")
    try:
        bg = np.asarray([float(c) for c in args.background.split(",")], np.float32)
    except ValueError:
        raise XprError(f"--background '{args.background}': expected R,G,B") from None
    config = RenderConfig(max_entries=args.max_entries)
    out_path = Path(args.output)
    for i, view in chosen:
        out = render(method, params, view.camera(), background=bg, config=config)
        warn_if_dropped(out)
        target = out_path / f"{args.split}_{i:03d}.png" if args.view == "all" else out_path
        target.parent.mkdir(parents=True, exist_ok=True)
        save_png(target, np.asarray(out.image))
        print(f"view {i} ({view.name}): {view.width}x{view.height} -> {target}")
    return 0


# ------------------------------------------------------------------------------------- train


def _train_args(p: argparse.ArgumentParser) -> None:
    _spec_option(p)
    p.add_argument("--data", required=True, help="dataset folder (Blender or COLMAP)")
    p.add_argument("--out", required=True, help="run folder")
    p.add_argument("--steps", type=int, default=7000)
    p.add_argument("--downscale", type=int, default=1)
    p.add_argument("--capacity", type=int, default=None, help="static primitive count")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    _devices_option(p)


def _train(args) -> int:
    from .datasets import load_scene
    from .train import TrainConfig, train

    devices = _setup_devices(args)
    method = _load_method(args)
    train_set, test_set = load_scene(args.data, downscale=args.downscale)
    config = TrainConfig(
        steps=args.steps, seed=args.seed, capacity=args.capacity, eval_every=args.eval_every
    )
    kwargs = {"devices": devices} if devices > 1 else {}
    result = train(method, train_set, test_set, args.out, config, resume=args.resume, **kwargs)
    _report(result)
    return 0


def _report(result) -> None:
    m = result.metrics or {}
    start = "" if result.initial_psnr is None else f" (start {result.initial_psnr:.2f} dB)"
    if m:
        print(
            f"step {result.step}: test PSNR {m.get('psnr', float('nan')):.2f} dB{start}, "
            f"SSIM {m.get('ssim', float('nan')):.4f}, {m.get('primitives', '?')} primitives, "
            f"{result.steps_per_second:.1f} steps/s -> {result.out_dir}"
        )
    if result.interrupted:
        print("interrupted: checkpoint saved; continue with --resume")


# -------------------------------------------------------------------------------------- demo


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="xprc-demo", help="run folder")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--spec", default=str(DEFAULT_SPEC))
    p.add_argument("--resume", action="store_true")


def _demo(args) -> int:
    from .compiler.driver import load
    from .train import demo

    result = demo(args.out, method=load(args.spec), steps=args.steps, resume=args.resume)
    _report(result)
    return 0


register("render", "render a PLY or checkpoint from a dataset camera", _render_args, _render)
register("train", "train any spec on a Blender or COLMAP dataset", _train_args, _train)
register(
    "demo", "generate the bundled demo scene and train 3DGS on it (no download)", _demo_args, _demo
)
