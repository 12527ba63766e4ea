"""Undistortion at load time (xprc.data.undistort, `--undistort`): lens cameras resampled to
pinhole ones, checked against a NumPy twin of OpenCV's lens and an analytic pattern; COLMAP
scenes of SIMPLE_RADIAL and OPENCV cameras train with the pinhole-only 3DGS spec; without
`--undistort` the spec refuses them, naming the model, the spec and the fixes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import ROOT
from PIL import Image

from xprc import cli
from xprc import train as tr
from xprc.camera import look_at
from xprc.data.capture import rotmat_to_qvec
from xprc.data.colmap_write import ImageRecord, write_colmap_model
from xprc.data.datasets import View
from xprc.data.scene_folder import load_scene
from xprc.data.undistort import undistort_camera, undistort_views
from xprc.errors import CameraModelError

W, H = 64, 48
K = np.array([[50.0, 0.0, 31.3], [0.0, 52.0, 24.6], [0.0, 0.0, 1.0]])
K1, K2, P1, P2 = -0.2, 0.03, 0.002, -0.003  # barrel, OpenCV's k1 k2 p1 p2


def lens_dist(k1=K1, k2=K2, p1=P1, p2=P2) -> np.ndarray:
    """xprc's [12] coefficients: k1..k6, p1, p2, s1..s4."""
    d = np.zeros(12, np.float32)
    d[[0, 1, 6, 7]] = k1, k2, p1, p2
    return d


def distort_np(a, b, k1=K1, k2=K2, p1=P1, p2=P2):
    """OpenCV's lens (radial k1 k2, tangential p1 p2) on normalised coordinates, float64."""
    r2 = a * a + b * b
    radial = 1.0 + r2 * (k1 + r2 * k2)
    return (a * radial + 2 * p1 * a * b + p2 * (r2 + 2 * a * a),
            b * radial + p1 * (r2 + 2 * b * b) + 2 * p2 * a * b)  # fmt: skip


def undistort_np(ad, bd, **lens):
    """`distort_np` inverted by plain fixed-point iteration (as OpenCV's undistortPoints)."""
    a, b = ad.copy(), bd.copy()
    for _ in range(200):
        fa, fb = distort_np(a, b, **lens)
        a, b = a - (fa - ad), b - (fb - bd)
    fa, fb = distort_np(a, b, **lens)
    assert max(np.abs(fa - ad).max(), np.abs(fb - bd).max()) < 1e-12
    return a, b


def pattern(a, b):
    """A smooth pattern on the normalised image plane (periods of 5 to 12 pixels at f = 50):
    where a ray lands on it says which ray it is."""
    return (0.5 + 0.2 * np.sin(7 * a + 1) * np.cos(6 * b - 0.5)
            + 0.1 * np.sin(11 * (a + b)) + 0.1 * np.cos(40 * a) * np.sin(30 * b))  # fmt: skip


def pixel_grid(w, h):
    return np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)


def distorted_view() -> View:
    """The pattern seen through the lens: each pixel's ray found by the NumPy inverse."""
    u, v = pixel_grid(W, H)
    a, b = undistort_np((u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1])
    image = np.repeat(pattern(a, b)[..., None], 3, axis=-1).astype(np.float32)
    return View(name="lens.png", image=image, viewmat=np.eye(4, dtype=np.float32),
                K=K.astype(np.float32), width=W, height=H, model="opencv",
                dist=lens_dist())  # fmt: skip


def test_undistorted_image_is_the_pinhole_image_of_the_same_rays():
    view = distorted_view()
    with pytest.warns(RuntimeWarning, match="every pixel has a source pixel") as said:
        (out,) = undistort_views([view], "cameras.bin")
    assert out.model == "pinhole" and not out.dist.any()
    Kn = np.asarray(out.K, np.float64)
    assert (Kn[0, 0], Kn[1, 1]) == (K[0, 0], K[1, 1])  # COLMAP keeps the focal lengths
    assert out.image.shape == (out.height, out.width, 3)
    # the principal point keeps its place relative to the size
    np.testing.assert_allclose(Kn[:2, 2] / (out.width, out.height), K[:2, 2] / (W, H), 1e-6)
    # the analytic pinhole image: error limited by bilinear interpolation
    u, v = pixel_grid(out.width, out.height)
    want = pattern((u - Kn[0, 2]) / Kn[0, 0], (v - Kn[1, 2]) / Kn[1, 1])
    error = np.abs(out.image[..., 0] - want)
    assert error.max() < 0.03 and error.mean() < 0.006, (error.max(), error.mean())
    # the same comparison without undistorting (the distorted image as if pinhole) fails
    u, v = pixel_grid(W, H)
    naive = np.abs(view.image[..., 0] - pattern((u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1]))
    assert naive.max() > 0.2
    message = str(said[0].message)
    assert f"the opencv camera of lens.png {W}x{H} (1 view) -> pinhole " in message
    assert f"{out.width}x{out.height}, fx 50, fy 52, " in message


