"""Runs the stages in order and manages compiled modules.

    compile_source(text, filename, defines) -> module source text
    compile_file(path, out=None, defines=None) -> Path of the written module
        (to `out`, or into the cache directory when `out` is None)
    load(path, defines=None) -> the imported module (compiled into the cache on first use)
    check_source(text, filename, defines) -> the checked spec (`xprc check`)

The stages (and the import of a generated module) run in a worker thread with a deep stack, so
deeply nested specs compile (see "Deep specs" below). Spec files and output paths are untrusted:
only regular files are read, and `-o` may not be the spec, a directory or a special file
(docs/input-validation.md).

The cache directory is $XPRC_CACHE_DIR or ~/.cache/xprc; a module's file name carries the
sha256 of (spec text, defines, compiler version, compiler source), so a changed spec, option or
compiler never reuses a stale module. The cache is private and sealed (cache.py); `load` runs
the text whose seal it checked, compiled here, never bytecode the import system would find.

`python -m xprc.compiler.driver --update-golden [SPEC...]` rewrites tests/golden/*.py (every
existing golden file, plus the named specs) from specs/*.xpr.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import pathlib
import stat
import sys
import tempfile
import threading
import types
from dataclasses import dataclass

from xprc._version import __version__
from xprc.compiler import ast, cache, check, codegen, lower, parse, reuse, simplify
from xprc.errors import DefineError, MissingOutputError, SpecError, XprError
from xprc.resources import spec_path

COMPILER_VERSION = __version__  # the package version (xprc/_version.py)
STAGES = ("ast", "checked", "sympy", "jax")
_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


@dataclass
class Result:
    """Every stage's output, for `--emit` and for tests that start from a stage."""

    spec: ast.Spec
    checked: ast.Checked
    lowered: lower.Lowered
    simplified: simplify.Simplified
    source: str


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
            items.append((name.strip(), value.strip()))
    out: dict[str, float | int] = {}
    for name, value in items:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise DefineError(
                f"-D {name}: value must be a number, got {value!r}", filename="<command line>"
            )
        too_large = DefineError(
            f"-D {name}: value too large (beyond the float64 range)", filename="<command line>"
        )
        if isinstance(value, str):
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
        out[name] = value
    return out


def run_stages(text: str, filename: str = "<input>", defines=None, spec_dir=None) -> Result:
    """Parse -> check -> lower -> simplify -> codegen (in a worker with a deep stack).
    `spec_dir`: where `extends` paths start (default: the folder of `filename`)."""
    return _deep(_run_stages, text, filename, defines, spec_dir, filename=filename)


def _parse(text: str, filename: str, spec_dir) -> ast.Spec:
    """Parse, then merge the `extends` chain (reuse.py)."""
    spec = parse.parse(text, filename)
    base_dir = pathlib.Path(filename).parent if spec_dir is None else spec_dir
    return reuse.resolve(spec, base_dir)


def _run_stages(text: str, filename: str, defines, spec_dir=None) -> Result:
    spec = _parse(text, filename, spec_dir)
    checked = check.check(spec, parse_defines(defines))
    _require_params(spec, checked)
    lowered = lower.lower(checked)
    simplified = simplify.simplify(lowered)
    source = codegen.generate(
        simplified,
        spec_name=pathlib.Path(filename).name,
        spec_sha256=_sha(text),
        version=COMPILER_VERSION,
    )
    return Result(spec, checked, lowered, simplified, source)


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

    def run():
        spec = _parse(text, filename, spec_dir)
        checked = check.check(spec, parse_defines(defines))
        _require_params(spec, checked)
        return checked

    return _deep(run, filename=filename)


def compile_source(text: str, filename: str = "<input>", defines=None, spec_dir=None) -> str:
    """Spec text -> generated module source (raises an XprError for any mistake in the spec)."""
    return run_stages(text, filename, defines, spec_dir).source


def emit(text: str, filename: str, stage: str, defines=None) -> str:
    """The text of one stage: 'ast', 'checked' (the typed IR), 'sympy' (the simplified
    programs) or 'jax'."""
    if stage == "ast":

        def dump():
            return "\n".join(_dump(item) for item in parse.parse(text, filename).items) + "\n"

        return _deep(dump, filename=filename)
    if stage == "checked":
        return ast.format_ir(check_source(text, filename, defines))
    result = run_stages(text, filename, defines)
    if stage == "jax":
        return result.source
    return _dump_programs(result.simplified)


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
    name = _cache_name(path, text, parse_defines(defines))
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


