"""xprc.io: the standard 3DGS PLY layout, point-cloud PLYs and native checkpoints."""

from __future__ import annotations

import numpy as np
import plyfile
import pytest

from xprc.data.npz import load_checkpoint, save_checkpoint
from xprc.data.ply import load_ply, load_points_ply, save_ply, save_points_ply, sh_degree_from_rest
from xprc.errors import DataError


def gaussians(n: int = 7, degree: int = 3, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    f = np.float32
    return {
        "means": rng.normal(size=(n, 3)).astype(f),
        "quats": rng.normal(size=(n, 4)).astype(f),
        "scales": rng.normal(-3.0, 1.0, size=(n, 3)).astype(f),
        "opacities": rng.normal(size=n).astype(f),
        "sh": rng.normal(size=(n, (degree + 1) ** 2, 3)).astype(f),
    }


def write_vertex_ply(path, columns: dict, text: bool = False, types: dict | None = None) -> None:
    """A PLY with one 'vertex' element holding the given columns, in order: float32 unless
    `types` gives a column another numpy type."""
    n = len(next(iter(columns.values())))
    types = types or {}
    data = np.empty(n, dtype=[(k, types.get(k, "<f4")) for k in columns])
    for k, v in columns.items():
        data[k] = v
    plyfile.PlyData([plyfile.PlyElement.describe(data, "vertex")], text=text).write(str(path))


def standard_columns(p: dict) -> dict:
    n, n_coef = p["means"].shape[0], p["sh"].shape[1]
    rest = p["sh"][:, 1:, :].transpose(0, 2, 1).reshape(n, -1)
    cols = {c: p["means"][:, i] for i, c in enumerate("xyz")}
    cols |= {f"f_dc_{i}": p["sh"][:, 0, i] for i in range(3)}
    cols |= {f"f_rest_{i}": rest[:, i] for i in range(3 * (n_coef - 1))}
    cols["opacity"] = p["opacities"]
    cols |= {f"scale_{i}": p["scales"][:, i] for i in range(3)}
    cols |= {f"rot_{i}": p["quats"][:, i] for i in range(4)}
    return cols


# --------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_ply_round_trip_is_bit_exact(tmp_path, degree):
    p = gaussians(degree=degree)
    # Awkward float32 values must survive unchanged, bit for bit.
    p["means"][0] = [-0.0, np.float32(1e-45), np.finfo(np.float32).max]
    p["opacities"][1] = np.nextafter(np.float32(1), np.float32(2))
    save_ply(tmp_path / "a.ply", p)
    q = load_ply(tmp_path / "a.ply")
    assert set(q) == set(p)
    for k in p:
        assert q[k].dtype == np.float32
        assert q[k].shape == p[k].shape
        assert q[k].tobytes() == p[k].tobytes(), k
    # And a second write gives the identical file.
    save_ply(tmp_path / "b.ply", q)
    assert (tmp_path / "a.ply").read_bytes() == (tmp_path / "b.ply").read_bytes()


def test_ply_layout_is_the_standard_one(tmp_path):
    p = gaussians(n=3, degree=3)
    save_ply(tmp_path / "a.ply", p)
    head = (tmp_path / "a.ply").read_bytes().split(b"end_header\n")[0].decode()
    assert "format binary_little_endian 1.0" in head
    assert "element vertex 3" in head
    ply = plyfile.PlyData.read(str(tmp_path / "a.ply"))
    v = ply["vertex"].data
    expected = (
        ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
        + [f"f_rest_{i}" for i in range(45)]
        + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    )
    assert list(v.dtype.names) == expected
    assert all(v.dtype[name] == np.dtype("<f4") for name in expected)
    # f_rest is channel-major: the 15 coefficients of R, then of G, then of B.
    for c in range(3):
        for k in range(15):
            np.testing.assert_array_equal(v[f"f_rest_{15 * c + k}"], p["sh"][:, 1 + k, c])
    np.testing.assert_array_equal(v["rot_0"], p["quats"][:, 0])  # w first
    np.testing.assert_array_equal(v["nx"], 0.0)


def test_ply_accepts_jax_arrays_float64_and_column_opacities(tmp_path):
    import jax.numpy as jnp

    p = gaussians(degree=1)
    as_jax = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in p.items()}
    as_jax["opacities"] = as_jax["opacities"][:, None]
    save_ply(tmp_path / "a.ply", as_jax)
    q = load_ply(tmp_path / "a.ply")
    for k in p:
        np.testing.assert_array_equal(q[k], p[k])


