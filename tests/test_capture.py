"""The benchmark capture (`xprc capture`, xprc.data.capture) at a tiny size: the COLMAP files
against the binary format (read by an independent parser here and by our reader), points near
the scene's surfaces, determinism, poses that put points on their colours, the cache, the
--images / --test-every options and the device memory check."""

from __future__ import annotations

import argparse
import os
import struct

import numpy as np
import pytest
from PIL import Image

from xprc.cli import main
from xprc.data.capture import CaptureParams, generate_capture, scene_key
from xprc.data.capture_scene import WALL_HEIGHT, WALL_RADIUS, Ball, Crate, Post, scene
from xprc.data.colmap import qvec_to_rotmat
from xprc.data.colmap_files import read_colmap_model
from xprc.data.colmap_write import ImageRecord, rotmat_to_qvec, write_colmap_model
from xprc.data.scene_folder import load_scene
from xprc.errors import DataError, XprError

TINY = CaptureParams(views=8, size=(48, 32), objects=20, points=600, seed=3)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    out = tmp_path_factory.mktemp("cap") / "scene"
    info = generate_capture(out, TINY)
    return out, info


# --------------------------------------------------------------------------- the files


def _parse_images_bin(path):
    """An independent parser of images.bin (COLMAP's WriteImagesBinary layout) -> {id: (qvec,
    tvec, camera id, name, keypoints [K, 2], point ids [K])}."""
    buf = path.read_bytes()
    (n,), pos = struct.unpack_from("<Q", buf, 0), 8
    out = {}
    for _ in range(n):
        image_id, *pose, cam = struct.unpack_from("<I7dI", buf, pos)
        pos += 4 + 56 + 4
        end = buf.index(b"\0", pos)
        name, pos = buf[pos:end].decode(), end + 1
        (k,) = struct.unpack_from("<Q", buf, pos)
        pos += 8
        rows = [struct.unpack_from("<ddQ", buf, pos + 24 * i) for i in range(k)]
        pos += 24 * k
        kp = np.array([(x, y) for x, y, _ in rows]).reshape(-1, 2)
        out[image_id] = (pose[:4], pose[4:], cam, name, kp, [p for _, _, p in rows])
    assert pos == len(buf)
    return out


def _parse_points_bin(path):
    """An independent parser of points3D.bin -> {id: (xyz, rgb, error, [(image, index)])}."""
    buf = path.read_bytes()
    (n,), pos = struct.unpack_from("<Q", buf, 0), 8
    out = {}
    for _ in range(n):
        pid, x, y, z, r, g, b, err, length = struct.unpack_from("<Q3d3BdQ", buf, pos)
        pos += 8 + 24 + 3 + 8 + 8
        track = [struct.unpack_from("<II", buf, pos + 8 * i) for i in range(length)]
        pos += 8 * length
        out[pid] = ((x, y, z), (r, g, b), err, track)
    assert pos == len(buf)
    return out


