"""Where the binning's time goes: its building blocks timed alone (issue 25).

    python benchmarks/binning.py            # garden workload, 3DGS, first camera
    python benchmarks/binning.py --quick    # a small random scene (smoke run)

On the garden frame (a random scene of its size without it): `bin_and_sort` with and without
the ellipse test, and the operations it and the compositors' inputs are made of, each at the
sizes the render uses: the depth argsort of N primitives, row and one-column gathers of the
entry capacity, the key sort with and without the primitive carried, the per-tile demand's
scatters (run only when a render overflows), the first slots, the slot owners, the tile
bounds; the Pallas kernels' row gather of the sorted entries and its transpose in the backward
(a scatter-add over every entry), and the XLA path's `layout` and lane gather. Which of them is
cheap differs by backend (on a TPU a 1D gather of the capacity costs more than a row gather, on
a CPU a two-operand sort costs ~7x a one-key sort), so measure on the machine in question.
Prints a markdown table and writes benchmarks/results/binning.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run import SPECS, fmt_table, machine, workload, write_json  # noqa: E402
from benchmarks.stages import timed  # noqa: E402
from xprc.camera import Camera  # noqa: E402
from xprc.compiler.driver import load  # noqa: E402
from xprc.data.workloads import adapt_params  # noqa: E402
from xprc.pipeline import RenderConfig, sized_config  # noqa: E402
from xprc.pipeline import capacity as cap  # noqa: E402
from xprc.pipeline.binning import (  # noqa: E402
    TileGrid,
    bin_and_sort,
    id_bounds,
    saturating_cumsum,
    slot_owners,
    tile_demand,
    tile_rects,
)
from xprc.pipeline.composite_scan import gather, layout  # noqa: E402
from xprc.pipeline.params import prepare_params  # noqa: E402


def pieces(proj, valid, grid: TileGrid, config: RenderConfig):
    """(name, jitted function, arguments) of each piece, on this frame's arrays."""
    capacity = config.max_entries
    box, depth = proj["box"], proj["depth"].astype(proj["attrs"].dtype)
    ell, cen = proj["ellipse"], proj["centre"]
    n = box.shape[0]

    def binned(b, v, d, e, c, carry=None):
        return bin_and_sort(b, v, d, grid, capacity, e, c, carry)

    bins = jax.jit(binned)(box, valid, depth, ell, cen)
    lay = jax.jit(lambda b: layout(b, grid, config))(bins)
    slots = jnp.minimum(jnp.arange(capacity, dtype=jnp.int32) * 7 % n, n - 1)
    table = jnp.zeros((n, 11), jnp.int32) + jnp.arange(11, dtype=jnp.int32)[None, :]
    key = (jnp.arange(capacity, dtype=jnp.uint32) * 7919) % jnp.uint32(capacity * 2)
    lanes = jnp.concatenate([proj["attrs"], jnp.ones((n, 4), proj["attrs"].dtype)], axis=-1)
    rects = jax.jit(lambda b, v: tile_rects(b, v, grid))(box, valid)

    def demand(x0, y0, w, h, count):
        return tile_demand(x0, y0, w, h, grid)

    def owners(count):
        return slot_owners(count, jnp.cumsum(count) - count, capacity)

    def bounds(tile):
        return id_bounds(tile, 2 * grid.num_tiles + 2)

    return [
        ("bin_and_sort, ellipse test", jax.jit(binned), (box, valid, depth, ell, cen)),
        ("bin_and_sort, rectangles", jax.jit(binned), (box, valid, depth, None, None)),
        ("  depth argsort [N]", jax.jit(lambda d: jnp.argsort(d, stable=True)), (depth,)),
        ("  row gather [capacity, 11] int32", jax.jit(lambda t, i: t[i]), (table, slots)),
        ("  1D gather [capacity] int32", jax.jit(lambda t, i: t[:, 0][i]), (table, slots)),
        ("  key sort [capacity]", jax.jit(jax.lax.sort), (key,)),
        ("  key sort carrying the primitive", jax.jit(
            lambda k, p: jax.lax.sort((k, p), num_keys=1)), (key, slots)),  # fmt: skip
        ("  tile demand by scatter-adds (overflow only)", jax.jit(demand), rects),
        ("  first slots: cumsum [N] (N x tiles < 2^31)", jax.jit(jnp.cumsum), (rects[4],)),
        ("  first slots: saturating cumsum [N] (else)", jax.jit(saturating_cumsum), (rects[4],)),
        ("  slot owners: unique write + cummax", jax.jit(owners), (rects[4],)),
        ("  tile bounds: searchsorted [2T + 2]", jax.jit(bounds), (bins.tile,)),
        ("Pallas lanes: row gather of the sorted entries", jax.jit(lambda t, p: t[p]),
         (lanes, bins.prim)),  # fmt: skip
        ("Pallas lanes' backward: scatter-add of their cotangents", jax.jit(
            lambda c, p: jnp.zeros((n, c.shape[1]), c.dtype).at[p].add(c)),
         (table[bins.prim].astype(lanes.dtype), bins.prim)),  # fmt: skip
        ("XLA path: layout (chunks padded per tile)", jax.jit(lambda b: layout(b, grid, config)),
         (bins,)),  # fmt: skip
        ("XLA path: lane gather (attributes per lane)", jax.jit(gather), (lanes, lay)),
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="a small random scene (smoke run)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "binning.json"))
    args = ap.parse_args(argv)
    num, scale = (800, 0.2) if args.quick else (None, 1.0)
    params, cams, source = workload(num, scale, args.quick)
    method = load(ROOT / SPECS["3dgs"])
    params = {k: jnp.asarray(v) for k, v in adapt_params(method, params).items()}
    params = prepare_params(method, params)
    config = RenderConfig(on_overflow="ignore")
    config = sized_config(method, params, Camera.stack(cams[:1]), config)
    cam = cams[0]
    grid = TileGrid(cam.width, cam.height, config.tile_size)
    proj = jax.jit(method.project)(params, cam)
    valid = jax.jit(cap.usable)(proj)[1]
    rows = []
    for name, fn, fargs in pieces(proj, valid, grid, config):
        rows.append({"piece": name, "ms": timed(fn, *fargs, repeat=args.repeat) * 1e3})
        print(f"[done] {name}: {rows[-1]['ms']:.2f} ms", file=sys.stderr, flush=True)
    results = {"machine": machine(),
               "workload": source, "primitives": int(proj["box"].shape[0]),
               "entry_capacity": config.max_entries, "tiles": grid.num_tiles,
               "rows": rows}  # fmt: skip
    print(f"\n## Binning pieces on the {source} workload ({results['primitives']:,} primitives, "
          f"capacity {config.max_entries:,}, {grid.num_tiles:,} tiles, "
          f"{jax.default_backend()})\n")  # fmt: skip
    print(fmt_table(rows, [("piece", lambda r: r["piece"]), ("ms", lambda r: f"{r['ms']:.2f}")]))
    return write_json(args.out, results)


if __name__ == "__main__":
    main()
