"""The compositing backward: custom VJP against autodiff of the scan, in one run (issue 17).

    python benchmarks/backward.py --methods 3dgs --cams 1 --rounds 2

For each spec, on the garden workload (a random scene of the same size without it): forward,
and forward+backward with `RenderConfig(backward="custom")` and `backward="autodiff"`, per
camera, the minimum wall and CPU time of `--repeat` calls; the two backward variants are timed
alternately, `--rounds` times, so a loaded machine affects both alike. Prints the ratios
fwd+bwd / fwd and writes JSON to `--out` (after each spec).

    python benchmarks/backward.py --methods linprim_octahedron,3dgs --response

times the spec's response alone on one compositing step's shapes (group x tile pixels x chunk,
`RenderConfig` defaults), attributes of visible garden primitives, rays of the pixels around
them: the response, and the response with its VJP (what the custom backward runs per step).
Where the backward's time goes (issue 17); the JSON goes to `--out` as well.
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
from xprc.data.workloads import adapt_params  # noqa: E402
from xprc.pipeline import RenderConfig, sized_config  # noqa: E402
from xprc.pipeline.params import prepare_params  # noqa: E402
from xprc.pipeline.render import _compiled  # noqa: E402


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


def response_step(method, params, cam, config: RenderConfig, repeat: int, rounds: int):
    """(response, response + VJP) seconds on one compositing step's shapes [G, P, B]."""
    out = jax.jit(method.project)(prepare_params(method, params), cam)
    keep = np.asarray(out["valid"])
    attrs, centre = np.asarray(out["attrs"])[keep], np.asarray(out["centre"])[keep]
    g, b, t = config.group, config.chunk_for(False), config.tile_size
    rng = np.random.default_rng(0)
    pick = rng.integers(0, len(attrs), (g, b))  # a tile's lanes: primitives near its centre
    a = jnp.asarray(attrs[pick][:, None])  # [G, 1, B, A]
    side = np.arange(t) - t / 2 + 0.5
    offsets = np.stack(np.meshgrid(side, side), -1).reshape(-1, 2)
    pixel = centre[pick[:, 0]][:, None, :] + offsets[None]  # [G, P, 2]
    ro, rd = cam.pixel_rays(jnp.asarray(pixel[..., 0]), jnp.asarray(pixel[..., 1]))
    ro, rd, pixel = ro[:, :, None], rd[:, :, None], jnp.asarray(pixel[:, :, None])

    def alpha(a, ro, rd):
        value = method.response(pixel, ro, rd, a, cam)
        return value[0] if isinstance(value, tuple) else value

    def with_vjp(a, ro, rd, ct):
        value, vjp = jax.vjp(alpha, a, ro, rd)
        return value, vjp(jnp.broadcast_to(ct, value.shape).astype(value.dtype))

    fwd = jax.jit(alpha).lower(a, ro, rd).compile()
    ct = jnp.ones((g, t * t, b), a.dtype)
    bwd = jax.jit(with_vjp).lower(a, ro, rd, ct).compile()
    rows = []
    for _ in range(rounds):
        f, _ = timed(fwd, a, ro, rd, repeat=repeat)
        fb, _ = timed(bwd, a, ro, rd, ct, repeat=repeat)
        rows.append({"response_s": f, "response_vjp_s": fb, "ratio": fb / f})
        print("  " + ", ".join(f"{k} {v:.2e}" for k, v in rows[-1].items()), flush=True)
    return {"shape": [g, t * t, b, int(a.shape[-1])], "rows": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="3dgs")
    ap.add_argument("--cams", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="small sizes, for smoke tests")
    ap.add_argument("--response", action="store_true", help="time the response alone")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "backward.json"))
    args = ap.parse_args(argv)
    main_num, main_scale = (1500, 0.25) if args.quick else (None, 1.0)
    params, cams, source = workload(main_num, main_scale, args.quick)
    cams = cams[: args.cams]
    methods = load_methods([n for n in args.methods.split(",") if n])
    results = {"workload": source, "jax": jax.__version__, "methods": {}}
    for name, (method, _) in methods.items():
        print(f"[{name}]", flush=True)
        if args.response:
            raw = {k: jnp.asarray(v) for k, v in adapt_params(method, params).items()}
            r = response_step(method, raw, cams[0], RenderConfig(), args.repeat, args.rounds)
            results["methods"][name] = r
            ratio = np.median([row["ratio"] for row in r["rows"]])
            print(f"[{name}] response + VJP / response: {ratio:.2f}")
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(results, indent=1))
            continue
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