def test_each_pixel_samples_the_distorted_projection_of_its_ray():
    """A 3D point on the ray of a pinhole pixel: its pixel in the distorted image (NumPy twin)
    is where the map samples; the crop is the largest without blank pixels."""
    view = distorted_view()
    with pytest.warns(RuntimeWarning):
        (out,) = undistort_views([view], "cameras.bin")
    cam = view.camera()
    u = undistort_camera(cam, (out.width, out.height))
    px, py = pixel_grid(out.width, out.height)
    depth = np.random.default_rng(0).uniform(0.5, 9.0, px.shape)
    point = np.stack([(px - u.K[0, 2]) / u.K[0, 0], (py - u.K[1, 2]) / u.K[1, 1], np.ones_like(px)])
    point = point * depth  # [3, H', W'] camera-space points
    ad, bd = distort_np(point[0] / point[2], point[1] / point[2])
    want = np.stack([K[0, 0] * ad + K[0, 2], K[1, 1] * bd + K[1, 2]])
    np.testing.assert_allclose(u.source, want, atol=2e-3)
    assert not u.blank.any() and 0.9 < u.kept <= 1.0
    wider = undistort_camera(cam, (out.width + 2, out.height + 2))
    assert wider.blank.any()  # no larger crop is free of blank pixels


def test_fisheye_map_is_the_equidistant_projection():
    """OPENCV_FISHEYE (xprc's `fisheye`): the map against a NumPy twin of OpenCV's equidistant
    model, theta_d = theta (1 + k1 theta^2 + ... + k4 theta^8)."""
    k = np.array([0.05, -0.01, 0.002, 0.0])
    f = 30.0  # 64 pixels across: about 115 degrees
    view = View(name="fish.png", image=np.zeros((H, W, 3), np.float32), viewmat=np.eye(4),
                K=np.array([[f, 0, 32.2], [0, f, 23.7], [0, 0, 1]], np.float32), width=W,
                height=H, model="fisheye", dist=np.pad(k, (0, 8)).astype(np.float32))  # fmt: skip
    with pytest.warns(RuntimeWarning, match="every pixel has a source pixel"):
        (out,) = undistort_views([view], "cameras.bin")
    u = undistort_camera(view.camera(), (out.width, out.height))
    px, py = pixel_grid(out.width, out.height)
    x, y = (px - u.K[0, 2]) / f, (py - u.K[1, 2]) / f
    rho = np.hypot(x, y)
    theta = np.arctan(rho)
    t2 = theta * theta
    theta_d = theta * (1 + t2 * (k[0] + t2 * (k[1] + t2 * (k[2] + t2 * k[3]))))
    want = np.stack([f * theta_d * x / rho + 32.2, f * theta_d * y / rho + 23.7])
    np.testing.assert_allclose(u.source, want, atol=2e-3)
    assert out.width > W and out.height > H  # a pinhole stretches what a fisheye compresses


@pytest.mark.parametrize("k1", [0.15, -0.25])
def test_crop_without_blank_pixels_for_pincushion_and_barrel(k1):
    """Pincushion shrinks the image, strong barrel grows it: either way no blank pixel, and two
    more pixels a side would have some."""
    view = View(name="x.png", image=np.zeros((H, W, 3), np.float32), viewmat=np.eye(4),
                K=K.astype(np.float32), width=W, height=H, model="opencv",
                dist=lens_dist(k1, 0.0, 0.0, 0.0))  # fmt: skip
    with pytest.warns(RuntimeWarning, match="every pixel has a source pixel"):
        (out,) = undistort_views([view], "cameras.bin")
    assert (out.width < W) == (k1 > 0) and (out.width > W) == (k1 < 0)
    cam = view.camera()
    assert not undistort_camera(cam, (out.width, out.height)).blank.any()
    assert undistort_camera(cam, (out.width + 2, out.height + 2)).blank.any()


