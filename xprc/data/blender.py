"""The NeRF-synthetic (Blender) format: `transforms_{split}.json` with camera-to-world poses in
OpenGL axes, images beside it, an optional `points3d.ply`. Every frame and image header is checked
before any image is decoded; a malformed file raises `DataError(path, problem)` naming it.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np

from ..conventions import NUM_DIST
from ..errors import DataError, cut_to, printable, warn_data
from .datasets import (
    Dataset,
    View,
    as_float32,
    check_camera_distance,
    check_downscale,
    check_memory,
    image_header,
    path_inside,
    read_image,
    scale_K,
    scaled_size,
    shown,
    to_view_image,
    warn_implausible_cameras,
    warn_links_out,
    warn_narrowed,
)
from .files import json_object, require_file
from .ply import load_points_ply

__all__ = ["load_blender", "load_blender_splits"]


def _opengl_c2w_to_viewmat(c2w: np.ndarray) -> np.ndarray:
    """Camera-to-world in OpenGL/Blender axes (+y up, -z forward) -> world->camera OpenCV."""
    c2w = np.array(c2w, dtype=np.float64)
    c2w[:3, 1:3] *= -1.0  # flip the camera's y and z axes
    return np.linalg.inv(c2w)


def _read_json(path: Path) -> dict:
    require_file(path)
    return json_object(path, path.read_bytes(), "transforms file")


def _shown(value) -> str:
    """repr(value), cut to 40 characters (a JSON integer may have 4300 digits)."""
    return cut_to(repr(value), 40)


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
    model: str  # xprc's camera model
    dist: np.ndarray  # [NUM_DIST] lens coefficients for `model`
    unused: str | None  # a field of view the file gives beside the focal length used, if it differs


def _blender_pose(path: Path, frame: dict, where: str) -> np.ndarray:
    """The frame's camera-to-world [4, 4], checked to be a pose whose camera (its translation)
    is within MAX_CAMERA_DISTANCE of the origin."""
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
    camera = f"{where}the camera of '{printable(frame['file_path'])}'"
    check_camera_distance(path, camera, c2w[:3, 3], f"'transform_matrix' translation "
                          f"{shown(c2w[:3, 3])}")  # fmt: skip
    return c2w


def _blender_K(path: Path, get: dict, W: int, H: int, where: str) -> tuple[np.ndarray, str | None]:
    """Intrinsics [3, 3] from fl_x/fl_y or camera_angle_x/y, and cx/cy (per frame or top), and
    None, or what a `camera_angle_x/y` beside them implies when it differs from the focal length
    used (fl_x/fl_y win, as in instant-ngp)."""
    from_angle = {  # focal lengths the fields of view imply
        a: 0.5 * size / math.tan(0.5 * _angle(path, get, f"camera_angle_{a}", where))
        for a, size in (("x", W), ("y", H))
        if f"camera_angle_{a}" in get
    }
    if "fl_x" in get:
        fx, x_from = _positive(path, get, "fl_x", where), "fl_x"
    else:
        fx, x_from = from_angle["x"], "camera_angle_x"
    if "fl_y" in get:
        fy, y_from = _positive(path, get, "fl_y", where), "fl_y"
    elif "fl_x" not in get and "y" in from_angle:
        fy, y_from = from_angle["y"], "camera_angle_y"
    else:
        fy, y_from = fx, x_from
    unused = None
    for a, f, f_from in (("x", fx, x_from), ("y", fy, y_from)):
        if a in from_angle and abs(from_angle[a] - f) > 1e-4 * f:
            unused = (f"'camera_angle_{a}' gives f{a} = {from_angle[a]:.6g}, but '{f_from}' "
                      f"(f{a} = {f:.6g}) is used")  # fmt: skip
            break
    cx = _number(path, get, "cx", where) if "cx" in get else 0.5 * W
    cy = _number(path, get, "cy", where) if "cy" in get else 0.5 * H
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]]), unused


_LENS_KEYS = ("k1", "k2", "k3", "k4", "p1", "p2")  # nerfstudio's and instant-ngp's names
# nerfstudio's camera models xprc follows, and the coefficients each cannot take
_LENS_REFUSED = {"OPENCV": ("k4",), "OPENCV_FISHEYE": ("p1", "p2"), "PINHOLE": _LENS_KEYS,
                 "SIMPLE_PINHOLE": _LENS_KEYS, "SIMPLE_RADIAL": ("k2", "k3", "k4", "p1", "p2"),
                 "RADIAL": ("k3", "k4", "p1", "p2")}  # fmt: skip


def _blender_lens(path: Path, get: dict, where: str) -> tuple[str, np.ndarray]:
    """xprc's camera model and dist [NUM_DIST] from nerfstudio's `camera_model` and
    `k1 k2 k3 k4 p1 p2` (per frame or top; no `camera_model` means OPENCV, as in nerfstudio).
    OPENCV there is radial k1..k4 (a polynomial in r^2 .. r^8) and tangential p1 p2: ours holds
    k1 k2 k3 p1 p2 (its k4 is OpenCV's rational term, not r^8, so a k4 is refused).
    OPENCV_FISHEYE is the equidistant k1..k4, which our `fisheye` is."""
    if get.get("is_fisheye"):  # instant-ngp's flag
        raise DataError(path, f"{where}'is_fisheye' is not supported (give camera_model "
                        "OPENCV_FISHEYE and k1..k4 instead)")  # fmt: skip
    coef = {k: _number(path, get, k, where) for k in _LENS_KEYS if k in get}
    name = get.get("camera_model", "OPENCV")
    if not isinstance(name, str):
        raise DataError(path, f"{where}'camera_model' must be a string, got {_shown(name)}")
    if name not in _LENS_REFUSED:
        raise DataError(path, f"{where}'camera_model' {_shown(name)} is not supported "
                        f"(supported: {', '.join(_LENS_REFUSED)})")  # fmt: skip
    bad = next((k for k in _LENS_REFUSED[name] if coef.get(k)), None)
    if bad is not None:
        why = "has no distortion" if "PINHOLE" in name else "xprc's lens models cannot represent it"
        raise DataError(path, f"{where}'{bad}' = {coef[bad]} is not supported with camera_model "
                        f"{name} ({why})")  # fmt: skip
    dist = np.zeros(NUM_DIST)
    if name == "OPENCV_FISHEYE":
        dist[:4] = [coef.get(k, 0.0) for k in ("k1", "k2", "k3", "k4")]
        return "fisheye", dist
    dist[[0, 1, 2, 6, 7]] = [coef.get(k, 0.0) for k in ("k1", "k2", "k3", "p1", "p2")]
    return ("opencv" if dist.any() else "pinhole"), dist


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
        K, unused = _blender_K(path, get, W, H, where)
        model, dist = _blender_lens(path, get, where)
        out.append(
            _Frame(frame["file_path"], img_path, c2w, K, (W, H, channels), model, dist, unused)
        )
    _repeated_images(path, out)
    return out


def _warn_shared_images(paths: list[Path], frames: list[list[_Frame]]) -> None:
    """One warning when test frames list images the training frames list too: the test
    metrics would then not be held out (it loads: evaluating on training views can be meant)."""
    train = {os.path.realpath(f.image): i for i, f in enumerate(frames[0])}
    shared = [(i, train[real]) for i, f in enumerate(frames[1])
              if (real := os.path.realpath(f.image)) in train]  # fmt: skip
    if shared:
        i, j = shared[0]
        warn_data(paths[1], f"{len(shared)} of {len(frames[1])} test frames list images the "
                  f"training frames list too (first: frame {i} '{printable(frames[1][i].name)}'"
                  f" is {paths[0].name} frame {j} '{printable(frames[0][j].name)}'): the test "
                  "metrics are not held out", stacklevel=3)  # fmt: skip


def _repeated_images(path: Path, frames: list[_Frame]) -> None:
    """Two frames that list one image file (one name twice, or two names of it: './r_1' and
    'r_1.png', 'x/../r_1', a link) are an error, as in a COLMAP model: two views of one image,
    with two poses, and the image trained on twice as often."""
    seen: dict[str, int] = {}
    for i, f in enumerate(frames):
        real = os.path.realpath(f.image)  # (resolve() raises on a link loop; realpath does not)
        j = seen.setdefault(real, i)
        if j != i:
            raise DataError(path, f"frames {j} ('{printable(frames[j].name)}') and {i} "
                            f"('{printable(f.name)}') list one file, {printable(real)}: two "
                            "views of one image")  # fmt: skip


def load_blender(root, split: str = "train", background=(1.0, 1.0, 1.0), downscale=1) -> Dataset:
    """Load `ROOT/transforms_{split}.json` (NeRF-synthetic format).

    Intrinsics come from `camera_angle_x` (fx = fy, centred principal point; `camera_angle_y`
    or `fl_y` beside it set fy), or from `fl_x`/`fl_y`/`cx`/`cy` when present (instant-ngp
    style, top level or per frame); a `camera_angle_x/y` that implies another focal length than
    the one used is a RuntimeWarning. The lens: nerfstudio's `camera_model` (OPENCV, the
    default, OPENCV_FISHEYE, PINHOLE, SIMPLE_RADIAL, RADIAL) with `k1 k2 k3 k4 p1 p2`, one model
    for the split; what xprc's models cannot represent is a DataError.
    RGBA images are composited on `background` (RGB in [0, 1]). `downscale` >= 1 resizes the
    images and scales K. `ROOT/points3d.ply`, when present, gives the initial point cloud.
    Every frame and image header is checked, and the memory the images need, before any image
    is decoded.
    """
    root = Path(root)
    downscale = check_downscale(downscale)
    path = root / f"transforms_{split}.json"
    frames = _one_lens_model(_blender_frames(root, path, _read_json(path)))
    check_memory(path, [f.size for f in frames], downscale)
    return _blender_views(root, path, frames, background, downscale)


def _one_lens_model(frames: list[_Frame]) -> list[_Frame]:
    """One camera model for the split (its cameras are stacked): a frame without distortion is
    an `opencv` camera with zero coefficients when another frame has some."""
    if any(f.model == "opencv" for f in frames):
        return [dataclasses.replace(f, model="opencv") if f.model == "pinhole" else f
                for f in frames]  # fmt: skip
    return frames


def _blender_views(root: Path, path: Path, frames: list[_Frame], background, downscale):
    """The Dataset of checked `frames` of `path`: the images are decoded here."""
    views = []
    narrowed: list[Path] = []  # 16-bit colour images read at 8 bits
    for i, f in enumerate(frames):
        where = f"frame {i}: "
        img = read_image(f.image, f"{path.name} frame {i}", narrowed)
        W, H = img.size
        size = scaled_size(W, H, downscale, f.image)
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
                model=f.model,
                dist=as_float32(path, f.dist, f"{where}the lens coefficients"),
            )
        )

    points = colors = None
    if os.path.lexists(root / "points3d.ply"):  # a directory or a link loop is an error
        points, colors = load_points_ply(root / "points3d.ply")
    differ = [i for i, f in enumerate(frames) if f.unused is not None]
    if differ:
        warn_data(path, f"{len(differ)} of {len(frames)} frames: frame {differ[0]}: "
                  f"{frames[differ[0]].unused}", stacklevel=3)  # fmt: skip
    warn_narrowed(path, narrowed, len(views))
    warn_implausible_cameras(path, views)
    read = [path, *(f.image for f in frames)]
    warn_links_out(root, read + ([root / "points3d.ply"] if points is not None else []), 3)
    return Dataset(tuple(views), points, colors, root)


def load_blender_splits(root: Path, test: str, background, downscale) -> tuple[Dataset, Dataset]:
    """(train, test) from `ROOT/transforms_train.json` and `transforms_{test}.json`; the memory
    both splits' images need is checked before any is decoded."""
    downscale = check_downscale(downscale)
    paths = [root / f"transforms_{split}.json" for split in ("train", test)]
    frames = [_blender_frames(root, path, _read_json(path)) for path in paths]
    _warn_shared_images(paths, frames)
    check_memory(root, [f.size for split in frames for f in split], downscale)  # both splits
    train, test_set = (_blender_views(root, p, f, background, downscale)
                       for p, f in zip(paths, frames, strict=True))  # fmt: skip
    return train, test_set
