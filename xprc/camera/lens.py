"""What a lens model module provides, and what the models share.

`xprc.camera.models.LENSES` maps each camera model name to its module; `Camera` looks its model
up there instead of branching on the name. Each module defines, elementwise over broadcastable
arrays already cast to one dtype (`dist` is the camera's own [..., 12] coefficients, cast by the
model where it uses them):

- `project(x, y, z, fx, fy, cx, cy, dist) -> (u, v)`: camera-space point -> pixel.
- `domain(x, y, z, dist) -> bool array | None`: where the model is valid beyond
  `near < z < far` (None: everywhere).
- `pixel_domain(a, b, dist) -> bool array | None`: the normalised distorted pixel
  `((u - cx) / fx, (v - cy) / fy)` has a ray in the valid domain (None: every pixel does); the
  renderer counts the image's pixel centres outside it (`stats['lens_outside']`, warned about:
  `capacity.lens_message` says what each model's pixels there show).
- `jacobian(x, y, z, fx, fy, dist) -> (j00, j01, j02, j10, j11, j12)`: d(u, v)/d(x, y, z).
- `rays(a, b, dist) -> (origin, direction)`: camera-space rays [..., 3] through the normalised
  pixel `((u - cx) / fx, (v - cy) / fy)`; a central model's directions have unit length.
- `focal(width, half_fov, distance, ortho_width) -> f`: `look_at`'s focal length (pixels) for a
  horizontal field of view of `2 half_fov` radians (`distance`: eye to target).
- `CENTRAL`: every ray starts at the camera centre.
- `DIST_USED`: how many of the leading `dist` coefficients the model reads (a camera with a
  nonzero coefficient past them is refused: it would render as if undistorted).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

# Fixed iteration counts keep every inverse jit-friendly (no data-dependent loops).
NEWTON_STEPS = 20


def central_rays(d_cam):
    """(origin at the camera centre, unit direction) from unnormalised directions [..., 3]."""
    d_cam = d_cam * lax.rsqrt(jnp.sum(d_cam * d_cam, axis=-1, keepdims=True))
    zero = jnp.zeros_like(d_cam[..., 0])
    return jnp.stack([zero, zero, zero], axis=-1), d_cam
