"""Bin primitives into tiles and depth-sort each tile's list, all with static shapes.

A primitive's footprint `box` (xmin, ymin, xmax, ymax in pixels) selects the rectangle of tiles
it touches. Every (primitive, tile) pair is an entry; entries live in a fixed-capacity buffer, so
an overflow drops entries and is counted exactly, never silently.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class TileGrid(NamedTuple):
    """Static geometry of the tile grid (Python ints)."""

    width: int
    height: int
    tile: int

    @property
    def tiles_x(self) -> int:
        return -(-self.width // self.tile)

    @property
    def tiles_y(self) -> int:
        return -(-self.height // self.tile)

    @property
    def num_tiles(self) -> int:
        return self.tiles_x * self.tiles_y


class Bins(NamedTuple):
    """Entries sorted by (tile, depth). Invalid slots carry tile id `num_tiles` and sort last."""

    tile: jax.Array  # [E] int32, tile id of each sorted entry
    prim: jax.Array  # [E] int32, primitive index of each sorted entry
    tile_start: jax.Array  # [T + 1] int32, first sorted entry of each tile (and the end)
    needed: jax.Array  # [] int32, entries the scene asked for
    demand: jax.Array  # [T] int32, entries each tile asked for
    kept: jax.Array  # [T] int32, entries each tile got


def tile_rects(box: jax.Array, valid: jax.Array, grid: TileGrid):
    """Tile rectangle [x0, x1] x [y0, y1] (inclusive) per primitive and its entry count.

    box: [N, 4]; valid: [N] bool. Returns x0, y0, w, h, count, all [N] int32.
    """
    t = float(grid.tile)
    finite = jnp.all(jnp.isfinite(box), axis=-1)
    inside = (box[:, 2] >= 0) & (box[:, 0] < grid.width) & (box[:, 3] >= 0)
    inside = inside & (box[:, 1] < grid.height)
    ok = valid & finite & inside
    safe = jnp.where(ok[:, None], box, 0.0)
    x0 = jnp.clip(jnp.floor(safe[:, 0] / t), 0, grid.tiles_x - 1).astype(jnp.int32)
    x1 = jnp.clip(jnp.floor(safe[:, 2] / t), 0, grid.tiles_x - 1).astype(jnp.int32)
    y0 = jnp.clip(jnp.floor(safe[:, 1] / t), 0, grid.tiles_y - 1).astype(jnp.int32)
    y1 = jnp.clip(jnp.floor(safe[:, 3] / t), 0, grid.tiles_y - 1).astype(jnp.int32)
    w = jnp.where(ok, x1 - x0 + 1, 0)
    h = jnp.where(ok, y1 - y0 + 1, 0)
    return x0, y0, w, h, w * h


def tile_demand(x0, y0, w, h, grid: TileGrid) -> jax.Array:
    """Exact per-tile entry demand [T] without materialising entries (2D difference array)."""
    tx, ty = grid.tiles_x, grid.tiles_y
    has = (w > 0).astype(jnp.int32)
    diff = jnp.zeros((ty + 1, tx + 1), jnp.int32)
    diff = diff.at[y0, x0].add(has)
    diff = diff.at[y0, x0 + w].add(-has)
    diff = diff.at[y0 + h, x0].add(-has)
    diff = diff.at[y0 + h, x0 + w].add(has)
    counts = jnp.cumsum(jnp.cumsum(diff, axis=0), axis=1)
    return counts[:ty, :tx].reshape(-1)


def bin_and_sort(box, valid, depth, grid: TileGrid, capacity: int) -> Bins:
    """Emit (tile, primitive) entries into a buffer of `capacity` and sort them by (tile, depth).

    box: [N, 4]; valid: [N]; depth: [N]. Primitives are visited in depth order, so one stable
    sort by tile id leaves each tile's list front to back (ties keep primitive order).
    """
    n = box.shape[0]
    order = jnp.argsort(jnp.where(valid, depth, jnp.inf), stable=True).astype(jnp.int32)
    rx0, ry0, rw, rh, rcount = tile_rects(box, valid, grid)
    demand = tile_demand(rx0, ry0, rw, rh, grid)
    x0, y0, w, count = rx0[order], ry0[order], rw[order], rcount[order]
    ends = jnp.cumsum(count)  # [N] inclusive
    needed = ends[-1] if n else jnp.int32(0)
    # Owner of each slot: mark where each primitive's run of entries starts, then a running max.
    starts = jnp.where(count > 0, ends - count, capacity)
    owner = jnp.zeros((capacity + 1,), jnp.int32).at[starts].max(jnp.arange(n, dtype=jnp.int32))
    k = jax.lax.cummax(owner[:capacity])
    slot = jnp.arange(capacity, dtype=jnp.int32)
    local = slot - (ends[k] - count[k])
    wk = jnp.maximum(w[k], 1)
    tile_x = x0[k] + local % wk
    tile_y = y0[k] + local // wk
    live = slot < needed
    tile = jnp.where(live, tile_y * grid.tiles_x + tile_x, grid.num_tiles).astype(jnp.int32)
    if (grid.num_tiles + 1) * capacity < 2**32:
        # One unsigned key (tile, slot): unique, so a plain sort keeps slot (= depth) order.
        key = tile.astype(jnp.uint32) * jnp.uint32(capacity) + slot.astype(jnp.uint32)
        key = jax.lax.sort(key)
        tile = (key // jnp.uint32(capacity)).astype(jnp.int32)
        prim = order[k[(key % jnp.uint32(capacity)).astype(jnp.int32)]]
    else:
        tile, prim = jax.lax.sort((tile, order[k]), num_keys=1, is_stable=True)
    ids = jnp.arange(grid.num_tiles + 1, dtype=jnp.int32)
    tile_start = jnp.searchsorted(tile, ids, side="left").astype(jnp.int32)
    kept = tile_start[1:] - tile_start[:-1]
    return Bins(tile, prim, tile_start, needed.astype(jnp.int32), demand, kept)
