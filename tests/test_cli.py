"""The command line: `xprc compile` / `xprc check`, exit codes, messages on stderr."""

import pathlib
import subprocess
import sys

import pytest

from xprc import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "specs" / "3dgs.xpr")


def test_compile_to_file(tmp_path, capsys):
    out = tmp_path / "g.py"
    assert cli.main(["compile", SPEC, "-o", str(out)]) == 0
    assert out.read_text() == (ROOT / "tests" / "golden" / "3dgs.py").read_text()


def test_compile_to_stdout_with_define(capsys):
    assert cli.main(["compile", SPEC, "-D", "eps2d=0.1", "-D", "antialiased=1"]) == 0
    out = capsys.readouterr().out
    assert "CONSTANTS = {'eps2d': 0.1, 'antialiased': 1.0}" in out
    assert "# defines: -D eps2d=0.1 -D antialiased=1.0" in out


@pytest.mark.parametrize("stage,needle", [
    ("ast", "Primitive @3:11 name='Gaussian3D'"),
    ("sympy", "attrs: centre.x, conic.x, centre.y, conic.z, conic.y, opacity"),
    ("jax", "def response(pixel, ray_origin, ray_dir, attrs, camera):"),
])  # fmt: skip
def test_emit_stages(stage, needle, capsys):
    assert cli.main(["compile", SPEC, "--emit", stage]) == 0
    assert needle in capsys.readouterr().out


def test_check(capsys):
    assert cli.main(["check", SPEC]) == 0
    assert capsys.readouterr().out.strip().endswith("ok (Gaussian3D, 5 parameters)")


def test_errors_exit_1_on_stderr(tmp_path, capsys):
    bad = tmp_path / "bad.xpr"
    bad.write_text("primitive P\nparam x : vec3\nconst k = x +\n")
    assert cli.main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err == f"{bad}:3:14: error: unexpected end of file\n    const k = x +\n{' ' * 17}^\n"
    assert "Traceback" not in err
    assert cli.main(["compile", SPEC, "-D", "nope=1"]) == 1
    assert capsys.readouterr().err.strip() == (
        "<command line>: error: -D nope: unknown constant 'nope'"
    )
    assert cli.main(["compile", SPEC, "-D", "eps2d=abc"]) == 1
    assert "value must be a number, got 'abc'" in capsys.readouterr().err
    assert cli.main(["check", str(tmp_path / "missing.xpr")]) == 1
    assert "cannot read spec" in capsys.readouterr().err


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as e:
        cli.main(["compile"])
    assert e.value.code == 2


def test_register_subcommand(capsys):
    def run(args):
        print("hello", args.name)
        return 0

    cli.register("hello", "say hello", lambda p: p.add_argument("name"), run)
    try:
        assert cli.main(["hello", "world"]) == 0
        assert capsys.readouterr().out == "hello world\n"
    finally:
        del cli.COMMANDS["hello"]


def test_console_entry_point(tmp_path):
    out = tmp_path / "m.py"
    r = subprocess.run([sys.executable, "-m", "xprc.cli", "compile", SPEC, "-o", str(out)],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.exists()
