"""PLY files that name the spec they were trained with, and the self-describing PLY of any
spec's parameters.

xprc writes its records as header comments (ASCII, one a line) and reads them back as untrusted
input: a comment that starts with the word `xprc` must be exactly one of these, else the file is
refused (a `DataError` naming it); other tools' comments are left alone.

    comment xprc spec NAME sha256 HEX    the spec's primitive name and SPEC_SHA256 (HEX '-':
                                         a module without a spec text)
    comment xprc layout params           the self-describing layout below
    comment xprc param NAME SHAPE        one per parameter, in order: SHAPE 'scalar', or its
                                         sizes, '3' or '16x3'

The self-describing layout (`save_params_ply`) stores each parameter's raw (pre-activation)
float32 values as vertex properties NAME (a scalar) or NAME_0 .. NAME_{k-1} (flattened row
major); the `param` comments give the names and shapes back (`load_scene_ply`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import plyfile

from ..conventions import NAME_PATTERN, is_name
from ..errors import DataError, printable, warn_data
from .files import write_atomic
from .ply import _numeric, _read_ply, _vertex, gaussians_of

_SHA256 = r"[0-9a-f]{64}"
_SPEC = re.compile(rf"xprc spec ({NAME_PATTERN}) sha256 ({_SHA256}|-)")
_SIZE = r"[1-9][0-9]{0,3}"
_PARAM = re.compile(rf"xprc param ({NAME_PATTERN}) (scalar|{_SIZE}(?:x{_SIZE}){{0,2}})")
_OURS = re.compile(r"xprc(?![A-Za-z0-9_])")  # 'xprc ...' and 'xprc' + a symbol; not 'xprcfoo'
LAYOUT = "xprc layout params"
MAX_COMPONENTS = 4096  # per parameter: a mat64 (the language's largest) has 4096
MAX_PARAMS = 256


@dataclasses.dataclass(frozen=True)
class PlySpec:
    """The spec a PLY names: primitive name and sha256 ('' when the module had no spec)."""

    name: str
    sha256: str


def unnameable(name: str, sha256: str) -> str | None:
    """Why a PLY header cannot name the spec `name` with `sha256` (a module's NAME and
    SPEC_SHA256), or None where it can: a compiled module's are a spec's name and a sha256 hex
    (or ''); a hand-written module may hold anything there."""
    if not is_name(name):
        return f"the method's NAME '{printable(name[:40])}' is not an identifier"
    if re.fullmatch(f"({_SHA256})?", sha256) is None:
        return f"the method's SPEC_SHA256 '{printable(sha256[:40])}' is not a sha256"
    return None


def spec_comments(name: str, sha256: str) -> list[str]:
    """The header comment that names a spec (`name` must be a spec's primitive name)."""
    if unnameable(name, sha256) is not None:
        raise ValueError(f"not a spec's name and sha256: {name!r} {sha256!r}")
    return [f"xprc spec {name} sha256 {sha256 or '-'}"]


def shape_text(shape: tuple) -> str:
    return "x".join(str(int(d)) for d in shape) if shape else "scalar"


def property_names(name: str, shape: tuple) -> list[str]:
    """The vertex properties of one parameter: NAME for a scalar, else NAME_0 .. NAME_{k-1}."""
    size = math.prod(shape)
    return [name] if not shape else [f"{name}_{i}" for i in range(size)]


def read_comments(path: Path, comments) -> tuple[PlySpec | None, list | None]:
    """(the spec the comments name or None, [(param name, shape)] for the self-describing
    layout or None): each `xprc` comment checked, anything malformed a DataError."""
    spec, params, layout = None, [], False
    for text in comments:
        if not _OURS.match(text):  # another tool's comment
            continue
        shown = printable(text[:80]) + ("..." if len(text) > 80 else "")
        if (m := _SPEC.fullmatch(text)) is not None:
            if spec is not None:
                raise DataError(path, "two 'xprc spec' comments in the PLY header")
            spec = PlySpec(m[1], "" if m[2] == "-" else m[2])
        elif (m := _PARAM.fullmatch(text)) is not None:
            shape = () if m[2] == "scalar" else tuple(int(d) for d in m[2].split("x"))
            if math.prod(shape) > MAX_COMPONENTS or len(params) >= MAX_PARAMS:
                raise DataError(path, f"PLY header comment '{shown}': more than {MAX_COMPONENTS}"
                                f" components or {MAX_PARAMS} parameters")  # fmt: skip
            if any(n == m[1] for n, _ in params):
                raise DataError(path, f"parameter '{m[1]}' is described twice in the PLY header")
            params.append((m[1], shape))
        elif text == LAYOUT:
            layout = True
        else:
            raise DataError(
                path,
                f"unrecognised PLY header comment '{shown}' (xprc writes 'xprc spec NAME sha256 "
                "HEX', 'xprc layout params' and 'xprc param NAME SHAPE')",
            )
    if layout != bool(params):
        raise DataError(
            path,
            "the PLY header has 'xprc layout params' without any 'xprc param' comment"
            if layout
            else "the PLY header has 'xprc param' comments without 'xprc layout params'",
        )
    return spec, (params if layout else None)


def save_params_ply(path, params: Mapping, param_specs, comments=()) -> None:
    """Write any spec's raw parameters (`params` {name: [N, *shape]}, every entry of
    `param_specs` (name, shape) in its order) as a self-describing PLY."""
    path = Path(path)
    specs = [(p.name, tuple(p.shape)) for p in param_specs]
    first = np.asarray(params[specs[0][0]]) if specs else None
    n = first.shape[0] if first is not None and first.ndim else 0
    columns: list[tuple[str, np.ndarray]] = []
    lines = [*comments, LAYOUT]
    for name, shape in specs:
        arr = np.asarray(params[name], np.float32)
        if arr.shape != (n, *shape):
            raise DataError(path, f"cannot save: {name} has shape {list(arr.shape)}, want "
                            f"{[n, *shape]}")  # fmt: skip
        flat = arr.reshape(n, -1)
        columns += [(p, flat[:, i]) for i, p in enumerate(property_names(name, shape))]
        lines.append(f"xprc param {name} {shape_text(shape)}")
    names = [c for c, _ in columns]
    clash = sorted({c for c in names if names.count(c) > 1})
    if clash:  # e.g. a vec2 'a' (a_0, a_1) beside a scalar 'a_0'
        raise DataError(path, f"cannot save: parameters give the property name "
                        f"{', '.join(clash)} twice")  # fmt: skip
    data = np.empty(n, dtype=[(c, "<f4") for c in names])
    for c, col in columns:
        data[c] = col
    ply = plyfile.PlyData(
        [plyfile.PlyElement.describe(data, "vertex")], byte_order="<", comments=lines
    )
    write_atomic(path, ply.write)


def _described(path: Path, v: np.ndarray, params: list) -> dict[str, np.ndarray]:
    """The parameters of a self-describing PLY's vertex element `v`."""
    n = len(v)
    if n == 0:
        raise DataError(path, "no primitives: the 'vertex' element is empty")
    have = list(v.dtype.names or ())
    out = {}
    for name, shape in params:
        props = property_names(name, shape)
        missing = [p for p in props if p not in have]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise DataError(path, f"parameter '{name}' ({shape_text(shape)}) lacks the vertex "
                            f"property {missing[0]}{more}")  # fmt: skip
        cols = [_numeric(path, v, p).astype(np.float32) for p in props]
        arr = np.stack(cols, axis=1).reshape((n, *shape))
        bad = ~np.isfinite(arr.reshape(n, -1))
        if bad.any():
            row, col = np.argwhere(bad)[0]
            raise DataError(path, f"non-finite value in property '{props[col]}' (vertex {row})")
        out[name] = arr
    known = {p for name, shape in params for p in property_names(name, shape)}
    ignored = [p for p in have if p not in known]
    if ignored:
        shown = ", ".join(printable(p) for p in ignored[:10]) + ", ..." * (len(ignored) > 10)
        warn_data(path, f"ignored {len(ignored)} vertex properties its 'xprc param' comments "
                  f"do not describe: {shown}")  # fmt: skip
    return out


def load_scene_ply(path) -> tuple[dict[str, np.ndarray], PlySpec | None, str]:
    """A PLY scene -> (raw parameters, the spec its header names or None, its layout: '3dgs'
    (keys `GAUSSIAN_KEYS`, as `load_ply`) or 'params' (keys the spec's parameter names))."""
    path = Path(path)
    ply = _read_ply(path)
    spec, params = read_comments(path, ply.comments)
    v = _vertex(path, ply)
    if params is None:
        return gaussians_of(path, v), spec, "3dgs"
    return _described(path, v, params), spec, "params"
