"""A trained scene as `xprc render` and `xprc view` read it: its raw parameters, the background
it was trained on, and the spec it was trained with.

A scene is a run folder (its checkpoint.npz, else scene.ply), the trainer's checkpoint or a 3DGS
PLY. The trainer records the spec as the compiled module's `NAME` and `SPEC_SHA256` (the sha256
of the spec's text and of the bases it extends) in the checkpoint's metadata and in the run's
metrics.json; `scene_method` renders with that spec unless told otherwise, and never silently
with another.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
from pathlib import Path

import numpy as np

from .data.npz import check_scene_headers, load_checkpoint
from .errors import DataError, printable
from .method_info import MethodInfo
from .pipeline.params import not_numbers
from .train.checkpoint import CONSTANT_KEY, check_meta
from .train.folder import CHECKPOINT, METRICS, PLY, read_report, scene_file


@dataclasses.dataclass(frozen=True)
class SpecRecord:
    """The spec a scene was trained with: the primitive's name and the sha256 of the spec's
    text ('' when the method had none); `where` is the file that records it."""

    name: str
    sha256: str
    where: Path
    path: str | None = None  # where the spec file was when the run trained (absolute)

    def describe(self) -> str:
        return describe_spec(self.name, self.sha256)


@dataclasses.dataclass
class Trained:
    """A trained scene: raw parameters, the background it was trained on (None: unknown)."""

    params: dict
    background: tuple[float, ...] | None
    source: Path  # the file the parameters came from
    run_dir: Path | None  # the run folder, when the file sits in one
    spec: SpecRecord | None = None  # None: nothing recorded (a bare PLY, a plain checkpoint)
    constants: ConstantsRecord | None = None  # the -D constants it was trained with
    layout: str = "params"  # "3dgs": a 3DGS PLY's keys (GAUSSIAN_KEYS); else the spec's names
    # The run's checkpoint metadata (of the checkpoint read, or for a run's PLY its run folder's
    # checkpoint.npz); None: none (a bare PLY). `xprc eval` checks its split against it.
    meta: dict | None = None


@dataclasses.dataclass(frozen=True)
class ConstantsRecord:
    """The spec's constants a run was trained with, -D overrides applied ({name: float}, as
    `xprc.train.checkpoint.run_inputs` records them for the resume check); `where` is the
    checkpoint that records them."""

    values: dict
    where: Path


def describe_spec(name: str, sha256: str) -> str:
    return f"'{name}' (sha256 {sha256[:12] + '...' if sha256 else 'not recorded'})"


def load_trained(path, train_views=None) -> Trained:
    """A run folder, the trainer's checkpoint (.npz) or a 3DGS PLY -> `Trained`.

    The background is the one the run recorded (checkpoint metadata or metrics.json); a run that
    recorded none (it inferred it from the data) gets it re-inferred from `train_views` the way
    the trainer does.
    """
    from .data.spec_ply import load_scene_ply

    path = Path(path)
    if path.is_dir():
        found = scene_file(path)
        if found is None:
            raise DataError(path, f"not a run folder: no {CHECKPOINT} or {PLY} in it")
        path = found
    meta: dict = {}
    ply_spec, layout = None, "params"
    if path.suffix.lower() == ".ply":
        params, ply_spec, layout = load_scene_ply(path)
    else:
        tree, meta = load_checkpoint(path, expect=lambda h: check_scene_headers(path, h))
        if not isinstance(meta, dict):
            check_meta(meta, path)  # the trainer's message for metadata that is not an object
        # The trainer's checkpoint nests {params, opt, state}; a plain one is flat.
        params = tree["params"] if isinstance(tree.get("params"), dict) else tree
        for name, value in params.items():
            problem = not_numbers(name, value) or _not_finite(name, value)
            if problem:
                raise DataError(path, problem)
    run_dir = path.parent if (path.parent / METRICS).is_file() else None
    report = read_report(run_dir) if run_dir is not None else {}
    background, where = meta.get("background"), path
    if background is None and run_dir is not None:
        background, where = _run_background(report, train_views), run_dir / METRICS
    spec = _spec_record(meta, path) or (_spec_record(report, run_dir / METRICS) if report else None)
    if ply_spec is not None:  # the PLY's own header names its spec (its run's path kept)
        same = spec is not None and (spec.name, spec.sha256) == (ply_spec.name, ply_spec.sha256)
        spec = SpecRecord(ply_spec.name, ply_spec.sha256, path, spec.path if same else None)
    background = None if background is None else _checked_background(background, where)
    constants = _constants_record(meta, path)
    recorded = meta if path.suffix.lower() != ".ply" else None
    if constants is None and run_dir is not None and path.suffix.lower() == ".ply":
        # a run's PLY: its checkpoint records the constants (and what the run trained on)
        ckpt = run_dir / CHECKPOINT
        if ckpt.is_file():
            meta = load_checkpoint(ckpt, expect=lambda h: check_scene_headers(ckpt, h))[1]
            constants, recorded = _constants_record(meta, ckpt), meta
    recorded = recorded if isinstance(recorded, dict) else None
    return Trained(params, background, path, run_dir, spec, constants, layout, recorded)


def scene_params(trained: Trained, method) -> dict:
    """`trained.params` keyed by `method`'s parameter names: a 3DGS PLY's fields
    (means, quats, ...) go to the parameters the spec's 3DGS layout maps them to
    (`xprc.data.ply.gaussian_layout`: a spec may name them otherwise); as they are otherwise."""
    from .data.ply import gaussian_layout

    layout = gaussian_layout(MethodInfo.of(method).params) if trained.layout == "3dgs" else None
    if layout is None:
        return trained.params
    return {layout[key]: value for key, value in trained.params.items()}


def _not_finite(name: str, value) -> str | None:
    """Why a checkpoint's parameter cannot be rendered as float32 (NaN, inf, or a float64 value
    beyond float32's range, which became inf with a bare overflow warning), as a PLY's values
    are checked; None when it can."""
    arr = np.asarray(value)
    if arr.dtype.kind != "f":
        return None
    with np.errstate(over="ignore"):
        bad = ~np.isfinite(arr.astype(np.float32))
    if not bad.any():
        return None
    where = f" (primitive {int(np.argwhere(bad)[0][0])})" if arr.ndim else ""
    return (f"non-finite value in parameter '{name}'{where}: NaN, infinite, or beyond float32's "
            "range, in which renders read it")  # fmt: skip


def _constants_record(meta, where: Path) -> ConstantsRecord | None:
    """The constants recorded in checkpoint metadata `meta` (None: none recorded, as by a
    checkpoint older than the record, or one not written by the trainer)."""
    inputs = meta.get("inputs") if isinstance(meta, dict) else None
    if inputs is None:
        return None
    if not isinstance(inputs, dict):
        check_meta(meta, where)  # the trainer's message for a malformed 'inputs'
        return None
    values = {}
    for key, value in inputs.items():
        if not key.startswith(CONSTANT_KEY):
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value):
            raise DataError(
                where, f"corrupt checkpoint: recorded constant '{key}' must be a finite "
                f"number, got {ascii(value)[:60]}"
            )  # fmt: skip
        values[key.removeprefix(CONSTANT_KEY)] = float(value)
    return ConstantsRecord(values, where)


def _checked_background(value, where: Path) -> tuple[float, float, float]:
    """A recorded background: three finite numbers in [0, 1] (as `--background` must be)."""
    ok = isinstance(value, (list, tuple)) and len(value) == 3
    ok = ok and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in value)
    if not ok or not all(0.0 <= float(c) <= 1.0 for c in value):  # NaN fails the range too
        shown = ascii(value)[:80]
        raise DataError(where, f"recorded background must be [R, G, B] in [0, 1], got {shown}")
    return tuple(float(c) for c in value)


def _run_background(report: dict, train_views):
    config = report.get("config") if isinstance(report.get("config"), dict) else {}
    background = report.get("background", config.get("background"))
    if background is None and "config" in report and train_views:
        background = inferred_background(train_views)
    return background


def _spec_record(record: dict, where: Path) -> SpecRecord | None:
    name, sha = record.get("method"), record.get("spec_sha256", "")
    if name is None:
        return None
    hex_or_empty = isinstance(sha, str) and re.fullmatch(r"([0-9a-f]{64})?", sha) is not None
    if not (isinstance(name, str) and hex_or_empty):
        raise DataError(
            where, "'method' must be the spec's primitive name and 'spec_sha256' its sha256 (hex)"
        )
    path = record.get("spec_path")
    if path is not None and not (isinstance(path, str) and 0 < len(path) <= 4096
                                 and "\0" not in path and os.path.isabs(path)):  # fmt: skip
        raise DataError(where, "'spec_path' must be the absolute path of the spec file")
    return SpecRecord(name, sha, where, path)


def inferred_background(train_views) -> list[float]:
    """The background the trainer infers from a dataset (median colour where alpha is 0)."""
    from .train.data import infer_background

    return [float(c) for c in infer_background(train_views)]


# ------------------------------------------------------------------------------- its spec


def scene_method(trained: Trained, spec: str | None, defines=None):
    """The compiled spec to render `trained` with.

    spec (--spec) None: the recorded spec (found among the shipped specs by its sha256, else
    at the path the run recorded while its text is unchanged; otherwise it must be given), or
    3dgs when nothing is recorded, which a line on stderr says.
    spec given: it must be the recorded one (same sha256), else a DataError naming both.
    defines: `-D` overrides, applied to whichever spec is used. A run's recorded constants
    (`Trained.constants`) are applied too, which a line on stderr says; a -D that contradicts
    one is a DataError naming both values (`_run_constants`).
    """
    from .compiler.driver import parse_defines

    defines = parse_defines(defines)
    method, source = _spec_method(trained, spec, defines)
    return _run_constants(trained, method, source, defines)


def _spec_method(trained: Trained, spec: str | None, defines: dict):
    """(the spec's method with `defines`, what it was loaded from): `scene_method`'s spec."""
    from .compiler.driver import load
    from .resources import DEFAULT_SPEC_NAME

    rec = trained.spec
    if spec is not None:
        method = load(spec, defines=defines or None)
        if rec is not None and not _same_spec(rec, method):
            found = shipped_spec_of(rec)
            hint = (
                f"leave out --spec to use it (the shipped {found.stem})"
                if found is not None
                else "give that spec with --spec"
            )
            info = MethodInfo.of(method)
            given = describe_spec(info.name, info.spec_sha256)
            raise DataError(
                rec.where,
                f"the scene was trained with spec {rec.describe()}, but --spec {spec} is "
                f"{given}; {hint}",
            )
        _say_earlier(rec, method)
        return method, spec
    if rec is None:
        print(
            printable(
                f"note: {trained.source}: no spec recorded with the scene; rendering it as "
                f"{DEFAULT_SPEC_NAME} (--spec names another)"
            ),
            file=sys.stderr,
        )
        return load(DEFAULT_SPEC_NAME, defines=defines or None), DEFAULT_SPEC_NAME
    found = shipped_spec_of(rec)
    if found is None:
        recorded, why = _recorded_spec_file(rec)
        if recorded is not None:
            method = load(recorded, defines=defines or None)
            if not _same_spec(rec, method) or MethodInfo.of(method).name != rec.name:
                # (the file changed between its digest and its compile, or names another
                # primitive than the record)
                raise DataError(rec.where, f"the spec the run recorded, {printable(recorded)},"
                                f" is not the spec {rec.describe()} it trained with")  # fmt: skip
            print(printable(f"note: {rec.where}: rendering with the spec the run recorded, "
                            f"{recorded}"), file=sys.stderr)  # fmt: skip
            return method, recorded
        same = _shipped_named(rec.name)
        but = "but not with that sha256" if rec.sha256 else "and the record has no sha256"
        also = (f" (the shipped {same} declares primitive {rec.name} too, {but}: --spec "
                f"{same} renders with it)" if same else "")  # fmt: skip
        raise DataError(
            rec.where,
            f"the scene was trained with spec {rec.describe()}, which no shipped spec matches"
            f"{also}{why}; give its .xpr file with --spec",
        )
    method = load(found, defines=defines or None)
    _say_earlier(rec, method)
    return method, found


def _recorded_spec_file(rec: SpecRecord) -> tuple[str | None, str]:
    """(the spec file the run recorded, when its text still has the recorded sha256, else
    None; what to add to the error when it does not). The record is untrusted: the file must
    be a regular spec-sized file (`read_spec`), and it is compiled only after its digest
    matches, so nothing the record's writer did not already know is read into a message."""
    from .compiler.driver import legacy_digest, read_spec, spec_digest
    from .errors import XprError

    if not (rec.path and rec.sha256):
        return None, ""
    path = Path(rec.path)
    shown = printable(rec.path)
    try:
        text = read_spec(path)
    except XprError:
        problem = "is not there" if not os.path.lexists(path) else "cannot be read as a spec"
        return None, f" (it recorded {shown}, which {problem})"
    try:  # (errors unsaid: they would quote a file the record may have named at random)
        ours = rec.sha256 in (spec_digest(text, path), legacy_digest(path))
    except XprError:  # a base it extends is gone or unreadable, or it is no spec
        ours = False
    if not ours:
        return None, f" (it recorded {shown}, whose text has changed since)"
    return str(path), ""


def _say_earlier(rec: SpecRecord, method) -> None:
    """A note on stderr when the run was trained with an earlier version of the shipped spec."""
    said = earlier_version(rec.sha256, MethodInfo.of(method)) if rec is not None else None
    if said:
        print(printable(f"note: {rec.where}: trained with {said}"), file=sys.stderr)


def _run_constants(trained: Trained, method, source, defines: dict):
    """`method` with the constants the run was trained with: a -D that contradicts one is a
    DataError (the resume check's refusal, for a render: the scene would not look as trained);
    the recorded ones that differ from `method`'s are applied, which a note says. A run that
    records none: `method` as it is (a note says so for a run folder's scene)."""
    from .compiler.driver import load

    rec = trained.constants
    if rec is None:
        if trained.run_dir is not None:
            print(
                printable(
                    f"note: {trained.source}: the run does not record the -D constants it was "
                    "trained with; rendering with the spec's values and any -D given"
                ),
                file=sys.stderr,
            )
        return method
    have = MethodInfo.of(method).constants
    unknown = sorted(set(rec.values) - set(have))
    if unknown:
        raise DataError(
            rec.where,
            f"the run records constants the spec does not declare ({', '.join(unknown)}); "
            "give the spec it was trained with (--spec)",
        )
    contradicted = sorted(n for n in defines if n in rec.values and have[n] != rec.values[n])
    if contradicted:
        said = "; ".join(
            f"{n}={_number(rec.values[n])} in the run, -D {n}={_number(have[n])} given"
            for n in contradicted
        )
        leave = " ".join(f"-D {n}" for n in contradicted)
        raise DataError(
            rec.where,
            f"the run was trained with other constants ({said}); leave out {leave}: the "
            "run's values are used by default",
        )
    changed = {n: v for n, v in sorted(rec.values.items()) if have[n] != v}
    if not changed:
        return method
    shown = " ".join(f"-D {n}={_number(v)}" for n, v in changed.items())
    print(
        printable(f"note: {rec.where}: using the constants the run was trained with: {shown}"),
        file=sys.stderr,
    )
    return load(source, defines={**defines, **changed})


def _number(value: float) -> str:
    """A constant's value as -D takes it: 2.0 -> '2', 0.3 -> '0.3'."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)


def _same_spec(rec: SpecRecord, method) -> bool:
    info = MethodInfo.of(method)
    if rec.sha256:
        ours = rec.sha256 in (info.spec_sha256, legacy_sha(info))
        return ours or earlier_version(rec.sha256, info) is not None
    return info.name == rec.name


# SPEC_SHA256s that earlier versions of shipped specs recorded -> (the spec, what changed since,
# and why runs trained with them are still theirs). A run keeps rendering, viewing and resuming
# with the current spec, with a note that says so.
_FAR_PLANE = (
    "an earlier version of the shipped {} spec, before it culled primitives beyond "
    "camera.far (2026-12-06); the same renders while a camera keeps the default far plane, 1e10"
    " (up to float32 rounding: its 2D determinant is now computed without cancellation)"
)
_DETERMINANT = (
    "an earlier version of the shipped {} spec, before its 2D determinant was computed without "
    "cancellation (2026-12-06); the same renders up to float32 rounding, except footprints "
    "hundreds of pixels long and under a pixel wide, whose alpha it got wrong"
)
_BEFORE_FAR_PLANE = {
    "7bc98e5dd58513b73bea7f555130d9a22c908552b5f78b5da2df5d8c5b0e5f2f": "3dgs",
    "83f102e20cdf5d0d7d1a3545f9ee3c9e386094e24cd79c26330969ac63810cd7": "2dgs",
    "bf564ffbb6d12cfc4b25c8a002bb468806514b1bcf6edb86c7126b2a9802dfbc": "2dgs",  # own text
    "ab8d2dc45906e305c925952a490fa4ce00ce77e8b13480ade68149e9dd84bce9": "student_t",
    "058813f74b4e711c71b8331132959fa27a9b50149086f7893172d4c8f4debb43": "student_t",  # own text
    "32c0426deb43e43237a09bed9e7370fa35330ea284a192a88c7be2757a0dd928": "beta",
}
_BEFORE_DETERMINANT = {  # (tests/test_needles.py)
    "c95e4132cec409bc85dae01165675265759f3cdb826910f9e821ea2932a37633": "3dgs",
    "938b99aefa2d8dac7507c9eb2384fcee8c55b74d3a35688447fa980697bb6726": "student_t",
    "aa13592fca47858f9076497e70ae3d5e17dee2c144227d0e8cb465862123f874": "beta",
    "54d4bfcd5859443e055b7e82f6b5cfcac2c46293ca4be95a263d0503790eea8b": "2dgs",
}
_FACE_PAIRS = (
    "an earlier version of the shipped {} spec, before its faces were walked in opposite "
    "pairs (2026-12-06); the same chords, so the same renders up to float32 rounding"
)
_BEFORE_FACE_PAIRS = {  # (tests/earlier_specs/linprim_octahedron.xpr)
    "58881ac959de96598bbebd07634e9351874a51dfabd7e9685f69bbfc3fa5b262": "linprim_octahedron",
}
_COMMENT = (
    "an earlier version of the shipped {} spec, before a comment of it was corrected "
    "(2026-12-07); the same spec"
)
_BEFORE_COMMENT = {  # (tests/test_cli_hardening.py)
    "44d4fd7b864da8f334ac1073a01f5d23e5ed53283c1542bae990b41823882861": "ges",
}
EARLIER_SHIPPED = {**_BEFORE_FAR_PLANE, **_BEFORE_DETERMINANT, **_BEFORE_FACE_PAIRS,
                   **_BEFORE_COMMENT}  # fmt: skip
_WHY = {**dict.fromkeys(_BEFORE_FAR_PLANE, _FAR_PLANE),
        **dict.fromkeys(_BEFORE_DETERMINANT, _DETERMINANT),
        **dict.fromkeys(_BEFORE_FACE_PAIRS, _FACE_PAIRS),
        **dict.fromkeys(_BEFORE_COMMENT, _COMMENT)}  # fmt: skip


def earlier_version(sha256: str | None, info: MethodInfo) -> str | None:
    """What to say when `sha256` is an earlier version of the shipped spec whose current text
    `info` was compiled from (wherever the file lies); None otherwise."""
    from .compiler.driver import read_spec, spec_digest
    from .resources import shipped_specs

    stem = EARLIER_SHIPPED.get(sha256 or "")
    shipped = shipped_specs().get(stem) if stem else None
    if shipped is None or info.spec_sha256 != spec_digest(read_spec(shipped), shipped):
        return None
    return _WHY[sha256].format(stem)


def legacy_sha(info: MethodInfo) -> str | None:
    """What a run trained before base specs were hashed recorded for this module's spec (None:
    the same as its SPEC_SHA256, or no spec file)."""
    from .compiler.driver import legacy_digest

    return legacy_digest(info.spec_path) if info.spec_path is not None else None


def _shipped_named(name: str) -> str | None:
    """The shipped spec (its name) whose `primitive` declares `name`, or None."""
    from .compiler import ast, parse
    from .compiler.driver import read_spec
    from .resources import shipped_specs

    for spec, path in shipped_specs().items():
        items = parse.parse(read_spec(path), path.name).items
        if any(isinstance(i, ast.Primitive) and i.name == name for i in items):
            return spec
    return None


# Shipped specs whose primitives are 3D Gaussians (3dgrt_k2: the 3DGUT primitive with the
# Gaussian kernel). Which parameters fill a 3DGS PLY is decided from the spec itself
# (`xprc.data.ply.gaussian_layout`); this list only decides whether a spec in that layout is
# said to be drawn differently by 3DGS viewers: a spec does not declare what its kernel is.
GAUSSIAN_SPECS = ("3dgs", "3dgut", "3dgrt_k2")


def gaussian_spec(info: MethodInfo) -> bool:
    """Whether `info` was compiled from a shipped Gaussian spec (GAUSSIAN_SPECS, or an earlier
    version of one), which 3DGS viewers draw as it renders; a module without a spec text
    (hand-written) is taken at its word."""
    from .compiler.driver import read_spec, spec_digest
    from .resources import shipped_specs

    if not info.spec_sha256:
        return True
    if EARLIER_SHIPPED.get(info.spec_sha256) in GAUSSIAN_SPECS:
        return True
    shipped = shipped_specs()
    return any(
        stem in shipped and info.spec_sha256 == spec_digest(read_spec(shipped[stem]), shipped[stem])
        for stem in GAUSSIAN_SPECS
    )


def shipped_spec_of(rec: SpecRecord) -> Path | None:
    """The shipped spec whose text has the recorded sha256, or None."""
    from .compiler.driver import legacy_digest, read_spec, spec_digest
    from .resources import shipped_specs

    if not rec.sha256:
        return None
    if rec.sha256 in EARLIER_SHIPPED:
        return shipped_specs().get(EARLIER_SHIPPED[rec.sha256])
    for path in shipped_specs().values():
        if rec.sha256 in (spec_digest(read_spec(path), path), legacy_digest(path)):
            return path
    return None
