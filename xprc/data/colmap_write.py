"""Our own writer of COLMAP binary sparse models: cameras.bin, images.bin and points3D.bin, the
layout `colmap_files` reads (COLMAP's `WriteCamerasBinary`, `WriteImagesBinary` and
`WritePoints3DBinary`, little-endian):

    cameras.bin   uint64 count; per camera: uint32 id, int32 model id, uint64 width,
                  uint64 height, float64 params[the model's count]
    images.bin    uint64 count; per image: uint32 id, float64 qw qx qy qz, float64 tx ty tz,
                  uint32 camera id, the name (UTF-8) and a NUL, uint64 keypoint count, per
                  keypoint float64 x, float64 y, uint64 point3D id (2**64 - 1: none)
    points3D.bin  uint64 count; per point: uint64 id, float64 x y z, uint8 r g b, float64
                  error, uint64 track length, per element uint32 image id, uint32 keypoint index

Every file goes through `write_atomic`: a failed write leaves no half-written model.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from pathlib import Path

import numpy as np

from .colmap_files import COLMAP_MODELS
from .files import write_atomic

__all__ = ["NO_POINT", "ImageRecord", "write_colmap_model"]

NO_POINT = 2**64 - 1  # COLMAP's kInvalidPoint3DId: a keypoint that is no 3D point's
_MODEL_IDS = {name: (mid, n) for mid, (name, n) in COLMAP_MODELS.items()}
_UINT32 = 2**32 - 1


def rotmat_to_qvec(R: np.ndarray) -> np.ndarray:
    """A rotation [3, 3] -> its unit quaternion (w, x, y, z) with w >= 0 (Shepperd's method:
    the largest of the four candidates is taken, so no division by a small number)."""
    m = np.asarray(R, np.float64)
    tr = np.trace(m)
    cands = [tr, m[0, 0], m[1, 1], m[2, 2]]
    k = int(np.argmax(cands))
    if k == 0:
        s = 2.0 * math.sqrt(max(1.0 + tr, 0.0))
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    else:
        i = k - 1
        j, n = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + m[i, i] - m[j, j] - m[n, n], 0.0))
        q = [0.0, 0.0, 0.0, 0.0]
        q[0] = (m[n, j] - m[j, n]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + n] = (m[n, i] + m[i, n]) / s
    q = np.array(q)
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


@dataclasses.dataclass(frozen=True)
class ImageRecord:
    """One registered image. qvec (w, x, y, z) and tvec: world -> camera (COLMAP's pose);
    keypoints [K, 2] float64 pixel coordinates at the camera's size, COLMAP's convention (the
    top-left pixel's centre is (0.5, 0.5)); point_ids [K] uint64 (NO_POINT: none)."""

    id: int
    qvec: np.ndarray
    tvec: np.ndarray
    camera_id: int
    name: str
    keypoints: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 2)))
    point_ids: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.uint64))


def _id(value: int, what: str) -> int:
    if not (isinstance(value, int | np.integer) and 0 < int(value) <= _UINT32):
        raise ValueError(f"{what} must be an integer in 1..{_UINT32}, got {value!r}")
    return int(value)


def _cameras_bytes(cameras: dict) -> bytes:
    """cameras: {id: (model name, width, height, params)}."""
    out = [struct.pack("<Q", len(cameras))]
    for cam_id, (model, width, height, params) in sorted(cameras.items()):
        mid, n = _MODEL_IDS[model]
        params = np.asarray(params, np.float64)
        if params.shape != (n,):
            raise ValueError(f"camera {cam_id}: model {model} takes {n} parameters, got "
                             f"{params.shape}")  # fmt: skip
        out.append(struct.pack("<IiQQ", _id(cam_id, "a camera id"), mid, int(width), int(height)))
        out.append(params.astype("<f8").tobytes())
    return b"".join(out)


