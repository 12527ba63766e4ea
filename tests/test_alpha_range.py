"""Issue 26: a response whose alpha leaves its range (NaN, or outside [0, 1]; signed: outside
(-1, 1)) rendered NaN (alpha > 1 turns T negative) or was dropped without a word. The
compositors now clamp such an alpha to [0, 0.99] ([-0.99, 0.99] signed; NaN to 0), count the
(pixel, primitive) evaluations they changed in `stats["alpha_out_of_range"]` and warn with that
count. Checked against a per-pixel NumPy twin of the clamped compositing rule, for the XLA and
the Pallas (interpreted) compositors, and the custom VJPs against autodiff of the same forward.
Issue 43: an alpha of exactly 1 (an opaque primitive) was in range, and the stop rule dropped it
(1 - alpha < t_min): it drew nothing, unsaid. Alphas of 1 or within t_min of it are now out of
range too (the documented range was already [0, 1)).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xprc.camera import look_at
from xprc.compiler import driver
from xprc.errors import XprError
from xprc.pipeline import RenderConfig, render
from xprc.pipeline.composite_scan import clamp_alpha

SPEC = """primitive Hot
param means : vec3
param o     : scalar
param rgb   : vec3 = sigmoid(raw)
param size  : scalar = exp(raw)
projection {
  p = camera.world_to_camera(means)
  z = max(p.z, camera.near)
  s = camera.fx * size / z
  emit centre = camera.project([p.x, p.y, z]), depth = p.z, valid = p.z > camera.near,
       radius = 4 * s, inv_s2 = 1 / (s * s), gain = o
}
response@ {
  d = pixel - centre
  alpha = gain * exp(-0.5 * dot(d, d) * inv_s2)
}
color = rgb
"""
W, H = 24, 20
XLA = RenderConfig(tile_size=8, chunk=4, group=2, max_entries=2048, compositor="xla")
WARNING = r"response gave [0-9,]+ \(pixel, primitive\) alpha value\(s\) that are NaN, outside"


def _method(tmp_path, signed: bool):
    path = tmp_path / ("hot_signed.xpr" if signed else "hot.xpr")
    path.write_text(SPEC.replace("@", " signed" if signed else ""))
    return driver.load(path)


def _camera():
    return look_at([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0], W, H, 60.0,
                   dtype=np.float32)  # fmt: skip


def _scene(signed: bool):
    """Three blobs, the middle one too hot (|alpha| up to 2); they overlap, never saturate."""
    raw = {
        "means": np.array([[-0.5, 0.0, 4.0], [0.0, 0.1, 4.5], [0.45, -0.1, 5.0]]),
        "o": np.array([0.8, -2.0 if signed else 2.0, 0.7]),
        "rgb": np.array([[1.0, -1.0, 0.0], [0.0, 2.0, -1.0], [-2.0, 0.5, 1.5]]),
        "size": np.log([0.3, 0.35, 0.3]),
    }
    return {k: jnp.asarray(v, jnp.float32) for k, v in raw.items()}


def _twin(raw, cam, signed: bool):
    """Per pixel, front to back: the clamped rule. Returns image, alpha, out-of-range count."""
    R, t = np.asarray(cam.R, np.float64), np.asarray(cam.t, np.float64)
    fx, fy, cx, cy = (float(np.asarray(v)) for v in (cam.fx, cam.fy, cam.cx, cam.cy))
    raw = {k: np.asarray(v, np.float64) for k, v in raw.items()}
    pc = raw["means"] @ R.T + t
    centre = np.c_[fx * pc[:, 0] / pc[:, 2] + cx, fy * pc[:, 1] / pc[:, 2] + cy]
    s = fx * np.exp(raw["size"]) / pc[:, 2]
    rgb = 1 / (1 + np.exp(-raw["rgb"]))
    img, acc, count = np.zeros((H, W, 3)), np.zeros((H, W, 1)), 0
    for i in range(H):
        for j in range(W):
            T = 1.0
            for k in np.argsort(pc[:, 2]):
                d = np.array([j + 0.5, i + 0.5]) - centre[k]
                a = raw["o"][k] * np.exp(-0.5 * (d @ d) / s[k] ** 2)
                out = abs(a) >= 1 if signed else not 0 <= a < 1 or 1 - np.float32(a) < 1e-4
                if out:
                    count += 1
                    a = float(np.clip(a, -0.99 if signed else 0.0, 0.99))
                if (abs(a) if signed else a) < 1 / 255:
                    continue
                if not signed and T * (1 - a) < 1e-4:
                    break
                img[i, j] += a * T * rgb[k]
                acc[i, j] += a * T
                T *= 1 - a
    return img, acc, count


def test_clamp_alpha_brings_every_value_into_range_and_marks_what_it_changed():
    x = jnp.array([-0.5, 0.0, 0.5, 0.995, 1.0, 1.5, jnp.nan, -jnp.inf, jnp.inf], jnp.float32)
    a, bad = clamp_alpha(x, signed=False)
    np.testing.assert_array_equal(a, np.float32([0.0, 0.0, 0.5, 0.995, 0.99, 0.99, 0.0, 0.0, 0.99]))
    np.testing.assert_array_equal(bad, [1, 0, 0, 0, 1, 1, 1, 1, 1])
    # within t_min of 1: the stop rule would drop it even on an empty pixel
    near = jnp.array([0.9998, 0.99995, 0.99999], jnp.float32)
    a, bad = clamp_alpha(near, signed=False, t_min=1e-4)
    np.testing.assert_array_equal(a, np.float32([0.9998, 0.99, 0.99]))
    np.testing.assert_array_equal(bad, [0, 1, 1])
    a, bad = clamp_alpha(x, signed=True)
    np.testing.assert_array_equal(a, np.float32([-0.5, 0, 0.5, 0.995, 0.99, 0.99, 0, -0.99, 0.99]))
    np.testing.assert_array_equal(bad, [0, 0, 0, 0, 1, 1, 1, 1, 1])


@pytest.mark.parametrize("compositor", ["xla", "pallas"])
@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_out_of_range_alpha_is_clamped_counted_and_warned(tmp_path, signed, compositor):
    method = _method(tmp_path, signed)
    raw, cam = _scene(signed), _camera()
    config = dataclasses.replace(XLA, compositor=compositor)
    with pytest.warns(RuntimeWarning, match=WARNING) as record:
        out = render(method, raw, cam, config=config)
    img, acc, count = _twin(raw, cam, signed)
    assert count > 5  # the hot blob's core
    assert int(out.stats["alpha_out_of_range"]) == count
    assert f" {count} (pixel, primitive)" in str(record[0].message)
    assert np.isfinite(np.asarray(out.image)).all()
    np.testing.assert_allclose(out.image, img, atol=2e-5)
    np.testing.assert_allclose(out.alpha, acc, atol=2e-5)


@pytest.mark.parametrize(
    "signed",
    # signed: its own clamp rule in the forward (covered by default above, both compositors);
    # the same backward code: three gradient compiles, under -m slow
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["unsigned", "signed"],
)
def test_gradients_through_the_clamp_equal_autodiff_in_both_compositors(tmp_path, signed):
    """The clamp is inside the custom VJPs' recomputed alpha: a clamped lane passes no
    gradient to the response's inputs, as autodiff of the forward says."""
    method = _method(tmp_path, signed)
    raw, cam = _scene(signed), _camera()
    weights = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (H, W, 3)), jnp.float32)

    def grads(config):
        def loss(p):
            return jnp.sum(render(method, p, cam, config=config).image * weights)

        return jax.jit(jax.grad(loss))(raw)

    config = dataclasses.replace(XLA, on_overflow="ignore")
    want = grads(dataclasses.replace(config, backward="autodiff"))
    for got in (grads(config), grads(dataclasses.replace(config, compositor="pallas"))):
        for k in want:
            scale = max(1.0, float(jnp.abs(want[k]).max()))
            np.testing.assert_allclose(got[k], want[k], atol=2e-5 * scale, err_msg=k)
    assert float(jnp.abs(want["o"][1])) > 0  # the hot blob's rim still has a gradient


