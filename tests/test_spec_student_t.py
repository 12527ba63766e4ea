"""specs/student_t.xpr (Student Splatting and Scooping, issue 14): the spec's size and parameters.
The checks every spec answers to (renders against the independent NumPy twin
tests/reference_student_t.py on random, large and edge-on scenes with negative components;
`verify`; float64 gradients against finite differences; a short training run on the demo scene
that keeps the scooping components) are in tests/test_conformance.py. docs/student_t.md."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT
from spec_training import spec_lines

from xprc.compiler.driver import load

SPEC = ROOT / "specs" / "student_t.xpr"


@pytest.fixture(scope="module")
def method():
    return load(SPEC)


def test_spec_is_short_and_reuses_3dgs(method):
    assert spec_lines(SPEC) <= 40
    assert method.NAME == "StudentT" and method.SIGNED_ALPHA
    nus = {p.name: p for p in method.PARAMS}["nus"]
    assert nus.init == 10.0 and nus.init_raw == pytest.approx(np.log(9.0))


def test_expected_depth_of_a_scooping_primitive_is_its_depth(method):
    """ED = D / weight with the signed weight: one negative component at depth 4 has expected
    depth 4 wherever it covers a pixel (dividing by max(weight, 1e-10) gave -2e10)."""
    from xprc.camera import Camera
    from xprc.pipeline import render

    cam = Camera(viewmat=np.eye(4), K=np.array([[60.0, 0, 24], [0, 60.0, 16], [0, 0, 1]]),
                 width=48, height=32)  # fmt: skip
    params = {
        "means": np.array([[0.0, 0.0, 4.0]]),
        "quats": np.array([[1.0, 0.0, 0.0, 0.0]]),
        "scales": np.full((1, 3), np.log(0.3)),
        "opacities": np.array([np.arctanh(-0.5)]),
        "sh": np.zeros((1, 16, 3)),
        "nus": np.array([np.log(9.0)]),
    }
    out = render(method, params, cam, mode="RGB+ED")
    alpha, depth = np.asarray(out.alpha)[..., 0], np.asarray(out.depth)[..., 0]
    covered = alpha < -0.05
    assert covered.sum() > 20 and alpha.min() < -0.4
    np.testing.assert_allclose(depth[covered], 4.0, rtol=1e-6)
