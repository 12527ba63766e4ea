"""A full-scale benchmark capture, generated: the scene of `capture_scene` ray traced from a loop
of cameras and written as a COLMAP model in the Mip-NeRF 360 layout.

`generate_capture(out)` writes

    out/sparse/0/cameras.bin, images.bin, points3D.bin   our own writer (`colmap_write`)
    out/images_4/view_000.jpg, ...                        the views (JPEG, quality 95)
    out/images/view_000.jpg, ...                          only with full_size=True
    out/capture.json                                      the parameters (the cache key), timings

The camera in cameras.bin is one PINHOLE camera at the full size, 4 x `size`, as in the
Mip-NeRF 360 scenes, whose `images_4` holds the photos shrunk 4 times; `xprc train --images
images_4` (or `--downscale 4`) trains on them. By default only `images_4/` is written, ray
traced at `size` with `aa x aa` rays a pixel: the full-size images (about 5200 x 3360 for the
default size) would take 16 times as long to trace and about 2 GB of disk, and training at
that size does not fit one accelerator. `full_size=True` traces them (at `aa` 1) and makes
`images_4/` by shrinking them with a box filter, as the real layout was made (a view's buffers
then take about 1 GB a process; at `size` about 60 MB: rays are traced in bands of BAND_ROWS
rows, and only the finished image and each pixel's first hit are kept).

The sparse model is SfM-like: `points` surface points seen by the views (about the same number
from each view, anywhere a ray hits: objects, ground, the distant wall), each with the colour
of its pixel, moved by Gaussian noise of `noise` x its depth, and a fraction `outliers` of them
put at a wrong depth along their ray (SfM's mistriangulations: they still reproject onto their
keypoint). Each point's track is the one view it was sampled from (real SfM tracks are longer;
xprc's reader does not use tracks), and that image's keypoints list it.

Deterministic for a seed: the same parameters give the same bytes. `capture.json` records the
parameters; a folder that holds a capture of the same parameters is reused as it is, and one
that holds anything else is refused. The capture is written to a temporary sibling and renamed
into place, so an interrupted run leaves no half capture (an empty folder given, as `--out .`,
gets its entries moved in, capture.json last: a part-filled one is refused, not reused).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import multiprocessing
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

from ..errors import DataError, XprError
from .capture_scene import CAMERA_RING, SKY, scene
from .colmap_write import ImageRecord, rotmat_to_qvec, write_colmap_model
from .datasets import MAX_IMAGE_PIXELS
from .demo_scene import _look_at_opencv

__all__ = ["CaptureParams", "default_capture_dir", "generate_capture"]

FORMAT = "xprc-capture-1"  # bumped whenever the same parameters would give other bytes
SHRINK = 4  # images_4: the views at 1/4 of the camera's size
BAND_ROWS = 64  # rays are traced in bands of this many image rows (bounds the memory)
INFO = "capture.json"
MAX_PIXELS = 1 << 24  # images_4 of a capture (16M pixels); --full-size: 16 times that, under
# MAX_IMAGE_PIXELS, which the loaders refuse above


class CaptureParamsError(XprError, ValueError):
    """Capture parameters out of their ranges (a ValueError too, as it was before)."""


def size_problem(size: tuple[int, int], full_size: bool) -> str | None:
    """Why images_4 of `size` (with `full_size`: also images/ at 4 times each side) cannot be
    made, or None: the one check of the size, used by CaptureParams and `xprc capture`."""
    w, h = size
    if w < 8 or h < 8 or w * h > MAX_PIXELS:
        return (f"size {w}x{h}: each side must be at least 8 and the image at most "
                f"{MAX_PIXELS:,} pixels")  # fmt: skip
    big = w * h * SHRINK * SHRINK
    if full_size and big > MAX_IMAGE_PIXELS:
        return (f"size {w}x{h} with full_size: images/ would have {big:,} pixels, over the "
                f"{MAX_IMAGE_PIXELS:,} that xprc's loaders read")  # fmt: skip
    return None


@dataclasses.dataclass(frozen=True)
class CaptureParams:
    """What a capture is made of (each is in `capture.json`; any change makes another one).

    views: cameras on the loop; size: (width, height) of `images_4`; fov_x_deg: horizontal
    field of view; objects: shapes in the scene; points: sparse points; noise: their
    position noise as a fraction of the depth; outliers: the fraction at a wrong depth; aa:
    rays a pixel per side; full_size: also trace `images/` at 4 x size; quality: JPEG quality.
    """

    views: int = 150
    size: tuple[int, int] = (1296, 840)
    seed: int = 0
    fov_x_deg: float = 66.0
    objects: int = 90
    points: int = 150_000
    noise: float = 0.002
    outliers: float = 0.03
    aa: int = 1
    full_size: bool = False
    quality: int = 95

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", tuple(int(s) for s in self.size))
        size = size_problem(self.size, self.full_size)
        problems = [
            (self.views >= 2, "views must be at least 2"),
            (size is None, size),
            (0 < self.fov_x_deg < 170, "fov_x_deg must be in (0, 170)"),
            (self.objects >= 0, "objects must be >= 0"),
            (self.points >= 0, "points must be >= 0"),
            (0 <= self.noise < 1 and 0 <= self.outliers <= 1, "noise and outliers in [0, 1)"),
            (1 <= self.aa <= 8, "aa must be 1 to 8"),
            (1 <= self.quality <= 100, "quality must be 1 to 100"),
        ]
        for ok, message in problems:
            if not ok:
                raise CaptureParamsError(f"capture: {message}")

    def record(self) -> dict:
        return {"format": FORMAT, **dataclasses.asdict(self), "size": list(self.size)}

    def key(self) -> str:
        """A short name for the parameters: views, size, seed and a hash of the rest."""
        digest = hashlib.sha256(json.dumps(self.record(), sort_keys=True).encode()).hexdigest()
        return f"capture-{self.views}v-{self.size[0]}x{self.size[1]}-s{self.seed}-{digest[:8]}"


def default_capture_dir(params: CaptureParams) -> Path:
    """$XDG_CACHE_HOME/xprc/captures/KEY, or ~/.cache/xprc/captures/KEY."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = str(Path.home() / ".cache")
    return Path(base) / "xprc" / "captures" / params.key()


