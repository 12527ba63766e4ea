"""Runs the stages in order and manages compiled modules.

    compile_source(text, filename, defines) -> module source text
    compile_file(path, out=None, defines=None) -> Path of the written module
        (to `out`, or into the cache directory when `out` is None)
    load(path, defines=None) -> the imported module (compiled into the cache on first use)

The cache directory is $XPRC_CACHE_DIR or ~/.cache/xprc; a module's file name carries the
sha256 of (spec text, defines, compiler version, compiler source), so a changed spec, option or
compiler never reuses a stale module. Modules are imported from their file with importlib.

`python -m xprc.compiler.driver --update-golden [SPEC...]` rewrites tests/golden/*.py (every
existing golden file, plus the named specs) from specs/*.xpr.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import pathlib
import sys
import tempfile
from dataclasses import dataclass

from xprc.compiler import ast, check, codegen, lower, parse, simplify
from xprc.errors import DefineError
from xprc.resources import spec_path

COMPILER_VERSION = "0.1.0"
STAGES = ("ast", "sympy", "jax")
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
        if isinstance(value, str):
            try:
                value = int(value) if value.lstrip("+-").isdigit() else float(value)
            except ValueError:
                raise DefineError(
                    f"-D {name}: value must be a number, got '{value}'", filename="<command line>"
                ) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise DefineError(
                f"-D {name}: value must be a finite number, got {value}", filename="<command line>"
            )
        out[name] = value
    return out


def run_stages(text: str, filename: str = "<input>", defines=None) -> Result:
    """Parse -> check -> lower -> simplify -> codegen."""
    spec = parse.parse(text, filename)
    checked = check.check(spec, parse_defines(defines))
    lowered = lower.lower(checked)
    simplified = simplify.simplify(lowered)
    source = codegen.generate(
        simplified,
        spec_name=pathlib.Path(filename).name,
        spec_sha256=_sha(text),
        version=COMPILER_VERSION,
    )
    return Result(spec, checked, lowered, simplified, source)


def compile_source(text: str, filename: str = "<input>", defines=None) -> str:
    """Spec text -> generated module source (raises an XprError for any mistake in the spec)."""
    return run_stages(text, filename, defines).source


def emit(text: str, filename: str, stage: str, defines=None) -> str:
    """The text of one stage: 'ast', 'sympy' (the simplified programs) or 'jax'."""
    if stage == "ast":
        spec = parse.parse(text, filename)
        return "\n".join(_dump(item) for item in spec.items) + "\n"
    result = run_stages(text, filename, defines)
    if stage == "jax":
        return result.source
    return _dump_programs(result.simplified)


def compile_file(path, out=None, defines=None) -> pathlib.Path:
    """Compile the spec at `path`; write the module to `out` (default: the cache); return it."""
    path = spec_path(path)  # a path, or a shipped spec's name
    text = read_spec(path)
    if out is None:
        out = _cache_path(path, text, parse_defines(defines))
        if out.exists():
            return out
    source = compile_source(text, path.name if out is None else str(path.name), defines)
    out = pathlib.Path(out)
    write_atomic(out, source)
    return out


def load(path, defines=None):
    """Compile (cached) and import the spec at `path`; returns the generated module."""
    path = spec_path(path)  # a path, or a shipped spec's name
    text = read_spec(path)
    target = _cache_path(path, text, parse_defines(defines))
    mod_name = "xprc_generated_" + target.stem.rsplit("_", 1)[-1]
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    if not target.exists():
        write_atomic(target, compile_source(text, path.name, defines))
    spec = importlib.util.spec_from_file_location(mod_name, target)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[mod_name]
        raise
    return module


# ---------------------------------------------------------------------------------------------


def read_spec(path: pathlib.Path) -> str:
    from xprc.errors import XprError

    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise XprError(
            f"cannot read spec: {e.strerror if isinstance(e, OSError) else e}", filename=str(path)
        ) from None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _compiler_fingerprint() -> str:
    h = hashlib.sha256(COMPILER_VERSION.encode())
    for p in sorted(pathlib.Path(__file__).parent.glob("*.py")) + [parse.GRAMMAR_PATH]:
        h.update(p.read_bytes())
    return h.hexdigest()


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("XPRC_CACHE_DIR") or pathlib.Path.home() / ".cache" / "xprc")


def _cache_path(path: pathlib.Path, text: str, defines: dict) -> pathlib.Path:
    key = hashlib.sha256()
    key.update(text.encode("utf-8"))
    key.update(repr(sorted((k, float(v)) for k, v in defines.items())).encode())
    key.update(_compiler_fingerprint().encode())
    stem = "".join(c if c.isalnum() else "_" for c in path.stem)[:40] or "spec"
    return cache_dir() / f"{stem}_{key.hexdigest()[:20]}.py"


def write_atomic(out: pathlib.Path, source: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(source)
    os.replace(tmp, out)


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
        write_atomic(out, compile_source(read_spec(spec), spec.name))
        written.append(out)
    return written


if __name__ == "__main__":
    if sys.argv[1:2] == ["--update-golden"]:
        for p in update_golden(sys.argv[2:]):
            print(f"wrote {p.relative_to(_ROOT)}")
    else:
        print("usage: python -m xprc.compiler.driver --update-golden [SPEC...]", file=sys.stderr)
        sys.exit(2)
