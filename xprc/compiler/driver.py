"""Runs the compiler's stages, in the order of the STAGES table, and loads compiled modules.

    compile_source(text, filename, defines) -> module source text
    compile_file(path, out=None, defines=None) -> Path of the written module
        (to `out`, or into the cache directory when `out` is None)
    load(path, defines=None) -> the imported module (compiled into the cache on first use)
    check_source(text, filename, defines) -> the checked spec (`xprc check`)
    emit(text, filename, stage, defines) -> one stage's dump (`xprc compile --emit STAGE`)

Each entry of STAGES is a stage's name (what `--emit` calls it), the function that makes its
output from the one before, and the dump that prints that output; a new stage is one entry. The
stages run in a worker thread with a deep stack, so deeply nested specs compile (see "Deep
specs" below). Reading spec files is spec_file.py, writing output output_file.py, the module
cache cache.py; tests/update_golden.py regenerates the golden modules.
"""

from __future__ import annotations

import hashlib
import math
import pathlib
import re
import sys
import threading
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from xprc.compiler import (
    COMPILER_VERSION,
    ast,
    cache,
    check,
    codegen,
    dumps,
    extends,
    lower,
    parse,
    simplify,
)
from xprc.compiler.output_file import check_output, write_atomic
from xprc.compiler.parse import F32_MAX
from xprc.compiler.printer import OutsideFloat32
from xprc.compiler.spec_file import read_spec
from xprc.errors import (
    DefineError,
    MissingOutputError,
    SpecError,
    SpecWarning,
    StaticError,
    XprError,
)
from xprc.resources import spec_path

__all__ = [
    "COMPILER_VERSION",
    "STAGES",
    "XprError",
    "check_output",
    "check_source",
    "compile_file",
    "compile_source",
    "emit",
    "load",
    "parse_defines",
    "read_spec",
    "run_stages",
    "write_atomic",
]


@dataclass(frozen=True)
class Job:
    """What every stage may read besides the output of the one before."""

    text: str
    filename: str
    defines: object  # as given: parse_defines reads them where the check needs them
    spec_dir: pathlib.Path  # where `extends` paths start


@dataclass(frozen=True)
class Stage:
    name: str  # as `--emit` names it
    what: str
    run: Callable  # (output of the stage before, or None for the first; Job) -> output
    dump: Callable  # output -> text


def _parse(_, job: Job) -> ast.Spec:
    return parse.parse(job.text, job.filename)


def _check(spec: ast.Spec, job: Job) -> ast.Checked:
    """Merge the `extends` chain (extends.py), then check; a spec needs a parameter."""
    spec = extends.resolve(spec, job.spec_dir)
    checked = check.check(spec, parse_defines(job.defines))
    _require_params(spec, checked)
    return checked


def _simplify(checked: ast.Checked, job: Job) -> simplify.Simplified:
    return simplify.simplify(lower.lower(checked))


def _codegen(simplified: simplify.Simplified, job: Job) -> str:
    try:
        return _generate(simplified, job)
    except OutsideFloat32 as e:
        raise StaticError(
            f"the compiled expressions hold the number {e.args[0]}, which float32 (where renders "
            "run) cannot hold: the compiler combines constants the spec multiplies or adds "
            "together (x * 1e20 * 1e20 becomes 1e40 * x); keep such products within float32's "
            f"range (|x| <= {F32_MAX:.7g})",
            filename=job.filename,
        ) from None


def _generate(simplified: simplify.Simplified, job: Job) -> str:
    return codegen.generate(
        simplified,
        spec_name=pathlib.Path(job.filename).name,
        spec_sha256=spec_digest(job.text, job.spec_dir / pathlib.Path(job.filename).name),
        version=COMPILER_VERSION,
    )


