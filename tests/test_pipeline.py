"""The shared pipeline against the independent float64 NumPy twin (tests/reference_3dgs.py).

Each test runs for the hand-written baseline module and for the module compiled from
specs/3dgs.xpr, so pipeline and compiler are both held to the reference.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_3dgs as ref
from conftest import GARDEN, ROOT, load_handwritten
from gradcheck import assert_grads_match_fd

from xprc.camera import Camera
from xprc.data.workloads import garden_workload, random_scene
from xprc.errors import XprError
from xprc.pipeline import RenderConfig, render
from xprc.pipeline.render import TRACE_COUNT


def _handwritten():
    return load_handwritten()


def _compiled():
    from xprc.compiler.driver import load

    return load(ROOT / "specs" / "3dgs.xpr")


METHODS = {"handwritten": _handwritten, "spec": _compiled}


@pytest.fixture(scope="module", params=sorted(METHODS))
def method(request):
    """Both modules: for the comparisons against the references."""
    return METHODS[request.param]()


@pytest.fixture(scope="module")
def spec_method():
    """The compiled spec only: for pipeline mechanics that do not depend on the method."""
    return _compiled()


def identity_camera(width=70, height=50, f=60.0, dtype=np.float32):
    K = np.array([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]], dtype)
    return Camera(viewmat=np.eye(4, dtype=dtype), K=K, width=width, height=height)


def as_np(x):
    return np.asarray(x, np.float64)


def assert_close_except_ambiguous(actual, expected, ambiguous, atol):
    """float32 may decide a threshold tie (alpha ~ 1/255, T ~ 1e-4) differently from float64:
    such pixels are excluded from the 1e-4 comparison, must be rare, and may differ by at most
    one primitive's contribution."""
    if actual.ndim == 3:
        ambiguous = ambiguous[..., None] & np.ones(actual.shape[-1], bool)[None, None, :]
    assert ambiguous.mean() < 1e-3, f"{ambiguous.sum()} ambiguous pixels"
    np.testing.assert_allclose(actual[~ambiguous], expected[~ambiguous], atol=atol, rtol=0)
    assert np.all(np.abs(actual - expected)[ambiguous] <= 0.05)


@pytest.mark.parametrize("sh_degree", [0, 3])
@pytest.mark.parametrize("background", [None, (0.1, 0.2, 0.3)])
def test_random_scene_matches_reference(method, sh_degree, background):
    params = random_scene(300, seed=1, sh_degree=sh_degree)
    cam = identity_camera()
    bg = None if background is None else jnp.asarray(background, jnp.float32)
    out = render(method, params, cam, background=bg, mode="RGB+ED")
    colour, alpha, dsum = ref.render(params, np.eye(4), cam.K, 70, 50, background=background)
    assert out.image.dtype == jnp.float32
    np.testing.assert_allclose(as_np(out.image), colour, atol=1e-4, rtol=0)
    np.testing.assert_allclose(as_np(out.alpha)[..., 0], alpha, atol=1e-4, rtol=0)
    expected_depth = dsum / np.maximum(alpha, 1e-10)
    np.testing.assert_allclose(as_np(out.depth)[..., 0], expected_depth, atol=1e-4, rtol=1e-5)


def test_depth_modes(spec_method):
    params = random_scene(200, seed=2, sh_degree=1)
    cam = identity_camera()
    _, alpha, dsum = ref.render(params, np.eye(4), cam.K, 70, 50)
    d = render(spec_method, params, cam, mode="D")
    assert d.image is None
    np.testing.assert_allclose(as_np(d.depth)[..., 0], dsum, atol=1e-4 * 8, rtol=1e-5)
    ed = render(spec_method, params, cam, mode="ED")
    np.testing.assert_allclose(as_np(ed.depth)[..., 0] * alpha, dsum, atol=1e-4 * 8, rtol=1e-5)
    rgb = render(spec_method, params, cam, mode="RGB")
    assert rgb.depth is None and rgb.image.shape == (50, 70, 3)


@pytest.mark.skipif(not GARDEN.exists(), reason="shared garden data not present")
@pytest.mark.parametrize("cam_index", [0, 2])
def test_garden_subset_matches_reference(method, cam_index):
    params, cams = garden_workload(GARDEN, num=5000, scale=0.25)
    cam = cams[cam_index]
    out = render(method, params, cam, mode="RGB+D")
    colour, alpha, dsum, amb = ref.render(
        params, cam.viewmat, cam.K, cam.width, cam.height, ambiguous=True
    )
    assert int(out.stats["dropped"]) == 0
    assert_close_except_ambiguous(as_np(out.image), colour, amb, 1e-4)
    assert_close_except_ambiguous(as_np(out.alpha)[..., 0], alpha, amb, 1e-4)
    # Depth sums scale with the scene depth (up to ~6 units): compare relative to it.
    np.testing.assert_allclose(as_np(out.depth)[..., 0][~amb], dsum[~amb], atol=1e-3, rtol=1e-5)


