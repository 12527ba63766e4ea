"""The run folder: its layout (the file names below, which the trainer writes and `xprc render`,
`xprc view` and `xprc.trained` read), checked and created before any training, locked against a
second trainer, with `train.log` (what the console shows, appended on resume) and writes that
fail cleanly.

- A run folder that is a file, or lies under one, is a TrainError before the first step (it used
  to fail at the first checkpoint, after the training).
- `train.lock` holds an exclusive `flock` and the holder's pid while a trainer runs; a second
  trainer on the same folder is refused, naming the folder and that pid. The kernel releases the
  lock when its holder exits however it ends (an error, a signal, a kill); the file is removed
  by a clean exit.
- Every file the run writes goes through a temporary sibling and a rename, and an OSError
  (a full disk, a read-only folder) is a TrainError naming the file: the checkpoint written
  before it stays whole.
"""

from __future__ import annotations

import datetime
import os
import stat
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..data.files import json_object
from ..errors import DataError, XprError
from .config import TrainError

# The layout of a run folder.
CHECKPOINT = "checkpoint.npz"  # the train state: parameters, optimiser, strategy, cameras
PLY = "scene.ply"  # the scene in the 3DGS layout, for a spec that declares it (xprc.data.ply)
SPLAT = "scene.splat"  # the same, for web viewers (xprc.data.splat)
PARAMS_PLY = "params.ply"  # any other spec's parameters, self-describing (xprc.data.spec_ply)
METRICS = "metrics.json"  # the run's report: evaluations, background, spec, config
CONFIG = "config.json"  # the run's options and spec
CURVES, SHEET, RENDERS = "curves.png", "sheet.png", "renders"  # plots; renders/ a png per view
LOCK = "train.lock"
LOG = "train.log"
DEMO_DATA = "scene"  # `xprc demo`: the dataset it generated, inside its run folder

# Every name a new run replaces in its folder: it is refused where one of them exists
# (`xprc.cli.args.check_run_folder`), so it never replaces a user's file. train.log is appended
# to and train.lock taken over, so they are not here: a folder left by a run that failed or was
# killed before its first checkpoint stays usable. `xprc demo` also writes its dataset.
RUN_FILES = (CHECKPOINT, METRICS, CONFIG, PLY, CURVES, SHEET, RENDERS, SPLAT, PARAMS_PLY)
DEMO_FILES = (*RUN_FILES, DEMO_DATA)


def scene_file(run: Path) -> Path | None:
    """The file a run folder's scene is read from: its checkpoint, else its PLY; None when it
    has neither."""
    found = [run / n for n in (CHECKPOINT, PLY, PARAMS_PLY) if (run / n).is_file()]
    return found[0] if found else None


def read_report(run: Path) -> dict:
    """The run's metrics.json, or {} when there is none. A file that is there but cannot be
    read or parsed, or is not a JSON object, is a DataError naming it (it is not taken for a
    missing one: the background and spec it records would be lost without a word)."""
    path = run / METRICS
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise DataError(path, f"cannot read the run's report ({e.strerror or e})") from None
    return json_object(path, data, "run report")


