"""The `opencv` model: a pinhole with radial (k1..k6, rational), tangential (p1, p2) and
thin-prism (s1..s4) distortion of the normalised coordinates, as OpenCV's `projectPoints`;
`dist = [k1, k2, k3, k4, k5, k6, p1, p2, s1, s2, s3, s4]` (not OpenCV's own ordering). Valid
where the radial factor is inside (0.8, 1.2), away from where the polynomial folds back.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ..conventions import NUM_DIST
from . import pinhole
from .lens import NEWTON_STEPS, central_rays

CENTRAL = True
DIST_USED = 12  # the dist coefficients the model reads (k1..k6, p1, p2, s1..s4)
focal = pinhole.focal
PIXEL_TOL = 1e-4  # a pixel whose undistortion re-distorts further off (normalised) is outside


def project(x, y, z, fx, fy, cx, cy, dist):
    zs = jnp.where(z == 0, 1.0, z)
    a, b = distort(x / zs, y / zs, dist.astype(x.dtype))
    return fx * a + cx, fy * b + cy


def domain(x, y, z, dist):
    zs = jnp.where(z == 0, 1.0, z)
    a, b = x / zs, y / zs
    r = radial_factor(a * a + b * b, dist.astype(x.dtype))
    return (r > 0.8) & (r < 1.2)


def pixel_domain(a, b, dist):
    """The undistorted point's radial factor is inside (0.8, 1.2) and distorting it gives back
    the pixel (Newton converged; float32 gets within ~2e-7 on ordinary lenses)."""
    dist = lax.stop_gradient(dist).astype(a.dtype)
    ua, ub = undistort(a, b, dist)
    r = radial_factor(ua * ua + ub * ub, dist)
    fa, fb = distort(ua, ub, dist)
    tol = PIXEL_TOL * jnp.maximum(1.0, jnp.maximum(jnp.abs(a), jnp.abs(b)))
    back = (jnp.abs(fa - a) <= tol) & (jnp.abs(fb - b) <= tol)
    return (r > 0.8) & (r < 1.2) & back


def jacobian(x, y, z, fx, fy, dist):
    """d pixel / d(a, b) (analytic distortion Jacobian) times d(a, b) / d(x, y, z)."""
    iz = 1.0 / jnp.where(z == 0, 1.0, z)
    a, b = x * iz, y * iz
    d00, d01, d10, d11 = distort_jacobian(a, b, dist.astype(x.dtype))
    return (
        fx * d00 * iz,
        fx * d01 * iz,
        -fx * (d00 * a + d01 * b) * iz,
        fy * d10 * iz,
        fy * d11 * iz,
        -fy * (d10 * a + d11 * b) * iz,
    )


def rays(a, b, dist):
    ua, ub = undistort(a, b, dist.astype(a.dtype))
    return central_rays(jnp.stack([ua, ub, jnp.ones_like(a)], axis=-1))


def radial_factor(r2, dist):
    k1, k2, k3, k4, k5, k6 = (dist[i] for i in range(6))
    num = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
    den = 1.0 + r2 * (k4 + r2 * (k5 + r2 * k6))
    return num / den


def distort(a, b, dist):
    """Normalised (x/z, y/z) -> distorted normalised coordinates (OpenCV's `projectPoints`)."""
    p1, p2, s1, s2, s3, s4 = (dist[i] for i in range(6, 12))
    r2 = a * a + b * b
    radial = radial_factor(r2, dist)
    ad = radial * a + 2.0 * p1 * a * b + p2 * (r2 + 2.0 * a * a) + r2 * (s1 + s2 * r2)
    bd = radial * b + p1 * (r2 + 2.0 * b * b) + 2.0 * p2 * a * b + r2 * (s3 + s4 * r2)
    return ad, bd


def distort_jacobian(a, b, dist):
    """d(ad, bd)/d(a, b) of `distort`, analytic (small graphs inside Newton loops)."""
    k1, k2, k3, k4, k5, k6, p1, p2, s1, s2, s3, s4 = (dist[i] for i in range(NUM_DIST))
    r2 = a * a + b * b
    num = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
    den = 1.0 + r2 * (k4 + r2 * (k5 + r2 * k6))
    dnum = k1 + r2 * (2.0 * k2 + 3.0 * k3 * r2)
    dden = k4 + r2 * (2.0 * k5 + 3.0 * k6 * r2)
    radial = num / den
    dradial = (dnum * den - num * dden) / (den * den)  # d radial / d r2
    ga = 2.0 * (dradial * a)  # d radial / d a
    gb = 2.0 * (dradial * b)
    prism_u = 2.0 * (s1 + 2.0 * s2 * r2)  # d(s1 r2 + s2 r2^2)/d r2, times 2
    prism_v = 2.0 * (s3 + 2.0 * s4 * r2)
    j00 = radial + a * ga + 2.0 * p1 * b + 6.0 * p2 * a + prism_u * a
    j01 = a * gb + 2.0 * p1 * a + 2.0 * p2 * b + prism_u * b
    j10 = b * ga + 2.0 * p1 * a + 2.0 * p2 * b + prism_v * a
    j11 = radial + b * gb + 6.0 * p1 * b + 2.0 * p2 * a + prism_v * b
    return j00, j01, j10, j11


def undistort(ad, bd, dist):
    """Invert `distort` with fixed Newton steps from the distorted point itself."""

    def step(a, b, ad, bd, dist):
        fa, fb = distort(a, b, dist)
        j00, j01, j10, j11 = distort_jacobian(a, b, dist)
        ra, rb = fa - ad, fb - bd
        det = j00 * j11 - j01 * j10
        ok = jnp.abs(det) > 1e-12
        dets = jnp.where(ok, det, 1.0)
        da = jnp.where(ok, (j11 * ra - j01 * rb) / dets, 0.0)
        db = jnp.where(ok, (j00 * rb - j10 * ra) / dets, 0.0)
        return a - da, b - db

    # The loop sees no differentiated value (else JAX carries tangents through every
    # iteration); exact first-order gradients come from the final step alone.
    sg = lax.stop_gradient
    fixed = (sg(ad), sg(bd), sg(dist))

    def body(_, ab):
        a, b = step(*ab, *fixed)
        good = jnp.isfinite(a) & jnp.isfinite(b)
        return jnp.where(good, a, ab[0]), jnp.where(good, b, ab[1])

    a, b = lax.fori_loop(0, NEWTON_STEPS, body, fixed[:2])
    # One differentiable step at the converged point: implicit-function-theorem gradients.
    return step(sg(a), sg(b), ad, bd, dist)
