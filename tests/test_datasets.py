"""xprc.datasets: Blender and COLMAP loaders on small fixtures written here, malformed inputs."""

from __future__ import annotations

import json
import math
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from xprc.data.blender import load_blender
from xprc.data.colmap import load_colmap, read_colmap_model
from xprc.data.datasets import Dataset, View, split_every
from xprc.data.ply import save_points_ply
from xprc.data.scene_folder import load_scene
from xprc.errors import DataError

# --------------------------------------------------------------------------- Blender fixtures

W8 = 8


def rgba_image(path, size=(W8, W8), seed=0):
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(size[1], size[0], 4), dtype=np.uint8)
    arr[0, 0, 3] = 0  # one fully transparent and one opaque pixel, for the composite check
    arr[0, 1, 3] = 255
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr, "RGBA").save(path)
    return arr


def c2w_gl(position, target=(0.0, 0.0, 0.0)):
    """OpenGL camera-to-world (looking down -z, +y up) at `position` looking at `target`."""
    position = np.asarray(position, float)
    back = position - np.asarray(target, float)
    back /= np.linalg.norm(back)
    up0 = np.array([0.0, 0.0, 1.0]) if abs(back[2]) < 0.99 else np.array([0.0, 1.0, 0.0])
    right = np.cross(up0, back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = right, up, back, position
    return m


def blender_scene(root, n=3, split="train", angle=0.9):
    frames = []
    for i in range(n):
        rgba_image(root / split / f"r_{i}.png", seed=i)
        pos = [4 * math.cos(i), 4 * math.sin(i), 1.5]
        frames.append({"file_path": f"./{split}/r_{i}", "transform_matrix": c2w_gl(pos).tolist()})
    meta = {"camera_angle_x": angle, "frames": frames}
    (root / f"transforms_{split}.json").write_text(json.dumps(meta))
    return meta


def test_blender_transforms_with_a_byte_order_mark_loads(tmp_path):
    """Windows editors write a UTF-8 BOM; json refused it ('Unexpected UTF-8 BOM')."""
    blender_scene(tmp_path)
    path = tmp_path / "transforms_train.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert len(load_blender(tmp_path, "train")) == 3


def test_blender_multi_page_image_reads_its_first_page_and_says_so(tmp_path):
    meta = blender_scene(tmp_path)
    pages = [Image.fromarray(np.full((8, 8, 3), v, np.uint8)) for v in (10, 200)]
    tif = tmp_path / "train" / "r_0.tif"
    pages[0].save(tif, save_all=True, append_images=pages[1:])
    meta["frames"][0]["file_path"] = "./train/r_0.tif"
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    with pytest.warns(RuntimeWarning) as record:
        views = load_blender(tmp_path, "train")
    assert [str(w.message) for w in record] == [
        f"{tif}: holds 2 frames (pages); only the first is read"
    ]  # (and no ResourceWarning: the file is closed; warnings are errors here)
    np.testing.assert_allclose(views[0].image, 10 / 255, atol=1e-6)


def test_a_damaged_later_frame_is_an_unreadable_image(tmp_path):
    """The first frame decodes, counting the frames fails: a DataError, not a traceback."""
    from xprc.data.datasets import read_image

    frames = [Image.fromarray(np.full((8, 8, 3), v, np.uint8)) for v in (10, 200)]
    whole = tmp_path / "whole.gif"
    frames[0].save(whole, save_all=True, append_images=frames[1:])
    data = whole.read_bytes()
    cut = tmp_path / "cut.gif"

    def frames_countable(n: int) -> bool:
        cut.write_bytes(data[:n])
        try:
            with Image.open(cut) as im:
                return im.n_frames > 0
        except Exception:
            return False

    # the longest cut whose frames cannot be counted (the second frame's data is damaged)
    n = next(n for n in range(len(data) - 1, 0, -1) if not frames_countable(n))
    cut.write_bytes(data[:n])
    with Image.open(cut) as im:
        im.load()  # frame 0 is intact: only the count fails
    with pytest.raises(DataError, match=r"unreadable image"):
        read_image(cut, "test", [])


def test_a_jpeg_preview_is_not_a_page(tmp_path):
    """Camera JPEGs carry an MPF preview (Pillow: MPO, 2 frames): no warning."""
    from xprc.data.datasets import read_image

    photo = Image.fromarray(np.full((16, 16, 3), 90, np.uint8))
    path = tmp_path / "cam.jpg"
    photo.save(path, format="MPO", save_all=True, append_images=[photo.resize((4, 4))])
    with Image.open(path) as im:
        assert im.format == "MPO" and im.n_frames == 2
    assert read_image(path, "test", []).size == (16, 16)  # (warnings are errors here)


def project(view: View, p):
    pc = view.viewmat[:3, :3].astype(np.float64) @ p + view.viewmat[:3, 3]
    uv = view.K.astype(np.float64) @ (pc / pc[2])
    return uv[:2], pc[2]


# --------------------------------------------------------------------------- Blender


def test_blender_loads_views_and_composites(tmp_path):
    meta = blender_scene(tmp_path)
    ds = load_blender(tmp_path, "train", background=(0.25, 0.5, 0.75))
    assert len(ds) == 3 and ds.points is None
    v = ds[1]
    assert v.name == "./train/r_1"
    assert (v.width, v.height, v.model) == (8, 8, "pinhole")
    assert v.image.shape == (8, 8, 3) and v.image.dtype == np.float32
    assert v.alpha.shape == (8, 8)
    src = np.asarray(Image.open(tmp_path / "train/r_1.png"), np.float32) / 255
    np.testing.assert_allclose(v.image[0, 0], [0.25, 0.5, 0.75])  # alpha 0: background
    np.testing.assert_allclose(v.image[0, 1], src[0, 1, :3])  # alpha 1: the colour
    a = src[..., 3:]
    np.testing.assert_allclose(v.image, src[..., :3] * a + (1 - a) * [0.25, 0.5, 0.75], atol=1e-6)
    fx = 0.5 * 8 / math.tan(0.45)
    np.testing.assert_allclose(v.K, [[fx, 0, 4], [0, fx, 4], [0, 0, 1]], rtol=1e-6)
    # The camera-to-world in OpenGL axes becomes a world-to-camera in OpenCV axes.
    c2w = np.asarray(meta["frames"][1]["transform_matrix"])
    np.testing.assert_allclose(v.position, c2w[:3, 3], atol=1e-5)
    np.testing.assert_allclose(
        np.linalg.inv(v.viewmat.astype(np.float64)), c2w @ np.diag([1, -1, -1, 1]), atol=1e-6
    )


def test_blender_axes_convention(tmp_path):
    # A camera at +z looking at the origin with OpenGL up = +y (identity rotation).
    c2w = np.eye(4)
    c2w[2, 3] = 4.0
    rgba_image(tmp_path / "a.png")
    frames = [{"file_path": "a.png", "transform_matrix": c2w.tolist()}]
    (tmp_path / "transforms_train.json").write_text(
        json.dumps({"camera_angle_x": 1.0, "frames": frames})
    )
    v = load_blender(tmp_path)[0]
    expected = np.diag([1.0, -1.0, -1.0, 1.0])
    expected[2, 3] = 4.0  # t = -R c with the centre c = (0, 0, 4)
    np.testing.assert_allclose(v.viewmat, expected, atol=1e-6)
    uv, z = project(v, np.zeros(3))
    np.testing.assert_allclose(uv, [4.0, 4.0])
    assert z == pytest.approx(4.0)
    uv_right, _ = project(v, np.array([0.5, 0, 0]))
    uv_up, _ = project(v, np.array([0, 0.5, 0]))
    assert uv_right[0] > 4.0  # world +x is image right
    assert uv_up[1] < 4.0  # OpenGL up is image up (smaller row)


def test_blender_view_camera_matches_numpy_projection(tmp_path):
    blender_scene(tmp_path)
    v = load_blender(tmp_path)[2]
    cam = v.camera()
    assert (cam.width, cam.height, cam.model) == (8, 8, "pinhole")
    p = np.array([0.3, -0.2, 0.1])
    pc = np.asarray(cam.world_to_camera(p.astype(np.float32)), np.float64)
    u, w = cam.project(*pc.astype(np.float32))
    uv, _ = project(v, p)
    np.testing.assert_allclose([float(u), float(w)], uv, rtol=1e-4)
    batch = load_blender(tmp_path).cameras()
    assert batch.viewmat.shape == (3, 4, 4)


def test_blender_downscale(tmp_path):
    blender_scene(tmp_path)
    full = load_blender(tmp_path)[0]
    half = load_blender(tmp_path, downscale=2)[0]
    assert half.image.shape == (4, 4, 3) and (half.width, half.height) == (4, 4)
    np.testing.assert_allclose(half.K[:2], full.K[:2] / 2, rtol=1e-6)
    np.testing.assert_array_equal(half.viewmat, full.viewmat)
    with pytest.raises(ValueError, match="downscale must be a number >= 1"):
        load_blender(tmp_path, downscale=0.5)
    assert load_blender(tmp_path, downscale=8)[0].image.shape == (1, 1, 3)
    # (it was read as one pixel, whatever the factor)
    for factor in (9, 17):
        with pytest.raises(DataError, match=rf"downscale {factor} leaves less than a pixel of "
                           r"this 8x8 image \(it can be at most 8\)"):  # fmt: skip
            load_blender(tmp_path, downscale=factor)


def test_blender_instant_ngp_intrinsics_and_points(tmp_path):
    rgba_image(tmp_path / "img.png", size=(8, 6))
    meta = {
        "fl_x": 10.0,
        "fl_y": 11.0,
        "cx": 3.5,
        "cy": 2.5,
        "w": 8,
        "h": 6,
        "frames": [{"file_path": "img.png", "transform_matrix": c2w_gl([0, 3, 1]).tolist()}],
    }
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    save_points_ply(tmp_path / "points3d.ply", np.ones((5, 3)), np.full((5, 3), 0.2))
    ds = load_blender(tmp_path)
    np.testing.assert_allclose(ds[0].K, [[10, 0, 3.5], [0, 11, 2.5], [0, 0, 1]])
    assert ds.points.shape == (5, 3)
    np.testing.assert_allclose(ds.colors, round(0.2 * 255) / 255, rtol=1e-6)


@pytest.mark.parametrize("extra,fy", [({"camera_angle_y": 0.6}, 3.0 / math.tan(0.3)),
                                      ({"fl_y": 9.5}, 9.5), ({}, None)])  # fmt: skip
def test_blender_vertical_focal_beside_camera_angle_x(tmp_path, extra, fy):
    """`camera_angle_y` or `fl_y` next to `camera_angle_x` set fy (they were ignored: fy = fx)."""
    rgba_image(tmp_path / "img.png", size=(8, 6))
    frame = {"file_path": "img.png", "transform_matrix": c2w_gl([0, 3, 1]).tolist()}
    meta = {"camera_angle_x": 0.9, **extra, "frames": [frame]}
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    K = load_blender(tmp_path)[0].K
    fx = 4.0 / math.tan(0.45)
    np.testing.assert_allclose([K[0, 0], K[1, 1]], [fx, fx if fy is None else fy], rtol=1e-6)


def test_blender_camera_angle_y_out_of_range(tmp_path):
    blender_scene(tmp_path, n=1)
    meta = json.loads((tmp_path / "transforms_train.json").read_text())
    meta["camera_angle_y"] = 4.0
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    expect(
        tmp_path / "transforms_train.json",
        "frame 0: 'camera_angle_y' must be in (0, pi), got 4.0",
        load_blender,
        tmp_path,
    )


def test_blender_rgb_and_grey_images(tmp_path):
    blender_scene(tmp_path, n=2)
    Image.fromarray(np.full((8, 8, 3), 200, np.uint8)).save(tmp_path / "train/r_0.png")
    Image.fromarray(np.full((8, 8), 100, np.uint8)).save(tmp_path / "train/r_1.png")
    ds = load_blender(tmp_path)
    np.testing.assert_allclose(ds[0].image, 200 / 255, rtol=1e-6)
    np.testing.assert_allclose(ds[1].image, 100 / 255, rtol=1e-6)
    assert ds[0].alpha is None


# --------------------------------------------------------------------------- Blender errors


def expect(root_file, problem, fn, *args, **kw):
    with pytest.raises(DataError) as e:
        fn(*args, **kw)
    assert str(e.value) == f"{root_file}: error: {problem}"


def test_blender_missing_transforms(tmp_path):
    expect(tmp_path / "transforms_val.json", "file not found", load_blender, tmp_path, "val")


def test_blender_bad_json(tmp_path):
    (tmp_path / "transforms_train.json").write_text('{"camera_angle_x": 0.5,\n "frames": [}')
    expect(
        tmp_path / "transforms_train.json",
        "invalid JSON: Expecting value (line 2, column 13)",
        load_blender,
        tmp_path,
    )


def test_blender_missing_keys(tmp_path):
    path = tmp_path / "transforms_train.json"
    path.write_text(json.dumps({"camera_angle_x": 0.5}))
    expect(path, "missing 'frames' list", load_blender, tmp_path)
    path.write_text(json.dumps({"camera_angle_x": 0.5, "frames": []}))
    expect(path, "'frames' is empty", load_blender, tmp_path)
    meta = blender_scene(tmp_path)
    del meta["camera_angle_x"]
    path.write_text(json.dumps(meta))
    expect(path, "missing 'camera_angle_x' (or 'fl_x')", load_blender, tmp_path)
    meta = blender_scene(tmp_path)
    del meta["frames"][2]["transform_matrix"]
    path.write_text(json.dumps(meta))
    expect(path, "frame 2: missing 'transform_matrix'", load_blender, tmp_path)
    meta = blender_scene(tmp_path)
    meta["frames"][1]["transform_matrix"] = [[1, 0, 0], [0, 1, 0]]
    path.write_text(json.dumps(meta))
    expect(
        path, "frame 1: 'transform_matrix' must be a 4x4 matrix of numbers", load_blender, tmp_path
    )
    meta = blender_scene(tmp_path)
    del meta["frames"][0]["file_path"]
    path.write_text(json.dumps(meta))
    expect(path, "frame 0: missing 'file_path'", load_blender, tmp_path)
    meta = blender_scene(tmp_path)
    meta["camera_angle_x"] = "wide"
    path.write_text(json.dumps(meta))
    expect(
        path,
        "frame 0: 'camera_angle_x' must be a finite number, got 'wide'",
        load_blender,
        tmp_path,
    )


def test_blender_missing_image(tmp_path):
    blender_scene(tmp_path)
    (tmp_path / "train/r_1.png").unlink()
    expect(
        tmp_path / "train/r_1.png",
        "image file not found (referenced by transforms_train.json frame 1)",
        load_blender,
        tmp_path,
    )


def test_blender_unreadable_image(tmp_path):
    blender_scene(tmp_path)
    (tmp_path / "train/r_2.png").write_bytes(b"not an image")
    with pytest.raises(DataError) as e:
        load_blender(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 'train/r_2.png'}: error: unreadable image (")


def test_blender_image_size_mismatch(tmp_path):
    blender_scene(tmp_path)
    rgba_image(tmp_path / "train/r_2.png", size=(8, 6))
    expect(
        tmp_path / "train/r_2.png",
        "image is 8x6, but r_0.png is 8x8; all images of a split must have one size",
        load_blender,
        tmp_path,
    )
    meta = blender_scene(tmp_path) | {"w": 16, "h": 16}
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    expect(
        tmp_path / "train/r_0.png",
        "image is 8x8, but transforms_train.json says 16x16",
        load_blender,
        tmp_path,
    )


# --------------------------------------------------------------------------- COLMAP fixtures

MODEL_IDS = {
    "SIMPLE_PINHOLE": 0,
    "PINHOLE": 1,
    "SIMPLE_RADIAL": 2,
    "RADIAL": 3,
    "OPENCV": 4,
    "OPENCV_FISHEYE": 5,
    "FULL_OPENCV": 6,
    "FOV": 7,
}

# (id, model, width, height, params)
CAMERAS = [
    (1, "PINHOLE", 16, 12, [20.0, 21.0, 8.0, 6.0]),
    (2, "OPENCV", 16, 12, [18.0, 19.0, 7.5, 6.5, 0.1, -0.02, 0.001, 0.002]),
    (3, "OPENCV_FISHEYE", 16, 12, [15.0, 15.0, 8.0, 6.0, 0.01, 0.02, 0.03, 0.04]),
    (4, "SIMPLE_RADIAL", 16, 12, [17.0, 8.0, 6.0, 0.0]),
]
# (id, qvec wxyz, tvec, camera id, name); ids and names are deliberately not in the same order.
S = math.sqrt(0.5)
IMAGES = [
    (5, [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 4.0], 1, "c.png"),
    (2, [S, 0.0, 0.0, S], [0.1, 0.2, 3.0], 2, "a.png"),
    (9, [S, S, 0.0, 0.0], [0.0, -0.5, 5.0], 3, "b.png"),
    (3, [0.5, 0.5, 0.5, 0.5], [1.0, 0.0, 4.0], 4, "sub dir/d.png"),
]
POINTS = [
    (1, [0.0, 0.1, 0.2], [255, 0, 10], 0.5, [(5, 0), (2, 1)]),
    (7, [1, 2, 3], [1, 2, 3], 1, []),
]


def write_colmap_bin(sparse, cameras=CAMERAS, images=IMAGES, points=POINTS):
    sparse.mkdir(parents=True, exist_ok=True)
    b = struct.pack("<Q", len(cameras))
    for cid, model, w, h, params in cameras:
        b += struct.pack("<iiQQ", cid, MODEL_IDS[model], w, h)
        b += struct.pack(f"<{len(params)}d", *params)
    (sparse / "cameras.bin").write_bytes(b)
    b = struct.pack("<Q", len(images))
    for k, (iid, q, t, cid, name) in enumerate(images):
        b += struct.pack("<i4d3di", iid, *q, *t, cid) + name.encode() + b"\0"
        b += struct.pack("<Q", k) + b"".join(struct.pack("<ddq", 1.0, 2.0, -1) for _ in range(k))
    (sparse / "images.bin").write_bytes(b)
    b = struct.pack("<Q", len(points))
    for pid, xyz, rgb, err, track in points:
        b += struct.pack("<Q3d3BdQ", pid, *xyz, *rgb, err, len(track))
        b += b"".join(struct.pack("<ii", *obs) for obs in track)
    (sparse / "points3D.bin").write_bytes(b)


def write_colmap_txt(sparse, cameras=CAMERAS, images=IMAGES, points=POINTS):
    sparse.mkdir(parents=True, exist_ok=True)
    lines = ["# Camera list with one line of data per camera:", "#   CAMERA_ID, MODEL, ..."]
    lines += [f"{c} {m} {w} {h} " + " ".join(map(repr, p)) for c, m, w, h, p in cameras]
    (sparse / "cameras.txt").write_text("\n".join(lines) + "\n")
    lines = ["# Image list with two lines of data per image:", ""]
    for k, (iid, q, t, cid, name) in enumerate(images):
        lines.append(" ".join(map(repr, [iid, *q, *t, cid])) + " " + name)
        lines.append(" ".join("1.0 2.0 -1" for _ in range(k)))  # the first one stays empty
    (sparse / "images.txt").write_text("\n".join(lines) + "\n")
    lines = ["# 3D point list"]
    for pid, xyz, rgb, err, track in points:
        tr = " ".join(f"{a} {b}" for a, b in track)
        lines.append(" ".join(map(str, [pid, *xyz, *rgb, err])) + " " + tr)
    (sparse / "points3D.txt").write_text("\n".join(lines) + "\n")


def colmap_scene(root, fmt="bin", images_dir="images"):
    (write_colmap_bin if fmt == "bin" else write_colmap_txt)(root / "sparse" / "0")
    for k, (_, _, _, _, name) in enumerate(IMAGES):
        path = root / images_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(k)
        Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)).save(path)