def prepare(out) -> Path:
    """`out` as a Path, created with its parents; a TrainError when it is or lies under a file
    or cannot be created."""
    out = Path(out)
    above = next(p for p in (out, *out.parents) if p.exists() or p == p.parent)
    if above == out and not out.is_dir():
        raise TrainError("the run folder is an existing file, not a folder", out)
    if above != out and not above.is_dir():
        raise TrainError(f"cannot create the run folder: {above} is a file, not a folder", out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TrainError(f"cannot create the run folder ({e.strerror or e})", out) from None
    return out


def open_own_file(path: Path, flags: int, what: str) -> int:
    """A file descriptor on the regular file `path` (created if missing), opened with `flags`
    without following a symbolic link: a link left in a run folder (`train.lock` pointing at a
    user's file, say) would otherwise have that file truncated or written. A link, a FIFO, a
    folder or a device there is a TrainError naming the path."""
    link = f"{what} is a symbolic link, which is not followed; remove it"
    special = f"{what} is not a regular file; remove it"
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        mode = None  # missing: created below
    if mode is not None and stat.S_ISLNK(mode):
        raise TrainError(link, path)
    if mode is not None and not stat.S_ISREG(mode):
        raise TrainError(special, path)
    nofollow = getattr(os, "O_NOFOLLOW", 0)  # a link made after the check: still not followed
    try:
        fd = os.open(path, flags | os.O_CREAT | nofollow | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError as e:
        problem = link if path.is_symlink() else f"cannot open {what} ({e.strerror or e})"
        raise TrainError(problem, path) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TrainError(special, path)
    return fd


class Lock:
    """An exclusive lock on the run folder (`train.lock`, flock'ed, with the holder's pid)."""

    def __init__(self, out: Path) -> None:
        self.path = out / LOCK
        self.fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock (False where the platform has no flock: nothing is locked)."""
        try:
            import fcntl
        except ImportError:  # not POSIX
            return False
        while True:
            fd = open_own_file(self.path, os.O_RDWR, "the lock file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise TrainError(
                    f"the run folder is in use by another training (pid {holder}, lock file "
                    f"{LOCK}); wait for it to end, or train into another folder",
                    self.path.parent,
                ) from None
            except OSError as e:  # e.g. a file system without locks
                os.close(fd)
                raise TrainError(f"cannot lock ({e.strerror or e})", self.path) from None
            # The holder before us may have removed the file between our open and our lock:
            # the lock then guards a deleted file, so start again on the new one.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink()  # before the unlock: a waiting trainer then retries on a new file
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


class TrainLog:
    """Messages of a run: to the console (stderr, through tqdm so a progress bar is not torn)
    when `progress` or `always`, and to `train.log` in the run folder (if any), time-stamped."""

    def __init__(self, path: Path | None, progress: bool) -> None:
        self.path, self.progress = path, progress
        self._file = None
        if path is not None:
            fd = open_own_file(path, os.O_WRONLY | os.O_APPEND, "the run's log")
            self._file = os.fdopen(fd, "a", encoding="utf-8")

    def __call__(self, msg: str, always: bool = False, console: bool = True) -> None:
        if console and (self.progress or always):
            from tqdm import tqdm

            tqdm.write(msg, file=sys.stderr)
        self.file(msg)

    def file(self, msg: str) -> None:
        """Write `msg` to train.log only."""
        if self._file is None:
            return
        stamp = datetime.datetime.now().isoformat(sep=" ", timespec="seconds")
        with writing(self.path):
            for line in msg.splitlines() or [""]:
                self._file.write(f"{stamp} {line}\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@contextmanager
def writing(path: Path):
    """Turn an OSError while writing `path` into a TrainError naming it."""
    try:
        yield
    except OSError as e:
        raise TrainError(f"cannot write ({e.strerror or e})", path) from None


@contextmanager
def opened(out, progress: bool) -> Iterator[TrainLog]:
    """The run's TrainLog, its folder `out` prepared and locked for the block (None: no folder,
    the console only). Python warnings raised in the block go to train.log as well as to their
    usual place, and the error that ends a run is logged before it propagates."""
    if out is None:
        yield TrainLog(None, progress)
        return
    out = prepare(out)
    lock = Lock(out)
    locked = lock.acquire()
    try:
        log = TrainLog(out / LOG, progress)
        try:
            if not locked:
                log("no file locks on this platform: a second trainer on this folder is not "
                    "detected", always=True)  # fmt: skip
            with warnings.catch_warnings():
                shown = warnings.showwarning

                def show(message, category, filename, lineno, file=None, line=None):
                    log.file(f"warning: {category.__name__}: {message}")
                    shown(message, category, filename, lineno, file, line)

                warnings.showwarning = show
                yield log
        except XprError as e:
            log.file(str(e))
            raise
        except BaseException as e:
            log.file(f"stopped by {type(e).__name__}: {e}")
            raise
        finally:
            log.close()
    finally:
        lock.release()