def test_writer_matches_the_binary_format_and_our_reader(tmp_path):
    cameras = {3: ("PINHOLE", 640, 480, [500.0, 501.0, 320.0, 240.5]),
               7: ("SIMPLE_RADIAL", 320, 200, [250.0, 160.0, 100.0, -0.01])}  # fmt: skip
    q = np.array([0.9, 0.1, -0.3, 0.2])
    q /= np.linalg.norm(q)
    images = [
        ImageRecord(5, q, np.array([0.1, -2.0, 3.0]), 3, "a b.jpg",
                    np.array([[10.5, 20.5], [1.0, 2.0]]), np.array([2, 1], np.uint64)),
        ImageRecord(9, np.array([1.0, 0, 0, 0]), np.zeros(3), 7, "sub/c.png"),
    ]  # fmt: skip
    points = {"xyz": [[1.0, 2.0, 3.0], [-1.0, 0.5, 9.0]], "rgb": [[255, 0, 7], [1, 2, 3]],
              "error": [0.5, 1.5], "image": [5, 5], "index": [1, 0]}  # fmt: skip
    write_colmap_model(tmp_path, cameras, images, points)
    # cameras.bin byte for byte, packed here from the format description
    want = struct.pack("<Q", 2)
    want += struct.pack("<IiQQ4d", 3, 1, 640, 480, 500.0, 501.0, 320.0, 240.5)
    want += struct.pack("<IiQQ4d", 7, 2, 320, 200, 250.0, 160.0, 100.0, -0.01)
    assert (tmp_path / "cameras.bin").read_bytes() == want
    parsed = _parse_images_bin(tmp_path / "images.bin")
    assert parsed[5][3] == "a b.jpg" and parsed[9][3] == "sub/c.png"
    assert parsed[9][4].shape == (0, 2)
    np.testing.assert_array_equal(parsed[5][4], [[10.5, 20.5], [1.0, 2.0]])
    assert parsed[5][5] == [2, 1]
    pts = _parse_points_bin(tmp_path / "points3D.bin")
    assert pts[1] == ((1.0, 2.0, 3.0), (255, 0, 7), 0.5, [(5, 1)])
    assert pts[2] == ((-1.0, 0.5, 9.0), (1, 2, 3), 1.5, [(5, 0)])
    cams, imgs, xyz, rgb = read_colmap_model(tmp_path)
    assert cams[7].model == "SIMPLE_RADIAL" and cams[7].params[3] == -0.01
    assert imgs[5].name == "a b.jpg" and imgs[5].camera_id == 3
    np.testing.assert_allclose(imgs[5].qvec, q)
    np.testing.assert_array_equal(xyz, points["xyz"])
    np.testing.assert_array_equal(rgb, points["rgb"])


def test_writer_refuses_a_track_that_does_not_refer_back(tmp_path):
    images = [ImageRecord(1, np.array([1.0, 0, 0, 0]), np.zeros(3), 1, "a.jpg",
                          np.zeros((1, 2)), np.array([2], np.uint64))]  # fmt: skip
    points = {"xyz": [[0.0, 0, 0]], "rgb": [[0, 0, 0]], "error": [0.0], "image": [1],
              "index": [0]}  # fmt: skip
    with pytest.raises(ValueError, match="point 1: its track"):
        write_colmap_model(tmp_path, {1: ("PINHOLE", 8, 8, [8.0, 8, 4, 4])}, images, points)
    assert not list(tmp_path.iterdir())


def test_rotmat_to_qvec_inverts_colmaps_rotation():
    rng = np.random.default_rng(0)
    for _ in range(200):
        q = rng.normal(size=4)
        q = q / np.linalg.norm(q) * np.sign(q[0])
        np.testing.assert_allclose(rotmat_to_qvec(qvec_to_rotmat(q)), q, atol=1e-12)
    for R in (np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1]), np.diag([-1.0, -1, 1])):
        np.testing.assert_allclose(qvec_to_rotmat(rotmat_to_qvec(R)), R, atol=1e-12)


def test_capture_layout_and_reader(capture):
    out, info = capture
    assert not info["cached"] and info["views"] == 8 and info["points"] == 600
    assert sorted(p.name for p in out.iterdir()) == ["capture.json", "images_4", "sparse"]
    cams, imgs, xyz, rgb = read_colmap_model(out / "sparse" / "0")
    (cam,) = cams.values()
    assert (cam.model, cam.width, cam.height) == ("PINHOLE", 192, 128)  # 4 x images_4
    assert len(imgs) == 8 and xyz.shape == (600, 3)
    for name in (im.name for im in imgs.values()):
        with Image.open(out / "images_4" / name) as img:
            assert img.size == (48, 32)
    # every keypoint is a point's, and every point's track names its keypoint
    parsed, pts = (
        _parse_images_bin(out / "sparse/0/images.bin"),
        _parse_points_bin(out / "sparse/0/points3D.bin"),
    )
    for pid, (_, _, _, track) in pts.items():
        ((img, idx),) = track
        assert parsed[img][5][idx] == pid


