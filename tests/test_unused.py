"""A parameter nothing depends on, or a local assigned and never read, compiles with a warning
at its line (`SpecWarning`): an unused parameter would otherwise train with a zero gradient,
silently. No shipped spec has one."""

from __future__ import annotations

import warnings

import pytest
from conftest import ROOT

from xprc.cli import main
from xprc.compiler import driver
from xprc.errors import SpecWarning

SPEC = (ROOT / "specs" / "3dgs.xpr").read_text()


def _warnings(text, filename="mine.xpr"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        driver.compile_source(text, filename, spec_dir=ROOT / "specs")
    return [str(w.message) for w in caught if issubclass(w.category, SpecWarning)]


@pytest.mark.parametrize("spec", sorted((ROOT / "specs").glob("*.xpr")), ids=lambda p: p.stem)
def test_no_shipped_spec_has_an_unused_name(spec):
    assert _warnings(spec.read_text(), spec.name) == []


def test_an_unused_parameter_is_reported_at_its_line():
    text = SPEC.replace("param sh ", "param extra : vec3 lr 1e-3 init 0\nparam sh ", 1)
    line = text.splitlines().index("param extra : vec3 lr 1e-3 init 0") + 1
    (got,) = _warnings(text)
    assert got.startswith(f"mine.xpr:{line}:7: warning: parameter 'extra' is never used")
    assert got.endswith("    param extra : vec3 lr 1e-3 init 0\n          ^")


def test_a_parameter_read_only_by_a_dead_local_is_unused_too():
    text = SPEC.replace("param sh ", "param extra : vec3 lr 1e-3 init 0\nparam sh ", 1)
    text = text.replace("  tx  = 0.5", "  spare = extra * 2\n  tx  = 0.5", 1)
    got = _warnings(text)
    assert len(got) == 2
    assert "parameter 'extra' is never used" in got[0]
    assert "'spare' is assigned but never used" in got[1] and "    spare = extra * 2" in got[1]


def test_names_used_only_by_the_response_or_a_loop_count_as_used():
    """A parameter the projection ignores but the response reads; a local read by a later
    iteration of a static loop and then by the output; the response's `alpha`."""
    text = SPEC.replace("param sh ", "param tint : scalar lr 1e-3 init 1\nparam sh ", 1)
    text = text.replace("min(0.99, opacity * density", "min(0.99, tint * opacity * density", 1)
    text = text.replace("  tx  = 0.5", "  acc = 0\n  for i in 0..3 {\n    acc = acc + i\n  }\n"
                        "  tx  = 0.5 + 0 * acc", 1)  # fmt: skip
    assert _warnings(text) == []


def test_a_local_overwritten_before_any_read_is_still_reported():
    text = SPEC.replace("  tx  = 0.5", "  junk = 1\n  junk = 2\n  tx  = 0.5", 1)
    (got,) = _warnings(text)
    assert "'junk' is assigned but never used" in got


def test_the_cli_prints_the_warning_once_with_its_caret(tmp_path, capsys):
    spec = tmp_path / "mine.xpr"
    spec.write_text(SPEC.replace("  tx  = 0.5", "  junk = 1\n  tx  = 0.5", 1))
    with warnings.catch_warnings():  # as outside pytest (which ignores SpecWarnings here)
        warnings.simplefilter("default")
        assert main(["check", str(spec)]) == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1
    assert f"{spec}:" in err and "'junk' is assigned but never used\n      junk = 1\n      ^" in err


def test_a_file_name_that_looks_like_a_message_is_printed_as_it_is():
    """The warning's form is built, not edited from an error's text: a spec named like a
    message keeps its name."""
    text = SPEC.replace("  tx  = 0.5", "  junk = 1\n  tx  = 0.5", 1)
    (got,) = _warnings(text, "a: error: b\n.xpr")
    assert got.startswith("a: error: b\\n.xpr:")
    assert ": warning: 'junk' is assigned but never used" in got
