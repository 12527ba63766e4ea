"""The gradient of the sorted entries' row gather, summed run by run (`entry_rows.py`, used on a
TPU), equals autodiff's scatter-add of the same rows: binnings with ellipse culling, a capacity
that overflows, invalid and off-screen primitives, runs as long as the grid, and under vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xprc.pipeline import entry_rows as er
from xprc.pipeline.binning import TileGrid, bin_and_sort, spread


def scene(n, grid, seed, big=0):
    rng = np.random.default_rng(seed)
    cx = rng.uniform(-10, grid.width + 10, n)
    cy = rng.uniform(-10, grid.height + 10, n)
    r = rng.uniform(0.5, 14, n)
    r[:big] = 2 * max(grid.width, grid.height)  # runs as long as the grid
    box = np.stack([cx - r, cy - r, cx + r, cy + r], axis=1)
    valid = rng.uniform(size=n) > 0.1
    depth = rng.uniform(1, 10, n)
    valid[:big], depth[:big] = True, 0.5  # first in depth order: their runs are in the buffer
    ellipse = np.stack([1 / r**2, np.zeros(n), 1 / (0.3 * r) ** 2], axis=1)
    centre = np.stack([cx, cy], axis=1)
    box, depth, ellipse, centre = (
        jnp.asarray(a, jnp.float32) for a in (box, depth, ellipse, centre)
    )
    return box, jnp.asarray(valid), depth, ellipse, centre


def gathered(table, bins, by_runs, num_tiles):
    live = jnp.arange(bins.prim.shape[0], dtype=jnp.int32) < bins.tile_start[-1]
    old, er.BY_RUNS = er.BY_RUNS, by_runs
    try:
        return er.entry_rows(table, bins.prim, live, bins.runs, num_tiles), live
    finally:
        er.BY_RUNS = old


def grads(table, bins, g, num_tiles):
    out = []
    for by_runs in (True, False):
        rows, vjp = jax.vjp(lambda t, b=by_runs: gathered(t, bins, b, num_tiles)[0], table)
        out.append((rows, vjp(g)[0]))
    return out


@pytest.mark.parametrize(
    "n,capacity,use_ellipse,big",
    [(60, 4096, True, 0), (60, 4096, False, 2), (300, 700, True, 3), (300, 333, False, 0)],
)
def test_run_sums_equal_the_scatter_add(n, capacity, use_ellipse, big):
    grid = TileGrid(72, 40, 8)
    box, valid, depth, ellipse, centre = scene(n, grid, seed=n + capacity, big=big)
    kw = {"ellipse": ellipse, "centre": centre} if use_ellipse else {}
    bins = bin_and_sort(box, valid, depth, grid, capacity, **kw)
    if capacity < 1000:
        assert int(bins.needed) > capacity  # the buffer overflowed
    if big:
        assert int(np.max(np.asarray(bins.runs.count))) == grid.num_tiles
    table = jnp.asarray(np.random.default_rng(1).standard_normal((n, 5)), jnp.float32)
    g = jnp.asarray(np.random.default_rng(2).standard_normal((capacity, 5)), jnp.float32)
    live = np.arange(capacity) < int(bins.tile_start[-1])
    g = jnp.where(live[:, None], g, 0.0)  # the kernels give slots of no tile no gradient
    (rows_r, d_runs), (rows_s, d_scatter) = grads(table, bins, g, grid.num_tiles)
    np.testing.assert_array_equal(rows_r, rows_s)
    # independent: float64 sums per primitive over the live entries
    want = np.zeros((n, 5))
    np.add.at(want, np.asarray(bins.prim)[live], np.asarray(g, np.float64)[live])
    np.testing.assert_allclose(d_runs, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d_scatter, want, rtol=1e-5, atol=1e-5)
    assert np.any(want != 0)


def test_dead_slots_get_no_gradient_even_when_given_one():
    """Slots past the kept entries read any row (`spread`); a cotangent there is ignored."""
    grid = TileGrid(32, 32, 8)
    box, valid, depth, ellipse, centre = scene(40, grid, seed=3)
    bins = bin_and_sort(box, valid, depth, grid, 2048, ellipse=ellipse, centre=centre)
    table = jnp.ones((40, 3), jnp.float32)
    g = jnp.ones((2048, 3), jnp.float32)
    rows, vjp = jax.vjp(lambda t: gathered(t, bins, True, grid.num_tiles)[0], table)
    live = np.arange(2048) < int(bins.tile_start[-1])
    want = np.zeros((40, 3))
    np.add.at(want, np.asarray(bins.prim)[live], 1.0)
    np.testing.assert_array_equal(vjp(g)[0], want)


def test_run_sums_under_vmap_over_cameras():
    grid = TileGrid(48, 32, 8)
    boxes, depths = [], []
    for seed in range(3):
        box, valid, depth, _, _ = scene(50, grid, seed=10 + seed, big=1)
        boxes.append(box)
        depths.append(depth)
    box, depth = jnp.stack(boxes), jnp.stack(depths)
    table = jnp.asarray(np.random.default_rng(4).standard_normal((50, 4)), jnp.float32)

    def loss(t, by_runs):
        def one(b, d):
            bins = bin_and_sort(b, valid, d, grid, 1024)
            rows, live = gathered(t, bins, by_runs, grid.num_tiles)
            w = jnp.sin(jnp.arange(rows.size, dtype=jnp.float32)).reshape(rows.shape)
            return jnp.sum(jnp.where(live[:, None], rows * w, 0.0))

        return jnp.sum(jax.vmap(one)(box, depth))

    a = jax.grad(loss)(table, True)
    b = jax.grad(loss)(table, False)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert np.any(np.asarray(a) != 0)


def test_spread_is_what_the_rows_read():
    grid = TileGrid(32, 32, 8)
    box, valid, depth, _, _ = scene(30, grid, seed=5)
    bins = bin_and_sort(box, valid, depth, grid, 512)
    table = jnp.arange(30 * 2, dtype=jnp.float32).reshape(30, 2)
    rows, live = gathered(table, bins, True, grid.num_tiles)
    np.testing.assert_array_equal(rows, table[spread(bins.prim, live, 30)])
