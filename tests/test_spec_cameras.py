"""`cameras pinhole, fisheye`: the camera models a spec accepts (issue 13). Checked at compile
time (located errors), the default when a spec declares none, inherited through `extends`,
exposed as CAMERA_MODELS in the generated module, enforced by `xprc.render` and iterated by
`xprc verify`. And the pixels of a lens camera's image outside its model's valid domain: counted
by every render (`stats['lens_outside']`) and warned about."""

import re

import pytest
from conftest import ROOT

from xprc import cli, runtime, verify
from xprc.camera import MODELS, look_at
from xprc.compiler import check, driver, parse
from xprc.errors import CameraModelError, XprError

BLOB = """primitive Blob
{cameras}
param means : vec3
param opacities : scalar = sigmoid(raw)
projection {{
  p = camera.world_to_camera(means)
  {extra}
  emit centre = camera.project(p), depth = p.z, valid = p.z > camera.near, radius = 3
}}
response {{ alpha = min(0.99, opacities) }}
color = [1, 1, 1]
"""


def _checked(cameras: str = "", extra: str = "x = 1"):
    text = BLOB.format(cameras=cameras, extra=extra)
    return check.check(parse.parse(text, "blob.xpr"))


def _error(text: str, tmp_path=None) -> XprError:
    with pytest.raises(XprError) as info:
        driver.compile_source(text, "blob.xpr", spec_dir=tmp_path)
    return info.value


def test_declared_models_in_canonical_order():
    c = _checked("cameras fisheye, pinhole")
    assert c.cameras == ("pinhole", "fisheye")
    assert c.cameras_why == "declared on line 2"


@pytest.mark.parametrize(
    "extra,models,why",
    [
        ("x = 1", MODELS, "the default, without a cameras declaration"),
        (
            "f = camera.fx",
            ("pinhole",),
            "the default for a spec that reads camera.fx (line 7), without a cameras declaration",
        ),
        (
            "J = camera.jacobian(p)",
            ("pinhole",),
            "the default for a spec that reads camera.jacobian (line 7), without a cameras "
            "declaration",
        ),
        ("w = camera.width + camera.near", MODELS, "the default, without a cameras declaration"),
    ],
)
def test_default_without_a_declaration(extra, models, why):
    """No declaration: every model, unless the spec reads the pinhole intrinsics or the
    Jacobian (a projection written for, or linearised at, a pinhole): then pinhole alone."""
    c = _checked("", extra)
    assert (c.cameras, c.cameras_why) == (tuple(models), why)


def test_a_declaration_overrides_the_default():
    assert _checked("cameras pinhole, opencv", "f = camera.fx").cameras == ("pinhole", "opencv")


def test_cameras_is_a_keyword_like_color():
    """Like `color`, `lr` or `param`, `cameras` cannot name a variable after a statement."""
    err = _error(BLOB.format(cameras="", extra="x = 1\n  cameras = 2"))
    assert str(err) == (
        "blob.xpr:8:3: error: unexpected 'cameras' (expected ';', 'emit', 'for', '}', a name)\n"
        "      cameras = 2\n"
        "      ^"
    )


@pytest.mark.parametrize(
    "cameras,cls,message",
    [
        (
            "cameras pinhole, fishey",
            "UnknownNameError",
            "blob.xpr:2:18: error: unknown camera model 'fishey' (did you mean 'fisheye'?) "
            "(models: pinhole, opencv, fisheye, ortho)\n"
            "    cameras pinhole, fishey\n"
            "                     ^",
        ),
        (
            "cameras pinhole, ortho, pinhole",
            "DuplicateError",
            "blob.xpr:2:25: error: camera model 'pinhole' is listed twice\n"
            "    cameras pinhole, ortho, pinhole\n"
            "                            ^",
        ),
        (
            "cameras pinhole\ncameras ortho",
            "DuplicateError",
            "blob.xpr:3:1: error: duplicate 'cameras' declaration (first on line 2)\n"
            "    cameras ortho\n"
            "    ^",
        ),
        (
            "cameras",
            "ParseError",
            # `param` is read as a model name, then the parser stops at the next name
            "blob.xpr:3:7: error: unexpected 'means'\n    param means : vec3\n          ^",
        ),
    ],
)
def test_declaration_errors_are_located(cameras, cls, message):
    err = _error(BLOB.format(cameras=cameras, extra="x = 1"))
    assert type(err).__name__ == cls
    assert str(err) == message


