"""The row gather's transpose (the backward's scatter-add) against the sorted transpose.

    python benchmarks/gather_transpose.py                       # the 1M-primitive sizes
    python benchmarks/gather_transpose.py --entries 400000 --rows 100000 --render

`alone`: for E entries of L float32 columns into N rows (defaults: one 1296x840 view of the
generated capture at 1M primitives, 5,242,880 entries), the median time of the gather
(`table[index]`), XLA's scatter-add (`zeros.at[index].add`), and `transpose_sorted` (sort,
segmented scan, a gather at each row's last entry; xprc/pipeline/gather.py), on uniformly random
indices, and the largest difference between the two sums. `--render`: the renderer's forward +
backward (benchmarks/stages.py --totals-only) with each transpose, each in a process of its own
(the transpose is read when a render is traced). Prints a table and writes
benchmarks/results/gather_transpose.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run import fmt_table, machine, write_json  # noqa: E402
from benchmarks.stages import timed  # noqa: E402
from xprc.pipeline.gather import TRANSPOSES, transpose_sorted  # noqa: E402


def alone(entries: int, rows: int, columns: int, repeat: int) -> dict:
    key = jax.random.PRNGKey(0)
    index = jax.random.randint(key, (entries,), 0, rows, dtype=jnp.int32)
    g = jax.random.normal(jax.random.PRNGKey(1), (entries, columns), jnp.float32)
    table = jax.random.normal(jax.random.PRNGKey(2), (rows, columns), jnp.float32)
    gather = jax.jit(lambda t, i: t[i])
    scatter = jax.jit(lambda g, i: jnp.zeros((rows, columns), g.dtype).at[i].add(g))
    ordered = jax.jit(lambda g, i: transpose_sorted(g, i, rows))
    diff = float(jnp.max(jnp.abs(scatter(g, index) - ordered(g, index))))
    scale = float(jnp.max(jnp.abs(scatter(g, index))))
    return {
        "entries": entries, "rows": rows, "columns": columns,
        "gather_ms": timed(gather, table, index, repeat=repeat) * 1e3,
        "scatter_add_ms": timed(scatter, g, index, repeat=repeat) * 1e3,
        "sorted_ms": timed(ordered, g, index, repeat=repeat) * 1e3,
        "max_abs_difference": diff, "max_abs_sum": scale,
    }  # fmt: skip


def render(methods: str, repeat: int) -> list[dict]:
    """benchmarks/stages.py --totals-only once per transpose, each in its own process."""
    rows = []
    for how in TRANSPOSES:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "stages.json"
            cmd = [sys.executable, str(ROOT / "benchmarks" / "stages.py"), "--methods", methods,
                   "--totals-only", "--dense", "none", "--repeat", str(repeat),
                   "--transpose", how, "--out", str(out)]  # fmt: skip
            subprocess.run(cmd, check=True)
            for row in json.loads(out.read_text())["rows"]:
                rows.append({
                    "transpose": how, "method": row["method"], "compositor": row["compositor"],
                    "forward_ms": row["forward_s"] * 1e3, "fwd_bwd_ms": row["fwd_bwd_s"] * 1e3,
                    "compile_grad_s": row["compile_grad_s"],
                })  # fmt: skip
    return rows


def table(rows: list[dict]) -> str:
    def cell(key):
        return lambda r: f"{r[key]:.3g}" if isinstance(r[key], float) else str(r[key])

    return fmt_table(rows, [(key, cell(key)) for key in rows[0]])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=5_242_880)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--columns", default="8,16")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--render", action="store_true", help="also the renderer's fwd+bwd")
    ap.add_argument("--methods", default="3dgs")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gather_transpose.json"))
    args = ap.parse_args(argv)
    results = {"machine": machine(), "args": vars(args), "alone": []}
    for c in (int(v) for v in args.columns.split(",")):
        results["alone"].append(alone(args.entries, args.rows, c, args.repeat))
        write_json(args.out, results)
    print(table(results["alone"]))
    if args.render:
        results["render"] = render(args.methods, args.repeat)
        write_json(args.out, results)
        print(table(results["render"]))
    return results


if __name__ == "__main__":
    main()
