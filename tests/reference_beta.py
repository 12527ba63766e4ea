"""An independent float64 NumPy twin of Deformable Beta Splatting (docs/beta.md).

Written from the paper's definition, not from the compiled spec: the 3DGS EWA projection of
tests/reference_3dgs.py (DBS keeps it), then per pixel and primitive the Beta kernel
`alpha = min(0.99, o (1 - s)^beta)` for `s = d^T conic d < 1` (0 outside), `beta = 4 exp(b)`,
composited front to back in one global depth order with no tiles and no footprints: every
primitive is tested against every pixel. The compositing loop is shared with the other 2D
splatting twins (`composite`), each of which passes its own kernel.
"""

from __future__ import annotations

import numpy as np
import reference_3dgs


def beta_kernel(s, beta):
    """(1 - s)^beta on s < 1, else 0 (s: squared Mahalanobis distance, full conic)."""
    inside = s < 1
    return np.where(inside, np.abs(np.where(inside, 1 - s, 0.0)) ** beta, 0.0)


def composite(pr, width, height, kernel, alpha_max=0.99, alpha_min=1 / 255, t_min=1e-4):
    """Front-to-back compositing of projected primitives `pr` (reference_3dgs.project) with
    `kernel(s, i)` of the full squared distance s = d^T conic d for primitive i. Returns
    (colour [H, W, 3], alpha [H, W], depth-weighted sum [H, W])."""
    jj, ii = np.meshgrid(np.arange(width), np.arange(height))
    px, py = (jj + 0.5).ravel(), (ii + 0.5).ravel()
    T = np.ones(px.shape)
    C = np.zeros(px.shape + (3,))
    D = np.zeros(px.shape)
    done = np.zeros(px.shape, bool)
    order = np.argsort(np.where(pr["valid"], pr["depth"], np.inf), kind="stable")
    for i in order:
        if not pr["valid"][i]:
            break
        a, b, c = pr["conic"][i]
        dx, dy = px - pr["centre"][i, 0], py - pr["centre"][i, 1]
        s = a * dx * dx + c * dy * dy + 2 * b * dx * dy
        alpha = np.where(s >= 0, np.minimum(alpha_max, pr["opacity"][i] * kernel(s, i)), 0.0)
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
    """DBS render of raw parameters (3DGS layout plus `betas`, the raw b)."""
    pr = reference_3dgs.project(params, viewmat, K, width, height)
    # The primitive is skipped below 1/255 opacity (it can never reach the alpha threshold).
    pr["valid"] = pr["valid"] & (pr["opacity"] >= 1 / 255)
    beta = 4 * np.exp(np.asarray(params["betas"], np.float64))
    return composite(pr, width, height, lambda s, i: beta_kernel(s, beta[i]))
