"""Adam with per-parameter learning rates, the position lr schedule and the SH degree schedule.

Learning rates: `TrainConfig.lr[name]` when present (the run's choice overrides the spec's, and
says so in the log), else `ParamSpec.lr`, else `TrainConfig.lr_default` (`config.method_lrs`).
The position lr is multiplied by the scene scale and decays exponentially to `position_lr_final`
of its start over the run; an `sh` param's higher coefficients get `sh_rest_lr_factor` (1/20) of
its lr.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..method_info import MethodInfo
from .config import TrainConfig, method_lrs
from .roles import sh_degree, shape_of


def lr_arrays(method, config: TrainConfig, log=None) -> dict[str, jax.Array]:
    """Per-parameter learning rates, shaped [1, ...] to broadcast against [N, *shape]; `log`
    receives the lines of `method_lrs` (overrides, an unused lr_default)."""
    out, lrs = {}, method_lrs(method, config, log)
    for spec in MethodInfo.of(method).params:
        lr = lrs[spec.name]
        shape = shape_of(spec)
        arr = np.full((1,) * (1 + len(shape)), float(lr))
        if spec.kind == "sh" and len(shape) >= 1:
            rows = np.full(shape[0], float(lr) * config.sh_rest_lr_factor)
            rows[0] = float(lr)
            arr = rows.reshape((1, shape[0]) + (1,) * (len(shape) - 1))
        out[spec.name] = jnp.asarray(arr, jnp.float32)
    return out


def _scale_by_lrs(lrs, factors):
    """optax transform: updates * -lr * factor per leaf (factors: {name: traced scalar})."""

    def init(params):
        del params
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params
        out = {}
        for name, u in updates.items():
            lr = lrs[name]
            if name in factors:
                lr = lr * factors[name]
            out[name] = -lr * u
        return out, state

    return optax.GradientTransformation(init, update)


def optimizer(lrs, factors=None, eps: float = 1e-15):
    """Adam (b1 0.9, b2 0.999) then the per-parameter learning rates."""
    return optax.chain(
        optax.scale_by_adam(b1=0.9, b2=0.999, eps=eps), _scale_by_lrs(lrs, factors or {})
    )


def adam_update(opt, grads, opt_state, params):
    # optax's bias correction computes `float ** int32`, which strict promotion rejects.
    with jax.numpy_dtype_promotion("standard"):
        updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def sh_masked(method, params, step, interval):
    """Zero SH coefficients above the active degree `min(step // interval, degree)` (so they get
    no gradient); shapes never change."""
    out = dict(params)
    for spec in MethodInfo.of(method).params:
        deg = sh_degree(spec)
        if deg is None:
            continue
        k = shape_of(spec)[0]
        active = jnp.minimum(step // jnp.maximum(interval, 1), deg)
        keep = jnp.arange(k, dtype=jnp.int32) < (active + 1) * (active + 1)
        shape = (1, k) + (1,) * (len(shape_of(spec)) - 1)
        out[spec.name] = params[spec.name] * keep.astype(params[spec.name].dtype).reshape(shape)
    return out
