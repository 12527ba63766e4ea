"""COLMAP scenes: `load_colmap` makes a `Dataset` of the model `colmap_files` reads (cameras
checked for what xprc renders, poses, the images), and the camera conversions it uses.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..conventions import NUM_DIST
from ..errors import DataError, warn_data
from .colmap_files import (
    COLMAP_MODELS,
    ColmapCamera,
    ColmapImage,
    find_file,
    read_colmap_model,
)
from .datasets import (
    MAX_IMAGE_PIXELS,
    Dataset,
    View,
    as_float32,
    check_downscale,
    check_memory,
    exif_turn_hint,
    path_inside,
    read_image,
    scale_K,
    scaled_size,
    to_view_image,
    warn_implausible_cameras,
    warn_links_out,
    warn_narrowed,
)
from .undistort import undistort_views

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


def _image_folders(root: Path) -> str:
    """'; the folders of images it has: ...' for a missing image folder's message."""
    try:
        found = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith("images"))
    except OSError:
        return ""
    if not found:
        return ""
    shrunk = [n for n in found if n.rpartition("_")[2].isdigit()]
    hint = f" (e.g. --images {shrunk[0]})" if shrunk else ""
    return f"; the scene has {', '.join(found[:6])}: choose one with --images{hint}"


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
    root,
    downscale=1,
    images_dir: str = "images",
    background=(1.0, 1.0, 1.0),
    *,
    shrunk_only: bool = False,
    undistort: bool = False,
) -> Dataset:
    """Load a COLMAP reconstruction: `ROOT/sparse/0` (or `ROOT/sparse`) and `ROOT/images_dir`.

    Views are sorted by image name; use `split_every` for the train/test split. With an integer
    `downscale` d and a folder `ROOT/{images_dir}_{d}` (the Mip-NeRF 360 layout), the
    pre-shrunk images are used as they are, at their own size, which may be 1 pixel off the
    camera's size / d (one rounding or another); otherwise images are resized (with
    `shrunk_only`, that folder missing is a DataError instead). K is scaled to the final size.
    Points are COLMAP's points3D (colours in [0, 1]). With `undistort`, the views of lens
    cameras (SIMPLE_RADIAL, RADIAL, OPENCV, FULL_OPENCV, OPENCV_FISHEYE) are resampled to
    pinhole cameras as COLMAP's image_undistorter does, and a warning says how
    (`xprc.data.undistort`).
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

    image_root, pre_shrunk = _image_root(root, images_dir, downscale, shrunk_only)
    views, labels = [], []
    narrowed: list[Path] = []  # 16-bit colour images read at 8 bits
    shrunk_sizes: dict[int, tuple[str, tuple[int, int]]] = {}  # camera id -> first image, size
    files = _image_files(image_root, views_by_name, images_file)
    for img, path in zip(views_by_name, files, strict=True):
        cam = cameras[img.camera_id]
        pil = read_image(path, f"{img_file}, image id {img.id}", narrowed)
        size = _view_size(pil, cam, path, downscale, pre_shrunk, img.name, shrunk_sizes, narrowed)
        views.append(_view(img, cam, pil, size, background, images_file, cameras_file))
        labels.append(f"camera {cam.id} {cam.model}")
    colors = (rgb.astype(np.float32) / np.float32(255.0)).reshape(-1, 3)
    points = as_float32(find_file(sparse, "points3D"), xyz, "point coordinates")
    warn_narrowed(image_root, narrowed, len(views))
    warn_implausible_cameras(cameras_file, views)
    model = [find_file(sparse, stem) for stem in ("cameras", "images", "points3D")]
    warn_links_out(root, model + files)
    if undistort:
        views = undistort_views(views, cameras_file, labels, MAX_IMAGE_PIXELS)
    return Dataset(tuple(views), points, colors, root)


def _image_root(root: Path, images_dir: str, downscale, shrunk_only: bool) -> tuple[Path, bool]:
    """The folder the images are read from, and whether it holds them pre-shrunk by
    `downscale` (the Mip-NeRF 360 layout `{images_dir}_{d}`)."""
    image_root = root / images_dir
    shrunk = root / f"{images_dir}_{int(downscale)}"
    pre_shrunk = downscale != 1 and float(downscale).is_integer() and shrunk.is_dir()
    if pre_shrunk:
        image_root = shrunk
    if shrunk_only and not pre_shrunk:  # --images NAME_N: that folder, not a resized other
        raise DataError(shrunk, f"image folder not found{_image_folders(root)}")
    if not image_root.is_dir():
        raise DataError(image_root, f"image folder not found{_image_folders(root)}")
    return image_root, pre_shrunk


def _view_size(pil, cam, path, downscale, pre_shrunk, name, shrunk_sizes, narrowed):
    """The size a view is trained at, after checking the image's size against its camera (a
    pre-shrunk image keeps its own size, within a pixel of the camera's / d, and one size per
    camera: `shrunk_sizes` maps camera id -> the first image's name and size)."""
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
            f"image is {got[0]}x{got[1]}, but camera {cam.id} expects {want[0]}x{want[1]}"
            + exif_turn_hint(narrowed, path, got, want, 1 if pre_shrunk else 0),
        )
    if not pre_shrunk:
        return size
    # its own size, not resampled; K scales to it exactly
    first, first_size = shrunk_sizes.setdefault(cam.id, (name, got))
    if got != first_size:
        raise DataError(
            path,
            f"image is {got[0]}x{got[1]}, but {first} of the same camera {cam.id} is "
            f"{first_size[0]}x{first_size[1]}; the images of one camera must share one size",
        )
    return got


def _view(img, cam, pil, size, background, images_file, cameras_file) -> View:
    """One COLMAP image as a View at `size`: its pose, its camera's intrinsics scaled to it."""
    K, model, dist = camera_intrinsics(cam, NUM_DIST)
    scale = (size[0] / cam.width, size[1] / cam.height)
    viewmat = np.eye(4)
    viewmat[:3, :3] = qvec_to_rotmat(img.qvec)
    viewmat[:3, 3] = img.tvec
    image, alpha = to_view_image(pil, size, background)
    return View(
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
