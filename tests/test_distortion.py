"""The ordered depth distortion output (`RenderConfig(distortion=True)`, issue 14): the 2DGS loss
L = sum_{i,j} w_i w_j |z_i - z_j| per pixel, which the pipeline computes in list order as
2 sum_k w_k (z_k W_{k-1} - Z_{k-1}), against a slow NumPy twin that composites every pixel's
list front to back (no tiles, no footprints) and does the literal double sum over it; gradients
against float64 finite differences.

z is the sort depth for 3DGS (sorted along every list, so the ordered form equals the |.| double
sum) and the ray-surfel distance for 2DGS (crossing surfels need not be sorted per pixel: there
the twin's ordered double sum sum_{i<j} 2 w_i w_j (z_j - z_i) is the reference).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_2dgs
import reference_3dgs
from conftest import ROOT
from gradcheck import assert_grads_match_fd

from xprc import verify
from xprc.compiler.driver import load
from xprc.pipeline import RenderConfig, render

W, H = 24, 20
# small chunks and groups: lists span several chunks and groups cross tiles
CONFIG = RenderConfig(tile_size=8, chunk=4, group=4, distortion=True, max_entries=4096)


@pytest.fixture(scope="module")
def gs3():
    return load(ROOT / "specs" / "3dgs.xpr")


@pytest.fixture(scope="module")
def gs2():
    return load(ROOT / "specs" / "2dgs.xpr")


def _composite_lists(alpha, z, t_min=1e-4, alpha_min=1 / 255):
    """Front to back over primitives (rows of alpha, z [N, pixels], already in list order):
    the weights w [N, pixels] of the composited list, with the 1/255 skip and the stop rule."""
    T = np.ones(alpha.shape[1])
    done = np.zeros(alpha.shape[1], bool)
    w = np.zeros_like(alpha)
    for k in range(alpha.shape[0]):
        use = (alpha[k] >= alpha_min) & ~done
        test_t = T * (1 - alpha[k])
        stop = use & (test_t < t_min)
        done |= stop
        use &= ~stop
        w[k] = np.where(use, alpha[k] * T, 0.0)
        T = np.where(use, test_t, T)
    return w


def _double_sums(w, z):
    """Per pixel: sum_{i,j} w_i w_j |z_i - z_j| and 2 sum_{i<j} w_i w_j (z_j - z_i)."""
    ww = w[:, None, :] * w[None, :, :]
    dz = z[None, :, :] - z[:, None, :]  # z_j - z_i
    upper = np.triu(np.ones((w.shape[0], w.shape[0]), bool), 1)[..., None]
    return np.sum(ww * np.abs(dz), axis=(0, 1)), 2 * np.sum(np.where(upper, ww * dz, 0), (0, 1))


def _twin_3dgs(raw, cam):
    pr = reference_3dgs.project(raw, np.asarray(cam.viewmat), np.asarray(cam.K), W, H)
    jj, ii = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    px, py = jj.ravel(), ii.ravel()
    order = [i for i in np.argsort(pr["depth"], kind="stable") if pr["valid"][i]]
    alpha, z = [], []
    for i in order:
        a, b, c = pr["conic"][i]
        dx, dy = px - pr["centre"][i, 0], py - pr["centre"][i, 1]
        sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
        alpha.append(np.where(sigma >= 0, np.minimum(0.99, pr["opacity"][i] * np.exp(-sigma)), 0))
        z.append(np.full(px.shape, pr["depth"][i]))
    alpha, z = np.array(alpha), np.array(z)
    return _double_sums(_composite_lists(alpha, z), z)


def _twin_2dgs(raw, cam):
    """As tests/reference_2dgs.py, keeping every surfel's alpha and per-pixel depth."""
    viewmat, K = np.asarray(cam.viewmat, np.float64), np.asarray(cam.K, np.float64)
    mu = np.asarray(raw["means"], np.float64)
    rot = reference_3dgs.quat_to_rot(np.asarray(raw["quats"], np.float64))
    s = np.exp(np.asarray(raw["scales"], np.float64))
    opac = 1 / (1 + np.exp(-np.asarray(raw["opacities"], np.float64)))
    o, d, pix = reference_2dgs.pinhole_rays(viewmat, K, W, H)
    pc = mu @ viewmat[:3, :3].T + viewmat[:3, 3]
    centre = (pc[:, :2] / pc[:, 2:]) * [K[0, 0], K[1, 1]] + [K[0, 2], K[1, 2]]
    valid = (pc[:, 2] > 0.01) & (opac >= 1 / 255)
    alpha, z = [], []
    for i in [i for i in np.argsort(pc[:, 2], kind="stable") if valid[i]]:
        a_i, z_i, _ = reference_2dgs.surfel(mu[i], rot[i], s[i], opac[i], centre[i], o, d, pix)
        alpha.append(a_i)
        z.append(z_i)
    alpha, z = np.array(alpha), np.array(z)
    return _double_sums(_composite_lists(alpha, z), z)