def _surface_distance(sc, p: np.ndarray) -> np.ndarray:
    """Distance [P] from points p [P, 3] to the nearest surface of the scene, from the shapes'
    own parameters (not the tracer)."""
    d = [np.abs(p[:, 2])]  # the ground
    radial = np.hypot(p[:, 0], p[:, 1])
    d.append(np.where((p[:, 2] >= 0) & (p[:, 2] <= WALL_HEIGHT), np.abs(radial - WALL_RADIUS),
                      np.inf))  # fmt: skip
    for s in sc.shapes:
        if isinstance(s, Ball):
            d.append(np.abs(np.linalg.norm(p - s.c, axis=1) - s.r))
        elif isinstance(s, Crate):
            q = np.abs((p - s.c) @ s.R) - s.h
            outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
            d.append(np.abs(outside + np.minimum(q.max(axis=1), 0.0)))
        elif isinstance(s, Post):
            r = np.hypot(p[:, 0] - s.b[0], p[:, 1] - s.b[1]) - s.r
            z = np.abs(p[:, 2] - 0.5 * s.hgt) - 0.5 * s.hgt
            q = np.stack([r, z], axis=1)
            outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
            d.append(np.abs(outside + np.minimum(q.max(axis=1), 0.0)))
    return np.min(np.stack(d), axis=0)


def test_points_lie_near_surfaces_except_the_outliers(capture):
    out, _ = capture
    _, imgs, xyz, _ = read_colmap_model(out / "sparse" / "0")
    pts = _parse_points_bin(out / "sparse/0/points3D.bin")
    centres = {i: -qvec_to_rotmat(im.qvec).T @ im.tvec for i, im in imgs.items()}
    depth = np.array([np.linalg.norm(np.array(pts[k + 1][0]) - centres[pts[k + 1][3][0][0]])
                      for k in range(len(xyz))])  # fmt: skip
    dist = _surface_distance(scene(*scene_key(TINY)), xyz)
    near = dist <= 5 * TINY.noise * depth + 1e-6  # 5 sigma of the noise along one axis, or so
    assert near.mean() >= 1 - TINY.outliers - 0.03
    assert near.mean() < 1.0  # some outliers are off the surfaces (3% of 600)


def test_points_land_on_their_colours_in_the_loaded_views(capture):
    out, _ = capture
    train, test = load_scene(out, images="images_4", test_every=4)
    views = {v.name: v for v in (*train.views, *test.views)}
    _, imgs, _, _ = read_colmap_model(out / "sparse" / "0")
    parsed = _parse_images_bin(out / "sparse/0/images.bin")
    pts = _parse_points_bin(out / "sparse/0/points3D.bin")
    errors, offsets = [], []
    for xyz, rgb, _, ((img, idx),) in pts.values():
        v = views[imgs[img].name]
        cam = v.viewmat[:3, :3] @ np.array(xyz) + v.viewmat[:3, 3]
        if cam[2] <= 0:
            continue
        uv = (v.K @ (cam / cam[2]))[:2]
        offsets.append(np.linalg.norm(uv - parsed[img][4][idx] / 4))  # keypoints at full size
        j, i = int(uv[0]), int(uv[1])
        if 0 <= i < v.height and 0 <= j < v.width:
            errors.append(np.abs(v.image[i, j] - np.array(rgb) / 255.0).mean())
    assert np.median(offsets) < 0.2  # the noise only (outliers sit on their rays)
    assert np.median(errors) < 0.03  # the JPEG's own error
    assert len(errors) > 0.9 * len(pts)


def test_determinism_and_cache(capture, tmp_path):
    out, _ = capture
    again = generate_capture(tmp_path / "again", TINY)
    assert not again["cached"]
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    for rel in files:
        if rel.name != "capture.json":  # (it records the time taken)
            assert (out / rel).read_bytes() == (tmp_path / "again" / rel).read_bytes(), rel
    stamp = (out / "sparse/0/points3D.bin").stat().st_mtime_ns
    assert generate_capture(out, TINY)["cached"]
    assert (out / "sparse/0/points3D.bin").stat().st_mtime_ns == stamp
    other = CaptureParams(views=8, size=(48, 32), objects=20, points=600, seed=4)
    with pytest.raises(DataError, match="holds a capture of other parameters"):
        generate_capture(out, other)
    assert (out / "sparse/0/points3D.bin").stat().st_mtime_ns == stamp


