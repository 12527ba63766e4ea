"""Undistortion at load time: each view of a lens camera (`opencv`, `fisheye`) resampled to a
pinhole camera, for specs that render only pinholes (`load_colmap(..., undistort=True)`,
`xprc train --undistort`).

The new camera is chosen as COLMAP's `image_undistorter` chooses it (its `UndistortCamera`,
read for the facts): the focal lengths are kept; the image is cropped (or grown) about the
principal point, whose place relative to the image size is kept, to the largest size whose every
pixel sees the distorted image: each side's extent is set by the innermost point of the
distorted image's edge on that side, traced through the lens and projected through the
pinhole (edge points beyond 90 degrees, or outside the lens model's valid domain, set no bound);
the scale is held to [0.2, 2] of the distorted size. Each pixel of the new image then
takes its ray through the pinhole camera, projected through the lens model
(`xprc.camera.Camera.project`, the one definition of each lens), sampled bilinearly.

Cameras of one size share one undistorted size (the smallest crop's), so that a dataset of one
image size keeps one (training needs one). A pixel of the new image whose ray does not reach the
distorted image, or leaves the lens model's valid domain, has no source pixel: it takes the
colour of the nearest edge pixel, and the report counts those pixels; by the choice above there
are none, unless the lower scale limit, or an edge without a bound, widens the view.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import DataError, warn_data

__all__ = ["Undistortion", "undistort_camera", "undistort_views"]

MIN_SCALE, MAX_SCALE = 0.2, 2.0  # COLMAP's limits on the undistorted size / the distorted size
SIZE_TOL = 1e-3  # pixels: a crop size this close below a whole number is taken as it
LENS_MODELS = ("opencv", "fisheye")  # the models undistortion resamples to a pinhole


@dataclasses.dataclass(frozen=True)
class Undistortion:
    """One camera's resampling. K [3, 3] float64 and size (width, height) of the pinhole
    camera; source [2, H', W'] float64: where each of its pixel centres falls in the distorted
    image (pixel coordinates, centres at j + 0.5); blank [H', W'] bool: pixels without a source
    pixel; kept: the share of the distorted image's pixel centres the new image sees."""

    K: np.ndarray
    size: tuple[int, int]
    source: np.ndarray
    blank: np.ndarray
    kept: float


def _camera(view_like, dtype=np.float32):
    """The distorted camera at the origin (identity pose): camera space is world space."""
    from ..camera import Camera

    return Camera(viewmat=np.eye(4, dtype=dtype), K=np.asarray(view_like.K, dtype),
                  width=int(view_like.width), height=int(view_like.height),
                  model=view_like.model, dist=np.asarray(view_like.dist, dtype))  # fmt: skip


@functools.cache
def _jitted():
    """(rays, lens_map): the camera computations, compiled once per camera model and shape
    (jax imported here: the data loaders do not need it otherwise)."""
    import jax
    import jax.numpy as jnp

    from ..camera.models import LENSES

    @jax.jit
    def rays(cam, px, py):  # -> camera-space directions [n, 3], pixel_valid [n]
        return cam.pixel_rays(px, py)[1], cam.pixel_valid(px, py)

    @jax.jit
    def lens_map(cam, x, y):  # rays (x, y, 1) -> lens pixel, pinhole pixel, project_valid
        one = jnp.ones_like(x)
        flat = LENSES["pinhole"].project(x, y, one, cam.fx, cam.fy, cam.cx, cam.cy, cam.dist)
        return jnp.stack(cam.project(x, y, one)), jnp.stack(flat), cam.project_valid(x, y, one)

    return rays, lens_map


