"""The `fisheye` model: OpenCV's equidistant fisheye,
`theta_d = theta (1 + k1 theta^2 + k2 theta^4 + k3 theta^6 + k4 theta^8)`, `dist[0:4] = k1..k4`.
Valid where `theta` is below the first maximum of `theta_d(theta)` (where the lens map folds
back), so a fisheye covers at most 180 degrees.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .lens import NEWTON_STEPS, central_rays

CENTRAL = True
DIST_USED = 4  # the dist coefficients the model reads (k1..k4)
_LIMIT_GRID = 512  # grid over [0, pi] bracketing the first maximum of theta_d(theta)
_LIMIT_BISECT = 40


def project(x, y, z, fx, fy, cx, cy, dist):
    s = scale(x, y, z, dist.astype(x.dtype))
    return fx * (x * s) + cx, fy * (y * s) + cy


def domain(x, y, z, dist):
    theta = jnp.arctan2(jnp.sqrt(x * x + y * y), z)
    return theta < theta_max(dist).astype(x.dtype)


def pixel_domain(a, b, dist):
    """Some theta in [0, theta_max] reaches the pixel's radius: theta_d <= theta_d(theta_max).
    Beyond it (outside the image circle) `rays` gives the nearest valid ray, at theta_max."""
    limit = theta_max(dist).astype(a.dtype)
    td_max = limit * _poly(limit * limit, lax.stop_gradient(dist[:4]).astype(a.dtype))
    return jnp.sqrt(a * a + b * b) <= td_max


def jacobian(x, y, z, fx, fy, dist):
    """pixel = f (x, y) s(rho^2, z) + c; the chain rule needs only ds/drho^2 and ds/dz."""
    dist = dist.astype(x.dtype)
    zero = jnp.zeros_like(x)

    def s_of(rho2, z):
        return scale_rho2(rho2, z, dist)

    rho2 = x * x + y * y
    s, s_r = jax.jvp(s_of, (rho2, z), (jnp.ones_like(x), zero))
    _, s_z = jax.jvp(s_of, (rho2, z), (zero, jnp.ones_like(x)))
    return (
        fx * (s + 2.0 * x * x * s_r),
        fx * (2.0 * x * y * s_r),
        fx * (x * s_z),
        fy * (2.0 * x * y * s_r),
        fy * (s + 2.0 * y * y * s_r),
        fy * (y * s_z),
    )


def rays(a, b, dist):
    return central_rays(_unproject(a, b, dist.astype(a.dtype), theta_max(dist)))


def focal(width, half_fov, distance, ortho_width):
    return (width / 2) / half_fov  # fov 180 degrees puts theta = 90 at the image's edges


def theta_max(dist):
    """First maximum of theta_d(theta) on (0, pi] (pi if monotonic); 0-d, no gradient.

    The derivative `1 + 3 k1 t^2 + 5 k2 t^4 + 7 k3 t^6 + 9 k4 t^8` is sampled on a fixed
    grid to bracket its first sign change, then bisected a fixed number of times.
    """
    k = lax.stop_gradient(dist[..., :4])
    grid = jnp.linspace(0.0, np.pi, _LIMIT_GRID + 1, dtype=k.dtype)
    d = _dtheta(grid, k)
    nonpos = d <= 0
    first = jnp.argmax(nonpos)  # index of first non-positive derivative (0 if none)
    has_root = jnp.any(nonpos)
    hi0 = grid[first]
    lo0 = grid[jnp.maximum(first - 1, 0)]

    def bisect(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        pos = _dtheta(mid, k) > 0
        return jnp.where(pos, mid, lo), jnp.where(pos, hi, mid)

    lo, _ = lax.fori_loop(0, _LIMIT_BISECT, bisect, (lo0, hi0))
    return jnp.where(has_root, lo, jnp.asarray(np.pi, k.dtype))


def _poly(t2, k):
    return 1.0 + t2 * (k[..., 0] + t2 * (k[..., 1] + t2 * (k[..., 2] + t2 * k[..., 3])))


def _dtheta(theta, k):
    t2 = theta * theta
    return 1.0 + t2 * (
        3 * k[..., 0] + t2 * (5 * k[..., 1] + t2 * (7 * k[..., 2] + t2 * 9 * k[..., 3]))
    )


def scale(x, y, z, dist):
    """theta_d / rho with a series near the optical axis (no 0/0, finite gradients)."""
    return scale_rho2(x * x + y * y, z, dist)


def scale_rho2(rho2, z, dist):
    k = dist[:4]
    small = rho2 < 1e-4 * z * z  # |rho / z| < 1e-2 in front of the camera: series branch
    series_ok = small & (z > 0)
    rho = jnp.sqrt(jnp.where(series_ok | (rho2 == 0), 1.0, rho2))
    theta_full = jnp.arctan2(rho, z)
    zs = jnp.where(series_ok, z, 1.0)
    q = jnp.where(series_ok, rho2 / (zs * zs), 0.0)  # (rho / z)^2
    # atan(s)/s = 1 - s^2/3 + s^4/5 - s^6/7 (+ O(s^8) < 1e-17 for s < 1e-2)
    theta_over_rho_series = (1.0 + q * (-1.0 / 3 + q * (1.0 / 5 - q / 7))) / zs
    theta2_series = q * ((1.0 + q * (-1.0 / 3 + q * (1.0 / 5 - q / 7))) ** 2)
    theta_over_rho = jnp.where(series_ok, theta_over_rho_series, theta_full / rho)
    theta2 = jnp.where(series_ok, theta2_series, theta_full * theta_full)
    # rho == 0 behind the camera: theta = pi, direction undefined; any finite value will do.
    return theta_over_rho * _poly(theta2, k)


def _unproject(a, b, dist, theta_max):
    """Distorted normalised (a, b) -> camera-space direction (not normalised) [..., 3]."""
    k = dist[:4]
    td2 = a * a + b * b
    nz = td2 > 0
    td = jnp.sqrt(jnp.where(nz, td2, 1.0))
    td = jnp.where(nz, td, 0.0)
    theta_max = theta_max.astype(a.dtype)
    td_max = theta_max * _poly(theta_max * theta_max, k)

    sk = lax.stop_gradient
    k_fixed, td_fixed = sk(k), sk(td)

    def f(theta):
        return theta * _poly(theta * theta, k_fixed) - td_fixed

    # Safeguarded Newton on [0, theta_max] where theta_d is increasing: keep a bracket and
    # fall back to bisection when a Newton step leaves it.
    def body(_, state):
        theta, lo, hi = state
        fv = f(theta)
        lo = jnp.where(fv < 0, theta, lo)
        hi = jnp.where(fv < 0, hi, theta)
        d = _dtheta(theta, k_fixed)
        newton = theta - fv / jnp.where(d > 0, d, 1.0)
        inside = (d > 0) & (newton >= lo) & (newton <= hi)
        return jnp.where(inside, newton, 0.5 * (lo + hi)), lo, hi

    tdc = jnp.minimum(td_fixed, sk(td_max))
    theta0 = jnp.minimum(tdc, sk(theta_max))
    lo0 = jnp.zeros_like(theta0)
    hi0 = jnp.broadcast_to(sk(theta_max), theta0.shape)
    theta, _, _ = lax.fori_loop(0, NEWTON_STEPS, body, (theta0, lo0, hi0))
    theta = sk(theta)
    # Differentiable final Newton step (implicit-function gradients w.r.t. pixel and k).
    slope = jnp.maximum(_dtheta(theta, k), 1e-6)
    stepped = jnp.clip(theta - (theta * _poly(theta * theta, k) - td) / slope, 0.0, np.pi)
    # A pixel beyond the image circle has no solution: the search stops at theta_max, where the
    # slope is 0 and a Newton step would throw the ray behind the camera. It keeps theta_max,
    # the nearest valid ray (counted: Camera.lens_outside).
    theta = jnp.where(td_fixed > sk(td_max), sk(theta_max), stepped)
    # sin(theta)/theta_d -> 1 on the axis.
    sin_over_td = jnp.where(nz, jnp.sin(theta) / jnp.where(nz, td, 1.0), 1.0)
    return jnp.stack([a * sin_over_td, b * sin_over_td, jnp.cos(theta)], axis=-1)