def rotmat(q):
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


# --------------------------------------------------------------------------- COLMAP


@pytest.mark.parametrize("fmt", ["bin", "txt"])
def test_colmap_loads(tmp_path, fmt):
    colmap_scene(tmp_path, fmt)
    ds = load_colmap(tmp_path)
    assert [v.name for v in ds] == ["a.png", "b.png", "c.png", "sub dir/d.png"]
    by_name = {v.name: v for v in ds}
    for _, q, t, _, name in IMAGES:
        v = by_name[name]
        np.testing.assert_allclose(v.viewmat[:3, :3], rotmat(q), atol=1e-6)
        np.testing.assert_allclose(v.viewmat[:3, 3], t, atol=1e-6)
        np.testing.assert_array_equal(v.viewmat[3], [0, 0, 0, 1])
        assert v.image.shape == (12, 16, 3) and (v.width, v.height) == (16, 12)
        src = np.asarray(Image.open(tmp_path / "images" / name), np.float32) / 255
        np.testing.assert_array_equal(v.image, src)
    a, b, c, d = (by_name[n] for n in ("a.png", "b.png", "c.png", "sub dir/d.png"))
    assert c.model == "pinhole"
    np.testing.assert_allclose(c.K, [[20, 0, 8], [0, 21, 6], [0, 0, 1]])
    np.testing.assert_array_equal(c.dist, 0)
    assert a.model == "opencv"  # k1 k2 p1 p2 land in slots 0, 1, 6, 7
    np.testing.assert_allclose(a.dist, [0.1, -0.02, 0, 0, 0, 0, 0.001, 0.002, 0, 0, 0, 0])
    assert b.model == "fisheye"
    np.testing.assert_allclose(b.dist[:4], [0.01, 0.02, 0.03, 0.04])
    np.testing.assert_array_equal(b.dist[4:], 0)
    assert d.model == "pinhole"  # SIMPLE_RADIAL with k = 0 needs no distortion
    np.testing.assert_allclose(d.K, [[17, 0, 8], [0, 17, 6], [0, 0, 1]])
    np.testing.assert_allclose(ds.points, [[0, 0.1, 0.2], [1, 2, 3]])
    np.testing.assert_allclose(ds.colors, np.array([[255, 0, 10], [1, 2, 3]]) / 255, rtol=1e-6)
    assert ds.points.dtype == ds.colors.dtype == np.float32
    assert a.camera().model == "opencv" and b.camera().model == "fisheye"


