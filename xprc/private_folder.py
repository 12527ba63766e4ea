"""Private folders. The compile cache (`xprc.compiler.cache`) and JAX's compilation cache
(`xprc.compile_cache`) both keep files that are run as code, so whoever can write into the
folder can run code as the user: each uses its folder only when `private_dir` says it is this
user's own. One check for both.

Nothing here imports JAX or the compiler, so `import xprc` (which turns the JAX cache on) stays
light."""

from __future__ import annotations

import os
import pathlib
import stat

from .errors import printable


def euid() -> int | None:
    """This process's effective user id (None where the system has none: Windows)."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid() if geteuid is not None else None


def unsafe(st: os.stat_result, private: bool = False) -> str | None:
    """Why a file or directory with status `st` may not be trusted, or None: another owner,
    or writable by group or others (for a `private` file: any access by them)."""
    uid = euid()
    if uid is not None and st.st_uid != uid:
        return f"owned by another user (uid {st.st_uid})"
    mode = stat.S_IMODE(st.st_mode)
    if mode & (0o077 if private else 0o022):
        access = "readable or writable" if private else "writable"
        return f"{access} by group or others (mode {mode:04o})"
    return None


def path_problem(directory: pathlib.Path) -> str | None:
    """Why the path `directory` may not be used however the directory it leads to looks: it is
    relative (the cache would follow the folder each command runs from), it is itself a
    symbolic link (a link to / put seal.key and modules into /), or a folder above it is a
    symbolic link that another user (not root) owns, who may point it elsewhere at any time. A
    link of the user's own above it (~/.cache -> /data/cache) is followed."""
    if not directory.is_absolute():
        return "it is a relative path (the cache would follow the folder each command runs from)"
    try:
        st = os.lstat(directory)
    except OSError:
        st = None  # missing (made by private_dir), or a path the system refuses (reported there)
    if st is not None and stat.S_ISLNK(st.st_mode):
        try:
            target = f" (to {printable(os.readlink(directory))})"
        except OSError:  # pragma: no cover - it was a link a moment ago
            target = ""
        return f"it is a symbolic link{target}; give the folder it leads to, if that is meant"
    uid = euid()
    for parent in reversed(directory.parents):  # from the root down, '..' kept as written
        try:
            st = os.lstat(parent)
        except OSError:
            break
        if stat.S_ISLNK(st.st_mode) and uid is not None and st.st_uid not in (uid, 0):
            return (
                f"{printable(str(parent))} is a symbolic link owned by another user "
                f"(uid {st.st_uid}), who may point it elsewhere"
            )
    return None


def private_dir(directory: pathlib.Path) -> str | None:
    """Create `directory` (mode 0700, with its parents) if missing; None when it is a private
    folder of this user (owned by the user, closed to group and others' writes, reached by a
    path `path_problem` accepts), else why it is not."""
    why = path_problem(directory)
    if why is not None:
        return why
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(directory)  # (not followed: a link swapped in since is not a directory)
    except FileExistsError:  # (exist_ok covers folders only: a file, FIFO or device is there)
        return "it is not a folder (a file of that name is there)"
    except OSError as e:
        return f"cannot create it ({e.strerror or e})"
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    return unsafe(st)
