"""The dense same-maths baseline of the benchmark (issue 17): what sparsity has to beat.

The RECTANGLE entries of the renderer (its projection, binning and depth sort without the culling
of a spec's `ellipse` output: every tile of the footprint's bounding rectangle, what a plain
`radius`/`radii`/`box` footprint gives), the same per-entry maths (the spec's `response`, the
1/255 skip, transmittance products per chunk of 32 entries, features + weight sums), the same
XLA, but no skipping of any kind: every (primitive, tile) entry is evaluated at all 256 pixels of
its tile, saturated chunks and padding included, and nothing stops early (so it differs from the
render only by what the t_min stop rule leaves out, at most the transmittance left at the stop;
the benchmark records the largest difference). The renderer's forward divided by this is the
fraction of dense work it pays for; the entries an ellipse culls count among its savings.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from xprc.pipeline.binning import TileGrid, bin_and_sort
from xprc.pipeline.composite_scan import tile_pixels
from xprc.pipeline.config import RenderConfig
from xprc.runtime import EXACT


def _chunk_layout(bins, grid: TileGrid, chunk: int):
    """Entries cut into chunks of `chunk` that each belong to one tile (the renderer's layout)."""
    capacity = bins.tile.shape[0]
    counts = bins.tile_start[1:] - bins.tile_start[:-1]
    chunks = (counts + chunk - 1) // chunk
    chunk_end = jnp.cumsum(chunks)
    num_items = -(-capacity // chunk) + grid.num_tiles
    item = jnp.arange(num_items, dtype=jnp.int32)
    item_tile = jnp.searchsorted(chunk_end, item, side="right").astype(jnp.int32)
    safe = jnp.minimum(item_tile, grid.num_tiles - 1)
    j = item - (chunk_end[safe] - chunks[safe])
    pos = j[:, None] * chunk + jnp.arange(chunk, dtype=jnp.int32)[None, :]
    ok = (item_tile < grid.num_tiles)[:, None] & (pos < counts[safe][:, None])
    entry = jnp.where(ok, bins.tile_start[safe][:, None] + pos, 0)
    return item_tile, safe, jnp.where(ok, bins.prim[entry], 0), ok


def dense_render(method, config: RenderConfig, params, camera):
    """Image [H, W, C] from the dense evaluation (no background)."""
    grid = TileGrid(camera.width, camera.height, config.tile_size)
    proj = method.project(params, camera)
    attrs = proj["attrs"]
    dtype = attrs.dtype
    values = jnp.concatenate([proj["features"].astype(dtype), proj["depth"][:, None]], -1)
    bins = bin_and_sort(proj["box"], proj["valid"], proj["depth"], grid, config.max_entries)
    item_tile, safe, prim, ok = _chunk_layout(bins, grid, config.chunk_for(False))
    rays = None
    if method.USES_RAY:
        pix = tile_pixels(jnp.arange(grid.num_tiles, dtype=jnp.int32), grid, dtype)
        rays = camera.pixel_rays(pix[..., 0], pix[..., 1])
        if camera.central:  # as the renderer does: one origin per tile
            rays = (rays[0][:, :1], rays[1])

    def chunk_sums(x):
        tile, a, v, m = x
        pixel = tile_pixels(tile[None], grid, dtype)[0][:, None, :]  # [P, 1, 2]
        if rays is None:
            ro = rd = jnp.zeros((1, 1, 3), dtype)
        else:
            ro, rd = rays[0][tile][:, None, :], rays[1][tile][:, None, :]
        alpha = response_alpha(method, pixel, ro, rd, a[None], camera)  # [P, B]
        alpha = jnp.where(m[None, :] & (alpha >= config.alpha_min), alpha, 0.0)
        keep = 1.0 - alpha
        incl = jnp.cumprod(keep, axis=1)
        excl = jnp.concatenate([jnp.ones_like(incl[:, :1]), incl[:, :-1]], axis=1)
        w = alpha * excl
        blended = jnp.matmul(w, v, precision=EXACT)
        sums = jnp.concatenate([blended, jnp.sum(w, axis=1, keepdims=True)], axis=1)
        return sums, incl[:, -1]  # per-chunk sums before the previous chunks' transmittance

    xs = (safe, attrs[prim], values[prim], ok)
    sums, t_chunk = jax.lax.map(chunk_sums, xs)  # [I, P, V + 1], [I, P]
    # Transmittance in front of each chunk: product of the earlier chunks of the same tile.
    log_t = jnp.log(jnp.maximum(t_chunk, 1e-30))
    seg = jnp.where(ok[:, 0], item_tile, grid.num_tiles)
    csum = jnp.cumsum(log_t, axis=0) - log_t
    start = jax.ops.segment_min(jnp.arange(seg.shape[0]), seg, num_segments=grid.num_tiles + 1)[seg]
    before = jnp.exp(csum - csum[start])
    sums = sums * before[:, :, None]
    tiles = jax.ops.segment_sum(sums, seg, num_segments=grid.num_tiles + 1)[: grid.num_tiles]
    t = grid.tile
    img = tiles.reshape(grid.tiles_y, grid.tiles_x, t, t, -1).transpose(0, 2, 1, 3, 4)
    img = img.reshape(grid.tiles_y * t, grid.tiles_x * t, -1)[: grid.height, : grid.width]
    return img[..., : values.shape[-1] - 1]


def response_alpha(method, pixel, ray_o, ray_d, attrs, camera):
    """The response's alpha [P, B]; a spec with per-pixel outputs (2DGS) returns (alpha, extra)
    and only its alpha is composited here (so the baseline is cheaper than the renderer)."""
    alpha = method.response(pixel, ray_o, ray_d, attrs, camera)
    if isinstance(alpha, tuple):
        alpha = alpha[0]
    return jnp.broadcast_to(alpha, pixel.shape[:-2] + attrs.shape[-2:-1])


@functools.cache
def dense_fn(method, config: RenderConfig):
    return jax.jit(functools.partial(dense_render, method, config))