def _compile_module(source: str, filename: str):
    return compile(source, filename, "exec", dont_inherit=True)


# ---------------------------------------------------------------------------------------------
# Deep specs: the stages recurse over expression trees, and an unrolled loop of dependent steps
# (`s = s * 2`, 1024 times) is as deep as a 1024-term expression. So the stages run in a worker
# thread with a large stack and a raised recursion limit; parse.py rejects (located) nesting
# deeper than parse.MAX_DEPTH and the checker's node budget bounds what loops can build.

_STACK_BYTES = 1 << 30  # address space: only the pages a compile touches are committed
_RECURSION_LIMIT = 100_000
_deep_lock = threading.Lock()
_deep_state = threading.local()


def _deep(fn, *args, filename: str | None = None):
    """fn(*args) in a worker thread with a deep stack; its result, or its exception re-raised
    here. A RecursionError that still happens becomes a SpecError, never a traceback."""
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


# ---------------------------------------------------------------------------------------------
# Files: the spec path and the output path are untrusted (special files, directories, the spec
# itself given as the output).

MAX_SPEC_BYTES = 1 << 20  # the shipped specs are under 8 KiB


class _Refused(Exception):
    pass


def read_spec(path: pathlib.Path) -> str:
    """The text of the spec at `path`. Only a regular file of at most MAX_SPEC_BYTES is read
    (a FIFO would block, /dev/zero never ends); anything else raises an XprError."""
    path = pathlib.Path(path)
    too_big = f"larger than {MAX_SPEC_BYTES // 1024} KiB"
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise _Refused("is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise _Refused("not a regular file")
        if st.st_size > MAX_SPEC_BYTES:
            raise _Refused(too_big)
        with open(path, "rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
        if len(data) > MAX_SPEC_BYTES:
            raise _Refused(too_big)
        return data.decode("utf-8")
    except OSError as e:
        problem = e.strerror or str(e)
    except (UnicodeDecodeError, _Refused) as e:
        problem = str(e)
    raise XprError(f"cannot read spec: {problem}", filename=str(path))


def check_output(out: pathlib.Path, keep=()) -> None:
    """Raise an XprError unless `out` can take a generated file: not one of `keep` (the spec
    being compiled) nor a base spec it extends, not an existing spec file (.xpr), not a
    directory or a special file, and under a folder, not a file."""
    out = pathlib.Path(out)
    if any(_same_file(out, pathlib.Path(k)) for k in keep):
        raise XprError(
            "refusing to overwrite the spec being compiled; choose another output file",
            filename=str(out),
        )
    for k in keep:
        if any(_same_file(out, base) for base, _ in _bases(pathlib.Path(k))):
            raise XprError(
                "refusing to overwrite a base spec of the spec being compiled (it extends "
                "it); choose another output file",
                filename=str(out),
            )
    try:
        mode = os.stat(out).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    except OSError as e:
        raise XprError(f"cannot write: {e.strerror or e}", filename=str(out)) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise XprError("cannot write: is a directory", filename=str(out))
    if mode is not None and not stat.S_ISREG(mode):
        raise XprError("cannot write: not a regular file", filename=str(out))
    if mode is not None and out.suffix.lower() == ".xpr":
        raise XprError(
            "refusing to overwrite a spec file (.xpr) with generated output; choose another "
            "output file",
            filename=str(out),
        )
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise XprError(f"cannot write: {parent} is not a directory", filename=str(out))


def _bases(spec: pathlib.Path) -> list:
    """The base specs the spec file `spec` extends ([] when it cannot be read)."""
    try:
        return reuse.chain(spec, read_spec(spec))
    except XprError:
        return []


def _same_file(a: pathlib.Path, b: pathlib.Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_atomic(out: pathlib.Path, source: str, keep=(), mode: int = 0o666) -> None:
    """Write `source` to `out` through a temporary sibling and a rename, with the permissions a
    new file normally gets (`mode`, 0666, less the umask). `out` is checked with `check_output`;
    failures raise an XprError naming `out` and leave no temporary file behind."""
    out = pathlib.Path(out)
    check_output(out, keep)
    tmp = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name[:40]}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, out)
        tmp = None
    except OSError as e:
        raise XprError(f"cannot write: {e.strerror or e}", filename=str(out)) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _compiler_fingerprint() -> str:
    h = hashlib.sha256(COMPILER_VERSION.encode())
    for p in sorted(pathlib.Path(__file__).parent.glob("*.py")) + [parse.GRAMMAR_PATH]:
        h.update(p.read_bytes())
    return h.hexdigest()


def _cached(path: pathlib.Path, text: str, defines, name: str | None = None):
    """(cache file, module text) for this spec: the cached module when its seal holds, else
    compiled and written there (cache.py: where, and what is trusted)."""
    name = name or _cache_name(path, text, parse_defines(defines))
    where, target, source = cache.lookup(cache.place(), name)
    if source is None:
        source = cache.seal(compile_source(text, path.name, defines, path.parent), where.key)
        write_atomic(target, source, mode=0o644)
    return target, source


def cache_dir() -> pathlib.Path:
    return cache.configured_dir()


def _cache_name(path: pathlib.Path, text: str, defines: dict) -> str:
    """The cache file name: the spec's stem (sanitised) and the sha256 of everything the
    module depends on (spec text, defines, compiler, the base specs it extends)."""
    key = hashlib.sha256()
    key.update(text.encode("utf-8"))
    key.update(repr(sorted((k, float(v)) for k, v in defines.items())).encode())
    key.update(_compiler_fingerprint().encode())
    key.update(reuse.fingerprint(path, text).encode())  # the base specs it extends
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)[:40] or "spec"
    return f"{stem}_{key.hexdigest()[:20]}.py"


