"""The compiler under hostile sizes and numbers (issue 26): folding that is numerically stable
(a finite value folds to itself, only a truly non-finite constant is an error), huge literals
and sizes as located errors, and budgets that stop a spec that would compile for minutes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from xprc.compiler import driver
from xprc.errors import StaticError

SPEC = """primitive Blob
param means : vec3
const k = {value}
projection {{
  p = camera.world_to_camera(means)
  emit centre = camera.project(p), depth = p.z, radius = 3.0, valid = p.z > camera.near
}}
response {{ alpha = 0.5 }}
color = [1, 1, 1]
"""


def _constant(value: str) -> float:
    checked = driver.check_source(SPEC.format(value=value), "blob.xpr")
    return checked.constants["k"]


# ---------------------------------------------------------------------------------------------
# Folding (item 6): what JAX computes in float64, never an overflow of a naive formula.

STABLE = [
    ("sigmoid(-1000)", jax.nn.sigmoid, -1000.0),
    ("sigmoid(-700)", jax.nn.sigmoid, -700.0),
    ("sigmoid(1000)", jax.nn.sigmoid, 1000.0),
    ("softplus(-1000)", jax.nn.softplus, -1000.0),
    ("softplus(1000)", jax.nn.softplus, 1000.0),
    ("exp(-1000)", jnp.exp, -1000.0),
    ("expm1(-1000)", jnp.expm1, -1000.0),
    ("tanh(-1000)", jnp.tanh, -1000.0),
]


@pytest.mark.parametrize("text,fn,x", STABLE, ids=[s[0] for s in STABLE])
def test_finite_values_fold_to_what_jax_computes(text, fn, x):
    """`const k = sigmoid(-1000)` was reported 'not finite' (1 / (1 + exp(1000)) overflowed);
    its value is 0."""
    assert _constant(text) == pytest.approx(float(fn(jnp.float64(x))), rel=1e-12, abs=0)


NON_FINITE = [  # (value, what it folds to, column of the caret: the call or the operator)
    ("exp(1000)", "inf", 11),
    ("log(0)", "-inf", 11),
    ("log1p(-1)", "-inf", 11),
    ("rsqrt(0)", "inf", 11),
    ("0 ^ -1", "inf", 13),
    ("sqrt(-1)", "nan", 11),
]


@pytest.mark.parametrize("text,value,col", NON_FINITE, ids=[s[0] for s in NON_FINITE])
def test_non_finite_constant_is_a_located_error(text, value, col):
    with pytest.raises(StaticError) as e:
        _constant(text)
    assert str(e.value) == (
        f"blob.xpr:3:{col}: error: constant 'k' is not finite (it folds to {value})\n"
        f"    const k = {text}\n"
        f"    {' ' * (col - 1)}^"
    )
