"""xprc.demo_scene: the generated scene loads, is textured, consistent and deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from xprc.data.blender import load_blender
from xprc.data.demo_scene import SCENE_CENTER, generate_demo_scene
from xprc.data.scene_folder import load_scene

SMALL = dict(n_train=4, n_test=2, size=(40, 32), n_points=500)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    return generate_demo_scene(root, seed=3, **SMALL)


def files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_layout_and_loading(scene):
    names = set(files(scene.root))
    assert {"transforms_train.json", "transforms_test.json", "points3d.ply"} <= names
    assert {f"train/r_{i}.png" for i in range(4)} | {"test/r_0.png", "test/r_1.png"} <= names
    train, test = load_scene(scene.root, background=(0.0, 0.0, 0.0))
    assert (len(train), len(test)) == (4, 2)
    for v in [*train, *test]:
        assert v.image.shape == (32, 40, 3) and (v.width, v.height) == (40, 32)
        assert v.model == "pinhole"
        # Transparent where no object is hit, opaque on the objects.
        assert (v.alpha == 0).any() and (v.alpha == 1).mean() > 0.3
    assert train.points.shape == (500, 3) and train.colors.shape == (500, 3)


def test_images_are_textured(scene):
    ds = load_blender(scene.root, "train")
    for v in ds:
        covered = v.alpha > 0.99
        pixels = v.image[covered]
        assert pixels.std(axis=0).min() > 0.05  # photos, not flat colours
        # High-frequency content inside the objects: mean neighbour difference.
        inside = covered[:, 1:] & covered[:, :-1]
        grad = np.abs(np.diff(v.image, axis=1)).sum(axis=-1)[inside]
        assert grad.mean() > 0.05
        assert len(np.unique(np.round(pixels * 255), axis=0)) > 100


def test_cameras_look_at_the_scene_centre(scene):
    ds = load_blender(scene.root, "test")
    centre = np.asarray(SCENE_CENTER, np.float32)
    for v in ds:
        cam = v.camera()
        x, y, z = np.asarray(cam.world_to_camera(centre))
        assert z == pytest.approx(scene.camera_radius, rel=1e-4)
        u, w = (float(a) for a in cam.project(x, y, z))
        assert abs(u - v.width / 2) < 0.01 and abs(w - v.height / 2) < 0.01
        # Upright: world up projects upwards in the image (smaller row).
        _, w_up = cam.project(*np.asarray(cam.world_to_camera(centre + [0, 0, 0.3])))
        assert float(w_up) < w
        assert v.position[2] > SCENE_CENTER[2]  # upper hemisphere


def test_point_cloud_matches_the_images(scene):
    """The initial points sit on visible surfaces: they reproject onto pixels of their colour."""
    ds = load_blender(scene.root, "train", background=(0.0, 0.0, 0.0))
    agree, seen = 0, 0
    for v in ds:
        pc = ds.points @ v.viewmat[:3, :3].T + v.viewmat[:3, 3]
        uv = pc[:, :2] / pc[:, 2:] * np.diag(v.K)[:2] + v.K[:2, 2]
        j, i = np.floor(uv).astype(int).T
        ok = (pc[:, 2] > 0) & (j >= 0) & (j < v.width) & (i >= 0) & (i < v.height)
        diff = np.abs(v.image[i[ok], j[ok]] - ds.colors[ok]).max(axis=1)
        agree += int((diff < 0.15).sum())
        seen += int(ok.sum())
    assert seen > 0.5 * len(ds) * len(ds.points)
    assert agree > 0.6 * seen  # the rest: occluded in that view, or on a texture edge


def test_deterministic_per_seed(tmp_path, scene):
    again = generate_demo_scene(tmp_path / "a", seed=3, **SMALL)
    assert files(again.root) == files(scene.root)
    np.testing.assert_array_equal(again.points, scene.points)
    other = generate_demo_scene(tmp_path / "b", seed=4, **SMALL)
    assert files(other.root)["train/r_0.png"] != files(scene.root)["train/r_0.png"]


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="need size >= 8x8"):
        generate_demo_scene(tmp_path, size=(4, 4))
