"""An independent float64 NumPy twin of 3DGS rendering (REFERENCE.md sections 1-3).

Deliberately naive: one global depth sort, no tiles, no footprints, every primitive tested
against every pixel. Used only by tests, written from the reference text, not from our code.
"""

from __future__ import annotations

import numpy as np

SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = [
    1.0925484305920792,
    -1.0925484305920792,
    0.31539156525252005,
    -1.0925484305920792,
    0.5462742152960396,
]
SH_C3 = [
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
]


def quat_to_rot(q):
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        -1,
    ).reshape(-1, 3, 3)


def sh_colour(sh, dirs):
    """sh [N, K, 3], dirs [N, 3] unit -> [N, 3], clamped at 0 after +0.5."""
    x, y, z = dirs[:, 0], dirs[:, 1], dirs[:, 2]
    basis = [np.full_like(x, SH_C0)]
    if sh.shape[1] > 1:
        basis += [-SH_C1 * y, SH_C1 * z, -SH_C1 * x]
    if sh.shape[1] > 4:
        basis += [
            SH_C2[0] * x * y,
            SH_C2[1] * y * z,
            SH_C2[2] * (2 * z * z - x * x - y * y),
            SH_C2[3] * x * z,
            SH_C2[4] * (x * x - y * y),
        ]
    if sh.shape[1] > 9:
        basis += [
            SH_C3[0] * y * (3 * x * x - y * y),
            SH_C3[1] * x * y * z,
            SH_C3[2] * y * (4 * z * z - x * x - y * y),
            SH_C3[3] * z * (2 * z * z - 3 * x * x - 3 * y * y),
            SH_C3[4] * x * (4 * z * z - x * x - y * y),
            SH_C3[5] * z * (x * x - y * y),
            SH_C3[6] * x * (x * x - 3 * y * y),
        ]
    b = np.stack(basis, -1)
    return np.maximum(np.einsum("nk,nkc->nc", b, sh[:, : b.shape[1]]) + 0.5, 0.0)


def project(params, viewmat, K, width, height, eps2d=0.3, near=0.01, antialiased=False):
    """Per-primitive 2D quantities of 3DGS. Returns dict of float64 arrays."""
    mu = np.asarray(params["means"], np.float64)
    q = np.asarray(params["quats"], np.float64)
    s = np.exp(np.asarray(params["scales"], np.float64))
    o = 1.0 / (1.0 + np.exp(-np.asarray(params["opacities"], np.float64)))
    sh = np.asarray(params["sh"], np.float64)
    V = np.asarray(viewmat, np.float64)
    K = np.asarray(K, np.float64)
    R, t = V[:3, :3], V[:3, 3]
    pc = mu @ R.T + t
    x, y, z = pc[:, 0], pc[:, 1], pc[:, 2]
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        tanx, tany = 0.5 * width / fx, 0.5 * height / fy
        xz = np.clip(x / z, -(cx / fx + 0.3 * tanx), (width - cx) / fx + 0.3 * tanx)
        yz = np.clip(y / z, -(cy / fy + 0.3 * tany), (height - cy) / fy + 0.3 * tany)
        J = np.zeros((len(mu), 2, 3))
        J[:, 0, 0] = fx / z
        J[:, 0, 2] = -fx * xz / z
        J[:, 1, 1] = fy / z
        J[:, 1, 2] = -fy * yz / z
        Rq = quat_to_rot(q)
        cov = Rq @ (s[:, :, None] ** 2 * np.swapaxes(Rq, 1, 2))
        covc = R @ cov @ R.T
        cov2 = J @ covc @ np.swapaxes(J, 1, 2)
        det0 = cov2[:, 0, 0] * cov2[:, 1, 1] - cov2[:, 0, 1] ** 2
        cov2[:, 0, 0] += eps2d
        cov2[:, 1, 1] += eps2d
        det = np.maximum(cov2[:, 0, 0] * cov2[:, 1, 1] - cov2[:, 0, 1] ** 2, 1e-10)
        if antialiased:
            o = o * np.sqrt(np.maximum(det0 / det, 0.005**2))
        conic = np.stack([cov2[:, 1, 1], -cov2[:, 0, 1], cov2[:, 0, 0]], -1) / det[:, None]
        u = fx * x / z + cx
        v = fy * y / z + cy
    campos = -R.T @ t
    d = mu - campos
    d = d / np.linalg.norm(d, axis=-1, keepdims=True)
    return {
        "centre": np.stack([u, v], -1),
        "conic": conic,
        "opacity": o,
        "depth": z,
        "valid": z > near,
        "color": sh_colour(sh, d),
    }


def render(
    params,
    viewmat,
    K,
    width,
    height,
    background=None,
    antialiased=False,
    alpha_max=0.99,
    alpha_min=1.0 / 255.0,
    t_min=1e-4,
    ambiguous=False,
    kernel=None,
):
    """Returns (colour [H, W, 3], alpha [H, W], depth-weighted sum [H, W]) in float64.

    `kernel(g)` of the squared Mahalanobis distance g = 2 sigma replaces the Gaussian exp(-g / 2)
    (the kernel swaps of issue 13).

    With `ambiguous=True` a fourth array [H, W] bool marks pixels where a discrete decision
    (alpha against alpha_min, the transmittance stop, sigma >= 0) is so close to its threshold
    that float32 rounding may decide it the other way; such a pixel may legitimately differ
    by up to one primitive's contribution.
    """
    pr = project(params, viewmat, K, width, height, antialiased=antialiased)
    jj, ii = np.meshgrid(np.arange(width), np.arange(height))
    px, py = (jj + 0.5).ravel(), (ii + 0.5).ravel()
    T = np.ones(px.shape)
    C = np.zeros(px.shape + (3,))
    D = np.zeros(px.shape)
    done = np.zeros(px.shape, bool)
    amb = np.zeros(px.shape, bool)
    order = np.argsort(np.where(pr["valid"], pr["depth"], np.inf), kind="stable")
    for i in order:
        if not pr["valid"][i]:
            break
        a, b, c = pr["conic"][i]
        dx, dy = px - pr["centre"][i, 0], py - pr["centre"][i, 1]
        sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
        density = np.exp(-sigma) if kernel is None else kernel(2 * sigma)
        alpha = np.minimum(alpha_max, pr["opacity"][i] * density)
        use = (sigma >= 0) & (alpha >= alpha_min) & ~done
        test_t = T * (1 - alpha)
        near_alpha = np.abs(alpha - alpha_min) < 1e-4 * alpha_min
        near_stop = np.abs(test_t - t_min) < 1e-3 * t_min
        amb |= ~done & (near_alpha | (np.abs(sigma) < 1e-6) | ((alpha >= alpha_min) & near_stop))
        stop = use & (test_t < t_min)
        done |= stop
        use &= ~stop
        w = np.where(use, alpha * T, 0.0)
        C += w[:, None] * pr["color"][i]
        D += w * pr["depth"][i]
        T = np.where(use, test_t, T)
    if background is not None:
        C += T[:, None] * np.asarray(background, np.float64)
    result = (C.reshape(height, width, 3), (1 - T).reshape(height, width), D.reshape(height, width))
    if ambiguous:
        result += (amb.reshape(height, width),)
    return result
