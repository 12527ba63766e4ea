"""specs/beta.xpr (Deformable Beta Splatting, issue 14): the spec's size and parameters, and the
Beta kernel of the independent NumPy twin tests/reference_beta.py. The checks every spec answers
to (renders against the twin on random, large and edge-on scenes; `verify`; float64 gradients
against finite differences; a short training run on the demo scene) are in
tests/test_conformance.py. docs/beta.md."""

from __future__ import annotations

import numpy as np
import pytest
import reference_beta
from conftest import ROOT
from spec_training import spec_lines

from xprc.compiler.driver import load

SPEC = ROOT / "specs" / "beta.xpr"


@pytest.fixture(scope="module")
def method():
    return load(SPEC)


def test_spec_is_short_and_reuses_3dgs(method):
    assert spec_lines(SPEC) <= 40
    assert method.NAME == "Beta"
    betas = {p.name: p for p in method.PARAMS}["betas"]
    assert betas.init == 4.0 and betas.init_raw == pytest.approx(0.0)


def test_bounded_support():
    s = np.array([0.0, 0.5, 0.999, 1.0, 3.0])
    np.testing.assert_allclose(reference_beta.beta_kernel(s, 4.0), [1, 0.0625, 1e-12, 0, 0])
