"""Quality at scale (issue 39): 3DGS, 3DGUT and 2DGS trained with the same budget on the
generated capture (`xprc capture`), test PSNR and SSIM on its held-out views, in one table.

    python benchmarks/capture_quality.py --capture DIR          # full size: 150 views, 1296x840
    python benchmarks/capture_quality.py --cpu                  # 24 views at 96x64, 600 steps

Budget: every spec trains the same --steps with ADC on the 3DGS paper's schedule (the
`3dgs-30k` preset) scaled to the steps as benchmarks/train_strategies.py scales it:
densification every min(100, steps/20) steps from steps/10 to steps/2, opacity reset every
steps/3, SH degree up every steps/4; 0.8 L1 + 0.2 D-SSIM. The held-out views are every 8th
(the Mip-NeRF 360 protocol), evaluated --evals times during the run and at the end.

Writes the rows as JSON (--out, rewritten after each spec, so a run cut short keeps what it
measured), the curve image (test PSNR and training loss by step, the specs on shared axes)
beside it with the same name and .png, and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = ("3dgs", "3dgut", "2dgs")
FULL = {"views": 150, "size": "1296x840", "points": 150_000, "steps": 30_000}
CPU = {"views": 24, "size": "96x64", "points": 3_000, "steps": 600}
TEST_EVERY = 8


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def parse_size(text: str) -> tuple[int, int]:
    """'WIDTHxHEIGHT' -> (width, height); an argparse error otherwise."""
    try:
        w, h = (int(p) for p in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"size {text!r}: expected WIDTHxHEIGHT, e.g. 96x64"
        ) from None
    return w, h


def options(argv=None) -> argparse.Namespace:
    """The command line; --cpu fills the unset sizes with the CPU preset's, else the full one's."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true",
                    help=f"the CPU-sized variant: {CPU['views']} views at {CPU['size']}, "
                         f"{CPU['points']} points, {CPU['steps']} steps")  # fmt: skip
    ap.add_argument("--capture", default=None, help="the capture's folder (made or reused)")
    ap.add_argument("--views", type=int, default=None, help=f"cameras (full: {FULL['views']})")
    ap.add_argument("--size", type=parse_size, default=None,
                    help=f"WIDTHxHEIGHT of images_4 (full: {FULL['size']})")  # fmt: skip
    ap.add_argument("--points", type=int, default=None, help="sparse points of the capture")
    ap.add_argument("--steps", type=int, default=None, help="training steps of every spec")
    ap.add_argument("--evals", type=int, default=6, help="test evaluations during the run")
    ap.add_argument("--reset-every", type=int, default=None,
                    help="ADC opacity reset period (default: steps / 3; 0: none)")  # fmt: skip
    ap.add_argument("--specs", default=",".join(SPECS))
    ap.add_argument("--jobs", type=int, default=1, help="processes tracing the capture")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "capture_quality.json"))
    args = ap.parse_args(argv)
    preset = CPU if args.cpu else FULL
    for name in ("views", "points", "steps"):
        if getattr(args, name) is None:
            setattr(args, name, preset[name])
    if args.size is None:
        args.size = parse_size(preset["size"])
    if args.steps < 1 or args.evals < 1:
        ap.error("--steps and --evals must be at least 1")
    if args.reset_every is not None and args.reset_every < 0:
        ap.error("--reset-every must be >= 0")
    args.specs = [s for s in args.specs.split(",") if s]
    return args