def test_capture_refuses_a_folder_of_other_files(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(DataError, match="holds files that are not a whole capture"):
        generate_capture(tmp_path, TINY)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_capture_command(capture, capsys):
    out, _ = capture
    args = ["capture", "--out", str(out), "--views", "8", "--size", "48x32", "--objects", "20",
            "--points", "600", "--seed", "3"]  # fmt: skip
    assert main(args) == 0
    said = capsys.readouterr().out
    assert f"reused the capture in {out}" in said and "--images images_4" in said
    with pytest.raises(SystemExit):
        main(["capture", "--size", "48by32"])
    assert "expected WIDTHxHEIGHT" in capsys.readouterr().err


# --------------------------------------------------------------------------- the loader options


def test_images_option_and_split(capture):
    out, _ = capture
    train, test = load_scene(out, images="images_4")
    assert [v.name for v in test.views] == ["view_000.jpg"]  # 0, 8, ...: Mip-NeRF 360's split
    assert len(train) == 7 and train[0].width == 48
    np.testing.assert_allclose(train[0].K[0, 2], 24.0)
    assert [v.name for v in load_scene(out, images="images_4", test_every=3)[1].views] == [
        "view_000.jpg", "view_003.jpg", "view_006.jpg"]  # fmt: skip
    # the same through --downscale 4 (images_4 is found)
    assert load_scene(out, downscale=4)[0][0].width == 48


def test_images_option_errors(capture, tmp_path):
    out, _ = capture
    with pytest.raises(
        DataError,
        match=r"images_8: error: image folder not found; the scene has "
        r"images_4: choose one with --images \(e.g. --images images_4\)",
    ):
        load_scene(out, images="images_8")
    with pytest.raises(
        DataError, match=r"images: error: image folder not found; the scene has images_4"
    ):
        load_scene(out)
    with pytest.raises(XprError, match="already reads the images shrunk 4 times"):
        load_scene(out, images="images_4", downscale=2)
    with pytest.raises(XprError, match="give the name of an image folder"):
        load_scene(out, images="../images_4")
    from xprc.data.demo_scene import generate_demo_scene

    generate_demo_scene(tmp_path / "b", n_train=2, n_test=1, size=(16, 16), n_points=10)
    with pytest.raises(XprError, match="--images: for COLMAP scenes"):
        load_scene(tmp_path / "b", images="images_4")


# --------------------------------------------------------------------------- the preset


def test_preset_and_options_given_override_it():
    from xprc.cli import build_parser
    from xprc.cli.train import train_config
    from xprc.train.config import preset

    cfg = preset("3dgs-30k")
    assert (cfg.steps, cfg.strategy, cfg.refine_from, cfg.refine_until, cfg.refine_every) == (
        30000, "adc", 500, 15000, 100)  # fmt: skip
    assert (cfg.grad_threshold, cfg.reset_every, cfg.sh_degree_interval) == (2e-4, 3000, 1000)
    assert cfg.position_lr_final == 0.01 and cfg.ssim_weight == 0.2
    args = build_parser().parse_args(
        ["train", "--data", "d", "--out", "o", "--preset", "3dgs-30k", "--steps", "300"]
    )
    cfg = train_config(args)
    assert cfg.steps == 300 and cfg.strategy == "adc" and cfg.refine_until == 15000
    args = build_parser().parse_args(["train", "--data", "d", "--out", "o"])
    assert train_config(args) == type(cfg)()  # no preset: the defaults


# --------------------------------------------------------------------------- device memory


def test_images_that_do_not_fit_are_refused_with_the_numbers():
    from xprc.train.config import TrainError
    from xprc.train.data import check_image_memory

    views = [argparse.Namespace(width=1296, height=840)] * 150
    need = 150 * 1296 * 840 * 12
    check_image_memory([views[:130], views[130:]], False, free=(need * 2 + 1, "x"))
    with pytest.raises(TrainError) as e:
        check_image_memory([views[:130], views[130:]], False, free=(need, "free on TPU v5e 0"))
    msg = str(e.value)
    assert "the 150 training and test images of 1296x840 need 1.8 GiB" in msg
    assert "50% of the 1.8 GiB free on TPU v5e 0" in msg
    assert "--images images_2" in msg and "--downscale 2" in msg


def test_train_refuses_images_over_the_device_memory_before_any_step(capture, monkeypatch):
    import xprc
    from xprc.train import TrainConfig, TrainError, train

    out, _ = capture
    train_set, test_set = load_scene(out, images="images_4")
    monkeypatch.setattr("xprc.train.data.free_memory", lambda: (5_000, "free on a test device"))
    # the capture's 8-bit PNGs are counted as uint8, a byte a value (tests/test_train_images.py)
    with pytest.raises(TrainError, match=r"the 8 training and test images of 48x32 need 36\.0 KiB "
                       r"on the device as uint8, more than 50% of the 4\.9 KiB free on a test "
                       r"device .*--images images_4 .*--downscale 4"):  # fmt: skip
        train(xprc.load("3dgs"), train_set, test_set, None, TrainConfig(steps=1, progress=False))


def test_processes_write_the_same_capture(capture, tmp_path):
    out, _ = capture
    generate_capture(tmp_path / "two", TINY, jobs=2)
    for rel in ("sparse/0/images.bin", "sparse/0/points3D.bin", "images_4/view_005.jpg"):
        assert (out / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes(), rel


def test_free_memory_reads_the_accelerator_else_the_host():
    import os

    from xprc.train.data import free_memory

    class Device:
        device_kind, id, platform = "TPU v5 lite", 0, "tpu"

        def __init__(self, stats):
            self.stats = stats

        def memory_stats(self):
            if isinstance(self.stats, Exception):
                raise self.stats
            return self.stats

    tpu = Device({"bytes_limit": 16 * 2**30, "bytes_in_use": 2**30})
    assert free_memory(tpu) == (15 * 2**30, "free on TPU v5 lite 0 (of 16.0 GiB)")
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    for stats in (None, {}, NotImplementedError("no stats")):
        have, what = free_memory(Device(stats))
        assert what == "of available host memory (tpu device)"
        assert 0.5 * host < have < 2 * host


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--size", "8192x4096"], "at most 16,777,216 pixels"),  # 32M pixels: the tracer's limit
        (["--size", "4096x4096", "--full-size"], "images/ would have 268,435,456 pixels"),
    ],
)
def test_capture_command_refuses_a_size_over_the_limit_in_one_line(argv, said, capsys, tmp_path):
    assert main(["capture", "--out", str(tmp_path / "c"), *argv]) == 1
    err = capsys.readouterr().err
    assert said in err and "--size" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "c").exists()