def _cache_path(path: pathlib.Path, text: str, defines: dict) -> pathlib.Path:
    """Where the module of this spec is cached (in the configured directory)."""
    return cache_dir() / _cache_name(path, text, defines)


def _dump(node, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(node, list):
        return "\n".join(_dump(x, indent) for x in node)
    if not hasattr(node, "__dataclass_fields__"):
        return pad + repr(node)
    fields = [(k, getattr(node, k)) for k in node.__dataclass_fields__ if k != "loc"]
    loc = getattr(node, "loc", None)
    head = f"{pad}{type(node).__name__}" + (f" @{loc.line}:{loc.column}" if loc else "")
    simple = [
        f"{k}={v!r}"
        for k, v in fields
        if not isinstance(v, (list, ast.Expr)) and not hasattr(v, "__dataclass_fields__")
    ]
    lines = [head + (" " + " ".join(simple) if simple else "")]
    for k, v in fields:
        if isinstance(v, list) and v and not all(isinstance(x, tuple) for x in v):
            lines.append(f"{pad}  {k}:")
            lines.append(_dump(v, indent + 2))
        elif isinstance(v, ast.Expr) or (
            hasattr(v, "__dataclass_fields__") and not isinstance(v, ast.Loc)
        ):
            lines.append(f"{pad}  {k}:")
            lines.append(_dump(v, indent + 2))
    return "\n".join(lines)


def _dump_programs(s: simplify.Simplified) -> str:
    out = []
    for name, prog in (("activate", s.activate), ("project", s.project), ("response", s.response)):
        out.append(f"{name}:")
        for sym in prog.inputs:
            out.append(
                f"  {sym} <- {s.inputs[sym].kind} {s.inputs[sym].name} {s.inputs[sym].index}"
            )
        for st in prog.body:
            if isinstance(st, simplify.Call):
                out.append(
                    f"  {', '.join(map(str, st.outs))} = camera.{st.method}"
                    f"({', '.join(map(str, st.args))})"
                )
            else:
                out.append(f"  {st[0]} = {st[1]}")
        for k, v in prog.outputs.items():
            out.append(f"  -> {k} = {list(v)}")
    out.append("attrs: " + ", ".join(s.attrs))
    return "\n".join(out) + "\n"


def update_golden(names=()) -> list[pathlib.Path]:
    """Regenerate tests/golden/<name>.py from specs/<name>.xpr: every golden file that exists,
    plus the specs named in `names` (stems or paths)."""
    golden = _ROOT / "tests" / "golden"
    stems = {p.stem for p in golden.glob("*.py")} | {pathlib.Path(n).stem for n in names}
    written = []
    for stem in sorted(stems):
        spec = _ROOT / "specs" / f"{stem}.xpr"
        out = golden / f"{stem}.py"
        write_atomic(out, compile_source(read_spec(spec), spec.name, spec_dir=spec.parent))
        written.append(out)
    return written


if __name__ == "__main__":
    if sys.argv[1:2] == ["--update-golden"]:
        for p in update_golden(sys.argv[2:]):
            print(f"wrote {p.relative_to(_ROOT)}")
    else:
        print("usage: python -m xprc.compiler.driver --update-golden [SPEC...]", file=sys.stderr)
        sys.exit(2)
