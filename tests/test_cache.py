"""The compile cache is private and sealed (xprc/compiler/cache.py): a module or bytecode planted
in it never runs, a directory or file others could write is not used, and a FIFO at a cache path
does not hang `load` (issue 26, items 1 and 2)."""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import pathlib
import re
import stat
import sys
import threading

import pytest

from xprc import private_folder
from xprc.compiler import cache, driver

SPEC = """# {tag}
primitive G
param a : scalar
projection {{ emit centre = [0, 0], depth = 1, radius = 1, valid = true }}
response {{ alpha = 0.5 }}
color = a
"""

PAYLOAD = "import pathlib\npathlib.Path({flag!r}).write_text('ran')\nNAME = 'planted'\n"


@pytest.fixture
def env(tmp_path, monkeypatch, request):
    """A spec with text unique to the test, a cache directory under tmp_path, the flag file a
    payload writes, and no generated module of the spec imported yet."""
    monkeypatch.setenv("XPRC_CACHE_DIR", str(tmp_path / "cache"))
    spec = tmp_path / "spec.xpr"
    text = SPEC.format(tag=request.node.name)
    spec.write_text(text)
    name = cache.module_name(spec, text, {})
    mod_name = "xprc_generated_" + name.removesuffix(".py").rsplit("_", 1)[-1]
    sys.modules.pop(mod_name, None)
    yield spec, tmp_path / "cache" / name, tmp_path / "PWNED"
    sys.modules.pop(mod_name, None)


def _forget(target):
    sys.modules.pop("xprc_generated_" + target.stem.rsplit("_", 1)[-1], None)


def _warning(record) -> str:
    (w,) = record
    return str(w.message)


def _fallback_re() -> str:
    return r"compiling into \S+xprc-cache-\w+ \(removed when this process exits\)$"


# ---------------------------------------------------------------------------------------------
# Nothing planted runs