def test_colmap_bin_and_txt_agree(tmp_path):
    write_colmap_bin(tmp_path / "b")
    write_colmap_txt(tmp_path / "t")
    cb, ib, pb, rb = read_colmap_model(tmp_path / "b")
    ct, it, pt, rt = read_colmap_model(tmp_path / "t")
    assert cb.keys() == ct.keys() and ib.keys() == it.keys()
    for k in cb:
        assert (cb[k].model, cb[k].width, cb[k].height) == (ct[k].model, ct[k].width, ct[k].height)
        np.testing.assert_array_equal(cb[k].params, ct[k].params)
    for k in ib:
        assert (ib[k].name, ib[k].camera_id) == (it[k].name, it[k].camera_id)
        np.testing.assert_array_equal(ib[k].qvec, it[k].qvec)
    np.testing.assert_array_equal(pb, pt)
    np.testing.assert_array_equal(rb, rt)


def test_colmap_full_opencv_and_radial_slots(tmp_path):
    cams = [
        (1, "FULL_OPENCV", 16, 12, [20, 20, 8, 6, 1, 2, 3, 4, 5, 6, 7, 8]),
        (2, "RADIAL", 16, 12, [20, 8, 6, 0.1, 0.2]),
        (3, "SIMPLE_PINHOLE", 16, 12, [20, 8, 6]),
    ]
    imgs = [(i, [1.0, 0, 0, 0], [0, 0, 3.0], i, f"{i}.png") for i in (1, 2, 3)]
    write_colmap_bin(tmp_path / "sparse", cams, imgs)  # sparse/ without 0/ is accepted too
    for i in (1, 2, 3):
        (tmp_path / "images").mkdir(exist_ok=True)
        Image.fromarray(np.zeros((12, 16, 3), np.uint8)).save(tmp_path / "images" / f"{i}.png")
    v1, v2, v3 = load_colmap(tmp_path)
    # FULL_OPENCV stores k1 k2 p1 p2 k3 k4 k5 k6; ours is k1..k6 p1 p2.
    np.testing.assert_allclose(v1.dist, [1, 2, 5, 6, 7, 8, 3, 4, 0, 0, 0, 0])
    np.testing.assert_allclose(v2.dist[:3], [0.1, 0.2, 0])
    assert (v1.model, v2.model, v3.model) == ("opencv", "opencv", "pinhole")


