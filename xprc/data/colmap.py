"""COLMAP sparse models: our own small reader of cameras, images and points3D (.bin and .txt).

pycolmap is a 38 MB native wheel that bundles all of COLMAP, far more than parsing three
documented files needs. Every count in a binary file is checked against the bytes left before
anything is allocated, and every malformed file raises `DataError(path, problem)`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import struct
from pathlib import Path

import numpy as np

from ..conventions import NUM_DIST
from ..errors import DataError, warn_data
from .datasets import (
    MAX_IMAGE_PIXELS,
    Dataset,
    View,
    as_float32,
    check_downscale,
    check_memory,
    path_inside,
    read_image,
    scale_K,
    scaled_size,
    to_view_image,
    warn_implausible_cameras,
    warn_narrowed,
)
from .files import require_file

__all__ = [
    "COLMAP_MODELS",
    "SUPPORTED_COLMAP",
    "ColmapCamera",
    "ColmapImage",
    "camera_intrinsics",
    "check_camera",
    "load_colmap",
    "read_colmap_model",
]

# COLMAP model id -> (name, number of parameters); src/colmap/sensor/models.h
COLMAP_MODELS = {
    0: ("SIMPLE_PINHOLE", 3),
    1: ("PINHOLE", 4),
    2: ("SIMPLE_RADIAL", 4),
    3: ("RADIAL", 5),
    4: ("OPENCV", 8),
    5: ("OPENCV_FISHEYE", 8),
    6: ("FULL_OPENCV", 12),
    7: ("FOV", 5),
    8: ("SIMPLE_RADIAL_FISHEYE", 4),
    9: ("RADIAL_FISHEYE", 5),
    10: ("THIN_PRISM_FISHEYE", 12),
    11: ("RAD_TAN_THIN_PRISM_FISHEYE", 16),
}
_COLMAP_BY_NAME = {name: (mid, n) for mid, (name, n) in COLMAP_MODELS.items()}
# The models xprc renders (the others are read, and refused by check_camera).
SUPPORTED_COLMAP = (
    "SIMPLE_PINHOLE",
    "PINHOLE",
    "SIMPLE_RADIAL",
    "RADIAL",
    "OPENCV",
    "FULL_OPENCV",
    "OPENCV_FISHEYE",
)


@dataclasses.dataclass(frozen=True)
class ColmapCamera:
    id: int
    model: str
    width: int
    height: int
    params: np.ndarray  # [num_params] float64


@dataclasses.dataclass(frozen=True)
class ColmapImage:
    id: int
    qvec: np.ndarray  # [4] (w, x, y, z) world->camera rotation
    tvec: np.ndarray  # [3]
    camera_id: int
    name: str


class _Bin:
    """Sequential reader of a little-endian COLMAP .bin; running out of bytes -> DataError."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.buf = path.read_bytes()
        self.pos = 0

    def need(self, size: int, what: str) -> None:
        if self.pos + size > len(self.buf):
            raise DataError(self.path, f"file is truncated (ends inside {what})")

    def read(self, fmt: str, what: str) -> tuple:
        size = struct.calcsize("<" + fmt)
        self.need(size, what)
        out = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += size
        return out

    def skip(self, size: int, what: str) -> None:
        self.need(size, what)
        self.pos += size

    def cstring(self, what: str) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise DataError(self.path, f"file is truncated (ends inside {what})")
        raw = self.buf[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(self.path, f"{what}: image name is not UTF-8") from None

    def count(self, what: str, noun: str, size: int) -> int:
        """A uint64 count of records of at least `size` bytes: more than the bytes left can hold
        is an error here, before anything is allocated for them."""
        n = self.read("Q", what)[0]
        left = len(self.buf) - self.pos
        if n * size > left:
            raise DataError(
                self.path,
                f"file is truncated or corrupt ({what} declares {n} {noun} of at least {size} "
                f"bytes, but only {left} bytes follow)",
            )
        return n

    def end(self, n: int, noun: str) -> None:
        """Nothing may follow the last record: a count too small would drop the rest."""
        if self.pos != len(self.buf):
            raise DataError(
                self.path,
                f"{len(self.buf) - self.pos} bytes follow the last of the {n} {noun} the header "
                "declares (its count does not match the data)",
            )


def _model_params(path: Path, model_id: int, where: str) -> tuple[str, int]:
    if model_id not in COLMAP_MODELS:
        raise DataError(path, f"{where}: unknown camera model id {model_id}")
    return COLMAP_MODELS[model_id]


def _add(path: Path, table: dict, where: dict, key: int, value, at: str, noun: str) -> None:
    """table[key] = value, where no earlier record has that id (a dict would keep the last
    one without a word); `where` remembers each id's place (a line, a record) for the error."""
    if key in table:
        raise DataError(path, f"{at}: {noun} id {key} is defined twice (first at {where[key]})")
    table[key], where[key] = value, at


def _read_cameras_bin(path: Path) -> dict[int, ColmapCamera]:
    r, cams, seen = _Bin(path), {}, {}
    n = r.count("the header", "cameras", 24)
    for k in range(n):
        what = f"camera {k + 1} of {n}"
        cam_id, model_id, w, h = r.read("iiQQ", what)
        name, num = _model_params(path, model_id, f"camera {cam_id}")
        params = np.array(r.read("d" * num, what), dtype=np.float64)
        _add(path, cams, seen, cam_id, ColmapCamera(cam_id, name, int(w), int(h), params),
             what, "camera")  # fmt: skip
    r.end(n, "cameras")
    return cams


def _image(path: Path, at: str, image_id: int, pose: list, camera_id: int, name: str):
    """A ColmapImage whose qvec is a rotation: finite, not zero (any finite size is fine:
    qvec_to_rotmat normalises without overflow) and a finite tvec."""
    q, t = np.array(pose[:4], np.float64), np.array(pose[4:], np.float64)
    who = f"{at}: image '{name}' (id {image_id})"
    if not (np.isfinite(q).all() and np.isfinite(t).all()):
        raise DataError(path, f"{who}: qvec and tvec must be finite numbers")
    if not np.abs(q).max() > 0:
        raise DataError(path, f"{who}: qvec is zero, not a rotation")
    return ColmapImage(image_id, q, t, camera_id, name)


def _read_images_bin(path: Path) -> dict[int, ColmapImage]:
    r, images, seen = _Bin(path), {}, {}
    n = r.count("the header", "images", 73)
    for k in range(n):
        what = f"image {k + 1} of {n}"
        image_id, *pose, camera_id = r.read("i7di", what)
        name = r.cstring(what)
        num_points2d = r.count(what, "keypoints", 24)
        r.skip(24 * num_points2d, what)  # (x, y, point3D_id) per keypoint; not needed
        image = _image(path, what, image_id, pose, camera_id, name)
        _add(path, images, seen, image_id, image, what, "image")
    r.end(n, "images")
    return images


def _read_points_bin(path: Path) -> tuple[np.ndarray, np.ndarray]:
    r = _Bin(path)
    n = r.count("the header", "points", 51)
    xyz = np.empty((n, 3), np.float64)
    rgb = np.empty((n, 3), np.uint8)
    seen: dict[int, int] = {}
    for k in range(n):
        what = f"point {k + 1} of {n}"
        pid, x, y, z, cr, cg, cb, _err, track = r.read("Q3d3BdQ", what)
        if seen.setdefault(pid, k) != k:
            raise DataError(path, f"{what}: POINT3D_ID {pid} repeats point {seen[pid] + 1}")
        r.skip(8 * track, what)  # (image_id, point2D_idx) per observation
        xyz[k] = (x, y, z)
        rgb[k] = (cr, cg, cb)
    r.end(n, "points")
    return xyz, rgb


def _text_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, stripped line) for every line, comments included (images.txt needs them)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(path, "not UTF-8 text") from None
    return [(i + 1, line.strip()) for i, line in enumerate(text.splitlines())]