def test_planted_pyc_is_not_executed(env):
    """A .pyc planted in __pycache__ beside a cache file, with the file's mtime and size in its
    header, is what the import system runs instead of the file; `load` never asks it."""
    spec, target, flag = env
    driver.compile_file(spec)
    st = os.stat(target)
    code = compile(PAYLOAD.format(flag=str(flag)), str(target), "exec")
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
    header += (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    pyc = pathlib.Path(importlib.util.cache_from_source(str(target)))
    pyc.parent.mkdir()
    pyc.write_bytes(header + marshal.dumps(code))

    # positive control: importing the cache file the usual way runs the planted bytecode
    ispec = importlib.util.spec_from_file_location("xprc_cache_control", target)
    ispec.loader.exec_module(importlib.util.module_from_spec(ispec))
    assert flag.read_text() == "ran"
    flag.unlink()

    module = driver.load(spec)
    assert module.NAME == "G" and not flag.exists()


def test_load_writes_no_bytecode(env):
    spec, target, _ = env
    driver.load(spec)
    assert sorted(p.name for p in target.parent.iterdir()) == [cache.KEY_NAME, target.name]


@pytest.mark.parametrize("sealing", ["sha256", "other_key", "none"])
def test_planted_module_with_a_bad_seal_is_not_executed(sealing, env):
    """A module planted at the cache path, sealed the old way (a plain SHA-256 anyone can
    recompute), with another key, or not at all: compiled again with a warning, never run."""
    spec, target, flag = env
    driver.compile_file(spec)
    body = PAYLOAD.format(flag=str(flag))
    planted = {
        "sha256": f"{body}# xprc cache seal: sha256 {hashlib.sha256(body.encode()).hexdigest()}\n",
        "other_key": cache.seal(body, b"k" * cache.KEY_BYTES),
        "none": body,
    }[sealing]
    whole = target.read_bytes()
    target.write_text(planted)
    with pytest.warns(RuntimeWarning) as record:
        module = driver.load(spec)
    assert _warning(record) == (
        f"{target}: damaged cache file (cut short, edited or not written by xprc); compiled again"
    )
    assert module.NAME == "G" and not flag.exists()
    assert target.read_bytes() == whole


# ---------------------------------------------------------------------------------------------
# The directory


def test_new_cache_dir_and_key_are_private(env):
    spec, target, _ = env
    old = os.umask(0o022)
    try:
        driver.load(spec)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(target.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(target.parent / cache.KEY_NAME).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644


def test_cache_dir_writable_by_others_is_not_used(env):
    """Anyone could have put a module and a key of their own in it: neither is read."""
    spec, target, flag = env
    target.parent.mkdir()
    target.parent.chmod(0o777)
    key = b"x" * cache.KEY_BYTES
    (target.parent / cache.KEY_NAME).write_bytes(key)
    (target.parent / cache.KEY_NAME).chmod(0o600)
    target.write_text(cache.seal(PAYLOAD.format(flag=str(flag)), key))
    with pytest.warns(RuntimeWarning) as record:
        module = driver.load(spec)
    assert re.fullmatch(
        re.escape(f"{target.parent}: cache directory not used: writable by group or others "
                  "(mode 0777); ") + _fallback_re(),
        _warning(record),
    )  # fmt: skip
    assert module.NAME == "G" and not flag.exists()
    assert not module.__file__.startswith(str(target.parent))


def test_cache_dir_of_another_user_is_not_used(env, monkeypatch):
    spec, target, _ = env
    target.parent.mkdir(mode=0o700)
    owner = os.stat(target.parent).st_uid
    monkeypatch.setattr(private_folder, "euid", lambda: owner + 1)
    with pytest.warns(RuntimeWarning) as record:
        path = driver.compile_file(spec)
    assert re.fullmatch(
        re.escape(f"{target.parent}: cache directory not used: owned by another user "
                  f"(uid {owner}); ") + _fallback_re(),
        _warning(record),
    )  # fmt: skip
    assert path.name == target.name and path.parent == cache.fallback().dir
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert list(target.parent.iterdir()) == []


def test_cache_dir_that_is_a_file_is_not_used(env):
    """(It said 'cannot create it (File exists)', as if something else were in the way.)"""
    spec, target, _ = env
    target.parent.write_text("not a folder")
    with pytest.warns(RuntimeWarning) as record:
        assert driver.load(spec).NAME == "G"
    assert re.fullmatch(
        re.escape(
            f"{target.parent}: cache directory not used: it is not a folder (a file of that "
            "name is there); "
        )
        + _fallback_re(),
        _warning(record),
    )


def test_seal_key_readable_by_others_is_not_used(env):
    spec, target, _ = env
    driver.compile_file(spec)
    key = target.parent / cache.KEY_NAME
    key.chmod(0o644)
    _forget(target)
    with pytest.warns(RuntimeWarning) as record:
        assert driver.load(spec).NAME == "G"
    assert re.fullmatch(
        re.escape(f"{target.parent}: cache directory not used: its seal key is unusable: "
                  "readable or writable by group or others (mode 0644); ") + _fallback_re(),
        _warning(record),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Files at a cache path that are not the user's regular files


def _load_within(spec, seconds=120):
    box = {}

    def run():
        try:
            with pytest.warns(RuntimeWarning) as record:
                box["module"] = driver.load(spec)
            box["record"] = record
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "load hung"
    if "error" in box:
        raise box["error"]
    return box["module"], _warning(box["record"])


def test_fifo_at_the_cache_path_does_not_hang(env):
    """Reading a FIFO blocks until someone writes to it: load used to hang there forever."""
    spec, target, _ = env
    target.parent.mkdir(mode=0o700)
    os.mkfifo(target, 0o600)
    module, message = _load_within(spec)
    assert re.fullmatch(
        re.escape(f"{target}: cache file not used: not a regular file; ") + _fallback_re(), message
    )
    assert module.NAME == "G" and stat.S_ISFIFO(os.lstat(target).st_mode)


@pytest.mark.parametrize("kind", ["symlink", "group_writable", "directory"])
def test_untrusted_file_at_the_cache_path_is_not_used(kind, env, tmp_path):
    spec, target, flag = env
    driver.compile_file(spec)
    key = (target.parent / cache.KEY_NAME).read_bytes()
    planted = cache.seal(PAYLOAD.format(flag=str(flag)), key)  # even sealed: not read
    target.unlink()
    _forget(target)
    if kind == "symlink":
        (tmp_path / "elsewhere.py").write_text(planted)
        target.symlink_to(tmp_path / "elsewhere.py")
        why = "is a symbolic link"
    elif kind == "group_writable":
        target.write_text(planted)
        target.chmod(0o664)
        why = "writable by group or others (mode 0664)"
    else:
        target.mkdir()
        why = "is a directory"
    module, message = _load_within(spec)
    assert re.fullmatch(
        re.escape(f"{target}: cache file not used: {why}; ") + _fallback_re(), message
    )
    assert module.NAME == "G" and not flag.exists()


def test_cache_dir_setting_expands_the_home_folder(monkeypatch, tmp_path):
    """XPRC_CACHE_DIR='~/xc' made a folder literally named '~' in the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XPRC_CACHE_DIR", "~/xc")
    assert cache.configured_dir() == tmp_path / "xc"


def test_cache_dir_that_is_a_symbolic_link_is_not_used(env, tmp_path):
    """XPRC_CACHE_DIR naming a link was followed: with a link to /, seal.key and a module were
    written into / (the JAX cache refuses such a link). Now nothing is written where it leads."""
    spec, target, _ = env
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    target.parent.symlink_to(elsewhere)
    with pytest.warns(RuntimeWarning) as record:
        path = driver.compile_file(spec)
    assert re.fullmatch(
        re.escape(f"{target.parent}: cache directory not used: it is a symbolic link "
                  f"(to {elsewhere}); give the folder it leads to, if that is meant; ")
        + _fallback_re(),
        _warning(record),
    )  # fmt: skip
    assert path.parent == cache.fallback().dir
    assert list(elsewhere.iterdir()) == []
    target.parent.unlink()  # a dangling link: the same, and nothing is made where it points
    target.parent.symlink_to(tmp_path / "missing")
    with pytest.warns(RuntimeWarning, match="it is a symbolic link"):
        driver.compile_file(spec)
    assert not (tmp_path / "missing").exists()


def test_cache_dir_under_a_link_of_another_user_is_not_used(env, tmp_path, monkeypatch):
    """A link above the folder that another user owns can be pointed elsewhere by them at any
    time; the user's own link (~/.cache -> /data/cache) is followed."""
    spec, _, _ = env
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "link").symlink_to(data)
    monkeypatch.setenv("XPRC_CACHE_DIR", str(tmp_path / "link" / "cache"))
    path = driver.compile_file(spec)  # the user's own link: used, without a warning
    assert path.parent == tmp_path / "link" / "cache" and (data / "cache" / path.name).is_file()
    if os.geteuid() == 0:  # root's links are trusted: give the link to another user
        os.lchown(tmp_path / "link", 4242, 4242)
    else:  # the user's link, seen as another user's
        monkeypatch.setattr(private_folder, "euid", lambda: os.geteuid() + 1)
    owner = os.lstat(tmp_path / "link").st_uid
    with pytest.warns(RuntimeWarning) as record:
        driver.compile_file(spec)
    assert re.fullmatch(
        re.escape(f"{tmp_path / 'link' / 'cache'}: cache directory not used: "
                  f"{tmp_path / 'link'} is a symbolic link owned by another user (uid {owner}), "
                  "who may point it elsewhere; ") + _fallback_re(),
        _warning(record),
    )  # fmt: skip


def test_relative_cache_dir_is_not_used(env, tmp_path, monkeypatch):
    """A relative XPRC_CACHE_DIR made a cache folder in whatever folder a command ran from."""
    spec, _, _ = env
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XPRC_CACHE_DIR", "relcache")
    with pytest.warns(RuntimeWarning) as record:
        path = driver.compile_file(spec)
    assert re.fullmatch(
        re.escape("relcache: cache directory not used: it is a relative path (the cache would "
                  "follow the folder each command runs from); ") + _fallback_re(),
        _warning(record),
    )  # fmt: skip
    assert path.parent == cache.fallback().dir and not (tmp_path / "relcache").exists()
