"""specs/ges.xpr (Generalized Exponential Splatting, issue 41): the spec's size, its reuse of
3DGS (one changed line of the response, by `extend response`), the derived footprint's closed
form, and the kernel of the independent NumPy twin tests/reference_ges.py. The checks every spec
answers to (renders against the twin, `verify`, gradients against finite differences, a short
training run) are in tests/test_conformance.py. docs/ges.md."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_ges
from conftest import ROOT
from spec_training import spec_lines

from xprc.compiler import driver
from xprc.compiler.driver import load

SPEC = ROOT / "specs" / "ges.xpr"


@pytest.fixture(scope="module")
def method():
    return load(SPEC)


def test_spec_is_short_and_reuses_3dgs(method):
    assert spec_lines(SPEC) <= 8
    assert method.NAME == "GES"
    betas = {p.name: p for p in method.PARAMS}["betas"]
    assert betas.init == 2.0 and betas.init_raw == pytest.approx(0.0)


def test_footprint_is_the_closed_form():
    """cutoff of exp(-(g/2)^(beta/2)) is 2 (-log y)^(2/beta): no bisection in the module."""
    module = driver.compile_source(SPEC.read_text(), "ges.xpr", spec_dir=SPEC.parent)
    assert "jnp.log(" in module and "fori_loop" not in module and module.count("jnp.where") < 20


def test_kernel_is_the_gaussian_at_beta_2():
    s = np.array([0.0, 0.5, 2.0, 9.0])
    np.testing.assert_allclose(reference_ges.ges_kernel(s, 2.0), np.exp(-0.5 * s), rtol=1e-15)
    # beta = 1: exp(-sqrt(s / 2)), the Laplacian profile
    np.testing.assert_allclose(reference_ges.ges_kernel(s, 1.0), np.exp(-np.sqrt(s / 2)))


def test_response_at_the_centre_has_finite_gradients(method):
    """A pixel exactly on a centre (sigma = 0) with beta = 1: alpha is the opacity and every
    gradient is finite (the unguarded power's derivative is infinite there)."""
    values = {"centre.x": 10.5, "centre.y": 12.5, "conic.x": 0.3, "conic.z": 0.2,
              "conic.y": 0.05, "0.5*betas": 0.5, "opacity": 0.6, "f(opacity)": 0.6}  # fmt: skip
    assert set(method.ATTRS) <= set(values), method.ATTRS
    attrs = jnp.asarray([[values[n] for n in method.ATTRS]], jnp.float64)

    def alpha(attrs):
        px = jnp.asarray([[[10.5, 12.5]]], jnp.float64)
        return method.response(px, None, None, attrs[None], None)[0, 0]

    a, g = jax.value_and_grad(alpha)(attrs)
    assert float(a) == pytest.approx(0.6) and np.all(np.isfinite(np.asarray(g)))
    # and just off the centre, the kernel itself: alpha = 0.6 exp(-sqrt(sigma))
    px = jnp.asarray([[[10.5 + 0.1, 12.5]]], jnp.float64)
    near = float(method.response(px, None, None, attrs[None], None)[0, 0])
    assert near == pytest.approx(0.6 * math.exp(-math.sqrt(0.5 * 0.3 * 0.01)), rel=1e-12)
