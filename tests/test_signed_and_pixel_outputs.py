"""Signed opacity (`response signed`) and per-pixel outputs (`emit` in the response), issue 13
done-when 4: a scene with negative primitives equals an independent NumPy twin of the SSS
compositing rule, the per-pixel depth and normal are composited with the colour's weights (ED
uses the per-pixel depth), and the gradients of negative primitives match finite differences.

The SSS rule (Zhu et al., CVPR 2025, arXiv 2503.10148, eq. 3 as quoted in docs/language.md):
C(u) = sum_i c_i o_i T_i(u) prod_{j<i} (1 - o_j T_j(u)) with o_i in [-1, 1] (tanh); a negative
o_i T_i "scoops" colour and raises the transmittance of what lies behind it.
"""

import jax
import jax.numpy as jnp
import numpy as np
from gradcheck import assert_grads_match_fd

from xprc.camera import look_at
from xprc.compiler import driver
from xprc.pipeline import RenderConfig, render

SPEC = """primitive Scoop
param means     : vec3
param opacities : scalar = tanh(raw)
param rgb       : vec3 = sigmoid(raw)
param size      : scalar = exp(raw)
projection {
  p = camera.world_to_camera(means)
  z = max(p.z, camera.near)
  s = camera.fx * size / z                     # isotropic radius in pixels
  emit centre = camera.project([p.x, p.y, z]), depth = p.z, valid = p.z > camera.near,
       radius = s * sqrt(max(2 * log(255 * abs(opacities)), 0)), inv_s2 = 1 / (s * s),
       o = opacities
}
response signed {
  d = pixel - centre
  g = dot(d, d) * inv_s2
  emit depth = depth + 0.1 * g, normal = [d.x, d.y, 1] / 10
  alpha = 0.99 * o * exp(-0.5 * g)
}
color = rgb
"""
W, H = 24, 20


def _scene(rng, n=10):
    means = np.c_[rng.uniform(-0.6, 0.6, (n, 2)), rng.uniform(3.0, 5.0, n)]
    o = rng.uniform(0.3, 0.9, n) * np.where(np.arange(n) % 3 == 0, -1.0, 1.0)  # every 3rd < 0
    return {
        "means": means,
        "opacities": np.arctanh(o),
        "rgb": rng.normal(0, 1, (n, 3)),
        "size": np.log(rng.uniform(0.05, 0.2, n)),
    }


def _camera():
    return look_at([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0], W, H, 60.0)


def _reference(raw, cam):
    """Per pixel, front to back, every primitive: the SSS rule with |alpha| >= 1/255."""
    R, t = np.asarray(cam.R), np.asarray(cam.t)
    fx, fy, cx, cy = (float(np.asarray(v)) for v in (cam.fx, cam.fy, cam.cx, cam.cy))
    pc = raw["means"] @ R.T + t
    centre = np.c_[fx * pc[:, 0] / pc[:, 2] + cx, fy * pc[:, 1] / pc[:, 2] + cy]
    s = fx * np.exp(raw["size"]) / pc[:, 2]
    o = np.tanh(raw["opacities"])
    rgb = 1 / (1 + np.exp(-raw["rgb"]))
    order = np.argsort(pc[:, 2], kind="stable")
    img, acc, dep, nrm = (np.zeros((H, W, k)) for k in (3, 1, 1, 3))
    for i in range(H):
        for j in range(W):
            T = 1.0
            for k in order:
                d = np.array([j + 0.5, i + 0.5]) - centre[k]
                g = d @ d / s[k] ** 2
                a = 0.99 * o[k] * np.exp(-0.5 * g)
                if abs(a) < 1 / 255:
                    continue
                w = a * T
                img[i, j] += w * rgb[k]
                dep[i, j] += w * (pc[k, 2] + 0.1 * g)
                nrm[i, j] += w * np.array([d[0], d[1], 1.0]) / 10
                acc[i, j] += w
                T *= 1 - a
    return img, acc, dep, nrm


def _method(tmp_path):
    path = tmp_path / "scoop.xpr"
    path.write_text(SPEC)
    return driver.load(path)


CONFIG = RenderConfig(tile_size=8, max_entries=4096)


def test_signed_alpha_and_pixel_outputs_match_the_sss_reference(tmp_path):
    method = _method(tmp_path)
    assert method.SIGNED_ALPHA and method.PIXEL_OUTPUTS[:2] == ("depth", "normal.x")
    raw = _scene(np.random.default_rng(0))
    cam = _camera()
    out = render(method, {k: jnp.asarray(v) for k, v in raw.items()}, cam, mode="RGB+D",
                 config=CONFIG)  # fmt: skip
    img, acc, dep, nrm = _reference(raw, cam)
    assert img.min() < -0.05  # scooping made some colour negative
    np.testing.assert_allclose(np.asarray(out.image), img, atol=1e-9)
    np.testing.assert_allclose(np.asarray(out.alpha), acc, atol=1e-9)
    np.testing.assert_allclose(np.asarray(out.depth), dep, atol=1e-9)  # per-pixel depth
    np.testing.assert_allclose(np.asarray(out.extra[..., 1:]), nrm, atol=1e-9)
    np.testing.assert_allclose(np.asarray(out.extra[..., :1]), dep, atol=1e-9)
    ed = render(method, {k: jnp.asarray(v) for k, v in raw.items()}, cam, mode="ED",
                config=CONFIG)  # fmt: skip
    # expected depth: the weighted sum over the sum of the (signed) weights, kept off zero
    np.testing.assert_allclose(
        np.asarray(ed.depth), dep / np.where(np.abs(acc) > 1e-10, acc, 1e-10), rtol=1e-9,
        atol=1e-9,
    )  # fmt: skip


def test_negative_primitives_have_finite_difference_gradients(tmp_path):
    method = _method(tmp_path)
    raw = {k: jnp.asarray(v) for k, v in _scene(np.random.default_rng(1), n=6).items()}
    cam = _camera()
    cot = jax.random.normal(jax.random.PRNGKey(0), (H, W, 3), jnp.float64)

    def loss(p):
        out = render(method, p, cam, mode="RGB+D", config=CONFIG)
        return jnp.sum(out.image * cot) + jnp.sum(out.depth) + jnp.sum(out.extra)

    grads = jax.grad(loss)(raw)
    negative = np.flatnonzero(np.tanh(np.asarray(raw["opacities"])) < 0)
    assert np.all(np.asarray(grads["opacities"])[negative] != 0)  # not dead: they learn
    assert_grads_match_fd(loss, raw, grads, per_param=4, rel=1e-4, abs=1e-6)
