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

BLOCK = 1024  # rows per grid program
LANES = 128
# rows gathered and relaid out per pass on a TPU (`gather_columns`): a multiple of BLOCK
PASS_ROWS = 1 << 20


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


def gather_columns(table, index, use_kernel=None, interpret=None, pass_rows: int = PASS_ROWS):
    """table[index] as columns [C, E]; table [N, C], index [E] int32 in [0, N).

    With the kernel (a TPU) the rows [E, C] it moves take E x 512 bytes (each row padded to
    128 lanes): 8 GiB at 16,777,216 entries, which the 3M-primitive training step could not
    hold (docs/tpu.md). So they are gathered and relaid out `pass_rows` at a time, one pass
    after the other, and only one pass's padded rows exist at once. Elsewhere, or at most
    `pass_rows` entries: `rows_to_columns(table[index])` in one go. The result is the same."""
    if use_kernel is None:
        use_kernel = jax.default_backend() == "tpu"
    e, c = index.shape[0], table.shape[1]
    if not use_kernel or e <= pass_rows:
        return rows_to_columns(table[index], use_kernel, interpret)
    passes = -(-e // pass_rows)
    index = jnp.pad(index, (0, passes * pass_rows - e))  # (row 0: read, then cut off)

    def one_pass(i, out):
        part = jax.lax.dynamic_slice_in_dim(index, i * pass_rows, pass_rows)
        cols = rows_to_columns(table[part], use_kernel, interpret)
        return jax.lax.dynamic_update_slice_in_dim(out, cols, i * pass_rows, axis=1)

    out = jnp.zeros((c, passes * pass_rows), table.dtype)
    return jax.lax.fori_loop(0, passes, one_pass, out)[:, :e]
