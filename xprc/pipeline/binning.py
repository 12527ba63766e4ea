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

from .relayout import gather_columns


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


class Runs(NamedTuple):
    """Where the sorted entries were before the sort: each primitive's entries were one run of
    slots, primitives in depth order (`rank`). What `gather.take_rows`'s "runs" transpose needs
    to sum an entry gradient per primitive without a scatter."""

    slot: jax.Array  # [E] int32, the slot each sorted entry had before the sort
    back: jax.Array  # [E] int32, per slot (before the sort): its distance to its run's start
    # (meaningless past `needed`, where no run is: never read there)
    first: jax.Array  # [N] int32, per rank: the run's first slot
    count: jax.Array  # [N] int32, per rank: the run's length (a run may end past the capacity)
    order: jax.Array  # [N] int32, per rank: the primitive's index


class Bins(NamedTuple):
    """Entries sorted by (tile, depth). Slots past the kept entries carry ids >= `num_tiles`:
    `num_tiles` an empty slot, `num_tiles + 1 + t` an entry of tile t the ellipse test culled."""

    tile: jax.Array  # [E] int32, tile id of each sorted entry
    prim: jax.Array  # [E] int32, primitive index of each sorted entry
    tile_start: jax.Array  # [T + 1] int32, first sorted entry of each tile (and the end)
    needed: jax.Array  # [] int32, entries the scene asked for, saturated at INT32_MAX
    needed_exact: jax.Array  # [2] uint32 (high, low) words of the exact 64-bit entry count
    demand: jax.Array  # [T] int32, entries each tile asked for
    kept: jax.Array  # [T] int32, entries each tile got (after the ellipse test)
    culled: jax.Array  # [T] int32, entries of each tile in the buffer the ellipse test rejected
    fallback: jax.Array  # [] int32, usable primitives whose ellipse is unusable (rectangle kept)
    runs: Runs | None = None  # with `bin_and_sort(..., runs=True)`: the slots before the sort


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


