"""The `pinhole` model: `u = fx x/z + cx`, `v = fy y/z + cy`."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .lens import central_rays

CENTRAL = True
DIST_USED = 0  # the dist coefficients the model reads (no lens distortion)


def project(x, y, z, fx, fy, cx, cy, dist):
    zs = jnp.where(z == 0, 1.0, z)
    a, b = x / zs, y / zs
    return fx * a + cx, fy * b + cy


def domain(x, y, z, dist):
    return None


def pixel_domain(a, b, dist):
    return None


def jacobian(x, y, z, fx, fy, dist):
    zero = jnp.zeros_like(x)
    iz = 1.0 / jnp.where(z == 0, 1.0, z)
    return fx * iz, zero, -fx * x * iz * iz, zero, fy * iz, -fy * y * iz * iz


def rays(a, b, dist):
    return central_rays(jnp.stack([a, b, jnp.ones_like(a)], axis=-1))


def focal(width, half_fov, distance, ortho_width):
    return (width / 2) / np.tan(half_fov)