def test_ply_reads_ascii_double_and_extra_properties(tmp_path):
    p = gaussians(n=4, degree=1)
    cols = standard_columns(p) | {"extra": np.ones(4, np.float32)}
    write_vertex_ply(tmp_path / "a.ply", cols, text=True)
    with pytest.warns(RuntimeWarning, match="ignored 1 vertex property outside the 3DGS layout"):
        q = load_ply(tmp_path / "a.ply")
    for k in p:
        np.testing.assert_array_equal(q[k], p[k])
    assert q["sh"].shape == (4, 4, 3)


def test_ascii_ply_value_with_an_underscore_is_refused(tmp_path):
    """Python's float() reads '1_0' as 10: an ASCII PLY with it loaded a wrong value."""
    p = gaussians(n=3, degree=0)
    write_vertex_ply(tmp_path / "a.ply", standard_columns(p), text=True)
    raw = (tmp_path / "a.ply").read_bytes()
    head, body = raw.split(b"end_header\n")
    lines = body.split(b"\n")
    lines[1] = b"1_0 " + lines[1].split(b" ", 1)[1]
    (tmp_path / "a.ply").write_bytes(head + b"end_header\n" + b"\n".join(lines))
    with pytest.raises(DataError, match=r"a.ply: error: PLY data line 2 .* holds '_'"):
        load_ply(tmp_path / "a.ply")


def test_sh_degree_from_rest():
    assert [sh_degree_from_rest(n) for n in (0, 9, 24, 45, 72)] == [0, 1, 2, 3, 4]
    assert sh_degree_from_rest(10) is None


# --------------------------------------------------------------------------- PLY errors


def test_ply_not_a_ply(tmp_path):
    path = tmp_path / "a.ply"
    path.write_bytes(b"\x89PNG\r\n")
    with pytest.raises(DataError) as e:
        load_ply(path)
    assert str(e.value) == f"{path}: error: not a PLY file (it does not start with 'ply')"


def test_ply_missing_file(tmp_path):
    with pytest.raises(DataError) as e:
        load_ply(tmp_path / "none.ply")
    assert str(e.value) == f"{tmp_path / 'none.ply'}: error: file not found"


def test_ply_bad_header(tmp_path):
    path = tmp_path / "a.ply"
    path.write_bytes(
        b"ply\nformat binary_little_endian 1.0\nelement vertex 1\nproperty\nend_header\n"
    )
    with pytest.raises(DataError) as e:
        load_ply(path)
    assert str(e.value).startswith(f"{path}: error: malformed PLY header: ")


def test_ply_missing_vertex_element(tmp_path):
    path = tmp_path / "a.ply"
    data = np.zeros(2, dtype=[("x", "<f4")])
    plyfile.PlyData([plyfile.PlyElement.describe(data, "face")]).write(str(path))
    with pytest.raises(DataError) as e:
        load_ply(path)
    assert str(e.value) == f"{path}: error: no 'vertex' element (elements: 'face')"


def test_ply_missing_properties_are_named(tmp_path):
    path = tmp_path / "a.ply"
    cols = standard_columns(gaussians(degree=0))
    del cols["opacity"], cols["rot_3"]
    write_vertex_ply(path, cols)
    with pytest.raises(DataError) as e:
        load_ply(path)
    assert str(e.value) == f"{path}: error: missing vertex properties: opacity, rot_3"