def test_colmap_downscale_resizes_or_uses_images_n(tmp_path):
    colmap_scene(tmp_path)
    full = {v.name: v for v in load_colmap(tmp_path)}
    half = {v.name: v for v in load_colmap(tmp_path, downscale=2)}
    for name, v in half.items():
        assert v.image.shape == (6, 8, 3) and (v.width, v.height) == (8, 6)
        np.testing.assert_allclose(v.K[:2], full[name].K[:2] / 2, rtol=1e-6)
    # A pre-shrunk images_2/ (Mip-NeRF 360 layout) is used as is.
    for _, _, _, _, name in IMAGES:
        path = tmp_path / "images_2" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((6, 8, 3), 77, np.uint8)).save(path)
    v = load_colmap(tmp_path, downscale=2)[0]
    np.testing.assert_allclose(v.image, 77 / 255, rtol=1e-6)


def test_split_every_eighth_is_test():
    view = View(
        "v",
        np.zeros((1, 1, 3), np.float32),
        np.eye(4, dtype=np.float32),
        np.eye(3, dtype=np.float32),
        1,
        1,
    )
    ds = Dataset(tuple(dataclass_copy(view, f"{i:02d}") for i in range(17)))
    train, test = split_every(ds)
    assert [v.name for v in test] == ["00", "08", "16"]
    assert len(train) == 14 and "08" not in [v.name for v in train]


