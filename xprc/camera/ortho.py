"""The `ortho` model: `u = fx x + cx`, `v = fy y + cy` (fx in pixels per world unit). Rays
start on the image plane (camera z = 0) and point along camera +z; valid in front of that plane.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

CENTRAL = False
DIST_USED = 0  # the dist coefficients the model reads (no lens distortion)


def project(x, y, z, fx, fy, cx, cy, dist):
    return fx * x + cx, fy * y + cy


def domain(x, y, z, dist):
    return None


def pixel_domain(a, b, dist):
    return None


def jacobian(x, y, z, fx, fy, dist):
    zero = jnp.zeros_like(x)
    return fx + zero, zero, zero, zero, fy + zero, zero


def rays(a, b, dist):
    zero, one = jnp.zeros_like(a), jnp.ones_like(a)
    return jnp.stack([a, b, zero], axis=-1), jnp.stack([zero, zero, one], axis=-1)


def focal(width, half_fov, distance, ortho_width):
    """`ortho_width` world units across (default: what a perspective camera sees at `distance`)."""
    extent = ortho_width if ortho_width is not None else 2 * distance * np.tan(half_fov)
    return width / extent