def test_pixels_without_a_source_pixel_are_counted_and_take_the_edge_colour(monkeypatch):
    """A crop forced past the largest free of blank pixels (the scale limits held at 1.3):
    the pixels whose ray misses the distorted image (NumPy twin) are counted in the report and
    take the colour of the nearest edge pixel."""
    import xprc.data.undistort as und

    monkeypatch.setattr(und, "MIN_SCALE", 1.3)
    monkeypatch.setattr(und, "MAX_SCALE", 1.3)
    view = distorted_view()
    with pytest.warns(RuntimeWarning, match="take the nearest edge pixel's colour") as said:
        (out,) = undistort_views([view], "cameras.bin")
    assert (out.width, out.height) == (int(1.3 * W), int(1.3 * H))
    Kn = np.asarray(out.K, np.float64)
    px, py = pixel_grid(out.width, out.height)
    a, b = (px - Kn[0, 2]) / Kn[0, 0], (py - Kn[1, 2]) / Kn[1, 1]
    ad, bd = distort_np(a, b)
    su, sv = K[0, 0] * ad + K[0, 2], K[1, 1] * bd + K[1, 2]
    radial = 1.0 + (a * a + b * b) * (K1 + (a * a + b * b) * K2)
    missed = (su < 0) | (su > W) | (sv < 0) | (sv > H) | (radial <= 0.8) | (radial >= 1.2)
    n = int(missed.sum())
    assert 0 < n < missed.size
    assert f"{n:,} pixels ({n / missed.size:.2%}) have no source pixel" in str(said[0].message)
    col = np.clip(np.floor(su[missed]), 0, W - 1).astype(int)
    row = np.clip(np.floor(sv[missed]), 0, H - 1).astype(int)
    edge = view.image[row, col, 0]
    far = (np.abs(su[missed] - np.clip(su[missed], 0.5, W - 0.5)) > 0) & (
        np.abs(sv[missed] - np.clip(sv[missed], 0.5, H - 0.5)) > 0)  # fmt: skip
    assert far.any()  # beyond a corner: that corner pixel's colour
    np.testing.assert_allclose(out.image[..., 0][missed][far], edge[far], atol=1e-6)


def test_zero_coefficients_give_back_the_image_exactly():
    rng = np.random.default_rng(1)
    image = rng.uniform(size=(H, W, 3)).astype(np.float32)
    alpha = rng.uniform(size=(H, W)).astype(np.float32)
    view = View(name="flat.png", image=image, viewmat=np.eye(4, dtype=np.float32),
                K=K.astype(np.float32), width=W, height=H, model="opencv",
                dist=np.zeros(12, np.float32), alpha=alpha)  # fmt: skip
    with pytest.warns(RuntimeWarning, match="sees 100.0% of the distorted image"):
        (out,) = undistort_views([view], "cameras.bin")
    assert (out.width, out.height, out.model) == (W, H, "pinhole")
    assert np.array_equal(out.K, view.K)
    assert np.array_equal(out.image, image) and np.array_equal(out.alpha, alpha)


def test_pinhole_views_are_kept_and_it_is_said():
    view = View(name="p.png", image=np.zeros((4, 4, 3), np.float32), viewmat=np.eye(4),
                K=np.eye(3, dtype=np.float32), width=4, height=4)  # fmt: skip
    with pytest.warns(RuntimeWarning, match="every camera is a pinhole already"):
        (out,) = undistort_views([view], "cameras.bin")
    assert out is view


# ------------------------------------------------------------------- COLMAP scenes, training

SW, SH = 24, 16
CAMERAS = {
    1: ("SIMPLE_RADIAL", SW, SH, [20.0, 12.0, 8.0, -0.08]),
    2: ("OPENCV", SW, SH, [20.0, 21.0, 11.5, 8.2, -0.1, 0.02, 0.001, -0.002]),
}