def scene_key(params: CaptureParams) -> tuple[int, int, float]:
    """(seed, objects, detail) of the capture's scene: texture detail follows the width traced
    (full_size: 4 x size), relative to 1296 pixels."""
    traced = params.size[0] * (SHRINK if params.full_size else 1)
    return params.seed, params.objects, min(1.0, traced / 1296.0)


# --------------------------------------------------------------------------- cameras


def camera_poses(params: CaptureParams) -> list[np.ndarray]:
    """Camera-to-world [4, 4] (OpenCV axes) of each view: a loop around the centre at radius
    CAMERA_RING, height 1.3 to 2.1, each aimed near (0, 0, 0.5), in loop order."""
    rng = np.random.default_rng([params.seed, 2])
    n = params.views
    az = 2 * np.pi * (np.arange(n) + rng.uniform(-0.3, 0.3, n)) / n
    radius = CAMERA_RING + rng.uniform(-0.25, 0.25, n)
    height = 1.7 + 0.4 * np.sin(3 * az) + rng.uniform(-0.1, 0.1, n)
    out = []
    for k in range(n):
        pos = np.array([radius[k] * np.cos(az[k]), radius[k] * np.sin(az[k]), height[k]])
        target = np.array([0.0, 0.0, 0.5]) + rng.uniform(-0.3, 0.3, 3) * [1, 1, 0.5]
        out.append(_look_at_opencv(pos, target))
    return out


def _span(a: float, z: float, r: float) -> tuple[float, float]:
    """The range of a' / z' over [a - r, a + r] x [z - r, z + r] (z - r > 0): its corners."""
    lo = (a - r) / (z - r) if a - r < 0 else (a - r) / (z + r)
    hi = (a + r) / (z - r) if a + r > 0 else (a + r) / (z + r)
    return lo, hi


