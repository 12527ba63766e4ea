"""Derived footprints (`cutoff`) and `xprc verify` (issue 13, done-when 1 and 2).

A one-line kernel swap in specs/3dgs.xpr keeps a correct footprint: `verify` finds no pixel that
the whole-image render has and the footprint render lacks, and the render equals an independent
NumPy per-pixel twin (tests/reference_3dgs.py with the kernel swapped). A footprint made too
small on purpose fails `xprc verify` with exit status 1, naming the primitive that escaped.

Each spec costs one pipeline compile per camera model (about 6-30 s on 2 cores), so the default
suite verifies with the pinhole model; every shipped spec through every model is marked slow.
"""

import jax.numpy as jnp
import numpy as np
import pytest
import reference_3dgs
from conftest import ROOT

from xprc import cli, verify
from xprc.compiler import driver
from xprc.errors import XprError

SPEC_3DGS = (ROOT / "specs" / "3dgs.xpr").read_text()
GAUSSIAN = "density(g) = exp(-0.5 * g)"

# name -> (the new density line's right-hand side, NumPy kernel)
KERNELS = {
    "cauchy": ("(1 + g / 2)^-2", lambda g: (1 + g / 2) ** -2),
    "degree4": ("exp(-0.055556 * g^2)", lambda g: np.exp(-0.055556 * g**2)),
    "beta": ("where(g < 1, (1 - g)^4, 0)", lambda g: np.where(g < 1, np.abs(1 - g) ** 4, 0.0)),
    "gengauss": ("exp(-(g / 2)^1.5)", lambda g: np.exp(-((g / 2) ** 1.5))),
}
SLOW_KERNELS: set[str] = set()  # each costs one pipeline compile (about 6 s)


def _load(tmp_path, text: str, name: str):
    path = tmp_path / f"{name}.xpr"
    path.write_text(text)
    return driver.load(path)


def _swap(rhs: str) -> str:
    assert GAUSSIAN in SPEC_3DGS
    return SPEC_3DGS.replace(GAUSSIAN, f"density(g) = {rhs}", 1)


@pytest.mark.parametrize(
    "kernel",
    [pytest.param(k, marks=pytest.mark.slow) if k in SLOW_KERNELS else k for k in KERNELS],
)
def test_kernel_swap_passes_verify_and_matches_numpy(kernel, tmp_path):
    rhs, f = KERNELS[kernel]
    method = _load(tmp_path, _swap(rhs), f"swap_{kernel}")
    report = verify.verify(method, kernel, models=("pinhole",))
    assert report.ok, report.format()
    # The footprint render against the NumPy twin (every primitive against every pixel).
    w, h, n = 40, 32, 16
    cam = verify.camera("pinhole", w, h)
    raw = verify.scene(method, "random", n, seed=3)
    out, _ = verify.render_pair(
        method, {k: jnp.asarray(v) for k, v in raw.items()}, cam, verify.config_for(n, w, h, 8)
    )
    colour, alpha, depth = reference_3dgs.render(
        raw, np.asarray(cam.viewmat), np.asarray(cam.K), w, h, kernel=f
    )
    assert float(alpha.max()) > 0.5  # the scene shows something
    np.testing.assert_allclose(np.asarray(out.image), colour, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out.alpha)[..., 0], alpha, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out.depth)[..., 0], depth, atol=1e-5)


def test_cutoff_is_the_kernel_inverse(tmp_path):
    """cutoff(level) for each swap (symbolic) and a kernel only bisection can invert."""
    probe = """primitive P
param lv : scalar
param nu : scalar
{density}
projection {{ emit centre = [0, 0], depth = 1, radius = 1, valid = true }}
response {{ alpha = 0 }}
color = {expr}
"""
    levels = np.array([0.9, 0.3, 1 / 255, 1e-4])
    nus = np.array([2.0, 3.0, 7.0, 30.0])
    cases = [(f"density(g) = {rhs}", "cutoff(lv)", f) for rhs, f in KERNELS.values()]
    cases += [
        (
            "density(g, nu) = (1 + g / nu)^(-(nu + 2) / 2)",
            "cutoff(lv, nu)",
            lambda g: (1 + g / nus) ** (-(nus + 2) / 2),
        ),
        (  # not a chain of invertible steps: numerical inversion
            "density(g) = max(exp(-g), 0.5 * exp(-0.1 * g))",
            "cutoff(lv)",
            lambda g: np.maximum(np.exp(-g), 0.5 * np.exp(-0.1 * g)),
        ),
    ]
    for i, (density, expr, f) in enumerate(cases):
        mod = _load(tmp_path, probe.format(density=density, expr=expr), f"probe{i}")
        got = np.asarray(
            mod.project({"lv": jnp.asarray(levels), "nu": jnp.asarray(nus)}, None)["features"]
        )[:, 0]
        # the kernel at the cutoff is the level (from the inside), and just beyond it below
        np.testing.assert_allclose(f(got), np.minimum(levels, f(0 * got)), rtol=2e-5)
        assert np.all(f(got * (1 + 1e-4) + 1e-9) < levels)