def test_ply_inconsistent_f_rest_count(tmp_path):
    path = tmp_path / "a.ply"
    cols = standard_columns(gaussians(degree=1))
    del cols["f_rest_8"]
    write_vertex_ply(path, cols)
    with pytest.raises(DataError) as e:
        load_ply(path)
    assert str(e.value) == (
        f"{path}: error: 8 f_rest properties: not 3*((d+1)^2-1) for any SH degree d "
        "(0, 9, 24, 45, ...)"
    )


def test_ply_f_rest_numbering_gap(tmp_path):
    path = tmp_path / "a.ply"
    cols = standard_columns(gaussians(degree=1))
    cols["f_rest_9"] = cols.pop("f_rest_4")
    write_vertex_ply(path, cols)
    with pytest.raises(DataError) as e:
        load_ply(path)
    assert str(e.value) == (
        f"{path}: error: f_rest properties are not numbered 0..8: missing f_rest_4"
    )


def test_ply_non_finite(tmp_path):
    path = tmp_path / "a.ply"
    p = gaussians(degree=0)
    p["scales"][5, 1] = np.nan
    save_ply(path, p)
    with pytest.raises(DataError) as e:
        load_ply(path)
    assert str(e.value) == f"{path}: error: non-finite value in property 'scale_1' (vertex 5)"


def test_ply_truncated(tmp_path):
    path = tmp_path / "a.ply"
    save_ply(path, gaussians(degree=2))
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(DataError) as e:
        load_ply(path)
    assert str(e.value) == (
        f"{path}: error: truncated or corrupt PLY element 'vertex': the header declares 7 rows "
        "of at least 164 bytes, but only 1141 bytes follow the header"
    )


def test_save_ply_bad_params(tmp_path):
    path = tmp_path / "a.ply"
    p = gaussians(degree=1)
    with pytest.raises(DataError) as e:
        save_ply(path, {k: v for k, v in p.items() if k != "quats"})
    assert str(e.value) == f"{path}: error: cannot save: missing parameters quats"
    with pytest.raises(DataError) as e:
        save_ply(path, p | {"scales": p["scales"][:, :2]})
    assert str(e.value) == f"{path}: error: cannot save: scales has shape [7, 2], want [N, 3]"
    with pytest.raises(DataError) as e:
        save_ply(path, p | {"sh": p["sh"][:, :3]})
    assert str(e.value) == (
        f"{path}: error: cannot save: sh has shape [7, 3, 3], want [N, (d+1)^2, 3] with N = 7"
    )
    with pytest.raises(DataError) as e:  # a Beta scene's kernel shapes (they were dropped)
        save_ply(path, p | {"betas": np.zeros(7)})
    assert str(e.value) == (
        f"{path}: error: cannot save: betas is not in the 3DGS PLY layout (means, quats, scales, "
        "opacities, sh), and a viewer would render without them; keep such a scene as a "
        "checkpoint (xprc train writes one)"
    )
    assert not path.exists()


# --------------------------------------------------------------------------- point clouds


def test_points_ply_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    pts = rng.normal(size=(50, 3)).astype(np.float32)
    cols = rng.integers(0, 256, size=(50, 3)) / 255.0
    save_points_ply(tmp_path / "p.ply", pts, cols)
    p2, c2 = load_points_ply(tmp_path / "p.ply")
    np.testing.assert_array_equal(p2, pts)
    np.testing.assert_allclose(c2, cols, atol=1e-7)
    assert p2.dtype == c2.dtype == np.float32


def test_points_ply_without_colours_is_grey(tmp_path):
    write_vertex_ply(tmp_path / "p.ply", {c: np.arange(3.0) for c in "xyz"})
    pts, cols = load_points_ply(tmp_path / "p.ply")
    assert pts.shape == cols.shape == (3, 3)
    np.testing.assert_array_equal(cols, 0.5)


