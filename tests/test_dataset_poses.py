"""Poses renders cannot use: a camera centre absurdly far from the origin (a COLMAP tvec or a
Blender translation of 1e30) loaded, and training failed much later with a generic 'training
diverged'. Now the loader refuses it, naming the file, the view and the value. Fixtures come
from test_datasets.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_datasets import (
    IMAGES,
    blender_scene,
    colmap_scene,
    expect,
    write_colmap_bin,
    write_colmap_txt,
)

from xprc.data.blender import load_blender
from xprc.data.colmap import load_colmap
from xprc.data.datasets import MAX_CAMERA_DISTANCE

BEYOND = "renders run in float32, which cannot handle a camera beyond 1e+15"


@pytest.mark.parametrize("fmt,at", [("txt", "line 3"), ("bin", "image 1 of 4")])
@pytest.mark.parametrize("t,shown,distance", [
    ([0.0, 0.0, 1e30], "0 0 1e+30", "1e+30"),
    ([-3e20, 4e20, 0.0], "-3e+20 4e+20 0", "5e+20"),
    ([1e300, 1e300, 1e300], "1e+300 1e+300 1e+300", "1.73205e+300"),  # (squares beyond float64)
])  # fmt: skip
def test_colmap_camera_too_far_from_the_origin(tmp_path, fmt, at, t, shown, distance):
    colmap_scene(tmp_path, fmt)
    images = [(5, [1.0, 0.0, 0.0, 0.0], t, 1, "c.png")] + IMAGES[1:]
    (write_colmap_bin if fmt == "bin" else write_colmap_txt)(tmp_path / "sparse/0", images=images)
    path = tmp_path / f"sparse/0/images.{fmt}"
    expect(path, f"{at}: image 'c.png' (id 5): the camera is {distance} from the origin (tvec "
           f"{shown}); {BEYOND}", load_colmap, tmp_path)  # fmt: skip


@pytest.mark.parametrize("position,shown", [
    ([1e30, 0.0, 1.5], "1e+30 0 1.5"),
    ([1e300, 0.0, 1.5], "1e+300 0 1.5"),  # was 'the view matrix out of float32 range'
])  # fmt: skip
def test_blender_camera_too_far_from_the_origin(tmp_path, position, shown):
    meta = blender_scene(tmp_path, n=2)
    for row, value in zip(meta["frames"][1]["transform_matrix"], position, strict=False):
        row[3] = value
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    expect(tmp_path / "transforms_train.json", f"frame 1: the camera of './train/r_1' is "
           f"{position[0]:.6g} from the origin ('transform_matrix' translation {shown}); {BEYOND}",
           load_blender, tmp_path)  # fmt: skip


@pytest.mark.parametrize("fmt", ["txt", "bin"])
def test_far_but_real_cameras_still_load(tmp_path, fmt):
    """Geo-referenced coordinates (ECEF: about 6.4e6 m, 6.4e9 mm) are far inside the bound."""
    colmap_scene(tmp_path, fmt)
    images = [(5, [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 6.4e9], 1, "c.png")] + IMAGES[1:]
    (write_colmap_bin if fmt == "bin" else write_colmap_txt)(tmp_path / "sparse/0", images=images)
    view = next(v for v in load_colmap(tmp_path) if v.name == "c.png")
    np.testing.assert_allclose(view.position, [0.0, 0.0, -6.4e9], rtol=1e-7)
    meta = blender_scene(tmp_path / "b", n=1)
    meta["frames"][0]["transform_matrix"][0][3] = MAX_CAMERA_DISTANCE  # the bound itself
    (tmp_path / "b/transforms_train.json").write_text(json.dumps(meta))
    assert np.linalg.norm(load_blender(tmp_path / "b")[0].position) <= MAX_CAMERA_DISTANCE * 1.01
