"""The binning's relayout of per-slot rows into columns (`xprc/pipeline/relayout.py`), which a
TPU runs as a Pallas kernel (a 4 ms saving on the garden frame: docs/tpu.md).

- The kernel (interpreted on this CPU) equals a plain transpose, bit for bit, for row counts
  that are not whole blocks and 1 to 128 columns of int32 and float32 (NaN and -0 bits too).
- `bin_and_sort` with the kernel gives the same bins as with the transpose (ellipse culling,
  float bits read back from the integer rows), with more entries than the kernel moves at once
  gathered column by column as on a TPU; `gather_columns` both ways equals a NumPy gather.
- The kernel passes Pallas's TPU (Mosaic) lowering, exported from this CPU.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xprc.pipeline import binning
from xprc.pipeline.binning import TileGrid, bin_and_sort
from xprc.pipeline.relayout import BLOCK, gather_columns, rows_to_columns


@pytest.mark.parametrize("rows,cols", [(1, 1), (BLOCK, 11), (2 * BLOCK + 37, 5), (700, 128)])
def test_kernel_equals_a_transpose(rows, cols):
    rng = np.random.default_rng(rows + cols)
    ints = rng.integers(-(2**31), 2**31 - 1, (rows, cols), dtype=np.int64).astype(np.int32)
    floats = rng.normal(size=(rows, cols)).astype(np.float32)
    floats.flat[:: max(1, floats.size // 5)] = np.nan
    floats.flat[1 :: max(1, floats.size // 3)] = -0.0
    for x in (ints, floats):
        got = np.asarray(rows_to_columns(jnp.asarray(x), use_kernel=True))
        assert got.shape == (cols, rows) and got.dtype == x.dtype
        np.testing.assert_array_equal(got.view(np.int32), x.T.view(np.int32))


def test_wide_or_64_bit_rows_are_transposed_plainly():
    """More than 128 columns, or 8-byte values (a float64 scene's bits): a plain transpose."""
    wide = jnp.arange(3 * 130, dtype=jnp.int32).reshape(3, 130)
    np.testing.assert_array_equal(rows_to_columns(wide, use_kernel=True), wide.T)
    longs = jnp.arange(12, dtype=jnp.int64).reshape(4, 3)  # the tests run with x64 on
    got = rows_to_columns(longs, use_kernel=True)
    assert got.dtype == jnp.int64
    np.testing.assert_array_equal(got, longs.T)


def test_bins_with_the_kernel_equal_bins_without(monkeypatch):
    rng = np.random.default_rng(7)
    grid = TileGrid(90, 70, 8)
    n = 300
    centre = rng.uniform(-10, 100, (n, 2))
    r = rng.uniform(0.5, 20, (n, 2))
    th = rng.uniform(0, np.pi, n)
    c, s = np.cos(th), np.sin(th)
    a = c * c / r[:, 0] ** 2 + s * s / r[:, 1] ** 2
    b = c * s * (1 / r[:, 0] ** 2 - 1 / r[:, 1] ** 2)
    cc = s * s / r[:, 0] ** 2 + c * c / r[:, 1] ** 2
    ellipse = np.stack([a, b, cc], -1).astype(np.float32)
    ellipse[::17] = np.nan  # unusable: the rectangle is kept
    half = r.max(axis=1, keepdims=True)
    box = np.concatenate([centre - half, centre + half], axis=1).astype(np.float32)
    args = (jnp.asarray(box), jnp.asarray(rng.uniform(0, 1, n) > 0.1),
            jnp.asarray(rng.uniform(1, 9, n).astype(np.float32)), grid, 3000,
            jnp.asarray(ellipse), jnp.asarray(centre.astype(np.float32)))  # fmt: skip
    plain = bin_and_sort(*args)
    # a TPU's way past `kernel_rows` entries (here 1,024 of 3,000): column by column
    by_column = functools.partial(gather_columns, use_kernel=True, kernel_rows=BLOCK)
    monkeypatch.setattr(binning, "gather_columns", by_column)
    kernel = bin_and_sort(*args)
    assert int(plain.culled.sum()) > 0 and int(plain.fallback) > 0  # the paths were exercised
    for field, value in plain._asdict().items():
        np.testing.assert_array_equal(getattr(kernel, field), value, field)


@pytest.mark.parametrize("entries,kernel_rows", [(5000, 1024), (2048, 1024), (1000, 1024)])
def test_gathered_columns_equal_a_gather(entries, kernel_rows):
    """`gather_columns` with the kernel (at most `kernel_rows` entries) and column by column (more:
    a TPU's way at scale, which never holds the rows padded to 128 lanes) equals NumPy's
    table[index].T."""
    rng = np.random.default_rng(entries)
    table = rng.integers(-(2**31), 2**31 - 1, (300, 11), dtype=np.int64).astype(np.int32)
    index = rng.integers(0, 300, entries).astype(np.int32)
    got = gather_columns(jnp.asarray(table), jnp.asarray(index), use_kernel=True,
                         kernel_rows=kernel_rows)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(got), table[index].T)


def test_kernel_lowers_for_a_tpu():
    fn = jax.jit(functools.partial(rows_to_columns, use_kernel=True, interpret=False))
    exported = jax.export.export(fn, platforms=["tpu"])(jnp.zeros((3000, 11), jnp.int32))
    assert "tpu_custom_call" in exported.mlir_module()
