"""The compositors' row gather (`table[index]`: one row per entry) and two ways to transpose it.

The gradient of a row gather is a scatter-add of the entries' cotangents into their rows. On a
TPU v5e XLA's scatter-add of 5,242,880 rows of 8 float32 into 1,000,000 rows took 446 ms, nearly
all of a 1M-primitive backward (docs/dev/tpu-log.md, 2026-12-07), while a sort of the same
number of int32 keys took 12 ms and a gather of the rows 27 ms. `transpose_sorted` gives the
same sums without a scatter: the entries sorted by row, a segmented inclusive scan (each sum
only within its row's run, so no cancellation against other rows), and each row read at its
run's last entry, found by sorting the queries into the sorted rows.

`TRANSPOSE` picks the transpose `take_rows` uses: "scatter" (XLA's, the default) or "sorted".
It is read when a render is traced and is in no cache key: set it before the first render of
a process (the benchmarks' --transpose does). Which is faster where is not yet measured on a TPU
beyond the microbenchmark above: `benchmarks/gather_transpose.py` times both through the
renderer and alone. The sorted one is reverse-mode only (a custom VJP: no jvp through it).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

TRANSPOSES = ("scatter", "sorted")
TRANSPOSE = "scatter"


def take_rows(table: jax.Array, index: jax.Array, transpose: str | None = None) -> jax.Array:
    """table[index] for table [N, ...] and int32 index [...] in [0, N); its gradient with
    respect to `table` by `transpose` ("scatter" or "sorted"; None: the module's TRANSPOSE)."""
    how = TRANSPOSE if transpose is None else transpose
    if how not in TRANSPOSES:
        raise ValueError(f"transpose must be one of {TRANSPOSES}, not {how!r}")
    if how == "scatter":
        return table[index]
    return _take_sorted(tuple(table.shape), table, index)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _take_sorted(shape, table, index):
    return table[index]


def _take_sorted_fwd(shape, table, index):
    return table[index], index  # the table's shape is static: nothing of it is kept


def _take_sorted_bwd(shape, index, g):
    flat = g.reshape((index.size, math.prod(shape[1:])))
    rows = transpose_sorted(flat, index.reshape(-1), shape[0])
    return rows.reshape(shape), None


_take_sorted.defvjp(_take_sorted_fwd, _take_sorted_bwd)


def transpose_sorted(g: jax.Array, index: jax.Array, n: int) -> jax.Array:
    """[n, L]: row r the sum of g[e] over entries e with index[e] == r (zero for a row with
    none); g [E, L], index [E] int32 in [0, n). Equal to a scatter-add up to the order of
    each row's additions."""
    e = index.shape[0]
    if max(2 * n + 1, e + n) > 2**31 - 1:  # the sort keys and positions of `last_of_runs`
        raise ValueError(f"transpose_sorted: {e:,} entries into {n:,} rows overflow int32")
    if e == 0:
        return jnp.zeros((n, g.shape[1]), g.dtype)
    iota = jnp.arange(e, dtype=jnp.int32)
    rows, perm = jax.lax.sort((index.astype(jnp.int32), iota), num_keys=1)
    runs = segmented_sums(g[perm], rows)
    last, present = last_of_runs(rows, n)
    return jnp.where(present[:, None], runs[last], 0)


def segmented_sums(values: jax.Array, rows: jax.Array) -> jax.Array:
    """Inclusive running sums [E, L] of `values` along runs of equal `rows` (sorted)."""
    starts = jnp.concatenate([jnp.ones((1,), bool), rows[1:] != rows[:-1]])

    def combine(a, b):
        start_a, sum_a = a
        start_b, sum_b = b
        return start_a | start_b, jnp.where(start_b[..., None], sum_b, sum_a + sum_b)

    return jax.lax.associative_scan(combine, (starts, values))[1]


def last_of_runs(rows: jax.Array, n: int):
    """For each row r < n: the position of its last entry in the sorted `rows` [E] (clipped
    to 0 where it has none) and whether it has one, [n] each. The queries r are sorted into
    the rows (keys 2 * row for entries, 2 * r + 1 for query r, so a query follows its row's
    entries); query r lands after r earlier queries, so its position minus r counts the entries
    up to and including row r. A second sort brings the queries back in order: no scatter."""
    e = rows.shape[0]
    query = jnp.arange(n, dtype=jnp.int32)
    keys = jnp.concatenate([2 * rows, 2 * query + 1])
    is_query = jnp.concatenate([jnp.zeros((e,), jnp.int32), jnp.ones((n,), jnp.int32)])
    _, is_query = jax.lax.sort((keys, is_query), num_keys=1)
    position = jnp.arange(e + n, dtype=jnp.int32)
    _, position = jax.lax.sort((1 - is_query, position), num_keys=1, is_stable=True)
    upto = position[:n] - query  # entries with row <= r
    before = jnp.concatenate([jnp.zeros((1,), jnp.int32), upto[:-1]])
    return jnp.maximum(upto - 1, 0), upto > before