def test_points_ply_properties_it_does_not_read_are_named(tmp_path):
    """Colours as r g b (not red green blue) read as grey, and an alpha is dropped: said."""
    path = tmp_path / "p.ply"
    cols = {c: np.arange(3.0) for c in "xyz"} | {c: np.full(3, 200, np.uint8) for c in "rgb"}
    write_vertex_ply(path, cols | {"alpha": np.ones(3), "nx": np.zeros(3)})
    with pytest.warns(RuntimeWarning) as record:
        _, grey = load_points_ply(path)
    np.testing.assert_array_equal(grey, 0.5)
    assert [str(w.message) for w in record] == [
        f"{path}: ignored 4 point properties: r, g, b, alpha (points are read from x y z, "
        "colours from red green blue)"
    ]


def test_ply_elements_beside_the_vertices_are_named(tmp_path):
    """A mesh PLY's faces are not read: said, with their count."""
    path = tmp_path / "mesh.ply"
    vertex = np.zeros(3, dtype=[(c, "<f4") for c in "xyz"])
    face = np.array([([0, 1, 2],)], dtype=[("vertex_indices", "O")])
    elements = [plyfile.PlyElement.describe(vertex, "vertex"),
                plyfile.PlyElement.describe(face, "face")]  # fmt: skip
    plyfile.PlyData(elements).write(str(path))
    with pytest.warns(RuntimeWarning) as record:
        pts, _ = load_points_ply(path)
    assert pts.shape == (3, 3)
    assert [str(w.message) for w in record] == [
        f"{path}: read only its 'vertex' element; ignored face (1)"
    ]


def test_points_ply_missing_coordinates(tmp_path):
    path = tmp_path / "p.ply"
    write_vertex_ply(path, {"x": np.zeros(2), "z": np.zeros(2)})
    with pytest.raises(DataError) as e:
        load_points_ply(path)
    assert str(e.value) == f"{path}: error: missing vertex properties: y"


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_round_trip_nested_and_dtypes(tmp_path):
    params = {
        "centre": np.arange(12, dtype=np.float32).reshape(4, 3),
        "count": np.array([1, 2, 3], dtype=np.int32),
        "mask": np.array([True, False]),
        "opt": {"mu": {"centre": np.ones((4, 3), np.float64)}, "step": np.int64(7)},
    }
    meta = {"spec": "linprim", "step": 1200, "lr": [1e-3, 2e-3]}
    save_checkpoint(tmp_path / "ckpt.npz", params, meta)
    got, got_meta = load_checkpoint(tmp_path / "ckpt.npz")
    assert got_meta == meta
    assert set(got) == {"centre", "count", "mask", "opt"}
    for a, b in [
        (got["centre"], params["centre"]),
        (got["count"], params["count"]),
        (got["mask"], params["mask"]),
        (got["opt"]["mu"]["centre"], params["opt"]["mu"]["centre"]),
        (got["opt"]["step"], np.asarray(7, np.int64)),
    ]:
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    assert not list(tmp_path.glob("*.tmp"))


def test_checkpoint_path_without_npz_suffix_is_kept(tmp_path):
    save_checkpoint(tmp_path / "last.ckpt", {"a": np.zeros(2)}, {})
    assert (tmp_path / "last.ckpt").is_file()
    assert load_checkpoint(tmp_path / "last.ckpt")[0]["a"].shape == (2,)


def test_checkpoint_errors(tmp_path):
    path = tmp_path / "c.npz"
    with pytest.raises(DataError) as e:
        load_checkpoint(path)
    assert str(e.value) == f"{path}: error: file not found"

    path.write_text("hello")
    with pytest.raises(DataError) as e:
        load_checkpoint(path)
    assert str(e.value) == f"{path}: error: not an xprc checkpoint (not an .npz archive)"

    np.savez(path, a=np.zeros(3))
    with pytest.raises(DataError) as e:
        load_checkpoint(path)
    assert str(e.value) == f"{path}: error: not an xprc checkpoint (no metadata entry)"

    save_checkpoint(path, {"a": np.zeros(1000)}, {"step": 1})
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(DataError) as e:
        load_checkpoint(path)
    assert str(e.value).startswith(f"{path}: error: truncated or corrupt checkpoint (")


