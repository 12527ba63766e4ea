"""The loaders say what they leave out, guess or approximate ("nothing silent"): a PLY property
they do not read, a lens in transforms.json, 16-bit colour read at 8 bits, pre-shrunk COLMAP
images, a damaged metrics.json."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from PIL import Image
from test_datasets import CAMERAS, IMAGES, blender_scene, colmap_scene, png_bytes, write_colmap_bin
from test_io import gaussians, standard_columns, write_vertex_ply

from xprc.data.blender import load_blender
from xprc.data.colmap import load_colmap
from xprc.data.ply import load_ply, save_ply
from xprc.errors import DataError
from xprc.trained import load_trained

# --------------------------------------------------------------------------- PLY


def test_ply_names_the_properties_it_ignores(tmp_path):
    """Mip-Splatting's filter_3D is not read: one warning names the file and the property."""
    p = gaussians(n=4, degree=1)
    cols = standard_columns(p) | {"filter_3D": np.ones(4, np.float32), "extra": np.ones(4)}
    path = tmp_path / "mip.ply"
    write_vertex_ply(path, cols)
    with pytest.warns(RuntimeWarning) as caught:
        q = load_ply(path)
    assert len(caught) == 1
    assert str(caught[0].message) == (
        f"{path}: ignored 2 vertex properties outside the 3DGS layout: filter_3D, extra "
        "(a render may differ from the tool that wrote them)"
    )
    for k in p:
        np.testing.assert_array_equal(q[k], p[k])


def test_ply_gaussians_with_an_all_zero_rotation_are_counted(tmp_path):
    """rot_0..3 = 0 is no rotation; it was drawn as the identity without a word."""
    p = gaussians(n=6, degree=0)
    p["quats"][[2, 4]] = 0.0
    path = tmp_path / "zero.ply"
    write_vertex_ply(path, standard_columns(p))
    with pytest.warns(RuntimeWarning) as caught:
        q = load_ply(path)
    assert [str(w.message) for w in caught] == [
        f"{path}: 2 Gaussian(s) have an all-zero rotation quaternion (rot_0..rot_3, first at "
        "vertex 2), which is no rotation: they are drawn unrotated"
    ]
    np.testing.assert_array_equal(q["quats"], p["quats"])


@pytest.mark.parametrize(
    "name,value,index",
    [("means", np.nan, 3), ("scales", np.inf, 1), ("opacities", 1e300, 2)],
)
def test_checkpoint_values_are_checked_as_a_plys_are(tmp_path, name, value, index):
    """A checkpoint's NaN parameter rendered with a 'left out' warning and a float64 value
    beyond float32 with a bare overflow warning; a PLY's are errors naming the value."""
    from xprc.data.npz import save_checkpoint

    p = {k: v.astype(np.float64) for k, v in gaussians(n=5, degree=0).items()}
    p[name][index] = value
    path = tmp_path / "bad.npz"
    save_checkpoint(path, {"params": p}, {"method": "Gaussian3D"})
    with pytest.raises(DataError) as info:
        load_trained(path)
    assert str(info.value) == (
        f"{path}: error: non-finite value in parameter '{name}' (primitive {index}): NaN, "
        "infinite, or beyond float32's range, in which renders read it"
    )


def test_ply_standard_layout_with_normals_loads_without_a_word(tmp_path):
    save_ply(tmp_path / "g.ply", gaussians(n=3, degree=2))  # x y z nx ny nz f_dc f_rest ...
    load_ply(tmp_path / "g.ply")  # warnings are errors here


# --------------------------------------------------------------------------- transforms.json


def _lens_scene(tmp_path, **fields):
    meta = blender_scene(tmp_path, n=2)
    meta.update(fields)
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    return tmp_path / "transforms_train.json"


def test_opencv_lens_is_mapped_to_our_slots(tmp_path):
    _lens_scene(tmp_path, camera_model="OPENCV", k1=0.1, k2=-0.02, k3=0.003, p1=0.001, p2=0.002)
    ds = load_blender(tmp_path)
    for v in ds:  # ours: k1..k6, p1, p2, s1..s4
        assert v.model == "opencv"
        np.testing.assert_allclose(v.dist, [0.1, -0.02, 0.003, 0, 0, 0, 0.001, 0.002, 0, 0, 0, 0],
                                   rtol=1e-6)  # fmt: skip
    assert ds.cameras().model == "opencv"


