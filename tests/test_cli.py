"""The command line: `xprc compile` / `xprc check`, exit codes, messages on stderr."""

import argparse
import pathlib
import subprocess
import sys

import pytest

from xprc import cli
from xprc.resources import shipped_specs

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


def test_compile_output_dash_is_stdout(capsys, monkeypatch, tmp_path):
    """`-o -` writes to stdout, as in most tools (it wrote a file named '-'); `-o ./-` names
    that file."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compile", SPEC, "-o", "-"]) == 0
    assert capsys.readouterr().out == (ROOT / "tests" / "golden" / "3dgs.py").read_text()
    assert list(tmp_path.iterdir()) == []
    assert cli.main(["compile", SPEC, "-o", "./-"]) == 0
    assert (tmp_path / "-").read_text() == (ROOT / "tests" / "golden" / "3dgs.py").read_text()


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
    assert capsys.readouterr().out == (
        f"{SPEC}: ok (Gaussian3D, 5 parameters)\n{SPEC}:39:8: cutoff: closed form\n"
    )


def test_errors_exit_1_on_stderr(tmp_path, capsys):
    bad = tmp_path / "bad.xpr"
    bad.write_text("primitive P\nparam x : vec3\nconst k = x +\n")
    assert cli.main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err == f"{bad}:3:14: error: unexpected end of file\n    const k = x +\n{' ' * 17}^\n"
    assert "Traceback" not in err
    assert cli.main(["compile", SPEC, "-D", "nope=1"]) == 1
    assert capsys.readouterr().err.strip() == (
        "<command line>: error: -D nope: unknown constant 'nope'; "
        "the spec's constants: eps2d, antialiased"
    )
    assert cli.main(["compile", SPEC, "-D", "eps2d=abc"]) == 1
    assert "value must be a number, got 'abc'" in capsys.readouterr().err
    assert cli.main(["check", str(tmp_path / "missing.xpr")]) == 1
    assert "cannot read spec" in capsys.readouterr().err


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as e:
        cli.main(["compile"])
    assert e.value.code == 2


def test_add_a_subcommand(capsys, monkeypatch):
    def run(args):
        print("hello", args.name)
        return 0

    hello = cli.Command("say hello", lambda p: p.add_argument("name"), run, "nothing")
    monkeypatch.setitem(cli.COMMANDS, "hello", hello)
    assert cli.main(["hello", "world"]) == 0
    assert capsys.readouterr().out == "hello world\n"


def test_console_entry_point(tmp_path):
    out = tmp_path / "m.py"
    r = subprocess.run([sys.executable, "-m", "xprc.cli", "compile", SPEC, "-o", str(out)],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.exists()


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == "xprc 0.1.0\n"


def _subparsers():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def test_every_option_shows_help_and_default():
    parser, commands = _subparsers()
    assert set(commands) >= {"compile", "check", "render", "train", "view", "demo"}
    for name, sub in [("xprc", parser), *commands.items()]:
        formatter = sub._get_formatter()
        for action in sub._actions:
            if not action.option_strings or action.dest in ("help", "version"):
                continue
            text = formatter._get_help_string(action)
            where = f"{name} {action.option_strings[-1]}"
            assert action.help and not action.help.startswith("("), where
            assert "(default: " in text or text.endswith("(required)"), where
        assert "(default: " in sub.format_help() or name == "xprc"


def test_help_text_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["render", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--downscale DOWNSCALE image downscale factor (default: 1)" in out
    assert "--data DATA dataset folder (Blender or COLMAP) (required)" in out
    assert f"({', '.join(shipped_specs())}) (default: the spec the scene records it" in out


@pytest.mark.parametrize("name", ["3dgs", "3dgut", "linprim_octahedron", "linprim_tetrahedron.xpr"])
def test_shipped_spec_by_name(name, capsys):
    assert cli.main(["check", name]) == 0
    assert capsys.readouterr().out.startswith(f"{name}: ok (")


def test_unknown_spec_name_lists_shipped(capsys):
    assert cli.main(["check", "3dgz"]) == 1
    assert capsys.readouterr().err == (
        "3dgz: error: no spec file '3dgz' and no shipped spec of that name "
        f"(shipped: {', '.join(shipped_specs())})\n"
    )


BAD_OPTIONS = [
    (["render", "x.ply", "--data", "d", "--downscale", "0"],
     "argument --downscale: expected a positive integer (1, 2, ...), got '0'"),
    (["render", "x.ply", "--data", "d", "--background", "1,2"],
     "argument --background: expected three numbers in [0, 1] as R,G,B (e.g. 1,1,1 for white), "
     "got '1,2'"),
    (["render", "x.ply", "--data", "d", "--background", "0,0,nan"],
     "argument --background: expected three numbers in [0, 1] as R,G,B (e.g. 1,1,1 for white), "
     "got '0,0,nan'"),
    (["render", "x.ply", "--data", "d", "--max-entries", "0"],
     "argument --max-entries: expected a positive integer (1, 2, ...), got '0'"),
    (["render", "x.ply", "--data", "d", "--max-entries=-5"],
     "argument --max-entries: expected a positive integer (1, 2, ...), got '-5'"),
    (["train", "--data", "d", "--out", "o", "--steps=-5"],
     "argument --steps: expected a positive integer (1, 2, ...), got '-5'"),
    (["train", "--data", "d", "--out", "o", "--capacity", "0"],
     "argument --capacity: expected a positive integer (1, 2, ...), got '0'"),
    (["train", "--data", "d", "--out", "o", "--eval-every=-1"],
     "argument --eval-every: expected an integer >= 0, got '-1'"),
    (["demo", "--steps", "2.5"],
     "argument --steps: expected a positive integer (1, 2, ...), got '2.5'"),
]  # fmt: skip


@pytest.mark.parametrize(
    "argv,message", BAD_OPTIONS, ids=[" ".join(a[-2:]) for a, _ in BAD_OPTIONS]
)
def test_bad_option_values_name_the_option_and_allowed_values(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"xprc {argv[0]}: error: {message}"
    assert "Traceback" not in err


def test_bad_mode_lists_the_modes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["render", "x.ply", "--data", "d", "--kind", "normals"])
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("xprc render: error: argument --kind: invalid choice: 'normals'")
    assert all(k in last for k in ("rgb", "depth", "alpha"))
