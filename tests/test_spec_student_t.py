"""specs/student_t.xpr (Student Splatting and Scooping, issue 14): the compiled spec against the
independent NumPy twin tests/reference_student_t.py on random, large and edge-on scenes with
negative components; `verify`; float64 gradients against finite differences; a short training
run on the demo scene. docs/student_t.md."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_student_t
from conftest import ROOT
from gradcheck import assert_grads_match_fd
from spec_training import spec_lines, train_spec

from xprc import verify
from xprc.compiler.driver import load
from xprc.pipeline import render

SPEC = ROOT / "specs" / "student_t.xpr"
W, H, N = 40, 32, 16  # verify's defaults: the reference renders share its compiled function


@pytest.fixture(scope="module")
def method():
    return load(SPEC)


def scene(method, kind, seed):
    raw = verify.scene(method, kind, N, seed)
    # b spread over flat (beta ~ 1) to peaked (beta ~ 11) kernels
    rng = np.random.default_rng(seed)
    raw["nus"] = rng.uniform(-1.5, 2.5, N)  # nu from 1.2 to 13
    o = rng.uniform(0.1, 0.95, N) * np.where(np.arange(N) % 3 == 0, -1.0, 1.0)  # every 3rd < 0
    raw["opacities"] = np.arctanh(o)
    return raw


def test_spec_is_short_and_reuses_3dgs(method):
    assert spec_lines(SPEC) <= 40
    assert method.NAME == "StudentT" and method.SIGNED_ALPHA
    nus = {p.name: p for p in method.PARAMS}["nus"]
    assert nus.init == 10.0 and nus.init_raw == pytest.approx(np.log(9.0))


@pytest.mark.parametrize("kind", ["random", "large", "edge-on"])
def test_render_matches_numpy_reference(method, kind):
    cam = verify.camera("pinhole", W, H)
    raw = scene(method, kind, seed=len(kind))
    out, _ = verify.render_pair(
        method, {k: jnp.asarray(v) for k, v in raw.items()}, cam, verify.config_for(N, W, H, 8)
    )
    colour, alpha, depth = reference_student_t.render(
        raw, np.asarray(cam.viewmat), np.asarray(cam.K), W, H
    )
    assert float(alpha.max()) > 0.5  # the scene shows something
    positive = dict(raw, opacities=np.abs(raw["opacities"]))
    splat_only = reference_student_t.render(
        positive, np.asarray(cam.viewmat), np.asarray(cam.K), W, H
    )[0]
    assert np.abs(splat_only - colour).max() > 0.05  # the negative components scoop
    assert np.abs(np.asarray(out.image) - colour).max() <= 1e-4
    assert np.abs(np.asarray(out.alpha)[..., 0] - alpha).max() <= 1e-4
    assert np.abs(np.asarray(out.depth)[..., 0] - depth).max() <= 1e-4


def test_verify_pinhole(method):
    report = verify.verify(method, "student_t", models=("pinhole",))
    assert report.ok, report.format()


@pytest.mark.slow
def test_verify_every_camera_model(method):
    report = verify.verify(method, "student_t", seeds=(0, 1))
    assert report.ok, report.format()


def test_gradients_match_finite_differences(method):
    raw = verify.scene(method, "large", 6, seed=4)
    raw["nus"] = np.array([-1.0, -0.5, 0.0, 0.3, 0.6, 1.0])
    raw["opacities"] = np.array([1.0, -0.8, 0.7, -1.2, 0.9, 1.5])  # two scoops
    params = {k: jnp.asarray(v, jnp.float64) for k, v in raw.items()}
    cam = verify.camera("pinhole", 24, 20)
    weights = jnp.asarray(np.random.default_rng(0).uniform(size=(20, 24, 3)))

    @jax.jit
    def loss(p):
        out = render(method, p, cam, mode="RGB+ED")
        return jnp.sum(out.image * weights) + 0.1 * jnp.sum(out.depth)

    assert_grads_match_fd(loss, params, jax.grad(loss)(params), require_nonzero=True)


def test_training_gains_8db_and_keeps_scoops_alive(method):
    result, gain = train_spec(method)
    assert gain >= 8.0, (result.initial_psnr, result.metrics)
    negative = int(np.sum(np.tanh(np.asarray(result.params["opacities"])) <= -1 / 255))
    assert negative > 0, "the trainer should keep scooping components alive (|opacity|)"
