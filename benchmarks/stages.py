"""Where a render's time goes, per stage and per compositor (issue 25).

    python benchmarks/stages.py                    # garden workload, 3DGS, 3DGUT, octahedron
    python benchmarks/stages.py --methods 3dgs,2dgs --compositors xla,pallas
    python benchmarks/stages.py --methods 3dgrt_k1 --totals-only --dense none  # two compiles

For each spec and compositor, on the garden workload (a random scene of its size without it):
the counting pass, projection, projection + binning + sort, the whole forward (the rest is
compositing, with its layout and gather), forward + backward, XLA compile times, and the dense
same-maths baseline (`benchmarks/dense.py`) for the forward's ratio. On a CPU the Pallas kernels
run interpreted (correct, not fast): measure them on a TPU. Prints a markdown table and writes
benchmarks/results/stages.json, after each spec too, and each compile time and camera's time on
stderr as it comes (a device run cut short by its time limit keeps them). The forward and
forward + backward are what a user's jitted code runs (`benchmarks.run.public_render`: `jax.jit`
of `xprc.render` with the fitted capacity and on_overflow="defer"); the stages inside them are
the pipeline's own functions, which have no public API.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.dense import dense_fn  # noqa: E402
from benchmarks.run import (  # noqa: E402
    SPECS,
    fmt_table,
    machine,
    public_render,
    workload,
    write_json,
)
from xprc.camera import Camera  # noqa: E402
from xprc.compiler.driver import load  # noqa: E402
from xprc.data.workloads import adapt_params  # noqa: E402
from xprc.method_info import MethodInfo  # noqa: E402
from xprc.pipeline import (  # noqa: E402
    RenderConfig,
    gather,  # noqa: E402
    sized_config,
)
from xprc.pipeline import capacity as cap  # noqa: E402
from xprc.pipeline.binning import TileGrid, bin_and_sort  # noqa: E402
from xprc.pipeline.params import prepare_params  # noqa: E402
from xprc.pipeline.render import carries_runs  # noqa: E402


def timed(fn, *args, repeat=5):
    """Median wall seconds of `fn(*args)` after one warm call."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _say(line: str) -> None:
    """Progress on stderr, at once (a device run cut short by its time limit keeps it)."""
    print(line, file=sys.stderr, flush=True)


def stage_fns(method, config: RenderConfig, grid: TileGrid):
    """Jitted prefixes of the render: projection, and projection + binning + sort."""

    def project(params, cam):
        return method.project(params, cam)

    def binned(params, cam):
        proj = method.project(params, cam)
        _, valid = cap.usable(proj)
        depth = proj["depth"].astype(proj["attrs"].dtype)
        return bin_and_sort(proj["box"], valid, depth, grid, config.max_entries,
                            proj.get("ellipse"), proj["centre"],
                            runs=carries_runs(config, config.max_entries))  # fmt: skip

    return jax.jit(project), jax.jit(binned)


