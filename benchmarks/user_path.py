"""What a user's own code gets: `xprc.render` eager and under `jax.jit` / `jax.grad`, beside the
internal compiled render the stage benchmark times.

    python benchmarks/user_path.py                 # garden workload (a random scene without it)
    python benchmarks/user_path.py --num 20000 --scale 0.5 --repeat 3    # a lighter CPU run

Each row is one way a user calls the renderer on the same scene and camera (3DGS):

- `internal`: `xprc.pipeline.render._compiled` with the fitted capacity and no run-time report
  (what `benchmarks/stages.py` times: the baseline of the ratios);
- `eager`: `xprc.render(method, params, camera)`: counts the entries, then renders and reports;
- `jit fit_config`: `jax.jit` of `xprc.render` with `xprc.fit_config(...)` and the default
  `on_overflow="warn"` (the documented way);
- `jit fit_config defer`: the same with `on_overflow="defer"` (no run-time report: the caller
  calls `xprc.warn_if_dropped`; the program holds no host callback);
- `jit fit_config ignore`: the same with `on_overflow="ignore"`;
- `jit no config`: `jax.jit` of `xprc.render` with no config (default entry capacity).

Forward: the image; fwd+bwd: `jax.value_and_grad` of the L1 distance to a fixed image. Times are
medians of `--repeat` calls after one warm call, in ms per camera; `first call` is the first
call's wall time in this process (tracing and compiling included). `--second-process` then runs
the jitted forward and fwd+bwd of `jit fit_config` (warn and defer) in a fresh process with the
same persistent compilation cache (xprc's default, or XPRC_JAX_CACHE_DIR) and reports its first
calls: what a second run of a user's script waits.

Prints a markdown table and writes benchmarks/results/user_path.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import xprc  # noqa: E402
from benchmarks.run import fmt_table, machine, workload, write_json  # noqa: E402
from xprc.pipeline.render import _compiled  # noqa: E402


def _median_ms(fn, arg, repeat: int) -> tuple[float, float]:
    """(first call's wall ms, median ms of `repeat` calls after it)."""
    start = time.perf_counter()
    jax.block_until_ready(fn(arg))
    first = (time.perf_counter() - start) * 1e3
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(arg))
        times.append((time.perf_counter() - start) * 1e3)
    return first, statistics.median(times)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def paths(method, params, camera, fitted):
    """name -> (forward fn of params, loss fn of params) for each way of calling."""
    target = jnp.zeros((camera.height, camera.width, 3), jnp.float32)
    ignore = dataclasses.replace(fitted, on_overflow="ignore")
    defer = dataclasses.replace(fitted, on_overflow="defer")
    internal = _compiled(method, "RGB", ignore, False)

    def public(config):
        return lambda p: xprc.render(method, p, camera, config=config).image

    def loss_of(image_fn):
        return lambda p: jnp.mean(jnp.abs(image_fn(p) - target))

    def internal_image(p):
        return internal(p, camera, None).image

    return {
        "internal": (internal_image, jax.jit(jax.value_and_grad(loss_of(internal_image)))),
        "eager": (public(None), None),
        "jit fit_config": (
            jax.jit(public(fitted)),
            jax.jit(jax.value_and_grad(loss_of(public(fitted)))),
        ),
        "jit fit_config defer": (
            jax.jit(public(defer)),
            jax.jit(jax.value_and_grad(loss_of(public(defer)))),
        ),
        "jit fit_config ignore": (
            jax.jit(public(ignore)),
            jax.jit(jax.value_and_grad(loss_of(public(ignore)))),
        ),
        "jit no config": (
            jax.jit(public(None)),
            jax.jit(jax.value_and_grad(loss_of(public(None)))),
        ),
    }


SECOND = """
import dataclasses, json, sys, time
sys.path.insert(0, {root!r})
import jax, jax.numpy as jnp, xprc
from benchmarks.run import workload
params, cams, _ = workload({num!r}, {scale!r}, False)
params = jax.device_put(params)
method = xprc.load("3dgs")
cam = cams[0]
fitted = xprc.fit_config(method, params, cam)
target = jnp.zeros((cam.height, cam.width, 3), jnp.float32)
out = {{}}
for policy in ("warn", "defer"):
    cfg = dataclasses.replace(fitted, on_overflow=policy)
    image = lambda p: xprc.render(method, p, cam, config=cfg).image
    fwd = jax.jit(image)
    grad = jax.jit(jax.value_and_grad(lambda p: jnp.mean(jnp.abs(image(p) - target))))
    for name, fn in (("forward", fwd), ("fwd+bwd", grad)):
        start = time.perf_counter()
        jax.block_until_ready(fn(params))
        out[f"{{policy}} {{name}} first s"] = time.perf_counter() - start
        print(json.dumps(out), flush=True)
"""


