"""Export (issue 41, item 7): every PLY a run writes names its spec, and `xprc render` of it
uses that spec; a spec outside the 3DGS layout gets a self-describing PLY that render reads
back; a spec that only fits the layout is said; 3DGS-layout scenes also get a .splat, checked
here against an independent decoding of antimatter15's 32-byte layout. PLY header comments
are untrusted: hostile ones are refused with a message naming the file."""

from __future__ import annotations

import types

import numpy as np
import plyfile
import pytest

import xprc
from xprc import train as tr
from xprc.data.ply import load_ply, save_ply
from xprc.data.spec_ply import load_scene_ply, save_params_ply, spec_comments
from xprc.data.splat import save_splat
from xprc.errors import DataError
from xprc.method_info import MethodInfo
from xprc.train.outputs import _write_ply
from xprc.trained import load_trained, scene_method, scene_params

SHA = "ab" * 32


def _gaussians(n=40, degree=1, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "means": rng.normal(0, 1, (n, 3)).astype(np.float32),
        "quats": rng.normal(0, 1, (n, 4)).astype(np.float32),
        "scales": rng.normal(-3, 0.5, (n, 3)).astype(np.float32),
        "opacities": rng.normal(0, 2, n).astype(np.float32),
        "sh": rng.normal(0, 0.5, (n, (degree + 1) ** 2, 3)).astype(np.float32),
    }


# ------------------------------------------------------------------------------ .splat


def test_splat_against_an_independent_decoding(tmp_path):
    g = _gaussians()
    g["sh"][0, 0] = [5.0, -5.0, 0.0]  # colours beyond [0, 1] clip
    g["quats"][1] = [0.0, 0.0, 0.0, 0.0]  # no rotation: stored as the identity
    path = tmp_path / "scene.splat"
    c0 = 0.28209479177387814  # 1 / (2 sqrt(pi))
    outside = np.abs(c0 * g["sh"][:, 0, :].astype(np.float64)) > 0.5  # 0.5 + c0 dc off [0, 1]
    assert save_splat(path, g) == int(outside.sum()) >= 2  # the count of clipped colours
    raw = path.read_bytes()
    assert len(raw) == 32 * 40
    # decoded by hand from the format's description: 12 + 12 + 4 + 4 bytes a splat
    rec = np.frombuffer(raw, np.uint8).reshape(40, 32)
    pos = rec[:, 0:12].copy().view("<f4").reshape(40, 3)
    scale = rec[:, 12:24].copy().view("<f4").reshape(40, 3)
    rgba = rec[:, 24:28].astype(np.float64) / 255.0
    rot = (rec[:, 28:32].astype(np.float64) - 128.0) / 128.0
    # each record is one Gaussian: find it by its position (exact float32)
    index = [int(np.flatnonzero((g["means"] == p).all(axis=1))[0]) for p in pos]
    assert sorted(index) == list(range(40))
    m = {k: v[index].astype(np.float64) for k, v in g.items()}
    np.testing.assert_allclose(scale, np.exp(m["scales"]), rtol=1e-6)
    rgb = np.clip(0.5 + c0 * m["sh"][:, 0, :], 0.0, 1.0)
    np.testing.assert_allclose(rgba[:, :3], rgb, atol=0.5 / 255 + 1e-9)
    alpha = 1.0 / (1.0 + np.exp(-m["opacities"]))
    np.testing.assert_allclose(rgba[:, 3], alpha, atol=0.5 / 255 + 1e-9)
    norm = np.linalg.norm(m["quats"], axis=1, keepdims=True)
    unit = np.where(norm > 0, m["quats"] / np.where(norm > 0, norm, 1), [1, 0, 0, 0])
    np.testing.assert_allclose(rot, np.minimum(unit, 127 / 128), atol=0.5 / 128 + 1e-9)
    # largest size x opacity first, as the viewer expects
    key = np.prod(np.exp(m["scales"]), axis=1) * alpha
    assert np.all(np.diff(key) <= 0)


def test_splat_of_a_scale_beyond_float32_is_an_error(tmp_path):
    g = _gaussians(n=3)
    g["scales"][2] = [100.0, 0.0, 0.0]
    with pytest.raises(DataError, match="1 Gaussian\\(s\\) have a scale beyond float32's range"):
        save_splat(tmp_path / "x.splat", g)
    assert not (tmp_path / "x.splat").exists()


