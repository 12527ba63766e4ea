"""The compile cache: where `load` and `compile_file(out=None)` keep generated modules, and
which file holds a spec's module (`module_name`: the spec's stem and a sha256 of everything the
module depends on).

A cache file is Python that `load` runs, so whoever can write one can run code as the user.
The cache is therefore private, and nothing in it runs unless this user's xprc wrote it:

- The directory ($XPRC_CACHE_DIR, default ~/.cache/xprc) is created 0700 and used only while it
  is a directory owned by the user and not writable by group or others, named by an absolute
  path that is not itself a symbolic link (nor under a link another user owns). Otherwise (and
  when it cannot be created) a RuntimeWarning names it and the process compiles into a fresh private
  temporary directory instead, removed when the process exits.
- Each file ends with a seal: HMAC-SHA256 of the module above it under a random key kept in
  the directory (`seal.key`, 0600). Someone who plants a module cannot seal it without the key;
  a file cut short, edited or planted fails the seal and is compiled again (RuntimeWarning).
- A cache file is opened once without following links and without blocking, and used only when
  it is a regular file owned by the user and not writable by group or others; anything else
  (a FIFO, a link, a directory, a foreign file) is left alone and the module is compiled into
  the temporary directory, with a RuntimeWarning naming it.
- `load` runs exactly the bytes whose seal it verified, compiled by itself: Python's import
  system, which would prefer a planted `__pycache__/*.pyc`, is never asked, and no .pyc is
  ever written.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import hmac
import os
import pathlib
import secrets
import shutil
import stat
import tempfile
import warnings
from dataclasses import dataclass

from xprc.compiler import COMPILER_VERSION, extends, parse
from xprc.compiler.output_file import write_atomic
from xprc.errors import printable
from xprc.private_folder import private_dir, unsafe

SEAL = "# xprc cache seal: hmac-sha256 "
KEY_NAME = "seal.key"
KEY_BYTES = 32
MAX_MODULE_BYTES = 256 << 20  # far above any module the node budget lets a spec make
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_OPEN_FLAGS |= getattr(os, "O_CLOEXEC", 0)


def configured_dir() -> pathlib.Path:
    """$XPRC_CACHE_DIR (a leading ~ is the home folder, as in a shell), or ~/.cache/xprc."""
    setting = os.environ.get("XPRC_CACHE_DIR")
    if setting:
        return pathlib.Path(setting).expanduser()
    return pathlib.Path.home() / ".cache" / "xprc"


@dataclass(frozen=True)
class Place:
    """A usable cache directory and its seal key."""

    dir: pathlib.Path
    key: bytes


class _Unusable(Exception):
    pass


def _open_regular(path: pathlib.Path, private: bool = False) -> int | None:
    """A descriptor of `path` if it is a trustworthy regular file; None if it does not exist;
    _Unusable (why) for a link, a FIFO, a directory or a foreign / shared file. Never blocks."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as e:
        if os.path.islink(path):
            raise _Unusable("is a symbolic link") from None
        raise _Unusable(e.strerror or str(e)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise _Unusable(kind if kind.startswith("not") else f"is {kind}")
        why = unsafe(st, private)
        if why is not None:
            raise _Unusable(why)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_fd(fd: int, limit: int) -> bytes | None:
    """At most `limit` bytes from `fd` (closed); None when there are more."""
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    return data if len(data) <= limit else None


def _key(directory: pathlib.Path) -> bytes:
    """The directory's seal key, made on first use (written whole, then linked into place, so
    a concurrent process never reads half a key)."""
    path = directory / KEY_NAME
    for _ in range(2):
        fd = _open_regular(path, private=True)
        if fd is not None:
            key = _read_fd(fd, KEY_BYTES)
            if key is None or len(key) != KEY_BYTES:
                raise _Unusable(f"{path}: not a seal key (not {KEY_BYTES} bytes)")
            return key
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".seal.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(KEY_BYTES))
            with contextlib.suppress(FileExistsError):  # another process made it first
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    raise _Unusable(f"{path}: cannot make the seal key")  # pragma: no cover


def _private_dir(directory: pathlib.Path) -> Place:
    """`directory`, created 0700 if missing, with its key; _Unusable (why) when it is not a
    private folder of this user (`xprc.private_folder.private_dir`)."""
    why = private_dir(directory)
    if why is not None:
        raise _Unusable(why)
    try:
        return Place(directory, _key(directory))
    except _Unusable as e:
        raise _Unusable(f"its seal key is unusable: {e}") from None
    except OSError as e:
        raise _Unusable(f"cannot make its seal key ({e.strerror or e})") from None


_fallback: Place | None = None


def fallback() -> Place:
    """This process's private temporary cache (0700, key in memory), removed at exit."""
    global _fallback
    if _fallback is None or not _fallback.dir.is_dir():
        d = pathlib.Path(tempfile.mkdtemp(prefix="xprc-cache-"))
        atexit.register(shutil.rmtree, d, ignore_errors=True)
        _fallback = Place(d, secrets.token_bytes(KEY_BYTES))
    return _fallback


def place() -> Place:
    """The cache to use now: the configured directory when it is private, else (with a
    RuntimeWarning saying why) this process's temporary one."""
    directory = configured_dir()
    try:
        return _private_dir(directory)
    except _Unusable as e:
        tmp = fallback()
        warnings.warn(
            f"{printable(str(directory))}: cache directory not used: {e}; compiling into {tmp.dir} "
            "(removed when this process exits)",
            RuntimeWarning,
            stacklevel=4,
        )
        return tmp


def seal(source: str, key: bytes) -> str:
    """`source` with its seal line appended."""
    source = source if source.endswith("\n") else source + "\n"
    digest = hmac.new(key, source.encode("utf-8"), hashlib.sha256).hexdigest()
    return f"{source}{SEAL}{digest}\n"


def unseal(data: bytes, key: bytes) -> str | None:
    """The module text of a sealed file's bytes, or None when the seal fails."""
    body, mark, digest = data.rpartition(SEAL.encode())
    if not mark:
        return None
    want = hmac.new(key, body, hashlib.sha256).hexdigest().encode() + b"\n"
    if not hmac.compare_digest(digest, want):
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:  # pragma: no cover - a sealed file was written as UTF-8
        return None


def lookup(where: Place, name: str) -> tuple[Place, pathlib.Path, str | None]:
    """(place, path, module text) for the cache file `name`: the text when the file is whole
    and sealed by this cache's key; None when it must be compiled (missing, or damaged: a
    RuntimeWarning). A file that is not a trustworthy regular file is never read: the
    temporary cache is used instead (RuntimeWarning naming it)."""
    target = where.dir / name
    try:
        fd = _open_regular(target)
    except _Unusable as e:
        tmp = fallback()
        warnings.warn(
            f"{target}: cache file not used: {e}; compiling into {tmp.dir} "
            "(removed when this process exits)",
            RuntimeWarning,
            stacklevel=4,
        )
        return lookup(tmp, name) if tmp is not where else (tmp, tmp.dir / name, None)
    if fd is None:
        return where, target, None
    data = _read_fd(fd, MAX_MODULE_BYTES)
    text = unseal(data, where.key) if data is not None else None
    if text is None:
        warnings.warn(
            f"{target}: damaged cache file (cut short, edited or not written by xprc); "
            "compiled again",
            RuntimeWarning,
            stacklevel=4,
        )
    return where, target, text


# ---------------------------------------------------------------------------------------------
# Which file holds a spec's module: its name carries the sha256 of everything the module
# depends on, so a changed spec, option, base spec or compiler never reuses a stale module.


def compiler_fingerprint() -> str:
    """sha256 of the compiler: its version, every module of the package and the grammar."""
    h = hashlib.sha256(COMPILER_VERSION.encode())
    here = pathlib.Path(__file__).parent
    for p in sorted(here.rglob("*.py")) + [parse.GRAMMAR_PATH]:
        h.update(p.read_bytes())
    return h.hexdigest()


def module_name(path: pathlib.Path, text: str, defines: dict) -> str:
    """The cache file name: the spec's stem (sanitised) and the sha256 of everything the
    module depends on (spec text, defines, compiler, the base specs it extends)."""
    key = hashlib.sha256()
    key.update(text.encode("utf-8"))
    key.update(repr(sorted((k, float(v)) for k, v in defines.items())).encode())
    key.update(compiler_fingerprint().encode())
    key.update(extends.fingerprint(path, text).encode())  # the base specs it extends
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)[:40] or "spec"
    return f"{stem}_{key.hexdigest()[:20]}.py"


def module_path(path: pathlib.Path, text: str, defines: dict) -> pathlib.Path:
    """Where the module of this spec is cached (in the configured directory)."""
    return configured_dir() / module_name(path, text, defines)


def cached(name: str, compile_module) -> tuple[pathlib.Path, str]:
    """(cache file, module text) for the module named `name` (module_name): the cached text
    when its seal holds, else `compile_module()`'s, sealed and written there."""
    where, target, source = lookup(place(), name)
    if source is None:
        source = seal(compile_module(), where.key)
        write_atomic(target, source, mode=0o644)
    return target, source