STAGES = (
    Stage("ast", "parse (Lark) -> the AST, positions kept", _parse, dumps.spec),
    Stage(
        "checked",
        "merge `extends`, then check names, types and shapes -> the typed IR",
        _check,
        ast.format_ir,
    ),
    Stage(
        "sympy",
        "lower to SymPy, hoist per-primitive work, guard selects, share subexpressions",
        _simplify,
        dumps.programs,
    ),
    Stage("jax", "print the JAX module", _codegen, str),
)
STAGE_NAMES = tuple(s.name for s in STAGES)


def run_stages(text: str, filename: str = "<input>", defines=None, spec_dir=None, until="jax"):
    """{stage name: output} of the stages up to `until`, in order (on a deep stack).
    `spec_dir`: where `extends` paths start (default: the folder of `filename`)."""
    stop = STAGE_NAMES.index(until)
    job = Job(
        text,
        filename,
        defines,
        pathlib.Path(filename).parent if spec_dir is None else pathlib.Path(spec_dir),
    )

    current = {"stage": STAGES[0].name}

    def run() -> dict:
        outputs, value = {}, None
        for stage in STAGES[: stop + 1]:
            current["stage"] = stage.name
            value = outputs[stage.name] = stage.run(value, job)
        return outputs

    outputs = _deep(run, filename=filename, stage=lambda: current["stage"])
    if "checked" in outputs:
        _warn_unused(outputs["checked"], job)
    return outputs


def _warn_unused(checked: ast.Checked, job: Job) -> None:
    """Each of the checked spec's warnings as a SpecWarning at its line (the base spec's for
    an item it declares)."""
    for message, loc, line in checked.warnings:
        warnings.warn(
            SpecWarning(message, filename=loc.file or job.filename, line=loc.line,
                        column=loc.column, source_line=line),  # fmt: skip
            stacklevel=3,
        )


def _require_params(spec: ast.Spec, checked: ast.Checked) -> None:
    """A primitive without parameters has no per-primitive arrays to render (nor an N)."""
    if checked.params:
        return
    prim = next((item for item in spec.items if isinstance(item, ast.Primitive)), None)
    loc = prim.loc if prim is not None else ast.Loc(1, 1)
    raise MissingOutputError(
        "the spec declares no 'param' (at least one per-primitive parameter is needed)",
        filename=spec.filename,
        line=loc.line,
        column=loc.column,
        source_line=spec.source_line(loc.line),
    )


def check_source(text: str, filename: str = "<input>", defines=None, spec_dir=None) -> ast.Checked:
    """Parse and check only (`xprc check`); raises an XprError for any mistake in the spec."""
    return run_stages(text, filename, defines, spec_dir, until="checked")["checked"]


def compile_source(text: str, filename: str = "<input>", defines=None, spec_dir=None) -> str:
    """Spec text -> generated module source (raises an XprError for any mistake in the spec)."""
    return run_stages(text, filename, defines, spec_dir)["jax"]


def emit(text: str, filename: str, stage: str, defines=None) -> str:
    """The dump of one stage's output (a name in STAGE_NAMES: 'ast', 'checked' the typed IR,
    'sympy' the simplified programs, 'jax' the module)."""
    entry = STAGES[STAGE_NAMES.index(stage)]
    output = run_stages(text, filename, defines, until=stage)[stage]
    return _deep(entry.dump, output, filename=filename)


def compile_file(path, out=None, defines=None) -> pathlib.Path:
    """Compile the spec at `path`; write the module to `out` (default: the cache); return it.
    `out` may not be the spec itself, a directory or a special file (XprError)."""
    path = spec_path(path)  # a path, or a shipped spec's name
    text = read_spec(path)
    if out is None:
        return _cached(path, text, defines)[0]
    out = pathlib.Path(out)
    check_output(out, keep=(path,))
    write_atomic(out, compile_source(text, path.name, defines, path.parent), keep=(path,))
    return out


