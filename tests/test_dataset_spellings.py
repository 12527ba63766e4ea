"""One dataset, two readings: a folder that is both a Blender and a COLMAP scene, numbers in
non-ASCII digits and one image under two spellings each loaded as a guess without a word (one
image in two Blender frames only warned); now each is a DataError naming the file and the
problem. Fixtures come from test_datasets.py."""

from __future__ import annotations

import json
import os

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
from xprc.data.scene_folder import dataset_mark, load_scene

# --------------------------------------------------------------------------- Blender and COLMAP


def test_a_folder_with_a_blender_and_a_colmap_scene_is_refused(tmp_path):
    """transforms_train.json beside sparse/: the Blender scene was read, the COLMAP one ignored."""
    blender_scene(tmp_path, n=2)
    blender_scene(tmp_path, n=1, split="test")
    colmap_scene(tmp_path)
    problem = (
        "holds both a Blender scene (transforms_train.json) and a COLMAP one (sparse/): which one "
        "to read is ambiguous; move one of them away (from Python, xprc.data.load_blender or "
        "load_colmap reads the one you name)"
    )
    expect(tmp_path, problem, load_scene, tmp_path)
    assert dataset_mark(tmp_path) is not None  # (still a dataset: --out refuses it)
    assert len(load_colmap(tmp_path)) == len(IMAGES)  # each reader reads its own


# --------------------------------------------------------------------------- ASCII numbers only

CAMERA_LINE = "CAMERA_ID MODEL WIDTH HEIGHT PARAMS[]"
IMAGE_LINE = "IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME"
POINT_LINE = "POINT3D_ID X Y Z R G B ERROR TRACK[]"
# Python's int() and float() read these as 16, 20, 5 and 255
NOT_ASCII = {
    "Arabic-Indic width": ("cameras.txt", "1 PINHOLE 16 ", "1 PINHOLE \u0661\u0666 ",
                           f"line 3: expected {CAMERA_LINE}, got '\\u0661\\u0666'"),
    "fullwidth focal length": ("cameras.txt", "12 20.0", "12 \uff12\uff10.0",
                               f"line 3: expected {CAMERA_LINE}, got '\\uff12\\uff10.0'"),
    "Devanagari image id": ("images.txt", "5 1.0", "\u096b 1.0",
                            f"line 3: expected {IMAGE_LINE}, got '\\u096b'"),
    "fullwidth point colour": ("points3D.txt", " 255 0 10 ", " \uff12\uff15\uff15 0 10 ",
                               f"line 2: expected {POINT_LINE}, got '\\uff12\\uff15\\uff15'"),
}  # fmt: skip


@pytest.mark.parametrize("name,old,new,problem", NOT_ASCII.values(), ids=NOT_ASCII.keys())
def test_colmap_text_numbers_are_ascii(tmp_path, name, old, new, problem):
    colmap_scene(tmp_path, fmt="txt")
    path = tmp_path / "sparse/0" / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    expect(path, problem, load_colmap, tmp_path)


def test_colmap_text_ascii_number_spellings_still_load(tmp_path):
    """What C++ streams write and read: a sign, an exponent, a bare point, no digits before it."""
    colmap_scene(tmp_path, fmt="txt")
    path = tmp_path / "sparse/0/cameras.txt"
    path.write_text(path.read_text().replace("1 PINHOLE 16 12 20.0 21.0 8.0 6.0",
                                             "+1 PINHOLE 16 12 2e1 +21. 8.0E0 .6e+1"))  # fmt: skip
    view = next(v for v in load_colmap(tmp_path) if v.name == "c.png")  # camera 1
    np.testing.assert_allclose(np.asarray(view.K), [[20, 0, 8], [0, 21, 6], [0, 0, 1]])


# --------------------------------------------------------------------------- one image, two names


def link(tmp_path):
    os.symlink("c.png", tmp_path / "images/link.png")
    return "link.png"


SPELLINGS = {
    "./": lambda tmp: "./c.png",
    "x/..": lambda tmp: "sub dir/../c.png",
    "//": lambda tmp: ".//c.png",
    "a link": link,
}