def test_extends_inherits_and_overrides(tmp_path):
    (tmp_path / "base.xpr").write_text(BLOB.format(cameras="cameras pinhole, ortho", extra=""))
    kid = 'primitive Kid extends "base.xpr"\nconst k = 1\n'
    src = driver.compile_source(kid, "kid.xpr", spec_dir=tmp_path)
    assert "CAMERA_MODELS = ('pinhole', 'ortho',)" in src
    assert "CAMERA_MODELS_SOURCE = 'declared in base.xpr on line 2'" in src
    src = driver.compile_source(kid + "cameras fisheye\n", "kid.xpr", spec_dir=tmp_path)
    assert "CAMERA_MODELS = ('fisheye',)" in src
    assert "CAMERA_MODELS_SOURCE = 'declared on line 3'" in src
    # an unknown model in the base is located in the base file
    (tmp_path / "base.xpr").write_text(BLOB.format(cameras="cameras pinhol", extra=""))
    err = _error(kid, tmp_path)
    assert str(err).startswith("base.xpr:2:9: error: unknown camera model 'pinhol'")


SHIPPED = {
    "3dgs": ("pinhole",),
    "student_t": ("pinhole",),  # extends 3dgs
    "beta": ("pinhole",),
    "2dgs": MODELS,  # extends 3dgs, declares its own
    "3dgut": MODELS,
    "3dgrt_k4": MODELS,  # extends 3dgut
    "linprim_octahedron": ("pinhole", "ortho"),
    "linprim_tetrahedron": ("pinhole", "ortho"),
    "ever_ellipsoid": ("pinhole", "ortho"),
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_specs_declare_their_cameras(name):
    golden = (ROOT / "tests" / "golden" / f"{name}.py").read_text()
    line = re.search(r"^CAMERA_MODELS = \((.*)\)$", golden, re.MULTILINE).group(1)
    assert tuple(m.strip(" '") for m in line.split(",") if m.strip()) == SHIPPED[name]


class _Method:
    NAME = "Blob"
    SPEC_FILE = "blob.xpr"
    CAMERA_MODELS = ("pinhole", "ortho")
    CAMERA_MODELS_SOURCE = "declared on line 2"


def _camera(model: str):
    return look_at([0.0, 0.0, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], 16, 12, 60.0, model=model)


def test_runtime_check_accepts_declared_models_and_hand_written_methods():
    runtime.check_camera(_Method, _camera("ortho"))
    runtime.check_camera(object(), _camera("fisheye"))  # no CAMERA_MODELS: every model


def test_render_refuses_an_undeclared_camera_model():
    import jax.numpy as jnp

    from xprc import render

    method = driver.load(ROOT / "specs" / "3dgs.xpr")
    params = {
        p.name: jnp.zeros((2, *p.shape)) + (1.0 if p.name == "quats" else 0.0)
        for p in method.PARAMS
    }
    with pytest.raises(CameraModelError) as info:
        render(method, params, _camera("fisheye"))
    assert str(info.value) == (
        "3dgs.xpr: error: Gaussian3D accepts the camera model pinhole (declared on line 4), not "
        "'fisheye': render it with such a camera, or declare 'cameras pinhole, fisheye' in the "
        "spec if it is right for 'fisheye'"
    )
    with pytest.raises(CameraModelError, match="accepts the camera models pinhole, ortho "):
        runtime.check_camera(_Method, _camera("opencv"))


def test_verify_iterates_the_accepted_models_and_refuses_others(capsys):
    method = driver.load(ROOT / "specs" / "linprim_octahedron.xpr")
    assert verify.accepted_models(method) == ("pinhole", "ortho")
    assert verify.accepted_models(method, ("ortho",)) == ("ortho",)
    with pytest.raises(XprError) as info:
        verify.accepted_models(method, ("pinhole", "fisheye"), "octa.xpr")
    assert str(info.value) == (
        "error: octa.xpr: camera model 'fisheye' is not one the spec accepts (pinhole, ortho: "
        "its 'cameras' declaration or the default)"
    )
    assert cli.main(["verify", "3dgs", "--models", "opencv"]) == 1
    err = capsys.readouterr().err
    assert "camera model 'opencv' is not one the spec accepts (pinhole: " in err


# ------------------------------------- pixels outside the lens's valid domain (nothing silent)

LENS_W, LENS_H = 40, 30


@pytest.fixture(scope="module")
def blob(tmp_path_factory):
    """BLOB for every model: no rays in its response, yet its renders count `lens_outside`."""
    path = tmp_path_factory.mktemp("lens") / "blob.xpr"
    path.write_text(BLOB.format(cameras="", extra="x = 1"))
    return driver.load(path)


def _blob_params(n: int = 3):
    import numpy as np

    means = np.array([[-0.3, 0.1, 0.0], [0.2, -0.2, 0.5], [0.0, 0.0, 1.0]], np.float32)[:n]
    return {"means": means, "opacities": np.zeros(n, np.float32)}


def _lens_camera(model: str, dist, fov: float):
    """float32 (as a dataset's), off-centre principal point and fx != fy: the pixel-centre
    conventions matter."""
    import numpy as np

    from xprc.camera import Camera

    cam = look_at([0.0, 0.0, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], LENS_W, LENS_H, fov,
                  model=model, dtype=np.float32)  # fmt: skip
    K = np.array(cam.K)
    K[1, 1] *= 1.07
    K[0, 2] += 1.3
    K[1, 2] -= 0.7
    dist = None if dist is None else np.asarray(dist, np.float32)
    return Camera(viewmat=cam.viewmat, K=K, width=LENS_W, height=LENS_H, model=model, dist=dist)


def _normalised_radius(cam):
    """NumPy: each pixel centre's distance from the principal point in normalised units."""
    import numpy as np

    K = np.asarray(cam.K)
    px, py = np.meshgrid(np.arange(LENS_W) + 0.5, np.arange(LENS_H) + 0.5)
    return np.hypot((px - K[0, 2]) / K[0, 0], (py - K[1, 2]) / K[1, 1])


def _smallest_positive_root(coefficients):
    """The smallest positive real root of a polynomial (NumPy order: highest power first)."""
    import numpy as np

    roots = np.roots(coefficients)
    real = roots[(np.abs(roots.imag) < 1e-12) & (roots.real > 0)].real
    return float(real.min())


def _render_stats(method, cam, params=None):
    import jax

    from xprc import render

    out = render(method, _blob_params() if params is None else params, cam)
    return jax.device_get(out.stats)


def test_fisheye_pixels_beyond_the_image_circle_are_counted_and_warned(blob):
    """theta_d = theta (1 + k1 theta^2 + k2 theta^4) folds back at theta_max, the smallest
    positive root of 1 + 3 k1 t^2 + 5 k2 t^4 (NumPy); the pixels whose distorted radius is over
    theta_d(theta_max) have no ray. A 200-degree field of view puts the corners beyond it."""
    import numpy as np

    k1, k2 = -0.06, 0.001
    theta_max = np.sqrt(_smallest_positive_root([5 * k2, 3 * k1, 1.0]))  # in t^2
    td_max = theta_max * (1 + k1 * theta_max**2 + k2 * theta_max**4)
    cam = _lens_camera("fisheye", [k1, k2, 0.0, 0.0], 200.0)
    radius = _normalised_radius(cam)
    assert np.abs(radius - td_max).min() > 1e-4  # no pixel centre on the edge (float32)
    outside = radius > td_max
    want = int(outside.sum())
    assert 0 < want < LENS_W * LENS_H
    assert np.array_equal(~np.asarray(cam.pixel_valid(*np.meshgrid(
        np.arange(LENS_W) + 0.5, np.arange(LENS_H) + 0.5))), outside)  # fmt: skip
    message = (
        rf"^{want:,} pixel\(s\) lie outside the fisheye lens model's valid domain \(beyond "
        r"theta_max, .* the image circle\); no ray reaches them, so they show the nearest valid "
        r"ray's content, at theta_max"
    )
    with pytest.warns(RuntimeWarning, match=message):
        stats = _render_stats(blob, cam)
    assert stats["lens_outside"].dtype == np.int32 and int(stats["lens_outside"]) == want
    # under the caller's own jit the count is reported at run time
    import jax

    from xprc import fit_config, render

    config = fit_config(blob, _blob_params(), cam)
    jitted = jax.jit(lambda p, c: render(blob, p, c, config=config).stats["lens_outside"])
    with pytest.warns(RuntimeWarning, match=message):
        assert int(jax.block_until_ready(jitted(_blob_params(), cam))) == want
    # a batch: each camera is its own image, the pixels add up
    from xprc.camera import Camera

    with pytest.warns(RuntimeWarning, match=rf"^{2 * want:,} pixel\(s\) of 2 cameras' images "):
        stats = _render_stats(blob, Camera.stack([cam, cam]))
    assert stats["lens_outside"].tolist() == [want, want]
    # no primitives: the same count, nothing rendered to warn about
    assert int(_render_stats(blob, cam, _blob_params(0))["lens_outside"]) == want


def test_opencv_pixels_outside_the_radial_factor_range_are_counted(blob):
    """Radial distortion r_d = r (1 + k1 r^2 + k2 r^4): the domain's factor 1 + k1 u + k2 u^2
    (u = r^2) reaches 0.8 at the smallest positive root u0 (NumPy), below the fold (r_d still
    increasing there); a pixel is inside exactly when its distorted radius is below
    r_d(sqrt(u0)). A 110-degree field of view reaches beyond it, 50 degrees does not."""
    import numpy as np

    k1, k2 = -0.3, 0.02
    u0 = _smallest_positive_root([k2, k1, 0.2])  # 1 + k1 u + k2 u^2 = 0.8
    assert 1 + 3 * k1 * u0 + 5 * k2 * u0**2 > 0  # monotonic up to the domain's edge
    rd_max = np.sqrt(u0) * 0.8
    cam = _lens_camera("opencv", [k1, k2], 110.0)
    radius = _normalised_radius(cam)
    assert np.abs(radius - rd_max).min() > 1e-4
    want = int((radius > rd_max).sum())
    assert 0 < want < LENS_W * LENS_H
    message = rf"^{want:,} pixel\(s\) lie outside the opencv lens model's valid domain "
    with pytest.warns(RuntimeWarning, match=message):
        assert int(_render_stats(blob, cam)["lens_outside"]) == want
    # the same lens at 50 degrees stays inside it: 0, and no warning (warnings are errors)
    assert int(_render_stats(blob, _lens_camera("opencv", [k1, k2], 50.0))["lens_outside"]) == 0


def test_mild_lenses_and_pinholes_report_no_pixels_outside(blob):
    """Ordinary cameras: undistortion converges in float32 (residual ~1e-7, tolerance 1e-4)."""
    import numpy as np

    mild = [0.1, -0.02, 0.003, 0.01, -0.004, 0.001, 0.002, -0.003, 0.001, -0.0005, -0.002, 4e-4]
    cams = [
        _lens_camera("opencv", mild, 70.0),
        _lens_camera("fisheye", [0.05, -0.01, 0.002, -0.0005], 120.0),
        _lens_camera("pinhole", None, 70.0),
    ]
    for cam in cams:
        assert int(_render_stats(blob, cam)["lens_outside"]) == 0
        assert int(cam.lens_outside(np.float32)) == 0
    assert bool(np.all(np.asarray(cams[2].pixel_valid(0.5, [0.5, 1e6]))))


def test_lens_outside_of_a_stack_says_so():
    """One camera at a time (the renderer vmaps): a stack was a broadcasting TypeError."""
    import jax
    import numpy as np
    import pytest

    from xprc.camera import Camera
    from xprc.camera.camera import CameraError

    cam = _lens_camera("fisheye", [-0.06, 0.001, 0.0, 0.0], 200.0)
    both = Camera.stack([cam, cam])
    with pytest.raises(CameraError, match="take one camera, not a Camera.stack: jax.vmap"):
        both.lens_outside()
    counts = jax.vmap(lambda c: c.lens_outside())(both)
    np.testing.assert_array_equal(counts, [int(cam.lens_outside())] * 2)