def load(path, defines=None):
    """Compile (cached) and import the spec at `path`; returns the generated module."""
    path = spec_path(path)  # a path, or a shipped spec's name
    text = read_spec(path)
    name = cache.module_name(path, text, parse_defines(defines))
    mod_name = "xprc_generated_" + name.removesuffix(".py").rsplit("_", 1)[-1]
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    target, source = _cached(path, text, defines, name)
    module = types.ModuleType(mod_name, None)
    module.__file__ = str(target)
    sys.modules[mod_name] = module
    try:
        # The very text whose seal was checked (or that was just compiled), compiled here: the
        # import system would prefer a planted __pycache__/*.pyc. Python's own compiler
        # recurses over the module too: compile and run it on the deep stack.
        code = _deep(_compile_module, source, str(target), filename=str(path))
        _deep(exec, code, module.__dict__, filename=str(path))
    except BaseException:
        del sys.modules[mod_name]
        raise
    module.SPEC_PATH = str(path)  # where the spec was loaded from (located trainer errors)
    return module


def _cached(path: pathlib.Path, text: str, defines, name: str | None = None):
    """(cache file, module text) for this spec (cache.py: where, and what is trusted)."""
    name = name or cache.module_name(path, text, parse_defines(defines))
    return cache.cached(name, lambda: compile_source(text, path.name, defines, path.parent))


def _compile_module(source: str, filename: str):
    return compile(source, filename, "exec", dont_inherit=True)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def legacy_digest(path) -> str | None:
    """The SPEC_SHA256 xprc recorded before it hashed base specs (2026-12-06): the sha256 of the
    text of the spec at `path` alone, for a spec that `extends` one (None: no such spec or file;
    for a spec without bases the two digests are the same). Runs of that time still match."""
    try:
        text = read_spec(path)
    except XprError:
        return None
    return _sha(text) if extends.chain(path, text) else None


def spec_digest(text: str, path) -> str:
    """The SPEC_SHA256 a compiled module records: sha256 of the spec's text, and of the text of
    every base spec it `extends` (nearest first), so editing a base changes it too (a trained
    run then refuses the edited spec). A spec that extends nothing: the sha256 of its text."""
    bases = extends.chain(path, text)
    if not bases:
        return _sha(text)
    h = hashlib.sha256(text.encode("utf-8"))
    for _, base_text in bases:
        h.update(b"\0extends\0" + base_text.encode("utf-8"))
    return h.hexdigest()


# unambiguous (no two ways to match a digit), so matching takes linear time on any input
_DEFINE_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


def parse_defines(defines) -> dict[str, float | int]:
    """`{"eps2d": "0.1"}` or `["eps2d=0.1"]` -> `{"eps2d": 0.1}`; bad values raise DefineError."""
    if defines is None:
        return {}
    items = []
    if isinstance(defines, dict):
        items = list(defines.items())
    else:
        for d in defines:
            if not isinstance(d, str) or "=" not in d:
                raise DefineError(f"-D expects NAME=VALUE, got '{d}'", filename="<command line>")
            name, value = d.split("=", 1)
            twice = [v for n, v in items if n == name.strip()]
            if twice:  # (the last one won, without a word)
                raise DefineError(
                    f"-D {name.strip()} is given twice ({twice[0]}, {value.strip()}): give it once",
                    filename="<command line>",
                )
            items.append((name.strip(), value.strip()))
    out: dict[str, float | int] = {}
    for name, value in items:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise DefineError(
                f"-D {name}: value must be a number, got {value!r}", filename="<command line>"
            )
        text = None  # the value as typed, when it is text
        too_large = DefineError(
            f"-D {name}: value too large (beyond the float64 range)", filename="<command line>"
        )
        if isinstance(value, str):
            text = value
            digits = value.lstrip("+-")
            if digits.isdigit() and len(digits.lstrip("0")) > parse.MAX_INT_DIGITS:
                raise too_large  # int() refuses past 4300 digits, float() overflows sooner
            try:  # (leading zeros stripped: int() refuses more than 4300 digits, zeros too)
                sign, significant = value[: len(value) - len(digits)], digits.lstrip("0") or "0"
                value = int(sign + significant) if digits.isdigit() else float(value)
            except ValueError:
                raise DefineError(
                    f"-D {name}: value must be a number, got '{value}'", filename="<command line>"
                ) from None
        try:
            float(value)
        except OverflowError:
            raise too_large from None
        if isinstance(value, float) and not math.isfinite(value):
            raise DefineError(
                f"-D {name}: value must be a finite number, got {value}", filename="<command line>"
            )
        if text is not None and not _DEFINE_NUMBER.fullmatch(text.strip()):  # Python's int() and
            raise DefineError(  # float() also read 1_0 as 10, and non-ASCII digits
                f"-D {name}: value must be a decimal number such as 2, 0.5 or 1e-3, got "
                f"{ascii(text)}",
                filename="<command line>",
            )
        becomes = parse.float32_becomes(value, text.strip() if text is not None else None)
        if becomes is not None:  # the same test as the spec's own numbers (parse.py)
            shown = text.strip() if text is not None else repr(value)
            raise DefineError(
                f"-D {name}: " + parse.outside_float32(ascii(shown), becomes),
                filename="<command line>",
            )
        out[name] = value
    return out


