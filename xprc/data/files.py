"""Files: a regular file or a DataError (`require_file`), a JSON object or a DataError
(`json_object`), and the one atomic writer (`write_atomic`) every file xprc writes goes through
(PLYs, checkpoints, a run's outputs)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
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


def _unique_keys(pairs: list) -> dict:
    """A JSON object whose keys differ (json keeps the last of two without a word)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {twice!r} appears twice in one object")
    return out


def json_object(path: Path, data: bytes, what: str) -> dict:
    """The JSON object in `data`, the bytes of `path` (UTF-8, a leading BOM allowed). A
    DataError naming `path` when they are not UTF-8 or not JSON, nest too deeply, hold a key
    twice in one object or an integer of more than 4300 digits, or are not an object
    ('invalid `what`: the top level must be a JSON object')."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(path, "invalid JSON: not UTF-8 text") from None
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise DataError(path, "invalid JSON: nested too deeply") from None
    except json.JSONDecodeError as e:
        raise DataError(
            path, f"invalid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        ) from None
    except ValueError as e:  # a key twice; an integer of more than 4300 digits
        raise DataError(path, f"invalid JSON: {e}") from None
    if not isinstance(value, dict):
        raise DataError(path, f"invalid {what}: the top level must be a JSON object")
    return value


def temporary_path(path: Path) -> Path:
    """Where `write_atomic` writes before the rename: `NAME.tmp` beside `path`."""
    return path.with_name(path.name + ".tmp")


def write_atomic(path: Path, write: Callable) -> None:
    """`write(f)` into the temporary sibling opened for binary writing, then fsync it, rename it
    to `path` and fsync the folder: an interrupt, a kill or a power cut leaves the old file or
    the new one, never half of one. The temporary file is removed on any error, which
    propagates (an OSError for a full disk), and the file it would have replaced is kept."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
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
