"""JAX's persistent compilation cache, on by default (issue 25).

A render, a gradient or a training step is an XLA program that takes seconds to a minute to
compile (most on a TPU); with the cache a second process that runs the same program loads it
from disk instead. xprc turns the cache on when it is imported, unless:

- the caller already chose a cache (`jax_compilation_cache_dir` set, in code or through
  JAX_COMPILATION_CACHE_DIR): theirs is kept;
- XPRC_JAX_CACHE_DIR is `off` (or `0`, `none`, empty): no persistent cache.

The folder is XPRC_JAX_CACHE_DIR, else $XDG_CACHE_HOME/xprc/jax (an absolute one), else
~/.cache/xprc/jax. A cache entry is a compiled program that JAX loads and runs, so the folder
must be private: it is created with mode 0700, and one that belongs to another user or that
others may write to, a symbolic link, a path under another user's link or a relative path is
not used (a warning says so, and nothing is cached): `xprc.private_folder`, the check the compile
cache makes of its own folder.
"""

from __future__ import annotations

import os
import pathlib
import warnings

import jax

from . import private_folder

OFF = ("off", "0", "none", "")
ENV = "XPRC_JAX_CACHE_DIR"
STATE = {"dir": None, "reason": None, "pending": None}


def default_dir() -> pathlib.Path:
    """$XDG_CACHE_HOME/xprc/jax, or ~/.cache/xprc/jax where XDG_CACHE_HOME is unset, empty or
    relative (the XDG spec says to ignore a relative one: it would put the cache in whatever
    folder a command runs from)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = str(pathlib.Path.home() / ".cache")
    return pathlib.Path(base) / "xprc" / "jax"


def private_dir(path: pathlib.Path) -> str | None:
    """Create `path` (mode 0700) if needed; None when it is a private folder of this user,
    else why it is not (`xprc.private_folder.private_dir`, the compile cache's check too)."""
    try:
        str(path).encode("utf-8")  # JAX takes the folder as UTF-8 text
    except UnicodeEncodeError:
        return "its name is not valid UTF-8"
    return private_folder.private_dir(path)


def enable_default() -> str | None:
    """Turn the persistent cache on as described above; returns the folder used (or None)."""
    if jax.config.jax_compilation_cache_dir:
        STATE["dir"], STATE["reason"] = jax.config.jax_compilation_cache_dir, "caller's"
        return STATE["dir"]
    setting = os.environ.get(ENV)
    if setting is not None and setting.strip().lower() in OFF:
        STATE["reason"] = f"{ENV}={setting!r}"
        return None
    path = pathlib.Path(setting).expanduser() if setting else default_dir()
    why = private_dir(path)
    if why is not None:
        shown = ascii(str(path))
        # said at the first render or compile (`warn_pending`), not at import: the command line
        # has not yet set up how it prints warnings when `import xprc` runs this
        STATE["pending"] = (
            f"xprc: JAX compilation cache not used: {shown}: {why}; set {ENV} to a private "
            f"folder, or to 'off'"
        )
        STATE["reason"] = why
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    # Programs that compile in under 0.2 s are not worth a disk entry (the eager operations of
    # loading a scene compile in milliseconds). JAX's default, 1 s, left out the entry count
    # pass on a CPU (0.35 s): a fresh process's first garden render took 1.7 s with the cache
    # warm, 1.4 s with this threshold.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    STATE["dir"], STATE["reason"] = str(path), None
    return str(path)


def warn_pending(stacklevel: int = 3) -> None:
    """The warning `enable_default` held back (once): why the persistent cache is not used."""
    message, STATE["pending"] = STATE["pending"], None
    if message:
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