# ------------------------------------------------------------------------- spec comments


def test_a_ply_names_its_spec_and_render_uses_it(tmp_path):
    gs = xprc.load("3dgs")
    info = MethodInfo.of(gs)
    path = tmp_path / "scene.ply"
    save_ply(path, _gaussians(), spec_comments(info.name, info.spec_sha256))
    head = path.read_bytes()[:400]
    assert f"comment xprc spec Gaussian3D sha256 {info.spec_sha256}\n".encode() in head
    trained = load_trained(path)
    assert (trained.spec.name, trained.spec.sha256) == ("Gaussian3D", info.spec_sha256)
    assert trained.layout == "3dgs"
    assert MethodInfo.of(scene_method(trained, None)).spec_sha256 == info.spec_sha256
    # another spec's PLY is refused with --spec 3dgs, naming both (no silent wrong render)
    save_ply(path, _gaussians(), spec_comments("Box", SHA))
    with pytest.raises(DataError) as e:
        scene_method(load_trained(path), "3dgs")
    assert "the scene was trained with spec 'Box' (sha256 abababababab...)" in str(e.value)
    with pytest.raises(DataError, match="which no shipped spec matches; give its .xpr file"):
        scene_method(load_trained(path), None)
    np.testing.assert_array_equal(load_ply(path)["means"], _gaussians()["means"])


def _ply_with(tmp_path, comments, data=None):
    data = data if data is not None else np.zeros(2, dtype=[("x", "<f4")])
    path = tmp_path / "h.ply"
    el = plyfile.PlyElement.describe(data, "vertex")
    plyfile.PlyData([el], comments=comments).write(str(path))
    return path


@pytest.mark.parametrize(
    "comments,problem",
    [
        (
            ["xprc spec ../../etc/passwd sha256 -"],
            "unrecognised PLY header comment 'xprc spec ../../etc/passwd sha256 -'",
        ),
        (["xprc spec A sha256 ABAB"], "unrecognised PLY header comment 'xprc spec A sha256 ABAB'"),
        ([f"xprc spec A sha256 {SHA} extra"], "unrecognised PLY header comment"),
        (
            ["xprc spec " + "a" * 200 + " sha256 -"],
            "unrecognised PLY header comment 'xprc spec aaaa",
        ),
        (["xprc spec A sha256 -", "xprc spec B sha256 -"], "two 'xprc spec' comments"),
        (["xprc layout params"], "'xprc layout params' without any 'xprc param' comment"),
        (["xprc param x scalar"], "'xprc param' comments without 'xprc layout params'"),
        (["xprc layout params", "xprc param x 99999"], "unrecognised PLY header comment"),
        (["xprc layout params", "xprc param x 4096x4096"], "more than 4096 components"),
        (["xprc layout params", "xprc param x scalar", "xprc param x 3"], "'x' is described twice"),
        (
            ["xprc layout params", "xprc param y 2"],
            "parameter 'y' (2) lacks the vertex property y_0 (and 1 more)",
        ),
        (["xprc\x1b[31m"], "unrecognised PLY header comment"),
    ],
)
def test_hostile_comments_are_refused(tmp_path, comments, problem):
    try:
        path = _ply_with(tmp_path, comments)
    except UnicodeEncodeError:  # (plyfile writes ASCII headers)
        pytest.skip("plyfile cannot write it")
    with pytest.raises(DataError) as e:
        load_scene_ply(path)
    assert problem in str(e.value) and str(path) in str(e.value)
    assert "\x1b" not in str(e.value)


def test_other_tools_comments_are_left_alone(tmp_path):
    path = _ply_with(tmp_path, ["Generated by SuperSplat", "xprcfoo bar"])
    with pytest.raises(DataError, match="missing vertex properties: y, z"):
        load_scene_ply(path)  # (the 3DGS reader's error: no comment is refused)


# -------------------------------------------------------------- the self-describing PLY


@pytest.fixture(scope="module")
def surfels():
    return xprc.load("2dgs")


def _dataset(n=60, seed=3):
    rng = np.random.default_rng(seed)
    return types.SimpleNamespace(
        points=rng.uniform(-1, 1, (n, 3)), colors=rng.uniform(0, 1, (n, 3)), views=[]
    )