@pytest.mark.skipif(not GARDEN.exists(), reason="shared garden data not present")
def test_garden_subset_float64_matches_reference_everywhere(spec_method):
    params, cams = garden_workload(GARDEN, num=5000, scale=0.25, dtype=np.float64)
    cam = cams[2]
    out = render(spec_method, params, cam, mode="RGB")
    colour, alpha, _ = ref.render(params, cam.viewmat, cam.K, cam.width, cam.height)
    np.testing.assert_allclose(as_np(out.image), colour, atol=1e-6, rtol=0)
    np.testing.assert_allclose(as_np(out.alpha)[..., 0], alpha, atol=1e-6, rtol=0)


def test_renders_trace_once_across_new_values(spec_method):
    cam = identity_camera()
    render(spec_method, random_scene(64, seed=3), cam)
    before = TRACE_COUNT["render"]
    for seed in (4, 5, 6):
        out = render(spec_method, random_scene(64, seed=seed), identity_camera(f=50.0 + seed))
        out.image.block_until_ready()
    assert TRACE_COUNT["render"] == before


def test_overflow_is_counted_exactly(spec_method):
    # 40 primitives spread over the image: every entry count is known from the footprints.
    params = random_scene(40, seed=7)
    cam = identity_camera()
    full = render(spec_method, params, cam, config=RenderConfig(max_entries=4096))
    needed = int(full.stats["entries_needed"])
    assert int(full.stats["dropped"]) == 0 and needed > 20
    kept = np.asarray(full.stats["entries_per_tile"])
    culled = int(full.stats["entries_culled"])  # rectangle entries the spec's ellipse rejected
    assert kept.sum() + culled == needed
    cap = needed - 17
    message = f"render dropped 17 .* {needed} needed, capacity {cap};"
    with pytest.warns(RuntimeWarning, match=message):
        small = render(spec_method, params, cam, config=RenderConfig(max_entries=cap))
    assert int(small.stats["dropped"]) == 17
    per_tile = np.asarray(small.stats["dropped_per_tile"])
    assert per_tile.sum() == 17 and per_tile.min() >= 0
    # The 17 dropped rectangle entries are the deepest: those the ellipse would have kept are
    # missing from their tiles' lists, the others would have been culled anyway.
    lost = kept - np.asarray(small.stats["entries_per_tile"])
    assert lost.min() >= 0 and np.all(lost <= per_tile)
    assert lost.sum() + culled - int(small.stats["entries_culled"]) == 17
    # Nothing dropped: the tiled render equals the unbounded reference.
    colour, _, _ = ref.render(params, np.eye(4), cam.K, 70, 50)
    np.testing.assert_allclose(as_np(full.image), colour, atol=1e-4, rtol=0)


def test_batched_cameras_equal_single_renders(spec_method):
    params = random_scene(150, seed=8)
    cams = [identity_camera(f=f) for f in (50.0, 60.0, 75.0)]
    batch = render(spec_method, params, Camera.stack(cams), mode="RGB+D")
    assert batch.image.shape == (3, 50, 70, 3)
    for i, cam in enumerate(cams):
        single = render(spec_method, params, cam, mode="RGB+D")
        np.testing.assert_allclose(as_np(batch.image[i]), as_np(single.image), atol=1e-6)
        np.testing.assert_allclose(as_np(batch.depth[i]), as_np(single.depth), atol=1e-5)


def _f64(params):
    return {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}


def test_gradients_match_finite_differences(method):
    # A small, smooth scene: few primitives, moderate opacity, nothing near a threshold.
    params = _f64(random_scene(6, seed=9, sh_degree=1, spread=0.4, depth=3.0))
    params["opacities"] = jnp.clip(params["opacities"], -1.0, 1.0)
    cam = identity_camera(width=24, height=20, f=20.0, dtype=np.float64)
    weights = jnp.asarray(np.random.default_rng(0).uniform(size=(20, 24, 3)))
    bg = jnp.asarray([0.2, 0.3, 0.4], jnp.float64)

    def loss(p):
        out = render(method, p, cam, background=bg, mode="RGB+ED")
        return jnp.sum(out.image * weights) + 0.1 * jnp.sum(out.depth)

    assert_grads_match_fd(loss, params, jax.grad(loss)(params))


