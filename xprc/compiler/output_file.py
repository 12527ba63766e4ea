"""Writing a generated file (a module, a stage's dump). The output path is untrusted
(docs/input-validation.md): it may not be the spec being compiled or a base spec it extends,
an existing spec file, a directory or a special file; a file is written through a temporary
sibling and a rename, so a failure leaves no partial file."""

from __future__ import annotations

import contextlib
import os
import pathlib
import stat
import tempfile

from xprc.compiler import extends
from xprc.compiler.spec_file import read_spec
from xprc.errors import XprError


def check_output(out: pathlib.Path, keep=()) -> None:
    """Raise an XprError unless `out` can take a generated file: not one of `keep` (the spec
    being compiled) nor a base spec it extends, not an existing spec file (.xpr), not a
    directory or a special file, and under a folder, not a file."""
    out = pathlib.Path(out)
    if any(_same_file(out, pathlib.Path(k)) for k in keep):
        raise XprError(
            "refusing to overwrite the spec being compiled; choose another output file",
            filename=str(out),
        )
    for k in keep:
        if any(_same_file(out, base) for base, _ in _bases(pathlib.Path(k))):
            raise XprError(
                "refusing to overwrite a base spec of the spec being compiled (it extends "
                "it); choose another output file",
                filename=str(out),
            )
    try:
        mode = os.stat(out).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as e:
        raise XprError(f"cannot write: {e.strerror or e}", filename=str(out)) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise XprError("cannot write: is a directory", filename=str(out))
    if mode is not None and not stat.S_ISREG(mode):
        raise XprError("cannot write: not a regular file", filename=str(out))
    if mode is not None and out.suffix.lower() == ".xpr":
        raise XprError(
            "refusing to overwrite a spec file (.xpr) with generated output; choose another "
            "output file",
            filename=str(out),
        )
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise XprError(f"cannot write: {parent} is not a directory", filename=str(out))


def _bases(spec: pathlib.Path) -> list:
    """The base specs the spec file `spec` extends ([] when it cannot be read)."""
    try:
        return extends.chain(spec, read_spec(spec))
    except XprError:
        return []


def _same_file(a: pathlib.Path, b: pathlib.Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_atomic(out: pathlib.Path, source: str, keep=(), mode: int = 0o666) -> None:
    """Write `source` to `out` through a temporary sibling and a rename, with the permissions a
    new file normally gets (`mode`, 0666, less the umask). `out` is checked with `check_output`;
    failures raise an XprError naming `out` and leave no temporary file behind."""
    out = pathlib.Path(out)
    check_output(out, keep)
    tmp = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name[:40]}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, out)
        tmp = None
    except OSError as e:
        raise XprError(f"cannot write: {e.strerror or e}", filename=str(out)) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
