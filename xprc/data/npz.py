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
from typing import NamedTuple

import numpy as np

from ..errors import DataError
from ..memory import physical_memory, size_text
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


class Header(NamedTuple):
    """An `.npz` entry as its `.npy` header declares it, read before any of its data."""

    shape: tuple
    dtype: np.dtype
    nbytes: int  # the data it declares


def _npz_headers(path: Path, raw: bytes, noun: str) -> dict[str, Header]:
    """{array name: Header} of every `.npy` entry, from the headers alone: np.load allocates
    the shape an entry's header declares before reading its data, so each entry must hold the
    bytes it declares, and a compressed one cannot claim more than deflate can produce.
    Entries this cannot read are left to np.load's own errors."""
    fmt = np.lib.format
    # (3.0 is 2.0 with a UTF-8 header, for structured dtypes' field names: read as 2.0, a
    # number's header is ASCII; skipped, its declared size went unchecked into np.load)
    readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0,
               (3, 0): fmt.read_array_header_2_0}  # fmt: skip
    headers = {}
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
            headers[info.filename.removesuffix(".npy")] = Header(tuple(shape), dtype, declared)
    return headers


def _check_fits(path: Path, headers: dict[str, Header], archive_size: int, noun: str) -> None:
    """The entries' data, once read, must fit this machine's memory (a 4.7 MB archive of
    deflated zeros can declare gigabytes)."""
    total = sum(h.nbytes for h in headers.values())
    memory = physical_memory()
    if memory is not None and total > memory:
        raise DataError(path, f"the {noun}'s entries declare {size_text(total)} of data (the "
                        f"file is {size_text(archive_size)}), more than the "
                        f"{size_text(memory)} this machine has")  # fmt: skip


def read_npz(
    path: Path, noun: str = "checkpoint", kind: str = "an xprc checkpoint", check=None
) -> dict:
    """Every array of an .npz archive {name: array}, without pickles; a damaged archive, or one
    whose entries declare more data than they hold or than this machine's memory, is a
    DataError (`truncated or corrupt {noun} (...)`), another file `not {kind} (not an .npz
    archive)`. check(headers): called with {name: Header} before any data is read (it raises
    a DataError for entries the caller cannot use)."""
    require_file(path)
    raw = path.read_bytes()
    if not raw.startswith(b"PK"):  # np.load would read a .npy, or a pickle's error
        raise DataError(path, f"not {kind} (not an .npz archive)")
    try:
        headers = _npz_headers(path, raw, noun)
        _check_fits(path, headers, len(raw), noun)
        if check is not None:
            check(headers)
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except _ZIP_ERRORS as e:
        raise DataError(path, f"truncated or corrupt {noun} ({e})") from None


def _numbers(dtype: np.dtype) -> bool:
    return dtype.kind in "biuf"


def _params_of(headers: dict[str, Header]) -> dict[str, Header]:
    """The parameter entries: `params/NAME` of a trainer's checkpoint, else the flat ones."""
    nested = {k[len("params/") :]: h for k, h in headers.items() if k.startswith("params/")}
    if nested:
        return nested
    return {k: h for k, h in headers.items() if _SEP not in k and k != _META_KEY}


def _check_checkpoint_headers(path: Path, headers: dict[str, Header], expect) -> None:
    """Before any data is read: the caller's own `expect(headers)`, if any (it knows the
    shapes, and says it more precisely), and metadata that is bytes (of JSON)."""
    if expect is not None:
        expect(headers)
    meta = headers.get(_META_KEY)
    if meta is not None and (meta.dtype != np.uint8 or len(meta.shape) != 1):
        raise DataError(path, f"corrupt checkpoint: its metadata entry is {_shown(meta)}, not "
                        "bytes of JSON")  # fmt: skip


def check_scene_headers(path: Path, headers: dict[str, Header]) -> None:
    """What a checkpoint read as a scene (`xprc.trained.load_trained`) must declare, as
    `load_checkpoint`'s `expect`: numbers in every entry, and one primitive count for every
    parameter (and the trainer's `state/used`), so that a header declaring (2^28, 4) beside
    parameters of 1,000 rows is refused before gigabytes are read."""
    params = _params_of(headers)
    for name, h in params.items():  # (as `pipeline.params.not_numbers` says it after a read)
        if not _numbers(h.dtype):
            raise DataError(path, f"parameter '{name}' holds {h.dtype}, not real numbers")
    for name, h in headers.items():
        if name != _META_KEY and not _numbers(h.dtype):
            raise DataError(path, f"checkpoint entry '{name}' holds {h.dtype}, not real "
                            "numbers")  # fmt: skip
    rows = {k: h.shape[0] for k, h in params.items() if h.shape}
    scalar = [k for k, h in params.items() if not h.shape]
    if scalar:
        raise DataError(path, f"checkpoint parameter '{scalar[0]}' is a single number; a "
                        "parameter has one row per primitive")  # fmt: skip
    used = headers.get("state/used")
    if used is not None and used.shape and rows:
        rows["state/used"] = used.shape[0]
    if len(set(rows.values())) > 1:
        order = sorted(rows.items(), key=lambda kv: kv[1])
        (a, n), (b, m) = order[0], order[-1]
        raise DataError(path, f"checkpoint entries disagree on the number of primitives: "
                        f"'{b}' declares {m:,} rows, '{a}' {n:,}")  # fmt: skip


def _shown(h: Header) -> str:
    return f"{h.dtype.name if _numbers(h.dtype) else h.dtype.str}{list(h.shape)}"


def load_checkpoint(path, expect=None) -> tuple[dict, dict]:
    """Read a checkpoint written by `save_checkpoint` -> (params, meta); nesting is restored.
    The entries' headers are checked before any data is read (`_check_checkpoint_headers`);
    expect(headers {name: Header}): the caller's own check of them, also before any data."""
    path = Path(path)
    arrays = read_npz(path, check=lambda h: _check_checkpoint_headers(path, h, expect))
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