def second_process(num, scale, here: bool = False) -> dict:
    """First-call seconds of the jitted forward and fwd+bwd (`on_overflow` "warn" and
    "defer") in a fresh process that shares this one's persistent compilation cache, in
    which this process compiled the same programs."""
    code = SECOND.format(root=str(ROOT), num=num, scale=scale)
    if here:
        scope: dict = {}
        exec(compile(code, "<first calls>", "exec"), scope)  # noqa: S102 - our own text
        return scope["out"]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=1800
    )
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {}
    if done.returncode:
        result["error"] = done.stderr.strip().splitlines()[-1:]
    return result


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num", type=int, default=None, help="primitives (default: all)")
    ap.add_argument("--scale", type=float, default=1.0, help="image resolution factor")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--second-process", action="store_true")
    ap.add_argument(
        "--first-calls",
        action="store_true",
        help="only the first calls of the jitted forward and fwd+bwd, in this process "
        "(run it twice: on an accelerator one process at a time holds it)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "user_path.json"))
    args = ap.parse_args(argv)
    if args.first_calls:
        result = second_process(args.num, args.scale, here=True)
        print(json.dumps(result))
        return write_json(args.out, {"machine": machine(), "first calls": result})
    params, cams, kind = workload(args.num, args.scale, False)
    params = jax.device_put(params)  # on the device, as a training loop holds them
    method = xprc.load("3dgs")
    camera = cams[0]
    fitted = xprc.fit_config(method, params, camera)
    n = int(next(iter(params.values())).shape[0])
    _say(f"{kind}: {n:,} primitives, {camera.width}x{camera.height}, capacity "
         f"{fitted.max_entries:,}")  # fmt: skip
    rows = []
    for name, (fwd, grad) in paths(method, params, camera, fitted).items():
        row = {"path": name}
        row["forward first s"], row["forward ms"] = _median_ms(fwd, params, args.repeat)
        row["forward first s"] /= 1e3
        if grad is not None:
            row["fwd+bwd first s"], row["fwd+bwd ms"] = _median_ms(grad, params, args.repeat)
            row["fwd+bwd first s"] /= 1e3
        rows.append(row)
        _say(f"{name}: {row}")
        partial = {"machine": machine(), "workload": kind, "rows": rows, "partial": True}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(partial, indent=2))  # a run cut short keeps it
    base = rows[0]
    for row in rows:
        for key in ("forward ms", "fwd+bwd ms"):
            if key in row and key in base:
                row[key.replace("ms", "ratio")] = row[key] / base[key]
    results = {
        "machine": machine(),
        "workload": kind,
        "primitives": n,
        "image": [camera.width, camera.height],
        "capacity fitted": int(fitted.max_entries),
        "rows": rows,
    }
    if args.second_process:
        from xprc import compile_cache

        results["cache dir"] = str(compile_cache.STATE["dir"])
        results["persistent cache"] = second_process(args.num, args.scale)
        _say(f"second process: {results['persistent cache']}")

    def num(key, fmt):
        return lambda r: format(r[key], fmt) if key in r else ""

    print(fmt_table(rows, [
        ("path", lambda r: r["path"]),
        ("forward ms", num("forward ms", ".2f")),
        ("x internal", num("forward ratio", ".2f")),
        ("fwd+bwd ms", num("fwd+bwd ms", ".2f")),
        ("x internal", num("fwd+bwd ratio", ".2f")),
        ("first call fwd s", num("forward first s", ".1f")),
        ("first call grad s", num("fwd+bwd first s", ".1f")),
    ]))  # fmt: skip
    if "persistent cache" in results:
        print(json.dumps(results["persistent cache"]))
    return write_json(args.out, results)


if __name__ == "__main__":
    main()