def dataclass_copy(view, name):
    import dataclasses

    return dataclasses.replace(view, name=name)


def test_load_scene_detects_the_format(tmp_path):
    blender_scene(tmp_path / "bl", n=2)
    blender_scene(tmp_path / "bl", n=1, split="test")
    train, test = load_scene(tmp_path / "bl")
    assert (len(train), len(test)) == (2, 1)
    assert train.scene_extent() > 0
    colmap_scene(tmp_path / "cm")
    train, test = load_scene(tmp_path / "cm")
    assert [v.name for v in test] == ["a.png"] and len(train) == 3
    expect(
        tmp_path,
        "not a dataset: expected transforms_train.json (Blender) or sparse/ (COLMAP)",
        load_scene,
        tmp_path,
    )


# --------------------------------------------------------------------------- COLMAP errors


def test_colmap_missing_model(tmp_path):
    expect(tmp_path / "sparse/0", "COLMAP model folder not found", load_colmap, tmp_path)
    colmap_scene(tmp_path)
    (tmp_path / "sparse/0/points3D.bin").unlink()
    expect(
        tmp_path / "sparse/0/points3D.bin",
        "file not found (nor points3D.txt)",
        load_colmap,
        tmp_path,
    )


def test_colmap_unknown_camera_model_id(tmp_path):
    colmap_scene(tmp_path)
    path = tmp_path / "sparse/0/cameras.bin"
    b = bytearray(path.read_bytes())
    struct.pack_into("<i", b, 8 + 4, 42)  # model id of the first camera
    path.write_bytes(bytes(b))
    expect(path, "camera 1: unknown camera model id 42", load_colmap, tmp_path)


def test_colmap_unsupported_camera_model(tmp_path):
    cams = [(1, "FOV", 16, 12, [20, 20, 8, 6, 0.5])]
    write_colmap_bin(tmp_path / "sparse/0", cams, [(1, [1, 0, 0, 0], [0, 0, 1], 1, "x.png")])
    expect(
        tmp_path / "sparse/0/cameras.bin",
        "camera 1: model FOV is not supported (supported: SIMPLE_PINHOLE, PINHOLE, "
        "SIMPLE_RADIAL, RADIAL, OPENCV, FULL_OPENCV, OPENCV_FISHEYE)",
        load_colmap,
        tmp_path,
    )


@pytest.mark.parametrize(
    "stem, cut, where",
    [
        ("cameras", 4, "the header"),
        ("cameras", -8, "camera 4 of 4"),
        ("images", -30, "image 4 of 4"),
        ("images", -90, "image 4 of 4"),
        ("points3D", -1, "point 2 of 2"),
    ],
)
def test_colmap_truncated_bin(tmp_path, stem, cut, where):
    colmap_scene(tmp_path)
    path = tmp_path / f"sparse/0/{stem}.bin"
    path.write_bytes(path.read_bytes()[:cut])
    problem = f"file is truncated (ends inside {where})"
    if cut == -30:  # inside the keypoints: their count is checked against the bytes left
        problem = (
            "file is truncated or corrupt (image 4 of 4 declares 3 keypoints of at least 24 "
            "bytes, but only 42 bytes follow)"
        )
    expect(path, problem, load_colmap, tmp_path)