def test_cutoff_has_no_gradient(tmp_path):
    """Footprints are not differentiated: the box's gradient in the opacity is exactly 0."""
    import jax

    text = _swap("(1 + g / 2)^-2")
    assert "lax.stop_gradient(" in driver.compile_source(text, "3dgs.xpr")
    mod = _load(tmp_path, text, "nograd")
    raw = {k: jnp.asarray(v) for k, v in verify.scene(mod, "random", 4, 0).items()}
    cam = verify.camera("pinhole", 40, 32)
    g = jax.grad(lambda o: jnp.sum(mod.project({**raw, "opacities": o}, cam)["box"]))
    assert np.all(np.asarray(g(raw["opacities"])) == 0)


def test_shipped_3dgs_passes_verify():
    """Every model 3DGS accepts (`cameras pinhole`): one render pair per scene."""
    report = verify.verify_file(ROOT / "specs" / "3dgs.xpr")
    assert report.ok and report.cases == len(verify.SCENES), report.format()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["3dgut", "2dgs", "linprim_octahedron", "linprim_tetrahedron"])
def test_shipped_specs_pass_verify_every_model(name):
    report = verify.verify_file(ROOT / "specs" / f"{name}.xpr")
    accepted = driver.load(ROOT / "specs" / f"{name}.xpr").CAMERA_MODELS
    assert report.ok and report.cases == len(verify.SCENES) * len(accepted), report.format()


def test_nonfinite_projection_fails_and_names_the_primitive_and_output(tmp_path, capsys):
    """A NaN-box primitive (its projection NaN for some parameters): the pipeline leaves it
    out, so both renders agree; verify still fails, naming the primitive and the output."""
    text = SPEC_3DGS.replace(
        "emit opacity = where(",
        "emit opacity = where(means.x > 0.5, sqrt(-opacities), 1) * where(",
        1,
    )
    assert text != SPEC_3DGS
    path = tmp_path / "nanbox.xpr"
    path.write_text(text)
    method = driver.load(path)
    raw = verify.scene(method, "random", 16, 0)
    expect = np.flatnonzero(raw["means"][:, 0] > 0.5)  # every such primitive is NaN
    status = cli.main(["verify", str(path), "--seeds", "1"])
    out = capsys.readouterr().out
    assert status == 1, out
    head, tail = out.split(" over 5 renders (tolerance 1e-06): ")
    assert head.startswith(f"{path}: largest difference ")
    assert float(head.rsplit(" ", 1)[1]) < 1e-12  # both renders leave the NaN primitives out
    assert tail == (
        f"non-finite projection in scene 'random', camera model 'pinhole': primitive {expect[0]} "
        f"has attrs 'opacity' = nan ({len(expect)} primitives in that render; the pipeline "
        "leaves them out)\n"
    )