def budget(steps: int, evals: int, reset_every: int | None = None):
    """The one TrainConfig every spec trains with: the 3dgs-30k preset scaled to `steps`
    (`reset_every`: ADC's opacity reset period; None: steps / 3, 0: none)."""
    from xprc.train.config import preset

    return preset(
        "3dgs-30k",
        steps=steps,
        refine_every=min(100, max(steps // 20, 1)),
        refine_from=max(steps // 10, 1),
        refine_until=max(steps // 2, 1),
        reset_every=max(steps // 3, 1) if reset_every is None else reset_every,
        sh_degree_interval=max(steps // 4, 1),
        eval_every=max(steps // evals, 1),
        log_every=max(steps // 150, 1),
        checkpoint_every=0,
        progress=False,
        save_renders=False,
    )


def table(rows: list[dict]) -> str:
    lines = ["| spec | steps | primitives | test PSNR (dB) | test SSIM | steps/s | wall s |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['spec']} | {r['steps']} | {r['primitives']:,} | {r['initial_psnr']:.2f} -> "
            f"{r['psnr']:.2f} | {r['ssim']:.3f} | {r['steps_per_second']:.2f} | "
            f"{r['wall_seconds']:.0f} |"
        )
    return "\n".join(lines)


def reset_steps(config) -> list[int]:
    """The steps of ADC's opacity resets under `config` (before the end of densification)."""
    if config.strategy != "adc" or config.reset_every <= 0:
        return []
    return list(range(config.reset_every, min(config.steps, config.until()), config.reset_every))


def title(capture: dict, n_test: int, steps: int) -> str:
    w, h = capture["size"]
    return (f"generated capture: {capture['views']} views at {w}x{h} ({n_test} held out), "
            f"{steps:,} steps each, ADC on the 3dgs-30k schedule scaled")  # fmt: skip


def run(args) -> dict:
    """Capture, then each spec trained and evaluated; the JSON and the PNG written as it goes."""
    from benchmarks.run import machine
    from xprc.compiler.driver import load
    from xprc.data.capture import CaptureParams, generate_capture
    from xprc.data.scene_folder import load_scene
    from xprc.plots import compared_curves
    from xprc.train import train

    out = Path(args.out)
    picture = out.with_suffix(".png")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="xprc-capture-") as tmp:
        folder = Path(args.capture) if args.capture else Path(tmp) / "capture"
        params = CaptureParams(views=args.views, size=args.size, points=args.points)
        t0 = time.perf_counter()
        info = generate_capture(folder, params, jobs=args.jobs, log=_say)
        capture_s = time.perf_counter() - t0
        train_set, test_set = load_scene(folder, test_every=TEST_EVERY, images="images_4")
        config = budget(args.steps, args.evals, args.reset_every)
        results = {
            "machine": machine(),
            "capture": {"views": args.views, "size": list(args.size), "points": args.points,
                        "train_views": len(train_set),
                        "test_views": len(test_set), "cached": info.get("cached"),
                        "seconds": round(capture_s, 1)},
            "budget": {"steps": config.steps, "strategy": config.strategy,
                       "schedule": "3dgs-30k scaled", "refine_every": config.refine_every,
                       "refine_from": config.refine_from, "refine_until": config.refine_until,
                       "reset_every": config.reset_every,
                       "sh_degree_interval": config.sh_degree_interval,
                       "eval_every": config.eval_every},
            "rows": [],
            "curves": {},
        }  # fmt: skip
        name = title(results["capture"], len(test_set), config.steps)
        resets = reset_steps(config)
        for spec in args.specs:
            method = load(ROOT / "specs" / f"{spec}.xpr")
            t0 = time.perf_counter()
            r = train(method, train_set, test_set, None, config)
            wall = time.perf_counter() - t0
            results["rows"].append({
                "spec": spec, "steps": r.step, "primitives": int(r.metrics["primitives"]),
                "initial_psnr": r.initial_psnr, "psnr": r.metrics["psnr"],
                "ssim": r.metrics["ssim"], "steps_per_second": r.steps_per_second,
                "wall_seconds": round(wall, 1),
            })  # fmt: skip
            evals = [{"step": int(e["step"]), "psnr": float(e["psnr"])} for e in r.evals]
            if r.initial_psnr is not None and (not evals or evals[0]["step"] > 0):
                evals.insert(0, {"step": 0, "psnr": float(r.initial_psnr)})
            history = [{"step": int(h["step"]), "loss": float(h["loss"])} for h in r.history]
            results["curves"][spec] = {"evals": evals, "history": history}
            out.write_text(json.dumps(results, indent=1) + "\n")
            compared_curves(picture, results["curves"], name, resets)
            _say(f"[done] {spec}: {r.initial_psnr:.2f} -> {r.metrics['psnr']:.2f} dB "
                 f"in {wall:.0f} s")  # fmt: skip
    results["table"] = table(results["rows"])
    out.write_text(json.dumps(results, indent=1) + "\n")
    _say(f"wrote {out} and {picture}")
    return results


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    results = run(options(argv))
    print(results["table"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
