"""`sort(v)` (issue 41, item 4): a sorting network of min/max. The network sorts every input
(0-1 principle, exhaustively up to the limit); values through the generated code against
np.sort in float64, per primitive (jnp.maximum) and per pixel (rt.maximum chains); gradients
against finite differences, and at ties a consistent one; folding; the length limit's error."""

import importlib.util
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xprc.compiler import check, driver, parse
from xprc.compiler.builtin_functions import MAX_SORT
from xprc.compiler.symops import sorting_network
from xprc.errors import StaticError, XprTypeError

SPEC = """primitive Sorted
param a : vec4
param b : vec3
projection {{ emit centre = [0, 0], depth = 1, radius = 1, valid = true }}
response {{ alpha = {alpha} }}
color = {color}
"""
COLOR = "sort([a.x, a.y, a.z, a.w, b.x, b.y, b.z])"
# per pixel: values that depend on the pixel, sorted, weighted
ALPHA = "dot([1, 2, 3, 4, 5], sort([a.x * pixel.x, a.y, a.z - pixel.y, b.x, a.w + b.y]))"


@pytest.mark.parametrize("n", range(1, MAX_SORT + 1))
def test_the_network_sorts_every_zero_one_input(n):
    """A comparator network sorts every input iff it sorts every 0-1 input (Knuth 5.3.4)."""
    pairs = sorting_network(n)
    assert all(0 <= i < j < n for i, j in pairs)
    xs = np.array(list(itertools.product((0, 1), repeat=n)), np.int8)  # [2^n, n]
    for i, j in pairs:
        lo, hi = np.minimum(xs[:, i], xs[:, j]), np.maximum(xs[:, i], xs[:, j])
        xs[:, i], xs[:, j] = lo, hi
    assert np.all(np.diff(xs, axis=1) >= 0)


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("sort") / "sorted.py"
    path.write_text(driver.compile_source(SPEC.format(alpha=ALPHA, color=COLOR), "sorted.xpr"))
    spec = importlib.util.spec_from_file_location("xprc_test_sorted", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RNG = np.random.default_rng(4)
RAW = {"a": RNG.normal(size=(5, 4)), "b": RNG.normal(size=(5, 3))}
PIXEL = np.array([1.5, -0.5])


def _colour(mod, raw):
    return mod.project({k: jnp.asarray(v) for k, v in raw.items()}, None)["features"]


def _alpha(mod, raw):
    attrs = mod.project({k: jnp.asarray(v) for k, v in raw.items()}, None)["attrs"]
    pixel = jnp.broadcast_to(jnp.asarray(PIXEL), (attrs.shape[0], 2))
    zero = jnp.zeros((attrs.shape[0], 3))
    return mod.response(pixel, zero, zero, attrs, None)


def _alpha_numpy(a, b):
    x, y = PIXEL
    v = np.stack([a[:, 0] * x, a[:, 1], a[:, 2] - y, b[:, 0], a[:, 3] + b[:, 1]], -1)
    return np.sort(v, -1) @ np.arange(1.0, 6.0)


def test_values_match_numpy_sort(module):
    got = np.asarray(_colour(module, RAW))
    np.testing.assert_array_equal(got, np.sort(np.concatenate([RAW["a"], RAW["b"]], 1), 1))
    np.testing.assert_allclose(_alpha(module, RAW), _alpha_numpy(RAW["a"], RAW["b"]), rtol=1e-14)


def _fd(f, raw, name, h=1e-6):
    base = np.asarray(raw[name])
    out = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        up, down = base.copy(), base.copy()
        up[idx] += h
        down[idx] -= h
        out[idx] = (f({**raw, name: up}) - f({**raw, name: down})) / (2 * h)
    return out


def test_gradients_match_finite_differences(module):
    w = RNG.normal(size=(5, 7))

    def per_primitive(raw):
        return jnp.sum(jnp.asarray(w) * _colour(module, raw))

    def per_pixel(raw):
        return jnp.sum(_alpha(module, raw))

    for loss in (per_primitive, per_pixel):
        grads = jax.grad(loss)({k: jnp.asarray(v) for k, v in RAW.items()})
        for name in RAW:
            want = _fd(lambda r, loss=loss: float(loss(r)), RAW, name)
            np.testing.assert_allclose(grads[name], want, rtol=1e-7, atol=1e-9, err_msg=name)


def test_gradients_at_ties_are_consistent(module):
    """At tied inputs the outputs' derivatives still add up to the identity: per pixel each
    input gets exactly one output's weight (a permutation), per primitive (jnp.maximum's even
    split) the tied inputs share their outputs' weights."""
    tie = {"a": np.array([[0.3, 0.3, -1.0, 0.3]]), "b": np.array([[0.3, 2.0, 0.3]])}
    w = np.arange(1.0, 8.0)[None]

    def per_primitive(raw):
        return jnp.sum(jnp.asarray(w) * _colour(module, raw))

    g = jax.grad(per_primitive)({k: jnp.asarray(v) for k, v in tie.items()})
    flat = np.concatenate([g["a"], g["b"]], 1)[0]
    # -1.0 is first (weight 1), 2.0 last (7); the five 0.3s share 2 + 3 + 4 + 5 + 6
    assert flat[2] == 1.0 and flat[5] == 7.0
    np.testing.assert_allclose(flat[[0, 1, 3, 4, 6]].sum(), 20.0)
    assert np.all(flat[[0, 1, 3, 4, 6]] >= 0)
    # per pixel, at PIXEL = (1.5, -0.5): a.x * 1.5 = a.y = a.z + 0.5 = b.x = a.w + b.y = 0.6
    tie = {"a": np.array([[0.4, 0.6, 0.1, 0.1]]), "b": np.array([[0.6, 0.5, 0.0]])}
    ga = jax.grad(lambda r: jnp.sum(_alpha(module, r)))({k: jnp.asarray(v) for k, v in tie.items()})
    # d alpha / d(each sorted value): a permutation of the weights 1..5
    per_value = [ga["a"][0, 0] / 1.5, ga["a"][0, 1], ga["a"][0, 2], ga["b"][0, 0], ga["a"][0, 3]]
    assert sorted(np.asarray(per_value).tolist()) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert float(ga["b"][0, 1]) == float(ga["a"][0, 3])


def _probe(expr: str):
    spec = SPEC.format(alpha="0", color="[1, 1, 1]").replace(
        "valid = true }", f"valid = true, probe = {expr} }}"
    )
    return check.check(parse.parse(spec, "t.xpr")).prim["probe"]


def test_numbers_fold_and_the_type():
    node = _probe("sort([3, -1, 2.5, 0])")
    assert node.op == "pack" and [x.extra for x in node.args] == [-1, 0, 2.5, 3]
    assert str(_probe("sort(a)").type) == "vec4"
    assert str(_probe("sort([a.x, 2])").type) == "vec2"


def test_limits_and_types_are_located_errors():
    with pytest.raises(StaticError) as info:
        _probe("sort(zeros(17))")
    assert str(info.value).splitlines()[:3] == [
        "t.xpr:4:86: error: 'sort' sorts at most 16 values (a sorting network of min/max, "
        "unrolled), got vec17 (85 compare-and-swaps)",
        "    projection { emit centre = [0, 0], depth = 1, radius = 1, valid = true, probe = "
        "sort(zeros(17)) }",
        " " * 89 + "^",
    ]
    with pytest.raises(XprTypeError, match=r"'sort' needs a vector \(`sort\(\[a, b, c\]\)`\), "):
        _probe("sort(a.x)")
