"""Rolling shutter: each image row (or column) is exposed at its own time between the start pose
(`Camera.viewmat`) and the end pose (`Camera.viewmat_end`) (docs/cameras.md).

Definitions follow gsplat's 3DGUT camera models (read for the facts, not copied):

- An image point (u, v) is exposed at the relative time of its row or column:
  `top_to_bottom` `floor(v) / (H - 1)`, `bottom_to_top` `(H - ceil(v)) / (H - 1)`,
  `left_to_right` `floor(u) / (W - 1)`, `right_to_left` `(W - ceil(u)) / (W - 1)`; 0.5 when that
  image side is one pixel long. A pixel centre (j + 0.5, i + 0.5) of top_to_bottom is at
  `i / (H - 1)`. Unlike gsplat the time is clamped to [0, 1]: a point projected outside the
  image is taken at the nearest row's pose, not at an extrapolated one.
- The world->camera pose at time t: the translation `viewmat[:3, 3]` is interpolated linearly,
  the rotation spherically along the short arc (quaternion slerp), i.e.
  `R(t) = R0 Rot(axis, t theta)` with `(axis, theta)` the rotation `R0^T R1`, `theta <= pi`.
- A world point is projected by fixed-point iteration (`ITERATIONS` steps): start from its
  projection at the start pose (at the end pose when the start one is not in the model's valid
  domain), read the time of that image point, project again with that time's pose. The point's
  camera-space position is the one at the last pose; it is valid where the projection there
  is. The time is read from the pixel grid (a step function), so it carries no gradient.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..runtime import EXACT
from . import intervals

__all__ = ["SHUTTERS", "pixel_rays", "pose_at", "relative_time", "sweep_box", "world_to_camera"]

SHUTTERS = ("global", "top_to_bottom", "bottom_to_top", "left_to_right", "right_to_left")
ITERATIONS = 10  # gsplat's rolling-shutter projection steps


def relative_time(shutter: str, u, v, width: int, height: int):
    """The exposure time in [0, 1] of image points (u, v) (broadcast; no gradient)."""
    u, v = lax.stop_gradient(u), lax.stop_gradient(v)
    if shutter in ("top_to_bottom", "bottom_to_top"):
        coord, n = v, height
    else:
        coord, n = u, width
    coord = jnp.broadcast_to(coord, jnp.broadcast_shapes(jnp.shape(u), jnp.shape(v)))
    if n == 1:
        return jnp.full_like(coord, 0.5)
    if shutter in ("top_to_bottom", "left_to_right"):
        t = jnp.floor(coord) / (n - 1)
    else:
        t = (n - jnp.ceil(coord)) / (n - 1)
    return jnp.clip(t, 0.0, 1.0)


def _quat_of(R):
    """Unit quaternion (w, x, y, z) [..., 4] of rotation matrices [..., 3, 3] (the largest of the
    four candidate components is computed from the diagonal, so every rotation is accurate)."""
    m = [[R[..., i, j] for j in range(3)] for i in range(3)]
    tr = m[0][0] + m[1][1] + m[2][2]
    cands = [
        (1 + tr, m[2][1] - m[1][2], m[0][2] - m[2][0], m[1][0] - m[0][1]),
        (m[2][1] - m[1][2], 1 + m[0][0] - m[1][1] - m[2][2], m[0][1] + m[1][0], m[0][2] + m[2][0]),
        (m[0][2] - m[2][0], m[0][1] + m[1][0], 1 - m[0][0] + m[1][1] - m[2][2], m[1][2] + m[2][1]),
        (m[1][0] - m[0][1], m[0][2] + m[2][0], m[1][2] + m[2][1], 1 - m[0][0] - m[1][1] + m[2][2]),
    ]
    big = jnp.argmax(jnp.stack([tr, m[0][0], m[1][1], m[2][2]], -1), axis=-1)
    q = jnp.stack([jnp.stack(c, -1) for c in cands], -2)  # [..., 4 candidates, 4]
    q = jnp.take_along_axis(q, big[..., None, None], axis=-2)[..., 0, :]
    return q / jnp.linalg.norm(q, axis=-1, keepdims=True)


def _rotmat(q):
    """Rotation matrices [..., 3, 3] of unit quaternions (w, x, y, z) [..., 4]."""
    w, x, y, z = (q[..., i] for i in range(4))
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def relative_rotation(R0, R1):
    """(axis [..., 3] unit, or any unit vector when the angle is 0; angle [...] in [0, pi]) of
    the short-arc rotation `R0^T R1`."""
    q = _quat_of(jnp.einsum("...ji,...jk->...ik", R0, R1, precision=EXACT))
    q = jnp.where(q[..., :1] < 0, -q, q)  # the short arc
    v = q[..., 1:]
    n2 = jnp.sum(v * v, axis=-1)
    tiny = n2 < 1e-30
    n = jnp.sqrt(jnp.where(tiny, 1.0, n2))
    axis = jnp.where(tiny[..., None], jnp.array([1.0, 0.0, 0.0], v.dtype), v / n[..., None])
    angle = 2 * jnp.arctan2(jnp.where(tiny, 0.0, n), q[..., 0])
    return axis, angle


def pose_at(viewmat0, viewmat1, t):
    """World->camera (R [..., 3, 3], translation [..., 3]) of one camera's poses [4, 4] at times
    t [...]: translation lerped, rotation slerped along the short arc."""
    return _Motion(viewmat0, viewmat1, t.dtype).at(t)


class _Motion:
    """The exposure's start pose and its motion (the slerp's axis and angle, computed once)."""

    def __init__(self, viewmat0, viewmat1, dt):
        v0, v1 = viewmat0.astype(dt), viewmat1.astype(dt)
        self.R0, self.t0, self.t1 = v0[:3, :3], v0[:3, 3], v1[:3, 3]
        self.axis, self.angle = relative_rotation(self.R0, v1[:3, :3])

    def at(self, t):
        """(R [..., 3, 3], translation [..., 3]) at times t [...]."""
        return _pose(self.R0, self.t0, self.t1, self.axis, self.angle, t)


def _pose(R0, t0, t1, axis, angle, t):
    half = (0.5 * angle) * t[..., None]  # [..., 1]
    dq = jnp.concatenate([jnp.cos(half), jnp.sin(half) * _lead(axis, t.ndim)], axis=-1)
    R = jnp.einsum("ij,...jk->...ik", R0, _rotmat(dq), precision=EXACT)
    t0, t1 = _lead(t0, t.ndim), _lead(t1, t.ndim)
    trans = (1 - t[..., None]) * t0 + t[..., None] * t1
    return R, trans


def _lead(v, n):
    """v [3] as [1, ..., 1, 3] with n leading axes (explicit broadcasting)."""
    return v.reshape((1,) * n + (3,))


def _apply(R, trans, p):
    """R p + trans: R [3, 3] or [..., 3, 3], trans [3] or [..., 3], p [..., 3]."""
    out = jnp.einsum("...ij,...j->...i", R, p, precision=EXACT)
    return out + (_lead(trans, out.ndim - 1) if trans.ndim == 1 else trans)


def world_to_camera(camera, p):
    """[..., 3] world points -> [..., 3] camera-space points at the pose of the moment the
    camera sees them (the iteration in the module docstring). One unbatched camera."""
    dt = p.dtype
    v0, v1 = camera.viewmat.astype(dt), camera.viewmat_end.astype(dt)

    def image(q):
        u, v = camera.project(q[..., 0], q[..., 1], q[..., 2])
        ok = camera.project_valid(q[..., 0], q[..., 1], q[..., 2])
        return u, v, ok

    def time_of(u, v):
        return relative_time(camera.shutter, u, v, camera.width, camera.height).astype(dt)

    # The times solve a step-function fixed point: found without gradient, then the point is
    # moved once with the gradient (of p and the poses) at the final time.
    ps = lax.stop_gradient(p)
    u0, v0_, ok0 = image(_apply(v0[:3, :3], v0[:3, 3], ps))
    u1, v1_, ok1 = image(_apply(v1[:3, :3], v1[:3, 3], ps))
    t = jnp.where(ok0, time_of(u0, v0_), time_of(u1, v1_))
    iterate = ok0 | ok1  # neither valid: the point is taken at the end pose (and is invalid)
    still = _Motion(lax.stop_gradient(v0), lax.stop_gradient(v1), dt)

    def step(_, t):
        R, trans = still.at(t)
        u, v, _ok = image(_apply(R, trans, ps))
        return time_of(u, v)

    t = lax.fori_loop(0, ITERATIONS - 1, step, t)
    t = jnp.where(iterate, t, 1.0)
    R, trans = pose_at(v0, v1, lax.stop_gradient(t))
    return _apply(R, trans, p)


def pixel_rays(camera, px, py, o_cam, d_cam):
    """World rays of pixels (px, py) from their camera-space rays (o_cam, d_cam) [..., 3], each
    through the pose at its pixel's time: origin `R(t)^T (o_cam - trans(t))`, direction
    `R(t)^T d_cam`."""
    dt = o_cam.dtype
    t = relative_time(camera.shutter, px, py, camera.width, camera.height).astype(dt)
    R, trans = pose_at(camera.viewmat, camera.viewmat_end, t)
    o_cam, d_cam = jnp.broadcast_arrays(o_cam, d_cam)
    origin = jnp.einsum("...ji,...j->...i", R, o_cam - trans, precision=EXACT)
    direction = jnp.einsum("...ji,...j->...i", R, d_cam, precision=EXACT)
    return origin, direction


def sweep_box(camera, c, r):
    """A pixel box (xmin, ymin, xmax, ymax) holding every pixel whose ray, at that pixel's time,
    meets the world ball (centre c [..., 3], radius r [...]), or the whole image
    (0, 0, W, H) where no such bound is known.

    In camera space the ball's centre at time t is `c(t) = R(t) c + trans(t)`; translation is
    lerped, so `c(t)` differs from the chord point `(1 - t) c(0) + t c(1)` only by the slerp's
    departure from the chord of the arc it turns `c` through, at most
    `|c| (1 - cos(theta / 2)) <= |c| theta^2 / 8` (tests/test_rolling_shutter.py checks the
    bound). Every ball is so inside the capsule of radius `r + |c| theta^2 / 8` around the segment
    [c(0), c(1)]. Ortho maps the capsule into the hull of its two end balls' images: the box is
    the union of their boxes. A central model sees it, when both end balls are in front of the
    camera (z > radius), within the rectangle of undistorted normalised coordinates (x/z, y/z)
    that bounds the two balls' pinhole images (the capsule's pinhole image is their hull); the
    pinhole scales that rectangle to pixels, OpenCV and fisheye lenses map it through interval
    bounds of their distortion (intervals.py; a fisheye also needs it inside theta_max).
    Elsewhere: the whole image."""
    dt = c.dtype
    v0, v1 = camera.viewmat.astype(dt), camera.viewmat_end.astype(dt)
    _, angle = relative_rotation(v0[:3, :3], v1[:3, :3])
    norm = jnp.sqrt(jnp.sum(c * c, axis=-1))
    rad = (r + norm * angle * angle / 8) * (1 + 1e-5)
    fx, fy, cx, cy = (a.astype(dt) for a in (camera.fx, camera.fy, camera.cx, camera.cy))
    w, h = camera.width, camera.height
    whole = [jnp.zeros_like(norm), jnp.zeros_like(norm), jnp.full_like(norm, w),
             jnp.full_like(norm, h)]  # fmt: skip
    boxes, ok = [], jnp.ones_like(norm, bool)
    for vm in (v0, v1):
        q = _apply(vm[:3, :3], vm[:3, 3], c)
        x, y, z = q[..., 0], q[..., 1], q[..., 2]
        if camera.model == "ortho":
            boxes.append((x - rad, y - rad, x + rad, y + rad))
            continue
        ok = ok & (z > rad)
        d = jnp.where(ok, z * z - rad * rad, 1.0)
        lo_x, hi_x = _tangents(x, z, rad, d)
        lo_y, hi_y = _tangents(y, z, rad, d)
        boxes.append((lo_x, lo_y, hi_x, hi_y))
    (a0, b0, c0, d0), (a1, b1, c1, d1) = boxes
    a, b = (jnp.minimum(a0, a1), jnp.maximum(c0, c1)), (jnp.minimum(b0, b1), jnp.maximum(d0, d1))
    if camera.model == "opencv":
        a, b, lens_ok = intervals.opencv(a, b, camera.dist.astype(dt))
        ok = ok & lens_ok
    elif camera.model == "fisheye":
        theta_max = camera.fisheye_theta_max().astype(dt)
        a, b, lens_ok = intervals.fisheye(a, b, camera.dist.astype(dt), theta_max)
        ok = ok & lens_ok
    out = (fx * a[0] + cx, fy * b[0] + cy, fx * a[1] + cx, fy * b[1] + cy)
    return tuple(jnp.where(ok, o, wh) for o, wh in zip(out, whole, strict=True))


def _tangents(x, z, r, d):
    """The slopes x/z of the two lines through the origin tangent to the disc ((x, z), r), z > r
    (d = z^2 - r^2 > 0): the extent of a ball's pinhole image along one axis."""
    s = r * jnp.sqrt(jnp.maximum(x * x + d, 0.0))
    return (x * z - s) / d, (x * z + s) / d


def empty_box(c):
    """(+inf, +inf, -inf, -inf) shaped like c[..., 0]: a global shutter adds nothing to a box."""
    inf = jnp.full(c.shape[:-1], np.inf, c.dtype)
    return inf, inf, -inf, -inf
