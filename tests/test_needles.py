"""Long thin footprints keep their float32 determinant (3DGS and Student-t).

A Gaussian 30 units long and 1e-4 thick, seen at an angle, projects to a footprint ~600 px (one
sigma) long and 0.55 px (the 0.3 px^2 dilation) wide. Its 2D determinant written as a * c - b^2
cancels in float32 (both products ~1e10 against a determinant ~1e5): the drawn alpha was off by
up to 0.012 there, and by 0.045 at 2,000 px, silently (found by an outside audit). The specs now
take det(J M M^T J^T) as the sum of J M's squared 2x2 minors (Cauchy-Binet), which does not
cancel.

The check: the float32 render against the same render in float64 (exact here; elsewhere in the
suite float64 equals the independent NumPy 3DGS twin), for needles of growing length at several
angles. The bound is what float32 evaluation of the quadratic form itself gives at a short
needle (~3e-4). Past a 2D condition number of ~1e7 (2,000 px against 0.55 px) float32 cannot
hold the covariance's minor axis at all: pixels on a needle's axis can then get a negative
quadratic form and no alpha, as in gsplat's float32 formula (docs/language.md); not tested here
because which pixels flip is a matter of rounding.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT

from xprc.camera import Camera
from xprc.compiler.driver import load
from xprc.data.workloads import adapt_params, gaussian_params
from xprc.pipeline import render

W, H, F = 160, 120, 100.0


def _alpha(method, length, angle, dtype):
    th = np.deg2rad(angle)
    quat = [[np.cos(th / 2), 0.0, 0.0, np.sin(th / 2)]]  # about the view axis
    params = gaussian_params(np.array([[0.0, 0.0, 5.0]]), np.array([[length, 1e-4, 1e-4]]), quat,
                             np.array([0.9]), np.array([[1.0, 0.5, 0.2]]), sh_degree=3,
                             dtype=dtype)  # fmt: skip
    params = {k: jnp.asarray(v) for k, v in adapt_params(method, params).items()}
    K = np.array([[F, 0, W / 2], [0, F, H / 2], [0, 0, 1]], dtype)
    cam = Camera(viewmat=np.eye(4, dtype=dtype), K=K, width=W, height=H)
    out = render(method, params, cam)
    assert int(out.stats["dropped"]) == 0
    return np.asarray(out.alpha[..., 0], np.float64)


@pytest.mark.parametrize("spec", ["3dgs", "student_t"])
def test_needles_keep_their_alpha_in_float32(spec):
    method = load(ROOT / "specs" / f"{spec}.xpr")
    worst = {}
    for length in (3.0, 10.0, 30.0):  # 2D sigma ~60, ~200, ~600 px
        for angle in (20.0, 37.0, 45.0, 60.0):
            a32 = _alpha(method, length, angle, np.float32)
            a64 = _alpha(method, length, angle, np.float64)
            assert a64.sum() > 100  # the needle is drawn across the image
            worst[(length, angle)] = float(np.abs(a32 - a64).max())
    assert max(worst.values()) < 1e-3, worst
