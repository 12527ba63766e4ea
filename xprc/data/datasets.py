"""Multi-view datasets: the NeRF-synthetic (Blender) format and COLMAP reconstructions.

Every loader returns a `Dataset` of `View`s in our conventions (REFERENCE.md section 1):
`viewmat` world->camera with OpenCV axes, `K` in pixels with pixel centres at `(j + 0.5, i + 0.5)`,
images float32 `[H, W, 3]` in [0, 1]. A malformed or partial dataset raises
`DataError(path, problem)` naming the file at fault.

COLMAP models are read by our own small reader, `xprc.data.colmap`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from ..errors import DataError
from .colmap import (
    COLMAP_MODELS,
    camera_intrinsics,
    check_camera,
    qvec_to_rotmat,
    read_colmap_model,
)
from .colmap import find_file as _find
from .ply import load_points_ply, require_file

__all__ = [
    "COLMAP_MODELS",
    "Dataset",
    "View",
    "load_blender",
    "load_colmap",
    "load_scene",
    "read_colmap_model",
    "split_every",
]

NUM_DIST = 12  # [k1, k2, k3, k4, k5, k6, p1, p2, s1, s2, s3, s4]; fisheye k1..k4 first
TEST_EVERY = 8  # Mip-NeRF 360 convention: views 0, 8, 16, ... (sorted by name) are held out


# --------------------------------------------------------------------------- data structures


@dataclasses.dataclass(frozen=True, eq=False)
class View:
    """One posed image.

    image:   [H, W, 3] float32 in [0, 1] (RGBA already composited on the background).
    viewmat: [4, 4] float32 world->camera, OpenCV axes (+x right, +y down, +z forward).
    K:       [3, 3] float32 intrinsics in pixels.
    dist:    [12] float32 lens coefficients for `model` (see NUM_DIST).
    alpha:   [H, W] float32 coverage for RGBA sources, else None.
    """

    name: str
    image: np.ndarray
    viewmat: np.ndarray
    K: np.ndarray
    width: int
    height: int
    model: str = "pinhole"
    dist: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(NUM_DIST, np.float32))
    alpha: np.ndarray | None = None

    @property
    def position(self) -> np.ndarray:  # [3] camera centre in world, -R^T t
        R, t = self.viewmat[:3, :3].astype(np.float64), self.viewmat[:3, 3].astype(np.float64)
        return -R.T @ t

    def camera(self, dtype=np.float32):
        """This view's `xprc.camera.Camera` (arrays cast to `dtype`)."""
        from ..camera import Camera  # lazy: datasets must not need jax to import

        return Camera(
            viewmat=np.asarray(self.viewmat, dtype),
            K=np.asarray(self.K, dtype),
            width=self.width,
            height=self.height,
            model=self.model,
            dist=np.asarray(self.dist, dtype),
        )


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """Views plus an optional point cloud for initialisation.

    points: [P, 3] float32 world positions (COLMAP points3D, a Blender scene's points3d.ply).
    colors: [P, 3] float32 in [0, 1].
    """

    views: tuple[View, ...]
    points: np.ndarray | None = None
    colors: np.ndarray | None = None
    root: Path | None = None

    def __len__(self) -> int:
        return len(self.views)

    def __getitem__(self, i: int) -> View:
        return self.views[i]

    def __iter__(self) -> Iterator[View]:
        return iter(self.views)

    def subset(self, indices: Sequence[int]) -> Dataset:
        return dataclasses.replace(self, views=tuple(self.views[i] for i in indices))

    def images(self) -> np.ndarray:  # [V, H, W, 3] float32; views must share one size
        return np.stack([v.image for v in self.views])

    def cameras(self, dtype=np.float32):
        """All views as one batched `Camera` (`Camera.stack`); views must share size and model."""
        from ..camera import Camera

        return Camera.stack([v.camera(dtype) for v in self.views])

    def camera_centers(self) -> np.ndarray:  # [V, 3] float64
        return np.stack([v.position for v in self.views])

    def scene_extent(self) -> float:
        """1.1 x the largest distance of a camera centre from their mean (3DGS `radius`)."""
        c = self.camera_centers()
        return float(1.1 * np.linalg.norm(c - c.mean(axis=0), axis=1).max())


def split_every(dataset: Dataset, every: int = TEST_EVERY) -> tuple[Dataset, Dataset]:
    """(train, test): every `every`-th view (0, every, 2 every, ...) is a test view."""
    idx = range(len(dataset))
    return (
        dataset.subset([i for i in idx if i % every != 0]),
        dataset.subset([i for i in idx if i % every == 0]),
    )


# --------------------------------------------------------------------------- images


