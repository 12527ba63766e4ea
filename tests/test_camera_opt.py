"""Camera refinement (xprc.train.camera_opt): the pose maths, and recovering perturbed poses."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, import_file
from scipy.spatial.transform import Rotation
from test_train import METHOD

from xprc import train as tr
from xprc.camera import Camera, look_at
from xprc.pipeline import render
from xprc.pipeline.render import fit_config
from xprc.train.camera_opt import (
    correct,
    corrections_optimizer,
    init_corrections,
    pose_delta,
    pose_matrices,
    rotation,
    step_corrections,
)


def test_rotation_is_rodrigues():
    rng = np.random.default_rng(0)
    for w in [rng.normal(size=3) * s for s in (1e-6, 0.01, 0.5, 2.0)]:
        want = Rotation.from_rotvec(w).as_matrix()
        np.testing.assert_allclose(np.asarray(rotation(jnp.asarray(w))), want, atol=1e-12)
    g = jax.grad(lambda w: jnp.sum(rotation(w) * jnp.arange(9.0).reshape(3, 3)))(jnp.zeros(3))
    assert np.all(np.isfinite(np.asarray(g)))
    # at zero: d(R)/dw_k is the generator [e_k]x, so the gradient is (m21 - m12, ...)
    m = np.arange(9.0).reshape(3, 3)
    np.testing.assert_allclose(g, [m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]])


def test_correct_applies_pose_and_intrinsics():
    cams = Camera.stack(
        [
            look_at([3.0, i, 1.0], [0, 0, 0], [0, 0, 1], 40, 30, 50.0, dtype=np.float64)
            for i in (0, 1)
        ]
    )
    corr = init_corrections(2, True, True, 12)
    same = correct(cams, corr, jnp.asarray([1, 0]))
    np.testing.assert_array_equal(same.viewmat, cams.viewmat)
    np.testing.assert_array_equal(same.K, cams.K)
    w, u = np.array([0.01, -0.02, 0.03]), np.array([0.1, 0.2, -0.3])
    corr["pose"] = corr["pose"].at[1].set(jnp.asarray(np.concatenate([w, u]), jnp.float32))
    corr["intrinsics"] = jnp.asarray([math.log(2.0), 0.0, 1.5, -2.0], jnp.float32)
    cam = correct(cams[1], corr, 1)
    delta = np.eye(4)
    delta[:3, :3], delta[:3, 3] = Rotation.from_rotvec(w).as_matrix(), u
    np.testing.assert_allclose(cam.viewmat, delta @ np.asarray(cams.viewmat[1]), atol=1e-6)
    np.testing.assert_allclose(cam.fx, 2.0 * cams.fx[1], rtol=1e-6)
    np.testing.assert_allclose(cam.fy, cams.fy[1], rtol=1e-6)
    np.testing.assert_allclose([cam.cx, cam.cy], [cams.cx[1] + 1.5, cams.cy[1] - 2.0], rtol=1e-6)


def test_pose_delta_turns_about_the_pivot():
    """x -> R (x - q) + q + u: the pivot q = (0, 0, d) moves by u only; at d = 0 it is the
    camera-centred correction [[R, u], [0, 1]]."""
    w, u, d = np.array([0.03, -0.01, 0.02]), np.array([0.1, -0.2, 0.05]), 3.5
    p = jnp.asarray(np.concatenate([w, u]))
    delta = np.asarray(pose_delta(p, jnp.asarray(d)))
    np.testing.assert_allclose(delta @ [0.0, 0.0, d, 1.0], [u[0], u[1], u[2] + d, 1.0], atol=1e-12)
    R = Rotation.from_rotvec(w).as_matrix()
    np.testing.assert_allclose(delta[:3, :3], R, atol=1e-12)
    x = np.array([0.3, -0.4, 2.0])
    np.testing.assert_allclose(
        delta[:3, :3] @ x + delta[:3, 3], R @ (x - [0, 0, d]) + [0, 0, d] + u
    )
    centred = np.asarray(pose_delta(p, jnp.asarray(0.0)))
    np.testing.assert_allclose(centred[:3, 3], u, atol=1e-12)


def test_pose_gradient_matches_finite_differences():
    """The photometric loss reaches the pose correction through `correct` and the render: its
    gradient (about a pivot) equals central differences (float64)."""
    scene, views = _gaussian_truth(), _ring(4)
    cams = Camera.stack([cam for cam, _ in views])
    cams = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), cams)
    target = jnp.asarray(np.stack([img for _, img in views]), jnp.float64) * 0.9
    pivots = jnp.asarray([3.0, 3.5, 4.0, 2.5])
    rconfig = fit_config(METHOD, scene, cams, margin=2.0)

    def loss(pose):
        corrected = correct(cams, {"pose": pose}, jnp.arange(4), pivots)
        out = render(METHOD, scene, corrected, config=rconfig)
        return jnp.sum((out.image - target) ** 2)

    rng = np.random.default_rng(3)
    p0 = jnp.asarray(rng.normal(size=(4, 6)) * 0.02)
    g = np.asarray(jax.jit(jax.grad(loss))(p0))
    loss = jax.jit(loss)
    eps = 1e-6
    for v, k in [(0, 0), (1, 1), (2, 2), (3, 3), (0, 4), (1, 5)]:
        e = jnp.zeros((4, 6)).at[v, k].set(eps)
        fd = (float(loss(p0 + e)) - float(loss(p0 - e))) / (2 * eps)
        np.testing.assert_allclose(g[v, k], fd, rtol=1e-5, atol=1e-6)
    assert np.all(g != 0.0)


SIZE = 64


def _gaussian_truth(n: int = 150) -> dict:
    """150 random Gaussians in [-0.8, 0.8]^3 (float64, raw)."""
    rng = np.random.default_rng(0)
    colors = rng.uniform(0.05, 0.95, (n, 3))
    gt = {
        "means": rng.uniform(-0.8, 0.8, (n, 3)),
        "quats": rng.standard_normal((n, 4)),
        "scales": np.log(rng.uniform(0.06, 0.18, (n, 3))),
        "opacities": np.full(n, 1.5),
        "sh": np.zeros((n, 16, 3)),
    }
    gt["sh"][:, 0] = (colors - 0.5) / tr.SH_C0
    return {k: jnp.asarray(v) for k, v in gt.items()}


def _ring(count: int, size: int = 32):
    """`count` cameras on a ring around the origin and their float64 renders of the truth."""
    scene, out = _gaussian_truth(), []
    for i in range(count):
        th = 2 * math.pi * i / count
        eye = 3.5 * np.array([math.cos(th), math.sin(th), 0.4 + 0.3 * (i % 2)])
        cam = look_at(eye, [0, 0, 0], [0, 0, 1], size, size, 1.5 * size, dtype=np.float64)
        out.append((cam, np.asarray(render(METHOD, scene, cam).image)))
    return out


def test_pose_only_refinement_recovers_the_poses():
    """With the scene fixed at the truth (no gauge freedom), Adam on the pose corrections
    (`corrections_optimizer`) takes 6 views perturbed by 2 degrees
    and 5% of the scene scale to within a quarter of that (the scene-and-pose run is the slow
    test below). The pivot is the depth of the scene's centre, as the trainer's."""
    V, STEPS = 6, 200
    scene, views = _gaussian_truth(), _ring(V)
    cams = Camera.stack([cam for cam, _ in views])
    target = jnp.asarray(np.stack([img for _, img in views]))
    centres = np.stack([-c.R.T @ c.t for c, _ in views])
    scale = 1.1 * np.linalg.norm(centres - centres.mean(0), axis=1).max()  # as scene_scale
    pivots = jnp.full((V,), 3.5)
    # 2 degrees about a random axis and 5% of the scene scale in a random direction, about the
    # pivot; views 3..5 take the opposite perturbations of views 0..2
    rng = np.random.default_rng(1)
    half = np.stack([_random_perturbation(rng, 2.0, 0.05 * scale) for _ in range(V // 2)])
    perturbation = jnp.asarray(np.concatenate([half, -half]))
    deltas = pose_matrices(perturbation, pivots)
    noisy = cams.replace(viewmat=jnp.asarray(deltas @ np.asarray(cams.viewmat)))
    corr = init_corrections(V, True, False, 12)
    corr = {"pose": corr["pose"].astype(jnp.float64)}
    opt = corrections_optimizer(corr, 3e-3, 0.0, scale)
    rconfig = fit_config(METHOD, scene, noisy, margin=2.0)

    @jax.jit
    def step(corr, state):
        def loss(c):
            out = render(METHOD, scene, correct(noisy, c, jnp.arange(V), pivots), config=rconfig)
            return jnp.mean(jnp.abs(out.image - target)), out.stats["dropped"]

        grad, dropped = jax.grad(loss, has_aux=True)(corr)
        return *step_corrections(opt, grad, state, corr), dropped

    state = opt.init(corr)
    for _ in range(STEPS):
        corr, state, dropped = step(corr, state)
        assert not np.any(np.asarray(dropped))
    fixed = pose_matrices(corr["pose"], pivots) @ deltas  # corrected = fixed @ true
    deg = np.degrees(Rotation.from_matrix(fixed[:, :3, :3]).magnitude())
    shift = np.linalg.norm(fixed[:, :3, 3], axis=1) / scale
    assert deg.max() < 0.5 and shift.max() < 0.0125, (deg, shift)


def _random_perturbation(rng, degrees: float, shift: float) -> np.ndarray:
    """[6]: an axis-angle rotation of `degrees` about a uniform axis, a shift of `shift`."""
    axis, d = rng.normal(size=3), rng.normal(size=3)
    w = axis / np.linalg.norm(axis) * math.radians(degrees)
    return np.concatenate([w, shift * d / np.linalg.norm(d)])


def _benchmark():
    """benchmarks/pose_refinement.py (perturbation and pose-error helpers), imported once."""
    return import_file(ROOT / "benchmarks" / "pose_refinement.py")


def _demo_pose_runs(root, size: int):
    """The demo scene's 12 training poses perturbed by 2 degrees and 5% of the scene scale
    (test poses exact), trained 1200 steps without and with `pose_opt`; (plain, refined, the
    refined poses' errors after the best global similarity: the poses up to the gauge a scene
    that can move leaves free)."""
    import xprc
    from xprc.data.demo_scene import generate_demo_scene
    from xprc.data.scene_folder import load_scene

    bench = _benchmark()
    generate_demo_scene(root, n_train=12, n_test=4, size=(size, size))
    train_set, test_set = load_scene(root)
    truth = np.stack([np.asarray(v.viewmat, np.float64) for v in train_set.views])
    scale = tr.scene_scale(train_set)
    noisy, _ = bench.perturb(train_set, 2.0, 0.05)
    method = xprc.load(ROOT / "specs" / "3dgs.xpr")
    config = tr.TrainConfig(
        steps=1200, refine_from=120, sh_degree_interval=300, eval_every=0, checkpoint_every=0,
        progress=False, save_renders=False,
    )  # fmt: skip
    plain = tr.train(method, noisy, test_set, None, config)
    refined = tr.train(method, noisy, test_set, None, dataclasses.replace(config, pose_opt=True))
    est = bench.corrected_viewmats(noisy.views, refined.cameras)
    return plain, refined, bench.pose_errors(est, truth, scale, align=True)


@pytest.fixture(scope="module")
def demo_pose_runs(tmp_path_factory):
    return _demo_pose_runs(tmp_path_factory.mktemp("demo"), 64)


@pytest.mark.slow  # two 1200-step runs of the demo scene at 64x64 (10-25 min on 2 shared cores)
def test_pose_refinement_beats_plain_and_recovers_translation(demo_pose_runs):
    """Issue 18 on the demo scene: test PSNR beats the run without refinement (measured 20.5 vs
    15.2 dB) and the camera centres are recovered to a quarter of 5% (measured 0.49%)."""
    plain, refined, err = demo_pose_runs
    assert refined.metrics["psnr"] > plain.metrics["psnr"] + 3.0, (plain.metrics, refined.metrics)
    assert err["trans_frac_mean"] < 0.05 / 4, err


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="not at 64x64: every view ends ~1 degree off in pitch, the same sign for all, a "
    "reconstruction bias of about 1.5 px that shrinks in degrees with the image size "
    "(0.65 deg at 128, 0.44 deg at 256: the test below; docs/training.md)",
)
def test_pose_refinement_recovers_rotation_to_a_quarter(demo_pose_runs):
    """Issue 18's rotation target at 64x64: 2 degrees recovered to 0.5 (measured 1.0-1.2)."""
    _, _, err = demo_pose_runs
    assert err["rot_deg_mean"] < 2.0 / 4, err


@pytest.mark.slow  # two 1200-step runs at 256x256: ~2 min on an H200, hours on 2 CPU cores
@pytest.mark.skipif(jax.default_backend() == "cpu", reason="256x256 training needs an accelerator")
def test_pose_refinement_at_256px_meets_every_target(tmp_path):
    """Issue 18's item 4 whole at 256x256 (measured on an H200, 2026-12-04: rotation 0.44 deg,
    centres 0.40% of the scene scale, test PSNR 19.4 dB against 14.7 without refinement)."""
    plain, refined, err = _demo_pose_runs(tmp_path, 256)
    assert err["rot_deg_mean"] < 2.0 / 4 and err["trans_frac_mean"] < 0.05 / 4, err
    assert refined.metrics["psnr"] > plain.metrics["psnr"] + 3.0, (plain.metrics, refined.metrics)
