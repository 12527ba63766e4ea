"""Rows [E, C] with few columns as columns [C, E], physically moved on a TPU.

A TPU lays an array [E, C] out with C on the 128 vector lanes, each row padded to 128, and
XLA keeps a transpose of it as a change of layout over the same bytes; reading the columns
of the binning's per-slot rows one by one cost 4.2 ms of a garden frame's 12.7 ms forward
(profiled on a TPU v5e: docs/tpu.md). A small Pallas kernel moves each block of rows into
lane-dense columns instead. Elsewhere (CPU, GPU) it is a plain transpose.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from .gather import take_columns

BLOCK = 1024  # rows per grid program
LANES = 128
# entries up to which `gather_columns` moves gathered rows by the kernel on a TPU (more: column
# by column)
KERNEL_ROWS = 1 << 20


def rows_to_columns(rows: jax.Array, use_kernel: bool | None = None, interpret: bool | None = None):
    """rows [E, C] -> [C, E]. use_kernel: the Pallas kernel (None: on a TPU, for 32-bit rows of
    at most 128 columns); interpret: Pallas's interpret mode (None: off a TPU)."""
    if use_kernel is None:
        use_kernel = jax.default_backend() == "tpu"
    e, c = rows.shape
    if not use_kernel or rows.dtype.itemsize != 4 or c > LANES or e == 0:
        return rows.T
    if interpret is None:
        interpret = jax.default_backend() != "tpu"
    pad = -e % BLOCK
    if pad:
        rows = jnp.concatenate([rows, jnp.zeros((pad, c), rows.dtype)])
    out_rows = -(-c // 8) * 8  # whole sublane tiles
    out = pl.pallas_call(
        functools.partial(_kernel, out_rows),
        grid=(rows.shape[0] // BLOCK,),
        in_specs=[pl.BlockSpec((BLOCK, c), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((out_rows, BLOCK), lambda i: (0, i)),
        out_shape=jax.ShapeDtypeStruct((out_rows, rows.shape[0]), rows.dtype),
        interpret=interpret,
    )(rows)
    return out[:c, :e]


def _kernel(out_rows: int, rows_ref, out_ref):
    x = rows_ref[...]  # [BLOCK, C]: padded to the full lane width, transposed as one tile
    x = jnp.concatenate([x, jnp.zeros((x.shape[0], LANES - x.shape[1]), x.dtype)], axis=1)
    out_ref[...] = x.T[:out_rows]


def gather_columns(table, index, use_kernel=None, interpret=None, kernel_rows: int = KERNEL_ROWS):
    """table[index] as columns [C, E]; table [N, C], index [E] int32 in [0, N).

    With the kernel (a TPU) and at most `kernel_rows` entries: `rows_to_columns(table[index])`,
    the rows gathered and moved into columns by the kernel. More entries are gathered one
    column at a time (`gather.take_columns`), straight into lane-dense columns: the rows [E, C]
    the kernel moves take E x 512 bytes (each padded to 128 lanes), 8 GiB at 16,777,216 entries,
    which the 3M-primitive training step could not hold, and at a million primitives the row
    gather came out column-major, copied to rows for the kernel and back to columns by it (9.4
    of the 42.9 ms of the binning's gathers in the 1M view's profile: docs/dev/tpu-log.md,
    sixteenth session). Off a TPU: `table[index].T`. The result is the same."""
    if use_kernel is None:
        use_kernel = jax.default_backend() == "tpu"
    if not use_kernel or index.shape[0] <= kernel_rows:
        return rows_to_columns(table[index], use_kernel, interpret)
    return take_columns(table.T, index, by_column=True)
