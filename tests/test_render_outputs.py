"""`xprc render --kind` covers the per-pixel outputs a spec declares (issue 41, item 8): 2DGS's
normals and depth_sq, as PNGs a person can look at and as .npy, from a params.ply that names
its spec (item 7: render finds the shipped 2dgs by the sha256 in its header)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

import xprc
from xprc import train as tr
from xprc.cli import main
from xprc.data.demo_scene import generate_demo_scene
from xprc.data.scene_folder import load_scene
from xprc.data.spec_ply import save_params_ply, spec_comments
from xprc.method_info import MethodInfo
from xprc.plots import needs_outputs, output_kinds


@pytest.fixture(scope="module")
def surfel_scene(tmp_path_factory):
    """The tiny demo scene and a 2DGS scene started on its points, saved as params.ply."""
    root = tmp_path_factory.mktemp("scene")
    generate_demo_scene(root, n_train=2, n_test=1, size=(40, 32), seed=1, n_points=300)
    method = xprc.load("2dgs")
    info = MethodInfo.of(method)
    train_set, _ = load_scene(root)
    params, _ = tr.init_params(method, train_set, tr.TrainConfig(), log=lambda _: None)
    opacity = next(p.name for p in info.params if p.role == "opacity")
    params[opacity][:] = 2.0  # opaque enough to cover pixels
    ply = tmp_path_factory.mktemp("run") / "params.ply"
    save_params_ply(ply, params, info.params, spec_comments(info.name, info.spec_sha256))
    return root, ply, method, params


def test_output_kinds_group_components():
    assert output_kinds(("depth", "depth_sq", "normal.x", "normal.y", "normal.z")) == {
        "depth_sq": [1],
        "normal": [2, 3, 4],
    }


def test_which_kinds_need_the_outputs():
    surfel = ("depth", "depth_sq", "normal.x", "normal.y", "normal.z")
    assert [needs_outputs(surfel, k) for k in ("rgb", "alpha", "depth", "normal", "depth_sq")] == [
        False, False, True, True, True]  # fmt: skip
    assert not needs_outputs((), "depth") and not needs_outputs(("sdf",), "depth")
    assert needs_outputs(("sdf",), "sdf")


def test_rgb_and_depth_of_a_2dgs_scene_equal_the_full_render(surfel_scene, tmp_path):
    """`xprc render --kind rgb` leaves the per-pixel outputs out, `--kind depth` keeps them (the
    emitted ray distance is the depth): each equals a render with all of them."""
    scene, ply, method, params = surfel_scene
    for kind in ("rgb", "depth"):
        assert _render(scene, ply, tmp_path / f"{kind}.npy", "--kind", kind,
                       "--background", "1,1,1") == 0  # fmt: skip
    cam = load_scene(scene)[1].views[0].camera()
    ref = xprc.render(method, params, cam, background=np.ones(3, np.float32), mode="RGB+ED")
    np.testing.assert_allclose(np.load(tmp_path / "rgb.npy"), np.asarray(ref.image), atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "depth.npy"), np.asarray(ref.depth), atol=1e-6)
    assert float(np.asarray(ref.alpha).max()) > 0.5


def _render(scene, ply, out, *extra):
    return main(["render", str(ply), "--data", str(scene), "-o", str(out), *extra])


def test_normals_as_npy_and_png(surfel_scene, tmp_path, capsys):
    scene, ply, method, params = surfel_scene
    assert _render(scene, ply, tmp_path / "n.npy", "--kind", "normal") == 0
    assert _render(scene, ply, tmp_path / "n.png", "--kind", "normal") == 0
    assert _render(scene, ply, tmp_path / "a.npy", "--kind", "alpha") == 0
    out = capsys.readouterr().out
    normal = np.load(tmp_path / "n.npy")
    alpha = np.load(tmp_path / "a.npy")[..., 0]
    assert normal.shape == (32, 40, 3) and normal.dtype == np.float32
    # the .npy is the renderer's own output (the channels PIXEL_OUTPUTS names normal.*)
    cam = load_scene(scene)[1].views[0].camera()
    ref = xprc.render(method, params, cam, background=np.ones(3, np.float32))
    names = list(MethodInfo.of(method).pixel_outputs)
    idx = [names.index(f"normal.{c}") for c in "xyz"]
    np.testing.assert_allclose(normal, np.asarray(ref.extra)[..., idx], atol=1e-6)
    # composited unit normals: |sum w n| <= sum w = alpha, and close to it where one surfel
    # dominates; most covered pixels have a normal
    length = np.linalg.norm(normal, axis=-1)
    assert np.all(length <= alpha + 1e-4)
    covered = alpha > 0.5
    assert covered.sum() > 50 and np.median(length[covered] / alpha[covered]) > 0.5
    # the PNG is (n + 1) / 2, as 8-bit colours
    png = np.asarray(Image.open(tmp_path / "n.png"), np.float64) / 255.0
    np.testing.assert_allclose(png, np.clip((normal + 1) / 2, 0, 1), atol=0.5 / 255 + 1e-6)
    assert re.search(r"  normal: \(x, y, z\) as RGB \(v \+ 1\) / 2: -1 black, 0 mid grey, \+1 "
                     r"full; 0 value\(s\) beyond \[-1, 1\] clipped", out)  # fmt: skip


def test_a_scalar_output_as_grey(surfel_scene, tmp_path, capsys):
    scene, ply, _, _ = surfel_scene
    assert _render(scene, ply, tmp_path / "d.npy", "--kind", "depth_sq") == 0
    assert _render(scene, ply, tmp_path / "a.npy", "--kind", "alpha") == 0
    capsys.readouterr()
    assert _render(scene, ply, tmp_path / "d.png", "--kind", "depth_sq") == 0
    value = np.load(tmp_path / "d.npy")[..., 0]
    covered = np.load(tmp_path / "a.npy")[..., 0] > 0.5
    grey = np.asarray(Image.open(tmp_path / "d.png"), np.float64)[..., 0] / 255.0
    lo, hi = np.percentile(value[covered], (1, 99))
    want = np.where(covered, np.clip((value - lo) / (hi - lo), 0, 1), 0)
    np.testing.assert_allclose(grey, want, atol=0.5 / 255 + 1e-5)
    note = capsys.readouterr().out.splitlines()[-1]
    assert note == (
        f"  depth_sq: {lo:.4g} (black) to {hi:.4g} (white), this view's 1st to 99th percentile "
        "over the pixels with alpha > 0.5 (the others black); alpha-weighted sums, as "
        "composited; -o NAME.npy keeps the values"
    )


def test_an_unknown_kind_lists_the_spec_outputs(surfel_scene, tmp_path, capsys):
    scene, ply, _, _ = surfel_scene
    assert _render(scene, ply, tmp_path / "x.png", "--kind", "normals") == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == (
        "error: --kind normals: Surfel2D declares its per-pixel outputs: depth_sq, normal (did "
        "you mean 'normal'?); the kinds are rgb, depth, alpha, depth_sq, normal"
    )
    assert not (tmp_path / "x.png").exists()


def test_a_spec_without_outputs_says_so():
    from xprc.cli.render import _kinds
    from xprc.errors import XprError

    with pytest.raises(XprError) as e:
        _kinds(MethodInfo.of(xprc.load("3dgs")), "normal", "Gaussian3D")
    assert e.value.message == (
        "--kind normal: Gaussian3D declares no per-pixel outputs; the kinds are rgb, depth, alpha"
    )


def test_the_viewer_offers_the_outputs(surfel_scene):
    """`xprc view` shows the same pictures: its menu lists the spec's outputs, and a frame of
    one is what `render --kind` writes (its FrameRenderer, without a server)."""
    from xprc.plots import kind_image, output_image
    from xprc.viewer import FrameRenderer, viewer_camera, viewer_kinds

    _, _, method, params = surfel_scene
    kinds = viewer_kinds(method)
    assert kinds == {"RGB": "rgb", "Depth": "depth", "Alpha": "alpha", "depth_sq": "depth_sq",
                     "normal": "normal"}  # fmt: skip
    assert viewer_kinds(xprc.load("3dgs")) == {"RGB": "rgb", "Depth": "depth", "Alpha": "alpha"}
    bg = np.ones(3, np.float32)
    frames = FrameRenderer(method)
    frames.set_scene(params, bg)
    wxyz, position, fov = np.array([1.0, 0, 0, 0]), np.array([0.0, 0.0, -4.0]), 0.8
    frame = frames.render(wxyz, position, fov, 40, 32, "normal")
    out = xprc.render(method, params, viewer_camera(wxyz, position, fov, 40, 32), background=bg)
    names = list(MethodInfo.of(method).pixel_outputs)
    want, _ = output_image(out, [names.index(f"normal.{c}") for c in "xyz"])
    np.testing.assert_allclose(frame, want, atol=1e-6)
    assert np.abs(frame - 0.5).max() > 0.1  # surfels in view, not the empty mid grey
    # RGB and depth frames: the RGB without the outputs (nothing reads them), the depth with
    # them (2DGS's depth is its emitted ray distance); each equal to a direct render
    rgb = frames.render(wxyz, position, fov, 40, 32, "rgb")
    np.testing.assert_allclose(rgb, kind_image(out, "rgb"), atol=1e-6)
    depth = frames.render(wxyz, position, fov, 40, 32, "depth")
    cam = viewer_camera(wxyz, position, fov, 40, 32)
    full = xprc.render(method, params, cam, background=bg, mode="RGB+ED")
    np.testing.assert_allclose(depth, kind_image(full, "depth"), atol=1e-6)
    assert sorted(frames.capacity) == [(40, 32, "RGB", False), (40, 32, "RGB", True),
                                       (40, 32, "RGB+ED", True)]  # fmt: skip
