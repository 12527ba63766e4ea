"""Files: a regular file or a DataError (`require_file`), and writes that are whole or absent
(`write_atomic`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import DataError


def require_file(path: Path) -> None:
    """DataError unless `path` is a regular file. A missing file, a directory and a special
    file (a FIFO blocks its reader, /dev/zero never ends) each get their own message."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise DataError(path, "file not found") from None
    except OSError as e:
        raise DataError(path, f"cannot read: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise DataError(path, "is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise DataError(path, "not a regular file")


def write_atomic(path: Path, write) -> None:
    """Write through a temporary sibling, fsync it, rename, fsync the folder: an interrupt or a
    power cut never leaves half a file; the temporary file is removed on any error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