def _is_data(line: str) -> bool:
    return bool(line) and not line.startswith("#")


# COLMAP's own number syntax, in ASCII: Python's int() and float() also read '1_0' as 10 and
# non-ASCII digits ('١', '４') as numbers. nan and inf pass here: the checks after name them.
_FLOAT = r"[+-]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|nan|inf|infinity)"
_SYNTAX = {"i": re.compile(r"[+-]?[0-9]+", re.A), "f": re.compile(_FLOAT, re.A | re.I)}


def _convert(token: str, kind: str):
    """`token` as kind 'i' (int), 'f' (float) or 's' (str); ValueError unless written so."""
    if kind != "s" and not _SYNTAX[kind].fullmatch(token):
        raise ValueError(token)
    return int(token) if kind == "i" else float(token) if kind == "f" else token


def _parse(path: Path, lineno: int, tokens: list[str], types: str, what: str) -> list:
    if len(tokens) < len(types):
        raise DataError(path, f"line {lineno}: expected {what}")
    out = []
    for tok, t in zip(tokens, types, strict=False):
        try:
            out.append(_convert(tok, t))
        except ValueError:  # (ascii(): a non-ASCII digit is shown as such, not as a digit)
            raise DataError(path, f"line {lineno}: expected {what}, got {ascii(tok)}") from None
    return out