def colmap_lens_scene(root, views=6, points=40):
    """A COLMAP scene of two lens cameras (views alternate between them) around the origin."""
    rng = np.random.default_rng(0)
    records = []
    for i in range(views):
        th = 2 * math.pi * i / views
        cam = look_at([4 * math.cos(th), 4 * math.sin(th), 1.0], [0, 0, 0], [0, 0, 1], SW, SH)
        vm = np.asarray(cam.viewmat, np.float64)
        first = i == 0  # every point is a keypoint of view 0
        records.append(ImageRecord(
            i + 1, rotmat_to_qvec(vm[:3, :3]), vm[:3, 3], 1 + i % 2, f"v{i}.png",
            np.zeros((points if first else 0, 2)),
            np.arange(1, points + 1, dtype=np.uint64) if first else np.zeros(0, np.uint64),
        ))  # fmt: skip
        (root / "images").mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (SH, SW, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(root / "images" / f"v{i}.png")
    write_colmap_model(root / "sparse" / "0", CAMERAS, records, {
        "xyz": rng.uniform(-1, 1, (points, 3)), "rgb": rng.integers(0, 256, (points, 3)),
        "error": np.zeros(points), "image": np.ones(points, np.uint32),
        "index": np.arange(points, dtype=np.uint32),
    })  # fmt: skip
    return root


def test_simple_radial_and_opencv_scene_trains_with_the_pinhole_spec(tmp_path):
    from xprc.compiler.driver import load

    root = colmap_lens_scene(tmp_path / "scene")
    with pytest.warns(RuntimeWarning, match="--undistort: 6 views resampled") as said:
        train_set, test_set = load_scene(root, test_every=3, undistort=True)
    message = str(said[0].message)
    assert "camera 1 SIMPLE_RADIAL 24x16 (3 views) -> pinhole " in message
    assert "camera 2 OPENCV 24x16 (3 views) -> pinhole " in message
    views = train_set.views + test_set.views
    assert {v.model for v in views} == {"pinhole"}
    assert len({(v.width, v.height) for v in views}) == 1  # cameras of one size: one size
    method = load(ROOT / "specs" / "3dgs.xpr")
    config = tr.TrainConfig(steps=2, eval_every=0, checkpoint_every=0, save_renders=False,
                            progress=False)  # fmt: skip
    result = tr.train(method, train_set, test_set, None, config)
    assert result.step == 2 and math.isfinite(result.metrics["psnr"])


def test_a_pinhole_spec_refuses_lens_views_and_names_the_fixes(tmp_path, capsys):
    root = colmap_lens_scene(tmp_path / "scene")
    status = cli.main(["train", "--spec", "3dgs", "--data", str(root), "--out",
                       str(tmp_path / "run"), "--steps", "2", "--test-every", "3"])  # fmt: skip
    assert status == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        "3dgs.xpr: error: Gaussian3D renders only the camera model pinhole (declared on line "
        "4), but 4 of the 4 training views have 'opencv' cameras (first: v1.png): resample "
        "the images to pinhole cameras with --undistort (from Python: load_scene or "
        "load_colmap with undistort=True), or use a spec that renders 'opencv' cameras "
        "directly, such as --spec 3dgut"
    )
    from xprc.compiler.driver import load

    train_set, test_set = load_scene(root, test_every=3)
    with pytest.raises(CameraModelError, match="2 of the 2 test views have 'opencv' cameras"):
        tr.train(load(ROOT / "specs" / "3dgs.xpr"), train_set.subset([]), test_set)


def test_eval_and_render_refusal_names_the_trainings_undistort():
    """`xprc eval` / `render` check the views they render the same way; their fixes are the
    training's --undistort or the scene's own spec."""
    from xprc.compiler.driver import load
    from xprc.runtime import check_views_camera

    lens = View(name="v3.png", image=np.zeros((2, 2, 3), np.float32), viewmat=np.eye(4),
                K=np.eye(3, dtype=np.float32), width=2, height=2, model="fisheye",
                dist=np.zeros(12, np.float32))  # fmt: skip
    flat = View(name="v1.png", image=np.zeros((2, 2, 3), np.float32), viewmat=np.eye(4),
                K=np.eye(3, dtype=np.float32), width=2, height=2)  # fmt: skip
    method = load(ROOT / "specs" / "3dgs.xpr")
    check_views_camera(method, [flat], "test", scene=True)  # a pinhole: nothing to say
    with pytest.raises(CameraModelError) as info:
        check_views_camera(method, [flat, lens], "test", scene=True)
    assert str(info.value) == (
        "3dgs.xpr: error: Gaussian3D renders only the camera model pinhole (declared on line "
        "4), but 1 of the 2 test views has 'fisheye' cameras (first: v3.png): resample the "
        "images to pinhole cameras with --undistort (from Python: load_scene or load_colmap "
        "with undistort=True), as in the training, or give the --spec the scene was trained "
        "with if it renders 'fisheye' cameras (such as 3dgut)"
    )
    check_views_camera(load(ROOT / "specs" / "3dgut.xpr"), [lens], "test", scene=True)