def test_distortion_without_camera_model_is_opencv_as_in_nerfstudio(tmp_path):
    _lens_scene(tmp_path, k1=0.05, p2=-0.001)
    v = load_blender(tmp_path)[0]
    assert v.model == "opencv"
    np.testing.assert_allclose(v.dist[[0, 7]], [0.05, -0.001], rtol=1e-6)
    assert np.count_nonzero(v.dist) == 2


def test_opencv_fisheye_lens_is_our_fisheye(tmp_path):
    _lens_scene(tmp_path, camera_model="OPENCV_FISHEYE", k1=0.01, k2=0.02, k3=0.03, k4=0.04)
    v = load_blender(tmp_path, downscale=2)[1]  # a resize leaves the coefficients as they are
    assert v.model == "fisheye"
    np.testing.assert_allclose(v.dist, [0.01, 0.02, 0.03, 0.04] + [0] * 8, rtol=1e-6)


@pytest.mark.parametrize(
    ("model", "fields", "refused"),
    [("SIMPLE_RADIAL", {"k1": 0.07}, "k2"), ("RADIAL", {"k1": 0.07, "k2": -0.01}, "p1")],
)
def test_nerfstudio_radial_models_are_opencv(tmp_path, model, fields, refused):
    """SIMPLE_RADIAL (k1) and RADIAL (k1, k2) are valid nerfstudio models (they were refused)."""
    _lens_scene(tmp_path, camera_model=model, **fields)
    v = load_blender(tmp_path)[0]
    assert v.model == "opencv"
    np.testing.assert_allclose(v.dist[:2], [fields["k1"], fields.get("k2", 0.0)], rtol=1e-6)
    assert np.count_nonzero(v.dist[2:]) == 0
    path = _lens_scene(tmp_path, camera_model=model, **fields, **{refused: 0.01})
    with pytest.raises(DataError, match=f"'{refused}' = 0.01 is not supported with camera_model"):
        load_blender(tmp_path)
    assert path.is_file()


def test_frames_with_and_without_distortion_share_one_model(tmp_path):
    """Per-frame k1 with one frame at 0 gave a pinhole among opencv cameras, which cannot be
    stacked for training."""
    path = _lens_scene(tmp_path)
    meta = json.loads(path.read_text())
    meta["frames"][0]["k1"] = 0.0
    meta["frames"][1]["k1"] = 0.05
    path.write_text(json.dumps(meta))
    ds = load_blender(tmp_path)
    assert [v.model for v in ds] == ["opencv", "opencv"]
    assert ds.cameras().model == "opencv" and float(ds[0].dist[0]) == 0.0


def test_zero_distortion_is_a_pinhole(tmp_path):
    _lens_scene(tmp_path, camera_model="OPENCV", k1=0, k2=0, p1=0, p2=0)
    assert {v.model for v in load_blender(tmp_path)} == {"pinhole"}


@pytest.mark.parametrize(
    "fields,problem",
    [
        ({"camera_model": "EQUIRECTANGULAR"}, "'camera_model' 'EQUIRECTANGULAR' is not supported "
         "(supported: OPENCV, OPENCV_FISHEYE, PINHOLE, SIMPLE_PINHOLE, SIMPLE_RADIAL, RADIAL)"),
        ({"camera_model": 3}, "'camera_model' must be a string, got 3"),
        ({"k4": 0.01}, "'k4' = 0.01 is not supported with camera_model OPENCV (xprc's lens models "
         "cannot represent it)"),
        ({"camera_model": "OPENCV_FISHEYE", "p1": 0.5}, "'p1' = 0.5 is not supported with "
         "camera_model OPENCV_FISHEYE (xprc's lens models cannot represent it)"),
        ({"camera_model": "PINHOLE", "k1": 0.1}, "'k1' = 0.1 is not supported with camera_model "
         "PINHOLE (has no distortion)"),
        ({"k2": "big"}, "'k2' must be a finite number, got 'big'"),
        ({"is_fisheye": True}, "'is_fisheye' is not supported (give camera_model OPENCV_FISHEYE "
         "and k1..k4 instead)"),
    ],
)  # fmt: skip
def test_lens_fields_xprc_cannot_follow_are_errors(tmp_path, fields, problem):
    path = _lens_scene(tmp_path, **fields)
    with pytest.raises(DataError) as e:
        load_blender(tmp_path)
    assert str(e.value) == f"{path}: error: frame 0: {problem}"


