"""Per-primitive rows read by the sorted entries, and their gradient summed run by run.

The Pallas compositor reads each sorted entry's row of its primitive, `table[prim]` [E, C]. Its
transpose, the gradient, adds the entries' rows back into their primitives: as autodiff writes
it, a scatter-add of E rows at random primitives, 5.8 ms of a garden frame's 3DGS gradient on a
TPU v5e (docs/tpu.md), the largest operation after the kernels.

Before the binning's sort, though, each primitive's entries are one run of slots (`Runs`). So
the gradient here puts the entries' rows back in that order (one row gather by the inverse of
the sort's permutation), sums each run in place by doubling (x[i] += x[i - 2^k] while i - 2^k is
in i's run: ceil(log2(T)) steps over lane-dense columns, T tiles, as no run is longer than the
grid), and reads each run's sum at its end. The result is the scatter-add's, summed in another
order (a tree, not a sequence: at least as accurate). Slots that are not entries of a tile
(culled, empty, past the kept ones) read any row and get no gradient: the kernels mask them.

On a CPU the scatter-add is the faster of the two, so `BY_RUNS` (None: on a TPU only) picks.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .binning import Runs, spread

BY_RUNS = None  # None: sum the gradient by runs on a TPU, by a scatter-add elsewhere


def entry_rows(table: jax.Array, prim: jax.Array, live: jax.Array, runs: Runs | None,
               num_tiles: int) -> jax.Array:  # fmt: skip
    """table [N, C] -> [E, C]: row `prim[i]` for each sorted entry i where `live`, any row
    elsewhere (distinct ones: `spread`); the gradient of the other rows is taken as zero."""
    index = spread(prim, live, table.shape[0])
    by_runs = jax.default_backend() == "tpu" if BY_RUNS is None else BY_RUNS
    if not by_runs or runs is None:
        return table[index]
    steps = max(1, int(np.ceil(np.log2(max(num_tiles, 2)))))
    return _rows(steps, table, index, live, runs)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _rows(steps, table, index, live, runs):
    return table[index]


def _rows_fwd(steps, table, index, live, runs):
    return table[index], (live, runs)


def _rows_bwd(steps, residuals, g):
    live, runs = residuals
    num = runs.order.shape[0]
    capacity = runs.slot.shape[0]
    g = jnp.where(live[:, None], g, 0)
    before = jnp.zeros((capacity,), jnp.int32).at[runs.slot].set(
        jnp.arange(capacity, dtype=jnp.int32), unique_indices=True
    )  # sorted position of each slot
    x = g[before].T  # [C, E], slots in their order before the sort
    for k in range(steps):
        s = 2**k
        if s >= capacity:
            break
        shifted = jnp.pad(x[:, :-s], ((0, 0), (s, 0)))
        x = x + jnp.where((runs.back >= s)[None, :], shifted, 0)
    end = jnp.minimum(runs.first + runs.count, capacity) - 1
    has = (runs.count > 0) & (runs.first < capacity)
    sums = jnp.where(has[:, None], x.T[jnp.clip(end, 0, capacity - 1)], 0)  # [N, C] by rank
    rank = jnp.zeros((num,), jnp.int32).at[runs.order].set(
        jnp.arange(num, dtype=jnp.int32), unique_indices=True
    )
    return sums[rank], None, None, None


_rows.defvjp(_rows_fwd, _rows_bwd)