def _reaches(cam) -> dict[str, float]:
    """For each side of the image: how far from the principal point (pinhole pixels, same focal
    lengths) the innermost point of that edge of the image's area (x = 0 or W, y = 0 or H, at
    the pixel rows or columns) lands. Edge points whose ray is outside the lens model's valid
    domain, or beyond 90 degrees (no pinhole pixel sees them), set no bound (inf)."""
    w, h = cam.width, cam.height
    rows, cols = np.arange(h) + 0.5, np.arange(w) + 0.5
    edges = {"left": (np.zeros(h), rows), "right": (np.full(h, float(w)), rows),
             "top": (cols, np.zeros(w)), "bottom": (cols, np.full(w, float(h)))}  # fmt: skip
    px = np.concatenate([e[0] for e in edges.values()]).astype(np.float32)
    py = np.concatenate([e[1] for e in edges.values()]).astype(np.float32)
    d, ok = (np.asarray(a) for a in _jitted()[0](cam, px, py))
    d = d.astype(np.float64)
    ok = ok & (d[:, 2] > 0)
    z = np.where(ok, d[:, 2], 1.0)
    K = np.asarray(cam.K, np.float64)
    u, v = K[0, 0] * d[:, 0] / z, K[1, 1] * d[:, 1] / z  # from the principal point
    reach, at = {}, 0
    for side, (ex, _) in edges.items():
        n = len(ex)
        good = ok[at : at + n]
        off = {"left": -u, "right": u, "top": -v, "bottom": v}[side][at : at + n]
        reach[side] = float(off[good].min()) if good.any() else math.inf
        at += n
    return reach


def crop_scales(cam) -> tuple[float, float]:
    """(sx, sy): the undistorted size / the distorted size along each axis, COLMAP's choice
    without blank pixels, held to [MIN_SCALE, MAX_SCALE]."""
    K = np.asarray(cam.K, np.float64)
    cx, cy = K[0, 2], K[1, 2]
    reach = _reaches(cam)
    # a side of the pinhole image, `cx` pixels long on the left, reaches reach / cx at scale 1
    sides = ((reach["left"], cx), (reach["right"], cam.width - cx),
             (reach["top"], cy), (reach["bottom"], cam.height - cy))  # fmt: skip
    s = [r / length if length > 0 else math.inf for r, length in sides]
    sx, sy = min(s[0], s[1]), min(s[2], s[3])
    return float(np.clip(sx, MIN_SCALE, MAX_SCALE)), float(np.clip(sy, MIN_SCALE, MAX_SCALE))


def undistort_camera(cam, size: tuple[int, int]) -> Undistortion:
    """The resampling of the distorted `cam` (an `xprc.camera.Camera`, one view) to a pinhole
    camera of `size` with its focal lengths and its principal point's relative place."""
    w, h = size
    K = np.asarray(cam.K, np.float64).copy()
    K[0, 2] *= w / cam.width
    K[1, 2] *= h / cam.height
    u = np.arange(w, dtype=np.float64)[None, :] + 0.5
    v = np.arange(h, dtype=np.float64)[:, None] + 0.5
    x = np.broadcast_to((u - K[0, 2]) / K[0, 0], (h, w))  # the ray (x, y, 1) of each pixel
    y = np.broadcast_to((v - K[1, 2]) / K[1, 1], (h, w))
    xs, ys = (np.asarray(np.broadcast_to(a, (h, w)), np.float32) for a in (x, y))
    # With the focal lengths kept, the pinhole part of the map is a shift by the principal
    # points' difference (float64); the lens adds its displacement from the pinhole projection,
    # both projections through xprc.camera in float32: zero coefficients move no pixel, exactly.
    lens, flat, valid = (np.asarray(a) for a in _jitted()[1](cam, xs, ys))
    K0 = np.asarray(cam.K, np.float64)
    shift = np.stack([np.broadcast_to(u + (K0[0, 2] - K[0, 2]), (h, w)),
                      np.broadcast_to(v + (K0[1, 2] - K[1, 2]), (h, w))])  # fmt: skip
    source = shift + (lens.astype(np.float64) - flat.astype(np.float64))
    inside = (source[0] >= 0) & (source[0] <= cam.width) & (source[1] >= 0)
    inside &= source[1] <= cam.height
    blank = ~(valid & inside & np.isfinite(source).all(axis=0))
    return Undistortion(K, (w, h), np.where(np.isfinite(source), source, 0.0), blank,
                        _kept(cam, K, (w, h)))  # fmt: skip