def test_a_render_under_jit_warns_at_run_time(tmp_path):
    method = _method(tmp_path, signed=False)
    raw, cam = _scene(False), _camera()
    fn = jax.jit(lambda p: render(method, p, cam, config=XLA).stats["alpha_out_of_range"])
    with pytest.warns(RuntimeWarning, match=WARNING):
        count = int(jax.block_until_ready(fn(raw)))
        jax.effects_barrier()
    assert count == _twin(raw, cam, False)[2]


OPAQUE = SPEC.replace("response@", "response").replace(
    "alpha = gain * exp(-0.5 * dot(d, d) * inv_s2)",
    "alpha = where(dot(d, d) * inv_s2 < 4.5, ALPHA, 0)",
)


def _opaque_twin(raw, cam, alpha: float, t_min: float = 1e-4):
    """Per pixel, front to back, the hard-edged response with the documented clamp: an alpha
    of 1 or within t_min (3DGS's 1e-4) of it draws at 0.99 and every covered (pixel, primitive)
    pair counts. Transmittance in float32, as the renders: two layers at 0.99 leave 1e-4 up to
    rounding, and the stop rule's test falls on float32's side of it."""
    R, t = np.asarray(cam.R, np.float64), np.asarray(cam.t, np.float64)
    fx, fy, cx, cy = (float(np.asarray(v)) for v in (cam.fx, cam.fy, cam.cx, cam.cy))
    raw = {k: np.asarray(v, np.float64) for k, v in raw.items()}
    pc = raw["means"] @ R.T + t
    centre = np.c_[fx * pc[:, 0] / pc[:, 2] + cx, fy * pc[:, 1] / pc[:, 2] + cy]
    s = fx * np.exp(raw["size"]) / pc[:, 2]
    rgb = 1 / (1 + np.exp(-raw["rgb"]))
    img, acc, count = np.zeros((H, W, 3)), np.zeros((H, W, 1)), 0
    one, t_min = np.float32(1), np.float32(t_min)
    for i in range(H):
        for j in range(W):
            T, stopped = one, False
            for k in np.argsort(pc[:, 2]):
                d = np.array([j + 0.5, i + 0.5]) - centre[k]
                if (d @ d) / s[k] ** 2 >= 4.5:
                    continue
                a = np.float32(alpha)
                if a >= 1 or one - a < t_min:
                    a, count = np.float32(0.99), count + 1
                stopped = stopped or T * (one - a) < t_min
                if not stopped:
                    img[i, j] += a * T * rgb[k]
                    acc[i, j] += a * T
                    T = T * (one - a)
    return img, acc, count


