"""The special functions `erf`, `erfc`, `erfinv`, `lgamma`, `sinh`, `cosh` (issue 41, item 1):
values through the generated code against scipy.special / math in float64, gradients against
their closed forms and central finite differences, folding of constant arguments (and the
located error where a fold leaves the domain), NaN-safe selects, the printed calls, and a
derived `cutoff` through `erfc`."""

import importlib.util
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp

from xprc.compiler import check, driver, folds, parse
from xprc.errors import StaticError

SPEC = """primitive Special
param a : vec3
param b : vec3
param s : scalar
projection {{ emit centre = [0, 0], depth = 1, radius = 1, valid = true }}
response {{ alpha = 0 }}
color = {expr}
"""

# every function at once; erfinv of tanh(a.z) stays inside (-1, 1), lgamma of s in [0.5, 4]
# and of b.z (negative non-integers included)
ALL = "[erf(a.x), erfc(a.y), erfinv(tanh(a.z)), lgamma(s), sinh(b.x), cosh(b.y), lgamma(b.z)]"

RNG = np.random.default_rng(41)
RAW = {
    "a": RNG.normal(0, 1.5, size=(6, 3)),
    "b": RNG.normal(0, 2.0, size=(6, 3)),
    "s": RNG.uniform(0.5, 4.0, size=(6,)),
}


def _want(a, b, s):
    """scipy / NumPy in float64 (independent of the compiler's folds and of JAX)."""
    return np.stack(
        [sp.erf(a[:, 0]), sp.erfc(a[:, 1]), sp.erfinv(np.tanh(a[:, 2])), sp.gammaln(s),
         np.sinh(b[:, 0]), np.cosh(b[:, 1]), sp.gammaln(b[:, 2])], -1
    )  # fmt: skip