def _kept(cam, K: np.ndarray, size: tuple[int, int]) -> float:
    """The share of the distorted image's pixel centres whose ray lands inside the pinhole
    image of K and size (the field of view kept)."""
    w, h = cam.width, cam.height
    px = np.broadcast_to(np.arange(w, dtype=np.float32)[None, :] + 0.5, (h, w))
    py = np.broadcast_to(np.arange(h, dtype=np.float32)[:, None] + 0.5, (h, w))
    d, valid = (np.asarray(a) for a in _jitted()[0](cam, px.ravel(), py.ravel()))
    d = d.astype(np.float64).reshape(h, w, 3)
    valid = valid.reshape(h, w) & (d[..., 2] > 0)
    z = np.where(valid, d[..., 2], 1.0)
    u = K[0, 0] * d[..., 0] / z + K[0, 2]
    v = K[1, 1] * d[..., 1] / z + K[1, 2]
    seen = valid & (u >= 0) & (u <= size[0]) & (v >= 0) & (v <= size[1])
    return float(seen.mean())


def bilinear_taps(source: np.ndarray, width: int, height: int) -> tuple:
    """Where and how much each output pixel takes of an image of width x height, bilinear at
    `source` [2, H', W'] (pixel coordinates, centres at j + 0.5), the coordinates held to the
    outermost pixel centres (beyond them the edge pixels' values continue): (rows [2, H', W'],
    cols [2, H', W'] int, wy, wx [H', W', 1] float32), computed once per camera."""
    c = np.clip(source[0] - 0.5, 0.0, width - 1.0)
    r = np.clip(source[1] - 0.5, 0.0, height - 1.0)
    c0, r0 = np.floor(c).astype(np.intp), np.floor(r).astype(np.intp)
    cols = np.stack([c0, np.minimum(c0 + 1, width - 1)])
    rows = np.stack([r0, np.minimum(r0 + 1, height - 1)])
    wx = (c - c0).astype(np.float32)[..., None]
    wy = (r - r0).astype(np.float32)[..., None]
    return rows, cols, wy, wx


def resample(image: np.ndarray, taps: tuple) -> np.ndarray:
    """image [H, W, C] (or [H, W]) sampled at `bilinear_taps`; float32 [H', W', C] (or
    [H', W']). A weight of 0 takes a pixel exactly."""
    rows, cols, wy, wx = taps
    planes = np.asarray(image, np.float32)
    planes = planes[..., None] if planes.ndim == 2 else planes
    top = planes[rows[0], cols[0]] * (1 - wx) + planes[rows[0], cols[1]] * wx
    bottom = planes[rows[1], cols[0]] * (1 - wx) + planes[rows[1], cols[1]] * wx
    out = top * (1 - wy) + bottom * wy
    return out[..., 0] if np.ndim(image) == 2 else out


def _key(view) -> tuple:
    K, dist = (np.asarray(a, np.float32).tobytes() for a in (view.K, view.dist))
    return (int(view.width), int(view.height), view.model, K, dist)


def _numbers(K: np.ndarray) -> str:
    return (f"fx {K[0, 0]:.6g}, fy {K[1, 1]:.6g}, cx {K[0, 2]:.6g}, "
            f"cy {K[1, 2]:.6g}")  # fmt: skip


SHOWN = 3  # cameras the report describes one by one; the rest in one summary


def _shared_sizes(keys, scales) -> dict[tuple[int, int], tuple[int, int]]:
    """distorted size -> the undistorted size of every camera of that size (the smallest
    crop's). A crop within SIZE_TOL of the next whole pixel counts as it: float32 rays put a
    crop of exactly the image's size at 0.9999999 of it."""
    shared: dict[tuple[int, int], tuple[int, int]] = {}
    for key in keys:
        (w, h), (sx, sy) = key[0][:2], scales[key]
        size = (max(1, math.floor(sx * w + SIZE_TOL)), max(1, math.floor(sy * h + SIZE_TOL)))
        old = shared.get((w, h), size)
        shared[(w, h)] = (min(old[0], size[0]), min(old[1], size[1]))
    return shared


def _blank_text(n_blank: int, total: int) -> str:
    if not n_blank:
        return "every pixel has a source pixel"
    return (f"{n_blank:,} pixels ({n_blank / total:.2%}) have no source pixel (their ray misses "
            "the distorted image or leaves the lens model's valid domain) and take the nearest "
            "edge pixel's colour")  # fmt: skip


