"""An independent float64 NumPy twin of Generalized Exponential Splatting (docs/ges.md).

Written from the definition, not from the compiled spec: the 3DGS EWA projection of
tests/reference_3dgs.py (GES keeps it), then per pixel and primitive the generalized exponential
`alpha = min(0.99, o exp(-sigma^(beta / 2)))`, `sigma = s / 2` with `s = d^T conic d` the full
squared Mahalanobis distance, `beta = 2 exp(b)`, composited front to back in one global depth
order with no tiles and no footprints (reference_beta.composite).
"""

from __future__ import annotations

import numpy as np
import reference_3dgs
from reference_beta import composite


def ges_kernel(s, beta):
    """exp(-(s / 2)^(beta / 2)) for s >= 0 (s: the full squared Mahalanobis distance)."""
    return np.exp(-((np.maximum(s, 0.0) / 2) ** (beta / 2)))


def render(params, viewmat, K, width, height):
    """GES render of raw parameters (3DGS layout plus `betas`, the raw b)."""
    pr = reference_3dgs.project(params, viewmat, K, width, height)
    pr["valid"] = pr["valid"] & (pr["opacity"] >= 1 / 255)
    beta = 2 * np.exp(np.asarray(params["betas"], np.float64))
    return composite(pr, width, height, lambda s, i: ges_kernel(s, beta[i]))
