"""Native checkpoints and other `.npz` archives, read without pickles.

- `save_checkpoint` / `load_checkpoint`: any spec's raw parameters (a possibly nested dict of
  arrays) plus JSON metadata, in one `.npz` that needs no pickle to read.
- `read_npz`: every array of an `.npz` archive, its entry sizes checked before np.load
  allocates them (the garden workload is read with it too).

Every malformed or partial file raises `DataError(path, problem)`.
"""

from __future__ import annotations

import io
import json
import math
import struct
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import DataError
from .files import require_file, write_atomic

__all__ = ["load_checkpoint", "read_npz", "save_checkpoint"]

_META_KEY = "__meta__"
_SEP = "/"


def _flatten(tree: Mapping, prefix: str, out: dict, path: Path) -> None:
    for key, value in tree.items():
        if not isinstance(key, str) or not key or _SEP in key or key == _META_KEY:
            raise DataError(path, f"cannot save: bad parameter name {key!r}")
        name = prefix + key
        if isinstance(value, Mapping):
            _flatten(value, name + _SEP, out, path)
        else:
            out[name] = np.asarray(value)


def save_checkpoint(path, params: Mapping, meta: Mapping | None = None) -> None:
    """Save raw parameters of any spec plus JSON metadata (e.g. spec name, step) to `.npz`.

    params: {name: array} or nested dicts of arrays (e.g. optimiser state); dtypes and shapes
    are kept exactly. meta: anything `json.dumps` accepts. The write is atomic.
    """
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    _flatten(params, "", arrays, path)
    try:
        meta_text = json.dumps(dict(meta or {}), sort_keys=True)
    except (TypeError, ValueError) as e:
        raise DataError(path, f"cannot save: metadata is not JSON-serialisable ({e})") from None
    arrays[_META_KEY] = np.frombuffer(meta_text.encode("utf-8"), dtype=np.uint8)
    for name, arr in arrays.items():
        if arr.dtype == object:
            raise DataError(path, f"cannot save: parameter '{name}' is not a numeric array")
    write_atomic(path, lambda f: np.savez(f, **arrays))


_DEFLATE_MAX_RATIO = 1100  # deflate cannot compress more than ~1032:1
# What zipfile and np.load raise for damaged archives (encrypted or unknown compression flags
# included; found by tests/test_fuzz_data.py).
_ZIP_ERRORS = (zipfile.BadZipFile, ValueError, OSError, EOFError, RuntimeError,
               NotImplementedError, zlib.error, KeyError, struct.error, OverflowError)  # fmt: skip


def _check_npz_sizes(path: Path, raw: bytes, noun: str) -> None:
    """np.load allocates the shape an entry's header declares before reading its data: each
    entry must hold the bytes it declares, and a compressed one cannot claim more than deflate
    can produce. Archives this cannot read are left to np.load's own errors."""
    fmt = np.lib.format
    readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        for info in archive.infolist():
            if info.file_size > _DEFLATE_MAX_RATIO * info.compress_size + 4096:
                raise DataError(path, f"corrupt {noun} (entry '{info.filename}' claims "
                                f"{info.file_size} bytes from {info.compress_size})")  # fmt: skip
            with archive.open(info) as f:
                version = fmt.read_magic(f)
                if version not in readers:
                    continue
                shape, _, dtype = readers[version](f)
                declared = math.prod(shape) * dtype.itemsize
                held = info.file_size - f.tell()
            if declared > held:
                raise DataError(
                    path,
                    f"truncated or corrupt {noun} (entry '{info.filename}' declares "
                    f"{declared} bytes of data but holds {held})",
                )


def read_npz(path: Path, noun: str = "checkpoint", kind: str = "an xprc checkpoint") -> dict:
    """Every array of an .npz archive {name: array}, without pickles; a damaged archive, or one
    whose entries declare more data than they hold, is `truncated or corrupt {noun} (...)`,
    another file `not {kind} (not an .npz archive)`."""
    require_file(path)
    raw = path.read_bytes()
    if not raw.startswith(b"PK"):  # np.load would read a .npy, or a pickle's error
        raise DataError(path, f"not {kind} (not an .npz archive)")
    try:
        _check_npz_sizes(path, raw, noun)
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except _ZIP_ERRORS as e:
        raise DataError(path, f"truncated or corrupt {noun} ({e})") from None


def load_checkpoint(path) -> tuple[dict, dict]:
    """Read a checkpoint written by `save_checkpoint` -> (params, meta); nesting is restored."""
    path = Path(path)
    arrays = read_npz(path)
    if _META_KEY not in arrays:
        raise DataError(path, "not an xprc checkpoint (no metadata entry)")
    try:
        meta = json.loads(arrays.pop(_META_KEY).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(path, f"corrupt checkpoint metadata ({e})") from None
    params: dict = {}
    for name, arr in arrays.items():
        node = params
        *parents, leaf = name.split(_SEP)
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = arr
    return params, meta