def test_checkpoint_save_errors(tmp_path):
    path = tmp_path / "c.npz"
    with pytest.raises(DataError) as e:
        save_checkpoint(path, {"a/b": np.zeros(1)}, {})
    assert str(e.value) == f"{path}: error: cannot save: bad parameter name 'a/b'"
    with pytest.raises(DataError) as e:
        save_checkpoint(path, {"a": np.zeros(1)}, {"x": object()})
    assert str(e.value).startswith(f"{path}: error: cannot save: metadata is not JSON-serialis")
    assert not path.exists()


# --------------------------------------------------------------------------- untrusted files
# (issue 15: each of these was a MemoryError, a ValueError traceback or a hang)

XYZ_HEADER = "property float x\nproperty float y\nproperty float z\nend_header\n"


@pytest.mark.parametrize("fmt,count,row", [
    ("binary_little_endian", 4_000_000_000, 12),
    ("binary_big_endian", 2**63, 12),
    ("ascii", 4_000_000_000, 6),
])  # fmt: skip
def test_ply_declared_count_is_checked_against_the_file_size(tmp_path, fmt, count, row):
    path = tmp_path / "huge.ply"
    path.write_bytes(
        f"ply\nformat {fmt} 1.0\nelement vertex {count}\n{XYZ_HEADER}".encode() + bytes(120)
    )
    for load in (load_ply, load_points_ply):
        with pytest.raises(DataError) as e:
            load(path)
        assert str(e.value) == (
            f"{path}: error: truncated or corrupt PLY element 'vertex': the header declares "
            f"{count} rows of at least {row} bytes, but only 120 bytes follow the header"
        )


def test_ply_list_count_is_checked_too(tmp_path):
    path = tmp_path / "faces.ply"
    header = (
        "ply\nformat binary_little_endian 1.0\nelement vertex 1\n" + XYZ_HEADER[:-11]
        + "element face 1099511627776\nproperty list uchar int vertex_indices\nend_header\n"
    )  # fmt: skip
    path.write_bytes(header.encode() + bytes(12 + 64))
    with pytest.raises(DataError) as e:
        load_points_ply(path)
    assert str(e.value) == (
        f"{path}: error: truncated or corrupt PLY element 'face': the header declares "
        "1099511627776 rows of at least 1 bytes, but only 64 bytes follow the header"
    )


def test_points_ply_list_property(tmp_path):
    path = tmp_path / "list.ply"
    rows = np.array([([1.0, 2.0], 0.0, 0.0)] * 2, dtype=[("x", "O"), ("y", "<f4"), ("z", "<f4")])
    element = plyfile.PlyElement.describe(rows, "vertex", val_types={"x": "f4"})
    plyfile.PlyData([element]).write(str(path))
    with pytest.raises(DataError) as e:
        load_points_ply(path)
    assert str(e.value) == f"{path}: error: property 'x' is a list, not a number"


def test_ply_list_property_in_a_gaussian(tmp_path):
    cols = standard_columns(gaussians(n=2, degree=0))
    data = np.empty(2, dtype=[(k, "O" if k == "opacity" else "<f4") for k in cols])
    for k, v in cols.items():
        data[k] = [np.array([x, x], np.float32) for x in v] if k == "opacity" else v
    element = plyfile.PlyElement.describe(data, "vertex", val_types={"opacity": "f4"})
    plyfile.PlyData([element]).write(str(tmp_path / "g.ply"))
    with pytest.raises(DataError) as e:
        load_ply(tmp_path / "g.ply")
    assert (
        str(e.value) == f"{tmp_path / 'g.ply'}: error: property 'opacity' is a list, not a number"
    )


