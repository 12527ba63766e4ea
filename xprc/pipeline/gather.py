"""The compositors' row gather (`table[index]`: one row per entry) and three ways to transpose it.

The gradient of a row gather is a scatter-add of the entries' cotangents into their rows. On a
TPU v5e XLA's scatter-add of 5,242,880 rows of 8 float32 into 1,000,000 rows took 446 ms, most
of a 1M-primitive backward (docs/dev/tpu-log.md, 2026-12-07), while a sort of the same
number of int32 keys took 12 ms and a gather of the rows 27 ms. `transpose_sorted` gives the
same sums without a scatter: the entries sorted by row, a segmented inclusive scan (each sum
only within its row's run, so no cancellation against other rows), and each row read at its
run's last entry, found by sorting the queries into the sorted rows.

`transpose_runs` needs no search at all: the binning emits each primitive's entries as one run of
slots before its sort (`binning.Runs`), so the cotangents go back to that order (one row gather
by the sort's inverse permutation), each run is summed in place by doubling (x[i] += x[i - 2^k]
while i - 2^k is in i's run: ceil(log2 T) steps over lane-dense columns, T tiles, as no run is
longer than the grid) and read at its end. Sums in a tree order, not a sequence.

`TRANSPOSE` picks the transpose `take_rows` uses: "runs" (the default: where the caller passes
the binning's runs, that is the Pallas compositor; elsewhere XLA's scatter-add), "scatter" or
"sorted". On a TPU v5e (3DGS, forward + backward of `jax.jit(xprc.render)`, one run each): the
garden frame 27.0 ms with the scatter-add, 24.3 with the runs; one 1296x840 view of 1M
primitives (5,242,880 entries) 655.7 against 472.8 ms; the sorted transpose there did not finish
compiling in three minutes (docs/dev/tpu-log.md).
It is read when a render is traced and is in no cache key: set it before the first render of
a process (the benchmarks' --transpose does). `benchmarks/gather_transpose.py` times them through
the renderer (and the scatter-add against the sorted one alone). "sorted" and "runs" are
reverse-mode only (custom VJPs: no jvp through them).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

TRANSPOSES = ("scatter", "sorted", "runs")
TRANSPOSE = "runs"
# "runs" up to this many entries per view, the scatter-add beyond: the 3M-primitive training step
# (16,777,216 entries) compiled for a TPU v5e from the CPU takes 15.75 GB by XLA's accounting with
# the runs (10.89 of temporaries) against 13.59 with the scatter-add, and the chip has 15.75; only
# the latter was run there (docs/dev/tpu-log.md).
RUNS_MAX_ENTRIES = 2**23
# `take_columns` gathers a source of more bytes one column at a time (half what XLA placed in a
# v5e's VMEM whole: 64 MiB as tiled; other arrays share it in a large program)
WHOLE_SOURCE_BYTES = 32 * 2**20


def wants_runs(capacity: int) -> bool:
    """Whether a render of `capacity` entries per view should carry the binning's runs (when its
    compositor is the Pallas one): TRANSPOSE is "runs" and the capacity at most RUNS_MAX_ENTRIES."""
    return TRANSPOSE == "runs" and capacity <= RUNS_MAX_ENTRIES


def take_rows(table: jax.Array, index: jax.Array, transpose: str | None = None, *,
              runs=None, live: jax.Array | None = None, steps: int = 0) -> jax.Array:  # fmt: skip
    """table[index] for table [N, ...] and int32 index [...] in [0, N); its gradient with
    respect to `table` by `transpose` ("scatter", "sorted" or "runs"; None: the module's
    TRANSPOSE). "runs" needs `runs` (binning.Runs of the sorted entries that index [...] flat
    starts with), `live` [...] (the entries whose cotangent counts: the others' are dropped)
    and `steps` >= 1 (ceil(log2) of the longest run); without runs it is the scatter-add."""
    how = TRANSPOSE if transpose is None else transpose
    if how not in TRANSPOSES:
        raise ValueError(f"transpose must be one of {TRANSPOSES}, not {how!r}")
    if how == "scatter" or (how == "runs" and runs is None):
        return table[index]
    if how == "runs":
        if live is None or steps < 1:
            raise ValueError("take_rows: the runs transpose needs `live` and `steps` >= 1")
        return _take_runs(tuple(table.shape), steps, table, index, live, runs)
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


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _take_runs(shape, steps, table, index, live, runs):
    return table[index]


def _take_runs_fwd(shape, steps, table, index, live, runs):
    return table[index], (live, runs)


def _take_runs_bwd(shape, steps, residuals, g):
    live, runs = residuals
    flat = g.reshape((live.size, math.prod(shape[1:])))
    flat = jnp.where(live.reshape(-1)[:, None], flat, 0)[: runs.slot.shape[0]]
    rows = transpose_runs(flat, runs, steps)
    return rows.reshape(shape), None, None, None


_take_runs.defvjp(_take_runs_fwd, _take_runs_bwd)


def inverse_permutation(perm: jax.Array) -> jax.Array:
    """inv with inv[perm[i]] = i, by a sort (on a TPU a scatter of millions of indices costs
    hundreds of milliseconds: docs/dev/tpu-log.md)."""
    iota = jnp.arange(perm.shape[0], dtype=jnp.int32)
    return jax.lax.sort((perm.astype(jnp.int32), iota), num_keys=1)[1]


def take_columns(x: jax.Array, index: jax.Array, by_column: bool | None = None) -> jax.Array:
    """x[:, index] for columns x [L, M] and int32 index [K] in [0, M): [L, K]. `by_column`
    (None: when the source is larger than `WHOLE_SOURCE_BYTES`) gathers one column at a time
    (`lax.map`), else as rows. On a TPU a gather reads its source from VMEM when the source
    fits there and from HBM otherwise. Compiled for a v5e, a source [M, 10] float32 sat in VMEM
    up to M = 1,048,576 and not from 2,097,152 on; the 5,242,880 x 10 cotangents of one
    1M-primitive view were gathered from HBM at 2.3 ns an element, while each of their columns
    alone (21 MB) goes to VMEM, where the 1M-row lanes table's gather took 0.6 ns an element
    (docs/dev/tpu-log.md, sixteenth session). The same values either way."""
    columns, m = x.shape
    if by_column is None:  # the source's bytes as a TPU tiles it
        by_column = -(-columns // 8) * 8 * m * x.dtype.itemsize > WHOLE_SOURCE_BYTES
    if not by_column:
        return x.T[index].T
    return jax.lax.map(lambda column: column[index], x)


def transpose_runs(g: jax.Array, runs, steps: int) -> jax.Array:
    """[N, L]: per primitive the sum of g [E, L] over its sorted entries (`runs`:
    binning.Runs, N = runs.order.size); `steps` >= ceil(log2) of the longest run. A run holds
    every slot of the primitive's rectangle, culled ones included: g must be zero at sorted
    entries that are not kept (culled, empty, past the capacity's kept entries)."""
    e = runs.slot.shape[0]
    x = take_columns(g.T, inverse_permutation(runs.slot))  # [L, E]: slots in their order
    for k in range(steps):
        s = 2**k
        if s >= e:
            break
        shifted = jnp.pad(x[:, :-s], ((0, 0), (s, 0)))
        x = x + jnp.where((runs.back >= s)[None, :], shifted, 0)
    end = jnp.minimum(runs.first + runs.count, e) - 1
    has = (runs.count > 0) & (runs.first < e)
    sums = jnp.where(has[:, None], take_columns(x, jnp.clip(end, 0, e - 1)).T, 0)  # [N, L]
    return sums[inverse_permutation(runs.order)]


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
