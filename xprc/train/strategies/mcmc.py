"""`mcmc` (3DGS-MCMC, Kheradmand et al. 2024): dead primitives (opacity < min_opacity) are
relocated onto live ones drawn in proportion to opacity; source and copies share the opacity
`1 - (1 - o)^(1/n)` and the MCMC scale correction; unused slots fill at most `grow_fraction` of
the live count per event; position noise moves near-dead primitives every step.
The correction is exact up to MCMC_MAX_COPIES primitives sharing a source; a source drawn more
often gets the correction for that many (approximate), and is counted as `capped`.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..config import TrainConfig
from .base import Strategy, f32, in_window, per_prim, reset_moments

MCMC_MAX_COPIES = 16


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
    count_names = ("relocated", "capped")
    # counts that mean an approximation: the trainer shows them only when nonzero, and their
    # run total at the end
    count_notes = {
        "capped": f"sources shared by over {MCMC_MAX_COPIES} primitives: their opacity and scale "
        f"correction is the one for {MCMC_MAX_COPIES} (approximate)"
    }

    def hyper(self, config: TrainConfig) -> dict:
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
        return self.relocate_counted(params, opt_state, used, key, hyper)[:4]

    def relocate_counted(self, params, opt_state, used, key, hyper):
        """`relocate`, and the number of sources shared by more than MCMC_MAX_COPIES primitives
        (their correction is approximate): (params, opt, used, moved [N], capped)."""
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
        capped = jnp.sum(copies + 1 > MCMC_MAX_COPIES, dtype=jnp.int32)
        total = jnp.minimum(copies + 1, MCMC_MAX_COPIES)
        o_new = 1.0 - jnp.power(1.0 - o, 1.0 / total.astype(o.dtype))
        o_new = jnp.clip(o_new, hyper["min_opacity"], 1.0 - 1e-6)
        new = {k: jnp.where(per_prim(move, p), p[src], p) for k, p in params.items()}
        change = move | (copies > 0)
        # moved slots take their source's new opacity; sources (src = idx) their own
        new = self.set_opacity(new, change, (o_new * sign)[src])
        factor = mcmc_scale_factor(o, o_new, total)[src]
        new = self.rescale(new, self.method.activate(new), change, factor)
        return new, reset_moments(opt_state, change), used | move, move, capped

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
            p, o, u, moved, capped = self.relocate_counted(p, o, u, k_reloc, hyper)
            return p, o, u, {"relocated": jnp.sum(moved, dtype=jnp.int32), "capped": capped}

        zero = {k: jnp.int32(0) for k in self.count_names}
        params, opt_state, used, counts = jax.lax.cond(
            in_window(ctx["step"], hyper),
            event,
            lambda a: (*a, zero),
            (params, opt_state, used),
        )
        return params, opt_state, used, sstate, counts