def _read_cameras_txt(path: Path) -> dict[int, ColmapCamera]:
    cams, seen = {}, {}
    what = "CAMERA_ID MODEL WIDTH HEIGHT PARAMS[]"
    for lineno, line in _text_lines(path):
        if not _is_data(line):
            continue
        tokens = line.split()
        cam_id, model, w, h = _parse(path, lineno, tokens, "isii", what)
        if model not in _COLMAP_BY_NAME:
            raise DataError(path, f"line {lineno}: unknown camera model '{model}'")
        num = _COLMAP_BY_NAME[model][1]
        if len(tokens) - 4 != num:
            raise DataError(
                path,
                f"line {lineno}: camera model {model} takes {num} parameters, "
                f"got {len(tokens) - 4}",
            )
        params = np.array(_parse(path, lineno, tokens[4:], "f" * num, what), dtype=np.float64)
        cam = ColmapCamera(cam_id, model, w, h, params)
        _add(path, cams, seen, cam_id, cam, f"line {lineno}", "camera")
    return cams


_IMAGE_LINE = "IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME"
_IMAGE_TYPES = "ifffffffis"


def _typed(tokens: list[str], types: str) -> list | None:
    """`tokens` converted by `types` ('i' int, 'f' float, 's' str), or None if any fails."""
    if len(tokens) != len(types):
        return None
    try:
        return [_convert(t, k) for t, k in zip(tokens, types, strict=True)]
    except ValueError:
        return None


def _is_points2d(line: str) -> bool:
    """A POINTS2D line: (X Y POINT3D_ID) triples. Only the first is parsed; the keypoints are
    not used, the line only has to be told apart from an image line."""
    tokens = line.split()
    return len(tokens) % 3 == 0 and _typed(tokens[:3], "ffi") is not None


def _read_images_txt(path: Path) -> dict[int, ColmapImage]:
    """COLMAP writes two lines per image: the image line and its POINTS2D line (empty without
    keypoints). Some writers leave the second line out; reading every other line blindly then
    took each second image for keypoints and lost it without a word. So the line after an image
    line is taken as its POINTS2D line only when it is empty or reads as one and not as an
    image line; a line that reads as both is an error, as is one that reads as neither."""
    images: dict[int, ColmapImage] = {}
    seen: dict[int, str] = {}
    lines = _text_lines(path)
    i = 0
    while i < len(lines):
        lineno, line = lines[i]
        i += 1
        if not _is_data(line):
            continue
        # NAME may contain spaces: it is everything after the ninth field.
        tokens = line.split(maxsplit=9)
        image_id, *pose, camera_id, name = _parse(path, lineno, tokens, _IMAGE_TYPES, _IMAGE_LINE)
        image = _image(path, f"line {lineno}", image_id, pose, camera_id, name)
        _add(path, images, seen, image_id, image, f"line {lineno}", "image")
        if i == len(lines) or lines[i][1].startswith("#"):
            continue  # no POINTS2D line
        next_no, next_line = lines[i]
        points = not next_line or _is_points2d(next_line)
        image_line = _typed(next_line.split(maxsplit=9), _IMAGE_TYPES) is not None
        if points and image_line:
            raise DataError(
                path,
                f"line {next_no}: cannot tell whether this is the POINTS2D line of image "
                f"{image_id} (line {lineno}) or an image line",
            )
        if points:
            i += 1
        elif not image_line:
            raise DataError(
                path,
                f"line {next_no}: expected the POINTS2D line of image {image_id} (line {lineno}): "
                f"X Y POINT3D_ID triples, or the next image line: {_IMAGE_LINE}",
            )
    return images


