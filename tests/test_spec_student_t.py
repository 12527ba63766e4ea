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
