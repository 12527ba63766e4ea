"""The strategy interface (`Strategy`) and the helpers both strategies share.

A strategy sees the whole train step (it runs inside the one jitted function) through four hooks:
`init_state` (its per-primitive arrays, checkpointed), `hyper` (its traced hyper-parameters),
`regulariser` (a term added to the loss) and `update` (after Adam: move, clone, split, prune,
reset; returns per-event counts). Shapes never change, so the step traces once per run.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ...method_info import MethodInfo
from ..config import TrainConfig
from ..roles import check_invertible, inverse_jnp, require_roles, rescale_raw, spec_by_name


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


def f32(x) -> jax.Array:
    """A hyperparameter as a float32 scalar array (`Strategy.hyper`): the step takes them as
    arrays, with fixed dtypes, not as Python numbers."""
    return jnp.asarray(x, jnp.float32)


def i32(x) -> jax.Array:
    """A count or step number as an int32 scalar array (`Strategy.hyper`), for the same reason."""
    return jnp.asarray(x, jnp.int32)


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

    def default_capacity_words(self, n_points: int, config: TrainConfig) -> str:
        """Where `default_capacity` comes from, for a message."""
        return f"the default: the {n_points:,} initial points"

    def init_state(self, n: int) -> dict:
        return {}

    def hyper(self, config: TrainConfig) -> dict:
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
