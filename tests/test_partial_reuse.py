"""Partial reuse (issue 41, item 3): `extend projection { ... }` and `extend response { ... }`
in a spec that `extends` another override single emits and locals of the base's block in place
(the base's later statements read the new value) and add new statements (before the override
that follows them in the `extend` block, else after the base's statements). The merged spec
compiles to exactly the module of its hand-expanded copy; each misuse is a located error; a
block that replaces the base's whole and lacks an output says what the base's emitted."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from xprc.compiler import driver
from xprc.errors import MissingOutputError, ReuseError

SPEC_3DGS = (ROOT / "specs" / "3dgs.xpr").read_text()

DERIVED = """# two opacities: the peak bounds the footprint, the second scales the response
primitive Halfish extends "3dgs.xpr"
param opacities2 : scalar = sigmoid(raw)  lr 5e-2  init 0.2
extend projection {
  peak = max(opacities, opacities2)                 # new: placed before the override below
  emit opacity = where(antialiased != 0, peak * sqrt(max(det2d / det2, 0.005^2)), peak)
  emit ratio = opacities2 / peak                    # new, after the last override: at the end
}
extend response {
  alpha = where(sigma >= 0, min(0.99, opacity * ratio * density(2 * sigma)), 0)
}
"""


def _hand_expanded() -> str:
    """DERIVED written out by hand: the 3DGS text with the override in place, the new local
    before it, the new emit at the end of the projection and the parameter appended."""
    text = SPEC_3DGS.replace("primitive Gaussian3D", "primitive Halfish")
    old_opacity = (
        "  emit opacity = where(antialiased != 0, opacities * sqrt(max(det2d / det2, 0.005^2)), "
        "opacities)\n"
    )
    new_opacity = (
        "  peak = max(opacities, opacities2)\n"
        "  emit opacity = where(antialiased != 0, peak * sqrt(max(det2d / det2, 0.005^2)), peak)\n"
    )
    old_alpha = "alpha = where(sigma >= 0, min(0.99, opacity * density(2 * sigma)), 0)"
    new_alpha = "alpha = where(sigma >= 0, min(0.99, opacity * ratio * density(2 * sigma)), 0)"
    end_of_projection = "\n}\n\nresponse {"
    for old in (old_opacity, old_alpha, end_of_projection):
        assert text.count(old) == 1, old
    text = text.replace(old_opacity, new_opacity).replace(old_alpha, new_alpha)
    text = text.replace(end_of_projection, "\n  emit ratio = opacities2 / peak\n}\n\nresponse {")
    return text + "param opacities2 : scalar = sigmoid(raw)  lr 5e-2  init 0.2\n"


def _body(source: str) -> str:
    """The module without what names the spec file, its hash or its lines."""
    drop = ("# Generated", "# `xprc", "# spec sha256", '"""', "NAME =", "SPEC_SHA256 =",
            "SPEC_FILE =", "CAMERA_MODELS_SOURCE =")  # fmt: skip
    lines = [line for line in source.splitlines() if not line.startswith(drop)]
    return "\n".join(re.sub(r"  # spec line \d+(, base spec)?$", "", line) for line in lines)


@pytest.mark.parametrize("antialiased", [0, 1])
def test_extend_compiles_like_its_hand_expanded_copy(tmp_path, antialiased):
    (tmp_path / "3dgs.xpr").write_text(SPEC_3DGS)
    defines = {"antialiased": antialiased}
    derived = driver.compile_source(DERIVED, "halfish.xpr", defines, spec_dir=tmp_path)
    expanded = driver.compile_source(_hand_expanded(), "expanded.xpr", defines)
    assert _body(derived) == _body(expanded)
    # the base's later statements read the override: the footprint follows the peak opacity
    assert "'opacities2'" in derived and "'opacity*ratio'" in derived


def test_base_statements_after_an_override_read_the_new_value(tmp_path):
    """r2 = cutoff(1 / (255 * opacity)) in the base reads the overridden opacity: with a
    constant opacity of 1 the footprint's cutoff is -2 log(1/255), a number, not a column."""
    derived = 'primitive P extends "3dgs"\nextend projection { emit opacity = 1 }\n'
    module = driver.compile_source(derived, "p.xpr", spec_dir=tmp_path)
    assert "11.0825" in module  # -2 log(1/255) = 11.08253
    assert "1/(255*" not in module.replace(" ", "")