def _render(method, raw, cam, config=CONFIG):
    raw = {k: jnp.asarray(v, jnp.float64) for k, v in raw.items()}
    out = render(method, raw, cam, mode="RGB+ED", config=config)
    assert int(out.stats["dropped"]) == 0
    return out


@pytest.mark.parametrize("kind", ["random", "large"])
def test_3dgs_distortion_equals_the_double_sum(gs3, kind):
    raw = verify.scene(gs3, kind, 24, seed=3)
    cam = verify.camera("pinhole", W, H)
    out = _render(gs3, raw, cam)
    absolute, ordered = _twin_3dgs(raw, cam)
    assert absolute.max() > 1e-2  # the scene overlaps at depth
    np.testing.assert_allclose(ordered, absolute, atol=1e-12)  # sorted: the two forms agree
    got = np.asarray(out.distortion)[..., 0].ravel()
    np.testing.assert_allclose(got, absolute, atol=1e-10)


def test_distortion_with_saturated_tiles(gs3):
    """Opaque, large primitives: the stop rule ends every list early and whole groups of
    saturated tiles are skipped."""
    raw = verify.scene(gs3, "large", 40, seed=5)
    raw["opacities"] = np.full(40, 4.0)  # sigmoid: 0.98
    cam = verify.camera("pinhole", W, H)
    out = _render(gs3, raw, cam)
    assert float(np.asarray(out.alpha).min()) > 0.99  # every list ends at the stop rule
    absolute, _ = _twin_3dgs(raw, cam)
    np.testing.assert_allclose(np.asarray(out.distortion)[..., 0].ravel(), absolute, atol=1e-10)


@pytest.mark.parametrize("kind", ["random", "large", "edge-on"])
def test_2dgs_distortion_uses_the_per_pixel_depth(gs2, kind):
    raw = verify.scene(gs2, kind, 16, seed=len(kind))
    cam = verify.camera("pinhole", W, H)
    out = _render(gs2, raw, cam)
    absolute, ordered = _twin_2dgs(raw, cam)
    assert absolute.max() > 1e-3
    np.testing.assert_allclose(np.asarray(out.distortion)[..., 0].ravel(), ordered, atol=1e-10)


def test_distortion_is_none_unless_asked(gs3):
    raw = verify.scene(gs3, "random", 8, seed=1)
    out = _render(gs3, raw, verify.camera("pinhole", W, H), RenderConfig(tile_size=8))
    assert out.distortion is None


@pytest.mark.parametrize("spec", ["3dgs", "2dgs"])
def test_distortion_gradients_match_finite_differences(gs3, gs2, spec):
    method = gs3 if spec == "3dgs" else gs2
    raw = verify.scene(method, "large", 8, seed=4)
    raw["opacities"] = np.clip(raw["opacities"], -2.0, 1.0)
    params = {k: jnp.asarray(v, jnp.float64) for k, v in raw.items()}
    cam = verify.camera("pinhole", W, H)
    weights = jnp.asarray(np.random.default_rng(0).uniform(size=(H, W, 1)))

    @jax.jit
    def loss(p):
        out = render(method, p, cam, config=CONFIG)
        return jnp.sum(out.distortion * weights)

    grads = jax.grad(loss)(params)
    assert float(loss(params)) > 1e-3
    assert_grads_match_fd(loss, params, grads, per_param=4, rel=1e-5, abs=1e-8)
