"""Stage 1: spec text -> AST (xprc.compiler.ast), with line/column on every node.

The grammar is grammar/xpr.lark at the repository root. Lark's errors become `ParseError`s that
point at the offending token.
"""

from __future__ import annotations

import functools
import math
import re

import lark
import numpy as np
from lark import Token, Transformer, v_args

from xprc.compiler import ast
from xprc.errors import ParseError
from xprc.resources import GRAMMAR_PATH  # grammar/xpr.lark (xprc/grammar in a wheel)

MAX_INT_DIGITS = 308  # 10**308 < 1.8e308, the largest float64
MAX_SIZE_DIGITS = 6  # a size or degree in a type, `sh(3)`
# Deepest nesting of the parse tree (brackets, calls, unary signs, terms of one sum...). The
# later stages recurse over it; driver.py runs them with a stack sized for this depth.
MAX_DEPTH = 2000

# float32, what renders and training run in: its largest value, and its smallest normal one.
# XLA flushes smaller (subnormal) float32 values to zero on CPU, GPU and TPU alike, so a guard
# `max(x, 1e-40)` is `max(x, 0)` once traced.
F32_MAX = float(np.finfo(np.float32).max)  # 3.4028235e38
F32_TINY = float(np.finfo(np.float32).tiny)  # 1.1754944e-38

# How tokens are named in "expected ..." messages.
_TOKEN_TEXT = {
    "NAME": "a name",
    "NUMBER": "a number",
    "COMP_OP": "a comparison",
    "$END": "end of file",
}


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    return lark.Lark(
        GRAMMAR_PATH.read_text(),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
    )


def _loc(x) -> ast.Loc:
    if isinstance(x, Token):
        return ast.Loc(x.line, x.column)
    return ast.Loc(x.line, x.column)  # lark.tree.Meta