def test_colmap_txt_unknown_camera_reference(tmp_path):
    images = IMAGES[:2] + [(9, [1.0, 0, 0, 0], [0, 0, 1.0], 7, "b.png")]
    write_colmap_txt(tmp_path / "sparse/0", images=images)
    expect(
        tmp_path / "sparse/0/images.txt",
        "image 'b.png' (id 9) uses camera id 7, which cameras.txt does not define",
        load_colmap,
        tmp_path,
    )


def test_colmap_txt_malformed_lines(tmp_path):
    sparse = tmp_path / "sparse/0"
    write_colmap_txt(sparse)
    path = sparse / "cameras.txt"
    path.write_text("1 PINHOLE 16 12 20 21 8\n")
    expect(path, "line 1: camera model PINHOLE takes 4 parameters, got 3", load_colmap, tmp_path)
    path.write_text("# c\n1 PINHOL 16 12 20 21 8 6\n")
    expect(path, "line 2: unknown camera model 'PINHOL'", load_colmap, tmp_path)
    path.write_text("1 PINHOLE 16 twelve 20 21 8 6\n")
    expect(
        path,
        "line 1: expected CAMERA_ID MODEL WIDTH HEIGHT PARAMS[], got 'twelve'",
        load_colmap,
        tmp_path,
    )
    write_colmap_txt(sparse)
    (sparse / "points3D.txt").write_text("1 0.0 0.1\n")
    expect(
        sparse / "points3D.txt",
        "line 1: expected POINT3D_ID X Y Z R G B ERROR TRACK[]",
        load_colmap,
        tmp_path,
    )


@pytest.mark.parametrize("fmt", ["bin", "txt"])
def test_colmap_repeated_point_ids_are_refused(tmp_path, fmt):
    """A POINT3D_ID twice (the point was kept twice, without a word)."""
    sparse = tmp_path / "sparse" / "0"
    colmap_scene(tmp_path, fmt)
    twice = [*POINTS, (1, [4.0, 5.0, 6.0], [0, 0, 0], 0.1, [])]
    (write_colmap_bin if fmt == "bin" else write_colmap_txt)(sparse, points=twice)
    where = "point 3 of 3: POINT3D_ID 1 repeats point 1" if fmt == "bin" else (
        "line 4: POINT3D_ID 1 repeats line 2")  # fmt: skip
    expect(sparse / f"points3D.{fmt}", where, load_colmap, tmp_path)


def test_colmap_models_beside_sparse_0_are_named(tmp_path):
    colmap_scene(tmp_path)
    write_colmap_bin(tmp_path / "sparse" / "1")
    write_colmap_bin(tmp_path / "sparse" / "2")
    with pytest.warns(RuntimeWarning) as record:
        views = load_colmap(tmp_path)
    assert len(views) == len(IMAGES)
    assert [str(w.message) for w in record] == [
        f"{tmp_path / 'sparse'}: holds 3 COLMAP models: only sparse/0 is read, not sparse/1, "
        "sparse/2 (COLMAP splits what it cannot join; each model has its own images and frame)"
    ]


def test_colmap_image_errors(tmp_path):
    colmap_scene(tmp_path)
    (tmp_path / "images/b.png").unlink()
    expect(
        tmp_path / "images/b.png",
        "image file not found (referenced by images.bin, image id 9)",
        load_colmap,
        tmp_path,
    )
    Image.fromarray(np.zeros((10, 16, 3), np.uint8)).save(tmp_path / "images/b.png")
    expect(
        tmp_path / "images/b.png",
        "image is 16x10, but camera 3 expects 16x12",
        load_colmap,
        tmp_path,
    )
    expect(
        tmp_path / "pics",
        "image folder not found; the scene has images: choose one with --images",
        load_colmap,
        tmp_path,
        images_dir="pics",
    )


# --------------------------------------------------------------------------- untrusted datasets
# (issue 15: each of these was a traceback, a MemoryError or silently wrong data)


def png_bytes(width, height, bit_depth, color_type, rows=b""):
    """A PNG whose header says `width x height`; `rows` (filtered scanlines) may be short."""

    def chunk(kind, data):
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )  # fmt: skip


@pytest.mark.parametrize("size", [(100_000, 100_000), (8193, 8192)])
def test_image_pixel_budget_is_checked_before_decoding(tmp_path, size):
    blender_scene(tmp_path, n=1)
    path = tmp_path / "train/r_0.png"
    path.write_bytes(png_bytes(*size, 8, 2))
    with pytest.raises(DataError) as e:
        load_blender(tmp_path)
    assert str(e.value).startswith(f"{path}: error: image is ")
    if size[0] * size[1] < 2 * Image.MAX_IMAGE_PIXELS:
        assert str(e.value) == (
            f"{path}: error: image is {size[0]}x{size[1]} pixels, over the budget of "
            "67,108,864 pixels"
        )
    else:  # Pillow itself refuses it while reading the header; reported the same way
        assert str(e.value).startswith(
            f"{path}: error: image is over the budget of 67,108,864 pixels (Image size "
        )


def test_16_bit_grey_png_is_read_at_full_range(tmp_path):
    blender_scene(tmp_path, n=1)
    grey = (np.arange(64, dtype=np.uint32).reshape(8, 8) * 1000 + 500).astype(np.uint16)
    rows = b"".join(b"\0" + grey[i].astype(">u2").tobytes() for i in range(8))
    (tmp_path / "train/r_0.png").write_bytes(png_bytes(8, 8, 16, 0, rows))
    ds = load_blender(tmp_path)
    want = np.repeat((grey / 65535.0)[..., None], 3, axis=-1)
    np.testing.assert_allclose(ds[0].image, want, rtol=1e-6)
    assert ds[0].image.max() < 1.0  # not clipped to white (63500 / 65535)
    half = load_blender(tmp_path, downscale=2)[0].image
    assert half.shape == (4, 4, 3) and 0.0 < half.min() and half.max() < 1.0


