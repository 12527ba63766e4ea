"""PLY files: 3DGS Gaussians (the original 3DGS code's layout) and coloured point clouds.

- `save_ply` / `load_ply`: Gaussians in the layout every 3DGS viewer reads: `x y z nx ny nz
  f_dc_0..2 f_rest_0..M-1 opacity scale_0..2 rot_0..3`, float32, binary little endian, with
  `M = 3 ((d+1)^2 - 1)` channel-major (all higher coefficients of R, then G, then B). Parameters
  are raw (pre-activation): log scales, opacity logits, unnormalised (w, x, y, z) quaternions.
- `save_points_ply` / `load_points_ply`: a coloured point cloud (`x y z nx ny nz red green blue`,
  the `points3d.ply` that 3DGS writes next to a Blender scene) for initialisation.

Every malformed or partial file raises `DataError(path, problem)`.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import plyfile

from ..errors import DataError, printable, warn_data
from .files import require_file, write_atomic

__all__ = [
    "GAUSSIAN_KEYS",
    "gaussian_layout",
    "load_ply",
    "load_points_ply",
    "save_ply",
    "save_points_ply",
    "sh_degree_from_rest",
]

GAUSSIAN_KEYS = ("means", "quats", "scales", "opacities", "sh")
MAX_SH_DEGREE = 10  # far above what anyone stores; bounds the degree search

_REQUIRED = (
    ["x", "y", "z"]
    + [f"f_dc_{i}" for i in range(3)]
    + ["opacity"]
    + [f"scale_{i}" for i in range(3)]
    + [f"rot_{i}" for i in range(4)]
)
_UNUSED = ("nx", "ny", "nz")  # 3DGS writes zero normals; no renderer reads them


def sh_degree_from_rest(n_rest: int) -> int | None:
    """SH degree d with `3 ((d+1)^2 - 1) == n_rest`, or None if there is none."""
    for d in range(MAX_SH_DEGREE + 1):
        if 3 * ((d + 1) ** 2 - 1) == n_rest:
            return d
    return None


# --------------------------------------------------------------------------- 3DGS PLY


def save_ply(path, params: Mapping, comments=()) -> None:
    """Write Gaussians in the standard 3DGS PLY layout.

    params (raw, numpy or jax arrays):
      means [N, 3], quats [N, 4] (w, x, y, z), scales [N, 3] (log), opacities [N] or [N, 1]
      (logit), sh [N, (d+1)^2, 3] (sh[:, 0] is the DC term).
    Values are stored as float32; normals are written as zeros. `comments`: header comment
    lines (the spec's record: `xprc.data.spec_ply.spec_comments`).
    """
    path = Path(path)
    missing = [k for k in GAUSSIAN_KEYS if k not in params]
    if missing:
        raise DataError(path, f"cannot save: missing parameters {', '.join(missing)}")
    extra = [printable(str(k)) for k in params if k not in GAUSSIAN_KEYS]
    if extra:  # (they were left out of the file without a word)
        raise DataError(
            path, f"cannot save: {', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not in "
            "the 3DGS PLY layout (means, quats, scales, opacities, sh), and a viewer would render "
            "without them; keep such a scene as a checkpoint (xprc train writes one)",
        )  # fmt: skip
    means = np.asarray(params["means"], dtype=np.float32)
    quats = np.asarray(params["quats"], dtype=np.float32)
    scales = np.asarray(params["scales"], dtype=np.float32)
    opac = np.asarray(params["opacities"], dtype=np.float32)
    sh = np.asarray(params["sh"], dtype=np.float32)
    n = means.shape[0] if means.ndim == 2 else -1
    if opac.ndim == 2 and opac.shape[1:] == (1,):
        opac = opac[:, 0]
    expected = {"means": (means, 3), "quats": (quats, 4), "scales": (scales, 3)}
    for name, (arr, width) in expected.items():
        if n < 0 or arr.shape != (n, width):
            shape = list(arr.shape)
            raise DataError(path, f"cannot save: {name} has shape {shape}, want [N, {width}]")
    if opac.shape != (n,):
        raise DataError(path, f"cannot save: opacities has shape {list(opac.shape)}, want [N]")
    n_coef = sh.shape[1] if sh.ndim == 3 else 0
    degree = round(np.sqrt(n_coef)) - 1
    if sh.ndim != 3 or sh.shape[0] != n or sh.shape[2] != 3 or (degree + 1) ** 2 != n_coef:
        raise DataError(
            path, f"cannot save: sh has shape {list(sh.shape)}, want [N, (d+1)^2, 3] with N = {n}"
        )

    rest = sh[:, 1:, :].transpose(0, 2, 1).reshape(n, -1)  # channel-major
    columns = (
        [("x", means[:, 0]), ("y", means[:, 1]), ("z", means[:, 2])]
        + [(c, np.zeros(n, np.float32)) for c in ("nx", "ny", "nz")]
        + [(f"f_dc_{i}", sh[:, 0, i]) for i in range(3)]
        + [(f"f_rest_{i}", rest[:, i]) for i in range(rest.shape[1])]
        + [("opacity", opac)]
        + [(f"scale_{i}", scales[:, i]) for i in range(3)]
        + [(f"rot_{i}", quats[:, i]) for i in range(4)]
    )
    data = np.empty(n, dtype=[(name, "<f4") for name, _ in columns])
    for name, col in columns:
        data[name] = col
    element = plyfile.PlyElement.describe(data, "vertex")
    ply = plyfile.PlyData([element], text=False, byte_order="<", comments=list(comments))
    write_atomic(path, ply.write)


_MAX_PLY_HEADER = 1 << 20  # 3DGS headers are ~2 KiB; plyfile reads a header byte by byte
_PLY_COUNT = re.compile(r"\+?[0-9]+")  # plyfile's int() also takes '4_000', ' 7', '-1'


def _ply_header(path: Path, head: bytes) -> tuple[plyfile.PlyData, int]:
    """The header at the start of `head`, parsed by plyfile's own header parser (so the checks
    here and the reader agree on every variant: CR or CRLF lines, a 'comment end_header' line,
    the 'f4' / 'float32' type names), and its length in bytes."""
    if b"end_header" not in head and len(head) == _MAX_PLY_HEADER:
        raise DataError(path, f"PLY header longer than {_MAX_PLY_HEADER} bytes (no end_header)")
    stream = io.BytesIO(head)
    try:
        header = plyfile.PlyData._parse_header(stream)
    except plyfile.PlyHeaderParseError as e:
        problem = e.message
        if problem == "early end-of-file" and stream.tell() < len(head):
            problem = "empty line"  # plyfile takes an empty header line for the end of the file
        elif problem == "early end-of-file" and len(head) == _MAX_PLY_HEADER:
            problem = f"header longer than {_MAX_PLY_HEADER} bytes"
        raise DataError(path, f"malformed PLY header: line {e.line}: {problem}") from None
    except UnicodeDecodeError:
        at = stream.tell() - 1
        line = len(head[: at + 1].splitlines())
        raise DataError(path, f"malformed PLY header: line {line}: byte {head[at]:#04x} (at "
                        f"offset {at}) is not ASCII") from None  # fmt: skip
    except ValueError as e:  # PlyElement / PlyData: two properties or elements of one name
        raise DataError(path, f"malformed PLY header: {e}") from None
    size = stream.tell()
    newline = "\r\n" if head.startswith(b"ply\r\n") else chr(head[3])
    for lineno, line in enumerate(head[:size].decode("ascii").split(newline), 1):
        words = line.split()
        if words[:1] == ["element"] and not _PLY_COUNT.fullmatch(words[2]):
            raise DataError(
                path,
                f"malformed PLY header: line {lineno}: element count {words[2]!r} is not a "
                "whole number",
            )
    return header, size


def _check_ply_body(path: Path, header: plyfile.PlyData, body: bytes | int) -> None:
    """Before plyfile allocates anything: the element counts must fit in the `body` bytes after
    the header (binary: the fixed row size, lists taken as empty; ASCII: two characters per
    value, the last newline optional), every element with rows needs a property (plyfile loops
    over 10^12 empty rows), and nothing may follow the last element (counts too small would
    drop the rest without a word). `body`: the bytes (ASCII) or their number (binary)."""
    size = body if isinstance(body, int) else len(body)
    need, exact = 0, True
    for el in header.elements:
        if el.count and not el.properties:
            raise DataError(path, f"PLY element '{el.name}' declares {el.count} rows but no "
                            "properties")  # fmt: skip
        row = 0
        for prop in el.properties:
            if header.text:
                row += 2
            elif isinstance(prop, plyfile.PlyListProperty):
                row += np.dtype(prop.list_dtype()[0]).itemsize
                exact = False
            else:
                row += np.dtype(prop.dtype()).itemsize
        if el.count * row > size - need + header.text:
            raise DataError(
                path,
                f"truncated or corrupt PLY element '{el.name}': the header declares {el.count} "
                f"rows of at least {row} bytes, but only {max(size - need, 0)} bytes follow "
                "the header",
            )
        need += el.count * row
    rows = sum(el.count for el in header.elements)
    if header.text and b"_" in body:  # Python's int() and float() read 1_0 as 10
        line = body[: body.index(b"_")].count(b"\n") + 1
        raise DataError(path, f"PLY data line {line} (after the header) holds '_': not a number")
    if header.text:  # plyfile reads one row per line
        lines = sum(1 for line in body.splitlines() if line.strip())
        extra = f"{lines - rows} lines" if lines > rows else None
    else:
        extra = f"{size - need} bytes" if exact and size > need else None
    if extra:
        raise DataError(
            path,
            f"{extra} of data follow the last PLY element (the header declares {rows} rows in "
            "all; its counts do not match the data)",
        )


def gaussian_layout(param_specs) -> dict[str, str] | None:
    """Which of a spec's parameters fill the 3DGS PLY fields, decided from what the spec
    declares (roles, kinds, shapes, activations), never from names: {GAUSSIAN_KEYS entry: the
    spec's parameter name}, or None when the spec is not a 3DGS-layout Gaussian (exactly a
    `role position` vec3 without activation, a quat with normalize (or none), a `role scale`
    vec3 with exp, a `role opacity` scalar with sigmoid and an sh(d) colour)."""
    specs = list(param_specs)

    def one(match) -> str | None:
        found = [s.name for s in specs if match(s)]
        return found[0] if len(found) == 1 else None

    def role(s) -> str | None:
        return getattr(s, "role", None)

    layout = {
        "means": one(lambda s: role(s) == "position" and tuple(s.shape) == (3,)),
        "quats": one(lambda s: s.kind == "quat" and s.activation in ("normalize", "identity")),
        "scales": one(
            lambda s: role(s) == "scale" and tuple(s.shape) == (3,) and s.activation == "exp"
        ),
        "opacities": one(
            lambda s: (
                role(s) == "opacity" and tuple(s.shape) in ((), (1,)) and s.activation == "sigmoid"
            )
        ),
        "sh": one(lambda s: s.kind == "sh" and len(s.shape) == 2 and s.shape[1] == 3),
    }
    if layout["means"] is not None:
        pos = next(s for s in specs if s.name == layout["means"])
        if pos.activation != "identity":
            return None
    if any(v is None for v in layout.values()) or len(specs) != len(layout):
        return None
    return layout


def _read_ply(path: Path) -> plyfile.PlyData:
    require_file(path)
    with open(path, "rb") as f:
        head = f.read(_MAX_PLY_HEADER)
        if head[:3] != b"ply":
            raise DataError(path, "not a PLY file (it does not start with 'ply')")
        header, size = _ply_header(path, head)
        f.seek(size)
        body = f.read() if header.text else os.fstat(f.fileno()).st_size - size
    _check_ply_body(path, header, body)
    try:  # memory-mapped: plyfile reads a binary element without lists row by row otherwise
        # an ASCII value beyond a float32 property's range is inf (an error below, naming it):
        # numpy's own 'overflow encountered in cast' warning is not printed before it
        with np.errstate(over="ignore", invalid="ignore"):
            return plyfile.PlyData.read(str(path), mmap="c")
    except plyfile.PlyHeaderParseError as e:
        raise DataError(path, f"malformed PLY header: {e.message}") from None
    except plyfile.PlyElementParseError as e:
        what = f"element '{e.element.name}'" if e.element is not None else "data"
        raise DataError(path, f"truncated or corrupt PLY {what}: {e.message}") from None
    except (ValueError, EOFError, OSError, OverflowError) as e:  # e.g. 328 for a uchar
        raise DataError(path, f"unreadable PLY: {e}") from None


def _numeric(path: Path, v: np.ndarray, name: str) -> np.ndarray:
    """One vertex property as an array of numbers (a list property is an error)."""
    arr = np.asarray(v[name])
    if not np.issubdtype(arr.dtype, np.number):
        raise DataError(path, f"property '{name}' is a list, not a number")
    if arr.dtype.itemsize > 4 and np.issubdtype(arr.dtype, np.floating):
        with np.errstate(over="ignore"):  # beyond float32: inf, reported as non-finite
            arr = arr.astype(np.float32)
    return arr


def _vertex(path: Path, ply: plyfile.PlyData) -> np.ndarray:
    if "vertex" not in ply:
        names = ", ".join(repr(el.name) for el in ply.elements) or "none"
        raise DataError(path, f"no 'vertex' element (elements: {names})")
    others = [el for el in ply.elements if el.name != "vertex" and len(el.data)]
    if others:  # a mesh's faces, say: nothing of them is read
        shown = ", ".join(f"{printable(el.name)} ({len(el.data):,})" for el in others[:5])
        warn_data(path, f"read only its 'vertex' element; ignored {shown}", stacklevel=3)
    return np.array(ply["vertex"].data)  # a copy: no memory map of the file outlives the read


def load_ply(path) -> dict[str, np.ndarray]:
    """Read a standard 3DGS PLY into raw float32 parameters.

    Returns means [N, 3], quats [N, 4] (w, x, y, z = rot_0..3), scales [N, 3] (log),
    opacities [N] (logit), sh [N, (d+1)^2, 3] with d inferred from the number of f_rest.
    Vertex properties beyond that layout (Mip-Splatting's `filter_3D`, ...) are not read: a
    RuntimeWarning names them, since the tool that wrote them renders with them.
    """
    path = Path(path)
    return gaussians_of(path, _vertex(path, _read_ply(path)))


def gaussians_of(path: Path, v: np.ndarray) -> dict[str, np.ndarray]:
    """`load_ply` of a vertex element already read (`v`, a structured array)."""
    names = set(v.dtype.names or ())
    missing = [p for p in _REQUIRED if p not in names]
    if missing:
        raise DataError(path, f"missing vertex properties: {', '.join(missing)}")
    rest_names = [p for p in names if p.startswith("f_rest_")]
    n_rest = len(rest_names)
    degree = sh_degree_from_rest(n_rest)
    if degree is None:
        raise DataError(
            path,
            f"{n_rest} f_rest properties: not 3*((d+1)^2-1) for any SH degree d "
            "(0, 9, 24, 45, ...)",
        )
    gaps = [f"f_rest_{i}" for i in range(n_rest) if f"f_rest_{i}" not in names]
    if gaps:
        raise DataError(
            path, f"f_rest properties are not numbered 0..{n_rest - 1}: missing {gaps[0]}"
        )

    def col(name: str) -> np.ndarray:
        arr = _numeric(path, v, name).astype(np.float32)
        bad = ~np.isfinite(arr)
        if bad.any():
            raise DataError(
                path, f"non-finite value in property '{name}' (vertex {int(np.argmax(bad))})"
            )
        return arr

    n = len(v)
    if n == 0:
        raise DataError(path, "no Gaussians: the 'vertex' element is empty")
    stack = lambda names_: np.stack([col(p) for p in names_], axis=1).reshape(n, len(names_))  # noqa: E731
    n_coef = (degree + 1) ** 2
    sh = np.empty((n, n_coef, 3), dtype=np.float32)
    sh[:, 0, :] = stack([f"f_dc_{i}" for i in range(3)])
    if degree > 0:
        rest = stack([f"f_rest_{i}" for i in range(n_rest)])
        sh[:, 1:, :] = rest.reshape(n, 3, n_coef - 1).transpose(0, 2, 1)
    params = {
        "means": stack(["x", "y", "z"]),
        "quats": stack([f"rot_{i}" for i in range(4)]),
        "scales": stack([f"scale_{i}" for i in range(3)]),
        "opacities": col("opacity"),
        "sh": sh,
    }
    zero = ~params["quats"].any(axis=1)
    if zero.any():  # normalize(0) is 0, whose rotation matrix is the identity
        warn_data(path, f"{int(zero.sum()):,} Gaussian(s) have an all-zero rotation quaternion "
                  f"(rot_0..rot_3, first at vertex {int(np.argmax(zero))}), which is no "
                  "rotation: they are drawn unrotated")  # fmt: skip
    known = {*_REQUIRED, *_UNUSED, *rest_names}
    ignored = [p for p in v.dtype.names if p not in known]  # in the file's order
    if ignored:
        shown = ", ".join(printable(p) for p in ignored[:10]) + ", ..." * (len(ignored) > 10)
        what = "property" if len(ignored) == 1 else "properties"
        warn_data(path, f"ignored {len(ignored)} vertex {what} outside the 3DGS layout: "
                  f"{shown} (a render may differ from the tool that wrote them)")  # fmt: skip
    return params


# --------------------------------------------------------------------------- point clouds


def save_points_ply(path, points, colors, normals=None) -> None:
    """Write a coloured point cloud: points [P, 3], colors [P, 3] in [0, 1] (stored as uint8)."""
    path = Path(path)
    points = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    colors = np.asarray(colors, dtype=np.float64).reshape(-1, 3)
    if colors.shape[0] != points.shape[0]:
        raise DataError(path, f"cannot save: {len(points)} points but {len(colors)} colours")
    normals = (
        np.zeros_like(points) if normals is None else np.asarray(normals, np.float32).reshape(-1, 3)
    )
    rgb = np.clip(np.round(colors * 255.0), 0, 255).astype(np.uint8)
    fields = [(c, "<f4") for c in ("x", "y", "z", "nx", "ny", "nz")]
    data = np.empty(len(points), dtype=fields + [(c, "u1") for c in ("red", "green", "blue")])
    for i, c in enumerate("xyz"):
        data[c] = points[:, i]
        data["n" + c] = normals[:, i]
    for i, c in enumerate(("red", "green", "blue")):
        data[c] = rgb[:, i]
    ply = plyfile.PlyData([plyfile.PlyElement.describe(data, "vertex")], byte_order="<")
    write_atomic(path, ply.write)


def load_points_ply(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a point cloud PLY -> (points [P, 3] float32, colors [P, 3] float32 in [0, 1]).

    Colours come from `red green blue` (integers in 0..255, ushort in 0..65535, or floats in
    [0, 1]; anything else is an error); grey 0.5 when absent.
    """
    path = Path(path)
    v = _vertex(path, _read_ply(path))
    names = set(v.dtype.names or ())
    missing = [p for p in ("x", "y", "z") if p not in names]
    if missing:
        raise DataError(path, f"missing vertex properties: {', '.join(missing)}")
    if len(v) == 0:
        raise DataError(path, "no points: the 'vertex' element is empty")
    points = np.stack([_numeric(path, v, c).astype(np.float32) for c in "xyz"], axis=1)
    if not np.isfinite(points).all():
        raise DataError(path, "non-finite point coordinates")
    rgb_names = ("red", "green", "blue")
    present = [c for c in rgb_names if c in names]
    if 0 < len(present) < 3:
        lacking = ", ".join(c for c in rgb_names if c not in names)
        raise DataError(path, f"point colours lack {lacking} (has {', '.join(present)})")
    if present:
        rgb = np.stack([_numeric(path, v, c) for c in rgb_names], axis=1)
        integer = np.issubdtype(rgb.dtype, np.integer)
        scale = (65535.0 if rgb.dtype == np.uint16 else 255.0) if integer else 1.0
        colors = (rgb.astype(np.float64) / scale).astype(np.float32)
        if not np.isfinite(colors).all():
            raise DataError(path, "non-finite point colours")
        bad = (colors < 0.0) | (colors > 1.0)  # e.g. float colours in 0..255
        if bad.any():
            i = int(np.argmax(bad.any(axis=1)))
            raise DataError(
                path,
                f"point colour out of range (vertex {i}: {rgb[i].tolist()}): red green blue must "
                "be integers in 0..255 (0..65535 as ushort) or floats in [0, 1]",
            )
    else:
        colors = np.full_like(points, 0.5)
    ignored = [p for p in v.dtype.names if p not in _POINT_PROPERTIES]
    if ignored:  # e.g. colours as r g b, or an alpha: read as grey or dropped, unsaid
        shown = ", ".join(printable(p) for p in ignored[:10]) + ", ..." * (len(ignored) > 10)
        what = "property" if len(ignored) == 1 else "properties"
        warn_data(path, f"ignored {len(ignored)} point {what}: {shown} (points are read from "
                  "x y z, colours from red green blue)")  # fmt: skip
    return points.reshape(-1, 3), colors.reshape(-1, 3)


# what a point cloud is read from; normals (COLMAP and 3DGS write them) are not needed
_POINT_PROPERTIES = frozenset(("x", "y", "z", "red", "green", "blue", "nx", "ny", "nz"))
