"""`cameras pinhole, fisheye`: the camera models a spec accepts (issue 13). Checked at compile
time (located errors), the default when a spec declares none, inherited through `extends`,
exposed as CAMERA_MODELS in the generated module, enforced by `xprc.render` and iterated by
`xprc verify`."""

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