# ---------------------------------------------------------------------------------------------
# Deep specs: the stages recurse over expression trees, and an unrolled loop of dependent steps
# (`s = s * 2`, 1024 times) is as deep as a 1024-term expression. So the stages run in a worker
# thread with a large stack and a raised recursion limit; parse.py rejects (located) nesting
# deeper than parse.MAX_DEPTH and the checker's node budget bounds what loops can build.

_STACK_BYTES = 1 << 30  # address space: only the pages a compile touches are committed
_RECURSION_LIMIT = 100_000
_deep_lock = threading.Lock()
_deep_state = threading.local()
SLOW_NOTICE_S = 60.0  # shipped specs compile in seconds


def _slow_notice(filename: str | None, stage: Callable[[], str] | None) -> None:
    """One line on stderr: a compile that takes minutes is not mistaken for a hang (or is
    reported as one, with the stage it is in)."""
    where = ascii(str(filename)) if filename is not None else "the spec"
    doing = f" (stage: {stage()})" if stage is not None else ""
    print(
        f"xprc: still compiling {where}{doing} after {SLOW_NOTICE_S:.0f} s; large matrix "
        "products or long chains of selects take longest",
        file=sys.stderr,
        flush=True,
    )


def _deep(fn, *args, filename: str | None = None, stage: Callable[[], str] | None = None):
    """fn(*args) in a worker thread with a deep stack; its result, or its exception re-raised
    here. A RecursionError that still happens becomes a SpecError, never a traceback. A compile
    still running after SLOW_NOTICE_S says so on stderr, naming the spec and `stage()`."""
    if getattr(_deep_state, "inside", False):
        return fn(*args)
    box: dict = {}

    def work() -> None:
        _deep_state.inside = True
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001  (re-raised in the caller's thread)
            box["error"] = e

    with _deep_lock:
        old_size, old_limit = threading.stack_size(), sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))  # before the worker runs
        try:
            threading.stack_size(_STACK_BYTES)
            try:
                worker = threading.Thread(target=work, name="xprc-compiler", daemon=True)
                worker.start()
            finally:
                threading.stack_size(old_size)
            worker.join(SLOW_NOTICE_S)
            if worker.is_alive():
                _slow_notice(filename, stage)
                worker.join()
        finally:
            sys.setrecursionlimit(old_limit)
    if "error" in box:
        error = box.pop("error")
        if isinstance(error, RecursionError):
            raise SpecError(
                "spec is too deeply nested to compile (expressions or dependent loop steps "
                "tens of thousands deep); split it into smaller steps",
                filename=filename,
            ) from None
        raise error
    return box["value"]
