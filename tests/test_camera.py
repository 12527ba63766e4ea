"""Camera models: projection, validity, Jacobians and pixel rays (REFERENCE.md section 5)."""

import jax.numpy as jnp
import numpy as np

from xprc.camera import Camera, look_at


def test_pinhole_round_trip():
    cam = look_at([0.0, 0.0, -3.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], 64, 48, 70.0)
    px, py = jnp.meshgrid(jnp.linspace(0.0, 64.0, 9), jnp.linspace(0.0, 48.0, 7))
    o, d = cam.pixel_rays(px, py)
    for s in (0.5, 2.0, 10.0):
        p = cam.world_to_camera(o + s * d)
        u, v = cam.project(p[..., 0], p[..., 1], p[..., 2])
        np.testing.assert_allclose(u, px, atol=1e-9)
        np.testing.assert_allclose(v, py, atol=1e-9)
    assert isinstance(Camera.stack([cam, cam]), Camera)