@pytest.mark.parametrize("compositor", ["xla", "pallas"])
@pytest.mark.parametrize("alpha", ["1", "0.99999"])
def test_an_opaque_response_draws_at_the_cap_and_is_counted(tmp_path, compositor, alpha):
    """Issue 43: `alpha = where(..., 1, 0)` drew nothing (the stop rule dropped every lane
    whose 1 - alpha is below t_min) and warned nothing. It now draws at 0.99, counted."""
    path = tmp_path / "opaque.xpr"
    path.write_text(OPAQUE.replace("ALPHA", alpha))
    method = driver.load(path)
    raw, cam = _scene(False), _camera()
    config = dataclasses.replace(XLA, compositor=compositor)
    with pytest.warns(RuntimeWarning, match=WARNING):
        out = render(method, raw, cam, config=config)
    img, acc, count = _opaque_twin(raw, cam, float(np.float32(alpha)))
    assert count > 50  # every covered (pixel, primitive) pair in front of saturation
    assert int(out.stats["alpha_out_of_range"]) == count
    assert float(np.asarray(out.alpha).max()) > 0.98
    np.testing.assert_allclose(out.image, img, atol=2e-5)
    np.testing.assert_allclose(out.alpha, acc, atol=2e-5)
    if alpha == "1":  # it covers the pixels a nearly opaque one (in range, no clamp) covers
        path.write_text(OPAQUE.replace("ALPHA", "0.999"))
        near = render(driver.load(path), raw, cam, config=config)
        assert int(near.stats["alpha_out_of_range"]) == 0
        covered = np.asarray(near.alpha)[..., 0] > 0
        assert 50 < covered.sum() < H * W
        np.testing.assert_array_equal(np.asarray(out.alpha)[..., 0] > 0, covered)