def _module(text: str, tmp_path, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(driver.compile_source(text, f"{name}.xpr"))
    spec = importlib.util.spec_from_file_location(f"xprc_test_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path.read_text()


@pytest.fixture(scope="module")
def special(tmp_path_factory):
    return _module(SPEC.format(expr=ALL), tmp_path_factory.mktemp("special"), "special")


def _features(module, raw):
    return module.project({k: jnp.asarray(v) for k, v in raw.items()}, None)["features"]


def test_values_match_scipy_in_float64(special):
    module, _ = special
    got = np.asarray(_features(module, RAW))
    np.testing.assert_allclose(got, _want(RAW["a"], RAW["b"], RAW["s"]), rtol=1e-13, atol=1e-15)


def test_gradients_are_the_exact_derivatives(special):
    """The gradient of sum(w * features) is each function's derivative (closed forms from
    scipy), and agrees with central finite differences."""
    module, _ = special
    w = RNG.normal(size=(6, 7))

    def loss(raw):
        return jnp.sum(jnp.asarray(w) * _features(module, raw))

    raw = {k: jnp.asarray(v) for k, v in RAW.items()}
    grads = jax.grad(loss)(raw)
    a, b, s = RAW["a"], RAW["b"], RAW["s"]
    t = np.tanh(a[:, 2])
    want_a = np.stack(
        [2 / np.sqrt(np.pi) * np.exp(-a[:, 0] ** 2), -2 / np.sqrt(np.pi) * np.exp(-a[:, 1] ** 2),
         np.sqrt(np.pi) / 2 * np.exp(sp.erfinv(t) ** 2) * (1 - t * t)], -1
    ) * w[:, :3]  # fmt: skip
    want_b = np.stack([np.cosh(b[:, 0]), np.sinh(b[:, 1]), sp.digamma(b[:, 2])], -1) * w[:, 4:]
    want_s = sp.digamma(s) * w[:, 3]
    np.testing.assert_allclose(grads["a"], want_a, rtol=1e-11)
    np.testing.assert_allclose(grads["b"], want_b, rtol=1e-11)
    np.testing.assert_allclose(grads["s"], want_s, rtol=1e-11)
    for name in RAW:  # and against finite differences, every entry
        base = np.asarray(RAW[name])
        fd = np.zeros_like(base)
        h = 1e-6
        for idx in np.ndindex(base.shape):
            up, down = base.copy(), base.copy()
            up[idx] += h
            down[idx] -= h
            fd[idx] = (
                float(loss({**raw, name: jnp.asarray(up)}))
                - float(loss({**raw, name: jnp.asarray(down)}))
            ) / (2 * h)
        np.testing.assert_allclose(grads[name], fd, rtol=1e-6, atol=1e-8, err_msg=name)


def test_the_printed_calls_and_the_import(special):
    """Golden-like: the module imports jax.scipy.special (only such a module does) and calls
    it by name, readably."""
    _, source = special
    assert "\nimport jax.numpy as jnp\nimport jax.scipy.special\nfrom jax import lax\n" in source
    lines = [
        "        jax.scipy.special.erf(r_a__0),",
        "        jax.scipy.special.erfc(r_a__1),",
        "        jax.scipy.special.erfinv(jnp.tanh(r_a__2)),",
        "        jax.scipy.special.gammaln(r_s),",
        "        jnp.sinh(r_b__0),",
        "        jnp.cosh(r_b__1),",
        "        jax.scipy.special.gammaln(r_b__2),",
    ]
    assert "\n".join(lines) in source
    plain = driver.compile_source(SPEC.format(expr="[exp(s), 1, 2]"), "plain.xpr")
    assert "scipy" not in plain


def _probe(expr: str, before: str = ""):
    spec = SPEC.format(expr="[1, 1, 1]").replace(
        "valid = true }", f"valid = true, probe = {expr} }}"
    )
    spec = spec.replace("projection", before + "projection")
    return check.check(parse.parse(spec, "t.xpr")).prim["probe"]


@pytest.mark.parametrize(
    "name,x",
    [("erf", 0.3), ("erf", -2.5), ("erfc", 0.3), ("erfc", 6.0), ("erfc", -1.2),
     ("erfinv", 0.5), ("erfinv", -0.999999), ("erfinv", 1 - 1e-15), ("erfinv", 1e-30),
     ("erfinv", 0.25), ("erfinv", -0.75), ("lgamma", 0.5), ("lgamma", 1e-10), ("lgamma", -2.5),
     ("lgamma", 171.5), ("sinh", -3.0), ("sinh", 1e-8), ("cosh", 2.0), ("cosh", -80.0)],
)  # fmt: skip
def test_constant_arguments_fold_to_the_float64_value(name, x):
    want = {"erf": math.erf, "erfc": math.erfc, "erfinv": sp.erfinv, "lgamma": sp.gammaln,
            "sinh": math.sinh, "cosh": math.cosh}[name](x)  # fmt: skip
    node = _probe(f"{name}({x!r})")
    assert node.op == "num"
    np.testing.assert_allclose(node.extra, want, rtol=2e-15, atol=1e-15, err_msg=f"{name}({x})")


def test_erfinv_fold_inverts_erf_everywhere():
    """The compiler's own erfinv (Newton steps on math.erf) against scipy, across [-1, 1]."""
    ys = np.concatenate([np.linspace(-1, 1, 2001)[1:-1], 1 - np.logspace(-16, -1, 40)])
    got = np.array([folds.erfinv(float(y)) for y in ys])
    np.testing.assert_allclose(got, sp.erfinv(ys), rtol=4e-15)
    assert folds.erfinv(1.0) == math.inf and folds.erfinv(-1.0) == -math.inf
    assert math.isnan(folds.erfinv(1.5)) and math.isnan(folds.erfinv(math.nan))


def test_a_constant_outside_the_domain_is_a_located_error():
    cases = {
        "erfinv(1.5)": "'erfinv(1.5)' is not a number (it folds to nan)",
        "erfinv(1)": "'erfinv(1)' = inf is outside float32's range (renders run in float32, "
        "where it would be inf)",
        "lgamma(-2)": "'lgamma(-2)' = inf is outside float32's range (renders run in float32, "
        "where it would be inf)",
        "sinh(800)": "'sinh(800)' = inf is outside float32's range (renders run in float32, "
        "where it would be inf)",
    }
    for expr, message in cases.items():
        with pytest.raises(StaticError) as info:
            _probe(expr)
        assert str(info.value).splitlines()[0].endswith(f"error: {message}"), str(info.value)
        assert str(info.value).startswith("t.xpr:5:"), str(info.value)


def test_a_branch_not_taken_has_finite_gradients(tmp_path):
    """Selects are NaN-safe for the new functions too: erfinv(1) and lgamma(0) in the branch
    not taken give the other branch's gradient, not NaN."""
    expr = (
        "[where(s < 1, erfinv(s), 2 * s), where(s < 0.5, 3 * s, lgamma(s)),"
        " where(s < 700, s, cosh(1000 * s) + sinh(1000 * s))]"
    )
    module, _ = _module(SPEC.format(expr=expr), tmp_path, "guarded")
    raw = {"a": jnp.zeros((2, 3)), "b": jnp.zeros((2, 3)), "s": jnp.asarray([1.0, 0.0])}

    def loss(s):
        return jnp.sum(_features(module, {**raw, "s": s}))

    got = np.asarray(jax.grad(loss)(raw["s"]))
    np.testing.assert_allclose(got, [2 + sp.digamma(1.0) + 1, np.sqrt(np.pi) / 2 + 3 + 1])


def test_cutoff_of_an_erfc_kernel_is_its_closed_form():
    """`erfc` and `erf` invert symbolically: the derived footprint of `erfc(g)` is
    erfinv(1 - y), a number here (folded), with erfc(cutoff(y)) = y."""
    for y in (0.5, 1 / 255, 1e-6):
        node = _probe(f"cutoff({y!r})", before="density(g) = erfc(g)\n")
        assert node.op == "num", node
        # (1 - y rounds in float64: relative 1e-16 / y in the level, far below a pixel)
        np.testing.assert_allclose(sp.erfc(node.extra), y, rtol=1e-15 / y)
