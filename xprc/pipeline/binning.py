"""Bin primitives into tiles and depth-sort each tile's list, all with static shapes.

A primitive's footprint `box` (xmin, ymin, xmax, ymax in pixels) selects the rectangle of tiles
it touches. Every (primitive, tile) pair of the rectangle is an entry; entries live in a
fixed-capacity buffer, so an overflow drops entries and is counted exactly, never silently.

A spec may also emit an `ellipse` [a, b, c] around its `centre`: the footprint is then
{d = pixel - centre : a dx^2 + 2 b dx dy + c dy^2 <= 1}, and a rectangle entry whose tile holds
no point of it is culled (sorted last like an empty slot, counted in `Bins.culled`). The test
is exact over the rectangle spanned by the tile's pixel centres (the response is only evaluated
there), with a margin of a few hundred rounding units (`ELLIPSE_SLACK`) so that float rounding
of the spec's response and of this test can never disagree against a pixel.
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


INT32_MAX = 2**31 - 1
# The ellipse test keeps a tile when min q <= 1 + ELLIPSE_SLACK * eps * (1 + |terms of q|): q's
# terms cancel for elongated ellipses, so rounding scales with their magnitude, not with q.
ELLIPSE_SLACK = 256


class Bins(NamedTuple):
    """Entries sorted by (tile, depth). Invalid slots carry tile id `num_tiles` and sort last."""

    tile: jax.Array  # [E] int32, tile id of each sorted entry
    prim: jax.Array  # [E] int32, primitive index of each sorted entry
    tile_start: jax.Array  # [T + 1] int32, first sorted entry of each tile (and the end)
    needed: jax.Array  # [] int32, entries the scene asked for, saturated at INT32_MAX
    needed_exact: jax.Array  # [2] uint32 (high, low) words of the exact 64-bit entry count
    demand: jax.Array  # [T] int32, entries each tile asked for
    kept: jax.Array  # [T] int32, entries each tile got (after the ellipse test)
    culled: jax.Array  # [T] int32, entries of each tile in the buffer the ellipse test rejected
    fallback: jax.Array  # [] int32, usable primitives whose ellipse is unusable (rectangle kept)


def exact_total(count: jax.Array) -> jax.Array:
    """Exact sum of non-negative int32 counts [N] as two uint32 words [high, low].

    int64 needs `jax_enable_x64`; a 64-bit add-with-carry over uint32 pairs never wraps (up to
    2^64 - 1), so the count is exact with the default 32-bit types.
    """
    lo = count.astype(jnp.uint32)
    hi = jnp.zeros_like(lo)

    def add(a, b):
        a_hi, a_lo = a
        b_hi, b_lo = b
        low = a_lo + b_lo
        carry = (low < a_lo).astype(jnp.uint32)
        return a_hi + b_hi + carry, low

    zero = jnp.zeros((), jnp.uint32)
    h, l_ = jax.lax.reduce((hi, lo), (zero, zero), add, (0,))
    return jnp.stack([h, l_])


def saturate_total(exact: jax.Array) -> jax.Array:
    """The [high, low] count as int32, saturated at INT32_MAX."""
    over = (exact[0] > 0) | (exact[1] > jnp.uint32(INT32_MAX))
    return jnp.where(over, INT32_MAX, exact[1].astype(jnp.int32))


def _saturating_cumsum(count: jax.Array) -> jax.Array:
    """Inclusive cumulative sum of non-negative int32 values that sticks at INT32_MAX."""

    def add(a, b):
        return jnp.where(a > INT32_MAX - b, INT32_MAX, a + b)

    return jax.lax.associative_scan(add, count)


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


def _pixel_span(index, size: int, tile: int, centre, dtype):
    """Offsets from `centre` of the first and last pixel centre of a tile row / column that lie
    in the image (pixels past the image edge are cropped, so they need no entry)."""
    lo = (index * tile).astype(dtype) + 0.5 - centre
    hi = jnp.minimum((index + 1) * tile, size).astype(dtype) - 0.5 - centre
    return lo, hi


def ellipse_usable(ellipse: jax.Array) -> jax.Array:
    """[N] bool: the ellipse [a, b, c] is a finite, positive-definite form."""
    a, b, c = ellipse[..., 0], ellipse[..., 1], ellipse[..., 2]
    finite = jnp.all(jnp.isfinite(ellipse), axis=-1)
    return finite & (a > 0) & (c > 0) & (a * c - b * b > 0)


def ellipse_hits(centre, ellipse, tile_x, tile_y, grid: TileGrid) -> jax.Array:
    """[M] bool: the tile (tile_x, tile_y) holds a point of the ellipse {q(d) <= 1}, for
    d over the rectangle its pixel centres span; `centre` [M, 2], `ellipse` [M, 3] (usable).

    q is convex, so its minimum over the rectangle is 0 when the centre is inside, else it lies
    on an edge, where q is a 1D quadratic minimised in closed form (clipped to the edge)."""
    dtype = ellipse.dtype
    x_lo, x_hi = _pixel_span(tile_x, grid.width, grid.tile, centre[:, 0], dtype)
    y_lo, y_hi = _pixel_span(tile_y, grid.height, grid.tile, centre[:, 1], dtype)
    a, b, c = ellipse[:, 0], ellipse[:, 1], ellipse[:, 2]
    inside = (x_lo <= 0) & (x_hi >= 0) & (y_lo <= 0) & (y_hi >= 0)
    points = [(x, jnp.clip(-b * x / c, y_lo, y_hi)) for x in (x_lo, x_hi)]
    points += [(jnp.clip(-b * y / a, x_lo, x_hi), y) for y in (y_lo, y_hi)]
    tol = ELLIPSE_SLACK * jnp.finfo(dtype).eps
    hit = inside
    for dx, dy in points:
        xx, xy, yy = a * dx * dx, b * dx * dy, c * dy * dy
        size = jnp.abs(xx) + 2 * jnp.abs(xy) + jnp.abs(yy)
        hit = hit | (xx + 2 * xy + yy <= 1 + tol * (1 + size))
    return hit


def bin_and_sort(
    box, valid, depth, grid: TileGrid, capacity: int, ellipse=None, centre=None
) -> Bins:
    """Emit (tile, primitive) entries into a buffer of `capacity` and sort them by (tile, depth).

    box: [N, 4]; valid: [N]; depth: [N]. Primitives are visited in depth order, so one stable
    sort by tile id leaves each tile's list front to back (ties keep primitive order).
    ellipse: optional [N, 3] around centre [N, 2]: entries of the rectangle whose tile misses
    the ellipse are culled. A primitive whose ellipse is not a finite positive-definite form
    keeps its rectangle (counted in `fallback`). The buffer still holds rectangle entries, so
    `needed` and the overflow are counted in rectangle entries.
    """
    n = box.shape[0]
    order = jnp.argsort(jnp.where(valid, depth, jnp.inf), stable=True).astype(jnp.int32)
    rx0, ry0, rw, rh, rcount = tile_rects(box, valid, grid)
    demand = tile_demand(rx0, ry0, rw, rh, grid)
    rects = jnp.stack([rx0, ry0, rw, rcount], axis=-1)[order]  # one row gather, depth order
    x0, y0, w, count = rects[:, 0], rects[:, 1], rects[:, 2], rects[:, 3]
    exact = exact_total(rcount)
    needed = saturate_total(exact)
    # First slot of each primitive's run of entries: an exclusive cumulative sum that saturates
    # instead of wrapping, so a primitive starting past the capacity (or past 2^31) gets none.
    ends = _saturating_cumsum(count)
    first = jnp.concatenate([jnp.zeros((1,), jnp.int32), ends[:-1]])
    # Owner of each slot: mark where each primitive's run of entries starts, then a running max.
    starts = jnp.where((count > 0) & (first < capacity), first, capacity)
    owner = jnp.zeros((capacity + 1,), jnp.int32).at[starts].max(jnp.arange(n, dtype=jnp.int32))
    k = jax.lax.cummax(owner[:capacity])
    slot = jnp.arange(capacity, dtype=jnp.int32)
    # One row gather of everything a slot needs from its primitive (gathers of `capacity`
    # rows cost a TPU several ms each; one [capacity, 5] gather replaces five).
    row = jnp.stack([first, x0, y0, jnp.maximum(w, 1), order], axis=-1)[k]
    local = slot - row[:, 0]
    tile_x = row[:, 1] + local % row[:, 3]
    tile_y = row[:, 2] + local // row[:, 3]
    prim = row[:, 4]
    live = slot < needed
    tile_id = tile_y * grid.tiles_x + tile_x
    culled = jnp.zeros((grid.num_tiles,), jnp.int32)
    fallback = jnp.int32(0)
    if ellipse is not None:
        live, culled, fallback = _cull(live, tile_id, tile_x, tile_y, order, k, valid, ellipse,
                                       centre, grid)  # fmt: skip
    tile = jnp.where(live, tile_id, grid.num_tiles).astype(jnp.int32)
    if (grid.num_tiles + 1) * capacity < 2**32:
        # One unsigned key (tile, slot): unique, so a plain sort keeps slot (= depth) order;
        # the primitive rides along as a second operand (no gather after the sort).
        key = tile.astype(jnp.uint32) * jnp.uint32(capacity) + slot.astype(jnp.uint32)
        key, prim = jax.lax.sort((key, prim), num_keys=1)
        tile = (key // jnp.uint32(capacity)).astype(jnp.int32)
    else:
        tile, prim = jax.lax.sort((tile, prim), num_keys=1, is_stable=True)
    ids = jnp.arange(grid.num_tiles + 1, dtype=jnp.int32)
    tile_start = jnp.searchsorted(tile, ids, side="left").astype(jnp.int32)
    kept = tile_start[1:] - tile_start[:-1]
    return Bins(tile, prim, tile_start, needed, exact, demand, kept, culled, fallback)


def _cull(live, tile_id, tile_x, tile_y, order, k, valid, ellipse, centre, grid: TileGrid):
    """The ellipse test on every live slot (slot i belongs to primitive order[k[i]]): (live
    after it, culled per tile, fallbacks)."""
    if centre is None:
        raise ValueError("bin_and_sort: an ellipse needs the primitives' centre")
    ok = ellipse_usable(ellipse)
    safe = jnp.where(ok[:, None], ellipse, jnp.asarray([1.0, 0.0, 1.0], ellipse.dtype))
    cen = jnp.where(ok[:, None], centre, 0).astype(ellipse.dtype)
    # the primitives' rows in depth order, then one row gather per slot
    table = jnp.concatenate([cen, safe, ok[:, None].astype(ellipse.dtype)], axis=-1)[order][k]
    hit = ellipse_hits(table[:, :2], table[:, 2:5], tile_x, tile_y, grid) | (table[:, 5] < 0.5)
    rejected = live & ~hit
    where = jnp.where(rejected, tile_id, grid.num_tiles)
    culled = jnp.zeros((grid.num_tiles + 1,), jnp.int32).at[where].add(1)[: grid.num_tiles]
    fallback = jnp.sum(valid & ~ok).astype(jnp.int32)
    return live & hit, culled, fallback
