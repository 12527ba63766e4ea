"""The far plane: a primitive whose centre lies beyond `camera.far` is not drawn, by every
spec whose depth is its centre's camera-space z (gsplat culls `depth >= far` the same way;
3DGS, 2DGS and Student-t once ignored `far`, so a camera's far plane changed nothing).

Independent check: the render with a far plane equals the render, without one, of the
primitives in front of it (selected here in NumPy from the means)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT

from xprc.camera import Camera
from xprc.compiler.driver import load
from xprc.data.workloads import adapt_params, random_scene
from xprc.pipeline import render

W, H = 48, 40


def camera(far=1e10):
    K = np.array([[50.0, 0, W / 2], [0, 50.0, H / 2], [0, 0, 1]])
    return Camera(viewmat=np.eye(4), K=K, width=W, height=H, far=far)


@pytest.mark.parametrize("spec", ["3dgs", "2dgs", "student_t", "beta", "3dgut"])
def test_primitives_beyond_far_are_not_drawn(spec):
    method = load(ROOT / "specs" / f"{spec}.xpr")
    raw = random_scene(60, seed=3, sh_degree=1, dtype=np.float64, spread=1.0, depth=4.0)
    raw["opacities"] = np.abs(raw["opacities"]) + 1.0  # every primitive visible
    params = adapt_params(method, raw)
    far = 4.0
    front = raw["means"][:, 2] < far
    assert 10 < front.sum() < 50  # the plane cuts the scene
    cut = render(method, params, camera(far))
    kept = render(method, {k: v[front] for k, v in params.items()}, camera())
    full = render(method, params, camera())
    np.testing.assert_allclose(np.asarray(cut.image), np.asarray(kept.image), atol=1e-5)
    np.testing.assert_allclose(np.asarray(cut.alpha), np.asarray(kept.alpha), atol=1e-5)
    assert np.abs(np.asarray(full.image) - np.asarray(cut.image)).max() > 0.05  # it matters