class _Done(NamedTuple):
    """What the report says of one camera (not its maps: a dataset may have a camera a view)."""

    label: str
    size: tuple[int, int]  # the distorted camera's
    views: int
    K: np.ndarray
    new_size: tuple[int, int]
    kept: float
    blank: int


def _report(done: list[_Done]) -> str:
    """The report's cameras, one by one up to SHOWN, then a summary of the rest."""
    lines = [f"{d.label} {d.size[0]}x{d.size[1]} ({d.views} view{'s' * (d.views > 1)}) -> "
             f"pinhole {d.new_size[0]}x{d.new_size[1]}, {_numbers(d.K)}; it sees {d.kept:.1%} "
             f"of the distorted image; {_blank_text(d.blank, d.new_size[0] * d.new_size[1])}"
             for d in done[:SHOWN]]  # fmt: skip
    rest = done[SHOWN:]
    if rest:
        kept = [d.kept for d in rest]
        sizes = sorted({f"{d.new_size[0]}x{d.new_size[1]}" for d in rest})
        pixels = sum(d.new_size[0] * d.new_size[1] for d in rest)  # of one image each
        blank = sum(d.blank for d in rest)
        lines.append(f"{len(rest)} more cameras -> pinhole {', '.join(sizes[:4])}, seeing "
                     f"{min(kept):.1%} to {max(kept):.1%} of their distorted images; "
                     f"{_blank_text(blank, pixels)}")  # fmt: skip
    return "; ".join(lines)


def undistort_views(views, where: Path, labels=None, max_pixels: int | None = None) -> tuple:
    """The views with every `opencv` / `fisheye` one resampled to a pinhole camera (module
    docstring); one warning at `where` (the cameras file) says what was done: per camera the new
    size and K, the share of the field of view kept, and the pixels without a source pixel.
    labels: a name for each view's camera ('camera 3 OPENCV'); views of one label and equal
    intrinsics are one camera (without labels: equal intrinsics). A new size over `max_pixels`
    is a DataError."""
    views = tuple(views)
    groups: dict[tuple, list[int]] = {}
    for i, v in enumerate(views):
        if v.model in LENS_MODELS:
            groups.setdefault((_key(v), None if labels is None else labels[i]), []).append(i)
    if not groups:
        warn_data(where, "--undistort: every camera is a pinhole already; the images are used "
                  "as they are", stacklevel=2)  # fmt: skip
        return views
    cams = {key: _camera(views[idx[0]]) for key, idx in groups.items()}
    scales = {key: crop_scales(cam) for key, cam in cams.items()}
    shared = _shared_sizes(groups, scales)
    out, done = list(views), []
    for key, idx in groups.items():
        cam, size = cams[key], shared[key[0][:2]]
        label = key[1] or f"the {cam.model} camera of {views[idx[0]].name}"
        if max_pixels is not None and size[0] * size[1] > max_pixels:
            raise DataError(where, f"{label}: undistorted it would be {size[0]}x{size[1]}, "
                            f"over {max_pixels:,} pixels")  # fmt: skip
        u = undistort_camera(cam, size)
        taps = bilinear_taps(u.source, cam.width, cam.height)
        for i in idx:
            v = views[i]
            alpha = None if v.alpha is None else resample(v.alpha, taps)
            out[i] = dataclasses.replace(
                v, image=resample(v.image, taps), alpha=alpha, K=u.K.astype(np.float32),
                width=size[0], height=size[1], model="pinhole",
                dist=np.zeros_like(np.asarray(v.dist, np.float32)),
            )  # fmt: skip
        done.append(_Done(label, (cam.width, cam.height), len(idx), u.K, size, u.kept,
                          int(u.blank.sum())))  # fmt: skip
    n = sum(len(idx) for idx in groups.values())
    warn_data(where, f"--undistort: {n} view{'s' * (n > 1)} resampled to pinhole cameras as "
              "COLMAP's image_undistorter does (focal lengths kept, the largest crop whose "
              "pixels all see the distorted image, one size for cameras of one size, bilinear "
              f"sampling): {_report(done)}", stacklevel=2)  # fmt: skip
    return tuple(out)
