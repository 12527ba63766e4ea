"""specs/beta.xpr (Deformable Beta Splatting, issue 14): the compiled spec against the independent
NumPy twin tests/reference_beta.py on random, large and edge-on scenes; `verify`; float64
gradients against finite differences; a short training run on the demo scene. docs/beta.md."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_beta
from conftest import ROOT
from gradcheck import assert_grads_match_fd
from spec_training import spec_lines, train_spec

from xprc import verify
from xprc.compiler.driver import load
from xprc.pipeline import render

SPEC = ROOT / "specs" / "beta.xpr"
W, H, N = 40, 32, 16  # verify's defaults: the reference renders share its compiled function


@pytest.fixture(scope="module")
def method():
    return load(SPEC)


def scene(method, kind, seed):
    raw = verify.scene(method, kind, N, seed)
    # b spread over flat (beta ~ 1) to peaked (beta ~ 11) kernels
    raw["betas"] = np.random.default_rng(seed).uniform(-1.4, 1.0, N)
    return raw


def test_spec_is_short_and_reuses_3dgs(method):
    assert spec_lines(SPEC) <= 40
    assert method.NAME == "Beta"
    betas = {p.name: p for p in method.PARAMS}["betas"]
    assert betas.init == 4.0 and betas.init_raw == pytest.approx(0.0)


@pytest.mark.parametrize("kind", ["random", "large", "edge-on"])
def test_render_matches_numpy_reference(method, kind):
    cam = verify.camera("pinhole", W, H)
    raw = scene(method, kind, seed=len(kind))
    out, _ = verify.render_pair(
        method, {k: jnp.asarray(v) for k, v in raw.items()}, cam, verify.config_for(N, W, H, 8)
    )
    colour, alpha, depth = reference_beta.render(
        raw, np.asarray(cam.viewmat), np.asarray(cam.K), W, H
    )
    assert float(alpha.max()) > 0.5  # the scene shows something
    assert np.abs(np.asarray(out.image) - colour).max() <= 1e-4
    assert np.abs(np.asarray(out.alpha)[..., 0] - alpha).max() <= 1e-4
    assert np.abs(np.asarray(out.depth)[..., 0] - depth).max() <= 1e-4


def test_bounded_support():
    s = np.array([0.0, 0.5, 0.999, 1.0, 3.0])
    np.testing.assert_allclose(reference_beta.beta_kernel(s, 4.0), [1, 0.0625, 1e-12, 0, 0])


def test_verify_pinhole(method):
    report = verify.verify(method, "beta", models=("pinhole",))
    assert report.ok, report.format()


@pytest.mark.slow
def test_verify_every_camera_model(method):
    report = verify.verify(method, "beta", seeds=(0, 1))
    assert report.ok, report.format()


def test_gradients_match_finite_differences(method):
    raw = verify.scene(method, "large", 6, seed=4)
    raw["betas"] = np.array([-1.0, -0.5, 0.0, 0.3, 0.6, 1.0])
    raw["opacities"] = np.clip(raw["opacities"], -2.0, 2.0)
    params = {k: jnp.asarray(v, jnp.float64) for k, v in raw.items()}
    cam = verify.camera("pinhole", 24, 20)
    weights = jnp.asarray(np.random.default_rng(0).uniform(size=(20, 24, 3)))

    @jax.jit
    def loss(p):
        out = render(method, p, cam, mode="RGB+ED")
        return jnp.sum(out.image * weights) + 0.1 * jnp.sum(out.depth)

    assert_grads_match_fd(loss, params, jax.grad(loss)(params), require_nonzero=True)


def test_training_gains_8db(method, tmp_path):
    result, gain = train_spec(method, tmp_path)
    assert gain >= 8.0, (result.initial_psnr, result.metrics)
