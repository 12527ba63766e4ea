"""The NeRF-synthetic (Blender) format: `transforms_{split}.json` with camera-to-world poses in
OpenGL axes, images beside it, an optional `points3d.ply`. Every frame and image header is checked
before any image is decoded; a malformed file raises `DataError(path, problem)` naming it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import numpy as np

from ..errors import DataError
from .datasets import (
    Dataset,
    View,
    as_float32,
    check_downscale,
    check_memory,
    image_header,
    path_inside,
    read_image,
    scale_K,
    scaled_size,
    to_view_image,
)
from .files import require_file
from .ply import load_points_ply

__all__ = ["load_blender", "load_blender_splits"]


def _opengl_c2w_to_viewmat(c2w: np.ndarray) -> np.ndarray:
    """Camera-to-world in OpenGL/Blender axes (+y up, -z forward) -> world->camera OpenCV."""
    c2w = np.array(c2w, dtype=np.float64)
    c2w[:3, 1:3] *= -1.0  # flip the camera's y and z axes
    return np.linalg.inv(c2w)


def _unique_keys(pairs: list) -> dict:
    """A JSON object whose keys differ (json keeps the last of two without a word)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {twice!r} appears twice in one object")
    return out


def _read_json(path: Path) -> dict:
    require_file(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_unique_keys)
    except RecursionError:
        raise DataError(path, "invalid JSON: nested too deeply") from None
    except json.JSONDecodeError as e:
        raise DataError(
            path, f"invalid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        ) from None
    except UnicodeDecodeError:
        raise DataError(path, "invalid JSON: not UTF-8 text") from None
    except ValueError as e:  # a key twice; an integer of more than 4300 digits
        raise DataError(path, f"invalid JSON: {e}") from None
    if not isinstance(data, dict):
        raise DataError(path, "invalid transforms file: the top level must be an object")
    return data


def _shown(value) -> str:
    """repr(value), cut to 40 characters (a JSON integer may have 4300 digits)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_number(value) -> bool:
    """A finite JSON number: int or float, not bool, not beyond float64 (10**400)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _number(path: Path, obj: dict, key: str, where: str) -> float:
    value = obj[key]
    if not _is_number(value):
        raise DataError(path, f"{where}'{key}' must be a finite number, got {_shown(value)}")
    return float(value)


def _angle(path: Path, obj: dict, key: str, where: str) -> float:
    """A field of view in radians, in (0, pi)."""
    angle = _number(path, obj, key, where)
    if not 0.0 < angle < math.pi:
        raise DataError(path, f"{where}'{key}' must be in (0, pi), got {angle}")
    return angle


def _positive(path: Path, obj: dict, key: str, where: str) -> float:
    value = _number(path, obj, key, where)
    if not value >= float(np.finfo(np.float32).smallest_subnormal):  # 1e-320 is 0 in float32
        problem = "must be positive" if value <= 0 else "is below the float32 range"
        raise DataError(path, f"{where}'{key}' {problem}, got {value}")
    return value


def _blender_image_path(root: Path, file_path: str, path: Path, where: str) -> Path:
    p = path_inside(root, file_path, path, f"{where}'file_path'")
    if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".exr", ".webp", ".tif", ".tiff"):
        return p
    return p.with_name(p.name + ".png")  # NeRF-synthetic leaves out the extension


@dataclasses.dataclass(frozen=True)
class _Frame:
    """A checked Blender frame before its image is decoded: c2w [4, 4], K [3, 3] (full size)."""

    name: str
    image: Path
    c2w: np.ndarray
    K: np.ndarray
    size: tuple[int, int, int]  # width, height, channels, from the image header


def _blender_pose(path: Path, frame: dict, where: str) -> np.ndarray:
    """The frame's camera-to-world [4, 4], checked to be a pose."""
    if "transform_matrix" not in frame:
        raise DataError(path, f"{where}missing 'transform_matrix'")
    rows = frame["transform_matrix"]
    ok = (
        isinstance(rows, list)
        and len(rows) == 4
        and all(isinstance(r, list) and len(r) == 4 and all(_is_number(v) for v in r) for r in rows)
    )  # numpy would also take '1.5', true, 10**400 (inf)
    c2w = np.asarray(rows, dtype=np.float64) if ok else np.zeros(0)
    if c2w.shape != (4, 4) or not np.isfinite(c2w).all():
        raise DataError(path, f"{where}'transform_matrix' must be a 4x4 matrix of numbers")
    if np.abs(c2w[3] - (0.0, 0.0, 0.0, 1.0)).max() > 1e-6:  # it would skew the inverse
        raise DataError(
            path, f"{where}'transform_matrix' is not a pose (its last row is not 0 0 0 1)"
        )
    if abs(np.linalg.det(c2w[:3, :3])) < 1e-8:
        raise DataError(path, f"{where}'transform_matrix' is singular")
    R = c2w[:3, :3]
    if np.abs(R @ R.T - np.eye(3)).max() > 1e-3 or np.linalg.det(R) < 0:
        raise DataError(
            path, f"{where}'transform_matrix' is not a pose (its 3x3 part is not a rotation)"
        )
    return c2w