def test_16_bit_colour_png_keeps_its_scale(tmp_path):
    """Pillow reads 16-bit colour at 8-bit precision: values keep their scale, not clipped."""
    blender_scene(tmp_path, n=1)
    rgb = (np.arange(8 * 8 * 3, dtype=np.uint32).reshape(8, 8, 3) * 300).astype(np.uint16)
    rows = b"".join(b"\0" + rgb[i].astype(">u2").tobytes() for i in range(8))
    (tmp_path / "train/r_0.png").write_bytes(png_bytes(8, 8, 16, 2, rows))
    with pytest.warns(RuntimeWarning, match=r"1 of 1 images are 16-bit colour, read at 8 bits"):
        ds = load_blender(tmp_path)
    np.testing.assert_allclose(ds[0].image, rgb / 65535.0, atol=1 / 255)


def test_32_bit_images_are_refused(tmp_path):
    blender_scene(tmp_path, n=1)
    path = tmp_path / "train/r_0.png"
    Image.fromarray(np.full((8, 8), 7, np.int32)).save(path.with_suffix(".tiff"))
    frames = json.loads((tmp_path / "transforms_train.json").read_text())
    frames["frames"][0]["file_path"] = "./train/r_0.tiff"
    (tmp_path / "transforms_train.json").write_text(json.dumps(frames))
    expect(
        path.with_suffix(".tiff"),
        "unsupported image mode 'I' (32-bit pixels)",
        load_blender,
        tmp_path,
    )


def test_transforms_json_nested_deeply(tmp_path):
    path = tmp_path / "transforms_train.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    expect(path, "invalid JSON: nested too deeply", load_blender, tmp_path)


@pytest.mark.parametrize("key,value", [("fl_x", 0), ("fl_x", -500.0), ("fl_y", 0.0)])
def test_blender_focal_length_must_be_positive(tmp_path, key, value):
    meta = blender_scene(tmp_path, n=1)
    meta.update({"fl_x": 500.0, key: value})
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    expect(
        tmp_path / "transforms_train.json",
        f"frame 0: '{key}' must be positive, got {float(value)}",
        load_blender,
        tmp_path,
    )


OUTSIDE = "points outside the dataset folder {root}"
FOLDER = "names the dataset folder, not a file in it"


@pytest.mark.parametrize(
    "file_path,problem",
    [("../outside/r_0", OUTSIDE), ("/etc/passwd", OUTSIDE), ("./train/../../r_0", OUTSIDE),
     ("", FOLDER), (".", FOLDER), ("train/..", FOLDER),
     ("./train/r_0\0x", "contains a NUL character")],
)  # fmt: skip
def test_blender_file_path_names_a_file_in_the_dataset(tmp_path, file_path, problem):
    """Outside the folder is refused; '' or '.' used to read ROOT.png, a sibling of the dataset
    folder; a NUL character was a ValueError traceback from os.stat."""
    root = tmp_path / "scene"
    meta = blender_scene(root, n=1)
    rgba_image(tmp_path / "outside" / "r_0.png")
    rgba_image(tmp_path / "scene.png")
    meta["frames"][0]["file_path"] = file_path
    (root / "transforms_train.json").write_text(json.dumps(meta))
    expect(
        root / "transforms_train.json",
        f"frame 0: 'file_path' {file_path!r} {problem.format(root=root)}",
        load_blender,
        root,
    )


def test_blender_file_path_may_go_down_and_up_inside(tmp_path):
    meta = blender_scene(tmp_path, n=1)
    meta["frames"][0]["file_path"] = "./train/../train/r_0"
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    assert len(load_blender(tmp_path)) == 1


@pytest.mark.parametrize("count", [2**40, 2**64 - 1])
def test_colmap_points_header_count(tmp_path, count):
    colmap_scene(tmp_path)
    path = tmp_path / "sparse/0/points3D.bin"
    path.write_bytes(struct.pack("<Q", count) + path.read_bytes()[8:])
    expect(
        path,
        f"file is truncated or corrupt (the header declares {count} points of at least 51 "
        "bytes, but only 118 bytes follow)",
        load_colmap,
        tmp_path,
    )


@pytest.mark.parametrize("stem,size,noun", [("cameras", 24, "cameras"), ("images", 73, "images")])
def test_colmap_header_counts(tmp_path, stem, size, noun):
    colmap_scene(tmp_path)
    path = tmp_path / f"sparse/0/{stem}.bin"
    left = len(path.read_bytes()) - 8
    path.write_bytes(struct.pack("<Q", 2**62) + path.read_bytes()[8:])
    expect(
        path,
        f"file is truncated or corrupt (the header declares {2**62} {noun} of at least {size} "
        f"bytes, but only {left} bytes follow)",
        load_colmap,
        tmp_path,
    )


@pytest.mark.parametrize("params,problem", [
    ([0.0, 21.0, 8.0, 6.0], "focal lengths must be positive, got fx=0.0, fy=21.0"),
    ([20.0, -1.0, 8.0, 6.0], "focal lengths must be positive, got fx=20.0, fy=-1.0"),
    ([20.0, 21.0, math.nan, 6.0], "parameters must be finite numbers"),
])  # fmt: skip
def test_colmap_camera_intrinsics(tmp_path, params, problem):
    colmap_scene(tmp_path)
    cameras = [(1, "PINHOLE", 16, 12, params)] + CAMERAS[1:]
    write_colmap_bin(tmp_path / "sparse/0", cameras=cameras)
    expect(tmp_path / "sparse/0/cameras.bin", f"camera 1: {problem}", load_colmap, tmp_path)


