"""Spec reuse (`primitive NAME extends "base.xpr"`, issue 13 done-when 3): a derived spec compiles
to exactly what its hand-expanded copy compiles to, a kernel variant of 3DGS is a few lines, and
the module cache notices a changed base. Located errors (missing, cyclic, bad path, mistakes in
the base file) are rows of tests/test_errors.py (V2_CASES)."""

import re

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT

from xprc import cli, verify
from xprc.compiler import cache, driver
from xprc.compiler import extends as reuse

SPEC_3DGS = (ROOT / "specs" / "3dgs.xpr").read_text()

DERIVED = """# 3DGS with a heavier kernel, less dilation and its own opacity annotation
primitive Heavy extends "3dgs.xpr"
const eps2d = 0.1
param opacities : scalar = sigmoid(raw)  lr 1e-2  init 0.2  role opacity
param nus : scalar = 1 + exp(raw)  init 3
density(g, nus) = (1 + g / nus)^(-(nus + 2) / 2)
response {
  d     = pixel - centre
  sigma = 0.5 * (conic.x * d.x^2 + conic.z * d.y^2) + conic.y * d.x * d.y
  alpha = where(sigma >= 0, min(0.98, opacity * density(2 * sigma)), 0)
}
"""


def _hand_expanded() -> str:
    """The same spec written out by hand: the base with each override in place, new at the end."""
    text = SPEC_3DGS.replace("primitive Gaussian3D", "primitive Heavy")
    swaps = [
        ("const eps2d = 0.3", "const eps2d = 0.1"),
        (
            "param opacities : scalar = sigmoid(raw)    lr 5e-2    init 0.1          role opacity",
            "param opacities : scalar = sigmoid(raw)  lr 1e-2  init 0.2  role opacity",
        ),
        ("density(g) = exp(-0.5 * g)", "density(g, nus) = (1 + g / nus)^(-(nus + 2) / 2)"),
        ("min(0.99, opacity * density(2 * sigma))", "min(0.98, opacity * density(2 * sigma))"),
    ]
    for old, new in swaps:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text + "param nus : scalar = 1 + exp(raw)  init 3\n"


def _body(source: str) -> str:
    """The module without the lines that name the spec file or its hash, or where the `cameras`
    declaration is, and without the `# spec line N` comments (a line of the base spec says so)."""
    drop = ("# Generated", "# `xprc", "# spec sha256", '"""', "NAME =", "SPEC_SHA256 =",
            "SPEC_FILE =", "CAMERA_MODELS_SOURCE =")  # fmt: skip
    lines = [line for line in source.splitlines() if not line.startswith(drop)]
    return "\n".join(re.sub(r"  # spec line \d+(, base spec)?$", "", line) for line in lines)


def test_reuse_compiles_like_its_hand_expanded_copy(tmp_path):
    (tmp_path / "3dgs.xpr").write_text(SPEC_3DGS)
    (tmp_path / "heavy.xpr").write_text(DERIVED)
    (tmp_path / "expanded.xpr").write_text(_hand_expanded())
    derived = driver.compile_source(DERIVED, "heavy.xpr", spec_dir=tmp_path)
    expanded = driver.compile_source(_hand_expanded(), "expanded.xpr")
    assert _body(derived) == _body(expanded)
    assert "'nus'" in derived and "init_raw=" in derived and "lr=0.01, init=0.2" in derived

    # and the imported modules compute bit-identical results
    a, b = driver.load(tmp_path / "heavy.xpr"), driver.load(tmp_path / "expanded.xpr")
    assert a is not b
    raw = {k: jnp.asarray(v) for k, v in verify.scene(a, "random", 12, 0).items()}
    cam = verify.camera("pinhole", 40, 32)
    pa, pb = a.project(raw, cam), b.project(raw, cam)
    for key in pa:
        assert np.array_equal(np.asarray(pa[key]), np.asarray(pb[key])), key
    pix = jnp.stack(jnp.meshgrid(jnp.arange(40.0) + 0.5, jnp.arange(32.0) + 0.5), -1)
    pix = pix.reshape(-1, 1, 2)
    ra = a.response(pix, pix[..., :1], pix[..., :1], pa["attrs"][None], cam)
    rb = b.response(pix, pix[..., :1], pix[..., :1], pb["attrs"][None], cam)
    assert np.array_equal(np.asarray(ra), np.asarray(rb)) and float(jnp.max(ra)) > 0.1


STUDENT = """# Student-t kernel on the 3DGS projection and response (issue 13: a kernel variant)
primitive StudentT extends "3dgs.xpr"
param nus : scalar = 1 + exp(raw)  lr 1e-3  init 3   # degrees of freedom
density(g, nus) = (1 + g / nus)^(-(nus + 2) / 2)     # the footprint follows (cutoff)
"""


def test_kernel_variant_is_a_few_lines(tmp_path):
    assert len(STUDENT.splitlines()) < 15
    (tmp_path / "3dgs.xpr").write_text(SPEC_3DGS)
    source = driver.compile_source(STUDENT, "student.xpr", spec_dir=tmp_path)
    assert "NAME = 'StudentT'" in source and "raw['nus']" in source
    assert "lax.stop_gradient(" in source  # the derived footprint reads nus