def _read_points_txt(path: Path) -> tuple[np.ndarray, np.ndarray]:
    xyz, rgb = [], []
    seen: dict[int, int] = {}  # POINT3D_ID -> its line
    what = "POINT3D_ID X Y Z R G B ERROR TRACK[]"
    for lineno, line in _text_lines(path):
        if not _is_data(line):
            continue
        pid, x, y, z, cr, cg, cb, _err = _parse(path, lineno, line.split(), "ifffiiif", what)
        if seen.setdefault(pid, lineno) != lineno:  # (a second copy of the point, unsaid)
            raise DataError(path, f"line {lineno}: POINT3D_ID {pid} repeats line {seen[pid]}")
        xyz.append((x, y, z))
        if not all(0 <= c <= 255 for c in (cr, cg, cb)):  # COLMAP writes uint8 colours
            shown = " ".join(str(c)[:24] for c in (cr, cg, cb))
            raise DataError(path, f"line {lineno}: point colour {shown} is outside 0..255")
        rgb.append((cr, cg, cb))
    return (
        np.array(xyz, dtype=np.float64).reshape(-1, 3),
        np.array(rgb, dtype=np.uint8).reshape(-1, 3),
    )


def find_file(sparse: Path, stem: str) -> Path:
    """`stem`.bin, else `stem`.txt; the first that exists must be a regular file (a directory,
    FIFO or link loop named cameras.bin is an error, not a reason to read cameras.txt)."""
    for ext in (".bin", ".txt"):
        path = sparse / (stem + ext)
        if os.path.lexists(path):
            require_file(path)
            return path
    raise DataError(sparse / f"{stem}.bin", f"file not found (nor {stem}.txt)")


def _other_models(sparse: Path) -> None:
    """Warn when sparse/ holds models beside 0: COLMAP writes several when it cannot join the
    images into one reconstruction, and only sparse/0 is read."""
    if not (sparse / "0").is_dir():
        return
    others = sorted(p.name for p in sparse.iterdir() if p.name.isdigit() and p.name != "0"
                    and p.is_dir())  # fmt: skip
    if others:
        listed = ", ".join(f"sparse/{name}" for name in others[:5])
        warn_data(sparse, f"holds {len(others) + 1} COLMAP models: only sparse/0 is read, not "
                  f"{listed} (COLMAP splits what it cannot join; each model has its own "
                  "images and frame)", stacklevel=3)  # fmt: skip


def read_colmap_model(sparse) -> tuple[dict, dict, np.ndarray, np.ndarray]:
    """Read a COLMAP model folder (.bin preferred over .txt, file by file).

    Returns (cameras {id: ColmapCamera}, images {id: ColmapImage}, points xyz [P, 3] float64,
    rgb [P, 3] uint8). Every image's camera is checked to exist.
    """
    sparse = Path(sparse)
    if not sparse.is_dir():
        problem = "not a folder" if sparse.exists() else "COLMAP model folder not found"
        raise DataError(sparse, problem)
    paths = {stem: find_file(sparse, stem) for stem in ("cameras", "images", "points3D")}
    readers = {
        "cameras": (_read_cameras_bin, _read_cameras_txt),
        "images": (_read_images_bin, _read_images_txt),
        "points3D": (_read_points_bin, _read_points_txt),
    }
    out = {}
    for stem, path in paths.items():
        binary, text = readers[stem]
        out[stem] = binary(path) if path.suffix == ".bin" else text(path)
    cameras, images = out["cameras"], out["images"]
    for img in images.values():
        if img.camera_id not in cameras:
            raise DataError(
                paths["images"],
                f"image '{img.name}' (id {img.id}) uses camera id {img.camera_id}, "
                f"which {paths['cameras'].name} does not define",
            )
    names: dict[str, int] = {}
    for img in images.values():  # COLMAP keeps names unique; a twin would be a second view
        if names.setdefault(img.name, img.id) != img.id:
            raise DataError(paths["images"], f"image name '{img.name}' is used by image ids "
                            f"{names[img.name]} and {img.id}")  # fmt: skip
    return cameras, images, *out["points3D"]