def test_params_ply_round_trip(surfels, tmp_path):
    info = MethodInfo.of(surfels)
    params, _ = tr.init_params(surfels, _dataset(), tr.TrainConfig(), log=lambda _: None)
    path = tmp_path / "params.ply"
    save_params_ply(path, params, info.params, spec_comments(info.name, info.spec_sha256))
    header = path.read_bytes()[:2000].decode("ascii", "replace")
    for p in info.params:  # property names from the spec, shapes in the comments
        assert f"property float {p.name}_0\n" in header or f"property float {p.name}\n" in header
    back, spec, layout = load_scene_ply(path)
    assert layout == "params" and (spec.name, spec.sha256) == (info.name, info.spec_sha256)
    assert list(back) == [p.name for p in info.params]
    for name, value in params.items():
        assert back[name].dtype == np.float32
        np.testing.assert_array_equal(back[name], value)
    trained = load_trained(path)
    method = scene_method(trained, None)  # the shipped 2dgs, found by its sha256
    assert MethodInfo.of(method).spec_sha256 == info.spec_sha256
    xprc.pipeline.params.prepare_params(method, scene_params(trained, method))


def test_params_ply_refuses_non_finite_values_and_warns_extra_properties(surfels, tmp_path):
    info = MethodInfo.of(surfels)
    params, _ = tr.init_params(surfels, _dataset(5), tr.TrainConfig(), log=lambda _: None)
    name = info.params[0].name
    params[name][2] = np.nan
    path = tmp_path / "p.ply"
    save_params_ply(path, params, info.params)
    with pytest.raises(DataError, match=rf"non-finite value in property '{name}_0' \(vertex 2\)"):
        load_scene_ply(path)
    ply = plyfile.PlyData.read(str(path))
    v = ply["vertex"].data
    extra = np.empty(len(v), v.dtype.descr + [("junk", "<f4")])
    for f in v.dtype.names:
        extra[f] = np.nan_to_num(v[f])
    extra["junk"] = 1
    path2 = _ply_with(tmp_path, ply.comments, extra)
    with pytest.warns(RuntimeWarning, match="ignored 1 vertex properties its 'xprc param' "
                      "comments do not describe: junk"):  # fmt: skip
        load_scene_ply(path2)


def test_params_ply_name_clash_is_an_error(tmp_path):
    specs = [
        types.SimpleNamespace(name="a", shape=(2,)),
        types.SimpleNamespace(name="a_0", shape=()),
    ]
    params = {"a": np.zeros((3, 2)), "a_0": np.zeros(3)}
    with pytest.raises(DataError, match="the property name a_0 twice"):
        save_params_ply(tmp_path / "c.ply", params, specs)


# --------------------------------------------------------------------- what a run writes


def _record(method, n=30):
    params, used = tr.init_params(method, _dataset(n), tr.TrainConfig(capacity=n + 5),
                                  log=lambda _: None)  # fmt: skip
    return types.SimpleNamespace(method=method, params=params, used=used)


def _splat_note(rec, degree):
    dc = np.asarray(rec.params["sh"])[rec.used][:, 0, :].astype(np.float64)
    clipped = int((np.abs(0.28209479177387814 * dc) > 0.5).sum())
    dropped = f" (SH degree {degree} dropped)" if degree else ""
    return (
        f"scene.splat: the DC colour only{dropped}; colour, opacity and rotation in 8 "
        f"bits; {clipped:,} colour value(s) outside [0, 1] clipped (scene.ply keeps them all)"
    )


def test_a_3dgs_run_writes_ply_and_splat_with_the_splats_losses_said(tmp_path):
    rec = _record(xprc.load("3dgs"))
    degree = 3  # the 3dgs spec's sh: (16, 3)
    rec.params["sh"] = np.asarray(rec.params["sh"]).copy()
    rec.params["sh"][np.flatnonzero(rec.used)[0], 0] = [4.0, -4.0, 0.0]  # two clipped colours
    assert _write_ply(tmp_path / "scene.ply", rec) == [_splat_note(rec, degree)]
    assert "; 2 colour value(s) outside [0, 1] clipped" in _splat_note(rec, degree)
    assert (tmp_path / "scene.splat").stat().st_size == 32 * 30
    trained = load_trained(tmp_path / "scene.ply")
    assert trained.spec.name == "Gaussian3D" and trained.layout == "3dgs"
    assert not (tmp_path / "params.ply").exists()


