"""specs/2dgs.xpr (2D Gaussian Splatting, issue 14): the compiled spec against the independent
NumPy twin tests/reference_2dgs.py on random, large and edge-on scenes and on single face-on and
edge-on surfels; the per-pixel depth is the ray-plane distance and the normal image the surfel
normal; `verify`; a short training run. The float64 gradients against finite differences are
in tests/test_conformance.py. docs/2dgs.md."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_2dgs
from conftest import ROOT
from gradcheck import assert_grads_match_fd
from spec_training import demo_root, regulariser_terms, spec_lines, train_spec

from xprc import verify
from xprc.cli import main
from xprc.compiler.driver import load
from xprc.pipeline import render
from xprc.train import TrainConfig, TrainError, losses_2dgs

SPEC = ROOT / "specs" / "2dgs.xpr"
W, H, N = 40, 32, 16  # verify's defaults: the reference renders share its compiled function


@pytest.fixture(scope="module")
def method():
    return load(SPEC)


def _render(method, raw, n=N):
    cam = verify.camera("pinhole", W, H)
    raw = {k: jnp.asarray(v) for k, v in raw.items()}
    out, _ = verify.render_pair(method, raw, cam, verify.config_for(n, W, H, 8))
    return out, cam


def _compare(out, cam, raw):
    colour, alpha, depth, normal = reference_2dgs.render(
        raw, np.asarray(cam.viewmat), np.asarray(cam.K), W, H
    )
    assert float(alpha.max()) > 0.3  # the scene shows something
    extra = np.asarray(out.extra)
    assert np.abs(np.asarray(out.image) - colour).max() <= 1e-4
    assert np.abs(np.asarray(out.alpha)[..., 0] - alpha).max() <= 1e-4
    assert np.abs(np.asarray(out.depth)[..., 0] - depth).max() <= 1e-4
    assert np.abs(extra[..., 0] - depth).max() <= 1e-4
    assert np.abs(extra[..., 2:5] - normal).max() <= 1e-4
    return alpha


def test_spec_is_short(method):
    assert spec_lines(SPEC) <= 40
    assert method.PIXEL_OUTPUTS == ("depth", "depth_sq", "normal.x", "normal.y", "normal.z")


@pytest.mark.parametrize("kind", ["random", "large", "edge-on"])
def test_render_matches_numpy_reference(method, kind):
    raw = verify.scene(method, kind, N, seed=len(kind))
    out, cam = _render(method, raw)
    _compare(out, cam, raw)


def _one(quat, scale=0.8, opacity=3.0):
    """N copies of one surfel at the origin (all but the first invisible: opacity 1e-4)."""
    raw = {
        "means": np.zeros((N, 3)),
        "quats": np.tile(np.asarray(quat, np.float64), (N, 1)),
        "scales": np.full((N, 2), np.log(scale)),
        "opacities": np.r_[opacity, np.full(N - 1, -9.2)],
        "sh": np.zeros((N, 16, 3)),
    }
    raw["sh"][:, 0] = 1.0
    return raw


def test_face_on_surfel_depth_is_the_ray_plane_distance(method):
    raw = _one([1.0, 0.0, 0.0, 0.0])  # normal +z; the camera at z = -4 looks along +z
    out, cam = _render(method, raw)
    alpha = _compare(out, cam, raw)
    o, d, _ = reference_2dgs.pinhole_rays(np.asarray(cam.viewmat), np.asarray(cam.K), W, H)
    assert np.allclose(o, [0, 0, -4])
    t = (4.0 / d[:, 2]).reshape(H, W)  # the plane z = 0 along each ray
    lit = alpha > 0.05
    assert lit.sum() > 200
    expected_depth = np.asarray(out.depth)[..., 0] / np.maximum(alpha, 1e-10)  # as mode "ED"
    np.testing.assert_allclose(expected_depth[lit], t[lit], rtol=1e-9)
    normal = np.asarray(out.extra)[..., 2:5] / np.maximum(alpha, 1e-12)[..., None]
    np.testing.assert_allclose(normal[lit], np.tile([0.0, 0.0, -1.0], (lit.sum(), 1)), atol=1e-9)


def test_edge_on_surfel_is_drawn_by_the_filter(method):
    h = np.sqrt(0.5)
    raw = _one([h, 0.0, h, 0.0])  # 90 degrees about y: the normal is +x, in the image plane
    out, cam = _render(method, raw)
    alpha = _compare(out, cam, raw)
    assert 0 < (alpha > 0.05).sum() < 60  # a thin line, not an ellipse


def test_verify_pinhole(method):
    report = verify.verify(method, "2dgs", models=("pinhole",))
    assert report.ok, report.format()


@pytest.mark.slow
def test_verify_every_camera_model(method):
    report = verify.verify(method, "2dgs", seeds=(0, 1))
    assert report.ok, report.format()


# ---------------------------------------------------------------------------------------------
# The 2DGS regularisers (xprc/train/losses_2dgs.py)

REG_CONFIG = dataclasses.replace(verify.config_for(N, W, H, 8), distortion=True)


def _reg_render(method, raw):
    cam = verify.camera("pinhole", W, H)
    raw = {k: jnp.asarray(v) for k, v in raw.items()}
    return render(method, raw, cam, mode="RGB+D", config=REG_CONFIG), cam


@pytest.mark.parametrize("form", losses_2dgs.FORMS)
def test_regularisers_vanish_on_one_face_on_surfel(method, form):
    out, cam = _reg_render(method, _one([1.0, 0.0, 0.0, 0.0], scale=6.0))  # fills the image
    assert float(jnp.min(out.alpha)) > 0.8
    terms = losses_2dgs.terms(method, out, cam, form)
    assert abs(float(terms["distortion"])) < 1e-12
    assert abs(float(terms["normal"])) < 1e-9


@pytest.mark.parametrize("form", losses_2dgs.FORMS)
def test_distortion_is_the_ndc_double_sum_of_two_surfels(method, form):
    """Two face-on surfels 0.1 apart: the term against the NDC double sums built from each
    surfel rendered alone (w1 = a1, w2 = (1 - a1) a2): w1 w2 (m1 - m2)^2 (squared, the official
    rasteriser's sum over i < j) and 2 w1 w2 |m1 - m2| (l1, the paper's sum over i, j). The
    terms' one approximation (zbar^2 for z1 z2) is below 2.5% here (5% squared)."""
    front = _one([1.0, 0.0, 0.0, 0.0], scale=6.0, opacity=0.0)  # opacity 0.5
    back = _one([1.0, 0.0, 0.0, 0.0], scale=6.0)
    back["means"][0] = [0.0, 0.0, 0.1]
    both = {k: v.copy() for k, v in front.items()}
    for k in both:
        both[k][1] = back[k][0]
    out, cam = _reg_render(method, both)
    (o1, _), (o2, _) = _reg_render(method, front), _reg_render(method, back)
    a1, a2 = np.asarray(o1.alpha)[..., 0], np.asarray(o2.alpha)[..., 0]
    z1 = np.asarray(o1.depth)[..., 0] / np.maximum(a1, 1e-12)
    z2 = np.asarray(o2.depth)[..., 0] / np.maximum(a2, 1e-12)
    near, far = losses_2dgs.NEAR, losses_2dgs.FAR
    m1, m2 = (far / (far - near) * (1 - near / z) for z in (z1, z2))
    w12 = a1 * (1 - a1) * a2
    if form == "l1":
        expected, rel = np.mean(2 * w12 * np.abs(m1 - m2)), 0.025
    else:
        expected, rel = np.mean(w12 * (m1 - m2) ** 2), 0.05
    got = float(losses_2dgs.terms(method, out, cam, form)["distortion"])
    assert expected > 1e-8
    assert got == pytest.approx(expected, rel=rel)


