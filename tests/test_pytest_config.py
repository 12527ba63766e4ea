"""The test command's own configuration: the xdist options (two workers, one file per worker)
apply where pytest-xdist is loaded, and a one-file run without xdist is not a usage error."""

import os
import re
import shlex
import subprocess
import sys

from conftest import ROOT, TPU

# a plugin that prints the options xdist starts from, once they are settled
PLUGIN = """
def pytest_configure(config):
    o = config.option
    print("OPTIONS", getattr(o, "numprocesses", "-"), getattr(o, "maxprocesses", "-"),
          getattr(o, "dist", "-"), len(getattr(o, "tx", []) or []))
"""


def _run(tmp_path, *args, file="tests/test_readme.py") -> str:
    """The stdout of `pytest FILE --collect-only` with `args`, which must succeed."""
    (tmp_path / "show_xdist_options.py").write_text(PLUGIN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    cmd = [sys.executable, "-m", "pytest", file, "--collect-only", "-s"]
    cmd += ["-p", "show_xdist_options", *args]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def _collect(tmp_path, *args, file="tests/test_readme.py"):
    """The options xdist starts from in that run."""
    out = _run(tmp_path, *args, file=file)
    return [line for line in out.splitlines() if line.startswith("OPTIONS")]


def test_one_file_without_xdist_is_not_a_usage_error(tmp_path):
    assert _collect(tmp_path, "-p", "no:xdist") == ["OPTIONS - - - 0"]


def test_plain_run_has_two_workers_grouped_by_file(tmp_path):
    # `-n auto` is the CPU count (none beside a TPU, which one process holds), at most two
    workers = 0 if TPU else min(os.cpu_count() or 1, 2)
    dist = "loadgroup" if workers else "no"
    assert _collect(tmp_path) == [f"OPTIONS {workers} 2 {dist} {workers}"]


def test_explicit_worker_counts_are_kept(tmp_path):
    assert _collect(tmp_path, "-n", "0") == ["OPTIONS 0 None no 0"]
    assert _collect(tmp_path, "-n", "3") == ["OPTIONS 3 None loadgroup 3"]


def test_the_readme_gives_a_one_file_form_that_works(tmp_path):
    """The README's one-file command (issue 42: the form a user tried was a usage error then)."""
    readme = (ROOT / "README.md").read_text()
    forms = re.findall(r"One file, in one process: `(python -m pytest [^`]*)`", readme)
    assert len(forms) == 1, forms
    *options, file = shlex.split(forms[0])[3:]
    assert file.startswith("tests/test_") and (ROOT / file).is_file()
    assert _collect(tmp_path, *options, file=file) == ["OPTIONS 0 None no 0"]


def test_a_run_without_pytest_timeout_works_and_says_it_has_no_hang_guard(tmp_path):
    # pyproject.toml's `timeout` option was an unknown option's warning, an error there, so
    # a machine without pytest-timeout could run no test at all (INTERNALERROR)
    out = _run(tmp_path, "-p", "no:xdist", "-p", "no:timeout")
    said = "pytest-timeout is not loaded: no hang guard in this run (pip install pytest-timeout)"
    assert said in out.splitlines(), out[-1000:]
    assert "pytest-timeout" not in _run(tmp_path, "-p", "no:xdist")
