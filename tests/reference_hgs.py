"""An independent float64 NumPy twin of 3D Half-Gaussian Splatting (docs/hgs.md).

Written from the definition, not from the compiled spec, along another route than the spec's:
the 3DGS EWA projection of tests/reference_3dgs.py (its conic, opacity, depth, colour and its
Jacobian J at the clamped centre), then for each pixel the affine ray of the EWA approximation
in the camera frame, q(t) = q0 + t r with J q0 = d (the pixel's offset from the centre) and
J r = 0, r = (u, v, 1). The Gaussian restricted to that line is a 1D Gaussian in t (from the
camera-frame covariance, inverted with numpy), and the share of it on the positive side of the
plane n . q = 0 (n: the unit normal in the camera frame) is a normal CDF, written with math.erf.
`alpha = min(0.99, G(d) (o1 P + o2 (1 - P)))` with G the 3DGS 2D Gaussian, composited front to
back with every primitive tested against every pixel (reference_beta.composite's loop, here
with a per-pixel kernel of its own).
"""

from __future__ import annotations

import math

import numpy as np
import reference_3dgs

_erf = np.vectorize(math.erf)


def side_share(qinv, q0, r, n):
    """The share of the 1D Gaussian exp(-q(t)^T qinv q(t) / 2), q(t) = q0 + t r, on the side
    n . q(t) >= 0. q0: [..., 3]; qinv: [3, 3]; r, n: [3]."""
    a = r @ qinv @ r  # exponent: (a t^2 + 2 b t + c) / 2
    b = q0 @ (qinv @ r)
    t_mean, t_std = -b / a, 1 / math.sqrt(a)
    nr = float(n @ r)
    signed = (q0 @ n + t_mean * nr) / (abs(nr) * t_std) if nr != 0 else np.sign(q0 @ n) * np.inf
    return 0.5 * (1 + _erf(signed / math.sqrt(2)))


def project(params, viewmat, K, width, height):
    """reference_3dgs.project plus what the split needs: the Jacobian's clamped (u, v), the
    depth, the camera-frame covariance and normal, and both opacities."""
    pr = reference_3dgs.project(params, viewmat, K, width, height)
    V = np.asarray(viewmat, np.float64)
    R, t = V[:3, :3], V[:3, 3]
    Kf = np.asarray(K, np.float64)
    fx, fy, cx, cy = Kf[0, 0], Kf[1, 1], Kf[0, 2], Kf[1, 2]
    mu = np.asarray(params["means"], np.float64)
    pc = mu @ R.T + t
    z = np.maximum(pc[:, 2], 0.01)
    tanx, tany = 0.5 * width / fx, 0.5 * height / fy
    pr["uv"] = np.stack(
        [
            np.clip(pc[:, 0] / z, -(cx / fx + 0.3 * tanx), (width - cx) / fx + 0.3 * tanx),
            np.clip(pc[:, 1] / z, -(cy / fy + 0.3 * tany), (height - cy) / fy + 0.3 * tany),
        ],
        -1,
    )
    pr["z"], pr["f"] = z, (fx, fy)
    rot = reference_3dgs.quat_to_rot(np.asarray(params["quats"], np.float64))
    s = np.exp(np.asarray(params["scales"], np.float64))
    pr["covc"] = R @ rot @ (s[:, :, None] ** 2 * np.swapaxes(rot, 1, 2)) @ R.T
    n = np.asarray(params["plane_normals"], np.float64)
    pr["normal"] = (n / np.linalg.norm(n, axis=-1, keepdims=True)) @ R.T
    o1 = 1 / (1 + np.exp(-np.asarray(params["opacities"], np.float64)))
    o2 = 1 / (1 + np.exp(-np.asarray(params["opacities2"], np.float64)))
    pr["halves"] = np.stack([o1, o2], -1)
    pr["opacity"] = np.maximum(o1, o2)
    pr["valid"] = pr["valid"] & (pr["opacity"] >= 1 / 255)
    return pr


def composite(pr, width, height, alpha_max=0.99, alpha_min=1 / 255, t_min=1e-4):
    """Front-to-back compositing with the half-Gaussian alpha (every primitive, every pixel)."""
    jj, ii = np.meshgrid(np.arange(width), np.arange(height))
    px, py = (jj + 0.5).ravel(), (ii + 0.5).ravel()
    T = np.ones(px.shape)
    C = np.zeros(px.shape + (3,))
    D = np.zeros(px.shape)
    done = np.zeros(px.shape, bool)
    order = np.argsort(np.where(pr["valid"], pr["depth"], np.inf), kind="stable")
    fx, fy = pr["f"]
    for i in order:
        if not pr["valid"][i]:
            break
        a, b, c = pr["conic"][i]
        dx, dy = px - pr["centre"][i, 0], py - pr["centre"][i, 1]
        s = a * dx * dx + c * dy * dy + 2 * b * dx * dy
        z, (u, v) = pr["z"][i], pr["uv"][i]
        q0 = np.stack([z * dx / fx, z * dy / fy, np.zeros_like(dx)], -1)
        share = side_share(np.linalg.inv(pr["covc"][i]), q0, np.array([u, v, 1.0]),
                           pr["normal"][i])  # fmt: skip
        o1, o2 = pr["halves"][i]
        alpha = np.exp(-0.5 * s) * (o1 * share + o2 * (1 - share))
        alpha = np.where(s >= 0, np.minimum(alpha_max, alpha), 0.0)
        use = (alpha >= alpha_min) & ~done
        test_t = T * (1 - alpha)
        stop = use & (test_t < t_min)
        done |= stop
        use &= ~stop
        w = np.where(use, alpha * T, 0.0)
        C += w[:, None] * pr["color"][i]
        D += w * pr["depth"][i]
        T = np.where(use, test_t, T)
    return C.reshape(height, width, 3), (1 - T).reshape(height, width), D.reshape(height, width)


def render(params, viewmat, K, width, height):
    """3D-HGS render of raw parameters (3DGS layout plus `plane_normals` and `opacities2`)."""
    return composite(project(params, viewmat, K, width, height), width, height)
