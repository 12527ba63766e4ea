"""Adaptive density control (3DGS, Kerbl et al. 2023) inside a static capacity.

Every step each visible primitive's screen-space centre gradient is accumulated: the gradient of
the loss with respect to a 2D offset of its projected centre, in NDC units (pixels x W/2, H/2, as
3DGS and gsplat measure it). The trainer obtains it for any spec from the position gradient:
moving the centre by (dx, dy) pixels is moving the position by R^T (dx z / fx, dy z / fy, 0), so
dL/d(dx, dy) = ((R g)_x z / fx, (R g)_y z / fy) (exact for a pinhole; the local linearisation
for other lenses).

Every `refine_every` steps in [refine_from, refine_until), primitives whose mean gradient exceeds
`grad_threshold`:
  - clone when small (largest size <= percent_dense x scene scale): an exact copy in a free slot;
  - split when large: the original and a copy both move by a sample of N(0, (k size)^2)
    (isotropic: the spec declares no rotation role; k = `split_offset`, else the spec's
    `const split_spread`, else 1 as for Gaussians, whose size is a standard deviation; the
    octahedron declares 1/sqrt(10), its size being the vertex distance: the samples must stay
    inside the parent) and their sizes are divided by `split_factor`;
the highest gradients first, at most as many as there are free slots (so the capacity is never
exceeded; the candidates left without a slot are counted as `skipped`). Then primitives with
opacity < min_opacity (and, after the first opacity reset, a largest size above prune_scale x
scene scale) are pruned: their slot is freed and made invisible. Every `reset_every` steps in
the window, each opacity is clamped to 2 x min_opacity. Moved, copied and reset primitives
restart their Adam moments; free slots get no updates.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ...method_info import MethodInfo
from ...runtime import EXACT
from ..config import TrainConfig
from .base import Strategy, f32, i32, in_window, per_prim, reset_moments


def screen_gradient(g_pos: jax.Array, positions: jax.Array, camera) -> jax.Array:
    """dL/d(centre offset) in NDC units [N, 2] from dL/d(position) [N, 3], for one camera."""
    R, t = camera.R.astype(g_pos.dtype), camera.t.astype(g_pos.dtype)
    z = jnp.matmul(positions, R[2], precision=EXACT) + t[2]  # [N] depth
    g_cam = jnp.matmul(g_pos, R.T, precision=EXACT)  # [N, 3] = R g
    gx = g_cam[:, 0] * z / camera.fx.astype(g_pos.dtype) * (0.5 * camera.width)
    gy = g_cam[:, 1] * z / camera.fy.astype(g_pos.dtype) * (0.5 * camera.height)
    return jnp.stack([gx, gy], axis=-1)


class ADC(Strategy):
    name = "adc"
    count_names = ("cloned", "split", "pruned", "skipped")
    # counts that mean something was not done: the trainer shows them only when nonzero, and
    # their run total at the end
    count_notes = {"skipped": "over the gradient threshold but no free slot: not cloned or split"}
    needs_screen_grad = True
    freeze_unused = True  # a pruned or never-used slot gets no update until it is refilled

    def default_capacity(self, n_points: int, config: TrainConfig) -> int:
        return max(int(round(config.adc_capacity_factor * n_points)), n_points)

    def default_capacity_words(self, n_points: int, config: TrainConfig) -> str:
        return (f"ADC's default: adc_capacity_factor {config.adc_capacity_factor:g} x the "
                f"{n_points:,} initial points")  # fmt: skip

    def init_state(self, n: int) -> dict:
        return {
            "grad_sum": jnp.zeros((n,), jnp.float32),
            "grad_count": jnp.zeros((n,), jnp.int32),
        }

    def hyper(self, config: TrainConfig) -> dict:
        return {
            **super().hyper(config),
            "grad_threshold": f32(config.grad_threshold),
            "percent_dense": f32(config.percent_dense),
            "split_factor": f32(config.split_factor),
            "split_offset": f32(self.split_offset(config)),
            "reset_every": i32(config.reset_every),
            "prune_scale": f32(config.prune_scale),
        }

    def split_offset(self, config: TrainConfig) -> float:
        """The split offset scale: the config's, else the spec's `const split_spread` (the
        primitive's per-axis spatial std over its `role scale` size), else 1 (a Gaussian's size
        is its standard deviation)."""
        if config.split_offset is not None:
            return float(config.split_offset)
        return float(MethodInfo.of(self.method).constants.get("split_spread", 1.0))

    def live(self, act, used, hyper):
        return jnp.sum(used, dtype=jnp.int32)

    def densify(self, params, opt_state, used, sstate, key, hyper, scene_scale):
        """Clone / split into free slots, then prune. Returns (..., counts: cloned, split,
        pruned and skipped, the candidates that found no free slot)."""
        n = used.shape[0]
        act = self.method.activate(params)
        size = jnp.max(self.sizes(act), axis=1)
        avg = sstate["grad_sum"] / jnp.maximum(sstate["grad_count"], 1).astype(jnp.float32)
        cand = used & (avg > hyper["grad_threshold"])
        big = size > hyper["percent_dense"] * scene_scale
        free = ~used
        # the k-th candidate by gradient (highest first) goes to the k-th free slot
        order = jnp.argsort(jnp.where(cand, -avg, jnp.inf), stable=True).astype(jnp.int32)
        n_cand = jnp.sum(cand, dtype=jnp.int32)
        n_take = jnp.minimum(n_cand, jnp.sum(free, dtype=jnp.int32))
        cand_rank = jnp.zeros((n,), jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
        take = cand & (cand_rank < n_take)
        free_rank = jnp.cumsum(free, dtype=jnp.int32) - 1
        fill = free & (free_rank < n_take)
        idx = jnp.arange(n, dtype=jnp.int32)
        src = jnp.where(fill, order[jnp.clip(free_rank, 0, n - 1)], idx)
        new = {k: jnp.where(per_prim(fill, p), p[src], p) for k, p in params.items()}
        split = (take & big) | (fill & big[src])  # split sources and their copies
        new = self._split(new, split, key, size[src], hyper)
        changed = fill | split
        opt_state = reset_moments(opt_state, changed)
        used = used | fill
        # prune (after growth, as gsplat): dead, or too large once the opacity was reset
        act = self.method.activate(new)
        o = self.opacity(act)
        large = jnp.max(self.sizes(act), axis=1) > hyper["prune_scale"] * scene_scale
        after_reset = (hyper["reset_every"] > 0) & (hyper["step"] > hyper["reset_every"])
        prune = used & ((o < hyper["min_opacity"]) | (large & after_reset))
        new = self.set_opacity(new, prune, jnp.full((n,), 1e-8, o.dtype))
        used = used & ~prune
        counts = {
            "cloned": jnp.sum(take & ~big, dtype=jnp.int32),
            "split": jnp.sum(take & big, dtype=jnp.int32),
            "pruned": jnp.sum(prune, dtype=jnp.int32),
            "skipped": n_cand - n_take,  # candidates beyond the free slots
        }
        return new, opt_state, used, counts

    def _split(self, params, mask, key, size, hyper):
        pos = self.roles["position"]
        act = self.method.activate(params)
        p = params[pos]
        std = per_prim(size * hyper["split_offset"], p).astype(p.dtype)
        offset = jax.random.normal(key, p.shape, p.dtype) * std
        params = {**params, pos: jnp.where(per_prim(mask, p), p + offset, p)}
        factor = jnp.full(mask.shape, 1.0, jnp.float32) / hyper["split_factor"]
        return self.rescale(params, act, mask, factor)

    def update(self, params, opt_state, used, sstate, ctx):
        hyper, done = ctx["hyper"], ctx["step"]
        sstate = {
            "grad_sum": sstate["grad_sum"] + jnp.where(ctx["visible"], ctx["screen_grad"], 0.0),
            "grad_count": sstate["grad_count"] + ctx["visible"].astype(jnp.int32),
        }
        zero = {k: jnp.int32(0) for k in self.count_names}
        h = {**hyper, "step": done}

        def event(a):
            p, o, u = a
            p, o, u, counts = self.densify(p, o, u, sstate, ctx["key"], h, ctx["scene_scale"])
            return p, o, u, counts

        do = in_window(done, hyper)
        params, opt_state, used, counts = jax.lax.cond(
            do, event, lambda a: (*a, zero), (params, opt_state, used)
        )
        sstate = jax.tree_util.tree_map(lambda x: jnp.where(do, jnp.zeros_like(x), x), sstate)
        reset = (
            (hyper["reset_every"] > 0)
            & (done % jnp.maximum(hyper["reset_every"], 1) == 0)
            & (done < hyper["refine_until"])
        )
        params, opt_state = jax.lax.cond(
            reset,
            lambda a: self._reset_opacity(*a, hyper["min_opacity"]),
            lambda a: a,
            (params, opt_state),
        )
        return params, opt_state, used, sstate, counts

    def _reset_opacity(self, params, opt_state, min_opacity):
        """Opacities clamped to 2 x min_opacity; the opacity's Adam moments restart."""
        act = self.method.activate(params)
        o = self.opacity(act)
        capped = jnp.minimum(o, 2.0 * min_opacity) * self.opacity_sign(act)
        new = self.set_opacity(params, o > 2.0 * min_opacity, capped)
        name = self.roles["opacity"]

        def zero(path, leaf):
            keys = [getattr(k, "key", None) for k in path]
            return jnp.zeros_like(leaf) if name in keys else leaf

        return new, jax.tree_util.tree_map_with_path(zero, opt_state)
