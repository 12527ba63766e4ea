"""Cold compile times of the public render and its gradient, per spec, for a TPU v5e compiled on
this machine, without a TPU (issue 40: "cold compile per function <= 15 s on the TPU").

    python benchmarks/compile_aot.py --tpu                        # 3DGS, garden-sized, for a v5e
    python benchmarks/compile_aot.py --tpu --specs 3dgs,2dgs --compositors pallas,xla
    python benchmarks/compile_aot.py --quick                      # this machine's backend, tiny

Each function is what a user's jitted code compiles (`benchmarks.run.public_render`: `jax.jit`
of `xprc.render` with a fixed capacity and on_overflow="defer", and of its image sum's
gradient), lowered for abstract inputs of the garden frame's sizes (111,785 primitives,
648x420, 458,752 entries: nothing of that size is allocated) and compiled cold (the
persistent cache turned off). Two times per function: JAX's tracing and lowering, and the
backend's compile (XLA's passes, with Mosaic's for the Pallas kernels: compare
`--compositors pallas,xla` to see Mosaic's share).

With `--tpu` the compile is JAX's ahead-of-time compilation for a TPU v5e topology (the
`libtpu` package installed, no TPU needed): the TPU compiler running on this machine's CPU, so
its seconds scale with this CPU, not with the TPU host's (docs/tpu.md, "Compile times").
Without `--tpu`: this machine's backend. Prints a table and writes
benchmarks/results/compile_aot.json.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run import (  # noqa: E402
    SPECS,
    fmt_table,
    load_average,
    machine,
    public_render,
    write_json,
)
from benchmarks.stages import stage_fns  # noqa: E402
from xprc import verify  # noqa: E402
from xprc.camera import look_at  # noqa: E402
from xprc.compiler.driver import load  # noqa: E402
from xprc.pipeline import RenderConfig, composite_pallas  # noqa: E402
from xprc.pipeline.binning import TileGrid  # noqa: E402

GARDEN = (111_785, 458_752, 648, 420)  # primitives, entries (fitted), width, height
QUICK = (64, 4096, 32, 24)


def tpu_device():
    """The one device of a TPU v5e 1x1 topology (JAX's ahead-of-time compilation; needs libtpu),
    or None with the reason."""
    try:
        from jax.experimental import topologies

        topo = topologies.get_topology_desc(
            topology_name="v5e:1x1", platform="tpu", chips_per_host_bounds=(1, 1, 1), num_slices=1
        )
    except Exception as e:  # noqa: BLE001 - any failure: the reason goes into one line
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return topo.devices[0], ""


@contextlib.contextmanager
def lowered_for_tpu(on: bool = True):
    """While on: the pipeline lowers as on a TPU (JAX's default backend reads "tpu", so the
    compositor "auto" and the relayout pick the TPU's code; the Pallas kernels not interpreted),
    for a compile ahead of time for a TPU topology from another machine."""
    if not on:
        yield
        return
    saved = jax.default_backend, composite_pallas.INTERPRET
    jax.default_backend = lambda: "tpu"
    composite_pallas.INTERPRET = False
    try:
        yield
    finally:
        jax.default_backend, composite_pallas.INTERPRET = saved


def abstract_inputs(method, sizes, device):
    """ShapeDtypeStructs of a scene of `method`'s parameters and a camera, at `sizes`."""
    n, _, w, h = sizes
    small = verify.scene(method, "large", 8, seed=0)
    sharding = None if device is None else jax.sharding.SingleDeviceSharding(device)

    def struct(shape, dtype):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)

    params = {k: struct((n, *np.shape(v)[1:]), jnp.float32) for k, v in small.items()}
    cam = look_at(np.array([3.0, 0.0, 1.0]), [0, 0, 0], [0, 0, 1], w, h, 60.0, dtype=np.float32)
    cam = jax.tree_util.tree_map(lambda a: struct(np.shape(a), jnp.asarray(a).dtype), cam)
    return params, cam


def compile_times(method, sizes, compositor: str, device, stages: bool = False) -> dict:
    """{forward, gradient: {lower_s, compile_s}} of the public render, compiled cold; with
    `stages` also its prefixes: the projection alone and projection + binning + sort (the
    forward's rest is compositing)."""
    config = RenderConfig(max_entries=sizes[1], compositor=compositor)
    args = abstract_inputs(method, sizes, device)
    fns = dict(zip(("forward", "gradient"), public_render(method, config), strict=True))
    if stages:
        grid = TileGrid(sizes[2], sizes[3], config.tile_size)
        prefixes = zip(
            ("project", "project+bin+sort"), stage_fns(method, config, grid), strict=True
        )
        fns = {**dict(prefixes), **fns}
    row = {}
    with lowered_for_tpu(device is not None):
        for label, fn in fns.items():
            t0 = time.perf_counter()
            lowered = fn.lower(*args)
            t1 = time.perf_counter()
            lowered.compile()
            t2 = time.perf_counter()
            row[label] = {"lower_s": round(t1 - t0, 2), "compile_s": round(t2 - t1, 2)}
            print(f"{compositor} {label}: trace+lower {t1 - t0:.1f} s, compile {t2 - t1:.1f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
    return row


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", default="3dgs", help="comma list of shipped specs")
    ap.add_argument("--compositors", default="pallas", help="comma list: pallas, xla")
    ap.add_argument("--tpu", action="store_true", help="compile for a TPU v5e (needs libtpu)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    ap.add_argument("--stages", action="store_true",
                    help="also the projection and projection + binning + sort alone")  # fmt: skip
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "compile_aot.json"))
    args = ap.parse_args(argv)
    jax.config.update("jax_enable_compilation_cache", False)  # cold: the persistent cache off
    device = None
    if args.tpu:
        device, why = tpu_device()
        if device is None:
            sys.exit(f"compile_aot: cannot compile for a TPU v5e here ({why}); install the "
                     "libtpu package, or run without --tpu")  # fmt: skip
    compositors = args.compositors.split(",")
    if not args.tpu and "pallas" in compositors:
        compositors = [c for c in compositors if c != "pallas"] or ["xla"]
        print("compile_aot: the Pallas kernels compile only for a TPU (--tpu); timing the XLA "
              "compositor", file=sys.stderr)  # fmt: skip
    sizes = QUICK if args.quick else GARDEN
    rows = []
    for name in args.specs.split(","):
        if name not in SPECS:
            sys.exit(f"compile_aot: unknown spec {name!r} (one of {', '.join(SPECS)})")
        method = load(ROOT / SPECS[name])
        for compositor in compositors:
            times = compile_times(method, sizes, compositor, device, args.stages)
            rows.append({"spec": name, "compositor": compositor, **times})
    results = {"machine": machine(), "load_average": load_average(),
               "target": "tpu v5e (compiled ahead of time here)" if args.tpu else "this backend",
               "sizes": dict(zip(("primitives", "entries", "width", "height"), sizes, strict=True)),
               "rows": rows}  # fmt: skip
    functions = [k for k in rows[0] if k not in ("spec", "compositor")]
    print(fmt_table(rows, [
        ("spec", lambda r: r["spec"]), ("compositor", lambda r: r["compositor"]),
        *((f"{k}: trace+lower / compile s",
           lambda r, k=k: f"{r[k]['lower_s']:.1f} / {r[k]['compile_s']:.1f}") for k in functions),
    ]))  # fmt: skip
    write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