def camera_intrinsics(cam: ColmapCamera, num_dist: int) -> tuple[np.ndarray, str, np.ndarray]:
    """COLMAP camera -> (K [3, 3], xprc's model name, dist [num_dist]: k1..k6, p1, p2, ...)."""
    p, dist = cam.params, np.zeros(num_dist)
    if cam.model in ("SIMPLE_PINHOLE", "SIMPLE_RADIAL", "RADIAL"):
        fx = fy = p[0]
        cx, cy = p[1], p[2]
        dist[: len(p) - 3] = p[3:]  # k1 (, k2)
    else:
        fx, fy, cx, cy = p[:4]
        if cam.model == "OPENCV":  # k1 k2 p1 p2
            dist[[0, 1, 6, 7]] = p[4:8]
        elif cam.model == "FULL_OPENCV":  # k1 k2 p1 p2 k3 k4 k5 k6
            dist[[0, 1, 6, 7, 2, 3, 4, 5]] = p[4:12]
        elif cam.model == "OPENCV_FISHEYE":  # k1 k2 k3 k4
            dist[:4] = p[4:8]
    K = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
    if cam.model == "OPENCV_FISHEYE":
        model = "fisheye"
    else:
        model = "opencv" if dist.any() else "pinhole"
    return K, model, dist


def check_camera(path: Path, cam: ColmapCamera, num_dist: int, max_pixels: int) -> None:
    """DataError unless xprc renders `cam`: a supported model with finite parameters and a
    size of 1 to `max_pixels` pixels (the image budget: more could never load)."""
    if not (cam.width >= 1 and cam.height >= 1 and cam.width * cam.height <= max_pixels):
        raise DataError(path, f"camera {cam.id}: size {cam.width}x{cam.height} is not 1 to "
                        f"{max_pixels:,} pixels")  # fmt: skip
    if cam.model not in SUPPORTED_COLMAP:
        raise DataError(
            path,
            f"camera {cam.id}: model {cam.model} is not supported "
            f"(supported: {', '.join(SUPPORTED_COLMAP)})",
        )
    if not np.isfinite(cam.params).all():
        raise DataError(path, f"camera {cam.id}: parameters must be finite numbers")
    fx, fy = np.diag(camera_intrinsics(cam, num_dist)[0])[:2]
    tiny = float(np.finfo(np.float32).smallest_subnormal)  # 1e-320 is 0 as float32
    if not (fx >= tiny and fy >= tiny):
        in_f32 = " in float32" if fx > 0 and fy > 0 else ""
        raise DataError(
            path, f"camera {cam.id}: focal lengths must be positive{in_f32}, got fx={fx}, fy={fy}"
        )


def qvec_to_rotmat(q: np.ndarray) -> np.ndarray:
    """[4] (w, x, y, z), finite and not zero, of any size -> [3, 3] rotation. Dividing by the
    largest component first keeps the norm from overflowing (1e200: the norm was inf and every
    component became 0, the identity) or underflowing (1e-200) to 0."""
    q = np.asarray(q, np.float64)
    q = q / np.abs(q).max()
    w, x, y, z = q / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


# --------------------------------------------------------------------------- loading


def _image_files(image_root: Path, images: list[ColmapImage], images_file: Path) -> list[Path]:
    """The file of each image in `image_root`. Two names of one file ('a.png' and './a.png',
    'x/../a.png', a link to it) are an error, as one name used twice is: two views of it."""
    files, seen = [], {}
    for img in images:
        path = path_inside(image_root, img.name, images_file, f"image {img.id}: name")
        real = os.path.realpath(path)  # (resolve() raises on a link loop; realpath does not)
        first = seen.setdefault(real, img)
        if first is not img:
            raise DataError(images_file, f"image names '{first.name}' (id {first.id}) and "
                            f"'{img.name}' (id {img.id}) are one file, {real}: two views of "
                            "one image")  # fmt: skip
        files.append(path)
    return files