def test_a_spec_that_only_fits_the_layout_is_said(tmp_path):
    spec = tmp_path / "box.xpr"
    spec.write_text('primitive Box extends "3dgs"\ndensity(g) = exp(-0.055556 * g * g)\n')
    box = xprc.load(spec)
    out = tmp_path / "run"
    out.mkdir()
    rec = _record(box)
    notes = _write_ply(out / "scene.ply", rec)
    assert notes == [
        _splat_note(rec, 3),
        "scene.ply: Box's parameters fit the 3DGS layout, but it is not a Gaussian spec (3dgs, "
        "3dgut, 3dgrt_k2): 3DGS viewers, and web viewers of scene.splat, will draw its "
        "primitives as Gaussians; xprc render and xprc view render them with its spec",
    ]
    trained = load_trained(out / "scene.ply")
    assert trained.spec.sha256 == MethodInfo.of(box).spec_sha256
    assert MethodInfo.of(scene_method(trained, str(spec))).name == "Box"


def test_a_gaussian_spec_is_known_by_its_text_not_its_file_name(tmp_path):
    """A copy of a shipped Gaussian spec under another file name is the same spec (its
    SPEC_SHA256 is of the text); 3dgrt_k2 is 3DGUT's Gaussian kernel (it said it was not a
    Gaussian spec). The kernel of another spec is not recorded: Box above is said."""
    from xprc.compiler.driver import read_spec, spec_digest
    from xprc.resources import shipped_specs
    from xprc.trained import gaussian_spec

    def known(path):
        info = MethodInfo(name="G", spec_sha256=spec_digest(read_spec(path), path))
        return gaussian_spec(info)

    shipped = shipped_specs()
    copy = tmp_path / "my_splats.xpr"
    copy.write_text(read_spec(shipped["3dgs"]))
    assert known(copy) and known(shipped["3dgrt_k2"]) and known(shipped["3dgut"])
    assert not known(shipped["3dgrt_k4"]) and not known(shipped["ever_ellipsoid"])


def test_a_spec_outside_the_layout_writes_params_ply(surfels, tmp_path):
    notes = _write_ply(tmp_path / "scene.ply", _record(surfels))
    assert notes == [
        "no scene.ply: Surfel2D's parameters are not the 3DGS PLY layout, which 3DGS viewers "
        "read; they are in params.ply, a PLY that names them, and checkpoint.npz (xprc render "
        "and xprc view read both)"
    ]
    assert not (tmp_path / "scene.ply").exists() and not (tmp_path / "scene.splat").exists()
    back, spec, _ = load_scene_ply(tmp_path / "params.ply")
    assert len(back[MethodInfo.of(surfels).params[0].name]) == 30  # the used slots only


def test_a_module_whose_name_cannot_be_recorded_writes_a_ply_without_it(tmp_path):
    """A hand-written module may call itself anything: its PLY names no spec (render then
    says it renders as 3dgs), and the run does not fail at its end."""
    gs = xprc.load("3dgs")
    odd = types.SimpleNamespace(**{k: getattr(gs, k) for k in dir(gs) if k.isupper()})
    odd.NAME, odd.SPEC_SHA256 = "my gauss\nsha256", ""
    rec = _record(gs)
    rec.method = odd
    assert _write_ply(tmp_path / "scene.ply", rec) == [
        "scene.ply has no spec record in its header (the method's NAME 'my gauss\\nsha256' is "
        "not an identifier): taken out of its run folder (whose checkpoint.npz and metrics.json "
        "record the spec), xprc render and xprc view of it need --spec",
        _splat_note(rec, 3),
    ]
    assert b"comment" not in (tmp_path / "scene.ply").read_bytes()[:300]
    assert load_trained(tmp_path / "scene.ply").spec is None
    odd.NAME, odd.SPEC_SHA256 = "Mine", "not hex"
    notes = _write_ply(tmp_path / "scene.ply", rec)
    assert len(notes) == 3  # (not a Gaussian spec: said)
    assert "SPEC_SHA256 'not hex' is not a sha256" in notes[0]
    assert b"comment" not in (tmp_path / "scene.ply").read_bytes()[:300]