def test_capture_params_refuse_with_an_xpr_error():
    with pytest.raises(XprError, match="at most 16,777,216 pixels"):
        CaptureParams(size=(8192, 4096))
    with pytest.raises(XprError, match="views must be at least 2"):
        CaptureParams(views=1)


def test_capture_into_the_current_empty_folder(tmp_path, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    inode = os.stat(".").st_ino
    info = generate_capture(".", CaptureParams(views=2, size=(8, 8), objects=1, points=10))
    assert not info["cached"] and (tmp_path / "here" / "capture.json").is_file()
    assert os.stat(".").st_ino == inode and os.path.isfile("capture.json")  # filled in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here"]  # no temporary left


def test_host_memory_counts_what_the_kernel_can_reclaim(monkeypatch):
    from xprc.train import data

    class Cpu:  # a device with no memory stats, as a CPU
        platform, device_kind, id = "cpu", "cpu", 0

        def memory_stats(self):
            return None

    meminfo = "MemTotal:  16000000 kB\nMemFree:  100000 kB\nMemAvailable:  9000000 kB\n"
    monkeypatch.setattr(data, "_read_meminfo", lambda: meminfo)
    assert data.free_memory(Cpu()) == (9_000_000 * 1024, "of available host memory (cpu device)")
    monkeypatch.setattr(data, "_read_meminfo", lambda: None)  # no /proc: the physical memory
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert data.free_memory(Cpu()) == (physical, "of host physical memory (cpu device)")