def _blender_K(path: Path, get: dict, W: int, H: int, where: str) -> np.ndarray:
    """Intrinsics [3, 3] from fl_x/fl_y or camera_angle_x/y, and cx/cy (per frame or top)."""
    if "fl_x" in get:
        fx = _positive(path, get, "fl_x", where)
        fy = _positive(path, get, "fl_y", where) if "fl_y" in get else fx
    else:
        fx = fy = 0.5 * W / math.tan(0.5 * _angle(path, get, "camera_angle_x", where))
        if "fl_y" in get:  # a vertical focal length beside camera_angle_x
            fy = _positive(path, get, "fl_y", where)
        elif "camera_angle_y" in get:
            fy = 0.5 * H / math.tan(0.5 * _angle(path, get, "camera_angle_y", where))
    cx = _number(path, get, "cx", where) if "cx" in get else 0.5 * W
    cy = _number(path, get, "cy", where) if "cy" in get else 0.5 * H
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def _blender_frames(root: Path, path: Path, meta: dict) -> list[_Frame]:
    """Every frame checked, its image size read from the header; no image is decoded."""
    frames = meta.get("frames")
    if not isinstance(frames, list):
        raise DataError(path, "missing 'frames' list")
    if not frames:
        raise DataError(path, "'frames' is empty")
    if "camera_angle_x" not in meta and "fl_x" not in meta:
        if not all(isinstance(f, dict) and "fl_x" in f for f in frames):
            raise DataError(path, "missing 'camera_angle_x' (or 'fl_x')")
    out = []
    first: tuple[str, int, int] | None = None  # name and size that later images must match
    for i, frame in enumerate(frames):
        where = f"frame {i}: "
        if not isinstance(frame, dict):
            raise DataError(path, f"{where}expected an object")
        if not isinstance(frame.get("file_path"), str):
            raise DataError(path, f"{where}missing 'file_path'")
        c2w = _blender_pose(path, frame, where)
        img_path = _blender_image_path(root, frame["file_path"], path, where)
        W, H, channels = image_header(img_path, f"{path.name} frame {i}")
        get = {**meta, **frame}  # per-frame keys override the top level
        if ("w" in get) != ("h" in get):
            raise DataError(path, f"{where}'{'wh'['h' in get]}' without '{'hw'['h' in get]}'")
        if "w" in get:
            want = (round(_number(path, get, "w", where)), round(_number(path, get, "h", where)))
            if (W, H) != want:
                raise DataError(
                    img_path, f"image is {W}x{H}, but {path.name} says {want[0]}x{want[1]}"
                )
        elif first is None:
            first = (img_path.name, W, H)
        elif (W, H) != first[1:]:
            raise DataError(
                img_path,
                f"image is {W}x{H}, but {first[0]} is {first[1]}x{first[2]}; "
                "all images of a split must have one size",
            )
        K = _blender_K(path, get, W, H, where)
        out.append(_Frame(frame["file_path"], img_path, c2w, K, (W, H, channels)))
    return out


def load_blender(root, split: str = "train", background=(1.0, 1.0, 1.0), downscale=1) -> Dataset:
    """Load `ROOT/transforms_{split}.json` (NeRF-synthetic format).

    Intrinsics come from `camera_angle_x` (fx = fy, centred principal point; `camera_angle_y`
    or `fl_y` beside it set fy), or from `fl_x`/`fl_y`/`cx`/`cy` when present (instant-ngp
    style, top level or per frame).
    RGBA images are composited on `background` (RGB in [0, 1]). `downscale` >= 1 resizes the
    images and scales K. `ROOT/points3d.ply`, when present, gives the initial point cloud.
    Every frame and image header is checked, and the memory the images need, before any image
    is decoded.
    """
    root = Path(root)
    downscale = check_downscale(downscale)
    path = root / f"transforms_{split}.json"
    frames = _blender_frames(root, path, _read_json(path))
    check_memory(path, [f.size for f in frames], downscale)
    return _blender_views(root, path, frames, background, downscale)


def _blender_views(root: Path, path: Path, frames: list[_Frame], background, downscale):
    """The Dataset of checked `frames` of `path`: the images are decoded here."""
    views = []
    for i, f in enumerate(frames):
        where = f"frame {i}: "
        img = read_image(f.image, f"{path.name} frame {i}")
        W, H = img.size
        size = scaled_size(W, H, downscale)
        image, alpha = to_view_image(img, size, background)
        views.append(
            View(
                name=f.name,
                image=image,
                alpha=alpha,
                viewmat=as_float32(path, _opengl_c2w_to_viewmat(f.c2w), f"{where}the view matrix"),
                K=as_float32(
                    path, scale_K(f.K, size[0] / W, size[1] / H), f"{where}the intrinsics"
                ),
                width=size[0],
                height=size[1],
            )
        )

    points = colors = None
    if os.path.lexists(root / "points3d.ply"):  # a directory or a link loop is an error
        points, colors = load_points_ply(root / "points3d.ply")
    return Dataset(tuple(views), points, colors, root)


def load_blender_splits(root: Path, test: str, background, downscale) -> tuple[Dataset, Dataset]:
    """(train, test) from `ROOT/transforms_train.json` and `transforms_{test}.json`; the memory
    both splits' images need is checked before any is decoded."""
    downscale = check_downscale(downscale)
    paths = [root / f"transforms_{split}.json" for split in ("train", test)]
    frames = [_blender_frames(root, path, _read_json(path)) for path in paths]
    check_memory(root, [f.size for split in frames for f in split], downscale)  # both splits
    train, test_set = (_blender_views(root, p, f, background, downscale)
                       for p, f in zip(paths, frames, strict=True))  # fmt: skip
    return train, test_set
