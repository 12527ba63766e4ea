"""The compositing custom VJP (`RenderConfig(backward="custom")`, the default; issue 17) against
JAX autodiff of the same forward scan (`backward="autodiff"`, the code the custom VJP replaces),
in float64, for every kind of spec: 3DGS, 3DGUT (rays: camera gradients through the rays), the
LinPrim octahedron, Student-t (signed alpha, negative components) and 2DGS (per-pixel outputs).
Parameter and camera gradients of a loss on colour, alpha, depth (ED) and the per-pixel outputs
with random weights; scenes where the stop rule ends lists and tiles saturate; and float64
finite differences of the custom path on a small scene.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT
from gradcheck import assert_grads_match_fd

from xprc import verify
from xprc.camera import Camera, look_at
from xprc.compiler.driver import load
from xprc.errors import XprError
from xprc.pipeline import RenderConfig, render

W, H = 24, 20
# small chunks and groups: lists span several chunks, groups cross tiles, padding lanes occur
CONFIG = RenderConfig(tile_size=8, chunk=4, group=4, max_entries=4096)
SPECS = ["3dgs", "3dgut", "linprim_octahedron", "student_t", "2dgs"]


@pytest.fixture(scope="module", params=SPECS)
def method(request):
    return load(ROOT / "specs" / f"{request.param}.xpr")


def _scene(method, kind, n, seed, opacity=None, dtype=jnp.float64):
    raw = verify.scene(method, kind, n, seed=seed)
    if opacity is not None:
        raw["opacities"] = np.full(n, opacity)
    if getattr(method, "SIGNED_ALPHA", False):  # every third component scoops
        raw["opacities"] = np.where(np.arange(n) % 3 == 0, -1.0, 1.0) * np.abs(raw["opacities"])
    return {k: jnp.asarray(v, dtype) for k, v in raw.items()}


def _loss(method, config, cam_shape=(H, W)):
    rng = np.random.default_rng(0)
    k = len(getattr(method, "PIXEL_OUTPUTS", ()))
    wc, wa, wd = (jnp.asarray(rng.uniform(-1, 1, cam_shape + (c,))) for c in (3, 1, 1))
    we = jnp.asarray(rng.uniform(-1, 1, cam_shape + (k,))) if k else None

    def loss(params, cam):
        out = render(method, params, cam, mode="RGB+ED", config=config)
        total = jnp.sum(out.image * wc) + jnp.sum(out.alpha * wa) + jnp.sum(out.depth * wd)
        if we is not None:
            total = total + jnp.sum(out.extra * we)
        return total

    return loss


def _grads(method, params, cam, config):
    return jax.jit(jax.grad(_loss(method, config), argnums=(0, 1)))(params, cam)


def _assert_same(got, want, tol=1e-10):
    for (path, a), (_, b) in zip(
        jax.tree_util.tree_leaves_with_path(got),
        jax.tree_util.tree_leaves_with_path(want),
        strict=True,
    ):
        a, b = np.asarray(a), np.asarray(b)
        scale = max(1.0, float(np.abs(b).max()))
        assert np.abs(a - b).max() <= tol * scale, (jax.tree_util.keystr(path), scale)


def _compare(method, params, cam, config=CONFIG):
    custom = _grads(method, params, cam, config)
    auto = _grads(method, params, cam, dataclasses.replace(config, backward="autodiff"))
    _assert_same(custom, auto)
    assert np.abs(np.asarray(custom[1].viewmat)).max() > 0  # the camera gets a gradient
    return custom


def test_custom_vjp_equals_autodiff(method):
    params = _scene(method, "large", 12, seed=3)  # overlapping primitives of every size
    _compare(method, params, verify.camera("pinhole", W, H))


# 50-70 s a case on 2 busy cores: each argnum once by default, the other two under -m slow
@pytest.mark.parametrize(
    "spec,argnum",
    [
        pytest.param("3dgut", 0, id="3dgut-0"),
        pytest.param("3dgut", 1, id="3dgut-1", marks=pytest.mark.slow),
        pytest.param("2dgs", 0, id="2dgs-0", marks=pytest.mark.slow),
        pytest.param("2dgs", 1, id="2dgs-1"),
    ],
)
def test_one_sided_gradients_equal_autodiff(spec, argnum):
    """Differentiated in the primitives only, or in the camera only, after the same render was
    differentiated in both: the same as both's part and as autodiff's (guards a backward that
    would skip the cotangents of inputs that are not differentiated)."""
    method = load(ROOT / "specs" / f"{spec}.xpr")
    params = _scene(method, "large", 12, seed=3)
    cam = verify.camera("pinhole", W, H)

    def grad(config):
        return jax.jit(jax.grad(_loss(method, config), argnums=argnum))(params, cam)

    both = _grads(method, params, cam, CONFIG)  # the render compiled for both first
    custom = grad(CONFIG)
    _assert_same(custom, both[argnum])
    _assert_same(custom, grad(dataclasses.replace(CONFIG, backward="autodiff")))
    assert max(np.abs(np.asarray(x)).max() for x in jax.tree_util.tree_leaves(custom)) > 0


# The saturation path is the same code for every spec: 3DGS in the default run, the others -m slow.
@pytest.mark.parametrize(
    "spec",
    [
        "3dgs",
        pytest.param("3dgut", marks=pytest.mark.slow),
        pytest.param("2dgs", marks=pytest.mark.slow),
    ],
)
def test_custom_vjp_equals_autodiff_when_tiles_saturate(spec):
    """Opaque large primitives: the stop rule ends every list and saturated groups are
    skipped (in the backward too). (A signed response has no stop rule.)"""
    method = load(ROOT / "specs" / f"{spec}.xpr")
    params = _scene(method, "large", 40, seed=5, opacity=4.0)
    cam = verify.camera("pinhole", W, H)
    out = render(method, params, cam, config=CONFIG)
    assert (np.asarray(out.alpha) > 0.99).mean() > 0.5  # most lists end at the stop rule
    _compare(method, params, cam)


def test_custom_vjp_for_batched_cameras():
    method = load(ROOT / "specs" / "3dgs.xpr")
    params = _scene(method, "random", 12, seed=2)
    second = look_at([0.3, -0.2, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], W, H, 60.0)
    cams = Camera.stack([verify.camera("pinhole", W, H), second])

    def grads(config):
        def loss(p):
            return jnp.sum(render(method, p, cams, config=config).image ** 2)

        return jax.jit(jax.grad(loss))(params)

    _assert_same(grads(CONFIG), grads(dataclasses.replace(CONFIG, backward="autodiff")))


@pytest.mark.parametrize("spec", ["3dgs", "student_t"])
def test_custom_vjp_matches_finite_differences(spec):
    method = load(ROOT / "specs" / f"{spec}.xpr")
    params = _scene(method, "large", 6, seed=4)
    params["opacities"] = jnp.clip(params["opacities"], -2.0, 2.0)
    cam = verify.camera("pinhole", W, H)
    loss = jax.jit(_loss(method, CONFIG))
    grads = jax.grad(loss)(params, cam)
    assert_grads_match_fd(lambda p: loss(p, cam), params, grads, per_param=4, rel=1e-5, abs=1e-7)


def test_unknown_backward_is_an_error():
    with pytest.raises(XprError, match="RenderConfig.backward='fast'"):
        RenderConfig(backward="fast")