def test_too_small_footprint_fails_and_names_the_primitive(tmp_path, capsys):
    text = SPEC_3DGS.replace(
        "radii   = sqrt(r2 * diag(cov2))", "radii   = 0.3 * sqrt(r2 * diag(cov2))"
    )
    path = tmp_path / "small.xpr"
    path.write_text(text)
    status = cli.main(["verify", str(path), "--models", "pinhole", "--seeds", "1"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert out.startswith(f"{path}: largest difference ")
    assert "footprint too small in scene '" in out and "camera model 'pinhole', pixel (" in out
    assert "primitive " in out and "lies outside its footprint" in out


GES = """primitive GES extends "3dgs.xpr"
param betas : scalar = 0.25 + softplus(raw)  lr 5e-3  init 2
density(g, betas) = exp(-0.5 * g^(betas / 2))
"""


@pytest.mark.parametrize("footprint_for_small_beta", [True, False])
def test_a_kernel_shape_is_verified_over_its_activation_range(footprint_for_small_beta, tmp_path):
    """A footprint that holds for beta >= 1 only (the Gaussian's cut-off squared) fails: the
    shape parameter is drawn over its activation's range, down to 0.27. The derived one holds."""
    text = GES
    if not footprint_for_small_beta:
        text = text.replace("primitive GES extends", "primitive GESbad extends") + (
            "projection {\n"
            + _projection_with_r2(SPEC_3DGS, "r2 = (-2 * log(min(1 / (255 * opacity), 1)))^2")
            + "}\n"
        )
    method = _load(tmp_path, text, "ges")
    report = verify.verify(method, models=("pinhole",), seeds=(0,))
    assert report.ok == footprint_for_small_beta, report.format()
    assert report.nonfinite is None


def _projection_with_r2(spec: str, r2_line: str) -> str:
    """The body of the 3DGS spec's projection block with its `r2 = ...` line replaced."""
    body = spec.split("projection {", 1)[1].split("\n}", 1)[0]
    lines = [r2_line if ln.strip().startswith("r2 ") else ln for ln in body.splitlines()]
    assert r2_line in lines
    return "\n".join(lines) + "\n"


def test_verify_cli_rejects_bad_options(capsys):
    assert cli.main(["verify", "3dgs", "--models", "pinhole,fishy"]) == 1
    assert capsys.readouterr().err == (
        "error: --models: unknown camera model 'fishy' (expected pinhole, opencv, fisheye, ortho)\n"
    )
    assert cli.main(["verify", "3dgs", "--models", "pinhole, pinhole"]) == 1
    assert capsys.readouterr().err == "error: --models: camera model 'pinhole' is listed twice\n"


# -------------------------------------------------------------- arguments of verify.verify


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seeds": ()}, "verify: seeds is empty: nothing would be verified (give at least one)"),
        ({"scenes": []}, "verify: scenes is empty: nothing would be verified (give at least one)"),
        ({"models": ()}, "verify: models is empty: nothing would be verified (give at least one)"),
        (
            {"scenes": ("randm",)},
            "verify: scenes: unknown scene 'randm' (expected random, large, near, edge-on, behind)",
        ),
        (
            {"scenes": "random"},
            "verify: scenes must be a sequence of scene names, got str 'random'",
        ),
        ({"scenes": ("near", "near")}, "verify: scenes: 'near' is listed twice"),
        ({"seeds": 3}, "verify: seeds must be a sequence of non-negative integers, got int 3"),
        ({"seeds": (0, 1.5)}, "verify: seeds must hold non-negative integers, got 1.5"),
        ({"seeds": (True,)}, "verify: seeds must hold non-negative integers, got True"),
        ({"seeds": (-1,)}, "verify: seeds: -1 is negative (seeds are integers >= 0)"),
        ({"models": ("pinhole", "pinhole")}, "verify: models: 'pinhole' is listed twice"),
        ({"n": 0}, "verify: n must be a positive integer, got 0"),
        ({"tile": 0}, "verify: tile must be a positive integer, got 0"),
        ({"width": 4.0}, "verify: width must be a positive integer, got 4.0"),
        ({"height": -2}, "verify: height must be a positive integer, got -2"),
        ({"tol": float("nan")}, "verify: tol must be a finite number >= 0, got nan"),
        ({"tol": -1e-6}, "verify: tol must be a finite number >= 0, got -1e-06"),
    ],
)
def test_verify_rejects_bad_arguments_before_rendering(kwargs, message, monkeypatch):
    """The audit: seeds=() reported ok having checked 0 renders, scenes=('randm',) rendered
    another scene and said ok, n=0 and tile=0 failed deep inside (ValueError,
    ZeroDivisionError)."""
    method = driver.load(ROOT / "specs" / "3dgs.xpr")
    monkeypatch.setattr(verify, "render_pair", lambda *a: pytest.fail("rendered"))
    with pytest.raises(XprError) as e:
        verify.verify(method, "3dgs", **kwargs)
    assert str(e.value) == f"error: {message}"


def test_verify_of_a_name_says_to_load_it_first():
    with pytest.raises(XprError) as e:
        verify.verify("3dgs")
    assert str(e.value) == (
        "error: expected a method module from xprc.load(...), got str '3dgs' (load it first: "
        "xprc.load('3dgs'))"
    )


def test_scene_of_an_unknown_kind_is_an_error():
    method = driver.load(ROOT / "specs" / "3dgs.xpr")
    with pytest.raises(XprError, match=r"^error: unknown scene 'randm' \(expected random, "):
        verify.scene(method, "randm", 4, 0)


def test_a_report_of_no_renders_is_never_ok():
    worst = verify.Escape(0.0, "random", "pinhole", None, None, 0.0)
    report = verify.Report("3dgs", 0, worst, verify.TOL)
    assert not report.ok
    assert report.format() == "3dgs: nothing verified (0 renders): not a pass"
    assert verify.Report("3dgs", 1, worst, verify.TOL).ok
