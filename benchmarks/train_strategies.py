"""Training strategies x specs on the generated demo scene: test PSNR, SSIM, primitives, steps/s.

Every (strategy, spec) pair trains with the same budget on the same scene (no download); the
table is printed as Markdown and the rows are written as JSON.

    python benchmarks/train_strategies.py                      # defaults: a few minutes on 2 cores
    python benchmarks/train_strategies.py --steps 3000 --size 128 --out results/strategies.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = ("3dgs", "3dgut", "linprim_octahedron")


def run(specs, strategies, steps, size, n_train, n_test, reset_every=None) -> list[dict]:
    from xprc.compiler.driver import load
    from xprc.data.demo_scene import generate_demo_scene
    from xprc.data.scene_folder import load_scene
    from xprc.train import TrainConfig, train
    from xprc.train.strategies.adc import ADC

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        generate_demo_scene(tmp, n_train=n_train, n_test=n_test, size=(size, size), seed=0)
        train_set, test_set = load_scene(tmp)
        for spec in specs:
            method = load(ROOT / "specs" / f"{spec}.xpr")
            for strategy in strategies:
                config = TrainConfig(
                    steps=steps,
                    strategy=strategy,
                    eval_every=0,
                    checkpoint_every=0,
                    progress=False,
                    save_renders=False,
                    # the paper schedules, compressed into the budget
                    refine_from=max(steps // 10, 1),
                    sh_degree_interval=max(steps // 4, 1),
                    reset_every=max(steps // 3, 1) if reset_every is None else reset_every,
                )
                t0 = time.perf_counter()
                r = train(method, train_set, test_set, None, config)
                rows.append(
                    {
                        "spec": spec,
                        "strategy": strategy,
                        "split_offset": ADC(method).split_offset(config),
                        "budget": f"{steps} steps, {size}x{size}, {n_train} training views",
                        "initial_psnr": r.initial_psnr,
                        "psnr": r.metrics["psnr"],
                        "ssim": r.metrics["ssim"],
                        "primitives": int(r.metrics["primitives"]),
                        "capacity": int(r.params[next(iter(r.params))].shape[0]),
                        "steps_per_second": r.steps_per_second,
                        "wall_seconds": time.perf_counter() - t0,
                        "entry_capacity": r.entry_capacity,
                    }
                )
                print(f"[done] {spec} {strategy}: {r.metrics['psnr']:.2f} dB", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    head = "| spec | strategy | test PSNR | SSIM | primitives (capacity) | steps/s |"
    lines = [head, "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['spec']} | {r['strategy']} | {r['psnr']:.2f} | {r['ssim']:.3f} | "
            f"{r['primitives']} ({r['capacity']}) | {r['steps_per_second']:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    from xprc.train.strategies import STRATEGIES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", default=",".join(SPECS))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--size", type=int, default=64, help="image side in pixels")
    ap.add_argument("--train-views", type=int, default=12)
    ap.add_argument("--test-views", type=int, default=4)
    ap.add_argument(
        "--reset-every", type=int, default=None, help="adc opacity reset (default: steps / 3)"
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "strategies.json"))
    args = ap.parse_args(argv)
    rows = run(
        [s for s in args.specs.split(",") if s],
        [s for s in args.strategies.split(",") if s],
        args.steps,
        args.size,
        args.train_views,
        args.test_views,
        args.reset_every,
    )
    print(table(rows))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"rows written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
