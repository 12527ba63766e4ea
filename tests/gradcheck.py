"""Central finite differences against jax.grad, shared by the pipeline and spec tests."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest


def assert_grads_match_fd(
    loss, params, grads, *, per_param=6, eps=1e-6, rel=1e-4, abs=1e-6, seed=1, require_nonzero=False
):
    """For `per_param` random entries of every parameter, grads[name] matches the central
    difference of `loss` (float64 params) to rel/abs."""
    rng = np.random.default_rng(seed)
    for name, value in params.items():
        flat = np.asarray(value).ravel()
        if require_nonzero:
            assert np.any(np.asarray(grads[name]) != 0), name
        for idx in rng.choice(flat.size, size=min(per_param, flat.size), replace=False):
            bump = np.zeros_like(flat)
            bump[idx] = eps
            plus = dict(params, **{name: jnp.asarray((flat + bump).reshape(value.shape))})
            minus = dict(params, **{name: jnp.asarray((flat - bump).reshape(value.shape))})
            fd = (float(loss(plus)) - float(loss(minus))) / (2 * eps)
            got = float(np.asarray(grads[name]).ravel()[idx])
            assert got == pytest.approx(fd, rel=rel, abs=abs), (name, idx)