@v_args(meta=True)
class _Build(Transformer):
    """Lark tree -> AST dataclasses."""

    # -- declarations
    def start(self, meta, items):
        return items

    def primitive(self, meta, c):
        name, _, path = c
        if path is None:
            return ast.Primitive(_loc(name), str(name))
        return ast.Primitive(_loc(name), str(name), str(path)[1:-1], _loc(path))

    def type(self, meta, c):
        name, arg = c
        if arg is not None:
            text = str(arg)
            if not text.isdigit():
                raise _Located(f"expected an integer, got '{text}'", _loc(arg))
            if len(text.lstrip("0")) > MAX_SIZE_DIGITS:  # int() refuses past 4300 digits
                raise _Located(f"number too large ({len(text)} digits)", _loc(arg))
            arg = int(text.lstrip("0") or "0")
        return ast.TypeRef(_loc(name), str(name), arg)

    def param(self, meta, c):
        name, typ, act, *clauses = c
        return ast.Param(_loc(name), str(name), typ, act, clauses)

    def param_clause(self, meta, c):
        key, value = c
        if isinstance(value, Token):  # role NAME
            value = ast.Name(_loc(value), str(value))
        return ast.ParamClause(_loc(key), str(key), value)

    def const(self, meta, c):
        return ast.Const(_loc(c[0]), str(c[0]), c[1])

    def fn(self, meta, c):
        name, *rest = c
        body = _fn_result(str(name), rest[-1])
        args = [(str(t), _loc(t)) for t in rest[:-1] if t is not None]
        return ast.Fn(_loc(name), str(name), args, body)

    def fn_body(self, meta, c):
        *stmts, result = c
        end = ast.Loc(meta.end_line, meta.end_column - 1)
        return ast.FnBody(ast.Loc(meta.line, meta.column), self.block(meta, stmts), result, end)

    def fn_assign(self, meta, c):
        """`name = e`, `v[i] = e`, `m[i][j] = e` in a function body, where the target was parsed
        as an expression: a name, or indexing of one."""
        target, value = c
        indices: list = []
        while isinstance(target, ast.Index):
            indices = target.indices + indices
            target = target.target
        if not isinstance(target, ast.Name):
            raise _Located(
                "cannot assign to this: assign to a name or to an element of one (v[i] = ...)",
                target.loc,
            )
        return ast.Assign(target.loc, target.id, indices, value)

    def fn_emit(self, meta, c):  # refused by the checker, at its place
        return ast.Emit(_loc(c[0]), str(c[0]), c[1])

    def fn_loop(self, meta, c):
        return self.loop(meta, c)

    def density(self, meta, c):
        *names, body = c
        args = [(str(a), _loc(a)) for a in names]
        body = _fn_result("density", body)
        return ast.Fn(ast.Loc(meta.line, meta.column), "density", args, body)

    def projection(self, meta, c):
        return ast.Block(ast.Loc(meta.line, meta.column), "projection", c[0])

    def response(self, meta, c):
        signed, body = c
        return ast.Block(ast.Loc(meta.line, meta.column), "response", body, signed is not None)

    def extend_projection(self, meta, c):
        return ast.Extend(ast.Loc(meta.line, meta.column), "projection", c[0])

    def extend_response(self, meta, c):
        return ast.Extend(ast.Loc(meta.line, meta.column), "response", c[0])

    def color(self, meta, c):
        return ast.Color(ast.Loc(meta.line, meta.column), c[0])

    def cameras(self, meta, c):
        keyword, *names = c
        return ast.Cameras(_loc(keyword), [(str(n), _loc(n)) for n in names])

    # -- statements
    def block(self, meta, c):
        out = []
        for s in c:
            if isinstance(s, list):  # an `emit a = .., b = ..` statement
                out.extend(s)
            elif s is not None:
                out.append(s)
        return out

    def assign(self, meta, c):
        name, *idx, value = c
        indices = [e for group in idx for e in group]
        return ast.Assign(_loc(name), str(name), indices, value)

    def emit(self, meta, c):
        return c

    def emit_item(self, meta, c):
        return ast.Emit(_loc(c[0]), str(c[0]), c[1])

    def loop(self, meta, c):
        var, start, stop, body = c
        return ast.For(_loc(var), str(var), start, stop, body)

    # -- expressions
    def args(self, meta, c):
        return list(c)

    def binop(self, meta, c):
        left, op, right = c
        loc = _loc(op)
        if str(op) == "^" and isinstance(right, ast.Name) and right.id == "T":
            return ast.Transpose(loc, left)
        return ast.Binary(loc, str(op), left, right)

    def unop(self, meta, c):
        op, x = c
        return ast.Unary(_loc(op), str(op), x)

    def call(self, meta, c):
        func, args = c
        return ast.Call(
            func.loc if not isinstance(func, ast.Attr) else func.name_loc, func, args or []
        )

    def index(self, meta, c):
        target, args = c
        return ast.Index(ast.Loc(meta.end_line, meta.end_column - 1), target, args)

    def attr(self, meta, c):
        target, name = c
        return ast.Attr(_loc(name), target, str(name), _loc(name))

    def number(self, meta, c):
        text = str(c[0])
        # Every number becomes a float somewhere (constants, SymPy, the generated literals):
        # digits beyond float range are a located error, not an OverflowError later.
        if text.isdigit() and len(text.lstrip("0")) > MAX_INT_DIGITS:
            raise _Located(f"number too large (more than {MAX_INT_DIGITS} digits)", _loc(c[0]))
        # (leading zeros stripped: int() refuses more than 4300 digits, zeros included)
        value = int(text.lstrip("0") or "0") if text.isdigit() else float(text)
        if not math.isfinite(value):
            raise _Located("number too large (beyond the float64 range)", _loc(c[0]))
        becomes = float32_becomes(value, text)
        if becomes is not None:
            raise _Located(outside_float32(f"number {text}", becomes), _loc(c[0]))
        return ast.Num(_loc(c[0]), value, text)

    def name(self, meta, c):
        return ast.Name(_loc(c[0]), str(c[0]))

    def true(self, meta, c):
        return ast.BoolLit(ast.Loc(meta.line, meta.column), True)

    def false(self, meta, c):
        return ast.BoolLit(ast.Loc(meta.line, meta.column), False)

    def listlit(self, meta, c):
        return ast.ListLit(ast.Loc(meta.line, meta.column), c[0])

    def comprehension(self, meta, c):
        body, var, start, stop = c
        return ast.Comprehension(
            ast.Loc(meta.line, meta.column), body, str(var), _loc(var), start, stop
        )


def _fn_result(name: str, body):
    """A function body with statements must end with the value it returns."""
    if not isinstance(body, ast.FnBody) or body.result is not None:
        return body
    hint = ""
    if body.stmts and isinstance(body.stmts[-1], ast.Assign):
        hint = (
            "; a new line does not end a statement, so a result that starts with '-', '+', "
            "'(' or '[' continues the assignment before it: write ';' before the result"
        )
    raise _Located(
        f"'{name}' must end with the value it returns (an expression after its statements){hint}",
        body.end,
    )


def float32_becomes(value, text: str | None = None) -> str | None:
    """What float32 makes of a finite nonzero number it cannot hold: 'inf' beyond F32_MAX, '0'
    below F32_TINY (a subnormal is flushed to zero); None for a number it holds, and for zero.
    `text`, the number as written, tells 1e-400 (already 0.0 in float64) from a written zero.
    The one test for spec literals, folded constants, inits and `-D` values."""
    try:
        x = float(value)
    except OverflowError:  # an integer past float64
        return "inf"
    nonzero = x != 0 or (
        text is not None and re.search(r"[1-9]", re.split(r"[eE]", text)[0]) is not None
    )
    if not nonzero:
        return None
    with np.errstate(over="ignore"):  # rounded as float32 reads it: 3.4028235e38 is its max
        f32 = abs(float(np.float32(x)))
    if f32 > F32_MAX:
        return "inf"
    return "0" if f32 < F32_TINY else None


