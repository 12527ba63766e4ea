"""tests/heavy_tests.txt, the tests of CI's second job (`-m heavy`), names tests that exist and
none that is marked slow: a renamed test would otherwise drop out of the list and back into the
default run unseen, and a slow one would make CI's second job run for hours."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, heavy_ids


def collected(marks: str, files: list[str]) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:xdist", "-o", "addopts=",
         "-p", "no:cacheprovider", "-p", "no:benchmark", "-m", marks, *files],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode in (0, 5), out.stdout[-2000:] + out.stderr[-2000:]  # 5: none collected
    return {line for line in out.stdout.splitlines() if "::" in line}


def test_every_listed_heavy_test_exists_and_none_is_slow():
    ids = heavy_ids()
    assert ids and len(ids) == len(set(ids)), "a test listed twice"
    files = sorted({i.split("::")[0] for i in ids})
    found = collected("heavy", files)
    assert sorted(set(ids) - found) == [], "listed in tests/heavy_tests.txt but not collected"
    assert found == set(ids)
    assert collected("heavy and slow", files) == set()


def test_heavy_ids_reads_node_ids_and_skips_comments(tmp_path):
    listing = tmp_path / "heavy.txt"
    listing.write_text("# a comment\n\ntests/test_a.py::test_b[x-1]\n  tests/test_c.py::test_d\n")
    assert heavy_ids(listing) == ["tests/test_a.py::test_b[x-1]", "tests/test_c.py::test_d"]
