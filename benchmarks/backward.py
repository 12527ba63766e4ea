"""The compositing backward: custom VJP against autodiff of the scan, in one run (issue 17).

    python benchmarks/backward.py --methods 3dgs --cams 1 --rounds 2

For each spec, on the garden workload (a random scene of the same size without it): forward,
and forward+backward with `RenderConfig(backward="custom")` and `backward="autodiff"`, per
camera, the minimum wall and CPU time of `--repeat` calls; the two backward variants are timed
alternately, `--rounds` times, so a loaded machine affects both alike. Prints the ratios
fwd+bwd / fwd and writes JSON to `--out` (after each spec).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run import load_methods, workload  # noqa: E402
from xprc.camera import Camera  # noqa: E402
from xprc.pipeline import RenderConfig, sized_config  # noqa: E402
from xprc.pipeline.render import _compiled, prepare_params  # noqa: E402
from xprc.scenes import adapt_params  # noqa: E402


def timed(fn, *args, repeat=3):
    """(wall, CPU) seconds of one call, each the minimum over `repeat` calls after a warm-up:
    on a machine shared with other jobs the minimum is the least disturbed call, and the CPU
    time of this process (all its threads) does not count time spent waiting for a core."""
    jax.block_until_ready(fn(*args))
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(*args))
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def compiled_pair(method, params, cam, config):
    """(forward, forward+backward) compiled for one config."""
    fwd = _compiled(method, "RGB", config, False)

    def loss(p, cam):
        return jnp.sum(fwd(p, cam, None).image)

    grad = jax.jit(jax.grad(loss))
    return fwd.lower(params, cam, None).compile(), grad.lower(params, cam).compile()


def measure(method, params, cams, repeat, rounds):
    params = prepare_params(method, {k: jnp.asarray(v) for k, v in params.items()})
    base = sized_config(method, params, Camera.stack(cams), RenderConfig())
    variants = {}
    for backward in ("custom", "autodiff"):
        config = dataclasses.replace(base, backward=backward)
        t0 = time.perf_counter()
        variants[backward] = compiled_pair(method, params, cams[0], config)
        print(f"  compiled {backward} in {time.perf_counter() - t0:.1f} s", flush=True)
    rows = []
    for r in range(rounds):
        for i, cam in enumerate(cams):
            row = {"round": r, "camera": i}
            row["forward_s"], row["forward_cpu_s"] = timed(
                variants["custom"][0], params, cam, None, repeat=repeat
            )
            for backward, (_, grad_c) in variants.items():
                wall, cpu = timed(grad_c, params, cam, repeat=repeat)
                row[f"fwdbwd_{backward}_s"], row[f"fwdbwd_{backward}_cpu_s"] = wall, cpu
                row[f"ratio_{backward}"] = wall / row["forward_s"]
                row[f"ratio_{backward}_cpu"] = cpu / row["forward_cpu_s"]
            print("  " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
            rows.append(row)
    return {"entry_capacity": base.max_entries, "rows": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="3dgs")
    ap.add_argument("--cams", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="small sizes, for smoke tests")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "backward.json"))
    args = ap.parse_args(argv)
    main_num, main_scale = (1500, 0.25) if args.quick else (None, 1.0)
    params, cams, source = workload(main_num, main_scale, args.quick)
    cams = cams[: args.cams]
    methods = load_methods([n for n in args.methods.split(",") if n])
    results = {"workload": source, "jax": jax.__version__, "methods": {}}
    for name, (method, _) in methods.items():
        print(f"[{name}]", flush=True)
        r = measure(method, adapt_params(method, params), cams, args.repeat, args.rounds)
        results["methods"][name] = r
        for backward in ("custom", "autodiff"):
            wall = np.median([row[f"ratio_{backward}"] for row in r["rows"]])
            cpu = np.median([row[f"ratio_{backward}_cpu"] for row in r["rows"]])
            print(f"[{name}] fwd+bwd / fwd, {backward}: wall {wall:.2f}, CPU {cpu:.2f}")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)  # after each spec
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