def load_colmap(
    root, downscale=1, images_dir: str = "images", background=(1.0, 1.0, 1.0)
) -> Dataset:
    """Load a COLMAP reconstruction: `ROOT/sparse/0` (or `ROOT/sparse`) and `ROOT/images_dir`.

    Views are sorted by image name; use `split_every` for the train/test split. With an integer
    `downscale` d and a folder `ROOT/{images_dir}_{d}` (the Mip-NeRF 360 layout), the
    pre-shrunk images are used as they are, at their own size, which may be 1 pixel off the
    camera's size / d (one rounding or another); otherwise images are resized. K is scaled to
    the final size.
    Points are COLMAP's points3D (colours in [0, 1]).
    """
    root = Path(root)
    downscale = check_downscale(downscale)
    sparse = root / "sparse" / "0"
    if not os.path.lexists(sparse) and (root / "sparse").is_dir():
        sparse = root / "sparse"
    _other_models(root / "sparse")
    cameras, images, xyz, rgb = read_colmap_model(sparse)  # sparse/0 when neither is a folder
    if not images:
        raise DataError(find_file(sparse, "images"), "no registered images")
    images_file, cameras_file = find_file(sparse, "images"), find_file(sparse, "cameras")
    img_file = images_file.name
    for cam_id in sorted({im.camera_id for im in images.values()}):
        check_camera(cameras_file, cameras[cam_id], NUM_DIST, MAX_IMAGE_PIXELS)
    views_by_name = sorted(images.values(), key=lambda im: im.name)
    sizes = [(cameras[im.camera_id].width, cameras[im.camera_id].height, 3) for im in views_by_name]
    check_memory(root, sizes, downscale)  # RGB: alpha is not known before decoding

    image_root = root / images_dir
    shrunk = root / f"{images_dir}_{int(downscale)}"
    pre_shrunk = downscale != 1 and float(downscale).is_integer() and shrunk.is_dir()
    if pre_shrunk:
        image_root = shrunk
    if not image_root.is_dir():
        raise DataError(image_root, "image folder not found")

    views = []
    narrowed: list[Path] = []  # 16-bit colour images read at 8 bits
    shrunk_sizes: dict[int, tuple[str, tuple[int, int]]] = {}  # camera id -> first image, size
    files = _image_files(image_root, views_by_name, images_file)
    for img, path in zip(views_by_name, files, strict=True):
        cam = cameras[img.camera_id]
        pil = read_image(path, f"{img_file}, image id {img.id}", narrowed)
        size = scaled_size(cam.width, cam.height, downscale, path)
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
        if pre_shrunk:  # its own size, not resampled; K below scales to it exactly
            first, first_size = shrunk_sizes.setdefault(cam.id, (img.name, got))
            if got != first_size:
                raise DataError(
                    path,
                    f"image is {got[0]}x{got[1]}, but {first} of the same camera {cam.id} is "
                    f"{first_size[0]}x{first_size[1]}; the images of one camera must share one "
                    "size",
                )
            size = got
        K, model, dist = camera_intrinsics(cam, NUM_DIST)
        scale = (size[0] / cam.width, size[1] / cam.height)
        viewmat = np.eye(4)
        viewmat[:3, :3] = qvec_to_rotmat(img.qvec)
        viewmat[:3, 3] = img.tvec
        image, alpha = to_view_image(pil, size, background)
        views.append(
            View(
                name=img.name,
                image=image,
                alpha=alpha,
                viewmat=as_float32(images_file, viewmat, f"image {img.id}: the pose"),
                K=as_float32(cameras_file, scale_K(K, *scale), f"camera {cam.id}: the intrinsics"),
                width=size[0],
                height=size[1],
                model=model,
                dist=as_float32(cameras_file, dist, f"camera {cam.id}: the lens coefficients"),
            )
        )
    colors = (rgb.astype(np.float32) / np.float32(255.0)).reshape(-1, 3)
    points = as_float32(find_file(sparse, "points3D"), xyz, "point coordinates")
    warn_narrowed(image_root, narrowed, len(views))
    warn_implausible_cameras(cameras_file, views)
    return Dataset(tuple(views), points, colors, root)