def test_blender_scenes_undistort_too(tmp_path):
    """A transforms.json `camera_model` OPENCV (nerfstudio's) is undistorted in both splits
    alike; a Blender scene of pinholes is said to need nothing."""
    import json

    from test_datasets import blender_scene

    blender_scene(tmp_path / "b", split="train")
    blender_scene(tmp_path / "b", split="test", n=2)
    with pytest.warns(RuntimeWarning, match="every camera is a pinhole already"):
        train_set, _ = load_scene(tmp_path / "b", undistort=True)
    assert [v.model for v in train_set.views] == ["pinhole"] * 3
    for split in ("train", "test"):
        path = tmp_path / "b" / f"transforms_{split}.json"
        meta = json.loads(path.read_text())
        path.write_text(json.dumps({**meta, "camera_model": "OPENCV", "k1": -0.1}))
    with pytest.warns(RuntimeWarning, match=r"--undistort: 5 views resampled .* \(5 views\)"):
        train_set, test_set = load_scene(tmp_path / "b", undistort=True)
    views = train_set.views + test_set.views
    assert len(train_set.views) == 3 and {v.model for v in views} == {"pinhole"}


def test_undistort_on_a_pinhole_colmap_scene_says_it_changes_nothing(tmp_path):
    """--undistort on a COLMAP scene of PINHOLE cameras: said, not silently ignored; the views
    are those loaded without it."""
    root = colmap_lens_scene(tmp_path / "c")
    flat = {1: ("PINHOLE", SW, SH, [20.0, 21.0, 12.0, 8.0])}
    flat[2] = flat[1]
    from xprc.data.colmap_files import read_colmap_model

    _, images, xyz, _ = read_colmap_model(root / "sparse" / "0")
    records = [ImageRecord(im.id, im.qvec, im.tvec, im.camera_id, im.name) for im in
               images.values()]  # fmt: skip
    write_colmap_model(root / "sparse" / "0", flat, records, {
        "xyz": np.zeros((0, 3)), "rgb": np.zeros((0, 3)), "error": np.zeros(0),
        "image": np.zeros(0, np.uint32), "index": np.zeros(0, np.uint32)})  # fmt: skip
    with pytest.warns(RuntimeWarning, match="every camera is a pinhole already"):
        train_set, test_set = load_scene(root, test_every=3, undistort=True)
    plain = load_scene(root, test_every=3)
    for a, b in zip(train_set.views + test_set.views, plain[0].views + plain[1].views,
                    strict=True):  # fmt: skip
        assert a.model == "pinhole" and np.array_equal(a.image, b.image)


def test_many_cameras_are_summarised_and_share_one_size():
    """One camera a view (COLMAP without single_camera): three described, the rest summed up;
    all of one distorted size get one undistorted size (the smallest crop's)."""
    views = [View(name=f"v{k}.png", image=np.zeros((H, W, 3), np.float32), viewmat=np.eye(4),
                  K=K.astype(np.float32), width=W, height=H, model="opencv",
                  dist=lens_dist(0.05 * k - 0.1, 0.0, 0.0, 0.0)) for k in range(5)]  # fmt: skip
    labels = [f"camera {k + 1} SIMPLE_RADIAL" for k in range(5)]
    with pytest.warns(RuntimeWarning) as said:
        out = undistort_views(views, "cameras.bin", labels)
    message = str(said[0].message)
    for k in range(3):
        assert f"camera {k + 1} SIMPLE_RADIAL {W}x{H} (1 view) -> pinhole " in message
    assert "camera 4" not in message
    assert "; 2 more cameras -> pinhole " in message
    sizes = {(v.width, v.height) for v in out}
    assert len(sizes) == 1
    with pytest.warns(RuntimeWarning):
        (alone,) = undistort_views(views[3:4], "cameras.bin")  # k1 = 0.05: a larger crop alone
    (w, h) = sizes.pop()
    assert w < alone.width and h < alone.height  # the shared size is k1 = 0.1's, the smallest