def test_ply_zero_vertices(tmp_path):
    path = tmp_path / "empty.ply"
    write_vertex_ply(path, {k: np.zeros(0) for k in standard_columns(gaussians(n=1, degree=0))})
    with pytest.raises(DataError) as e:
        load_ply(path)
    assert str(e.value) == f"{path}: error: no Gaussians: the 'vertex' element is empty"
    write_vertex_ply(path, {c: np.zeros(0) for c in "xyz"})
    with pytest.raises(DataError) as e:
        load_points_ply(path)
    assert str(e.value) == f"{path}: error: no points: the 'vertex' element is empty"


def test_points_ply_non_finite_colours(tmp_path):
    path = tmp_path / "nan.ply"
    cols = {c: np.zeros(2) for c in "xyz"} | {
        c: np.array([0.5, np.nan]) for c in ("red", "green", "blue")
    }
    write_vertex_ply(path, cols)
    with pytest.raises(DataError) as e:
        load_points_ply(path)
    assert str(e.value) == f"{path}: error: non-finite point colours"


@pytest.mark.parametrize(
    "dtype,values,shown",
    [("<f4", [0.5, 200.0], "[200.0, 200.0, 200.0]"), ("<i4", [7, 256], "[256, 256, 256]"),
     ("i1", [7, -5], "[-5, -5, -5]")],
)  # fmt: skip
def test_points_ply_colours_out_of_range(tmp_path, dtype, values, shown):
    """Float colours in 0..255, integers above 255 or negative colours used to load unchecked
    (colours of 200.0 or 257.0 where [0, 1] is promised)."""
    path = tmp_path / "colours.ply"
    cols = {**{c: np.zeros(2) for c in "xyz"}, **{c: values for c in ("red", "green", "blue")}}
    write_vertex_ply(path, cols, types=dict.fromkeys(("red", "green", "blue"), dtype))
    with pytest.raises(DataError) as e:
        load_points_ply(path)
    assert str(e.value) == (
        f"{path}: error: point colour out of range (vertex 1: {shown}): red green blue must be "
        "integers in 0..255 (0..65535 as ushort) or floats in [0, 1]"
    )


def test_points_ply_with_part_of_the_colours_is_an_error(tmp_path):
    """Only `red` (or red and green) used to load as grey 0.5 without a word."""
    path = tmp_path / "red.ply"
    write_vertex_ply(path, {**{c: np.zeros(2) for c in "xyz"}, "red": [0, 1]}, types={"red": "u1"})
    with pytest.raises(DataError) as e:
        load_points_ply(path)
    assert str(e.value) == f"{path}: error: point colours lack green, blue (has red)"


def test_points_ply_ushort_colours_span_0_to_65535(tmp_path):
    path = tmp_path / "colours16.ply"
    rgb = {"red": [0, 65535, 32768], "green": [1, 2, 3], "blue": [65535] * 3}
    cols = {**{c: np.zeros(3) for c in "xyz"}, **rgb}
    write_vertex_ply(path, cols, types=dict.fromkeys(rgb, "<u2"))
    _, colors = load_points_ply(path)
    want = np.array([[0, 1, 65535], [65535, 2, 65535], [32768, 3, 65535]]) / 65535.0
    np.testing.assert_allclose(colors, want, rtol=1e-6)


def test_directories_and_special_files_are_not_read(tmp_path):
    import os

    folder, fifo = tmp_path / "scene.ply", tmp_path / "pipe.ply"
    folder.mkdir()
    os.mkfifo(fifo)  # opening it for reading would block
    for load in (load_ply, load_points_ply, load_checkpoint):
        for path, problem in ((folder, "is a directory, not a file"), (fifo, "not a regular file")):
            with pytest.raises(DataError) as e:
                load(path)
            assert str(e.value) == f"{path}: error: {problem}"


def test_ascii_ply_value_out_of_range_for_its_type(tmp_path):
    """Found by tests/test_fuzz_data.py: plyfile raised OverflowError."""
    path = tmp_path / "u.ply"
    head = "ply\nformat ascii 1.0\nelement vertex 1\n" + XYZ_HEADER[:-11]
    colours = "property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n"
    path.write_text(head + colours + "1 1 1 328 128 128\n")
    with pytest.raises(DataError) as e:
        load_points_ply(path)
    assert (
        str(e.value) == f"{path}: error: unreadable PLY: Python integer 328 out of bounds for uint8"
    )