def test_fl_x_that_disagrees_with_camera_angle_x_is_named(tmp_path):
    path = _lens_scene(tmp_path, camera_angle_x=0.9, fl_x=10.0)  # images are 8 wide
    want = 0.5 * 8 / math.tan(0.45)
    message = (f"{path}: 2 of 2 frames: frame 0: 'camera_angle_x' gives fx = {want:.6g}, but "
               "'fl_x' (fx = 10) is used")  # fmt: skip
    with pytest.warns(RuntimeWarning, match=re.escape(message)):
        ds = load_blender(tmp_path)
    np.testing.assert_allclose(ds[0].K[0, 0], 10.0)


def test_fl_x_that_agrees_with_camera_angle_x_is_quiet(tmp_path):
    fx = 0.5 * 8 / math.tan(0.45)
    _lens_scene(tmp_path, camera_angle_x=0.9, fl_x=fx, fl_y=fx)
    np.testing.assert_allclose(load_blender(tmp_path)[0].K[0, 0], fx, rtol=1e-6)


# --------------------------------------------------------------------------- 16-bit colour


def _png16(path, rgb):
    h, w, c = rgb.shape
    rows = b"".join(b"\0" + rgb[i].astype(">u2").tobytes() for i in range(h))
    path.write_bytes(png_bytes(w, h, 16, {3: 2, 4: 6}[c], rows))


def test_16_bit_colour_is_counted_once_per_dataset(tmp_path):
    blender_scene(tmp_path, n=3)
    with Image.open(tmp_path / "train/r_0.png") as img:
        w, h = img.size
    rng = np.random.default_rng(0)
    _png16(tmp_path / "train/r_0.png", rng.integers(0, 65536, (h, w, 3), dtype=np.uint16))
    _png16(tmp_path / "train/r_2.png", rng.integers(0, 65536, (h, w, 4), dtype=np.uint16))
    with pytest.warns(RuntimeWarning) as caught:
        load_blender(tmp_path)
    assert [str(w.message) for w in caught] == [
        f"{tmp_path / 'transforms_train.json'}: 2 of 3 images are 16-bit colour, read at 8 bits "
        "a channel (first: train/r_0.png); 16-bit grey images keep their 16 bits"
    ]


def test_16_bit_colour_in_colmap_is_counted(tmp_path):
    colmap_scene(tmp_path)
    _png16(tmp_path / "images/a.png", np.full((12, 16, 3), 30000, np.uint16))
    with pytest.warns(RuntimeWarning, match=r"images: 1 of 4 images are 16-bit colour"):
        ds = load_colmap(tmp_path)
    np.testing.assert_allclose(ds[0].image, 30000 / 65535, atol=1 / 255)


# --------------------------------------------------------------------------- COLMAP images_N


def test_pre_shrunk_images_keep_their_size_and_k_follows(tmp_path):
    """A 9x7 images_2/ file of a 16x12 camera (8x6 expected) is not resampled: K scales to it."""
    colmap_scene(tmp_path)
    full = {v.name: v for v in load_colmap(tmp_path)}
    for _, _, _, _, name in IMAGES:
        path = tmp_path / "images_2" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.arange(7 * 9 * 3, dtype=np.uint8).reshape(7, 9, 3)).save(path)
    for v in load_colmap(tmp_path, downscale=2):
        assert (v.width, v.height) == (9, 7) and v.image.shape == (7, 9, 3)
        np.testing.assert_array_equal(v.image * 255, np.arange(7 * 9 * 3).reshape(7, 9, 3))
        K = full[v.name].K.astype(np.float64)
        np.testing.assert_allclose(v.K[0], K[0] * 9 / 16, rtol=1e-6)
        np.testing.assert_allclose(v.K[1], K[1] * 7 / 12, rtol=1e-6)


def test_pre_shrunk_images_of_one_camera_must_share_a_size(tmp_path):
    imgs = [
        (1, [1.0, 0, 0, 0], [0, 0, 3.0], 1, "a.png"),
        (2, [1.0, 0, 0, 0], [0, 0, 4.0], 1, "b.png"),
    ]
    write_colmap_bin(tmp_path / "sparse" / "0", CAMERAS[:1], imgs)
    for folder, sizes in (("images", [(16, 12)] * 2), ("images_2", [(8, 6), (9, 7)])):
        (tmp_path / folder).mkdir()
        for (_, _, _, _, name), (w, h) in zip(imgs, sizes, strict=True):
            Image.fromarray(np.zeros((h, w, 3), np.uint8)).save(tmp_path / folder / name)
    with pytest.raises(DataError) as e:
        load_colmap(tmp_path, downscale=2)
    assert str(e.value) == (
        f"{tmp_path / 'images_2' / 'b.png'}: error: image is 9x7, but a.png of the same camera 1 "
        "is 8x6; the images of one camera must share one size"
    )


