"""Front-to-back compositing of depth-sorted tile lists, with the method's response per pixel.

The sorted entries are cut into chunks of `chunk` primitives that each belong to one tile; chunks
are visited in (tile, depth) order by one `lax.scan` over groups of `group` chunks, carrying the
running transmittance of the current tile. Within a chunk, transmittance is a cumulative product
along the chunk, so the per-pixel stop rule ("stop before the primitive that would bring T below
t_min") is exact: entry k contributes iff the running product including it stays >= t_min,
which is monotone along the list. A group whose tile is already saturated everywhere, or that is
capacity padding, is skipped with `lax.cond`.

Two ways to differentiate it (the same forward maths, `group_weights`):
- the custom VJP of `composite_vjp.py` (default): a second front-to-back scan recomputes each
  group's alpha with the spec's response and applies the compositing derivatives analytically;
  it covers colour, depth, the weight and the response's per-pixel outputs;
- autodiff of a rematerialised (`jax.checkpoint`) scan, which stores one transmittance row per
  step instead of tiles x capacity x pixels alphas. The depth distortion output (an extra carry,
  the prefix sum of w z) is differentiated this way.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..runtime import EXACT
from .binning import Bins, TileGrid, spread
from .config import ALPHA_CAP, RenderConfig
from .gather import take_rows


def tile_pixels(tiles: jax.Array, grid: TileGrid, dtype) -> jax.Array:
    """Pixel centres [..., P, 2] (x, y) of the given tile ids [...]."""
    t = grid.tile
    p = jnp.arange(t * t, dtype=jnp.int32).reshape((1,) * tiles.ndim + (t * t,))
    tx = (tiles % grid.tiles_x)[..., None] * t + p % t
    ty = (tiles // grid.tiles_x)[..., None] * t + p // t
    return jnp.stack([tx, ty], -1).astype(dtype) + 0.5


class Layout(NamedTuple):
    """The sorted entries cut into chunks (items) of `chunk` lanes, `group` items per step.

    item_tile: [I] the tile of each item (num_tiles: capacity padding)
    ok:        [I, B] lane holds a real entry
    prim:      [I, B] its primitive (any index on padding lanes: `gather` masks them)
    """

    item_tile: jax.Array
    ok: jax.Array
    prim: jax.Array


def tile_chunks(bins: Bins, chunk: int):
    """Per tile [T]: its entries, its chunks of `chunk`, and the end of its chunks in item
    order (a tile's items are chunk_end - chunks .. chunk_end - 1)."""
    counts = bins.tile_start[1:] - bins.tile_start[:-1]
    chunks = ((counts + chunk - 1) // chunk).astype(jnp.int32)
    return counts, chunks, jnp.cumsum(chunks).astype(jnp.int32)


def layout(bins: Bins, grid: TileGrid, config: RenderConfig) -> Layout:
    """Chunks of one tile each, in (tile, depth) order, padded to a whole number of groups."""
    num_tiles = grid.num_tiles
    b, g = config.chunk_for(False), config.group
    capacity = bins.tile.shape[0]
    counts, chunks, chunk_end = tile_chunks(bins, b)
    num_items = -(-(-(-capacity // b) + num_tiles) // g) * g
    item = jnp.arange(num_items, dtype=jnp.int32)
    item_tile = jnp.searchsorted(chunk_end, item, side="right").astype(jnp.int32)  # T = padding
    safe_tile = jnp.minimum(item_tile, num_tiles - 1)
    j = item - (chunk_end[safe_tile] - chunks[safe_tile])
    lane = jnp.arange(b, dtype=jnp.int32)
    pos = j[:, None] * b + lane[None, :]  # position inside the tile's list
    ok = (item_tile < num_tiles)[:, None] & (pos < counts[safe_tile][:, None])
    entry = jnp.where(ok, bins.tile_start[safe_tile][:, None] + pos, 0)
    return Layout(item_tile, ok, bins.prim[entry])


def gather(x: jax.Array, lay: Layout) -> jax.Array:
    """Per-lane rows [I, B, ...] of a per-primitive array; padding lanes read zeros, never a
    real primitive's values (a NaN there would leak)."""
    ok = lay.ok.reshape(lay.ok.shape + (1,) * (x.ndim - 1))
    return jnp.where(ok, take_rows(x, spread(lay.prim, lay.ok, x.shape[0])), 0)


def group_rays(rays, tiles, grid: TileGrid, dtype):
    """Ray origins [G, P or 1, 1, 3] (one per tile for a central camera) and directions
    [G, P, 1, 3] of a group's tiles (zeros without rays)."""
    if rays is None:
        zero = jnp.zeros((1, 1, 1, 3), dtype)
        return zero, zero
    safe = jnp.minimum(tiles, grid.num_tiles - 1)
    return rays[0][safe][:, :, None, :], rays[1][safe][:, :, None, :]


def evaluate(response, camera, a, ray_o, ray_d, tiles, grid: TileGrid, pixel_channels: int):
    """The response on a group: alpha [G, P, B] and the per-pixel outputs [G, P, B, K] (None
    when K = 0), unmasked. `a`: [G, B, A] lane attributes."""
    g, b = a.shape[0], a.shape[1]
    pix = grid.tile * grid.tile
    dtype = a.dtype
    pixel = tile_pixels(tiles, grid, dtype)[:, :, None, :]  # [G, P, 1, 2]
    alpha = response(pixel, ray_o, ray_d, a[:, None, :, :], camera)
    extra = None
    if pixel_channels:
        alpha, extra = alpha
        extra = jnp.broadcast_to(extra, (g, pix, b, pixel_channels)).astype(dtype)
    return jnp.broadcast_to(alpha, (g, pix, b)).astype(dtype), extra


def clamp_alpha(alpha, signed: bool, t_min: float = 0.0):
    """The response's alpha in the compositor's range, and where it was not [same shape].

    The range is [0, 1), less the alphas within `t_min` of 1 (signed responses: (-1, 1), as
    1 - alpha divides in the backward). An alpha of 1 or more, or so close to 1 that the stop
    rule would drop it even on an empty pixel (1 - alpha < t_min: an opaque primitive drew
    nothing), is brought to ALPHA_CAP; below 0 to 0 (signed: beyond +-1 to +-ALPHA_CAP). NaN:
    0, no contribution. Renders count the lanes changed here (`stats["alpha_out_of_range"]`)
    and warn: a response that leaves the range is a spec bug (a missing `min(0.99, ...)`),
    never a silent NaN, clip or empty image."""
    nan = jnp.isnan(alpha)
    if signed:
        bad = nan | (jnp.abs(alpha) >= 1.0)
        lo = -ALPHA_CAP
    else:
        # 1 - alpha < t_min is the stop rule's test on an empty pixel (composite.group_weights)
        bad = nan | (alpha < 0.0) | (alpha >= 1.0) | (1.0 - alpha < t_min)
        lo = 0.0
    fixed = jnp.where(nan, 0.0, jnp.clip(alpha, lo, ALPHA_CAP)).astype(alpha.dtype)
    return jnp.where(bad, fixed, alpha), bad


def running(op, x):
    """Inclusive running `op` (jnp.multiply, jnp.add) along the last axis, in list order.

    Unrolled over the chunk's lanes: XLA fuses it into one pass, several times faster on CPU
    than an associative scan or a reduce-window cumulative op (benchmarks/backward.py)."""
    out = [x[..., 0]]
    for k in range(1, x.shape[-1]):
        out.append(op(out[-1], x[..., k]))
    return jnp.stack(out, axis=-1)


def prefix_sum(x):
    """Inclusive sum along the last axis, as a product with a triangular matrix of ones: one
    matmul, where XLA CPU would run an unrolled sum as one kernel per lane."""
    b = x.shape[-1]
    upper = (jnp.arange(b)[:, None] <= jnp.arange(b)[None, :]).astype(x.dtype)
    return jnp.einsum("...b,bc->...c", x, upper, precision=EXACT)


def segmented_carry(reset, totals, run, op, identity):
    """A per-tile running reduction across the chunks of a group.

    reset: [G] chunk starts a new tile; totals: [G, P] each chunk's own reduction; run: [P] the
    value carried in. Returns the value before each chunk [G, P] and after the group [P].
    (A sequential loop over the few chunks of a group: cheaper than an associative scan.)"""
    before = []
    for i in range(totals.shape[0]):
        run = jnp.where(reset[i], identity, run)
        before.append(run)
        run = op(run, totals[i])
    return jnp.stack(before), run


class Weights(NamedTuple):
    """One group's compositing: w [G, P, B] (zero where not contributing), T [G, P, B] the
    transmittance before each lane (unstopped), live [G, P, B] lane contributes (alpha used and
    not stopped), t_last [P] the transmittance carried out."""

    w: jax.Array
    T: jax.Array
    live: jax.Array
    t_last: jax.Array


def group_weights(alpha, used, t_run, reset, signed: bool, t_min: float) -> Weights:
    """Transmittance and weights of a group of chunks; `alpha` already zero where not `used`."""
    keep = 1.0 - alpha
    incl = running(jnp.multiply, keep)  # [G, P, B]
    excl = jnp.concatenate([jnp.ones_like(incl[:, :, :1]), incl[:, :, :-1]], axis=2)
    t_in, t_last = segmented_carry(reset, incl[:, :, -1], t_run, jnp.multiply, 1.0)
    T = t_in[:, :, None] * excl
    live = used
    if not signed:
        live = used & (t_in[:, :, None] * incl >= t_min)
    w = jnp.where(live, alpha * T, 0.0)
    return Weights(w, T, live, t_last)


def skip_group(tiles, cur_tile, t_run, num_tiles: int, signed: bool, t_min: float):
    """The group is capacity padding, or its tile is already saturated at every pixel."""
    padding = tiles[0] >= num_tiles
    saturated = jnp.all(tiles == cur_tile) & jnp.all(t_run < t_min) & (not signed)
    return padding, padding | saturated


def _distortion(weights: Weights, z, z_run, reset):
    """2 sum_k w_k (z_k W_{k-1} - Z_{k-1}) per pixel [G, P] (W_{k-1} = 1 - T_k, Z_{k-1} the
    prefix sum of w z in the tile), and the carried Z [P]."""
    wz = weights.w * z
    within = prefix_sum(wz)
    within = jnp.concatenate([jnp.zeros_like(within[:, :, :1]), within[:, :, :-1]], axis=2)
    z_in, z_last = segmented_carry(reset, jnp.sum(wz, axis=2), z_run, jnp.add, 0.0)
    prefix = z_in[:, :, None] + within
    d = 2.0 * jnp.sum(wz * (1.0 - weights.T) - weights.w * prefix, axis=2)
    return d[:, :, None], z_last


def composite_autodiff(
    response, camera, a_items, v_items, lay: Layout, grid, config, rays, signed, pixel_channels,
    distortion=None,
):  # fmt: skip
    """The forward scan, differentiated by JAX autodiff (the step is rematerialised)."""
    dtype = a_items.dtype
    num_tiles, pix = grid.num_tiles, grid.tile * grid.tile
    g, b = config.group, config.chunk_for(False)
    num_values = v_items.shape[-1]
    xs = (
        lay.item_tile.reshape(-1, g),
        a_items.reshape(-1, g, b, a_items.shape[-1]),
        v_items.reshape(-1, g, b, num_values),
        lay.ok.reshape(-1, g, b),
    )
    out_channels = num_values + pixel_channels + 2 + (distortion is not None)
    t_min, alpha_min = config.t_min, config.alpha_min

    def group_sums(carry, tiles, a, v, m):
        cur_tile, t_run, z_run = carry
        ray_o, ray_d = group_rays(rays, tiles, grid, dtype)
        alpha, extra = evaluate(response, camera, a, ray_o, ray_d, tiles, grid, pixel_channels)
        alpha, bad = clamp_alpha(alpha, signed, t_min)
        used = m[:, None, :] & ((jnp.abs(alpha) if signed else alpha) >= alpha_min)
        alpha = jnp.where(used, alpha, 0.0)
        if pixel_channels:  # an unused lane's outputs may be NaN (a ray missing a surfel)
            extra = jnp.where(used[..., None], extra, 0.0)
        reset = tiles != jnp.concatenate([cur_tile[None], tiles[:-1]])  # [G]
        wt = group_weights(alpha, used, t_run, reset, signed, t_min)
        parts = [jnp.einsum("gpb,gbv->gpv", wt.w, v, precision=EXACT)]
        if pixel_channels:
            parts.append(jnp.einsum("gpb,gpbk->gpk", wt.w, extra, precision=EXACT))
        parts.append(jnp.sum(wt.w, axis=2, keepdims=True))
        parts.append(jnp.sum(bad & m[:, None, :], axis=2, keepdims=True).astype(dtype))
        if distortion is not None:
            if distortion < num_values:
                z = v[:, None, :, distortion]
            else:
                z = extra[..., distortion - num_values]
            d, z_run = _distortion(wt, z, z_run, reset)
            parts.append(d)
        return (wt.t_last, z_run), jnp.concatenate(parts, axis=2)

    @jax.checkpoint
    def step(carry, x):
        cur_tile, t_run, z_run = carry
        tiles, a, v, m = x
        padding, skip = skip_group(tiles, cur_tile, t_run, num_tiles, signed, t_min)

        def skipped(_):
            return (t_run, z_run), jnp.zeros((g, pix, out_channels), dtype)

        def run(_):
            return group_sums(carry, tiles, a, v, m)

        (t_new, z_new), sums = jax.lax.cond(skip, skipped, run, None)
        last = jnp.where(padding, cur_tile, tiles[-1])
        return (last, t_new, z_new), sums

    init = (jnp.int32(-1), jnp.ones((pix,), dtype), jnp.zeros((pix,), dtype))
    _, sums = jax.lax.scan(step, init, xs)
    sums = sums.reshape(-1, pix, out_channels)
    return jax.ops.segment_sum(sums, lay.item_tile, num_segments=num_tiles + 1)[:num_tiles]