def test_double_beyond_float32_is_non_finite_not_a_warning(tmp_path):
    path = tmp_path / "d.ply"
    header = "ply\nformat ascii 1.0\nelement vertex 1\n" + XYZ_HEADER.replace("float", "double")
    path.write_text(header + "1e300 1 1\n")
    with pytest.raises(DataError) as e:
        load_points_ply(path)
    assert str(e.value) == f"{path}: error: non-finite point coordinates"


def _rewrite_npz(src, dst, edit) -> None:
    import zipfile

    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    with zipfile.ZipFile(dst, "w") as out:
        for name, data in members.items():
            out.writestr(name, edit(name, data))


def test_checkpoint_declared_shape_is_checked_before_allocating(tmp_path):
    """np.load would allocate the 80 TB the header declares (MemoryError)."""
    save_checkpoint(tmp_path / "c.npz", {"a": np.zeros(3)}, {"step": 1})
    bad = tmp_path / "bad.npz"

    def edit(name, data):  # same header length: the padding absorbs the longer shape
        longer = b"(10000000000000,), }"
        old = b"(3,), }" + b" " * (len(longer) - len(b"(3,), }"))
        return data.replace(old, longer) if name == "a.npy" else data

    _rewrite_npz(tmp_path / "c.npz", bad, edit)
    with pytest.raises(DataError) as e:
        load_checkpoint(bad)
    assert str(e.value) == (
        f"{bad}: error: truncated or corrupt checkpoint (entry 'a.npy' declares 80000000000000 "
        "bytes of data but holds 24)"
    )


def test_checkpoint_encrypted_flag(tmp_path):
    """Found by tests/test_fuzz_data.py: zipfile raised RuntimeError (password required)."""
    path = tmp_path / "c.npz"
    save_checkpoint(path, {"a": np.zeros(3)}, {"step": 1})
    raw = bytearray(path.read_bytes())
    central = raw.index(b"PK\x01\x02")
    raw[central + 8] |= 1  # the central directory's 'encrypted' flag of the first entry
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError) as e:
        load_checkpoint(path)
    assert str(e.value).startswith(f"{path}: error: truncated or corrupt checkpoint (File ")
    assert str(e.value).endswith("is encrypted, password required for extraction)")


# ------------------------------------------------------------ checkpoint headers (issue 43)


def _deflated_checkpoint(path, arrays: dict, meta: dict) -> None:
    """An .npz as np.savez_compressed writes it: each entry a deflated .npy."""
    import io
    import json
    import zipfile

    arrays = {**arrays, "__meta__": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, a in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, a)
            archive.writestr(name + ".npy", buf.getvalue())


@pytest.fixture
def no_data_read(monkeypatch):
    """np.load fails: a check that passes with it in place read only the headers."""

    def refuse(*args, **kwargs):
        raise AssertionError("np.load was called: the data was read")

    monkeypatch.setattr(np, "load", refuse)


def test_a_header_that_declares_other_rows_is_refused_before_the_data_is_read(
    tmp_path, no_data_read
):
    """Issue 43: a 4.7 MB checkpoint whose deflated header declared (2^28, 4) float32 made
    `xprc render` read 4 GB (peak 12.9 GB) before refusing it for its shape. Every parameter
    must declare one primitive count, checked from the headers before any data is read
    (here 2^22 rows of zeros: 64 MiB in a 65 KB file)."""
    from xprc.trained import load_trained

    path = tmp_path / "c.npz"
    params = {"params/means": np.zeros((1 << 22, 4), np.float32),
              "params/opacities": np.zeros((10, 1), np.float32)}  # fmt: skip
    _deflated_checkpoint(path, params, {"step": 1})
    assert path.stat().st_size < 200_000
    with pytest.raises(DataError) as e:
        load_trained(path)
    assert str(e.value) == (
        f"{path}: error: checkpoint entries disagree on the number of primitives: 'means' "
        "declares 4,194,304 rows, 'opacities' 10"
    )