# --------------------------------------------------------------------------- metrics.json


@pytest.mark.parametrize(
    "text,problem",
    [
        ('{"background": [1, 1, 1],\n "method": ',
         "invalid JSON: Expecting value (line 2, column 12)"),
        ("[1, 2]", "invalid run report: the top level must be a JSON object"),
        (b"\xff\xfe{}", "invalid JSON: not UTF-8 text"),
        # read as transforms_*.json are (data.files.json_object): the last background was kept
        ('{"background": [0, 0, 0], "background": [1, 1, 1]}',
         "invalid JSON: the key 'background' appears twice in one object"),
        pytest.param("[" * 100_000, "invalid JSON: nested too deeply", id="deep"),
    ],
)  # fmt: skip
def test_damaged_metrics_json_is_an_error_not_a_missing_file(tmp_path, text, problem):
    save_ply(tmp_path / "scene.ply", gaussians(n=2, degree=0))
    metrics = tmp_path / "metrics.json"
    (metrics.write_bytes if isinstance(text, bytes) else metrics.write_text)(text)
    with pytest.raises(DataError) as e:
        load_trained(tmp_path)
    assert str(e.value) == f"{metrics}: error: {problem}"


def test_metrics_json_that_parses_is_read(tmp_path):
    save_ply(tmp_path / "scene.ply", gaussians(n=2, degree=0))
    (tmp_path / "metrics.json").write_text(json.dumps({"background": [0, 0.5, 1]}))
    assert load_trained(tmp_path).background == (0.0, 0.5, 1.0)