@pytest.mark.parametrize("fmt", ["txt", "bin"])
@pytest.mark.parametrize("spell", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_one_image_under_two_spellings_is_refused(tmp_path, fmt, spell):
    """'c.png' (id 5) and './c.png' (id 2) were two views of one file with two poses."""
    colmap_scene(tmp_path, fmt=fmt)
    other = spell(tmp_path)
    images = [im if im[0] != 2 else (*im[:4], other) for im in IMAGES]  # image 2 was a.png
    (write_colmap_bin if fmt == "bin" else write_colmap_txt)(tmp_path / "sparse/0", images=images)
    first, second = sorted([(other, 2), ("c.png", 5)])  # the views are read by name
    real = os.path.realpath(tmp_path / "images/c.png")
    expect(tmp_path / f"sparse/0/images.{fmt}", f"image names '{first[0]}' (id {first[1]}) and "
           f"'{second[0]}' (id {second[1]}) are one file, {real}: two views of one image",
           load_colmap, tmp_path)  # fmt: skip


def test_names_of_different_files_still_load(tmp_path):
    """Names that only look alike ('c.png' and 'sub dir/c.png') are two files."""
    colmap_scene(tmp_path, fmt="txt")
    (tmp_path / "images/a.png").rename(tmp_path / "images/sub dir/c.png")
    images = [im if im[0] != 2 else (*im[:4], "sub dir/c.png") for im in IMAGES]
    write_colmap_txt(tmp_path / "sparse/0", images=images)
    assert len(load_colmap(tmp_path)) == len(IMAGES)


def blender_link(tmp_path):
    os.symlink("r_1.png", tmp_path / "train/link.png")
    return "train/link.png"


def blender_up(tmp_path):
    (tmp_path / "train/x").mkdir()
    return "./train/x/../r_1"


BLENDER_SPELLINGS = {
    "the same name": lambda tmp: "./train/r_1",
    "with its extension": lambda tmp: "train/r_1.png",
    "x/..": blender_up,
    "a link": blender_link,
}


@pytest.mark.parametrize("spell", BLENDER_SPELLINGS.values(), ids=BLENDER_SPELLINGS.keys())
def test_one_image_in_two_blender_frames_is_refused(tmp_path, spell):
    """Frame 3 listing frame 1's image was a second view of it with another pose, and only a
    warning; a COLMAP model with one image twice was already an error."""
    meta = blender_scene(tmp_path)
    other = spell(tmp_path)
    meta["frames"].append(dict(meta["frames"][0], file_path=other))  # (frame 0's pose)
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    real = os.path.realpath(tmp_path / "train/r_1.png")
    expect(tmp_path / "transforms_train.json", f"frames 1 ('./train/r_1') and 3 ('{other}') "
           f"list one file, {real}: two views of one image", load_blender, tmp_path)  # fmt: skip


def test_blender_frames_of_different_files_still_load(tmp_path):
    """Names that only look alike ('train/r_1' and 'train/x/r_1') are two files."""
    meta = blender_scene(tmp_path)
    (tmp_path / "train/x").mkdir()
    (tmp_path / "train/r_2.png").rename(tmp_path / "train/x/r_1.png")
    meta["frames"][2]["file_path"] = "./train/x/r_1"
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    assert [v.name for v in load_blender(tmp_path)] == ["./train/r_0", "./train/r_1",
                                                        "./train/x/r_1"]  # fmt: skip


def test_blender_test_frames_that_are_training_images_are_said(tmp_path):
    """transforms_test.json listing training images (a copied file, a wrong folder) loaded
    without a word, and the test metrics were measured on views the model was trained on."""
    blender_scene(tmp_path, n=3)
    meta = blender_scene(tmp_path, n=2, split="test")
    meta["frames"][1]["file_path"] = "./train/r_2"
    (tmp_path / "transforms_test.json").write_text(json.dumps(meta))
    with pytest.warns(RuntimeWarning) as record:
        train, test = load_scene(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{tmp_path / 'transforms_test.json'}: 1 of 2 test frames list images the training "
        "frames list too (first: frame 1 './train/r_2' is transforms_train.json frame 2 "
        "'./train/r_2'): the test metrics are not held out"
    ]
    assert (len(train), len(test)) == (3, 2)  # it loads: evaluating on training views can be meant
    meta["frames"][1]["file_path"] = "./test/r_1"
    (tmp_path / "transforms_test.json").write_text(json.dumps(meta))
    load_scene(tmp_path)  # held-out test frames: no warning (warnings are errors here)