def _boxes(shapes, viewmat, fx, cx, cy, width, height):
    """Each shape's conservative pixel box (row0, row1, col0, col1) in a view, None when it is
    behind the camera or outside the image: the box of its bounding sphere's projection (the
    extremes of x/z and y/z over the sphere's bounding box in camera space)."""
    out = []
    for shape in shapes:
        centre, r = shape.bound
        x, y, z = viewmat[:3, :3] @ centre + viewmat[:3, 3]
        if z + r <= 1e-6:
            out.append(None)
            continue
        if z - r <= 1e-3:  # the sphere reaches the camera's plane: it may cover anything
            out.append((0, height, 0, width))
            continue

        (xl, xh), (yl, yh) = _span(x, z, r), _span(y, z, r)
        c0, c1 = max(0, math.floor(fx * xl + cx) - 1), min(width, math.ceil(fx * xh + cx) + 1)
        r0, r1 = max(0, math.floor(fx * yl + cy) - 1), min(height, math.ceil(fx * yh + cy) + 1)
        out.append((r0, r1, c0, c1) if c0 < c1 and r0 < r1 else None)
    return out


def render_view(params: CaptureParams, c2w: np.ndarray, width: int, height: int, aa: int):
    """Trace one view at width x height -> (rgb [H, W, 3] float32, the first ray of each pixel:
    id [H, W] int, t [H, W] float64, direction [H, W, 3])."""
    sc = scene(*scene_key(params))
    fx = 0.5 * width / math.tan(math.radians(params.fov_x_deg) / 2)
    cx, cy = 0.5 * width, 0.5 * height
    viewmat = np.linalg.inv(c2w)
    boxes = _boxes(sc.shapes, viewmat, fx, cx, cy, width, height)
    rgb = np.zeros((height, width, 3), np.float32)
    ids = np.empty((height, width), np.int64)
    ts = np.empty((height, width))
    dirs = np.empty((height, width, 3))
    offsets = (np.arange(aa) + 0.5) / aa
    o = c2w[:3, 3][None, :].astype(np.float32)
    rot = c2w[:3, :3].T.astype(np.float32)
    for b0 in range(0, height, BAND_ROWS):
        b1 = min(height, b0 + BAND_ROWS)
        band = [None if b is None or b[1] <= b0 or b[0] >= b1 else
                (max(b[0], b0) - b0, min(b[1], b1) - b0, b[2], b[3]) for b in boxes]  # fmt: skip
        cols = np.tile(np.arange(width, dtype=np.float32), b1 - b0)
        rows = np.repeat(np.arange(b0, b1, dtype=np.float32), width)
        first = True
        for oy in offsets:
            for ox in offsets:
                d_cam = np.stack([(cols + np.float32(ox - cx)) / np.float32(fx),
                                  (rows + np.float32(oy - cy)) / np.float32(fx),
                                  np.ones_like(cols)], axis=1)  # fmt: skip
                norm = np.sqrt(np.einsum("ij,ij->i", d_cam, d_cam))
                d = (d_cam / norm[:, None]) @ rot
                # a ray's share of a pixel per unit of distance along it (the pixel's side
                # z / fx at depth z = t / norm, foreshortened by 1 / norm radially only)
                foot = 1.0 / (np.float32(aa * fx) * norm**1.5)
                colour, which, t = sc.trace(o, d, b1 - b0, width, band, foot)
                rgb[b0:b1] += colour.reshape(b1 - b0, width, 3)
                if first:
                    ids[b0:b1] = which.reshape(b1 - b0, width)
                    ts[b0:b1] = t.reshape(b1 - b0, width)
                    dirs[b0:b1] = d.reshape(b1 - b0, width, 3)
                    first = False
    rgb /= np.float32(aa * aa)
    return rgb, ids, ts, dirs


def _shrink(rgb: np.ndarray, factor: int) -> np.ndarray:
    """Box-filter [H, W, 3] by `factor` (H and W multiples of it)."""
    h, w = rgb.shape[0] // factor, rgb.shape[1] // factor
    return rgb[: h * factor, : w * factor].reshape(h, factor, w, factor, 3).mean(axis=(1, 3))


def _to_uint8(rgb: np.ndarray) -> np.ndarray:
    return np.round(np.clip(rgb, 0.0, 1.0) * 255.0).astype(np.uint8)


