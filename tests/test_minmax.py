"""rt.maximum / rt.minimum: the n-ary max and min that generated responses call (issue 17).

Value: exactly the chain of jnp.maximum / jnp.minimum (NaN propagates). Derivative: that of the
first argument attaining the extreme; at a tie the later arguments get nothing (jnp.maximum
would split evenly). Checked against the analytic one-hot value, finite differences in float64
away from ties, and the chain's own gradient.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy

from xprc import runtime as rt
from xprc.compiler.printer import Printer
from xprc.compiler.symops import XMax, XMin

OPS = [(rt.maximum, jnp.maximum, np.argmax), (rt.minimum, jnp.minimum, np.argmin)]


def _chain(op, xs):
    out = xs[0]
    for x in xs[1:]:
        out = op(out, x)
    return out


@pytest.mark.parametrize("fn, op, arg", OPS)
@pytest.mark.parametrize("n", [1, 2, 3, 9])
def test_value_and_one_hot_gradient(fn, op, arg, n):
    rng = np.random.default_rng(n)
    xs = [jnp.asarray(rng.standard_normal((4, 5))) for _ in range(n)]
    assert np.array_equal(fn(*xs), _chain(op, xs))
    g = jnp.asarray(rng.standard_normal((4, 5)))
    _, vjp = jax.vjp(fn, *xs)
    got = np.stack(vjp(g))  # [n, 4, 5]
    win = arg(np.stack(xs), axis=0)
    want = np.where(np.arange(n)[:, None, None] == win[None], np.asarray(g)[None], 0.0)
    assert np.array_equal(got, want)
    # Away from ties the chain of jnp.maximum has the same gradient.
    ref = jax.vjp(lambda *xs: _chain(op, xs), *xs)[1](g)
    assert np.array_equal(got, np.stack(ref))


@pytest.mark.parametrize("fn, op, arg", OPS)
def test_gradient_matches_finite_differences(fn, op, arg):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(7)

    def f(x):  # broadcast scalars and a Python number among the arguments, as responses do
        return jnp.sum(fn(x[0] * x[1:], x[2] + 0.5, 0.25, jnp.sin(x[1:])) ** 2)

    grad = np.asarray(jax.grad(f)(jnp.asarray(x)))
    eps = 1e-6
    for i in range(x.size):
        d = np.zeros_like(x)
        d[i] = eps
        fd = (float(f(jnp.asarray(x + d))) - float(f(jnp.asarray(x - d)))) / (2 * eps)
        assert grad[i] == pytest.approx(fd, rel=1e-6, abs=1e-8), i


@pytest.mark.parametrize("fn, op, arg", OPS)
def test_ties_go_to_the_first_argument(fn, op, arg):
    one = jnp.asarray(1.0)
    grads = jax.grad(lambda a, b, c: fn(a, b, c), argnums=(0, 1, 2))(one, one, one)
    assert [float(g) for g in grads] == [1.0, 0.0, 0.0]
    grads = jax.grad(lambda a, b: fn(a, b), argnums=(0, 1))(one, one)
    assert [float(g) for g in grads] == [1.0, 0.0]
    # A non-tied extreme still wins over an earlier tie.
    other = jnp.asarray(2.0 if fn is rt.maximum else 0.0)
    grads = jax.grad(lambda a, b, c: fn(a, b, c), argnums=(0, 1, 2))(one, one, other)
    assert [float(g) for g in grads] == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("fn, op, arg", OPS)
def test_nan_propagates_and_dtypes(fn, op, arg):
    x = jnp.asarray([1.0, jnp.nan, 3.0], jnp.float32)
    y = jnp.asarray([jnp.nan, 2.0, 0.0], jnp.float32)
    out = fn(x, 0.5, y)
    assert out.dtype == jnp.float32
    assert np.array_equal(out, _chain(op, [x, 0.5, y]), equal_nan=True)
    ints = fn(jnp.asarray([1, 5]), jnp.asarray([3, 2]))
    assert ints.dtype == jnp.asarray(1).dtype
    assert np.array_equal(ints, op(jnp.asarray([1, 5]), jnp.asarray([3, 2])))


def test_jit_and_vmap():
    xs = [jnp.linspace(-1.0, 1.0, 6) * k for k in (1.0, -2.0, 0.5)]
    want = jax.grad(lambda a: jnp.sum(rt.maximum(a, xs[1], xs[2])))(xs[0])
    got = jax.jit(jax.vmap(jax.grad(lambda a, b, c: rt.maximum(a, b, c))))(*xs)
    assert np.array_equal(got, want)


def test_response_printer_flattens_nested_chains():
    x, y, z = sympy.symbols("x y z")
    e = XMax(XMax(x, y), XMin(z, XMin(x, 0)))
    assert Printer(chains=True)(e) == "rt.maximum(x, y, rt.minimum(z, x, 0.0))"
    assert Printer()(e) == "jnp.maximum(jnp.maximum(x, y), jnp.minimum(z, jnp.minimum(x, 0.0)))"