def test_an_ascii_ply_value_beyond_float32_is_one_error_and_no_numpy_warning(tmp_path):
    """numpy's 'overflow encountered in cast' was printed (file:line RuntimeWarning) before the
    error; the test suite turns warnings into errors, so a stray one fails this test."""
    p = gaussians(n=3, degree=0)
    path = tmp_path / "big.ply"
    write_vertex_ply(path, standard_columns(p), text=True)
    text = path.read_text()
    head, body = text.split("end_header\n")
    rows = body.splitlines()
    rows[1] = "1e39 " + rows[1].split(" ", 1)[1]
    path.write_text(head + "end_header\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataError) as info:
        load_ply(path)
    assert str(info.value) == f"{path}: error: non-finite value in property 'x' (vertex 1)"


def test_blender_intrinsics_that_are_surely_wrong_are_named(tmp_path):
    """A principal point of 1e6 on a 32x32 image loaded without a word (nothing renders)."""
    from test_datasets import blender_scene

    meta = blender_scene(tmp_path, n=2, split="train")
    meta["cx"] = 1e6
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    with pytest.warns(RuntimeWarning) as caught:
        load_blender(tmp_path, "train")
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and messages[0].startswith(
        f"{tmp_path / 'transforms_train.json'}: 2 of 2 views have intrinsics that are surely "
        "wrong (first: view './train/r_0', "
    )
    assert "cx=1e+06" in messages[0] and "principal point far outside the image" in messages[0]


def test_colmap_focal_lengths_that_are_surely_wrong_are_named(tmp_path):
    from test_datasets import write_colmap_txt

    colmap_scene(tmp_path, fmt="txt")
    cams = [(c, m, w, h, list(p)) for c, m, w, h, p in CAMERAS]
    cams[0][4][:2] = [1e-30, 1e-30]
    write_colmap_txt(tmp_path / "sparse" / "0", cameras=cams)
    with pytest.warns(RuntimeWarning) as caught:
        load_colmap(tmp_path)
    messages = [str(w.message) for w in caught]
    assert (
        len(messages) == 1 and "1 of 4 views have intrinsics that are surely wrong" in (messages[0])
    )
    assert "fx=1e-30, fy=1e-30" in messages[0] and "focal length under 1%" in messages[0]


# --------------------------------------------------------------------------- EXIF orientation


def _with_orientation(path, pixels, orientation, fmt):
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(pixels).save(path, format=fmt, exif=exif.tobytes(), quality=100)


EXIF_SAID = (
    "{n} of {total} images carry an EXIF orientation tag (first: {first}, orientation 6: "
    "viewers turn it 90 degrees clockwise); they are read as stored, not turned, as COLMAP "
    "reads them (its cameras are for the stored pixels). If the cameras were computed on "
    "turned images, turn the files themselves (e.g. `exiftran -ai`)"
)


def test_exif_orientation_is_read_as_stored_and_said_once_in_colmap(tmp_path):
    """Issue 43: a phone photo's EXIF orientation was ignored without a word. COLMAP computes
    its cameras on the stored pixels (it ignores the tag), so they are read as stored; one
    warning gives the count and the first file."""
    colmap_scene(tmp_path)
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    _with_orientation(tmp_path / "images/a.png", a, 6, "PNG")
    _with_orientation(tmp_path / "images/sub dir/d.png", a[::-1].copy(), 3, "PNG")
    with pytest.warns(RuntimeWarning) as caught:
        ds = load_colmap(tmp_path)
    assert [str(w.message) for w in caught] == [
        f"{tmp_path / 'images'}: " + EXIF_SAID.format(n=2, total=4, first="a.png")
    ]
    views = {v.name: v for v in ds}
    np.testing.assert_array_equal(np.round(views["a.png"].image * 255), a)  # not turned
    np.testing.assert_array_equal(np.round(views["sub dir/d.png"].image * 255), a[::-1])


def test_exif_orientation_of_a_jpeg_in_a_blender_scene_is_said(tmp_path):
    meta = blender_scene(tmp_path, n=2)
    with Image.open(tmp_path / "train/r_0.png") as img:
        w, h = img.size  # (the images of a split share one size)
    ramp = np.linspace(0, 255, w * h).reshape(h, w).round().astype(np.uint8)
    pixels = np.repeat(ramp[..., None], 3, axis=2)
    _with_orientation(tmp_path / "train/r_1.jpg", pixels, 6, "JPEG")
    meta["frames"][1]["file_path"] = "./train/r_1.jpg"
    (tmp_path / "transforms_train.json").write_text(json.dumps(meta))
    with pytest.warns(RuntimeWarning) as caught:
        ds = load_blender(tmp_path)
    assert [str(w.message) for w in caught] == [
        f"{tmp_path / 'transforms_train.json'}: "
        + EXIF_SAID.format(n=1, total=2, first="train/r_1.jpg")
    ]
    stored = pixels / 255.0  # (JPEG: up to a few levels off)
    assert np.abs(ds[1].image - stored).max() < 0.05
    assert np.abs(ds[1].image - np.rot90(stored, -1)).max() > 0.3  # not turned


def test_the_tagged_image_is_named_with_its_folder(tmp_path):
    """Hostile pass: the warning named the first tagged file by its base name alone, which two
    cameras' folders share (cam0/0001.jpg, cam1/0001.jpg). It is named as the dataset names it,
    under the image folder."""
    colmap_scene(tmp_path)
    rng = np.random.default_rng(5)
    d = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    _with_orientation(tmp_path / "images/sub dir/d.png", d, 6, "PNG")
    with pytest.warns(RuntimeWarning) as caught:
        load_colmap(tmp_path)
    assert [str(w.message) for w in caught] == [
        f"{tmp_path / 'images'}: " + EXIF_SAID.format(n=1, total=4, first="sub dir/d.png")
    ]


def test_a_size_that_exif_turns_into_the_cameras_says_so(tmp_path):
    """Hostile pass: cameras computed on turned copies (COLMAP run after `exiftran`, or a tool
    that honours the tag), then trained on the phone's files: the size error did not say that
    the file's EXIF orientation turns it into the camera's size. It does now; a file of a wrong
    size without such a tag gets the plain error."""
    colmap_scene(tmp_path)
    portrait = np.zeros((16, 12, 3), np.uint8)  # the camera's 16x12, stored turned: 12x16
    _with_orientation(tmp_path / "images/b.png", portrait, 6, "PNG")
    with pytest.raises(DataError) as info:
        load_colmap(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'images/b.png'}: error: image is 12x16, but camera 3 expects 16x12; its "
        "EXIF orientation 6 (viewers turn it 90 degrees clockwise) gives 16x12: the cameras "
        "were computed on turned images, and images are read as stored, as COLMAP reads them; "
        "turn the files themselves (e.g. `exiftran -ai`)"
    )
    _with_orientation(tmp_path / "images/b.png", portrait, 3, "PNG")  # (a 180 degree turn)
    with pytest.raises(DataError) as info:
        load_colmap(tmp_path)
    assert str(info.value).endswith("error: image is 12x16, but camera 3 expects 16x12")


def test_exif_without_a_turn_is_quiet(tmp_path):
    colmap_scene(tmp_path)
    rng = np.random.default_rng(5)
    _with_orientation(tmp_path / "images/a.png", rng.integers(0, 256, (12, 16, 3), np.uint8), 1,
                      "PNG")  # fmt: skip
    load_colmap(tmp_path)  # (warnings are errors here)