def _images_bytes(images: list[ImageRecord], cameras: dict) -> bytes:
    out = [struct.pack("<Q", len(images))]
    for im in images:
        if im.camera_id not in cameras:
            raise ValueError(f"image {im.id} uses camera {im.camera_id}, which is not given")
        name = im.name.encode("utf-8")
        if b"\0" in name:
            raise ValueError(f"image {im.id}: a name cannot hold a NUL character")
        pose = np.concatenate([np.asarray(im.qvec, np.float64), np.asarray(im.tvec, np.float64)])
        out.append(struct.pack("<I7dI", _id(im.id, "an image id"), *pose, im.camera_id))
        out.append(name + b"\0")
        kp = np.asarray(im.keypoints, np.float64).reshape(-1, 2)
        ids = np.asarray(im.point_ids, np.uint64).reshape(-1)
        if len(kp) != len(ids):
            raise ValueError(f"image {im.id}: {len(kp)} keypoints but {len(ids)} point ids")
        rows = np.zeros(len(kp), dtype=[("x", "<f8"), ("y", "<f8"), ("p", "<u8")])
        rows["x"], rows["y"], rows["p"] = kp[:, 0], kp[:, 1], ids
        out.append(struct.pack("<Q", len(kp)) + rows.tobytes())
    return b"".join(out)


def _points_bytes(xyz, rgb, error, track_image, track_index) -> bytes:
    """One observation per point (track length 1): track_image [P] uint32 image ids,
    track_index [P] uint32 keypoint indices in that image. Point ids are 1..P."""
    n = len(xyz)
    rows = np.zeros(
        n,
        dtype=[
            ("id", "<u8"),
            ("xyz", "<f8", 3),
            ("rgb", "u1", 3),
            ("err", "<f8"),
            ("len", "<u8"),
            ("img", "<u4"),
            ("idx", "<u4"),
        ],  # fmt: skip
    )
    rows["id"] = np.arange(1, n + 1, dtype=np.uint64)
    rows["xyz"], rows["rgb"], rows["err"] = xyz, rgb, error
    rows["len"], rows["img"], rows["idx"] = 1, track_image, track_index
    return struct.pack("<Q", n) + rows.tobytes()


def _check_tracks(images: list[ImageRecord], image: np.ndarray, index: np.ndarray) -> None:
    """Point k (id k + 1) is keypoint index[k] of image image[k], which lists it (ValueError
    naming the first point where not)."""
    ok = np.zeros(len(image), bool)
    for im in images:
        mine = np.flatnonzero(image == im.id)
        idx = index[mine].astype(np.int64)
        inside = (idx >= 0) & (idx < len(im.point_ids))
        listed = np.asarray(im.point_ids, np.uint64)[np.where(inside, idx, 0)]
        ok[mine] = inside & (listed == (mine + 1).astype(np.uint64))
    if not ok.all():
        k = int(np.flatnonzero(~ok)[0])
        raise ValueError(
            f"point {k + 1}: its track (image {image[k]}, keypoint {index[k]}) "
            "does not name a keypoint of that image that refers back to it"
        )


def write_colmap_model(
    sparse, cameras: dict, images: list[ImageRecord], points: dict
) -> list[Path]:
    """Write cameras.bin, images.bin and points3D.bin into the folder `sparse` (made if needed).

    cameras: {id: (model name, width, height, params)}; images: `ImageRecord`s; points:
    {"xyz": [P, 3] float64, "rgb": [P, 3] uint8, "error": [P] float64, "image": [P] image ids,
    "index": [P] keypoint indices}: point i (id i + 1) is keypoint index[i] of image image[i],
    whose `point_ids` must say so. Returns the three paths."""
    sparse = Path(sparse)
    xyz = np.asarray(points["xyz"], np.float64).reshape(-1, 3)
    rgb = np.asarray(points["rgb"], np.uint8).reshape(-1, 3)
    _check_tracks(images, np.asarray(points["image"]), np.asarray(points["index"]))
    blobs = {
        "cameras.bin": _cameras_bytes(cameras),
        "images.bin": _images_bytes(images, cameras),
        "points3D.bin": _points_bytes(
            xyz, rgb, np.asarray(points["error"], np.float64), points["image"], points["index"]
        ),
    }
    paths = []
    for name, blob in blobs.items():
        write_atomic(sparse / name, lambda f, blob=blob: f.write(blob))
        paths.append(sparse / name)
    return paths
