"""A method-agnostic custom VJP for compositing (issue 17).

Per pixel, the composited list gives out = sum_k w_k c_k with w_k = alpha_k T_k,
T_k = prod_{i<k} (1 - alpha_i) and c_k = [values_k, extra_k, 1] (the per-pixel outputs and the
weight channel included). With g the output's cotangent at the pixel:

    dL/dc_k     = w_k g
    dL/dalpha_k = T_k (g . c_k) - S_k / (1 - alpha_k),    S_k = sum_{j>k} w_j (g . c_j)

over the contributing entries (alpha used and not stopped; the rest have zero derivative: a
skipped or capped alpha is decided by the forward's masks, which are constants). The backward is
a second front-to-back `lax.scan` over the same groups as the forward, with the same saturated-
group skip: it recomputes each group's alpha and per-pixel outputs with the spec's response,
carries the transmittance and the prefix sum of w (g . c), and takes S_k = g . out - prefix_k,
since g . out is the sum over the whole list. Attribute, camera and ray cotangents come from
`jax.vjp` of the response; value cotangents are per-lane sums over pixels (the gather's
transpose, outside this function, turns them into per-primitive segment sums). Nothing of size
tiles x capacity x pixels is stored: the residuals are the lane inputs and the per-tile output.

The stop rule makes 1 - alpha_k > 0 for every contributing entry (T_k (1 - alpha_k) >= t_min);
a signed response has no stop rule and must keep |alpha| < 1 (the language asks for a cap, the
shipped specs use 0.99).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ..runtime import EXACT
from .binning import TileGrid
from .composite_scan import (
    Layout,
    clamp_alpha,
    composite_autodiff,
    evaluate,
    group_rays,
    group_weights,
    prefix_sum,
    segmented_carry,
    skip_group,
)
from .config import RenderConfig


def composite_custom(
    response, camera, a_items, v_items, lay: Layout, grid: TileGrid, config: RenderConfig,
    rays, signed: bool, pixel_channels: int,
):  # fmt: skip
    """`composite` on gathered lanes (a_items [I, B, A], v_items [I, B, V]) with the custom
    VJP; returns the per-tile sums [T, P, V + K + 2] (the last: the clamped-alpha count)."""
    static = (response, grid, config, signed, pixel_channels)
    return _core(static, a_items, v_items, camera, rays, lay.item_tile, lay.ok)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _core(static, a_items, v_items, camera, rays, item_tile, ok):
    return _forward(static, a_items, v_items, camera, rays, item_tile, ok)


def _forward(static, a_items, v_items, camera, rays, item_tile, ok):
    response, grid, config, signed, pixel_channels = static
    lay = Layout(item_tile, ok, jnp.zeros_like(item_tile))
    return composite_autodiff(
        response, camera, a_items, v_items, lay, grid, config, rays, signed, pixel_channels
    )


def _core_fwd(static, a_items, v_items, camera, rays, item_tile, ok):
    out = _forward(static, a_items, v_items, camera, rays, item_tile, ok)
    return out, (a_items, v_items, camera, rays, item_tile, ok, out)


def _group_grad(static, camera, rays, g_out, g_total, carry, tiles, a, v, m):
    """One group's cotangents: lane attributes [G, B, A], lane values [G, B, V], rays
    (origins [G, P or 1, 3], directions [G, P, 3], or ()), and the carry (tile, T, prefix of
    w (g . c), camera cotangent)."""
    response, grid, config, signed, pixel_channels = static
    num_values = v.shape[-1]
    cur_tile, t_run, s_run, cam_ct = carry
    ray_o, ray_d = group_rays(rays, tiles, grid, a.dtype)

    def fn(a, cam, ro, rd):
        alpha, extra = evaluate(response, cam, a, ro, rd, tiles, grid, pixel_channels)
        return clamp_alpha(alpha, signed, config.t_min)[0], extra

    (alpha, extra), vjp_fn = jax.vjp(fn, a, camera, ray_o, ray_d)
    used = m[:, None, :] & ((jnp.abs(alpha) if signed else alpha) >= config.alpha_min)
    alpha = jnp.where(used, alpha, 0.0)
    reset = tiles != jnp.concatenate([cur_tile[None], tiles[:-1]])  # [G]
    wt = group_weights(alpha, used, t_run, reset, signed, config.t_min)
    safe = jnp.minimum(tiles, grid.num_tiles - 1)
    gt = g_out[safe]  # [G, P, C]
    gv = gt[..., :num_values]
    at_w = num_values + pixel_channels  # the weight channel (the count after it has no gradient)
    gc = jnp.einsum("gpv,gbv->gpb", gv, v, precision=EXACT) + gt[..., at_w : at_w + 1]  # g . c_k
    d_extra = None
    if pixel_channels:
        ge = gt[..., num_values : num_values + pixel_channels]
        extra = jnp.where(used[..., None], extra, 0.0)
        gc = gc + jnp.einsum("gpk,gpbk->gpb", ge, extra, precision=EXACT)
        d_extra = wt.w[..., None] * ge[:, :, None, :]
    within = prefix_sum(wt.w * gc)  # inclusive prefix inside the chunk
    s_in, s_last = segmented_carry(reset, within[:, :, -1], s_run, jnp.add, 0.0)
    after = g_total[safe][:, :, None] - (s_in[:, :, None] + within)  # S_k
    d_alpha = jnp.where(wt.live, wt.T * gc - after / (1.0 - alpha), 0.0)
    d_a, d_cam, d_ro, d_rd = vjp_fn((d_alpha, d_extra))
    d_v = jnp.einsum("gpb,gpv->gbv", wt.w, gv, precision=EXACT)
    cam_ct = jax.tree_util.tree_map(jnp.add, cam_ct, d_cam)
    rays_ct = () if rays is None else (d_ro[:, :, 0, :], d_rd[:, :, 0, :])
    return (wt.t_last, s_last, cam_ct), (d_a, d_v, rays_ct)


def _core_bwd(static, residuals, g_out):
    a_items, v_items, camera, rays, item_tile, ok, out = residuals
    _, grid, config, signed, _ = static
    dtype = a_items.dtype
    num_tiles, pix = grid.num_tiles, grid.tile * grid.tile
    g, b = config.group, config.chunk_for(False)
    num_values = v_items.shape[-1]
    t_min = config.t_min
    g_out = g_out.at[..., -1].set(0.0)  # the clamped-alpha count: no gradient
    g_total = jnp.sum(g_out * out, axis=-1)  # [T, P]: g . out = sum_k w_k (g . c_k)

    def group_grad(carry, tiles, a, v, m):
        return _group_grad(static, camera, rays, g_out, g_total, carry, tiles, a, v, m)

    def step(carry, x):
        cur_tile, t_run, s_run, cam_ct = carry
        tiles, a, v, m = x
        padding, skip = skip_group(tiles, cur_tile, t_run, num_tiles, signed, t_min)

        def skipped(_):
            ray_zero = (
                () if rays is None else tuple(jnp.zeros((g,) + r.shape[1:], dtype) for r in rays)
            )
            return (t_run, s_run, cam_ct), (jnp.zeros_like(a), jnp.zeros_like(v), ray_zero)

        def run(_):
            return group_grad(carry, tiles, a, v, m)

        (t_new, s_new, cam_new), outs = jax.lax.cond(skip, skipped, run, None)
        last = jnp.where(padding, cur_tile, tiles[-1])
        return (last, t_new, s_new, cam_new), outs

    xs = (
        item_tile.reshape(-1, g),
        a_items.reshape(-1, g, b, a_items.shape[-1]),
        v_items.reshape(-1, g, b, num_values),
        ok.reshape(-1, g, b),
    )
    cam_zero = jax.tree_util.tree_map(jnp.zeros_like, camera)
    init = (jnp.int32(-1), jnp.ones((pix,), dtype), jnp.zeros((pix,), dtype), cam_zero)
    (_, _, _, d_cam), (d_a, d_v, d_rays) = jax.lax.scan(step, init, xs)
    d_rays_out = None
    if rays is not None:
        d_rays_out = tuple(
            jax.ops.segment_sum(
                r.reshape((-1,) + r.shape[2:]), item_tile, num_segments=num_tiles + 1
            )[:num_tiles]
            for r in d_rays
        )
    d_a = d_a.reshape(a_items.shape)
    d_v = d_v.reshape(v_items.shape)
    return d_a, d_v, d_cam, d_rays_out, None, None


_core.defvjp(_core_fwd, _core_bwd)