def saturating_cumsum(count: jax.Array) -> jax.Array:
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
    d over the rectangle its pixel centres span; `centre` [M, 2], `ellipse` [M, 3] (usable)."""
    return _ellipse_hits(centre[:, 0], centre[:, 1], ellipse[:, 0], ellipse[:, 1], ellipse[:, 2],
                         tile_x, tile_y, grid)  # fmt: skip


def _ellipse_hits(cx, cy, a, b, c, tile_x, tile_y, grid: TileGrid) -> jax.Array:
    """`ellipse_hits` on components [M] each. q is convex, so its minimum over the rectangle is
    0 when the centre is inside, else it lies on an edge, where q is a 1D quadratic minimised
    in closed form (clipped to the edge)."""
    dtype = a.dtype
    x_lo, x_hi = _pixel_span(tile_x, grid.width, grid.tile, cx, dtype)
    y_lo, y_hi = _pixel_span(tile_y, grid.height, grid.tile, cy, dtype)
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
    box, valid, depth, grid: TileGrid, capacity: int, ellipse=None, centre=None,
    carry_prim: bool | None = None, runs: bool = False,
) -> Bins:  # fmt: skip
    """Emit (tile, primitive) entries into a buffer of `capacity` and sort them by (tile, depth).

    box: [N, 4]; valid: [N]; depth: [N]. Primitives are visited in depth order, so one stable
    sort by tile id leaves each tile's list front to back (ties keep primitive order).
    ellipse: optional [N, 3] around centre [N, 2]: entries of the rectangle whose tile misses
    the ellipse are culled. A primitive whose ellipse is not a finite positive-definite form
    keeps its rectangle (counted in `fallback`). The buffer still holds rectangle entries, so
    `needed` and the overflow are counted in rectangle entries.

    On a TPU gathers and scatters of `capacity` rows cost milliseconds each, sorts and
    elementwise work far less: each slot reads everything it needs from its primitive in one
    row gather, and the culled entries are counted by the sort (they sort after the kept ones,
    grouped by tile), not by a scatter. carry_prim: whether the primitive index rides along in
    the sort (None: off a CPU). On a CPU a two-operand sort costs ~7x a one-key sort, so the key
    is sorted alone and the primitive read back by slot; on a TPU (garden frame) that gather of
    `capacity` int32 took 4.5 ms and carrying it in the sort 0.5 ms (wall-clock timings of
    single calls, which include about 1 ms of dispatch: docs/tpu.md; the order held, the sizes
    are not re-measured). The result is the same. runs: also return where each sorted entry
    was before the sort (`Runs`, for the gradient's sums by run: xprc/pipeline/gather.py).
    """
    n = box.shape[0]
    num_tiles = grid.num_tiles
    rx0, ry0, rw, rh, rcount = tile_rects(box, valid, grid)
    index = jnp.arange(n, dtype=jnp.int32)
    # depth order (stable), with each primitive's entry count riding along
    key = jnp.where(valid, depth, jnp.inf)
    _, order, count = jax.lax.sort((key, index, rcount), num_keys=1, is_stable=True)
    first, exact = _first_slots(count, rcount, num_tiles)
    needed = saturate_total(exact)
    # Per primitive in depth order: tile rectangle, first slot and index (and the bits of the
    # ellipse test's inputs), so that one row gather gives a slot all it needs.
    columns = [rx0, ry0, jnp.maximum(rw, 1), index]
    itype = jnp.int32
    if ellipse is not None:
        bits, usable = _cull_bits(ellipse, centre)
        itype = bits.dtype  # int64 for a float64 scene
        columns = [c.astype(itype) for c in columns] + list(bits.T)
    table = jnp.stack(columns, axis=-1)[order]
    table = jnp.concatenate([table[:, :3], first[:, None].astype(itype), table[:, 3:]], axis=1)
    slot = jnp.arange(capacity, dtype=jnp.int32)
    cols = gather_columns(table, slot_owners(count, first, capacity))  # [C, capacity]
    rect = cols[:5].astype(jnp.int32)
    local = slot - rect[3]
    tile_x = rect[0] + local % rect[2]
    tile_y = rect[1] + local // rect[2]
    prim = rect[4]
    live = slot < needed
    tile_id = tile_y * grid.tiles_x + tile_x
    fallback = jnp.int32(0)
    # Sort ids: kept entries their tile (0..T-1), culled ones T + 1 + tile, empty slots T.
    tile = jnp.where(live, tile_id, num_tiles)
    if ellipse is not None:
        floats = jnp.float32 if itype == jnp.int32 else jnp.float64  # (float16: widened)
        cx, cy, a, b, c, usable_bit = jax.lax.bitcast_convert_type(cols[5:], floats)
        hit = _ellipse_hits(cx, cy, a, b, c, tile_x, tile_y, grid) | (usable_bit < 0.5)
        tile = jnp.where(live & ~hit, num_tiles + 1 + tile_id, tile)
        fallback = jnp.sum(valid & ~usable).astype(jnp.int32)
    ids = 2 * num_tiles + 2 if ellipse is not None else num_tiles + 1
    tile, prim, before = _sort_entries(tile, prim, ids, carry_prim, runs)
    bounds = id_bounds(tile, ids)
    tile_start = bounds[: num_tiles + 1]
    kept = tile_start[1:] - tile_start[:-1]
    if ellipse is not None:
        culled = bounds[num_tiles + 2 :] - bounds[num_tiles + 1 : -1]  # ids T+1 .. 2T
    else:
        culled = jnp.zeros((num_tiles,), jnp.int32)
    # Per-tile demand: when nothing overflowed, every rectangle entry is in the buffer, kept or
    # culled, so the sort has counted it; only an overflowing render pays for the scatters
    # (docs/tpu.md: milliseconds on a TPU). Under vmap both branches run: the same values.
    demand = jax.lax.cond(
        needed > capacity,
        lambda: tile_demand(rx0, ry0, rw, rh, grid),
        lambda: kept + culled,
    )
    where = Runs(before, local, first, count, order) if runs else None
    return Bins(tile, prim, tile_start, needed, exact, demand, kept, culled, fallback, where)


def _first_slots(count, rcount, num_tiles: int):
    """(first slot [N] of each primitive's run of entries, in depth order; the exact entry count
    [high, low]). An exclusive cumulative sum of `count`: where the total could pass 2^31 it
    saturates instead of wrapping, so a primitive starting past the capacity (or past 2^31) gets
    none; elsewhere a plain one (0.8 ms less on a TPU v5e). rcount: `count` in index order."""
    if count.shape[0] * num_tiles <= INT32_MAX:  # each count <= num_tiles: cannot wrap
        ends = jnp.cumsum(count)
        exact = jnp.stack([jnp.uint32(0), ends[-1].astype(jnp.uint32)])
    else:
        ends = saturating_cumsum(count)
        exact = _exact_count(ends, rcount)
    return jnp.concatenate([jnp.zeros((1,), jnp.int32), ends[:-1]]), exact


def _exact_count(ends, count):
    """The exact 64-bit entry count [high, low]: the end of the saturating cumulative sum
    `ends` unless it saturated, else a reduction of `count` of its own."""
    return jax.lax.cond(
        ends[-1] < INT32_MAX,
        lambda: jnp.stack([jnp.uint32(0), ends[-1].astype(jnp.uint32)]),
        lambda: exact_total(count),
    )


def slot_owners(count, first, capacity: int) -> jax.Array:
    """[capacity] the primitive (in depth order) each slot belongs to: mark where each run of
    entries starts (`first`, `count` per primitive), then a running max.

    Runs that start are non-empty, so their starts differ; a primitive without one gets an
    index of its own past the buffer (dropped; one that wraps past 2^31 is negative: dropped
    too). With indices promised unique the scatter is a plain write, not an atomic max: 1.34
    against 1.60 ms on a TPU v5e (garden frame)."""
    n = count.shape[0]
    index = jnp.arange(n, dtype=jnp.int32)
    starts = jnp.where((count > 0) & (first < capacity), first, capacity + 1 + index)
    owner = jnp.zeros((capacity,), jnp.int32)
    owner = owner.at[starts].set(
        index, unique_indices=True, mode="drop", wrap_negative_indices=False
    )
    return running_max(owner)


def running_max(x: jax.Array) -> jax.Array:
    """jax.lax.cummax of a vector; on a TPU by doubling: x = max(x, x shifted by 2^k) for k = 0,
    1, ... (ceil(log2 n) elementwise steps), the same values. XLA's TPU compile of `cummax` over
    the garden frame's 458,752 slots took 17-24 s (compiled for a v5e from the CPU), of the
    doubling 3.3 s (docs/dev/tpu-log.md). On a CPU the doubling's 19 passes
    cost 4x the cummax (102 against 25 ms there), so the CPU keeps the cummax."""
    if jax.default_backend() != "tpu":
        return jax.lax.cummax(x)
    n = x.shape[0]
    low = jnp.iinfo(x.dtype).min
    shift = 1
    while shift < n:
        x = jnp.maximum(x, jnp.pad(x[:-shift], (shift, 0), constant_values=low))
        shift *= 2
    return x


def id_bounds(sorted_ids, ids: int) -> jax.Array:
    """[ids] the first position of each sort id 0..ids-1 in `sorted_ids` (int32)."""
    query = jnp.arange(ids, dtype=jnp.int32)
    bounds = jnp.searchsorted(sorted_ids, query, side="left", method="scan_unrolled")
    return bounds.astype(jnp.int32)


def spread(prim: jax.Array, live: jax.Array, n: int) -> jax.Array:
    """Gather index of per-slot rows: `prim` where `live`, elsewhere the slot's position mod n.

    Dead slots (padding, culled, past the kept entries) are masked after the gather, so any row
    will do; distinct rows keep the gather's transpose, a scatter-add of their zero cotangents,
    from piling onto one row (the garden frame's 37,124 empty slots all belonged to one
    primitive). On a TPU that saved little: 7.61 -> 7.35 ms (docs/tpu.md)."""
    position = jnp.arange(prim.size, dtype=jnp.int32).reshape(prim.shape)
    return jnp.where(live, prim, position % max(n, 1))


def _sort_entries(tile, prim, ids: int, carry_prim: bool | None, with_slot: bool = False):
    """The slots sorted by (sort id, slot): (sorted ids [E] int32, their primitives [E], and
    with `with_slot` the slot each had before the sort [E] int32, else None)."""
    capacity = tile.shape[0]
    if ids * capacity >= 2**32:
        operands = (tile.astype(jnp.int32), prim)
        if with_slot:
            operands += (jnp.arange(capacity, dtype=jnp.int32),)
        out = jax.lax.sort(operands, num_keys=1, is_stable=True)
        return out[0], out[1], out[2] if with_slot else None
    # One unsigned key (id, slot): unique, so a plain sort keeps slot (= depth) order.
    slot = jnp.arange(capacity, dtype=jnp.uint32)
    key = tile.astype(jnp.uint32) * jnp.uint32(capacity) + slot
    if carry_prim is None:
        carry_prim = jax.default_backend() != "cpu"
    if carry_prim:
        key, prim = jax.lax.sort((key, prim), num_keys=1)
        before = (key % jnp.uint32(capacity)).astype(jnp.int32)
    else:
        key = jax.lax.sort(key)
        before = (key % jnp.uint32(capacity)).astype(jnp.int32)
        prim = prim[before]
    return (key // jnp.uint32(capacity)).astype(jnp.int32), prim, before if with_slot else None


def _cull_bits(ellipse, centre):
    """([N, 6] the bits, as integers of the float's width, of each primitive's centre, ellipse
    (a harmless circle where it is unusable) and usability flag (1.0 / 0.0), [N] usable): the
    bits travel in the slots' one integer row gather, and come back bit for bit."""
    if centre is None:
        raise ValueError("bin_and_sort: an ellipse needs the primitives' centre")
    ok = ellipse_usable(ellipse)
    safe = jnp.where(ok[:, None], ellipse, jnp.asarray([1.0, 0.0, 1.0], ellipse.dtype))
    cen = jnp.where(ok[:, None], centre, 0).astype(ellipse.dtype)
    floats = jnp.concatenate([cen, safe, ok[:, None].astype(ellipse.dtype)], axis=-1)
    if floats.dtype.itemsize < 4:
        floats = floats.astype(jnp.float32)
    itype = jnp.int32 if floats.dtype.itemsize == 4 else jnp.int64
    return jax.lax.bitcast_convert_type(floats, itype), ok