def test_thresholds_that_would_drop_an_opaque_primitive_are_refused(tmp_path):
    """Hostile pass on the clamp above: from t_min = 0.01 on, the stop rule drops a lane at the
    cap 0.99 even on an empty pixel (1 - 0.99 < t_min), so an opaque primitive still drew
    nothing, and the alphas a spec keeps in range with its own min(0.99, ...) were counted and
    warned about as out of range; an alpha_min above 0.99 dropped every clamped lane. Both are
    refused when the config is made; the largest values accepted still draw it."""
    for options, expected in [
        (dict(t_min=0.01), "t_min=0.01: expected a number in [0, 0.01) (from 1 - 0.99 on, the "
         "stop rule drops a primitive at the alpha cap 0.99 even on an empty pixel: opaque "
         "primitives would draw nothing)"),
        (dict(t_min=0.5), "t_min=0.5: expected a number in [0, 0.01) (from"),
        (dict(alpha_min=0.995), "alpha_min=0.995: expected a number in [0, 0.99] (above 0.99, "
         "where an alpha of 1 is clamped, opaque primitives would draw nothing)"),
    ]:  # fmt: skip
        with pytest.raises(XprError) as info:
            RenderConfig(**options)
        assert str(info.value).startswith(f"error: RenderConfig.{expected}"), str(info.value)
    path = tmp_path / "opaque.xpr"
    path.write_text(OPAQUE.replace("ALPHA", "1"))
    raw, cam = _scene(False), _camera()
    config = dataclasses.replace(XLA, t_min=0.0099, alpha_min=0.99)
    with pytest.warns(RuntimeWarning, match=WARNING):
        out = render(driver.load(path), raw, cam, config=config)
    img, acc, count = _opaque_twin(raw, cam, 1.0, t_min=0.0099)
    assert int(out.stats["alpha_out_of_range"]) == count > 50
    np.testing.assert_allclose(out.image, img, atol=2e-5)
    np.testing.assert_allclose(out.alpha, acc, atol=2e-5)


def test_gradients_of_an_opaque_response_are_finite_and_equal_autodiff(tmp_path):
    """A guard for the custom VJPs, which recompute alpha through the same clamp and divide by
    1 - alpha (0 for an opaque lane had the clamp not moved it; at t_min 0 the stop rule lets
    such a lane through): their gradients stay finite and equal autodiff's."""
    path = tmp_path / "opaque.xpr"
    path.write_text(OPAQUE.replace("ALPHA", "1"))
    method = driver.load(path)
    raw, cam = _scene(False), _camera()
    weights = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (H, W, 3)), jnp.float32)
    config = dataclasses.replace(XLA, on_overflow="ignore", t_min=0.0)

    def grads(config):
        def loss(p):
            return jnp.sum(render(method, p, cam, config=config).image * weights)

        return jax.jit(jax.grad(loss))(raw)

    want = grads(dataclasses.replace(config, backward="autodiff"))
    for got in (grads(config), grads(dataclasses.replace(config, compositor="pallas"))):
        for k in want:
            assert np.isfinite(np.asarray(got[k])).all(), k
            scale = max(1.0, float(jnp.abs(want[k]).max()))
            np.testing.assert_allclose(got[k], want[k], atol=2e-5 * scale, err_msg=k)
    assert float(jnp.abs(want["rgb"]).max()) > 0
