"""JAX's persistent compilation cache is on by default (xprc/compile_cache.py, issue 25): a
second process that renders the same scene loads the compiled programs from the private cache
folder; XPRC_JAX_CACHE_DIR moves or disables it; a folder others may write to is refused with a
warning (a cache entry is a program JAX runs)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pytest
from conftest import ROOT

RENDER = """
import sys, warnings
warnings.simplefilter("error")
import jax, numpy as np, xprc
from xprc import compile_cache
from xprc.camera import look_at
from xprc.data.workloads import random_scene
hits = []
jax.monitoring.register_event_listener(
    lambda name, **kw: hits.append(1) if name == "/jax/compilation_cache/cache_hits" else None)
m = xprc.load("3dgs")
cam = look_at([0, 0, 0], [0, 0, 4], [0, -1, 0], 32, 24, dtype=np.float32)
xprc.render(m, random_scene(50, seed=0), cam)
print("dir", compile_cache.STATE["dir"], "reason", compile_cache.STATE["reason"])
print("hits", len(hits))
"""


def _run(env_cache, tmp_path, extra_env=None):
    env = dict(os.environ, XPRC_CACHE_DIR=str(tmp_path / "specs"), PYTHONPATH=str(ROOT))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["XPRC_JAX_CACHE_DIR"] = env_cache
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-c", RENDER], env=env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)  # fmt: skip


def test_second_process_reads_the_cache(tmp_path):
    cache = tmp_path / "jax"
    first = _run(str(cache), tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"dir {cache} reason None" in first.stdout
    assert (cache.stat().st_mode & 0o777) == 0o700
    entries = sorted(p.name for p in cache.iterdir())
    assert entries, "nothing was cached"
    second = _run(str(cache), tmp_path)
    assert second.returncode == 0, second.stderr
    assert "hits 0" in first.stdout
    # every entry of the first run is still there; the second may add a program that took
    # longer than the 0.2 s threshold to compile only this time (a busy machine)
    assert set(entries) <= {p.name for p in cache.iterdir()}
    hits = int(second.stdout.split("hits ")[1])
    assert hits >= len([e for e in entries if not e.endswith("-atime")])  # loaded, not compiled


def test_off_disables_it(tmp_path):
    r = _run("off", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "dir None reason XPRC_JAX_CACHE_DIR='off'" in r.stdout


def test_a_folder_others_may_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    r = _run(str(shared), tmp_path)
    assert r.returncode != 0  # the test's warnings are errors: the warning was raised
    assert (
        f"xprc: JAX compilation cache not used: '{shared}': writable by group or others "
        "(mode 0777); set XPRC_JAX_CACHE_DIR to a private folder, or to 'off'"
    ) in r.stderr
    assert not any(shared.iterdir())


def test_the_callers_cache_is_kept(tmp_path):
    theirs = tmp_path / "theirs"
    r = _run(str(tmp_path / "ours"), tmp_path, {"JAX_COMPILATION_CACHE_DIR": str(theirs)})
    assert r.returncode == 0, r.stderr
    assert f"dir {theirs} reason caller's" in r.stdout
    assert not (tmp_path / "ours").exists()


def test_a_folder_name_that_is_not_utf8_is_refused(tmp_path):
    """JAX takes the folder as UTF-8 text: a name with a byte 0xff made the first render a
    TypeError traceback (jax's DebugOptions); now the cache is not used, with the warning."""
    from xprc import compile_cache

    odd = tmp_path / os.fsdecode(b"jj\xff")
    assert compile_cache.private_dir(odd) == "its name is not valid UTF-8"
    assert not odd.exists()


@pytest.mark.parametrize("value", ["relcache", "./x", "", "~/c"])
def test_a_relative_or_empty_xdg_cache_home_is_ignored(value, monkeypatch):
    """The XDG spec: a relative $XDG_CACHE_HOME is invalid and ignored (it put the cache in
    whatever folder a command ran from); an absolute one is used."""
    from pathlib import Path

    from xprc import compile_cache

    monkeypatch.setenv("XDG_CACHE_HOME", value)
    assert compile_cache.default_dir() == Path.home() / ".cache" / "xprc" / "jax"
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/tmp/xdg")
    assert compile_cache.default_dir() == Path("/var/tmp/xdg/xprc/jax")


def test_the_command_line_prints_the_cache_warning_as_its_own(tmp_path):
    """The warning was raised while `import xprc` ran, before the CLI set up how it prints
    warnings: a file:line RuntimeWarning and a source line. Now held back and printed as the
    CLI prints warnings, one line."""
    env = dict(os.environ, XPRC_JAX_CACHE_DIR="/proc/self", PYTHONPATH=str(ROOT),
               XPRC_CACHE_DIR=str(tmp_path / "specs"))  # fmt: skip
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    r = subprocess.run([sys.executable, "-m", "xprc", "check", "3dgs"], env=env,
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(  # (/proc/self is a link to the process's folder)
        r"warning: xprc: JAX compilation cache not used: '/proc/self': it is a symbolic link "
        r"\(to [0-9]+\); give the folder it leads to, if that is meant; set XPRC_JAX_CACHE_DIR "
        r"to a private folder, or to 'off'",
        r.stderr.splitlines()[0],
    )
    assert "RuntimeWarning" not in r.stderr


def test_a_relative_folder_or_a_link_is_refused_and_named(tmp_path, monkeypatch):
    """XPRC_JAX_CACHE_DIR=relcache put the cache in whatever folder a command ran from (the
    compile cache refuses it too); a link, dangling or not, said 'it is not a folder' or
    'cannot create it (File exists)'."""
    from pathlib import Path

    from xprc import compile_cache

    monkeypatch.chdir(tmp_path)
    why = compile_cache.private_dir(Path("relcache"))
    assert why == "it is a relative path (the cache would follow the folder each command runs from)"
    assert not (tmp_path / "relcache").exists()
    (tmp_path / "real").mkdir(mode=0o700)
    for target in ("real", "gone"):
        (tmp_path / target[0]).symlink_to(tmp_path / target)
        assert compile_cache.private_dir(tmp_path / target[0]) == (
            f"it is a symbolic link (to {tmp_path / target}); give the folder it leads to, if "
            "that is meant"
        )
    assert not (tmp_path / "gone").exists()


def test_both_caches_judge_a_folder_alike(tmp_path, monkeypatch):
    """The JAX cache and the compile cache keep code, and use one check of their folder
    (xprc.private_folder): the same folders are refused with the same reason. The JAX cache
    followed a link above its folder that another user owns (the compile cache did not)."""
    from pathlib import Path

    from xprc import compile_cache, private_folder
    from xprc.compiler import cache

    def both(path):
        why = compile_cache.private_dir(path)
        try:
            cache._private_dir(path)
        except cache._Unusable as e:
            assert str(e) == why
        else:
            assert why is None
        return why

    monkeypatch.chdir(tmp_path)
    assert both(tmp_path / "new" / "cache") is None
    assert stat.S_IMODE(os.stat(tmp_path / "new" / "cache").st_mode) == 0o700
    (tmp_path / "shared").mkdir(mode=0o700)
    (tmp_path / "shared").chmod(0o777)
    assert both(tmp_path / "shared") == "writable by group or others (mode 0777)"
    (tmp_path / "file").write_text("")
    # (said 'cannot create it (File exists)'; hostile pass on issue 43)
    assert both(tmp_path / "file") == "it is not a folder (a file of that name is there)"
    assert both(tmp_path / "file" / "cache") == "cannot create it (Not a directory)"
    assert both(Path("relcache")).startswith("it is a relative path")
    (tmp_path / "link").symlink_to(tmp_path / "new")
    assert both(tmp_path / "link").startswith("it is a symbolic link")
    assert both(tmp_path / "link" / "cache") is None  # the user's own link above it: followed
    if os.geteuid() == 0:  # root's links are trusted: give the link to another user
        os.lchown(tmp_path / "link", 4242, 4242)
    else:  # the user's link, seen as another user's
        monkeypatch.setattr(private_folder, "euid", lambda: os.geteuid() + 1)
    owner = os.lstat(tmp_path / "link").st_uid
    assert both(tmp_path / "link" / "cache") == (
        f"{tmp_path / 'link'} is a symbolic link owned by another user (uid {owner}), who may "
        "point it elsewhere"
    )