def test_module_cache_notices_a_changed_base(tmp_path):
    (tmp_path / "3dgs.xpr").write_text(SPEC_3DGS)
    path = tmp_path / "student.xpr"
    path.write_text(STUDENT)
    before = cache.module_path(path, STUDENT, {})
    (tmp_path / "3dgs.xpr").write_text(SPEC_3DGS.replace("eps2d = 0.3", "eps2d = 0.2"))
    assert cache.module_path(path, STUDENT, {}) != before


def test_spec_sha256_covers_the_base_it_extends(tmp_path):
    """A run records SPEC_SHA256 so that it is never rendered with another kernel: an edited base
    must change the derived spec's fingerprint (it held the derived text's alone)."""
    (tmp_path / "base.xpr").write_text(SPEC_3DGS)
    path = tmp_path / "student.xpr"
    path.write_text(STUDENT.replace('"3dgs.xpr"', '"base.xpr"'))
    text = path.read_text()

    def sha():
        module = driver.compile_source(text, path.name, None, tmp_path)
        return re.search(r"SPEC_SHA256 = '([0-9a-f]{64})'", module).group(1)

    before = sha()
    assert before == driver.spec_digest(text, path) != driver._sha(text)
    (tmp_path / "base.xpr").write_text(SPEC_3DGS.replace("exp(-0.5 * g)", "exp(-0.25 * g)"))
    assert sha() != before
    plain = driver.compile_source(SPEC_3DGS, "3dgs.xpr", None, tmp_path)
    assert f"SPEC_SHA256 = '{driver._sha(SPEC_3DGS)}'" in plain  # no base: its own text's


@pytest.mark.parametrize("name", ["3dgs", "3dgs.xpr"])
def test_extends_a_shipped_spec_by_name_outside_the_checkout(name, tmp_path, monkeypatch, capsys):
    """`extends "3dgs"` was 'not allowed' and `extends "3dgs.xpr"` 'No such file' for a spec
    outside specs/: the base is now found like `xprc.load("3dgs")` finds it."""
    monkeypatch.chdir(tmp_path)
    text = STUDENT.replace('"3dgs.xpr"', f'"{name}"')
    (tmp_path / "student.xpr").write_text(text)
    shipped = driver.compile_source(STUDENT, "student.xpr", spec_dir=ROOT / "specs")
    assert _body(driver.compile_source(text, "student.xpr", spec_dir=tmp_path)) == _body(shipped)
    assert cli.main(["check", "student.xpr"]) == 0
    assert capsys.readouterr().out == (
        "student.xpr: ok (StudentT, 6 parameters)\n3dgs.xpr:39:8: cutoff: closed form\n"
    )  # (the cutoff is the base's)


def test_a_spec_file_next_to_it_wins_over_the_shipped_spec(tmp_path):
    (tmp_path / "3dgs.xpr").write_text(SPEC_3DGS.replace("eps2d = 0.3", "eps2d = 0.2"))
    local = driver.check_source(STUDENT, "student.xpr", spec_dir=tmp_path)
    assert local.constants["eps2d"] == 0.2
    by_name = STUDENT.replace('"3dgs.xpr"', '"3dgs"')  # a name, not a path: the shipped one
    assert driver.check_source(by_name, "student.xpr", spec_dir=tmp_path).constants["eps2d"] == 0.3


def test_module_cache_notices_a_changed_shipped_base(tmp_path, monkeypatch):
    shipped = tmp_path / "shipped" / "3dgs.xpr"
    shipped.parent.mkdir()
    shipped.write_text(SPEC_3DGS)
    monkeypatch.setattr(reuse, "shipped_specs", lambda: {"3dgs": shipped})
    path = tmp_path / "student.xpr"
    text = STUDENT.replace('"3dgs.xpr"', '"3dgs"')
    before = cache.module_path(path, text, {})
    shipped.write_text(SPEC_3DGS.replace("eps2d = 0.3", "eps2d = 0.2"))
    assert cache.module_path(path, text, {}) != before


def test_a_bare_shipped_name_is_the_shipped_spec_whatever_the_folder_holds(tmp_path, monkeypatch):
    """A run folder called `3dgs` (or a stray file called `beta`) in the working directory broke
    every command using the default spec ('cannot read spec: is a directory')."""
    from xprc.resources import shipped_specs, spec_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "3dgs").mkdir()
    (tmp_path / "beta").write_text("not a spec")
    (tmp_path / "student_t.xpr").mkdir()
    shipped = shipped_specs()
    assert spec_path("3dgs") == shipped["3dgs"] and spec_path("beta") == shipped["beta"]
    assert spec_path("student_t.xpr") == shipped["student_t"]  # a folder is not a spec file
    (tmp_path / "3dgut.xpr").write_text(SPEC_3DGS)
    assert spec_path("3dgut.xpr") == tmp_path / "3dgut.xpr" or spec_path("3dgut.xpr").samefile(
        tmp_path / "3dgut.xpr"
    )  # a spec file of that name here is the user's
    assert spec_path("./beta").samefile(tmp_path / "beta")


def test_an_empty_base_path_is_named_as_such(tmp_path):
    """`extends ""` was taken for no `extends` at all: 'missing projection block'."""
    from xprc.errors import ReuseError

    text = 'primitive P extends ""\nparam means : vec3\n'
    with pytest.raises(ReuseError) as info:
        driver.compile_source(text, "empty.xpr", spec_dir=tmp_path)
    assert str(info.value).splitlines()[0] == (
        "empty.xpr:1:21: error: base spec '' is not allowed (a shipped spec's name, or a "
        "relative path ending in .xpr, of letters, digits, '_', '-', '.' and '/')"
    )
