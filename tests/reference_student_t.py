"""An independent float64 NumPy twin of Student Splatting and Scooping (docs/student_t.md).

Written from the paper's definitions, not from the compiled spec: the 3DGS EWA projection of
tests/reference_3dgs.py (SSS splats the same way), then per pixel and primitive the Student-t
kernel `(1 + s / nu)^(-(nu + 2) / 2)` of `s = d^T conic d`, `nu = 1 + exp(raw)`, a signed
opacity `o = tanh(raw)`, `alpha = clamp(o kernel, -0.99, 0.99)`, used where |alpha| >= 1/255,
and the SSS compositing `C = sum_i c_i alpha_i prod_{j<i} (1 - alpha_j)` in one global depth
order (no early stop: with negative alphas the transmittance is not monotone). No tiles, no
footprints: every primitive against every pixel.
"""

from __future__ import annotations

import numpy as np
import reference_3dgs


def render(params, viewmat, K, width, height):
    """(colour [H, W, 3], alpha [H, W], depth-weighted sum [H, W]), float64."""
    raw = dict(params)
    raw["opacities"] = np.zeros(len(params["means"]))  # reference_3dgs applies a sigmoid
    pr = reference_3dgs.project(raw, viewmat, K, width, height)
    o = np.tanh(np.asarray(params["opacities"], np.float64))
    nu = 1 + np.exp(np.asarray(params["nus"], np.float64))
    valid = pr["valid"] & (np.abs(o) >= 1 / 255)
    jj, ii = np.meshgrid(np.arange(width), np.arange(height))
    px, py = (jj + 0.5).ravel(), (ii + 0.5).ravel()
    T, C, D = np.ones(px.shape), np.zeros(px.shape + (3,)), np.zeros(px.shape)
    for i in np.argsort(np.where(valid, pr["depth"], np.inf), kind="stable"):
        if not valid[i]:
            break
        a, b, c = pr["conic"][i]
        dx, dy = px - pr["centre"][i, 0], py - pr["centre"][i, 1]
        s = a * dx * dx + c * dy * dy + 2 * b * dx * dy
        kernel = (1 + np.maximum(s, 0) / nu[i]) ** (-(nu[i] + 2) / 2)
        alpha = np.where(s >= 0, np.clip(o[i] * kernel, -0.99, 0.99), 0.0)
        alpha = np.where(np.abs(alpha) >= 1 / 255, alpha, 0.0)
        w = alpha * T
        C += w[:, None] * pr["color"][i]
        D += w * pr["depth"][i]
        T = T * (1 - alpha)
    return C.reshape(height, width, 3), (1 - T).reshape(height, width), D.reshape(height, width)
