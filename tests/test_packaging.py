"""Packaging: the wheel ships the grammar and the specs and compiles from any folder; specs by name.

The full check (a fresh venv with the wheel and its dependencies, a tiny scene trained and rendered
outside the checkout) is .ci/wheel_check.sh, which CI runs; here the wheel is built without build
isolation and installed without dependencies into a folder put first on sys.path.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

import xprc
from xprc.errors import XprError
from xprc.resources import GRAMMAR_PATH, SPECS_DIR, shipped_specs, spec_path

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHIPPED = sorted(p.stem for p in (ROOT / "specs").glob("*.xpr"))


def test_checkout_finds_grammar_and_specs():
    assert GRAMMAR_PATH == ROOT / "grammar" / "xpr.lark"
    assert SPECS_DIR == ROOT / "specs"
    assert list(shipped_specs()) == SHIPPED


def test_spec_names_and_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert spec_path("3dgs") == SPECS_DIR / "3dgs.xpr"
    assert spec_path("3dgut.xpr") == SPECS_DIR / "3dgut.xpr"
    # A file that exists wins over a shipped name.
    (tmp_path / "3dgut.xpr").write_text("primitive Mine\n")
    assert spec_path("3dgut.xpr") == pathlib.Path("3dgut.xpr")
    with pytest.warns(UserWarning, match=r"^'3dgut' is the shipped spec .*, not ./3dgut.xpr here"):
        assert spec_path("3dgut") == SPECS_DIR / "3dgut.xpr"  # a bare name: the shipped spec
    # Anything with a folder in it is a path, existing or not.
    assert spec_path("specs/3dgs.xpr") == pathlib.Path("specs/3dgs.xpr")
    assert spec_path("nope.xpr") == pathlib.Path("nope.xpr")  # 'cannot read spec' follows
    with pytest.raises(XprError) as e:
        spec_path("gaussians")
    assert str(e.value) == (
        "gaussians: error: no spec file 'gaussians' and no shipped spec of that name "
        f"(shipped: {', '.join(SHIPPED)})"
    )
    assert xprc.load("3dgs").NAME == "Gaussian3D"


def test_wheel_ships_grammar_and_specs_and_compiles_anywhere(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for name in ("xprc", "grammar", "specs"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist")]
    subprocess.run([*build, str(src)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("xprc-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "xprc/grammar/xpr.lark" in names
    assert {f"xprc/specs/{s}.xpr" for s in SHIPPED} <= names
    assert not any(n.startswith(("grammar/", "specs/", "tests/")) for n in names)
    assert any(n.startswith("xprc-0.1.0.dist-info/") and n.endswith("LICENSE") for n in names)
    site = tmp_path / "site"
    install = [*pip, "install", "--no-deps", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    code = (
        "import pathlib, sys, xprc\n"
        "from xprc.cli import main\n"
        f"assert pathlib.Path(xprc.__file__).parent == pathlib.Path({str(site / 'xprc')!r})\n"
        f"for name in {SHIPPED!r}:\n"
        "    assert main(['compile', name, '-o', name + '.py']) == 0\n"
        "    print(xprc.load(name).NAME)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "XPRC_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=outside, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.split()) == len(SHIPPED)
    assert sorted(p.stem for p in outside.glob("*.py")) == SHIPPED