def test_l1_distortion_needs_the_distortion_render(method):
    cam = verify.camera("pinhole", W, H)
    out, _ = _render(method, _one([1.0, 0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="distortion=True"):
        losses_2dgs.terms(method, out, cam, "l1")


def test_regularisers_match_finite_differences():
    """Both terms in the composited sums they read, with the NDC factor held (the terms give it
    no gradient); tests/test_distortion.py checks the gradients of the pipeline's ordered sum."""
    rng = np.random.default_rng(3)
    alpha = jnp.asarray(rng.uniform(0.2, 0.9, (6, 7, 1)))
    z = jnp.asarray(rng.uniform(2.0, 3.0, (6, 7, 1)))
    sq = z * z + jnp.asarray(rng.uniform(0.0, 0.3, (6, 7, 1)))
    dist = jnp.asarray(rng.uniform(0.0, 0.3, (6, 7, 1)))
    nrm = jnp.asarray(rng.normal(size=(6, 7, 3)))
    origins = jnp.zeros((6, 7, 3))
    ys, xs = np.mgrid[0:6, 0:7]
    dirs = np.stack([(xs - 3) / 5, (ys - 3) / 5, np.ones(xs.shape)], -1)
    dirs = jnp.asarray(dirs / np.linalg.norm(dirs, axis=-1, keepdims=True))
    params = {"alpha": alpha, "z": z, "sq": sq, "dist": dist, "nrm": nrm}

    factor = losses_2dgs.ndc_factor(alpha, alpha * z)  # held: the terms give it no gradient

    def loss(p):
        a, zs = p["alpha"], p["alpha"] * p["z"]
        d = 1e3 * losses_2dgs.depth_distortion(a, zs, a * p["sq"], factor)
        d = d + losses_2dgs.depth_distortion_l1(p["dist"], factor)
        n = losses_2dgs.normal_consistency(p["alpha"], p["alpha"] * p["z"], p["nrm"], origins, dirs)
        return d + 3.0 * n

    assert_grads_match_fd(loss, params, jax.grad(loss)(params), rel=1e-5, require_nonzero=True)


# ---------------------------------------------------------------------------------------------
# Training on the demo scene (tests/spec_training.py): one shared 300-step run, regularisers on
# (the default for this spec), and one with them off for the comparison.


@pytest.fixture(scope="module")
def trained(method):
    return train_spec(method)


def test_training_gains_8db(trained):
    result, gain = trained
    assert gain >= 8.0, (result.initial_psnr, result.metrics)


def test_regularisers_are_on_by_default_and_logged(trained):
    result, _ = trained
    assert TrainConfig().regularisers == "auto"
    logged = [h for h in result.history if "distortion" in h and "normal" in h]
    assert len(logged) == len(result.history) > 0


def test_regulariser_switch_and_record(method, tmp_path, capsys):
    """auto: on for 2DGS (paper weights and start steps, recorded), off for 3DGS; on: an error
    for a spec without the outputs, also through the CLI; off: off."""
    gs3 = load(ROOT / "specs" / "3dgs.xpr")
    auto = TrainConfig(steps=30000)
    assert auto.regulariser_record(method) == {
        "distortion": {"weight": 1000.0, "from_step": 3000, "form": "squared"},
        "normal": {"weight": 0.05, "from_step": 7000},
    }
    assert auto.regulariser_record(gs3) is None
    assert TrainConfig(regularisers="off").regulariser_form(method) is None
    with pytest.raises(TrainError, match="emits no per-pixel depth"):
        TrainConfig(regularisers="on").regularised(gs3)
    argv = ["train", "--data", demo_root(), "--out", str(tmp_path / "run"), "--steps", "1"]
    assert main([*argv, "--regularisers", "on"]) == 1
    err = capsys.readouterr().err
    assert "regularisers 'on'" in err and "Traceback" not in err


def test_regularisers_lower_distortion_and_normal_error(method, trained):
    on, _ = trained
    off, _ = train_spec(method, regularisers="off")
    assert all("distortion" not in h for h in off.history)
    with_reg = regulariser_terms(method, on.params)
    without = regulariser_terms(method, off.params)
    assert with_reg["distortion"] < without["distortion"], (with_reg, without)
    assert with_reg["normal"] < without["normal"], (with_reg, without)
