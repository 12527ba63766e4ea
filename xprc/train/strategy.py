"""Densification strategies behind one interface, both inside a static capacity.

A strategy sees the whole train step (it runs inside the one jitted function) through four hooks:
`init_state` (its per-primitive arrays, checkpointed), `hyper` (its traced hyper-parameters),
`regulariser` (a term added to the loss) and `update` (after Adam: move, clone, split, prune,
reset; returns per-event counts). Shapes never change, so the step traces once per run.

- `mcmc` (3DGS-MCMC, Kheradmand et al. 2024): dead primitives (opacity < min_opacity) are
  relocated onto live ones drawn in proportion to opacity; source and copies share the opacity
  `1 - (1 - o)^(1/n)` and the MCMC scale correction; unused slots fill at most `grow_fraction`
  of the live count per event; position noise moves near-dead primitives every step.
- `adc` (3DGS adaptive density control, Kerbl et al. 2023): see `xprc.train.adc`.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..method_info import MethodInfo
from .config import TrainConfig
from .roles import check_invertible, inverse_jnp, require_roles, rescale_raw, spec_by_name

MCMC_MAX_COPIES = 16


def flat(x: jax.Array) -> jax.Array:
    return x.reshape(x.shape[0])


def per_prim(mask: jax.Array, like: jax.Array) -> jax.Array:
    """A [N] mask/vector shaped to broadcast against `like` [N, ...]."""
    return mask.reshape((like.shape[0],) + (1,) * (like.ndim - 1))


def reset_moments(opt_state, change: jax.Array):
    """Zero the optimiser state (Adam moments) of the primitives in `change` [N]."""
    n = change.shape[0]

    def reset(leaf):
        if getattr(leaf, "ndim", 0) >= 1 and leaf.shape[0] == n:
            return jnp.where(per_prim(change, leaf), 0.0, leaf).astype(leaf.dtype)
        return leaf

    return jax.tree_util.tree_map(reset, opt_state)


def in_window(done, hyper, every: str = "refine_every") -> jax.Array:
    """A densification event after step `done` (1-based count of finished steps)?"""
    return (
        (hyper[every] > 0)
        & (done >= hyper["refine_from"])
        & (done < hyper["refine_until"])
        & (done % jnp.maximum(hyper[every], 1) == 0)
    )


class Strategy:
    """Base: roles, hyper-parameters shared by both strategies and the hook defaults."""

    name = "none"
    count_names: tuple[str, ...] = ()
    needs_screen_grad = False
    freeze_unused = False

    def __init__(self, method) -> None:
        self.method = method
        why = f"strategy '{self.name}'"
        self.roles = require_roles(method, ("position", "opacity", "scale"), why)
        check_invertible(method, self.roles["opacity"], f"{why} (it sets the opacity)")
        check_invertible(method, self.roles["scale"], f"{why} (it rescales sizes)")
        self.specs = spec_by_name(method)
        # A signed-alpha spec (splatting and scooping): a negative component is as alive as a
        # positive one of the same magnitude; strategies read |opacity| and keep the sign.
        self.signed = MethodInfo.of(method).signed_alpha

    def default_capacity(self, n_points: int, config: TrainConfig) -> int:
        return n_points

    def init_state(self, n: int) -> dict:
        return {}

    def hyper(self, config: TrainConfig) -> dict:
        f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
        i32 = lambda x: jnp.asarray(x, jnp.int32)  # noqa: E731
        return {
            "refine_every": i32(config.refine_every),
            "refine_from": i32(config.refine_from),
            "refine_until": i32(config.until()),
            "min_opacity": f32(config.min_opacity),
        }

    def opacity(self, act) -> jax.Array:  # [N] the magnitude that decides live and dead
        o = flat(act[self.roles["opacity"]])
        return jnp.abs(o) if self.signed else o

    def opacity_sign(self, act) -> jax.Array:  # [N] +1, or -1 for a scooping component
        o = flat(act[self.roles["opacity"]])
        return jnp.where(o < 0, -1.0, 1.0).astype(o.dtype)

    def sizes(self, act) -> jax.Array:  # [N, S] activated sizes
        s = act[self.roles["scale"]]
        return jnp.abs(s.reshape(s.shape[0], -1))

    def set_opacity(self, params, mask, value):
        """Raw opacity whose activation is `value` [N] where mask [N]."""
        name = self.roles["opacity"]
        p = params[name]
        raw = inverse_jnp(self.specs[name], value).astype(p.dtype).reshape(p.shape)
        return {**params, name: jnp.where(per_prim(mask, p), raw, p)}

    def rescale(self, params, act, mask, factor):
        """Sizes times factor [N] where mask [N] (through the activation)."""
        name = self.roles["scale"]
        p = params[name]
        f = per_prim(factor, p).astype(p.dtype)
        new = rescale_raw(self.specs[name], p, act[name], f)
        return {**params, name: jnp.where(per_prim(mask, p), new, p)}

    def regulariser(self, act, hyper) -> jax.Array:
        return jnp.float32(0.0)

    def live(self, act, used, hyper) -> jax.Array:
        return jnp.sum(used & (self.opacity(act) >= hyper["min_opacity"]), dtype=jnp.int32)

    def update(self, params, opt_state, used, sstate, ctx):
        """After Adam. ctx: step (finished count), key, hyper, lr_pos, screen_grad [N] and
        visible [N] (when needs_screen_grad). Returns (params, opt, used, sstate, counts)."""
        raise NotImplementedError


# ----------------------------------------------------------------------------- MCMC


@functools.cache
def _mcmc_table(n_max: int = MCMC_MAX_COPIES) -> np.ndarray:
    """T[n, k] = sum_{i=k+1..n} C(i-1, k) (-1)^k / sqrt(k+1), [n_max + 1, n_max] float64."""
    table = np.zeros((n_max + 1, n_max))
    for n in range(1, n_max + 1):
        for i in range(1, n + 1):
            for k in range(i):
                table[n, k] += math.comb(i - 1, k) * (-1.0) ** k / math.sqrt(k + 1)
    return table


def mcmc_scale_factor(o_old, o_new, n):
    """3DGS-MCMC scale correction for a primitive of opacity o_old split into n copies of
    opacity o_new: o_old / sum_{i=1..n} sum_{k<i} C(i-1, k) (-1)^k o_new^(k+1) / sqrt(k+1).
    o_old, o_new [N] float, n [N] int (clipped to 1..16)."""
    table = jnp.asarray(_mcmc_table(), o_new.dtype)
    rows = table[jnp.clip(n, 1, MCMC_MAX_COPIES)]  # [N, K]
    k = jnp.arange(1, MCMC_MAX_COPIES + 1, dtype=o_new.dtype)
    powers = jnp.power(o_new[:, None], k[None, :])
    denom = jnp.sum(rows * powers, axis=1)
    return o_old / jnp.maximum(denom, 1e-12)


class MCMC(Strategy):
    name = "mcmc"
    count_names = ("relocated",)

    def hyper(self, config: TrainConfig) -> dict:
        f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
        return {
            **super().hyper(config),
            "grow_fraction": f32(config.grow_fraction),
            "noise_lr": f32(config.noise_lr),
            "opacity_reg": f32(config.opacity_reg),
            "scale_reg": f32(config.scale_reg),
        }

    def regulariser(self, act, hyper):
        o = self.opacity(act)
        s = act[self.roles["scale"]]
        return hyper["opacity_reg"] * jnp.mean(o) + hyper["scale_reg"] * jnp.mean(jnp.abs(s))

    def live(self, act, used, hyper):
        return jnp.sum(self.opacity(act) >= hyper["min_opacity"], dtype=jnp.int32)

    def relocate(self, params, opt_state, used, key, hyper):
        """Dead slots take live sources' values; returns (params, opt, used, moved [N])."""
        act = self.method.activate(params)
        o = self.opacity(act)
        sign = self.opacity_sign(act)
        n = o.shape[0]
        live = o >= hyper["min_opacity"]
        dead = ~live
        n_live = jnp.sum(live, dtype=jnp.int32)
        fresh = dead & ~used
        allowance = jnp.floor(hyper["grow_fraction"] * n_live.astype(jnp.float32))
        rank = jnp.cumsum(fresh, dtype=jnp.int32) - 1
        move = ((dead & used) | (fresh & (rank < allowance.astype(jnp.int32)))) & (n_live > 0)
        cdf = jnp.cumsum(jnp.where(live, o, 0.0))
        u = jax.random.uniform(key, (n,), dtype=cdf.dtype) * cdf[-1]
        idx = jnp.arange(n, dtype=jnp.int32)
        src = jnp.clip(jnp.searchsorted(cdf, u, side="right").astype(jnp.int32), 0, n - 1)
        src = jnp.where(move, src, idx)
        copies = jax.ops.segment_sum(move.astype(jnp.int32), src, num_segments=n)
        # primitives sharing a source after the move (capped, as gsplat caps its ratios)
        total = jnp.minimum(copies + 1, MCMC_MAX_COPIES)
        o_new = 1.0 - jnp.power(1.0 - o, 1.0 / total.astype(o.dtype))
        o_new = jnp.clip(o_new, hyper["min_opacity"], 1.0 - 1e-6)
        new = {k: jnp.where(per_prim(move, p), p[src], p) for k, p in params.items()}
        change = move | (copies > 0)
        # moved slots take their source's new opacity; sources (src = idx) their own
        new = self.set_opacity(new, change, (o_new * sign)[src])
        factor = mcmc_scale_factor(o, o_new, total)[src]
        new = self.rescale(new, self.method.activate(new), change, factor)
        return new, reset_moments(opt_state, change), used | move, move

    def noise(self, params, key, lr_pos, hyper):
        """Position noise ~ N(0, mean(size^2)) * lr_pos * noise_lr * gate(1 - opacity)."""
        pos = self.roles["position"]
        act = self.method.activate(params)
        o = self.opacity(act)
        s = self.sizes(act)
        var = jnp.mean(s * s, axis=1)
        gate = jax.nn.sigmoid(100.0 * ((1.0 - o) - 0.995))
        p = params[pos]
        eta = jax.random.normal(key, p.shape, dtype=p.dtype)
        scale = (gate * var * lr_pos * hyper["noise_lr"]).astype(p.dtype)
        return {**params, pos: p + eta * per_prim(scale, p)}

    def update(self, params, opt_state, used, sstate, ctx):
        hyper = ctx["hyper"]
        k_noise, k_reloc = jax.random.split(ctx["key"])
        params = self.noise(params, k_noise, ctx["lr_pos"], hyper)

        def event(a):
            p, o, u = a
            p, o, u, moved = self.relocate(p, o, u, k_reloc, hyper)
            return p, o, u, jnp.sum(moved, dtype=jnp.int32)

        params, opt_state, used, moved = jax.lax.cond(
            in_window(ctx["step"], hyper),
            event,
            lambda a: (*a, jnp.int32(0)),
            (params, opt_state, used),
        )
        return params, opt_state, used, sstate, {"relocated": moved}


def make_strategy(name: str, method) -> Strategy:
    from .adc import ADC

    return {"mcmc": MCMC, "adc": ADC}[name](method)
