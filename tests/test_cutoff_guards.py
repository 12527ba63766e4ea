"""`cutoff` sees through a guard `max(g, eps)` (issue 41, item 5): the docs' recommended
`exp(-0.5 * max(g, 1e-20)^(beta / 2))` gets the closed form `max((-2 log y)^(2 / beta), 1e-20)`,
not a 48-step bisection; `xprc check` says which form each `cutoff` got and what a bisection
costs. Values against the formula in NumPy, float64."""

import importlib.util

import jax.numpy as jnp
import numpy as np
import pytest

from xprc import cli
from xprc.compiler import check, driver, parse
from xprc.compiler.check.invert import BISECT_STEPS, count_selects

SPEC = """primitive Guarded
param level : scalar
param betas : scalar
density(g, betas) = {density}
projection {{
  emit centre = [0, 0], depth = 1, valid = true,
       radius = cutoff(level, betas)
}}
response {{ alpha = 0 }}
color = [1, 1, 1]
"""
GES = "exp(-0.5 * max(g, 1e-20)^(betas / 2))"


def _checked(density: str):
    return check.check(parse.parse(SPEC.format(density=density), "t.xpr"))


def _cutoff_node(checked):
    """The `cutoff` node inside the radius output (the box is centre -+ radius)."""
    box = checked.outputs["box"]
    return box.args[2].args[1]  # centre.x + radius


def test_the_guarded_kernel_gets_the_closed_form():
    checked = _checked(GES)
    assert [how for _, how in checked.derived] == ["closed form"]
    assert [loc.line for loc, _ in checked.derived] == [7]
    # no bisection left: not one select in the whole projection
    assert count_selects(checked.outputs["box"]) == 0


def test_a_kernel_without_a_closed_form_is_reported_with_its_cost():
    checked = _checked("max(exp(-g), 0.5 * exp(-0.1 * g))")
    ((loc, how),) = checked.derived
    assert how.startswith(f"bisection, {BISECT_STEPS} steps (")
    assert f"{BISECT_STEPS} evaluations of the density" in how
    assert count_selects(checked.outputs["box"]) >= BISECT_STEPS


def test_a_guard_active_at_large_g_is_not_peeled():
    """`exp(max(-g, -10))` is constant for g > 10: its cutoff below exp(-10) is unbounded, so
    the guard must not be inverted as if it were inactive (only `max(g, c)` is)."""
    checked = _checked("exp(max(-g, -10))")
    assert checked.derived[0][1].startswith("bisection")


def _module(tmp_path, density):
    path = tmp_path / "guarded.py"
    path.write_text(driver.compile_source(SPEC.format(density=density), "guarded.xpr"))
    spec = importlib.util.spec_from_file_location("xprc_test_guarded", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_closed_form_values_match_the_formula(tmp_path):
    """Per-primitive shape and level: the radius is (-2 log y)^(2 / beta) (NumPy), and the
    kernel at it is the level; at the peak (y = 1) it is the guard's edge 1e-20."""
    module = _module(tmp_path, GES)
    rng = np.random.default_rng(5)
    y = np.concatenate([10.0 ** rng.uniform(-12, -0.01, 40), [1 / 255, 0.5, 1.0]])
    beta = np.concatenate([rng.uniform(0.3, 8.0, 40), [2.0, 1.0, 1.5]])
    params = {"level": jnp.asarray(y), "betas": jnp.asarray(beta)}
    box = np.asarray(module.project(params, None)["box"])
    got = box[:, 2]  # xmax = centre.x + radius, centre 0
    want = np.maximum((-2 * np.log(y)) ** (2 / beta), 1e-20)
    np.testing.assert_allclose(got[:-1], want[:-1], rtol=1e-12)
    inside = np.exp(-0.5 * np.maximum(got, 1e-20) ** (beta / 2))
    np.testing.assert_allclose(inside[:-1], y[:-1], rtol=1e-10)
    # y = 1 is above the peak exp(-0.5 * 1e-15) = 1 - 5e-16: clamped to it, whose log rounds
    assert 1e-20 <= got[-1] < 2e-20


def test_numeric_init_through_a_guarded_activation():
    """`solve` serves inits too: max(raw, 0.1) = 0.5 gives raw 0.5; 0.05 has no raw value."""
    base = SPEC.format(density=GES).replace(
        "param betas : scalar", "param betas : scalar = max(raw, 0.1)  init INIT"
    )
    checked = check.check(parse.parse(base.replace("INIT", "0.5"), "t.xpr"))
    info = {p.name: p for p in checked.params}["betas"]
    assert info.init_raw == 0.5
    with pytest.raises(Exception, match=r"init 0.05 of 'betas': no raw value gives it"):
        check.check(parse.parse(base.replace("INIT", "0.05"), "t.xpr"))


def test_xprc_check_says_which_form(tmp_path, capsys):
    closed = tmp_path / "ges.xpr"
    closed.write_text(SPEC.format(density=GES))
    bisect = tmp_path / "mix.xpr"
    bisect.write_text(SPEC.format(density="max(exp(-g), 0.5 * exp(-0.1 * g))"))
    assert cli.main(["check", str(closed)]) == 0
    assert capsys.readouterr().out == (
        f"{closed}: ok (Guarded, 2 parameters)\n{closed}:7:17: cutoff: closed form\n"
    )
    assert cli.main(["check", str(bisect)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        f"{bisect}:7:17: cutoff: bisection, 48 steps (95 selects, 48 evaluations of the "
        "density): no closed form (see docs/language.md, Derived footprints)"
    )