# (id, files (blob.xpr is compiled), error class, whole message)
BASE = """primitive Blob
param means : vec3
param opacities : scalar = sigmoid(raw)
projection {
  p = camera.world_to_camera(means)
  s = 2
  s = s * 2
  for i in 0..2 { w = i }
  emit centre = camera.project(p), depth = p.z, radius = 3.0 + s + w, valid = p.z > camera.near
}
response {
  d = pixel - centre
  alpha = min(0.99, opacities * exp(-dot(d, d)))
}
color = [1, 1, 1]
"""


def derived(body: str) -> dict:
    return {"blob.xpr": 'primitive D extends "base.xpr"\n' + body, "base.xpr": BASE}


ERRORS = [
    (
        "override_reassigned_local",
        derived("extend projection {\n  s = 5\n}\n"),
        ReuseError,
        "blob.xpr:3:3: error: cannot override 's': base.xpr assigns it more than once (lines 6, "
        "7); only a value the base block assigns or emits once, at its top level, can be "
        "overridden\n"
        "      s = 5\n"
        "      ^",
    ),
    (
        "override_loop_local",
        derived("extend projection { w = 1 }\n"),
        ReuseError,
        "blob.xpr:2:21: error: cannot override 'w': base.xpr assigns it inside a loop or by "
        "element (line 8); only a value the base block assigns or emits once, at its top level, "
        "can be overridden\n"
        "    extend projection { w = 1 }\n"
        "                        ^",
    ),
    (
        "assign_to_an_emit",
        derived("extend projection { depth = 1 }\n"),
        ReuseError,
        "blob.xpr:2:21: error: base.xpr emits 'depth' (line 9): override it with "
        "'emit depth = ...'\n"
        "    extend projection { depth = 1 }\n"
        "                        ^",
    ),
    (
        "override_twice",
        derived("extend response {\n  d = pixel\n  d = pixel + 1\n}\n"),
        ReuseError,
        "blob.xpr:4:3: error: 'd' is already overridden in this block (line 3)\n"
        "      d = pixel + 1\n"
        "      ^",
    ),
    (
        "extend_twice",
        derived("extend response { d = pixel }\nextend response { e = 1 }\n"),
        ReuseError,
        "blob.xpr:3:1: error: duplicate 'extend response' block (first on line 2)\n"
        "    extend response { e = 1 }\n"
        "    ^",
    ),
    (
        "extend_and_replace",
        derived("response { alpha = 0.5 }\nextend response { d = pixel }\n"),
        ReuseError,
        "blob.xpr:3:1: error: 'extend response': this spec also replaces the whole response "
        "(line 2); extend the base's, or write the whole block\n"
        "    extend response { d = pixel }\n"
        "    ^",
    ),
    (
        "extend_without_base",
        {"blob.xpr": BASE + "extend response { d = pixel }\n"},
        ReuseError,
        "blob.xpr:16:1: error: 'extend response' changes single statements of a base spec's "
        "response, and this spec extends none (write 'primitive NAME extends \"base.xpr\"')\n"
        "    extend response { d = pixel }\n"
        "    ^",
    ),
    (
        "override_reads_a_later_base_value",
        derived("extend projection { p = camera.world_to_camera(means) + s }\n"),
        ReuseError,
        "blob.xpr:2:57: error: 's' is defined by base.xpr on line 6, after the place of this "
        "statement: an override takes the place of the base's statement, new statements before "
        "an override go just before it, the others after the base's statements\n"
        "    extend projection { p = camera.world_to_camera(means) + s }\n"
        "                                                            ^",
    ),
    (
        "replaced_projection_lacks_an_emit",
        {"blob.xpr": 'primitive D extends "3dgs"\nprojection {\n  emit opacity = 0.5\n}\n'},
        MissingOutputError,
        "blob.xpr:2:1: error: projection must emit 'centre' (vec2); this projection replaces "
        "the whole projection of 3dgs.xpr (line 19), which emits opacity, centre, depth, radii, "
        "valid, conic, ellipse: to change single statements, write 'extend projection { ... }'\n"
        "    projection {\n"
        "    ^",
    ),
    (
        "replaced_response_lacks_alpha",
        derived("response { beta = 0.5 }\n"),
        MissingOutputError,
        "blob.xpr:2:1: error: response must assign 'alpha'; this response replaces the whole "
        "response of base.xpr (line 11), which assigns alpha: to change single statements, "
        "write 'extend response { ... }'\n"
        "    response { beta = 0.5 }\n"
        "    ^",
    ),
]


@pytest.mark.parametrize("name,files,cls,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_error(name, files, cls, message, tmp_path):
    for path, text in files.items():
        (tmp_path / path).write_text(text)
    with pytest.raises(cls) as info:
        driver.compile_source(files["blob.xpr"], "blob.xpr", spec_dir=tmp_path)
    assert str(info.value) == message