def _view_job(args) -> dict:
    """Trace view k, write its JPEG(s) into `root` and sample its share of the points."""
    params, k, c2w, root, n_points = args
    w, h = params.size
    name = view_name(k)
    if params.full_size:
        big, ids, ts, dirs = render_view(params, c2w, w * SHRINK, h * SHRINK, 1)
        Image.fromarray(_to_uint8(big)).save(root / "images" / name, quality=params.quality)
        rgb = _shrink(big, SHRINK)
        scale = 1  # keypoints are found on the full-size image
    else:
        rgb, ids, ts, dirs = render_view(params, c2w, w, h, params.aa)
        scale = SHRINK
    small = _to_uint8(rgb)
    Image.fromarray(small).save(root / f"images_{SHRINK}" / name, quality=params.quality)
    image = _to_uint8(big) if params.full_size else small  # the pixels keypoints are on
    return {"k": k, **_sample_points(params, k, c2w, ids, ts, dirs, scale, n_points, image)}


def view_name(k: int) -> str:
    return f"view_{k:03d}.jpg"


def _sample_points(params, k, c2w, ids, ts, dirs, scale, n, image) -> dict:
    """n points seen by view k: pixels hit by the first ray (not sky), the ray's hit moved
    by noise, a fraction put at a wrong depth along the ray. -> xyz [n, 3], rgb [n, 3] uint8,
    keypoints [n, 2] at the camera's full size, error [n] (reprojection, pixels)."""
    rng = np.random.default_rng([params.seed, 3, k])
    h, w = ids.shape
    hits = np.flatnonzero(ids.ravel() != SKY)
    pick = np.sort(rng.choice(hits, size=min(n, len(hits)), replace=False))
    rows, cols = np.divmod(pick, w)
    t = ts.ravel()[pick]
    wrong = rng.uniform(size=len(pick)) < params.outliers
    t = np.where(wrong, t * rng.uniform(0.5, 1.7, len(pick)), t)
    d = dirs.reshape(-1, 3)[pick]
    jitter = rng.normal(size=(len(pick), 3)) * (params.noise * t)[:, None]
    xyz = c2w[:3, 3] + t[:, None] * d + jitter
    # the first ray of a pixel (aa 1: its centre) -> COLMAP's coordinates at the full size
    first = 0.5 / (1 if params.full_size else params.aa)
    kp = np.stack([cols + first, rows + first], axis=1) * scale
    full_w, full_h = w * scale, h * scale
    fx_full = 0.5 * full_w / math.tan(math.radians(params.fov_x_deg) / 2)
    viewmat = np.linalg.inv(c2w)
    cam = xyz @ viewmat[:3, :3].T + viewmat[:3, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        proj = fx_full * cam[:, :2] / cam[:, 2:3] + [0.5 * full_w, 0.5 * full_h]
    error = np.linalg.norm(proj - kp, axis=1)
    error = np.where(np.isfinite(error), error, 1e3)
    colour = image[rows, cols]
    return {"xyz": xyz, "rgb": colour, "keypoints": kp, "error": error}


def _read_info(out: Path) -> dict | None:
    try:
        info = json.loads((out / INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _complete(out: Path, params: CaptureParams) -> bool:
    """Whether `out` holds a whole capture of `params` (capture.json says so, and every file
    it lists is there)."""
    info = _read_info(out)
    if info is None or info.get("params") != params.record():
        return False
    names = [f"images_{SHRINK}/{view_name(k)}" for k in range(params.views)]
    if params.full_size:
        names += [f"images/{view_name(k)}" for k in range(params.views)]
    names += [f"sparse/0/{n}" for n in ("cameras.bin", "images.bin", "points3D.bin")]
    return all((out / n).is_file() for n in names)


def generate_capture(out, params: CaptureParams | None = None, *, jobs: int = 1, log=None) -> dict:
    """Write the capture of `params` (default: CaptureParams()) to the folder `out`, or reuse
    the one there. Returns capture.json's content plus "cached": whether it was reused.

    jobs: processes tracing views at once. log: a callable for progress lines (None: quiet).
    A folder `out` that exists and holds anything but a capture of `params` is a DataError."""
    params = params or CaptureParams()
    out = Path(out).absolute()  # "." has no name to make the temporary sibling's from
    if _complete(out, params):
        return {**_read_info(out), "cached": True}
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        info = _read_info(out) if out.is_dir() else None
        what = ("a capture of other parameters (capture.json)" if info else
                "files that are not a whole capture")  # fmt: skip
        raise DataError(out, f"holds {what}: it is not replaced; give another folder, or remove "
                        "this one")  # fmt: skip
    start = time.perf_counter()
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        info = _write(tmp, params, jobs, log)
        info["seconds"] = round(time.perf_counter() - start, 1)
        (tmp / INFO).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        if out.exists():  # an empty folder (checked above), maybe the current one: filled in
            # place, not replaced (a shell in it would be left in a deleted folder); capture.json
            # last, so a folder left part-filled is refused, never taken for a capture
            for entry in sorted(tmp.iterdir(), key=lambda p: p.name == INFO):
                os.replace(entry, out / entry.name)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return {**info, "cached": False}


def _write(root: Path, params: CaptureParams, jobs: int, log) -> dict:
    w, h = params.size
    (root / f"images_{SHRINK}").mkdir(parents=True)
    if params.full_size:
        (root / "images").mkdir()
    poses = camera_poses(params)
    share = [params.points // params.views + (k < params.points % params.views)
             for k in range(params.views)]  # fmt: skip
    tasks = [(params, k, poses[k], root, share[k]) for k in range(params.views)]
    results = [None] * params.views
    t0 = time.perf_counter()
    if jobs > 1:
        # spawned, not forked: a fork of a process that runs JAX's threads can deadlock; each
        # worker builds the scene once (`scene` is cached per process)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            for done, res in enumerate(pool.map(_view_job, tasks), 1):
                results[res["k"]] = res
                _progress(log, done, params.views, t0)
    else:
        for done, task in enumerate(tasks, 1):
            res = _view_job(task)
            results[res["k"]] = res
            _progress(log, done, params.views, t0)
    images, points = _model(params, poses, results)
    full = (w * SHRINK, h * SHRINK)
    f_full = 0.5 * full[0] / math.tan(math.radians(params.fov_x_deg) / 2)
    cameras = {1: ("PINHOLE", *full, [f_full, f_full, 0.5 * full[0], 0.5 * full[1]])}
    write_colmap_model(root / "sparse" / "0", cameras, images, points)
    sc = scene(*scene_key(params))
    return {
        "params": params.record(),
        "layout": f"sparse/0 (camera at {full[0]}x{full[1]}), images_{SHRINK}/ at {w}x{h}"
        + (
            ", images/ at full size"
            if params.full_size
            else "; no images/: the full-size views were not traced (full_size=False)"
        ),  # fmt: skip
        "views": params.views,
        "points": int(len(points["xyz"])),
        "objects": len(sc.shapes),
        "trace_seconds": round(time.perf_counter() - t0, 1),
        "jobs": jobs,
    }


def _progress(log, done: int, total: int, t0: float) -> None:
    if log is not None and (done == total or done % max(1, total // 10) == 0):
        took = time.perf_counter() - t0
        log(f"traced {done}/{total} views ({took:.0f} s, {took / done:.2f} s a view)")


def _model(params: CaptureParams, poses, results) -> tuple[list, dict]:
    """The images (poses, keypoints) and points (tracks) of the traced views."""
    images, xyz, rgb, err, img_ids, idx = [], [], [], [], [], []
    next_id = 1
    for k, (c2w, res) in enumerate(zip(poses, results, strict=True)):
        n = len(res["xyz"])
        viewmat = np.linalg.inv(c2w)
        ids = np.arange(next_id, next_id + n, dtype=np.uint64)
        images.append(ImageRecord(k + 1, rotmat_to_qvec(viewmat[:3, :3]), viewmat[:3, 3], 1,
                                  view_name(k), res["keypoints"], ids))  # fmt: skip
        next_id += n
        xyz.append(res["xyz"])
        rgb.append(res["rgb"])
        err.append(res["error"])
        img_ids.append(np.full(n, k + 1, np.uint32))
        idx.append(np.arange(n, dtype=np.uint32))
    if not images:
        raise AssertionError("no views")  # (views >= 2 is checked by CaptureParams)
    points = {"xyz": np.concatenate(xyz), "rgb": np.concatenate(rgb),
              "error": np.concatenate(err), "image": np.concatenate(img_ids),
              "index": np.concatenate(idx)}  # fmt: skip
    return images, points
