"""Interval bounds of the lens maps: where a rectangle of undistorted normalised coordinates
(a, b) = (x / z, y / z) can land after distortion (shutter.sweep_box, for rolling shutters).

Plain interval arithmetic (each operation's exact range over its operands' intervals, ignoring
that operands may be correlated), so the bound holds but may be loose for large rectangles. An
interval is a pair (lo, hi) of arrays; no outward rounding (the footprint's pixel margin covers
float rounding). Returns also say where the bound is known (`ok`); elsewhere callers take the
whole image.
"""

from __future__ import annotations

import jax.numpy as jnp


def _add(*xs):
    return sum(x[0] for x in xs), sum(x[1] for x in xs)


def _scale(k, x):
    """k * x for a scalar k of either sign."""
    lo, hi = k * x[0], k * x[1]
    return jnp.minimum(lo, hi), jnp.maximum(lo, hi)


def _mul(x, y):
    p = [x[0] * y[0], x[0] * y[1], x[1] * y[0], x[1] * y[1]]
    return (jnp.minimum(jnp.minimum(p[0], p[1]), jnp.minimum(p[2], p[3])),
            jnp.maximum(jnp.maximum(p[0], p[1]), jnp.maximum(p[2], p[3])))  # fmt: skip


def _sq(x):
    lo, hi = x
    a, b = lo * lo, hi * hi
    straddles = (lo < 0) & (hi > 0)
    return jnp.where(straddles, 0.0, jnp.minimum(a, b)), jnp.maximum(a, b)


def _pow(x, n):
    """x^n for x >= 0."""
    return x[0] ** n, x[1] ** n


def _poly(coeffs, x):
    """1 + sum_i coeffs[i] x^(i + 1) for x >= 0."""
    one = jnp.ones_like(x[0])
    return _add((one, one), *(_scale(k, _pow(x, i + 1)) for i, k in enumerate(coeffs)))


def opencv(a, b, dist):
    """((u_lo, u_hi), (v_lo, v_hi), ok) of OpenCV's distortion (opencv.py, the same formula)
    over a in [a0, a1], b in [b0, b1]; ok where the radial denominator stays positive."""
    k1, k2, k3, k4, k5, k6, p1, p2, s1, s2, s3, s4 = (dist[i] for i in range(12))
    a2, b2 = _sq(a), _sq(b)
    r2 = _add(a2, b2)
    num = _poly((k1, k2, k3), r2)
    den = _poly((k4, k5, k6), r2)
    ok = den[0] > 0
    safe = jnp.where(ok, den[0], 1.0), jnp.where(ok, den[1], 1.0)
    radial = _mul(num, (1 / safe[1], 1 / safe[0]))
    ab = _mul(a, b)
    u = _add(_mul(radial, a), _scale(2 * p1, ab), _scale(p2, _add(r2, _scale(2.0, a2))),
             _scale(s1, r2), _scale(s2, _pow(r2, 2)))  # fmt: skip
    v = _add(_mul(radial, b), _scale(p1, _add(r2, _scale(2.0, b2))), _scale(2 * p2, ab),
             _scale(s3, r2), _scale(s4, _pow(r2, 2)))  # fmt: skip
    return u, v, ok


def fisheye(a, b, dist, theta_max):
    """((u_lo, u_hi), (v_lo, v_hi), ok) of the equidistant fisheye, `(a, b) theta_d(theta) / r`
    with `r = |(a, b)|`, `theta = atan(r)`; ok where theta stays below theta_max (beyond it the
    lens map folds back)."""
    k1, k2, k3, k4 = (dist[i] for i in range(4))
    # r over the rectangle: its nearest point to the origin and its farthest corner
    near_a = jnp.maximum(jnp.maximum(a[0], -a[1]), 0.0)
    near_b = jnp.maximum(jnp.maximum(b[0], -b[1]), 0.0)
    r_lo = jnp.sqrt(near_a * near_a + near_b * near_b)
    far_a = jnp.maximum(jnp.abs(a[0]), jnp.abs(a[1]))
    far_b = jnp.maximum(jnp.abs(b[0]), jnp.abs(b[1]))
    r_hi = jnp.sqrt(far_a * far_a + far_b * far_b)
    th = jnp.arctan(r_lo), jnp.arctan(r_hi)
    ok = th[1] < theta_max
    # theta_d / r = (theta_d / theta) (theta / r); atan(r) / r falls from 1 (r = 0) as r grows
    ratio = _poly((k1, k2, k3, k4), _sq(th))
    tiny_lo, tiny_hi = r_lo < 1e-12, r_hi < 1e-12
    t_over_r = (jnp.where(tiny_hi, 1.0, th[1] / jnp.where(tiny_hi, 1.0, r_hi)),
                jnp.where(tiny_lo, 1.0, th[0] / jnp.where(tiny_lo, 1.0, r_lo)))  # fmt: skip
    scale = _mul(ratio, t_over_r)
    return _mul(scale, a), _mul(scale, b), ok