@pytest.mark.parametrize("q,t,problem", [
    ([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 4.0], "qvec is zero, not a rotation"),
    ([1.0, 0.0, math.nan, 0.0], [0.0, 0.0, 4.0], "qvec and tvec must be finite numbers"),
    ([1.0, 0.0, 0.0, 0.0], [0.0, math.inf, 4.0], "qvec and tvec must be finite numbers"),
])  # fmt: skip
def test_colmap_image_pose(tmp_path, q, t, problem):
    colmap_scene(tmp_path, fmt="txt")
    images = [(5, q, t, 1, "c.png")] + IMAGES[1:]
    write_colmap_txt(tmp_path / "sparse/0", images=images)
    expect(
        tmp_path / "sparse/0/images.txt",
        f"line 3: image 'c.png' (id 5): {problem}",
        load_colmap,
        tmp_path,
    )


def test_colmap_image_name_stays_in_the_image_folder(tmp_path):
    colmap_scene(tmp_path)
    images = [(5, [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 4.0], 1, "../sparse/0/c.png")] + IMAGES[1:]
    write_colmap_bin(tmp_path / "sparse/0", images=images)
    expect(
        tmp_path / "sparse/0/images.bin",
        "image 5: name '../sparse/0/c.png' points outside the dataset folder "
        f"{tmp_path / 'images'}",
        load_colmap,
        tmp_path,
    )


def test_a_file_or_directory_in_the_wrong_place(tmp_path):
    scene = tmp_path / "scene.ply"
    scene.write_bytes(b"ply\n")
    expect(scene, "dataset not a folder", load_scene, scene)
    expect(tmp_path / "nope", "dataset folder not found", load_scene, tmp_path / "nope")
    blender_scene(tmp_path, n=1)
    (tmp_path / "train/r_0.png").unlink()
    (tmp_path / "train/r_0.png").mkdir()
    expect(
        tmp_path / "train/r_0.png",
        "is a directory, not a file (referenced by transforms_train.json frame 0)",
        load_blender,
        tmp_path,
    )
    (tmp_path / "transforms_train.json").unlink()
    (tmp_path / "transforms_train.json").mkdir()
    expect(tmp_path / "transforms_train.json", "is a directory, not a file", load_blender, tmp_path)


@pytest.mark.parametrize("key,what", [("fl_x", "the intrinsics"), ("cx", "the intrinsics")])
def test_blender_values_beyond_float32(tmp_path, key, what):
    """Found by tests/test_fuzz_data.py: a RuntimeWarning (overflow in cast), then inf in K."""
    meta = blender_scene(tmp_path, n=1)
    meta.update({"fl_x": 500.0, key: 3.4028235677973366e38})
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    expect(
        tmp_path / "transforms_train.json",
        f"frame 0: {what} out of float32 range",
        load_blender,
        tmp_path,
    )


def test_colmap_values_beyond_float32(tmp_path):
    colmap_scene(tmp_path)
    write_colmap_bin(tmp_path / "sparse/0", points=[(1, [1e300, 0.0, 0.0], [1, 2, 3], 0.5, [])])
    expect(tmp_path / "sparse/0/points3D.bin", "point coordinates out of float32 range",
           load_colmap, tmp_path)  # fmt: skip
    cameras = [(1, "PINHOLE", 16, 12, [1e300, 21.0, 8.0, 6.0])] + CAMERAS[1:]
    write_colmap_bin(tmp_path / "sparse/0", cameras=cameras)
    expect(tmp_path / "sparse/0/cameras.bin", "camera 1: the intrinsics out of float32 range",
           load_colmap, tmp_path)  # fmt: skip


@pytest.mark.parametrize("scale", [np.diag([2.0, 1.0, 1.0]), np.diag([1.0, 1.0, -1.0])])
def test_blender_transform_must_be_a_pose(tmp_path, scale):
    """A scaled or mirrored matrix used to load and fail later in Camera, without the file."""
    meta = blender_scene(tmp_path, n=1)
    m = np.asarray(meta["frames"][0]["transform_matrix"])
    m[:3, :3] = m[:3, :3] @ scale
    meta["frames"][0]["transform_matrix"] = m.tolist()
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    expect(
        tmp_path / "transforms_train.json",
        "frame 0: 'transform_matrix' is not a pose (its 3x3 part is not a rotation)",
        load_blender,
        tmp_path,
    )


def test_blender_transform_last_row_must_be_0001(tmp_path):
    """A last row other than 0 0 0 1 skews the inverted matrix: it used to load and fail later
    in Camera ('viewmat[:3, :3] must be a rotation'), without the file."""
    meta = blender_scene(tmp_path, n=1)
    meta["frames"][0]["transform_matrix"][3] = [0.5, 0.0, 0.0, 1.0]
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    expect(
        tmp_path / "transforms_train.json",
        "frame 0: 'transform_matrix' is not a pose (its last row is not 0 0 0 1)",
        load_blender,
        tmp_path,
    )


def test_colmap_txt_point_colour_beyond_int64_and_nan_point(tmp_path):
    """Found by tests/test_fuzz_data.py: an RGB of 23 digits was an OverflowError; then it was
    clipped without a word. Now any colour outside 0..255 is an error naming the line."""
    colmap_scene(tmp_path, fmt="txt")
    for rgb, shown in (([10**22, 5, 7], "10000000000000000000000 5 7"), ([255, -5, 7], "255 -5 7")):
        write_colmap_txt(tmp_path / "sparse/0", points=[(1, [0.0, 0.1, 0.2], rgb, 0.5, [])])
        want = rf"points3D.txt: error: line \d+: point colour {shown} is outside"
        with pytest.raises(DataError, match=want):
            load_colmap(tmp_path)
    write_colmap_txt(tmp_path / "sparse/0", points=[(1, [0.0, 0.1, 0.2], [255, 0, 7], 0.5, [])])
    np.testing.assert_allclose(load_colmap(tmp_path).colors, [[1.0, 0.0, 7 / 255]], rtol=1e-6)
    write_colmap_txt(tmp_path / "sparse/0", points=[(1, [math.nan, 0.1, 0.2], [1, 2, 3], 0.5, [])])
    expect(
        tmp_path / "sparse/0/points3D.txt", "point coordinates not finite", load_colmap, tmp_path
    )