def test_a_checkpoint_that_declares_more_than_the_memory_is_refused_unread(
    tmp_path, monkeypatch, no_data_read
):
    from xprc.data import npz

    path = tmp_path / "c.npz"
    _deflated_checkpoint(path, {"means": np.zeros((1 << 20, 8), np.float32)}, {})
    monkeypatch.setattr(npz, "physical_memory", lambda: 16 << 20)
    size = path.stat().st_size
    with pytest.raises(DataError) as e:
        load_checkpoint(path)
    shown = f"{size / 1024:,.1f} KiB"
    assert str(e.value) == (
        f"{path}: error: the checkpoint's entries declare 32.0 MiB of data (the file is "
        f"{shown}), more than the 16.0 MiB this machine has"
    )


@pytest.mark.parametrize(
    ("arrays", "said"),
    [
        ({"means": np.zeros((3, 3), "U1")},
         "parameter 'means' holds <U1, not real numbers"),
        ({"params/means": np.zeros((3, 3), np.complex64)},
         "parameter 'means' holds complex64, not real numbers"),
        ({"params/means": np.zeros((3, 3), np.float32), "opt/0": np.zeros(3, "S2")},
         "checkpoint entry 'opt/0' holds |S2, not real numbers"),
        ({"means": np.float32(1.0)},
         "checkpoint parameter 'means' is a single number; a parameter has one row per "
         "primitive"),
        ({"params/means": np.zeros((4, 3), np.float32), "state/used": np.zeros(5, bool)},
         "checkpoint entries disagree on the number of primitives: 'state/used' declares 5 "
         "rows, 'means' 4"),
    ],
)  # fmt: skip
def test_checkpoint_headers_are_checked_before_the_data(tmp_path, arrays, said, no_data_read):
    from xprc.trained import load_trained

    path = tmp_path / "c.npz"
    _deflated_checkpoint(path, arrays, {})
    with pytest.raises(DataError) as e:
        load_trained(path)
    assert str(e.value) == f"{path}: error: {said}"


def test_metadata_that_is_not_bytes_is_refused_unread(tmp_path, no_data_read):
    import io
    import zipfile

    path = tmp_path / "c.npz"
    with zipfile.ZipFile(path, "w") as archive:
        for name, a in (("__meta__", np.zeros((1 << 16, 4), np.float64)),
                        ("means", np.zeros((2, 3), np.float32))):  # fmt: skip
            buf = io.BytesIO()
            np.lib.format.write_array(buf, a)
            archive.writestr(name + ".npy", buf.getvalue())
    with pytest.raises(DataError) as e:
        load_checkpoint(path)
    assert str(e.value) == (
        f"{path}: error: corrupt checkpoint: its metadata entry is float64[65536, 4], not "
        "bytes of JSON"
    )


def test_a_version_3_header_gets_the_size_check_too(tmp_path, no_data_read):
    """Hostile pass (issue 43): the size check skipped .npy headers of version 3.0 (2.0 with a
    UTF-8 header), leaving their declared shape to np.load's allocation."""
    import io
    import zipfile

    buf = io.BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": (1 << 40,)}
    np.lib.format.write_array_header_2_0(buf, header)
    raw = buf.getvalue()
    assert raw[6:8] == b"\x02\x00"
    raw = raw[:6] + b"\x03\x00" + raw[8:] + bytes(24)  # version 3.0, three numbers of data
    path = tmp_path / "c.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.npy", raw)
    with pytest.raises(DataError) as e:
        load_checkpoint(path)
    assert str(e.value) == (
        f"{path}: error: truncated or corrupt checkpoint (entry 'a.npy' declares 8796093022208 "
        "bytes of data but holds 24)"
    )
