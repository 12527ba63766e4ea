"""Hostile and unusual input to the dataset and scene loaders (COLMAP, Blender, PLY): each case
here was a traceback, a hang, a MemoryError or silently lost data; now it loads correctly or
ends in a DataError naming the file and the problem. Fixtures come from test_datasets.py."""

from __future__ import annotations

import math
import struct
import time

import numpy as np
import pytest
from test_datasets import (
    CAMERAS,
    IMAGES,
    colmap_scene,
    expect,
    rotmat,
    write_colmap_bin,
    write_colmap_txt,
)

from xprc.colmap import qvec_to_rotmat
from xprc.datasets import load_colmap, read_colmap_model
from xprc.io import load_ply, load_points_ply

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
    ("1 2 -1 3 4 -1 5 6 -1 7 8 -1", "line 2: cannot tell whether this is the POINTS2D line of "
                                    "image 5 (line 1) or an image line"),
])  # fmt: skip
def test_images_txt_line_after_an_image_is_checked(tmp_path, after, problem):
    colmap_scene(tmp_path, fmt="txt")
    write_images_txt(tmp_path, [image_line(*IMAGES[0]), after] + [
        image_line(*im) for im in IMAGES[1:]])  # fmt: skip
    expect(tmp_path / "sparse/0/images.txt", problem, load_colmap, tmp_path)


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
    points, _ = load_points_ply(path)
    np.testing.assert_array_equal(points, [[1.0, 2.0, 3.0]])


TRUNCATED = ("truncated or corrupt PLY element 'vertex': the header declares 4000000000 rows of "
             "at least 12 bytes, but only 12 bytes follow the header")
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
