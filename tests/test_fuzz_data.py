"""Property: the PLY, checkpoint, Blender and COLMAP readers return a result or raise a
DataError for any damaged input (truncation, bit flips, random bytes, huge counts, odd JSON
values), never another exception, a warning or a huge allocation (issue 15). The spec fuzzer is
tests/test_fuzz.py.

Inputs start from small valid files written here and are damaged by hypothesis. The default
suite runs a few hundred examples in a few seconds; a longer run: `pytest -m slow
tests/test_fuzz_data.py`.
"""

from __future__ import annotations

import io
import json
import pathlib
import struct
import tempfile
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from xprc.data.blender import load_blender
from xprc.data.colmap import load_colmap, read_colmap_model
from xprc.data.npz import load_checkpoint, save_checkpoint
from xprc.data.ply import load_ply, load_points_ply, save_ply, save_points_ply
from xprc.errors import DataError

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- seeds


def _gaussians(n: int = 3) -> dict:
    rng = np.random.default_rng(0)
    return {
        "means": rng.normal(size=(n, 3)),
        "quats": rng.normal(size=(n, 4)),
        "scales": rng.normal(size=(n, 3)),
        "opacities": rng.normal(size=n),
        "sh": rng.normal(size=(n, 4, 3)),
    }


def _seed_files() -> dict[str, bytes]:
    """Valid files to damage: 3DGS and point PLYs (binary and ASCII), COLMAP .bin, a PNG."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        save_ply(tmp / "g.ply", _gaussians())
        save_points_ply(tmp / "p.ply", np.ones((4, 3)), np.full((4, 3), 0.5))
        import plyfile

        ascii_ply = plyfile.PlyData.read(str(tmp / "p.ply"))
        ascii_ply.text = True
        ascii_ply.write(str(tmp / "a.ply"))
        save_checkpoint(tmp / "c.npz", {"a": np.ones(5), "b": {"c": np.arange(3)}}, {"step": 7})
        names = ("g.ply", "p.ply", "a.ply", "c.npz")
        files = {name: (tmp / name).read_bytes() for name in names}
    files.update(_colmap_bin())
    png = io.BytesIO()
    Image.fromarray(np.full((6, 8, 4), 128, np.uint8), "RGBA").save(png, "PNG")
    files["r_0.png"] = png.getvalue()
    return files


def _colmap_bin() -> dict[str, bytes]:
    cams = struct.pack("<Q", 1) + struct.pack("<iiQQ", 1, 1, 8, 6) + struct.pack("<4d", 9, 9, 4, 3)
    imgs = struct.pack("<Q", 2)
    for k, name in enumerate((b"a.png", b"b.png")):
        imgs += struct.pack("<i4d3di", k + 1, 1, 0, 0, 0, 0, 0, 4, 1) + name + b"\0"
        imgs += struct.pack("<Q", k) + struct.pack("<ddq", 1.0, 2.0, -1) * k
    pts = struct.pack("<Q", 2)
    for k in range(2):
        pts += struct.pack("<Q3d3BdQ", k, 0.1, 0.2, 0.3, 10, 20, 30, 0.5, 1) + struct.pack(
            "<ii", 1, 0
        )
    return {"cameras.bin": cams, "images.bin": imgs, "points3D.bin": pts}


SEEDS = _seed_files()


@st.composite
def damaged(draw, name: str) -> bytes:
    """SEEDS[name] cut short, with flipped bits, overwritten or inserted bytes, or a header
    count replaced by a huge one."""
    data = bytearray(SEEDS[name])
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["truncate", "flip", "overwrite", "insert", "count"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if op == "truncate":
            del data[i:]
        elif op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=8))
            data[i : i + len(chunk)] = chunk
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif name.endswith(".bin"):  # the uint64 count at the start of every COLMAP .bin
            big = draw(st.sampled_from([2**40, 2**63, 2**64 - 1, 10**9, 7]))
            data[0:8] = struct.pack("<Q", big)
        else:  # a PLY's 'element vertex N'
            text = bytes(data)
            big = draw(st.sampled_from([b"4000000000", b"99999999999999999999", b"0", b"-1"]))
            data = bytearray(text.replace(b"element vertex ", b"element vertex " + big + b"0", 1))
    return bytes(data)


def _only_data_errors(fn, *args):
    """fn(*args), or None after a DataError: only DataErrors and RuntimeWarnings (an ignored
    PLY property, surely-wrong intrinsics), each naming the file or folder args[0]."""
    out = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn(*args)
        except DataError as e:
            assert str(e).startswith(str(args[0])), str(e)
    for w in caught:
        assert w.category is RuntimeWarning, w
        assert str(w.message).startswith(str(args[0])), str(w.message)
    return out


# --------------------------------------------------------------------------- PLY


def _ply_case(data: bytes, load) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "f.ply"
        path.write_bytes(data)
        _only_data_errors(load, path)


@FAST
@given(st.sampled_from(["g.ply", "p.ply", "a.ply"]).flatmap(damaged))
def test_fuzz_ply(data):
    _ply_case(data, load_ply)
    _ply_case(data, load_points_ply)


@FAST
@given(damaged("c.npz"))
def test_fuzz_checkpoint(data):
    _checkpoint_case(data)


def _checkpoint_case(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "c.npz"
        path.write_bytes(data)
        _only_data_errors(load_checkpoint, path)


# --------------------------------------------------------------------------- COLMAP


def _colmap_case(stem: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sparse = pathlib.Path(tmp)
        for name, seed in _colmap_bin().items():
            (sparse / name).write_bytes(data if name == stem else seed)
        try:
            read_colmap_model(sparse)
        except DataError as e:
            assert str(e).startswith(str(sparse)), str(e)


@FAST
@given(st.sampled_from(["cameras.bin", "images.bin", "points3D.bin"]).flatmap(
    lambda n: st.tuples(st.just(n), damaged(n))))  # fmt: skip
def test_fuzz_colmap(case):
    _colmap_case(*case)


TXT_JUNK = st.sampled_from([b"", b" ", b"\n", b"nan", b"inf", b"-1", b"0", b"9" * 23, b"1e400",
                            b"\xff", b"PINHOLE", b"#"])  # fmt: skip


@st.composite
def colmap_txt_cases(draw):
    """(file name, text): a COLMAP text file with a few tokens replaced by odd ones."""
    from test_datasets import write_colmap_txt

    with tempfile.TemporaryDirectory() as tmp:
        write_colmap_txt(pathlib.Path(tmp))
        name = draw(st.sampled_from(["cameras.txt", "images.txt", "points3D.txt"]))
        data = bytearray((pathlib.Path(tmp) / name).read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(data)))
        data[i : i + draw(st.integers(0, 3))] = draw(TXT_JUNK)
    return name, bytes(data)


def _colmap_txt_case(case) -> None:
    from test_datasets import colmap_scene

    name, data = case
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        colmap_scene(root, fmt="txt")
        (root / "sparse/0" / name).write_bytes(data)
        # a damaged value can also be a surely-wrong intrinsic (a principal point far outside
        # the image): a RuntimeWarning naming the file
        ds = _only_data_errors(load_colmap, root)
        if ds is not None:
            assert np.isfinite(ds.points).all() and all(np.isfinite(v.K).all() for v in ds)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(colmap_txt_cases())
def test_fuzz_colmap_txt(case):
    _colmap_txt_case(case)


# --------------------------------------------------------------------------- Blender

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=8,
)  # fmt: skip
FRAME_KEYS = ["file_path", "transform_matrix", "fl_x", "fl_y", "cx", "cy", "w", "h"]


def _blender_meta() -> dict:
    c2w = [[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 4.0], [0, 0, 0, 1.0]]
    return {"camera_angle_x": 0.8, "frames": [{"file_path": "./r_0", "transform_matrix": c2w}]}


@st.composite
def blender_cases(draw):
    """(transforms text, PNG bytes): JSON values replaced by odd ones, or either file damaged."""
    meta = _blender_meta()
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(["top", "frame", "matrix"]))
        value = draw(JSON_VALUES)
        if where == "top":
            meta[draw(st.sampled_from(["camera_angle_x", "fl_x", "frames", "w"]))] = value
        elif where == "frame" and isinstance(meta.get("frames"), list) and meta["frames"]:
            frame = meta["frames"][0]
            if isinstance(frame, dict):
                frame[draw(st.sampled_from(FRAME_KEYS))] = value
        elif isinstance(meta.get("frames"), list) and meta["frames"]:
            frame = meta["frames"][0]
            rows = frame.get("transform_matrix") if isinstance(frame, dict) else None
            if isinstance(rows, list) and rows:
                rows[draw(st.integers(0, len(rows) - 1))] = value
    text = json.dumps(meta).encode()
    if draw(st.booleans()):
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.binary(max_size=4)) + text[i + 1 :]
    png = draw(damaged("r_0.png")) if draw(st.booleans()) else SEEDS["r_0.png"]
    return text, png


@FAST
@given(blender_cases())
def test_fuzz_blender(case):
    text, png = case
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "transforms_train.json").write_bytes(text)
        (root / "r_0.png").write_bytes(png)
        ds = _only_data_errors(load_blender, root)  # (warns of a fl_x beside camera_angle_x)
        if ds is None:
            return
        view = ds[0]
        assert np.isfinite(view.image).all() and np.isfinite(view.K).all()
        assert np.isfinite(view.viewmat).all()


# --------------------------------------------------------------------------- long runs


@pytest.mark.slow
@LONG
@given(st.sampled_from(["g.ply", "p.ply", "a.ply"]).flatmap(damaged))
def test_fuzz_ply_long(data):
    _ply_case(data, load_ply)
    _ply_case(data, load_points_ply)


@pytest.mark.slow
@LONG
@given(st.sampled_from(["cameras.bin", "images.bin", "points3D.bin"]).flatmap(
    lambda n: st.tuples(st.just(n), damaged(n))))  # fmt: skip
def test_fuzz_colmap_long(case):
    _colmap_case(*case)


@pytest.mark.slow
@LONG
@given(damaged("c.npz"))
def test_fuzz_checkpoint_long(data):
    _checkpoint_case(data)


@pytest.mark.slow
@LONG
@given(colmap_txt_cases())
def test_fuzz_colmap_txt_long(case):
    _colmap_txt_case(case)


@pytest.mark.slow
@LONG
@given(blender_cases())
def test_fuzz_blender_long(case):
    test_fuzz_blender.hypothesis.inner_test(case)