MAX_IMAGE_PIXELS = 1 << 26  # 8192 x 8192: checked from the header, before any decoding


def _read_image(path: Path, referenced_by: str) -> Image.Image:
    """An image as RGB, RGBA or 16-bit grey ('I;16'); 16-bit colour PNGs come 8-bit from
    Pillow. The pixel count is checked against MAX_IMAGE_PIXELS before decoding."""
    img = _open_image(path, referenced_by)
    with contextlib.ExitStack() as on_error:
        on_error.callback(img.close)
        try:
            img.load()
        except (OSError, SyntaxError, ValueError) as e:
            raise DataError(path, f"unreadable image ({e})") from None
        on_error.pop_all()
    if img.mode.startswith("I;16"):
        return img
    if img.mode in ("I", "F"):
        raise DataError(path, f"unsupported image mode '{img.mode}' (32-bit pixels)")
    if img.mode not in ("RGB", "RGBA"):
        img = img.convert("RGBA" if _channels(img) == 4 else "RGB")
    return img


def _channels(img: Image.Image) -> int:
    """4 for an image read as RGBA (it has alpha or a transparent colour), else 3."""
    return 4 if "A" in img.getbands() or "transparency" in img.info else 3


def _image_header(path: Path, referenced_by: str) -> tuple[int, int, int]:
    """(width, height, channels) from the header alone: nothing is decoded."""
    with _open_image(path, referenced_by) as img:
        return (*img.size, _channels(img))


def _open_image(path: Path, referenced_by: str) -> Image.Image:
    """Open, without decoding, after checking the file and the size its header claims."""
    try:
        require_file(path)
    except DataError as e:
        problem = "image file not found" if e.message == "file not found" else e.message
        raise DataError(path, f"{problem} (referenced by {referenced_by})") from None
    budget = f"the budget of {MAX_IMAGE_PIXELS:,} pixels"
    try:
        with warnings.catch_warnings():  # the budget below replaces Pillow's bomb warning
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(path)
    except Image.DecompressionBombError as e:
        raise DataError(path, f"image is over {budget} ({e})") from None
    except (OSError, SyntaxError, ValueError) as e:
        raise DataError(path, f"unreadable image ({e})") from None
    width, height = img.size
    if width * height > MAX_IMAGE_PIXELS:
        img.close()
        raise DataError(path, f"image is {width}x{height} pixels, over {budget}")
    return img