def outside_float32(shown: str, becomes: str) -> str:
    """The message for a number float32 cannot hold: `shown` is how the number is named."""
    if becomes == "0":  # below the smallest normal float32: subnormal, or 0 outright
        return (
            f"{shown} is below float32's smallest normal number ({F32_TINY:.7g}; renders run in "
            "float32, and TPUs and XLA's CPU code flush smaller values to 0)"
        )
    return (
        f"{shown} is outside float32's range (renders run in float32, where it would be {becomes})"
    )


class _Located(Exception):
    def __init__(self, message: str, loc: ast.Loc) -> None:
        self.message, self.loc = message, loc


def _error(message: str, loc: ast.Loc, filename: str, source: str) -> ParseError:
    lines = ast.source_lines(source)
    line = lines[loc.line - 1] if 1 <= loc.line <= len(lines) else ""
    return ParseError(
        message, filename=filename, line=loc.line, column=loc.column, source_line=line
    )


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    return f"'{tok.value}'" if tok.value.isprintable() else repr(tok.value)


def _expected(names) -> str:
    terminals = {t.name: t for t in _parser().terminals}
    out = set()
    for n in names:
        if n in _TOKEN_TEXT:
            out.add(_TOKEN_TEXT[n])
        elif n in terminals and isinstance(terminals[n].pattern, lark.lexer.PatternStr):
            out.add(f"'{terminals[n].pattern.value}'")
    if not out or len(out) > 6:
        return ""
    return " (expected " + ", ".join(sorted(out)) + ")"


def _hint(tok: Token, expected, source: str) -> tuple[str, ast.Loc] | None:
    """A message and location that say what was meant, for mistakes other languages teach:
    an unquoted base after `extends` (`extends 3dgs`) and Python's power (`x**2`)."""
    if tok.type == "$END":
        return None
    if "STRING" in expected:  # the base spec's path after `extends`
        word = re.match(r"[^\s#;{}]*", source[tok.start_pos :]).group(0) or tok.value
        base = word if word.endswith(".xpr") else word + ".xpr"
        message = f"unexpected '{word}': the base spec is a quoted path, extends \"{base}\""
        return message, ast.Loc(tok.line, tok.column)
    before = len(source[: tok.start_pos].rstrip()) - 1  # the character before, spaces skipped
    if tok.value == "*" and before >= 0 and source[before] == "*":
        line_start = source.rfind("\n", 0, before) + 1
        loc = ast.Loc(source.count("\n", 0, before) + 1, before - line_start + 1)
        return "unexpected '**': a power is written with '^' (x^2, not x**2)", loc
    return None


def _end_loc(source: str) -> ast.Loc:
    lines = ast.source_lines(source) or [""]
    # Point just past the last non-blank line.
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip():
            text = lines[i].split("#", 1)[0].rstrip() or lines[i].rstrip()
            return ast.Loc(i + 1, len(text) + 1)
    return ast.Loc(1, 1)


def parse(source: str, filename: str = "<input>") -> ast.Spec:
    """Parse spec text; raise ParseError (with location and caret) on any syntax error."""
    try:
        tree = _parser().parse(source)
    except lark.exceptions.UnexpectedCharacters as e:
        ch = source[e.pos_in_stream] if e.pos_in_stream < len(source) else ""
        shown = f"'{ch}'" if ch.isprintable() else repr(ch)
        raise _error(
            f"unexpected character {shown}", ast.Loc(e.line, e.column), filename, source
        ) from None
    except lark.exceptions.UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            loc = _end_loc(source)
        else:
            loc = ast.Loc(tok.line, tok.column)
        if tok.type == "STRING":  # quotes belong to `extends "base.xpr"` only
            raise _error("unexpected character '\"'", loc, filename, source) from None
        hint = _hint(tok, e.expected, source)
        if hint is not None:
            raise _error(hint[0], hint[1], filename, source) from None
        raise _error(
            f"unexpected {_describe(tok)}{_expected(e.expected)}", loc, filename, source
        ) from None
    except lark.exceptions.UnexpectedEOF:
        raise _error("unexpected end of file", _end_loc(source), filename, source) from None
    _check_depth(tree, filename, source)
    try:
        items = _Build().transform(tree)
    except lark.exceptions.VisitError as e:
        if isinstance(e.orig_exc, _Located):
            raise _error(e.orig_exc.message, e.orig_exc.loc, filename, source) from None
        raise
    return ast.Spec(items, filename, source)


def _check_depth(tree: lark.Tree, filename: str, source: str) -> None:
    """A located error where the parse tree is deeper than MAX_DEPTH (walked without
    recursion, so any depth can be measured)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            meta = node.meta
            loc = ast.Loc(getattr(meta, "line", 1), getattr(meta, "column", 1))
            message = f"expression nested too deeply (more than {MAX_DEPTH} levels)"
            raise _error(message, loc, filename, source)
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, lark.Tree))
