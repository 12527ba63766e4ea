"""`.splat`: the compact 3DGS format of antimatter15's WebGL viewer (github.com/antimatter15/splat),
which many web viewers read.

32 bytes a Gaussian, little endian, no header: position f32 x3, scale f32 x3 (activated:
exp of the log-scales), colour RGBA u8 x4 (RGB = 0.5 + SH_C0 * the SH DC term, A = the
sigmoid of the opacity logit, both times 255, rounded and clipped to 0..255) and rotation u8 x4
(the normalised (w, x, y, z) quaternion, times 128 plus 128, clipped). Gaussians are sorted
by size times opacity, largest first, as that viewer's converter writes them. Higher SH
coefficients have no place in it: the colour is the view-independent DC term (the format's
own limit, said where a run writes one).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..conventions import SH_C0
from ..errors import DataError
from .files import write_atomic

SPLAT_DTYPE = np.dtype(
    [("position", "<f4", 3), ("scale", "<f4", 3), ("rgba", "u1", 4), ("rot", "u1", 4)]
)


def splat_records(params: Mapping) -> np.ndarray:
    """3DGS raw parameters (means, quats, scales, opacities, sh as `save_ply` takes them) ->
    the .splat records [N] of SPLAT_DTYPE, sorted. A ValueError says why they cannot be."""
    return _records(params)[0]


def _records(params: Mapping) -> tuple[np.ndarray, int]:
    """`splat_records` and the count of colour values (R, G, B of each) outside [0, 1] that
    were clipped."""
    means = np.asarray(params["means"], np.float64)
    n = len(means)
    quats = np.asarray(params["quats"], np.float64).reshape(n, 4)
    log_scales = np.asarray(params["scales"], np.float64).reshape(n, 3)
    logits = np.asarray(params["opacities"], np.float64).reshape(n)
    dc = np.asarray(params["sh"], np.float64).reshape(n, -1, 3)[:, 0, :]
    with np.errstate(over="ignore"):  # beyond float64 too: inf, counted below
        scales = np.exp(log_scales)
    big = ~(scales <= np.finfo(np.float32).max).all(axis=1)
    if big.any():
        raise ValueError(f"{int(big.sum())} Gaussian(s) have a scale beyond float32's range")
    with np.errstate(over="ignore"):  # exp(-logit) to inf: opacity 0, as it is
        opacity = 1.0 / (1.0 + np.exp(-logits))
    norm = np.linalg.norm(quats, axis=1, keepdims=True)
    unit = np.where(norm > 0, quats / np.where(norm > 0, norm, 1.0), [1.0, 0.0, 0.0, 0.0])
    order = np.argsort(-(np.prod(scales, axis=1) * opacity), kind="stable")
    out = np.empty(n, SPLAT_DTYPE)
    out["position"] = means
    out["scale"] = scales
    rgb = 0.5 + SH_C0 * dc
    clipped = int(np.count_nonzero((rgb < 0.0) | (rgb > 1.0)))
    rgba = np.concatenate([rgb, opacity[:, None]], axis=1)
    out["rgba"] = np.clip(np.round(rgba * 255.0), 0, 255)
    out["rot"] = np.clip(np.round(unit * 128.0 + 128.0), 0, 255)
    return out[order], clipped


def save_splat(path, params: Mapping) -> int:
    """Write 3DGS raw parameters as a .splat file (a DataError names it when they cannot).
    Returns how many colour values (R, G, B of the DC term) were outside [0, 1] and clipped."""
    path = Path(path)
    try:
        records, clipped = _records(params)
    except ValueError as e:
        raise DataError(path, f"cannot save: {e}") from None
    write_atomic(path, lambda f: f.write(records.tobytes()))
    return clipped
