"""Gathers at the sizes of one 1M-primitive view, as rows and as columns (issue 39).

    python benchmarks/gather_layout.py                  # E = 5,242,880 entries, N = 1,000,000
    python benchmarks/gather_layout.py --quick          # small sizes (a smoke run, CPU)

The runs transpose (xprc/pipeline/gather.py) moves the backward's E x L cotangents back to slot
order and reads each primitive's run end. On a TPU XLA keeps a gather's source in VMEM when it
fits there: the lanes table of 1M primitives (N x L float32) does, the E x L cotangents do not,
and one column of them does. This times, on random indices: the permutation as a row gather
(`g[inv].T`, as shipped before the sixteenth session) and column by column (what
`gather.take_columns` does with a source of more than WHOLE_SOURCE_BYTES), the run ends both
ways, and the forward's lanes gather `table[prim]` from N rows both ways, with the inverse
permutation's sort for scale. Each variant's result is checked
equal to the row gather's. Prints a table and writes benchmarks/results/gather_layout.json.
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
from xprc.pipeline.gather import WHOLE_SOURCE_BYTES, inverse_permutation  # noqa: E402


def by_column(x, index):
    """x[:, index] one column at a time: what `gather.take_columns` does for a source of more
    than WHOLE_SOURCE_BYTES (here at any size)."""
    return jax.lax.map(lambda column: column[index], x)


def timed(fn, args, repeat: int):
    """(result, first call's seconds, median ms of `repeat` calls) of a jitted fn."""
    fn = jax.jit(fn)
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return out, first, 1e3 * sorted(times)[len(times) // 2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=5_242_880)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--columns", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="E = 52,480, N = 10,000")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gather_layout.json"))
    args = ap.parse_args(argv)
    e, n, cols = (52_480, 10_000, args.columns) if args.quick else (args.entries, args.rows,
                                                                     args.columns)  # fmt: skip
    key = jax.random.PRNGKey(0)
    slot = jax.random.permutation(key, e).astype(jnp.int32)
    g = jax.random.normal(jax.random.PRNGKey(1), (e, cols), jnp.float32)
    inv = inverse_permutation(slot)
    ends = jnp.sort(jax.random.choice(key, e, (n,), replace=False)).astype(jnp.int32)
    table = jax.random.normal(jax.random.PRNGKey(2), (n, cols), jnp.float32)
    prim = jax.random.randint(key, (e,), 0, n, dtype=jnp.int32)
    cases = [
        ("permutation", "rows: g[inv].T", lambda g, i: g[i].T, (g, inv)),
        ("permutation", "columns: by_column(g.T, inv)", lambda g, i: by_column(g.T, i),
         (g, inv)),
        ("run ends", "rows: x.T[ends]", lambda x, i: x.T[i], (g.T, ends)),
        ("run ends", "columns: by_column(x, ends).T", lambda x, i: by_column(x, i).T,
         (g.T, ends)),
        ("lanes", "rows: table[prim] (N-row source)", lambda t, i: t[i], (table, prim)),
        ("lanes", "columns: by_column(table.T, prim).T", lambda t, i: by_column(t.T, i).T,
         (table, prim)),
        ("sort", "inverse_permutation(slot)", inverse_permutation, (slot,)),
    ]  # fmt: skip
    results = {"machine": machine(), "entries": e, "rows": n, "columns": cols,
               "whole_source_bytes": WHOLE_SOURCE_BYTES, "cases": []}  # fmt: skip
    first_of = {}
    for what, how, fn, fn_args in cases:
        out, first, ms = timed(fn, fn_args, args.repeat)
        same = jnp.array_equal(out, first_of.setdefault(what, out))
        same = None if what == "sort" else bool(same)
        row = {"what": what, "how": how, "ms": round(ms, 3), "first_call_s": round(first, 2),
               "equal_to_rows": same}  # fmt: skip
        results["cases"].append(row)
        print(f"{what}: {how}: {ms:.2f} ms (equal: {same})", file=sys.stderr, flush=True)
        write_json(args.out, results, "(so far) ")
    print(f"\n## Gathers as rows and as columns ({e:,} entries, {n:,} rows, {cols} columns; "
          f"{results['machine']['backend']})\n")  # fmt: skip
    print(fmt_table(results["cases"], [
        ("gather", lambda r: r["what"]),
        ("as", lambda r: r["how"]),
        ("ms", lambda r: f"{r['ms']:.2f}"),
        ("same values", lambda r: {True: "yes", False: "NO", None: "-"}[r["equal_to_rows"]]),
    ]))  # fmt: skip
    if any(r["equal_to_rows"] is False for r in results["cases"]):
        raise SystemExit("a column gather differs from the row gather")
    return results


if __name__ == "__main__":
    main()
