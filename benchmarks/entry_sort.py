"""The binning's sorts at full scale, each way XLA can be asked for them (issue 39: steps/s).

    python benchmarks/entry_sort.py                      # one 1296x840 view at 1M primitives
    python benchmarks/entry_sort.py --entries 458752 --prims 111785 --tiles 1066

At 1M primitives the entry sort cannot use one unique 32-bit key (sort ids x capacity passes
2^32), so `xprc/pipeline/binning.py` sorts (id, primitive, slot) stably. Timed here, on random
ids of the render's range (a sort's cost does not depend on the values much), each alone: the
stable three-operand sort the binning uses at this size, the stable sort without the slot (what
it costs when the backward needs no runs), an unstable sort on two keys (id, slot), the one
unique uint32 key with the primitive (the small-scene path, whose key would overflow here: its
time only), and the depth sort over the primitives. Compile seconds and median run ms of each;
prints a table and writes benchmarks/results/entry_sort.json as each row is measured.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run import fmt_table, machine, write_json  # noqa: E402
from benchmarks.stages import timed  # noqa: E402


def variants(entries: int, prims: int, tiles: int):
    """(name, function, operands) of each sort."""
    ids = 2 * tiles + 2  # kept, empty and culled ids, as the binning sorts them
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    tile = jax.random.randint(k[0], (entries,), 0, ids, dtype=jnp.int32)
    prim = jax.random.randint(k[1], (entries,), 0, prims, dtype=jnp.int32)
    slot = jnp.arange(entries, dtype=jnp.int32)
    key = tile.astype(jnp.uint32) * jnp.uint32(entries) + slot.astype(jnp.uint32)  # wraps here
    depth = jax.random.uniform(k[2], (prims,), jnp.float32)
    index = jnp.arange(prims, dtype=jnp.int32)
    count = jax.random.randint(k[3], (prims,), 0, 9, dtype=jnp.int32)

    def sort(num_keys, stable=False):
        return jax.jit(lambda *ops: jax.lax.sort(ops, num_keys=num_keys, is_stable=stable))

    return [
        ("stable (id, prim, slot) [binning at scale]", sort(1, True), (tile, prim, slot)),
        ("stable (id, prim)", sort(1, True), (tile, prim)),
        ("two keys (id, slot), prim", sort(2), (tile, slot, prim)),
        ("one uint32 key, prim [small scenes]", sort(1), (key, prim)),
        ("one uint32 key alone", sort(1), (key,)),
        ("depth: stable (depth, index, count) [N]", sort(1, True), (depth, index, count)),
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=5_242_880, help="entry capacity of a view")
    ap.add_argument("--prims", type=int, default=1_000_000)
    ap.add_argument("--tiles", type=int, default=81 * 53, help="16x16 tiles of the image")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "entry_sort.json"))
    args = ap.parse_args(argv)
    jax.config.update("jax_enable_compilation_cache", False)  # every compile cold, every run
    result = {"machine": machine(), "args": vars(args), "rows": []}
    for name, fn, ops in variants(args.entries, args.prims, args.tiles):
        t0 = time.perf_counter()
        fn.lower(*ops).compile()
        compile_s = time.perf_counter() - t0
        ms = timed(fn, *ops, repeat=args.repeat) * 1e3
        row = {"sort": name, "compile_s": round(compile_s, 1), "ms": round(ms, 3)}
        result["rows"].append(row)
        print(row, file=sys.stderr, flush=True)
        write_json(args.out, result, f"({name}) ")
    cols = [("sort", lambda r: r["sort"]), ("compile s", lambda r: f"{r['compile_s']:.1f}"),
            ("ms", lambda r: f"{r['ms']:.2f}")]  # fmt: skip
    print(fmt_table(result["rows"], cols))
    return result


if __name__ == "__main__":
    main()
