"""The files of a COLMAP sparse model: our own reader of cameras, images and points3D, each
as .bin or .txt (`read_colmap_model`); `colmap.load_colmap` makes a scene of what it reads.

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

from ..errors import DataError
from .datasets import check_camera_distance, shown
from .files import require_file

__all__ = [
    "COLMAP_MODELS",
    "ColmapCamera",
    "ColmapImage",
    "find_file",
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


def _image(path: Path, at: str, image_id: int, pose: list, camera_id: int, name: str):
    """A ColmapImage whose qvec is a rotation: finite, not zero (any finite size is fine:
    qvec_to_rotmat normalises without overflow) and a finite tvec that keeps the camera within
    MAX_CAMERA_DISTANCE of the origin."""
    q, t = np.array(pose[:4], np.float64), np.array(pose[4:], np.float64)
    who = f"{at}: image '{name}' (id {image_id})"
    if not (np.isfinite(q).all() and np.isfinite(t).all()):
        raise DataError(path, f"{who}: qvec and tvec must be finite numbers")
    if not np.abs(q).max() > 0:
        raise DataError(path, f"{who}: qvec is zero, not a rotation")
    # The camera centre is -R^T t: as far from the origin as t is long (R is a rotation).
    check_camera_distance(path, f"{who}: the camera", t, f"tvec {shown(t)}")
    return ColmapImage(image_id, q, t, camera_id, name)


# --------------------------------------------------------------------------- binary


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


# --------------------------------------------------------------------------- text


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


def _all_points2d(line: str) -> bool:
    """Every token of `line` in (X Y POINT3D_ID) triples, not only the first triple."""
    tokens = line.split()
    return len(tokens) % 3 == 0 and _typed(tokens, "ffi" * (len(tokens) // 3)) is not None


_UNSIGNED = re.compile(r"[0-9]+", re.A)


def _can_be_image_line(line: str, cameras, images: dict) -> bool:
    """Whether `line`, which reads as an image line, can be one of this model: COLMAP's image
    and camera ids are unsigned, the camera must be one `cameras` defines (None: not known),
    and the image id must be new. A reading that breaks one of these would be an error anyway
    (a POINTS2D line of whole numbers, as COLMAP writes them, `10 20 -1 ...`, reads as an image
    line of camera -1)."""
    tokens = line.split(maxsplit=9)
    if not (_UNSIGNED.fullmatch(tokens[0]) and _UNSIGNED.fullmatch(tokens[8])):
        return False
    return (cameras is None or int(tokens[8]) in cameras) and int(tokens[0]) not in images


_PROMISE = re.compile(r"two lines of data per image", re.I)
_IMAGE_COUNT = re.compile(r"number of images:\s*([0-9]+)", re.I | re.A)


def _promised_images(lines: list[tuple[int, str]]) -> int | None:
    """The image count of COLMAP's header (`# Image list with two lines of data per image:`,
    `# Number of images: N, ...`; read_write_model.py writes it too) when the comments before
    the first data line give both, else None."""
    promise = count = None
    for _, line in lines:
        if _is_data(line):
            break
        promise = promise or _PROMISE.search(line)
        count = count or _IMAGE_COUNT.search(line)
    return int(count[1]) if promise and count else None


def _read_images_txt(path: Path, cameras=None) -> dict[int, ColmapImage]:
    """COLMAP writes two lines per image: the image line and its POINTS2D line (empty without
    keypoints). Some writers leave the second line out; reading every other line blindly then
    took each second image for keypoints and lost it without a word. So the line after an image
    line is taken as its POINTS2D line only when it is empty or reads as one and not as an
    image line; a line that reads as both is an error, as is one that reads as neither.
    Whole-number keypoints (COLMAP's C++ writer prints 10.0 as `10`; Python writers print
    `10.0`) read as both only when every token is a triple and the line could be an image line
    of this model (`_can_be_image_line`, with the ids of `cameras` when known). A line that
    still reads both ways is the POINTS2D line when COLMAP's header promises two lines per
    image and gives the image count, which the file must then hold."""
    images: dict[int, ColmapImage] = {}
    seen: dict[int, str] = {}
    lines = _text_lines(path)
    promised, by_header = _promised_images(lines), []
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
        if points and image_line:  # keep a reading only if it could be right
            points = _all_points2d(next_line)
            image_line = _can_be_image_line(next_line, cameras, images)
        if points and image_line:
            if promised is None:
                raise DataError(path, _both_ways(next_no, image_id, lineno))
            image_line = False  # (as the header promises; checked below)
            by_header.append((next_no, image_id, lineno))
        if points:
            i += 1
        elif not image_line:
            raise DataError(
                path,
                f"line {next_no}: expected the POINTS2D line of image {image_id} (line {lineno}): "
                f"X Y POINT3D_ID triples, or the next image line: {_IMAGE_LINE}",
            )
    if by_header and len(images) != promised:
        raise DataError(path, _both_ways(*by_header[0]) + " (read as the POINTS2D line, as the "
                        "header's 'two lines of data per image' says, the file holds "
                        f"{len(images)} images, not the {promised} of its 'Number of "
                        "images')")  # fmt: skip
    return images


def _both_ways(lineno: int, image_id: int, image_lineno: int) -> str:
    return (f"line {lineno}: cannot tell whether this is the POINTS2D line of image {image_id} "
            f"(line {image_lineno}) or an image line")  # fmt: skip


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


# --------------------------------------------------------------------------- the model


def find_file(sparse: Path, stem: str) -> Path:
    """`stem`.bin, else `stem`.txt; the first that exists must be a regular file (a directory,
    FIFO or link loop named cameras.bin is an error, not a reason to read cameras.txt)."""
    for ext in (".bin", ".txt"):
        path = sparse / (stem + ext)
        if os.path.lexists(path):
            require_file(path)
            return path
    raise DataError(sparse / f"{stem}.bin", f"file not found (nor {stem}.txt)")


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
        if path.suffix == ".bin":
            out[stem] = binary(path)
        else:  # the images' camera ids tell a keypoint line from an image line
            out[stem] = text(path, out["cameras"]) if stem == "images" else text(path)
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
