"""specs/hgs.xpr (3D Half-Gaussian Splatting, issue 41): the spec's size and its reuse of 3DGS
(by `extend projection` / `extend response`), the independent NumPy twin's split against
brute-force integration along the ray, and analytic cases of the compiled module: a plane that
contains the viewing ray splits the splat sharply into its two opacities, one facing the camera
halves it evenly. The checks every spec answers to (renders against tests/reference_hgs.py,
`verify`, gradients against finite differences, a short training run) are in
tests/test_conformance.py. docs/hgs.md."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
import reference_hgs
from conftest import ROOT
from spec_training import spec_lines

from xprc import verify
from xprc.compiler.driver import load

SPEC = ROOT / "specs" / "hgs.xpr"


@pytest.fixture(scope="module")
def method():
    return load(SPEC)


def test_spec_reuses_3dgs(method):
    assert spec_lines(SPEC) <= 25
    assert method.NAME == "HalfGaussian3D"
    names = [p.name for p in method.PARAMS]
    assert names[:5] == ["means", "quats", "scales", "opacities", "sh"]
    assert set(names[5:]) == {"plane_normals", "opacities2"}
    assert "jax.scipy.special.erf" in (ROOT / "tests" / "golden" / "hgs.py").read_text()


@pytest.mark.parametrize("seed", range(6))
def test_twin_split_matches_integration_along_the_ray(seed):
    """reference_hgs.side_share (a normal CDF) against the trapezoid rule on a fine grid."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(3, 3))
    cov = a @ a.T + 0.1 * np.eye(3)
    q0 = rng.normal(size=(4, 3))
    r = np.array([rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), 1.0])
    n = rng.normal(size=3)
    n /= np.linalg.norm(n)
    got = reference_hgs.side_share(np.linalg.inv(cov), q0, r, n)
    qinv = np.linalg.inv(cov)

    def mass(lo, hi, k):  # the Gaussian along the line q0[k] + t r, from lo to hi
        t = np.linspace(lo, hi, 200_001)
        q = q0[k] + t[:, None] * r
        return np.trapezoid(np.exp(-0.5 * np.einsum("ti,ij,tj->t", q, qinv, q)), t)

    for k in range(4):
        t0 = -(q0[k] @ n) / (r @ n)  # where the line crosses the plane
        below, above = mass(t0 - 80, t0, k), mass(t0, t0 + 80, k)
        want = above if r @ n > 0 else below
        assert got[k] == pytest.approx(want / (below + above), abs=1e-7)


def _one(method, normal, o1, o2):
    """One round primitive 3 units in front of an identity camera, on its optical axis, and
    its alpha along the image row through the centre."""
    cam = verify.camera("pinhole", 40, 32)
    raw = verify.scene(method, "random", 1, 0)
    cam_pos = -np.asarray(cam.viewmat)[:3, :3].T @ np.asarray(cam.viewmat)[:3, 3]
    forward = np.asarray(cam.viewmat)[2, :3]
    raw["means"] = (cam_pos + 3.0 * forward)[None]
    raw["quats"] = np.array([[1.0, 0.0, 0.0, 0.0]])
    raw["scales"] = np.full((1, 3), math.log(0.2))
    raw["opacities"] = np.array([math.log(o1 / (1 - o1))])
    raw["opacities2"] = np.array([math.log(o2 / (1 - o2))])
    raw["plane_normals"] = np.asarray(normal, np.float64)[None]
    out = method.project({k: jnp.asarray(v, jnp.float64) for k, v in raw.items()}, cam)
    cx, cy = (float(v) for v in np.asarray(out["centre"])[0])
    px = jnp.asarray([[[cx + dx, cy]] for dx in (-3.0, -1.0, 1.0, 3.0)], jnp.float64)
    alpha = np.asarray(method.response(px, None, None, out["attrs"][None], cam))[:, 0]
    conic = np.asarray(out["attrs"])[0]
    return alpha, cam, forward, conic


def test_plane_containing_the_ray_splits_sharply(method):
    """The plane through the centre that holds the viewing ray, normal along the camera's x
    axis: left of the centre one half alone, right the other, each with its Gaussian."""
    cam = verify.camera("pinhole", 40, 32)
    right = np.asarray(cam.viewmat)[0, :3]  # camera x in world coordinates
    alpha, _, _, _ = _one(method, right, 0.9, 0.2)
    gauss = alpha / np.array([0.2, 0.2, 0.9, 0.9])
    assert gauss[0] == pytest.approx(gauss[3], rel=1e-9)  # the same Gaussian on both sides
    assert gauss[1] == pytest.approx(gauss[2], rel=1e-9)
    assert 0.05 < gauss[0] < gauss[1] < 1


def test_plane_facing_the_camera_halves_evenly(method):
    """Normal along the viewing ray: every ray crosses the plane at the centre's depth (the
    Gaussian is round), so each half gives half its opacity: alpha = G (o1 + o2) / 2."""
    cam = verify.camera("pinhole", 40, 32)
    forward = np.asarray(cam.viewmat)[2, :3]
    alpha, _, _, _ = _one(method, forward, 0.9, 0.2)
    reference, _, _, _ = _one(method, forward, 0.55, 0.55)
    np.testing.assert_allclose(alpha, reference, rtol=1e-9)
    assert alpha.min() > 0.05
