"""Hostile and unusual input to the dataset and scene loaders (COLMAP, Blender, PLY): each case
here was a traceback, a hang, a MemoryError or silently lost data; now it loads correctly or
ends in a DataError naming the file and the problem. Fixtures come from test_datasets.py."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import struct
import time
import warnings

import numpy as np
import pytest
from test_datasets import (
    CAMERAS,
    IMAGES,
    blender_scene,
    colmap_scene,
    expect,
    png_bytes,
    rotmat,
    write_colmap_bin,
    write_colmap_txt,
)

from xprc.data import datasets
from xprc.data.blender import load_blender
from xprc.data.colmap import load_colmap, qvec_to_rotmat, read_colmap_model
from xprc.data.ply import load_ply, load_points_ply
from xprc.data.scene_folder import load_scene
from xprc.data.workloads import garden_workload
from xprc.errors import DataError

# --------------------------------------------------------------------------- COLMAP images.txt


def image_line(iid, q, t, cid, name) -> str:
    return " ".join(map(repr, [iid, *q, *t, cid])) + " " + name


def write_images_txt(root, lines) -> None:
    (root / "sparse/0/images.txt").write_text("\n".join(lines) + "\n")


def loaded_names(root) -> list[str]:
    return [v.name for v in load_colmap(root)]


ALL_NAMES = ["a.png", "b.png", "c.png", "sub dir/d.png"]


def test_images_txt_without_points2d_lines_loads_every_image(tmp_path):
    """A writer that leaves out the POINTS2D lines: every second image was read as keypoints
    and dropped without a word (2 of 4 views)."""
    colmap_scene(tmp_path, fmt="txt")
    write_images_txt(tmp_path, ["# one line per image"] + [image_line(*im) for im in IMAGES])
    ds = load_colmap(tmp_path)
    assert [v.name for v in ds] == ALL_NAMES
    for _, q, t, _, name in IMAGES:
        view = next(v for v in ds if v.name == name)
        np.testing.assert_allclose(view.viewmat[:3, :3], rotmat(q), atol=1e-6)
        np.testing.assert_allclose(view.viewmat[:3, 3], t, atol=1e-6)


def test_images_txt_mixes_points2d_lines_empty_lines_and_none(tmp_path):
    colmap_scene(tmp_path, fmt="txt")
    a, b, c, d = (image_line(*im) for im in IMAGES)
    lines = [a, "1.5 2.5 -1 3 4 7", b, "", c, "# a comment where a POINTS2D line could be", d]
    write_images_txt(tmp_path, lines)
    assert loaded_names(tmp_path) == ALL_NAMES
    write_images_txt(tmp_path, [a, b, "   ", c, "10 20 -1", d])  # integer keypoints
    assert loaded_names(tmp_path) == ALL_NAMES


@pytest.mark.parametrize("after,problem", [
    ("1.5 2.5", "line 2: expected the POINTS2D line of image 5 (line 1): X Y POINT3D_ID triples, "
                "or the next image line: IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME"),
    # whole-number keypoints that could also be an image line of this model: camera 1 exists,
    # image id 1 is new, and the name would be '7 8 9'
    ("1 2 7 3 4 8 5 6 1 7 8 9", "line 2: cannot tell whether this is the POINTS2D line of "
                                "image 5 (line 1) or an image line"),
])  # fmt: skip
def test_images_txt_line_after_an_image_is_checked(tmp_path, after, problem):
    colmap_scene(tmp_path, fmt="txt")
    write_images_txt(tmp_path, [image_line(*IMAGES[0]), after] + [
        image_line(*im) for im in IMAGES[1:]])  # fmt: skip
    expect(tmp_path / "sparse/0/images.txt", problem, load_colmap, tmp_path)


@pytest.mark.parametrize("points", [
    "1 2 -1 3 4 -1 5 6 -1 7 8 -1",  # COLMAP's C++ writer: 10.0 is '10', no point is -1
    "1 2 7 3 4 8 5 6 99 7 8 9",  # read as an image line: camera 99, which the model lacks
    "5 2 7 3 4 8 5 6 1 7 8 9",  # ... image id 5, which the line before defines
    "-1 2 7 3 4 8 5 6 1 7 8 9",  # ... image id -1 (COLMAP's ids are unsigned)
    "1.0 2.0 -1 3.0 4.0 -1 5.0 6.0 -1 7.0 8.0 -1",  # Python writers (nerfstudio): '10.0'
    "1.0000000000000001e-05 2 -1 3 4 -1 5 6 -1 7 8 -1",  # C++'s precision 17
])  # fmt: skip
def test_images_txt_whole_number_keypoints_as_colmap_writes_them_load(tmp_path, points):
    """COLMAP's writer prints each coordinate with `<<` at precision 17, so a keypoint at a
    whole pixel is `10`, not `10.0`; such a POINTS2D line of four triples or more also reads
    as an image line (`10 20 -1 30 ...`: image 10, camera -1, name '70 80 -1') and was refused
    as ambiguous. A reading that could not be an image line of this model is no reading."""
    colmap_scene(tmp_path, fmt="txt")
    lines = [image_line(*IMAGES[0]), points] + [image_line(*im) for im in IMAGES[1:]]
    write_images_txt(tmp_path, lines)
    assert loaded_names(tmp_path) == ALL_NAMES


COLMAP_HEADER = [  # as COLMAP's writer (and read_write_model.py) begins images.txt
    "# Image list with two lines of data per image:",
    "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME",
    "#   POINTS2D[] as (X, Y, POINT3D_ID)",
    "# Number of images: {n}, mean observations per image: 1.5",
]


def test_images_txt_whole_number_keypoints_read_by_colmaps_header(tmp_path):
    """Hostile pass (issue 43 item 10): whole-number keypoints whose third 3D point id is a
    camera id of the model (one camera per image, COLMAP's default, makes that likely) still
    read both ways and were refused. COLMAP's header says every image has two lines: such a
    line is the POINTS2D line, and the image count the header gives must then hold (else the
    refusal, as before); without the header, as before."""
    colmap_scene(tmp_path, fmt="txt")
    both = "1 2 7 3 4 8 5 6 1 7 8 9"  # an image line too: image 1 (new), camera 1, '7 8 9'
    body = [image_line(*IMAGES[0]), both] + [image_line(*im) for im in IMAGES[1:]]
    header = [line.format(n=4) for line in COLMAP_HEADER]
    write_images_txt(tmp_path, header + body)
    assert loaded_names(tmp_path) == ALL_NAMES
    header[3] = COLMAP_HEADER[3].format(n=5)  # a header that does not hold: refused
    write_images_txt(tmp_path, header + body)
    expect(tmp_path / "sparse/0/images.txt", "line 6: cannot tell whether this is the POINTS2D "
           "line of image 5 (line 5) or an image line (read as the POINTS2D line, as the "
           "header's 'two lines of data per image' says, the file holds 4 images, not the 5 of "
           "its 'Number of images')", load_colmap, tmp_path)  # fmt: skip
    write_images_txt(tmp_path, header[:1] + body)  # no count to check: refused
    expect(tmp_path / "sparse/0/images.txt", "line 3: cannot tell whether this is the POINTS2D "
           "line of image 5 (line 2) or an image line", load_colmap, tmp_path)  # fmt: skip


# --------------------------------------------------------------------------- duplicate ids


def test_duplicate_ids_in_text_models(tmp_path):
    """A dict kept the last of two records with one id: an image (or a camera) was lost."""
    colmap_scene(tmp_path, fmt="txt")
    sparse = tmp_path / "sparse/0"
    twin = (IMAGES[0][0], *IMAGES[1][1:])  # image id 5 again, with b's pose and name
    write_colmap_txt(sparse, images=IMAGES + [twin])
    expect(sparse / "images.txt", "line 11: image id 5 is defined twice (first at line 3)",
           load_colmap, tmp_path)  # fmt: skip
    write_colmap_txt(sparse, cameras=CAMERAS + [CAMERAS[1]])
    expect(sparse / "cameras.txt", "line 7: camera id 2 is defined twice (first at line 4)",
           load_colmap, tmp_path)  # fmt: skip


def test_duplicate_ids_in_binary_models(tmp_path):
    colmap_scene(tmp_path)
    sparse = tmp_path / "sparse/0"
    write_colmap_bin(sparse, images=IMAGES + [IMAGES[2]])
    expect(sparse / "images.bin", "image 5 of 5: image id 9 is defined twice (first at image 3 "
           "of 5)", load_colmap, tmp_path)  # fmt: skip
    write_colmap_bin(sparse, cameras=[CAMERAS[0]] + CAMERAS)
    expect(sparse / "cameras.bin", "camera 2 of 5: camera id 1 is defined twice (first at "
           "camera 1 of 5)", load_colmap, tmp_path)  # fmt: skip


# --------------------------------------------------------------------------- qvec


@pytest.mark.parametrize("scale", [1e200, 1e-200, 5e-324 / 0.5, 1e-7])
def test_qvec_of_any_finite_size_is_normalised(tmp_path, scale):
    """A qvec of 1e200 had an infinite norm and read as the identity; 1e-200 a zero norm."""
    q = np.array([0.5, 0.5, 0.5, 0.5]) * scale
    np.testing.assert_allclose(qvec_to_rotmat(q), rotmat([0.5, 0.5, 0.5, 0.5]), atol=1e-12)
    colmap_scene(tmp_path, fmt="txt")
    write_colmap_txt(tmp_path / "sparse/0", images=[(5, q.tolist(), [0.0, 0.0, 4.0], 1, "c.png")])
    view = load_colmap(tmp_path)[0]
    np.testing.assert_allclose(view.viewmat[:3, :3], rotmat([0.5] * 4), atol=1e-6)


@pytest.mark.parametrize("q,t,problem", [
    ([1e200, math.inf, 0.0, 0.0], [0.0, 0.0, 4.0], "qvec and tvec must be finite numbers"),
    ([math.nan, 0.0, 0.0, 0.0], [0.0, 0.0, 4.0], "qvec and tvec must be finite numbers"),
    ([0.0, -0.0, 0.0, 0.0], [0.0, 0.0, 4.0], "qvec is zero, not a rotation"),
    ([1.0, 0.0, 0.0, 0.0], [0.0, -math.inf, 4.0], "qvec and tvec must be finite numbers"),
])  # fmt: skip
@pytest.mark.parametrize("fmt", ["txt", "bin"])
def test_qvec_not_a_rotation(tmp_path, fmt, q, t, problem):
    colmap_scene(tmp_path, fmt=fmt)
    images = IMAGES[:2] + [(9, q, t, 3, "b.png")] + IMAGES[3:]
    (write_colmap_txt if fmt == "txt" else write_colmap_bin)(tmp_path / "sparse/0", images=images)
    at = "line 7" if fmt == "txt" else "image 3 of 4"
    expect(tmp_path / f"sparse/0/images.{fmt}", f"{at}: image 'b.png' (id 9): {problem}",
           read_colmap_model, tmp_path / "sparse/0")  # fmt: skip


# --------------------------------------------------------------------------- PLY headers

XYZ = ["property float x", "property float y", "property float z"]
ROW = struct.pack("<3f", 1.0, 2.0, 3.0)


def ply(lines, body=ROW, fmt="binary_little_endian", newline="\n") -> bytes:
    header = ["ply", f"format {fmt} 1.0", *lines, "end_header"]
    return newline.join(header).encode() + newline.encode() + body


BIG = "comment " + "x" * 70_000  # a header over the 64 KiB that used to be checked
LOADS = {
    "CR lines": ply(["element vertex 1", *XYZ], newline="\r"),  # was 'truncated'
    "CRLF lines": ply(["element vertex 1", *XYZ], newline="\r\n"),
    "comment end_header": ply(["comment end_header", "element vertex 1", *XYZ]),
    "header over 64 KiB": ply([BIG, "element vertex 1", *XYZ]),
    "type aliases": ply(["element vertex 1", "property f4 x", "property float32 y",
                         "property f4 z", "property b1 flag"], ROW + b"\x01"),
    "count +1": ply(["element vertex +1", *XYZ]),
    "ASCII, no last newline": ply(["element vertex 1", *XYZ], b"1 2 3", "ascii"),  # was refused
    "ASCII, blank lines after": ply(["element vertex 1", *XYZ], b"1 2 3\n\n  \n", "ascii"),
    "big endian": ply(["element vertex 1", *XYZ], struct.pack(">3f", 1, 2, 3),
                      "binary_big_endian"),
}  # fmt: skip


@pytest.mark.parametrize("data", LOADS.values(), ids=LOADS.keys())
def test_ply_header_variants_that_load(tmp_path, data):
    path = tmp_path / "p.ply"
    path.write_bytes(data)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        points, _ = load_points_ply(path)
    np.testing.assert_array_equal(points, [[1.0, 2.0, 3.0]])
    flag = f"{path}: ignored 1 point property: flag (points are read from x y z, colours from " \
        "red green blue)"  # fmt: skip
    assert [str(w.message) for w in record] == ([flag] if b" flag" in data else [])


TRUNCATED = (
    "truncated or corrupt PLY element 'vertex': the header declares 4000000000 rows of "
    "at least 12 bytes, but only 12 bytes follow the header"
)
NOT_A_COUNT = "malformed PLY header: line 3: element count {!r} is not a whole number"
REFUSED = {
    # each of these allocated 44.7 GiB (MemoryError) past the former pre-check
    "count +4000000000": (ply(["element vertex +4000000000", *XYZ]), TRUNCATED),
    "comment end_header": (ply(["comment end_header", "element vertex 4000000000", *XYZ]),
                           TRUNCATED),
    "header over 64 KiB": (ply([BIG, "element vertex 4000000000", *XYZ]), TRUNCATED),
    "type aliases": (ply(["element vertex 4000000000", "property f4 x", "property float32 y",
                          "property f4 z"]), TRUNCATED),
    "CRLF lines": (ply(["element vertex 4000000000", *XYZ], newline="\r\n"), TRUNCATED),
    # plyfile reads counts with int(): underscores, signs, 5000 digits (a ValueError traceback)
    "count 4_000_000_000": (ply(["element vertex 4_000_000_000", *XYZ]),
                            NOT_A_COUNT.format("4_000_000_000")),
    "count -1": (ply(["element vertex -1", *XYZ]), NOT_A_COUNT.format("-1")),
    "count of 5000 digits": (ply(["element vertex " + "9" * 5000, *XYZ]),
                             "malformed PLY header: line 3: expected integer count"),
    # 10^12 rows without properties: plyfile looped over them (a hang)
    "no properties": (ply(["element vertex 1000000000000"]),
                      "PLY element 'vertex' declares 1000000000000 rows but no properties"),
    "no properties, ASCII": (ply(["element vertex 1000000000000"], b"1\n", "ascii"),
                             "PLY element 'vertex' declares 1000000000000 rows but no properties"),
    "faces without properties": (
        ply(["element vertex 1", *XYZ, "element face 100000000000"]),
        "PLY element 'face' declares 100000000000 rows but no properties"),
    "header over 1 MiB": (b"ply\nformat ascii 1.0\ncomment " + b"x" * (1 << 20),
                          "PLY header longer than 1048576 bytes (no end_header)"),
    "empty header line": (ply(["", "element vertex 1", *XYZ]),
                          "malformed PLY header: line 3: empty line"),  # was 'early end-of-file'
    "non-ASCII header": (ply(["comment caf\u00e9", "element vertex 1", *XYZ]),
                         "malformed PLY header: line 3: byte 0xc3 (at offset 47) is not ASCII"),
    "header cut short": (b"ply\nformat ascii 1.0\nelement vertex 1\n",
                         "malformed PLY header: line 4: early end-of-file"),
    # counts smaller than the data: the rest was dropped without a word
    "binary data after the last element": (ply(["element vertex 1", *XYZ], ROW * 3),
        "24 bytes of data follow the last PLY element (the header declares 1 rows in all; its "
        "counts do not match the data)"),
    "ASCII rows after the last element": (ply(["element vertex 1", *XYZ], b"1 2 3\n4 5 6\n",
                                              "ascii"),
        "1 lines of data follow the last PLY element (the header declares 1 rows in all; its "
        "counts do not match the data)"),
}  # fmt: skip


@pytest.mark.parametrize("data,problem", REFUSED.values(), ids=REFUSED.keys())
def test_ply_hostile_headers_are_refused_before_reading(tmp_path, data, problem):
    path = tmp_path / "p.ply"
    path.write_bytes(data)
    for load in (load_points_ply, load_ply):
        expect(path, problem, load, path)


def test_binary_ply_is_not_read_row_by_row(tmp_path):
    """plyfile without a memory map reads a binary element one value at a time in Python:
    ~3 us each, 10 minutes for a 3-million-Gaussian scene (a hang to the user); 10^6 rows of
    x y z took ~10 s here."""
    n = 1_000_000
    xyz = np.arange(3 * n, dtype="<f4").reshape(n, 3)
    path = tmp_path / "many.ply"
    path.write_bytes(ply(["element vertex 1000000", *XYZ], xyz.tobytes()))
    start = time.perf_counter()
    points, _ = load_points_ply(path)
    assert time.perf_counter() - start < 3.0
    np.testing.assert_array_equal(points, xyz)


# --------------------------------------------------------------------------- memory estimate

GIB = 2**30


def test_blender_memory_is_estimated_from_the_headers(tmp_path, monkeypatch):
    """Three frames whose PNG headers claim 8192 x 8192 (no pixel data): the load needs
    2.25 GiB of float32 RGB; with 1 GiB of memory that is refused before anything is decoded
    (it used to decode frame after frame until a MemoryError)."""
    monkeypatch.setattr(datasets, "physical_memory", lambda: GIB)
    blender_scene(tmp_path, n=3)
    for i in range(3):
        (tmp_path / f"train/r_{i}.png").write_bytes(png_bytes(8192, 8192, 8, 2))
    expect(tmp_path / "transforms_train.json", "the 3 images need about 2.2 GiB of memory as "
           "float32 at downscale 1, more than the 1.0 GiB this machine has; downscale 2 "
           "(--downscale 2) needs about 576.0 MiB", load_blender, tmp_path)  # fmt: skip
    # at downscale 2 it fits, and the first image is decoded: it holds no pixels
    with pytest.raises(DataError, match=r"r_0.png: error: unreadable image"):
        load_blender(tmp_path, downscale=2)
    (tmp_path / "train/r_1.png").write_bytes(png_bytes(8192, 8192, 8, 6))  # RGBA: + alpha
    expect(tmp_path / "transforms_train.json", "the 3 images need about 2.5 GiB of memory as "
           "float32 at downscale 1, more than the 1.0 GiB this machine has; downscale 2 "
           "(--downscale 2) needs about 640.0 MiB", load_blender, tmp_path)  # fmt: skip


def test_colmap_memory_is_estimated_from_the_cameras(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "physical_memory", lambda: GIB)
    colmap_scene(tmp_path)
    big = [(cid, model, 8192, 8192, params) for cid, model, _, _, params in CAMERAS]
    write_colmap_bin(tmp_path / "sparse/0", cameras=big)
    expect(tmp_path, "the 4 images need about 3.0 GiB of memory as float32 at downscale 1, "
           "more than the 1.0 GiB this machine has; downscale 2 (--downscale 2) needs about "
           "768.0 MiB", load_colmap, tmp_path)  # fmt: skip
    monkeypatch.setattr(datasets, "physical_memory", lambda: 100_000)
    expect(tmp_path, "the 4 images need about 491.6 MiB of memory as float32 at downscale 2.5, "
           "more than the 97.7 KiB this machine has; even downscale 64 does not fit; load fewer "
           "images", load_colmap, tmp_path, downscale=2.5)  # fmt: skip


def test_physical_memory_is_known_here():
    assert datasets.physical_memory() > 2**26


@pytest.mark.parametrize("size", [(0, 12), (16, -1), (2**40, 2**40)])
def test_colmap_camera_size(tmp_path, size):
    """A camera of 2^40 x 2^40 pixels could never load; it is refused before the memory
    estimate (which would otherwise suggest a downscale)."""
    colmap_scene(tmp_path, fmt="txt")
    write_colmap_txt(tmp_path / "sparse/0", cameras=[(1, "PINHOLE", *size, [9.0, 9.0, 4.0, 3.0])]
                     + CAMERAS[1:])  # fmt: skip
    expect(tmp_path / "sparse/0/cameras.txt", f"camera 1: size {size[0]}x{size[1]} is not 1 to "
           "67,108,864 pixels", load_colmap, tmp_path)  # fmt: skip


def test_load_scene_estimates_both_blender_splits_together(tmp_path, monkeypatch):
    """Train and test are held together: each fits alone here, both do not."""
    monkeypatch.setattr(datasets, "physical_memory", lambda: GIB)
    for split in ("train", "test"):
        blender_scene(tmp_path, n=1, split=split)
        (tmp_path / f"{split}/r_0.png").write_bytes(png_bytes(8192, 8192, 8, 2))
    for split in ("train", "test"):  # alone: on to decoding, which fails (no pixels)
        with pytest.raises(DataError, match=rf"{split}/r_0.png: error: unreadable image"):
            load_blender(tmp_path, split)
    expect(tmp_path, "the 2 images need about 1.5 GiB of memory as float32 at downscale 1, "
           "more than the 1.0 GiB this machine has; downscale 2 (--downscale 2) needs about "
           "384.0 MiB", load_scene, tmp_path)  # fmt: skip


# --------------------------------------------------------------------------- hostile-input probe
# Each case was a traceback, a hang or silently wrong data; see docs/input-validation.md.


def blender_case(edit=None, setup=None):
    def build(tmp):
        meta = blender_scene(tmp, n=1)
        if edit:
            edit(meta, meta["frames"][0])
        (tmp / "transforms_train.json").write_text(json.dumps(meta))
        if setup:
            setup(tmp)
        return "transforms_train.json", load_blender, tmp

    return build


def colmap_case(fmt, setup):
    def build(tmp):
        colmap_scene(tmp, fmt=fmt)
        setup(tmp / "sparse/0")
        return "sparse/0/" + {"txt": "cameras.txt", "bin": "cameras.bin"}[fmt], load_colmap, tmp

    return build


def garden_case(write):
    def build(tmp):
        path = tmp / "garden.npz"
        write(path)
        return "garden.npz", lambda p: garden_workload(p, num=4), path

    return build


def replace_in(path, old, new):
    path.write_text(path.read_text().replace(old, new, 1))


def append(path, data):
    path.write_bytes(path.read_bytes() + data)


def garden(**edits):
    arrays = {
        "means3d": np.zeros((6, 3)),
        "colors": np.full((6, 3), 100.0),
        "viewmats": np.eye(4)[None],
        "Ks": np.eye(3)[None] * 10,
        "width": 8,
        "height": 6,
    }
    return lambda path: np.savez(path, **(arrays | edits))  # fmt: skip


BIG = 10**400
F0 = "frame 0: "
BIG_SHOWN = "must be a finite number, got 1000000000000000000000000000000000000..."
PROBES = {
    # Blender: numbers beyond float64 were OverflowError tracebacks; strings, booleans and 1e-320
    # loaded; a duplicate key, a lone 'w' and an unreadable points3d.ply were ignored
    "camera_angle_x 10**400": (blender_case(lambda m, f: m.update(camera_angle_x=BIG)), None,
        F0 + "'camera_angle_x' " + BIG_SHOWN),
    "cx 10**400": (blender_case(lambda m, f: m.update(cx=BIG)), None,
        F0 + "'cx' " + BIG_SHOWN),
    "w 10**400": (blender_case(lambda m, f: m.update(w=BIG, h=8)), None,
        F0 + "'w' " + BIG_SHOWN),
    "fl_x 1e-320": (blender_case(lambda m, f: m.update(fl_x=1e-320)), None,
        F0 + "'fl_x' is below the float32 range, got 1e-320"),
    "w without h": (blender_case(lambda m, f: f.update(w=8)), None, F0 + "'w' without 'h'"),
    "matrix of strings": (blender_case(lambda m, f: f.update(transform_matrix=[
        [str(v) for v in row] for row in f["transform_matrix"]])), None,
        F0 + "'transform_matrix' must be a 4x4 matrix of numbers"),
    "matrix of booleans": (blender_case(lambda m, f: f.update(transform_matrix=np.eye(4, dtype=bool)
        .tolist())), None, F0 + "'transform_matrix' must be a 4x4 matrix of numbers"),
    # (these two guard the stricter matrix check: the fuzzer found the ragged one)
    "matrix 10**400": (blender_case(lambda m, f: f["transform_matrix"][0].__setitem__(3, BIG)),
        None, F0 + "'transform_matrix' must be a 4x4 matrix of numbers"),
    "ragged matrix": (blender_case(lambda m, f: f["transform_matrix"].__setitem__(0, [])), None,
        F0 + "'transform_matrix' must be a 4x4 matrix of numbers"),
    "points3d.ply a directory": (blender_case(setup=lambda t: (t / "points3d.ply").mkdir()),
        "points3d.ply", "is a directory, not a file"),
    "points3d.ply a FIFO": (blender_case(setup=lambda t: os.mkfifo(t / "points3d.ply")),
        "points3d.ply", "not a regular file"),
    "points3d.ply a link loop": (blender_case(setup=lambda t: os.symlink("points3d.ply",
        t / "points3d.ply")), "points3d.ply", "cannot read: Too many levels of symbolic links"),
    # COLMAP: a directory (or FIFO) named cameras.txt was 'cameras.bin: file not found'; one named
    # cameras.bin made the reader use cameras.txt; sparse/0 a file: 'sparse/cameras.bin ...'
    "cameras.txt a directory": (colmap_case("txt", lambda s: (os.remove(s / "cameras.txt"),
        (s / "cameras.txt").mkdir())), None, "is a directory, not a file"),
    "cameras.bin a directory beside cameras.txt": (colmap_case("txt", lambda s: (
        s / "cameras.bin").mkdir()), "sparse/0/cameras.bin", "is a directory, not a file"),
    "sparse/0 a file": (colmap_case("txt", lambda s: (shutil.rmtree(s), s.write_text("x"))),
        "sparse/0", "not a folder"),
    # data after the last record: a count too small dropped the rest without a word
    "cameras.bin data after the last camera": (colmap_case("bin", lambda s: append(
        s / "cameras.bin", b"garbage!")), None,
        "8 bytes follow the last of the 4 cameras the header declares (its count does not match "
        "the data)"),
    "images.bin data after the last image": (colmap_case("bin", lambda s: append(
        s / "images.bin", b"garbage!")), "sparse/0/images.bin",
        "8 bytes follow the last of the 4 images the header declares (its count does not match "
        "the data)"),
    "points3D.bin data after the last point": (colmap_case("bin", lambda s: append(
        s / "points3D.bin", b"!")), "sparse/0/points3D.bin",
        "1 bytes follow the last of the 2 points the header declares (its count does not match "
        "the data)"),
    # Python reads '2_0' as 20; COLMAP does not
    "cameras.txt number 2_0": (colmap_case("txt", lambda s: replace_in(
        s / "cameras.txt", "1 PINHOLE 16 12 20.0", "1 PINHOLE 16 12 2_0")), None,
        "line 3: expected CAMERA_ID MODEL WIDTH HEIGHT PARAMS[], got '2_0'"),
    # two ids of one name were two views of one image
    "image name twice": (colmap_case("txt", lambda s: replace_in(s / "images.txt", "a.png",
        "c.png")), "sparse/0/images.txt", "image name 'c.png' is used by image ids 5 and 2"),
    "focal length 1e-320": (colmap_case("bin", lambda s: write_colmap_bin(s, cameras=[
        (1, "PINHOLE", 16, 12, [1e-320, 21.0, 8.0, 6.0])] + CAMERAS[1:])), None,
        "camera 1: focal lengths must be positive in float32, got fx=1e-320, fy=21.0"),
    # the garden workload (XPRC_GARDEN): a FIFO hung; a .npy, a 1-d means3d, an array width
    # were tracebacks; a truncated archive a ResourceWarning
    "garden a FIFO": (garden_case(os.mkfifo), None, "not a regular file"),
    "garden a .npy": (garden_case(lambda p: p.write_bytes(npy_bytes())), None,
        "not a garden workload file (not an .npz archive)"),
    "garden truncated": (garden_case(lambda p: (garden()(p), p.write_bytes(p.read_bytes()[:200]))),
        None, "truncated or corrupt garden workload file (File is not a zip file)"),
    "garden 1-d means3d": (garden_case(garden(means3d=np.zeros(6))), None,
        "'means3d' (positions) must be finite numbers of shape ['N', 3], got float64 [6]"),
    "garden NaN colours": (garden_case(garden(colors=np.full((6, 3), np.nan))), None,
        "'colors' (colours in 0..255) must be finite numbers of shape ['N', 3], got float64 "
        "[6, 3]"),
    "garden width an array": (garden_case(garden(width=np.array([8, 9]))), None,
        "'width' (the image width) must be a positive integer, got int64 [2]"),
    "garden width a string": (garden_case(garden(width="eight")), None,
        "'width' (the image width) must be a positive integer, got <U5 []"),
    "garden without Ks": (garden_case(lambda p: np.savez(p, means3d=np.zeros((6, 3)),
        colors=np.zeros((6, 3)), viewmats=np.eye(4)[None])), None,
        "not a garden workload file (no 'Ks': intrinsics)"),
}  # fmt: skip


def npy_bytes() -> bytes:
    out = io.BytesIO()
    np.save(out, np.zeros(3))
    return out.getvalue()


@pytest.mark.parametrize("build,where,problem", PROBES.values(), ids=PROBES.keys())
def test_hostile_input_probe(tmp_path, build, where, problem):
    default, fn, arg = build(tmp_path)
    expect(tmp_path / (where or default), problem, fn, arg)


def test_json_integer_of_5000_digits(tmp_path):
    """json.loads raised a ValueError (Python's limit of 4300 digits): a traceback."""
    blender_scene(tmp_path, n=1)
    (tmp_path / "transforms_train.json").write_text('{"camera_angle_x": ' + "9" * 5000 + "}")
    with pytest.raises(DataError) as e:
        load_blender(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 'transforms_train.json'}: error: ")


def test_json_key_twice(tmp_path):
    """json keeps the last of two equal keys without a word."""
    meta = blender_scene(tmp_path, n=1)
    text = json.dumps(meta).replace('"camera_angle_x"', '"camera_angle_x": 0.2, "camera_angle_x"')
    (tmp_path / "transforms_train.json").write_text(text)
    expect(tmp_path / "transforms_train.json", "invalid JSON: the key 'camera_angle_x' appears "
           "twice in one object", load_blender, tmp_path)  # fmt: skip


# --------------------------------------------------------------------------- links out of a dataset


def _move_out(root, name, outside):
    """Move `root/name` to `outside` and leave a symbolic link to it in its place."""
    shutil.move(root / name, outside)
    os.symlink(outside, root / name)


def test_blender_folder_linked_out_of_the_dataset_is_followed_and_named(tmp_path):
    """`train/` a link to a folder outside the dataset loaded without a word (a '../' path is
    refused): it is followed (big image folders are linked in on purpose), and one warning
    names the link and its target."""
    root, big = tmp_path / "scene", tmp_path / "big" / "train"
    root.mkdir()
    big.parent.mkdir()
    blender_scene(root)
    _move_out(root, "train", big)
    with pytest.warns(RuntimeWarning) as record:
        data = load_blender(root)
    assert len(data) == 3
    (w,) = record
    assert str(w.message) == (
        f"{root}: 3 of 4 dataset files are read through symbolic links that lead out of the "
        f"dataset folder ({root}): train -> {big} (3 files); they are followed"
    )
    assert w.filename == __file__  # the warning points at the caller


def test_colmap_image_and_model_linked_out_of_the_dataset_are_named(tmp_path):
    root = tmp_path / "scene"
    root.mkdir()
    colmap_scene(root)
    name = IMAGES[1][4]
    _move_out(root / "images", name, tmp_path / "one.png")
    _move_out(root, "sparse", tmp_path / "model")
    with pytest.warns(RuntimeWarning) as record:
        data = load_colmap(root)
    assert len(data) == len(IMAGES)
    (w,) = record
    assert str(w.message) == (
        f"{root}: 4 of {3 + len(IMAGES)} dataset files are read through symbolic links that "
        f"lead out of the dataset folder ({root}): sparse -> {tmp_path / 'model'} (3 files); "
        f"images/{name} -> {tmp_path / 'one.png'} (1 file); they are followed"
    )


def test_a_dataset_mark_that_is_there_but_unusable_is_named(tmp_path):
    """Hostile pass (issue 43 item 9): transforms_train.json as a dangling link, a folder or a
    link to /dev/null, or sparse as a file, was 'not a dataset: expected transforms_train.json
    (Blender) or sparse/ (COLMAP)', as if the folder held neither."""
    mark = tmp_path / "transforms_train.json"
    mark.symlink_to(tmp_path / "gone.json")
    expect(mark, f"a symbolic link to {tmp_path / 'gone.json'}, which does not exist",
           load_scene, tmp_path)  # fmt: skip
    mark.unlink()
    mark.symlink_to(os.devnull)
    expect(mark, "not a regular file", load_scene, tmp_path)
    mark.unlink()
    mark.mkdir()
    expect(mark, "is a directory, not a file", load_scene, tmp_path)
    mark.rmdir()
    (tmp_path / "sparse").write_text("")
    expect(tmp_path / "sparse", "not a folder (a COLMAP scene keeps its model in sparse/)",
           load_scene, tmp_path)  # fmt: skip


def test_links_inside_the_dataset_and_a_linked_dataset_folder_say_nothing(tmp_path):
    """A link that stays inside the folder, and the dataset folder itself given through a
    link, read nothing from outside it: no warning (warnings are errors here)."""
    real = tmp_path / "real"
    real.mkdir()
    blender_scene(real)
    (real / "train").rename(real / "frames")
    os.symlink("frames", real / "train")
    os.symlink(real, tmp_path / "scene")
    assert len(load_blender(tmp_path / "scene")) == 3


def test_a_dataset_given_as_the_current_folder_loads(tmp_path, monkeypatch):
    """`--data .` on a Blender scene: every 'file_path' was refused as pointing outside the
    dataset folder '.' (the check compared 'train/r_0' with '.')."""
    blender_scene(tmp_path)
    monkeypatch.chdir(tmp_path / "train")
    assert len(load_blender("..")) == 3
    monkeypatch.chdir(tmp_path)
    assert len(load_blender(".")) == 3
    with pytest.raises(DataError, match="'file_path' '../x' points outside the dataset folder"):
        datasets.path_inside(datasets.Path("."), "../x", tmp_path / "t.json", "'file_path'")
