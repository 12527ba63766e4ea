"""Multi-view datasets: `View`, `Dataset` and how the loaders read and check images.

The loaders (`blender.load_blender`, `colmap.load_colmap`, `scene_folder.load_scene`) return a
`Dataset` of `View`s in our conventions (gsplat's):
`viewmat` world->camera with OpenCV axes, `K` in pixels with pixel centres at `(j + 0.5, i + 0.5)`,
images float32 `[H, W, 3]` in [0, 1]. A malformed or partial dataset raises
`DataError(path, problem)` naming the file at fault.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image

from ..conventions import NUM_DIST
from ..errors import DataError, printable, warn_data
from ..memory import physical_memory, size_text
from .files import require_file

__all__ = ["Dataset", "View", "split_every"]

TEST_EVERY = 8  # Mip-NeRF 360 convention: views 0, 8, 16, ... (sorted by name) are held out


# --------------------------------------------------------------------------- data structures


@dataclasses.dataclass(frozen=True, eq=False)
class View:
    """One posed image.

    image:   [H, W, 3] float32 in [0, 1] (RGBA already composited on the background).
    viewmat: [4, 4] float32 world->camera, OpenCV axes (+x right, +y down, +z forward).
    K:       [3, 3] float32 intrinsics in pixels.
    dist:    [12] float32 lens coefficients for `model` (see xprc.conventions.NUM_DIST).
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
    source: how `load_scene` read it ({"path", "downscale", "images", "test_every",
    "undistort"}): a run records it, so that `xprc eval RUN` reads the same views; None for a
    dataset made otherwise or changed since (`subset`; a `dataclasses.replace` must drop it).
    """

    views: tuple[View, ...]
    points: np.ndarray | None = None
    colors: np.ndarray | None = None
    root: Path | None = None
    source: dict | None = None

    def __len__(self) -> int:
        return len(self.views)

    def __getitem__(self, i: int) -> View:
        return self.views[i]

    def __iter__(self) -> Iterator[View]:
        return iter(self.views)

    def subset(self, indices: Sequence[int]) -> Dataset:
        """The views at `indices`; `source` is dropped (no longer the set a loader read)."""
        return dataclasses.replace(self, views=tuple(self.views[i] for i in indices), source=None)

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


class Oriented(NamedTuple):
    """An image whose EXIF orientation tag asks viewers to turn or mirror it (`read_image`)."""

    path: Path
    orientation: int


# EXIF orientation (tag 0x0112) -> what a viewer that honours it does to the stored pixels
EXIF_ORIENTATION = {
    2: "mirror it left to right",
    3: "turn it 180 degrees",
    4: "mirror it top to bottom",
    5: "mirror it across its main diagonal",
    6: "turn it 90 degrees clockwise",
    7: "mirror it across its other diagonal",
    8: "turn it 90 degrees counter-clockwise",
}


def read_image(path: Path, referenced_by: str, narrowed: list) -> Image.Image:
    """An image as RGB, RGBA or 16-bit grey ('I;16'), its pixels as stored. `narrowed` collects
    what `warn_narrowed` reports once per dataset: the path of a 16-bit colour PNG (Pillow
    gives it 8-bit) and an `Oriented` record for an image with an EXIF orientation tag, which
    is not applied: COLMAP reads images as stored (it dropped EXIF rotation again in its
    PR #1406: a camera shared by portrait and landscape shots keeps one set of intrinsics), so
    poses and intrinsics are for the stored pixels. The pixel count is checked against
    MAX_IMAGE_PIXELS before decoding."""
    img = _open_image(path, referenced_by)
    if not img.mode.startswith("I;16") and any(_COLOUR_16.fullmatch(_rawmode(t)) for t in img.tile):
        narrowed.append(path)
    with contextlib.ExitStack() as on_error:
        on_error.callback(img.close)
        try:
            img.load()
            orientation = _orientation(img)
            if orientation is not None:
                narrowed.append(Oriented(path, orientation))
            frames = getattr(img, "n_frames", 1)  # (walks every frame: a damaged one raises)
        except (OSError, SyntaxError, ValueError, IndexError, EOFError) as e:
            raise DataError(path, f"unreadable image ({e})") from None
        if frames == 1:
            on_error.pop_all()
        else:  # Pillow keeps a multi-frame file open: a copy of frame 0, and the file closed
            if img.format != "MPO":  # (a camera JPEG's embedded preview is not a page)
                warn_data(path, f"holds {frames} frames (pages); only the first is read",
                          stacklevel=3)  # fmt: skip
            img = img.copy()
    if img.mode.startswith("I;16"):
        return img
    if img.mode in ("I", "F"):
        raise DataError(path, f"unsupported image mode '{img.mode}' (32-bit pixels)")
    if img.mode not in ("RGB", "RGBA"):
        img = img.convert("RGBA" if _channels(img) == 4 else "RGB")
    return img


def exif_turn_hint(narrowed: list, path: Path, got, want, slack: int) -> str:
    """For an image of size `got` (W, H) that is not its camera's `want`: when the EXIF
    orientation `read_image` just recorded for it (the last of `narrowed`) swaps width and
    height into `want` (within `slack` pixels), the cameras were computed on turned images; say
    so. Else ''."""
    last = narrowed[-1] if narrowed else None
    if not (isinstance(last, Oriented) and last.path == path and last.orientation >= 5):
        return ""
    turned = tuple(got)[::-1]
    if any(abs(t - w) > slack for t, w in zip(turned, want, strict=True)):
        return ""
    return (
        f"; its EXIF orientation {last.orientation} (viewers "
        f"{EXIF_ORIENTATION[last.orientation]}) gives {turned[0]}x{turned[1]}: the cameras "
        "were computed on turned images, and images are read as stored, as COLMAP reads them; "
        "turn the files themselves (e.g. `exiftran -ai`)"
    )


def _orientation(img: Image.Image) -> int | None:
    """The EXIF orientation that turns or mirrors the image (2..8), else None. Read after
    `load` (a PNG's eXIf chunk may follow its pixels). A damaged EXIF block reads as none: the
    pixels are read as stored either way."""
    try:
        value = img.getexif().get(0x0112)
    except Exception:  # noqa: BLE001 (Pillow's EXIF parser raises many kinds on damaged data)
        return None
    return value if isinstance(value, int) and value in EXIF_ORIENTATION else None


_COLOUR_16 = re.compile(r"(RGBA?|RGBX|LA);16[BLN]?")  # 16 bits a channel, several channels


def _rawmode(tile) -> str:
    """The raw mode a decoder tile unpacks (a string, or the first of a tuple)."""
    args = tile.args if hasattr(tile, "args") else tile[3]
    if isinstance(args, tuple):
        args = args[0] if args else ""
    return args if isinstance(args, str) else ""


def warn_implausible_cameras(where: Path, views) -> None:
    """One warning for views whose intrinsics are surely wrong, though finite and positive: a
    principal point more than an image width or height outside the image, or a focal length
    under 1% of the image's larger side (a pinhole's field of view past 178 degrees). They load,
    and render nothing sensible."""
    odd = []
    for v in views:
        fx, fy, cx, cy = (float(v.K[i, j]) for i, j in ((0, 0), (1, 1), (0, 2), (1, 2)))
        far = not (-v.width <= cx <= 2 * v.width and -v.height <= cy <= 2 * v.height)
        short = min(fx, fy) < 0.01 * max(v.width, v.height)
        if far or short:
            why = "principal point far outside the image" if far else "focal length under 1%"
            odd.append(f"view {v.name!r}, {v.width}x{v.height}: fx={fx:.6g}, fy={fy:.6g}, "
                       f"cx={cx:.6g}, cy={cy:.6g}, {why}")  # fmt: skip
    if odd:
        warn_data(where, f"{len(odd)} of {len(views)} views have intrinsics that are surely "
                  f"wrong (first: {odd[0]}); check the camera values", stacklevel=3)  # fmt: skip


def _shown(path: Path, where: Path) -> str:
    """An image's path as the dataset names it: under `where` (the image folder, or the folder
    of a transforms file), so that cam0/0001.jpg and cam1/0001.jpg stay apart; else its name."""
    folder = where if where.is_dir() else where.parent
    try:
        return printable(path.relative_to(folder).as_posix())
    except ValueError:  # (read through a link out of the folder, or a name outside it)
        return printable(path.name)


def warn_narrowed(where: Path, narrowed: list, total: int) -> None:
    """A RuntimeWarning when `read_image` read some of a dataset's `total` images at 8 bits,
    and one when some carry an EXIF orientation it did not apply (`Oriented`)."""
    oriented = [n for n in narrowed if isinstance(n, Oriented)]
    narrowed = [n for n in narrowed if not isinstance(n, Oriented)]
    if narrowed:
        warn_data(where, f"{len(narrowed)} of {total} images are 16-bit colour, read at 8 "
                  f"bits a channel (first: {_shown(narrowed[0], where)}); 16-bit grey images "
                  "keep their 16 bits", stacklevel=3)  # fmt: skip
    if oriented:
        first = oriented[0]
        warn_data(where, f"{len(oriented)} of {total} images carry an EXIF orientation tag "
                  f"(first: {_shown(first.path, where)}, orientation {first.orientation}: "
                  f"viewers {EXIF_ORIENTATION[first.orientation]}); they are read as stored, "
                  "not turned, as COLMAP reads them (its cameras are for the stored pixels). If "
                  "the cameras were computed on turned images, turn the files themselves "
                  "(e.g. `exiftran -ai`)", stacklevel=3)  # fmt: skip


def _channels(img: Image.Image) -> int:
    """4 for an image read as RGBA (it has alpha or a transparent colour), else 3."""
    return 4 if "A" in img.getbands() or "transparency" in img.info else 3


def image_header(path: Path, referenced_by: str) -> tuple[int, int, int]:
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


def check_memory(path: Path, sizes: list[tuple[int, int, int]], downscale: float) -> None:
    """Refuse a load whose images cannot fit in memory, before decoding any: `sizes` are the
    (width, height, channels) of the images at full size; a view keeps float32 RGB plus
    alpha for RGBA. The error names the smallest integer downscale that fits."""

    def need(d: float) -> int:
        return sum(math.prod(scaled_size(w, h, d)) * 4 * c for w, h, c in sizes)

    have = physical_memory()
    if have is None or need(downscale) <= have:
        return

    fits = next((d for d in range(math.floor(downscale) + 1, 65) if need(d) <= have), None)
    hint = (f"downscale {fits} (--downscale {fits}) needs about {size_text(need(fits))}"
            if fits else "even downscale 64 does not fit; load fewer images")  # fmt: skip
    raise DataError(
        path,
        f"the {len(sizes)} images need about {size_text(need(downscale))} of memory as float32 "
        f"at downscale {downscale:g}, more than the {size_text(have)} this machine has; {hint}",
    )


def to_view_image(img: Image.Image, size: tuple[int, int], background) -> tuple:
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


def scaled_size(width: int, height: int, downscale: float, image=None) -> tuple[int, int]:
    """The size of a `width` x `height` image read at 1/downscale. With `image` (the file, for
    the message), a factor larger than a side is a DataError (it was read as 1 pixel)."""
    if downscale == 1:
        return width, height
    if image is not None and min(width, height) < downscale:
        raise DataError(
            image, f"downscale {downscale:g} leaves less than a pixel of this {width}x{height} "
            f"image (it can be at most {min(width, height)})",
        )  # fmt: skip
    return max(1, round(width / downscale)), max(1, round(height / downscale))


def scale_K(K: np.ndarray, sx: float, sy: float) -> np.ndarray:
    # Pixel centres at +0.5 make a resize an exact scaling of fx, cx (and fy, cy).
    return np.diag([sx, sy, 1.0]) @ K


def as_float32(path: Path, values: np.ndarray, what: str) -> np.ndarray:
    """float64 values as float32, which they must fit (no overflow to inf)."""
    if not np.isfinite(values).all():
        raise DataError(path, f"{what} not finite")
    if not (np.abs(values) <= np.finfo(np.float32).max).all():
        raise DataError(path, f"{what} out of float32 range")
    return values.astype(np.float32)


# A camera further than this from the origin is refused where a dataset is read (it loaded, and
# training failed much later: 'training diverged'). Real captures are far inside it: geo-referenced
# (ECEF) coordinates are about 6.4e6 m, 6.4e9 in millimetres. Renders run in float32 (largest
# number 3.4e38), and the projection squares camera-space depths and distances: past 1.8e19 those
# squares are inf (3DGS's gradients were NaN with a camera 5e19 from a unit scene). 1e15 keeps
# the squares (1e30) a factor of 1e8 below that, for the products with squared focal lengths
# and primitive scales the renders form.
MAX_CAMERA_DISTANCE = 1e15


def check_camera_distance(path: Path, camera: str, centre, given: str) -> None:
    """DataError unless the camera centre [3] (finite) is within MAX_CAMERA_DISTANCE of the
    origin; `camera` names the view and `given` shows where the file gives the value."""
    distance = math.hypot(*(float(c) for c in centre))  # (no overflow of the squares, as norm)
    if not distance <= MAX_CAMERA_DISTANCE:
        raise DataError(path, f"{camera} is {distance:.6g} from the origin ({given}); renders "
                        "run in float32, which cannot handle a camera beyond "
                        f"{MAX_CAMERA_DISTANCE:.0e}")  # fmt: skip


def shown(values) -> str:
    """Numbers for a message: each in 6 significant digits, space-separated."""
    return " ".join(f"{float(v):.6g}" for v in values)


def check_downscale(downscale) -> float:
    if not (isinstance(downscale, int | float) and math.isfinite(downscale) and downscale >= 1):
        raise ValueError(f"downscale must be a number >= 1, got {downscale!r}")
    return downscale


def warn_links_out(root: Path, files: Sequence[Path], stacklevel: int = 2) -> None:
    """One RuntimeWarning, naming each link and where it leads, when some of the dataset's
    `files` (paths under `root`) are read through symbolic links leading out of the folder
    `root` resolves to. They are followed: a big image folder linked in (`images ->
    /data/...`) is a common setup, and what the loader names (`file_path`, an image name) is
    still refused when it climbs out with '..' or is absolute (`path_inside`). `stacklevel` as
    `warn_data` counts from the caller."""
    top = os.path.realpath(root)
    inside = top.rstrip(os.sep) + os.sep
    links: dict[Path, int] = {}  # the link through which files leave -> how many
    for f in files:
        if os.path.realpath(f).startswith(inside):
            continue
        step, link = Path(root), Path(f)  # the file itself unless a folder on its way is a link
        for part in Path(f).relative_to(root).parts:
            step = step / part
            if os.path.islink(step) and not os.path.realpath(step).startswith(inside):
                link = step
                break
        links[link] = links.get(link, 0) + 1
    if not links:
        return
    shown = [f"{printable(str(link.relative_to(root)))} -> "
             f"{printable(os.path.realpath(link))} ({n} file{'s' if n > 1 else ''})"
             for link, n in list(links.items())[:3]]  # fmt: skip
    more = f", and {len(links) - 3} more links" if len(links) > 3 else ""
    warn_data(root, f"{sum(links.values())} of {len(files)} dataset files are read through "
              f"symbolic links that lead out of the dataset folder ({printable(top)}): "
              f"{'; '.join(shown)}{more}; they are followed",
              stacklevel=stacklevel + 1)  # fmt: skip


def path_inside(root: Path, relative: str, path: Path, what: str) -> Path:
    """`root / relative`, which must stay inside `root` (no absolute path, no '..' out of it):
    a dataset file names files of its own folder only."""
    if "\0" in relative:  # os.stat would raise ValueError
        raise DataError(path, f"{what} {relative!r} contains a NUL character")
    # absolute, so that a root of '.' (`--data .`: every file_path was refused) compares too
    joined = os.path.abspath(root / relative)
    top = os.path.abspath(root)
    if joined == top:  # '', '.', 'a/..': no file (Blender would append '.png' to the folder)
        raise DataError(path, f"{what} {relative!r} names the dataset folder, not a file in it")
    inside = joined.startswith(top.rstrip(os.sep) + os.sep)
    if os.path.isabs(relative) or not inside:
        raise DataError(path, f"{what} {relative!r} points outside the dataset folder {root}")
    return root / relative
