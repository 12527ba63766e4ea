"""Spec mistakes other languages teach, and where they are reported (issue 42): each message
says what was meant, asserted whole with its caret line."""

import warnings

import pytest

from xprc.cli import main
from xprc.compiler import driver
from xprc.errors import ParseError, XprTypeError
from xprc.resources import SPECS_DIR

STUDENT_T = """# 3DGS with a Student-t kernel
primitive StudentT extends "3dgs"
param nus : scalar = 1 + exp(raw)  lr 1e-3  init 3
density(g, {arg}) = (1 + g / {arg})^(-({arg} + 2) / 2)
"""


def _error(cls, text, tmp_path):
    with pytest.raises(cls) as info:
        driver.compile_source(text, "user.xpr", spec_dir=tmp_path)
    return str(info.value)


def test_an_unquoted_base_after_extends_is_shown_quoted(tmp_path):
    message = _error(ParseError, "primitive P extends 3dgs\n", tmp_path)
    assert message == (
        "user.xpr:1:21: error: unexpected '3dgs': the base spec is a quoted path, "
        'extends "3dgs.xpr"\n'
        "    primitive P extends 3dgs\n"
        "                        ^"
    )
    message = _error(ParseError, "primitive P extends my_base.xpr # mine\n", tmp_path)
    assert message == (
        "user.xpr:1:21: error: unexpected 'my_base.xpr': the base spec is a quoted path, "
        'extends "my_base.xpr"\n'
        "    primitive P extends my_base.xpr # mine\n"
        "                        ^"
    )


@pytest.mark.parametrize("power,column", [("g**2", 23), ("g ** 2", 24)])
def test_a_python_power_suggests_the_caret(power, column, tmp_path):
    text = STUDENT_T.format(arg="nus") + f"const k = 1\nfn f(g) = exp(-0.5 * {power})\n"
    message = _error(ParseError, text, tmp_path)
    assert message == (
        f"user.xpr:6:{column}: error: unexpected '**': a power is written with '^' "
        "(x^2, not x**2)\n"
        f"    fn f(g) = exp(-0.5 * {power})\n"
        f"    {' ' * (column - 1)}^"
    )


def test_a_density_argument_named_wrongly_is_reported_at_the_users_line(tmp_path):
    # the shipped base calls cutoff(level) and density(2 * sigma), leaving `nu` to be passed
    # by name: nothing is named `nu`, and the user's density line is where the mistake is
    message = _error(XprTypeError, STUDENT_T.format(arg="nu"), tmp_path)
    assert message == (
        "user.xpr:4:12: error: density argument 'nu' names nothing where 3dgs.xpr:39:8 calls "
        "'cutoff' with 1 argument (did you mean 'nus'?); an argument a call leaves out is "
        "the parameter, constant or local of its name there\n"
        "    density(g, nu) = (1 + g / nu)^(-(nu + 2) / 2)\n"
        "               ^"
    )


def test_check_names_the_file_a_bare_name_meant(tmp_path, monkeypatch, capsys):
    (tmp_path / "mykernel.xpr").write_text(STUDENT_T.format(arg="nus"))
    monkeypatch.chdir(tmp_path)
    assert main(["check", "mykernel"]) != 0
    err = capsys.readouterr().err
    assert err.startswith(
        "mykernel: error: no spec file 'mykernel' and no shipped spec of that name; did you "
        "mean mykernel.xpr (./mykernel.xpr, the file here)? (shipped: 2dgs, "
    ), err
    assert main(["check", "mykernel.xpr"]) == 0


def test_a_shipped_name_beside_a_file_of_that_name_says_which_it_checked(
    tmp_path, monkeypatch, capsys
):
    # a user's own generalized-exponential kernel saved as ges.xpr, where `ges` is also a
    # shipped spec: the bare name checks the shipped one, and says so
    (tmp_path / "ges.xpr").write_text("primitive P extends 3dgs\n")  # a mistake in it
    monkeypatch.chdir(tmp_path)
    shipped = SPECS_DIR / "ges.xpr"
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as outside pytest, which makes warnings errors
        assert main(["check", "ges"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[:1] == [
        f"warning: 'ges' is the shipped spec {shipped}, not ./ges.xpr here: give ges.xpr "
        "(with its .xpr) for the file here"
    ], err
    assert main(["check", "ges.xpr"]) == 1  # the file here, with its mistake
    assert capsys.readouterr().err.startswith("ges.xpr:1:21: error: unexpected '3dgs'")