def _physical_memory() -> int | None:
    """Bytes of physical memory, or None where os.sysconf cannot tell."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _check_memory(path: Path, sizes: list[tuple[int, int, int]], downscale: float) -> None:
    """Refuse a load whose images cannot fit in memory, before decoding any: `sizes` are the
    (width, height, channels) of the images at full size; a view keeps float32 RGB plus
    alpha for RGBA. The error names the smallest integer downscale that fits."""

    def need(d: float) -> int:
        return sum(math.prod(_scaled_size(w, h, d)) * 4 * c for w, h, c in sizes)

    have = _physical_memory()
    if have is None or need(downscale) <= have:
        return

    def gib(n: int) -> str:
        unit = next(((u, k) for u, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)) if n >= 2**k),
                    ("bytes", 0))  # fmt: skip
        return f"{n / 2 ** unit[1]:.1f} {unit[0]}" if unit[1] else f"{n} bytes"

    fits = next((d for d in range(math.floor(downscale) + 1, 65) if need(d) <= have), None)
    hint = (f"downscale {fits} (--downscale {fits}) needs about {gib(need(fits))}"
            if fits else "even downscale 64 does not fit; load fewer images")  # fmt: skip
    raise DataError(
        path,
        f"the {len(sizes)} images need about {gib(need(downscale))} of memory as float32 at "
        f"downscale {downscale:g}, more than the {gib(have)} this machine has; {hint}",
    )


def _to_view_image(img: Image.Image, size: tuple[int, int], background) -> tuple:
    """Resize to `size` (Pillow premultiplies alpha when resampling), composite on background."""
    if img.mode.startswith("I;16"):  # 16-bit grey: its full range maps to [0, 1], no clipping
        grey = np.asarray(img, dtype=np.float32) / np.float32(65535.0)
        if img.size != size:
            grey = np.asarray(Image.fromarray(grey).resize(size, Image.Resampling.LANCZOS))
        rgb = np.repeat(np.clip(grey, 0.0, 1.0)[..., None], 3, axis=-1)
        return np.ascontiguousarray(rgb, dtype=np.float32), None
    if img.size != size:
        img = img.resize(size, Image.Resampling.LANCZOS)
    arr = np.asarray(img, dtype=np.float32) / np.float32(255.0)
    if arr.shape[-1] == 3:
        return np.ascontiguousarray(arr), None
    rgb, alpha = arr[..., :3], arr[..., 3]
    bg = np.asarray(background, dtype=np.float32).reshape(3)
    out = rgb * alpha[..., None] + bg * (np.float32(1.0) - alpha[..., None])
    return np.clip(out, 0.0, 1.0).astype(np.float32), alpha.astype(np.float32)


def _scaled_size(width: int, height: int, downscale: float) -> tuple[int, int]:
    if downscale == 1:
        return width, height
    return max(1, round(width / downscale)), max(1, round(height / downscale))


def _scale_K(K: np.ndarray, sx: float, sy: float) -> np.ndarray:
    # Pixel centres at +0.5 make a resize an exact scaling of fx, cx (and fy, cy).
    return np.diag([sx, sy, 1.0]) @ K


def _float32(path: Path, values: np.ndarray, what: str) -> np.ndarray:
    """float64 values as float32, which they must fit (no overflow to inf)."""
    if not np.isfinite(values).all():
        raise DataError(path, f"{what} not finite")
    if not (np.abs(values) <= np.finfo(np.float32).max).all():
        raise DataError(path, f"{what} out of float32 range")
    return values.astype(np.float32)


def _check_downscale(downscale) -> float:
    if not (isinstance(downscale, int | float) and math.isfinite(downscale) and downscale >= 1):
        raise ValueError(f"downscale must be a number >= 1, got {downscale!r}")
    return downscale


# --------------------------------------------------------------------------- Blender


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


def _inside(root: Path, relative: str, path: Path, what: str) -> Path:
    """`root / relative`, which must stay inside `root` (no absolute path, no '..' out of it):
    a dataset file names files of its own folder only."""
    if "\0" in relative:  # os.stat would raise ValueError
        raise DataError(path, f"{what} {relative!r} contains a NUL character")
    joined = os.path.normpath(root / relative)
    top = os.path.normpath(root)
    if joined == top:  # '', '.', 'a/..': no file (Blender would append '.png' to the folder)
        raise DataError(path, f"{what} {relative!r} names the dataset folder, not a file in it")
    inside = joined.startswith(top.rstrip(os.sep) + os.sep)
    if os.path.isabs(relative) or not inside:
        raise DataError(path, f"{what} {relative!r} points outside the dataset folder {root}")
    return root / relative


def _positive(path: Path, obj: dict, key: str, where: str) -> float:
    value = _number(path, obj, key, where)
    if not value >= float(np.finfo(np.float32).smallest_subnormal):  # 1e-320 is 0 in float32
        problem = "must be positive" if value <= 0 else "is below the float32 range"
        raise DataError(path, f"{where}'{key}' {problem}, got {value}")
    return value


def _blender_image_path(root: Path, file_path: str, path: Path, where: str) -> Path:
    p = _inside(root, file_path, path, f"{where}'file_path'")
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
        W, H, channels = _image_header(img_path, f"{path.name} frame {i}")
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
    downscale = _check_downscale(downscale)
    path = root / f"transforms_{split}.json"
    frames = _blender_frames(root, path, _read_json(path))
    _check_memory(path, [f.size for f in frames], downscale)
    return _blender_views(root, path, frames, background, downscale)


def _blender_views(root: Path, path: Path, frames: list[_Frame], background, downscale):
    """The Dataset of checked `frames` of `path`: the images are decoded here."""
    views = []
    for i, f in enumerate(frames):
        where = f"frame {i}: "
        img = _read_image(f.image, f"{path.name} frame {i}")
        W, H = img.size
        size = _scaled_size(W, H, downscale)
        image, alpha = _to_view_image(img, size, background)
        views.append(
            View(
                name=f.name,
                image=image,
                alpha=alpha,
                viewmat=_float32(path, _opengl_c2w_to_viewmat(f.c2w), f"{where}the view matrix"),
                K=_float32(path, _scale_K(f.K, size[0] / W, size[1] / H), f"{where}the intrinsics"),
                width=size[0],
                height=size[1],
            )
        )

    points = colors = None
    if os.path.lexists(root / "points3d.ply"):  # a directory or a link loop is an error
        points, colors = load_points_ply(root / "points3d.ply")
    return Dataset(tuple(views), points, colors, root)


# --------------------------------------------------------------------------- COLMAP


def load_colmap(
    root, downscale=1, images_dir: str = "images", background=(1.0, 1.0, 1.0)
) -> Dataset:
    """Load a COLMAP reconstruction: `ROOT/sparse/0` (or `ROOT/sparse`) and `ROOT/images_dir`.

    Views are sorted by image name; use `split_every` for the train/test split. With an integer
    `downscale` d and a folder `ROOT/{images_dir}_{d}` (the Mip-NeRF 360 layout), the
    pre-shrunk images are used; otherwise images are resized. K is scaled to the final size.
    Points are COLMAP's points3D (colours in [0, 1]).
    """
    root = Path(root)
    downscale = _check_downscale(downscale)
    sparse = root / "sparse" / "0"
    if not os.path.lexists(sparse) and (root / "sparse").is_dir():
        sparse = root / "sparse"
    cameras, images, xyz, rgb = read_colmap_model(sparse)  # sparse/0 when neither is a folder
    if not images:
        raise DataError(_find(sparse, "images"), "no registered images")
    images_file, cameras_file = _find(sparse, "images"), _find(sparse, "cameras")
    img_file = images_file.name
    for cam_id in sorted({im.camera_id for im in images.values()}):
        check_camera(cameras_file, cameras[cam_id], NUM_DIST, MAX_IMAGE_PIXELS)
    views_by_name = sorted(images.values(), key=lambda im: im.name)
    sizes = [(cameras[im.camera_id].width, cameras[im.camera_id].height, 3) for im in views_by_name]
    _check_memory(root, sizes, downscale)  # RGB: alpha is not known before decoding

    image_root = root / images_dir
    shrunk = root / f"{images_dir}_{int(downscale)}"
    pre_shrunk = downscale != 1 and float(downscale).is_integer() and shrunk.is_dir()
    if pre_shrunk:
        image_root = shrunk
    if not image_root.is_dir():
        raise DataError(image_root, "image folder not found")

    views = []
    for img in views_by_name:
        cam = cameras[img.camera_id]
        path = _inside(image_root, img.name, images_file, f"image {img.id}: name")
        pil = _read_image(path, f"{img_file}, image id {img.id}")
        size = _scaled_size(cam.width, cam.height, downscale)
        got = pil.size
        ok = (
            all(abs(g - s) <= 1 for g, s in zip(got, size, strict=True))
            if pre_shrunk
            else got == (cam.width, cam.height)
        )
        if not ok:
            want = size if pre_shrunk else (cam.width, cam.height)
            raise DataError(
                path,
                f"image is {got[0]}x{got[1]}, but camera {cam.id} expects {want[0]}x{want[1]}",
            )
        K, model, dist = camera_intrinsics(cam, NUM_DIST)
        scale = (size[0] / cam.width, size[1] / cam.height)
        viewmat = np.eye(4)
        viewmat[:3, :3] = qvec_to_rotmat(img.qvec)
        viewmat[:3, 3] = img.tvec
        image, alpha = _to_view_image(pil, size, background)
        views.append(
            View(
                name=img.name,
                image=image,
                alpha=alpha,
                viewmat=_float32(images_file, viewmat, f"image {img.id}: the pose"),
                K=_float32(cameras_file, _scale_K(K, *scale), f"camera {cam.id}: the intrinsics"),
                width=size[0],
                height=size[1],
                model=model,
                dist=_float32(cameras_file, dist, f"camera {cam.id}: the lens coefficients"),
            )
        )
    colors = (rgb.astype(np.float32) / np.float32(255.0)).reshape(-1, 3)
    points = _float32(_find(sparse, "points3D"), xyz, "point coordinates")
    return Dataset(tuple(views), points, colors, root)


# --------------------------------------------------------------------------- either format


def load_scene(
    root, background=(1.0, 1.0, 1.0), downscale=1, test_every: int = TEST_EVERY
) -> tuple[Dataset, Dataset]:
    """(train, test) from a Blender scene (transforms_train.json, then _test or _val) or a
    COLMAP scene (sparse/, every `test_every`-th view held out)."""
    root = Path(root)
    if (root / "transforms_train.json").is_file():
        test = next((s for s in ("test", "val") if (root / f"transforms_{s}.json").is_file()), None)
        if test is None:
            missing = "file not found (nor transforms_val.json)"
            raise DataError(root / "transforms_test.json", missing)
        downscale = _check_downscale(downscale)
        paths = [root / f"transforms_{split}.json" for split in ("train", test)]
        frames = [_blender_frames(root, path, _read_json(path)) for path in paths]
        _check_memory(root, [f.size for split in frames for f in split], downscale)  # both splits
        train, test_set = (_blender_views(root, p, f, background, downscale)
                           for p, f in zip(paths, frames, strict=True))  # fmt: skip
        return train, test_set
    if (root / "sparse").is_dir():
        return split_every(load_colmap(root, downscale, background=background), test_every)
    if not root.is_dir():
        problem = "not a folder" if root.exists() else "folder not found"
        raise DataError(root, f"dataset {problem}")
    raise DataError(
        root, "not a dataset: expected transforms_train.json (Blender) or sparse/ (COLMAP)"
    )