def measure(method, params, cams, compositor: str, repeat: int, dense: bool, totals_only=False,
            pixel_outputs: bool = True):  # fmt: skip
    params = prepare_params(method, {k: jnp.asarray(v) for k, v in params.items()})
    config = RenderConfig(compositor=compositor, on_overflow="ignore", pixel_outputs=pixel_outputs)
    config = sized_config(method, params, Camera.stack(cams), config)
    cam = cams[0]
    grid = TileGrid(cam.width, cam.height, config.tile_size)
    count = cap._count_fn(method, cap._count_key(config), False)
    project, binned = stage_fns(method, config, grid)
    fwd, grad = public_render(method, config)  # what a user's jitted code runs
    name = MethodInfo.of(method).name
    t0 = time.perf_counter()
    lowered = fwd.lower(params, cam)  # tracing and lowering to StableHLO
    tl = time.perf_counter()
    fwd_c = lowered.compile()  # XLA's passes (and Mosaic's, for the kernels on a TPU)
    t1 = time.perf_counter()
    _say(f"[compile] {name} {compositor}: forward {t1 - t0:.1f} s (trace+lower {tl - t0:.1f})")
    lowered = grad.lower(params, cam)
    gl = time.perf_counter()
    grad_c = lowered.compile()
    t2 = time.perf_counter()
    _say(f"[compile] {name} {compositor}: gradient {t2 - t1:.1f} s (trace+lower {gl - t1:.1f})")
    row = {"compositor": compositor, "entry_capacity": config.max_entries,
           "compile_fwd_s": t1 - t0, "compile_grad_s": t2 - t1,
           "trace_lower_fwd_s": tl - t0, "trace_lower_grad_s": gl - t1}  # fmt: skip
    per = {k: [] for k in ("count", "project", "bin_sort", "forward", "fwd_bwd", "dense")}
    for c in cams:
        per["forward"].append(timed(fwd_c, params, c, repeat=repeat))
        per["fwd_bwd"].append(timed(grad_c, params, c, repeat=repeat))
        _say(f"[time] {name} {compositor}: forward {per['forward'][-1] * 1e3:.1f} ms, fwd+bwd "
             f"{per['fwd_bwd'][-1] * 1e3:.1f} ms")  # fmt: skip
        if totals_only:
            continue
        per["count"].append(timed(count, params, c, repeat=repeat))
        per["project"].append(timed(project, params, c, repeat=repeat))
        per["bin_sort"].append(timed(binned, params, c, repeat=repeat))
        if dense:
            d = dense_fn(method, dataclasses.replace(config, compositor="xla"))
            per["dense"].append(timed(d, params, c, repeat=repeat))
    for k, v in per.items():
        row[f"{k}_s"] = float(np.mean(v)) if v else None
    if not totals_only:
        row["composite_s"] = row["forward_s"] - row["bin_sort_s"]
        row["bin_sort_only_s"] = row["bin_sort_s"] - row["project_s"]
    if row["dense_s"]:
        row["forward_vs_dense"] = row["forward_s"] / row["dense_s"]
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="3dgs,3dgut,linprim_octahedron")
    ap.add_argument(
        "--compositors", default=None,
        help="comma list of xla, pallas (default: both on a TPU, xla elsewhere)",
    )  # fmt: skip
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--dense", default=None,
        help="comma list of methods to time the dense baseline for (default: all)",
    )  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="a small random scene (smoke run)")
    ap.add_argument(
        "--totals-only", action="store_true",
        help="time only the forward and fwd+bwd (two compilations a spec instead of five)",
    )  # fmt: skip
    ap.add_argument(
        "--transpose", choices=gather.TRANSPOSES, default=gather.TRANSPOSE,
        help="the row gather's transpose in the backward (xprc/pipeline/gather.py)",
    )  # fmt: skip
    ap.add_argument(
        "--pixel-outputs", choices=("on", "off", "both"), default="on",
        help="composite the per-pixel outputs a spec emits (2DGS's depth and normal): "
             "RenderConfig.pixel_outputs; 'both' times a spec that emits some each way",
    )  # fmt: skip
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "stages.json"))
    args = ap.parse_args(argv)
    gather.TRANSPOSE = args.transpose  # read when a render is traced: before any is
    on_tpu = jax.default_backend() == "tpu"
    compositors = (args.compositors or ("xla,pallas" if on_tpu else "xla")).split(",")
    num, scale = (800, 0.2) if args.quick else (None, 1.0)
    params, cams, source = workload(num, scale, args.quick)
    results = {"machine": machine(), "workload": source, "transpose": args.transpose, "rows": []}
    dense = (args.dense or args.methods).split(",")
    for name in args.methods.split(","):
        method = load(ROOT / SPECS[name])
        ways = {"on": [True], "off": [False], "both": [True, False]}[args.pixel_outputs]
        if not MethodInfo.of(method).pixel_outputs:
            ways = [True]  # nothing to leave out
        for comp, outputs in itertools.product(compositors, ways):
            row = measure(method, adapt_params(method, params), cams, comp,
                          1 if args.quick else args.repeat,
                          dense=comp == compositors[0] and name in dense and outputs,
                          totals_only=args.totals_only, pixel_outputs=outputs)  # fmt: skip
            row["method"] = name
            row["pixel_outputs"] = outputs
            results["rows"].append(row)
            _say(f"[done] {name} {comp}: forward {row['forward_s'] * 1e3:.1f} ms, fwd+bwd "
                 f"{row['fwd_bwd_s'] * 1e3:.1f} ms")  # fmt: skip
            write_json(args.out, results, "(so far) ")  # a run cut short keeps what it measured

    def ms(key):
        return lambda r: "-" if r.get(key) is None else f"{r[key] * 1e3:.1f}"

    print(f"\n## Stages on the {source} workload ({len(cams)} cameras, ms per camera)\n")
    print(fmt_table(results["rows"], [
        ("method", lambda r: r["method"]),
        ("compositor", lambda r: r["compositor"]),
        ("pixel outputs", lambda r: "on" if r.get("pixel_outputs", True) else "off"),
        ("count", ms("count_s")),
        ("project", ms("project_s")),
        ("bin+sort", ms("bin_sort_only_s")),
        ("composite", ms("composite_s")),
        ("forward", ms("forward_s")),
        ("fwd+bwd", ms("fwd_bwd_s")),
        ("dense fwd", ms("dense_s")),
        ("compile fwd/grad s", lambda r: f"{r['compile_fwd_s']:.1f}/{r['compile_grad_s']:.1f}"),
        ("of which trace+lower s",
         lambda r: f"{r['trace_lower_fwd_s']:.1f}/{r['trace_lower_grad_s']:.1f}"),
    ]))  # fmt: skip
    return write_json(args.out, results)


if __name__ == "__main__":
    main()