def test_gradients_finite_for_degenerate_primitives(spec_method):
    params = _f64(random_scene(8, seed=10, sh_degree=1))
    means = np.asarray(params["means"]).copy()
    means[0] = [0.0, 0.0, 0.0]  # exactly at the camera centre
    means[1] = [0.1, 0.0, -1.0]  # behind the camera
    means[2] = [0.0, 0.0, 0.01]  # at the near plane
    scales = np.asarray(params["scales"]).copy()
    scales[3] = -80.0  # zero scale
    scales[4] = 40.0  # huge scale
    quats = np.asarray(params["quats"]).copy()
    quats[5] = 0.0  # zero quaternion
    params.update(means=jnp.asarray(means), scales=jnp.asarray(scales), quats=jnp.asarray(quats))
    cam = identity_camera(width=24, height=20, f=20.0, dtype=np.float64)

    def loss(p):
        return jnp.sum(render(spec_method, p, cam, mode="RGB+ED").image)

    value, grads = jax.value_and_grad(loss)(params)
    assert np.isfinite(float(value))
    for name, g in grads.items():
        assert np.all(np.isfinite(np.asarray(g))), name


def test_bad_inputs_raise_xpr_errors(spec_method):
    params = random_scene(10, seed=11)
    cam = identity_camera()
    with pytest.raises(XprError, match="unknown render mode 'RGBD'"):
        render(spec_method, params, cam, mode="RGBD")
    broken = dict(params)
    del broken["scales"]
    with pytest.raises(XprError, match="parameters missing .*: scales"):
        render(spec_method, broken, cam)
    bad = dict(params, means=params["means"][:, :2])
    with pytest.raises(XprError, match="parameter 'means' has shape"):
        render(spec_method, bad, cam)
    text = dict(params, opacities=np.asarray(params["opacities"]).astype(str))
    with pytest.raises(XprError, match=r"parameter 'opacities' holds <U\d+, not real numbers"):
        render(spec_method, text, cam)  # (was a TypeError traceback from jnp.asarray)
    # each of these was a traceback from deep inside JAX or the pipeline
    whole = dict(params, opacities=np.ones(10, np.int32))
    with pytest.raises(XprError, match=r"parameter 'opacities' holds int32: raw parameters are "
                       r"floating point"):  # fmt: skip
        render(spec_method, whole, cam)
    with pytest.raises(XprError, match=r"parameters must be a dict of arrays keyed by name "
                       r"\(means, .*\), got list"):  # fmt: skip
        render(spec_method, list(params.values()), cam)
    with pytest.raises(XprError, match=r"camera must be an xprc.Camera .*, got list"):
        render(spec_method, params, [cam])
    with pytest.raises(XprError, match=r"camera must be an xprc.Camera .*, got ndarray"):
        render(spec_method, params, np.eye(4))
    stacks = Camera.stack([Camera.stack([cam, cam])] * 2)
    with pytest.raises(XprError, match=r"camera: a stack of \(2, 2\) cameras"):
        render(spec_method, params, stacks)


def test_antialiased_mode_matches_reference():
    from xprc.compiler.driver import load

    method = load(ROOT / "specs" / "3dgs.xpr", defines={"antialiased": 1})
    params = random_scene(200, seed=12)
    cam = identity_camera()
    out = render(method, params, cam, background=jnp.full((3,), 0.5, jnp.float32))
    colour, alpha, _ = ref.render(
        params, np.eye(4), cam.K, 70, 50, background=(0.5,) * 3, antialiased=True
    )
    np.testing.assert_allclose(as_np(out.image), colour, atol=1e-4, rtol=0)
    np.testing.assert_allclose(as_np(out.alpha)[..., 0], alpha, atol=1e-4, rtol=0)


def test_any_number_of_feature_channels(tmp_path):
    """A spec with 5 feature channels: RGB, a constant 1 (accumulates to alpha) and the world z
    of the centre (accumulates to the depth sum under an identity camera)."""
    from xprc.compiler.driver import load

    text = (ROOT / "specs" / "3dgs.xpr").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("color")]
    end = lines.index("response {") - 2  # the projection block's closing brace
    assert lines[end] == "}"
    lines[end:end] = [
        "  rgb = max(eval_sh(sh, normalize(means - camera.position)) + 0.5, 0)",
        "  emit color = [rgb.x, rgb.y, rgb.z, 1.0, means.z]",
    ]
    path = tmp_path / "five_channels.xpr"
    path.write_text("\n".join(lines) + "\n")
    method = load(path)
    assert method.NUM_FEATURES == 5
    params = random_scene(150, seed=13)
    cam = identity_camera()
    out = render(method, params, cam, mode="RGB+D")
    assert out.image.shape == (50, 70, 5)
    colour, alpha, dsum = ref.render(params, np.eye(4), cam.K, 70, 50)
    np.testing.assert_allclose(as_np(out.image[..., :3]), colour, atol=1e-4, rtol=0)
    np.testing.assert_allclose(as_np(out.image[..., 3]), alpha, atol=1e-4, rtol=0)
    np.testing.assert_allclose(as_np(out.image[..., 4]), dsum, atol=1e-3, rtol=1e-5)
