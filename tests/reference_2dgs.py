"""An independent float64 NumPy twin of 2D Gaussian Splatting (Huang et al. 2024; docs/2dgs.md).

Written from the paper's definitions, not from the compiled spec: every pixel's pinhole ray
(o, d) meets the plane of each surfel (centre p, tangents t_u, t_v, normal t_w = t_u x t_v,
scales s_u, s_v) at `o + t d`; its coordinates there are `u = (x - p) . t_u / s_u`,
`v = (x - p) . t_v / s_v`; the object-space low-pass filter takes
`G = max(exp(-(u^2 + v^2) / 2), exp(-|pixel - c|^2))` with c the projected centre (the paper's
filter with sigma = sqrt(2) / 2); `alpha = min(0.99, o G)`, skipped below 1/255; front-to-back
compositing in the order of the centres' camera z, stopping below transmittance 1e-4. The
per-pixel depth is the ray distance t where the surfel term wins, else the centre's distance
along the ray; the normal is t_w turned towards the camera. No tiles, no footprints.
"""

from __future__ import annotations

import numpy as np
from reference_3dgs import quat_to_rot, sh_colour


def pinhole_rays(viewmat, K, width, height):
    """World ray origin [3] and unit directions [H*W, 3] through the pixel centres."""
    R, t = viewmat[:3, :3], viewmat[:3, 3]
    jj, ii = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    px, py = jj.ravel(), ii.ravel()
    d = np.stack([(px - K[0, 2]) / K[0, 0], (py - K[1, 2]) / K[1, 1], np.ones_like(px)], -1)
    d = d / np.linalg.norm(d, axis=-1, keepdims=True)
    return -R.T @ t, d @ R, np.stack([px, py], -1)


def surfel(mu, rot, s, opac, centre, o, d, pix):
    """One surfel at every pixel: (alpha, ray-surfel depth, normal facing the ray), the exact
    ray-plane intersection in the surfel's (u, v) frame or the screen-space low-pass filter."""
    tu, tv, tw = rot[:, 0], rot[:, 1], rot[:, 2]
    dn = d @ tw
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(np.abs(dn) > 1e-6, ((mu - o) @ tw) / dn, -1.0)
    x = o + t[:, None] * d - mu
    g3 = np.where(t > 0, (x @ tu / s[0]) ** 2 + (x @ tv / s[1]) ** 2, np.inf)
    g2 = 2 * np.sum((pix - centre) ** 2, -1)
    alpha = np.minimum(0.99, opac * np.exp(-0.5 * np.minimum(g3, g2)))
    depth = np.where(g3 <= g2, t, d @ (mu - o))
    return alpha, depth, np.where((dn > 0)[:, None], -tw, tw)


def render(params, viewmat, K, width, height, near=0.01):
    """(colour [H, W, 3], alpha [H, W], depth sum [H, W], normal sum [H, W, 3]), float64."""
    viewmat, K = np.asarray(viewmat, np.float64), np.asarray(K, np.float64)
    mu = np.asarray(params["means"], np.float64)
    rot = quat_to_rot(np.asarray(params["quats"], np.float64))
    s = np.exp(np.asarray(params["scales"], np.float64))
    opac = 1 / (1 + np.exp(-np.asarray(params["opacities"], np.float64)))
    o, d, pix = pinhole_rays(viewmat, K, width, height)
    pc = mu @ viewmat[:3, :3].T + viewmat[:3, 3]
    centre = (pc[:, :2] / pc[:, 2:]) * [K[0, 0], K[1, 1]] + [K[0, 2], K[1, 2]]
    colour = sh_colour(
        np.asarray(params["sh"], np.float64),
        (mu - o) / np.linalg.norm(mu - o, axis=-1, keepdims=True),
    )
    n_pix = d.shape[0]
    T, C, D = np.ones(n_pix), np.zeros((n_pix, 3)), np.zeros(n_pix)
    N = np.zeros((n_pix, 3))
    done = np.zeros(n_pix, bool)
    valid = (pc[:, 2] > near) & (opac >= 1 / 255)
    for i in np.argsort(np.where(valid, pc[:, 2], np.inf), kind="stable"):
        if not valid[i]:
            break
        alpha, depth, normal = surfel(mu[i], rot[i], s[i], opac[i], centre[i], o, d, pix)
        use = (alpha >= 1 / 255) & ~done
        test_t = T * (1 - alpha)
        stop = use & (test_t < 1e-4)
        done |= stop
        use &= ~stop
        w = np.where(use, alpha * T, 0.0)
        C += w[:, None] * colour[i]
        D += w * depth
        N += w[:, None] * normal
        T = np.where(use, test_t, T)
    shape = (height, width)
    return C.reshape(*shape, 3), (1 - T).reshape(shape), D.reshape(shape), N.reshape(*shape, 3)
