"""Front-to-back compositing of depth-sorted tile lists, with the method's response per pixel.

The sorted entries are cut into chunks of `chunk` primitives that each belong to one tile; chunks
are visited in (tile, depth) order by one `lax.scan` over groups of `group` chunks, carrying the
running transmittance of the current tile. Within a chunk, transmittance is a cumulative product
along the chunk, so the per-pixel stop rule ("stop before the primitive that would bring T below
t_min") is exact: entry k contributes iff the running product including it stays >= t_min,
which is monotone along the list. A group whose tile is already saturated everywhere, or that is
capacity padding, is skipped with `lax.cond`.

The scan body is rematerialised (`jax.checkpoint`), so the backward pass stores one transmittance
row per step instead of tiles x capacity x pixels alphas.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from .binning import Bins, TileGrid
from .config import RenderConfig


def _segmented_mul(a, b):
    fa, va = a
    fb, vb = b
    return fa | fb, jnp.where(fb, vb, va * vb)


def tile_pixels(tiles: jax.Array, grid: TileGrid, dtype) -> jax.Array:
    """Pixel centres [..., P, 2] (x, y) of the given tile ids [...]."""
    t = grid.tile
    p = jnp.arange(t * t, dtype=jnp.int32).reshape((1,) * tiles.ndim + (t * t,))
    tx = (tiles % grid.tiles_x)[..., None] * t + p % t
    ty = (tiles // grid.tiles_x)[..., None] * t + p // t
    return jnp.stack([tx, ty], -1).astype(dtype) + 0.5


def composite(
    response: Callable,
    camera,
    attrs: jax.Array,  # [N, A]
    values: jax.Array,  # [N, V] what is accumulated: features, then depth
    bins: Bins,
    grid: TileGrid,
    config: RenderConfig,
    rays: tuple[jax.Array, jax.Array] | None = None,  # ([T, P, 3], [T, P, 3]) world rays
    signed: bool = False,
    pixel_channels: int = 0,
) -> jax.Array:
    """Returns per-tile sums [T, P, V + K + 1]: sum_k w_k values_k, then sum_k w_k extra_k for
    the K per-pixel channels the response returns beside alpha (`pixel_channels`), then
    sum_k w_k (= 1 - T).

    `signed`: alpha may be negative (a subtractive primitive). The threshold is on |alpha|, and
    as transmittance is then not monotone along the list, there is no early stop."""
    dtype = attrs.dtype
    num_tiles, pix = grid.num_tiles, grid.tile * grid.tile
    b, g = config.chunk, config.group
    capacity = bins.tile.shape[0]
    counts = bins.tile_start[1:] - bins.tile_start[:-1]  # [T]
    chunks = (counts + b - 1) // b
    chunk_end = jnp.cumsum(chunks)
    num_items = -(-(-(-capacity // b) + num_tiles) // g) * g
    item = jnp.arange(num_items, dtype=jnp.int32)
    item_tile = jnp.searchsorted(chunk_end, item, side="right").astype(jnp.int32)  # T = padding
    safe_tile = jnp.minimum(item_tile, num_tiles - 1)
    j = item - (chunk_end[safe_tile] - chunks[safe_tile])
    lane = jnp.arange(b, dtype=jnp.int32)
    pos = j[:, None] * b + lane[None, :]  # position inside the tile's list
    ok = (item_tile < num_tiles)[:, None] & (pos < counts[safe_tile][:, None])
    entry = jnp.where(ok, bins.tile_start[safe_tile][:, None] + pos, 0)
    prim = jnp.where(ok, bins.prim[entry], 0)
    # Padding lanes read zeros, never a real primitive's values (a NaN there would leak).
    a_items = jnp.where(ok[..., None], attrs[prim], 0)
    v_items = jnp.where(ok[..., None], values[prim], 0)

    xs = (
        item_tile.reshape(-1, g),
        a_items.reshape(-1, g, b, attrs.shape[-1]),
        v_items.reshape(-1, g, b, values.shape[-1]),
        ok.reshape(-1, g, b),
    )
    out_channels = values.shape[-1] + pixel_channels + 1
    t_min, alpha_min = config.t_min, config.alpha_min

    def group_sums(t_run, cur_tile, tiles, a, v, m):
        pixel = tile_pixels(tiles, grid, dtype)[:, :, None, :]  # [G, P, 1, 2]
        if rays is None:
            ray_o = ray_d = jnp.zeros((1, 1, 1, 3), dtype)
        else:
            ray_o = rays[0][jnp.minimum(tiles, num_tiles - 1)][:, :, None, :]
            ray_d = rays[1][jnp.minimum(tiles, num_tiles - 1)][:, :, None, :]
        alpha = response(pixel, ray_o, ray_d, a[:, None, :, :], camera)
        if pixel_channels:
            alpha, extra = alpha
            extra = jnp.broadcast_to(extra, (g, pix, b, pixel_channels)).astype(dtype)
        alpha = jnp.broadcast_to(alpha, (g, pix, b)).astype(dtype)
        strong = (jnp.abs(alpha) if signed else alpha) >= alpha_min
        used = m[:, None, :] & strong
        alpha = jnp.where(used, alpha, 0.0)
        if pixel_channels:  # an unused lane's outputs may be NaN (a ray missing a surfel)
            extra = jnp.where(used[..., None], extra, 0.0)
        keep = 1.0 - alpha
        incl = jax.lax.associative_scan(jnp.multiply, keep, axis=2)  # [G, P, B]
        excl = jnp.concatenate([jnp.ones_like(incl[:, :, :1]), incl[:, :, :-1]], axis=2)
        prev = jnp.concatenate([cur_tile[None], tiles[:-1]])
        reset = tiles != prev  # [G]
        flags, run = jax.lax.associative_scan(
            _segmented_mul, (jnp.broadcast_to(reset[:, None], (g, pix)), incl[:, :, -1]), axis=0
        )
        t_out = jnp.where(flags, run, t_run[None, :] * run)  # [G, P] unstopped T after chunk
        t_prev = jnp.concatenate([t_run[None, :], t_out[:-1]], axis=0)
        t_in = jnp.where(reset[:, None], 1.0, t_prev)
        w = alpha * (t_in[:, :, None] * excl)
        if not signed:
            w = jnp.where(t_in[:, :, None] * incl >= t_min, w, 0.0)
        parts = [jnp.einsum("gpb,gbv->gpv", w, v)]
        if pixel_channels:
            parts.append(jnp.einsum("gpb,gpbk->gpk", w, extra))
        sums = jnp.concatenate([*parts, jnp.sum(w, axis=2, keepdims=True)], axis=2)
        return t_out[-1], sums

    @jax.checkpoint
    def step(carry, x):
        cur_tile, t_run = carry
        tiles, a, v, m = x
        padding = tiles[0] >= num_tiles
        saturated = jnp.all(tiles == cur_tile) & jnp.all(t_run < t_min) & (not signed)

        def skip(_):
            return t_run, jnp.zeros((g, pix, out_channels), dtype)

        def run(_):
            return group_sums(t_run, cur_tile, tiles, a, v, m)

        t_new, sums = jax.lax.cond(padding | saturated, skip, run, None)
        last = jnp.where(padding, cur_tile, tiles[-1])
        return (last, t_new), sums

    init = (jnp.int32(-1), jnp.ones((pix,), dtype))
    _, sums = jax.lax.scan(step, init, xs)
    sums = sums.reshape(num_items, pix, out_channels)
    return jax.ops.segment_sum(sums, item_tile, num_segments=num_tiles + 1)[:num_tiles]
