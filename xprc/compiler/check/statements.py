"""Statements for the checker: blocks, `emit` (projection outputs and the response's
per-pixel outputs), assignments (whole and indexed), static loops and indices. Part of
check.Checker (its `ctx`, `err`, `node`, `expr`, `check_name` and `components`)."""

from __future__ import annotations

from xprc.compiler import ast
from xprc.compiler.ast import ArrayT, Loc, MatT, Node, ScalarT, VecT
from xprc.compiler.check.scopes import Binding, Scope
from xprc.compiler.names import (
    MAX_LOOP,
    _is_int,
    _num,
    shown,
    suggest,
)
from xprc.errors import DuplicateError, ScopeError, StaticError, UnknownNameError, XprTypeError

FN_EMIT = "'emit' is not allowed in a function (it returns the expression after its statements)"


class StatementChecks:
    def block(self, body, scope: Scope, emits, in_loop: bool) -> None:
        for stmt in body:
            self.ctx.cur_loc = stmt.loc
            if isinstance(stmt, ast.Assign):
                self.assign(stmt, scope)
            elif isinstance(stmt, ast.Emit):
                if scope.context == "function":
                    raise self.err(ScopeError, FN_EMIT, stmt.loc)
                if emits is None:  # the response: per-pixel outputs
                    self.pixel_emit(stmt, scope, in_loop)
                    continue
                if in_loop:
                    raise self.err(ScopeError, "'emit' is not allowed inside a loop", stmt.loc)
                self.check_name(stmt.name, stmt.loc, "output")
                if stmt.name in scope.vars or stmt.name in emits:
                    first = (
                        scope.vars.get(stmt.name) or Binding("", None, emits[stmt.name][1])
                    ).loc
                    raise self.err(
                        DuplicateError,
                        f"'{stmt.name}' is already defined (line {first.line})",
                        stmt.loc,
                    )
                self._not_global(stmt.name, stmt.loc)
                value = self.expr(stmt.value, scope)
                emits[stmt.name] = (value, stmt.loc)
                scope.vars[stmt.name] = Binding("emit", value, stmt.loc)
                self.ctx.local_names.append((value, stmt.name))
            elif isinstance(stmt, ast.For):
                self.loop(stmt, scope, emits)

    def pixel_emit(self, stmt: ast.Emit, scope: Scope, in_loop: bool) -> None:
        """`emit depth = t, normal = n` in the response: per-pixel values composited with
        the same weights as the colour (their own output channels; `depth` feeds D / ED)."""
        if in_loop:
            raise self.err(ScopeError, "'emit' is not allowed inside a loop", stmt.loc)
        self.check_name(stmt.name, stmt.loc, "output")
        if stmt.name == "alpha":
            raise self.err(
                DuplicateError, "'alpha' is the response's own output: assign it", stmt.loc
            )
        first = self.ctx.pixel_outputs.get(stmt.name)
        if first is not None:
            raise self.err(
                DuplicateError,
                f"'{stmt.name}' is already emitted (line {first[1].line})",
                stmt.loc,
            )
        value = self.expr(stmt.value, scope)
        if not isinstance(value.type, (ScalarT, VecT)) or (
            stmt.name == "depth" and not isinstance(value.type, ScalarT)
        ):
            want = "scalar" if stmt.name == "depth" else "scalar or a vector"
            raise self.err(
                XprTypeError,
                f"per-pixel output '{stmt.name}' must be {want}, got {value.type}",
                stmt.value.loc,
            )
        self.ctx.pixel_outputs[stmt.name] = (value, stmt.loc)
        self.ctx.local_names.append((value, stmt.name))

    def _not_global(self, name: str, loc: Loc, params: bool = True) -> None:
        if params and name in self.ctx.params:
            raise self.err(DuplicateError, f"cannot assign to parameter '{name}'", loc)
        if name in self.ctx.consts:
            raise self.err(DuplicateError, f"cannot assign to constant '{name}'", loc)
        if name in self.ctx.fns:
            raise self.err(DuplicateError, f"'{name}' is already defined as a function", loc)

    def assign(self, stmt: ast.Assign, scope: Scope) -> None:
        name = stmt.name
        old = scope.vars.get(name)
        if old is not None and old.kind == "loop":
            raise self.err(DuplicateError, f"cannot assign to loop variable '{name}'", stmt.loc)
        if old is not None and old.kind == "emit":
            raise self.err(DuplicateError, f"cannot assign to emitted '{name}'", stmt.loc)
        if old is not None and old.kind in ("param", "prim"):
            raise self.err(DuplicateError, f"cannot assign to parameter '{name}'", stmt.loc)
        if old is None:
            self.check_name(name, stmt.loc, "variable")
            # (a function sees no parameters: its locals may be named like one, as its arguments)
            self._not_global(name, stmt.loc, params=scope.context != "function")
        value = self.expr(stmt.value, scope)
        if stmt.indices:
            if old is None:
                raise self.err(
                    UnknownNameError, f"unknown name '{name}'" + suggest(name, scope.vars), stmt.loc
                )
            value = self.set_item(old.node, stmt.indices, value, scope, stmt.loc)
        elif old is not None and ast.plain(old.node.type) != ast.plain(value.type):
            raise self.err(
                XprTypeError,
                f"cannot assign {value.type} to '{name}' of type {old.node.type}",
                stmt.value.loc,
            )
        scope.vars[name] = Binding("local", value, old.loc if old else stmt.loc)
        self.ctx.local_names.append((value, name))  # generated code names its temps after it
        if old is None:
            self.ctx.local_defs.setdefault(stmt.loc, (name, scope.context))

    def set_item(self, target: Node, indices, value: Node, scope, loc) -> Node:
        idx_expr = indices[0]
        i = self.static_index(idx_expr, scope, target.type)
        parts = self.components(target)
        if len(indices) > 1:
            new = self.set_item(parts[i], indices[1:], value, scope, loc)
        else:
            new = value
            want = parts[i].type
            if ast.plain(want) != ast.plain(new.type):
                raise self.err(
                    XprTypeError,
                    f"cannot assign {new.type} to an element of type {want}",
                    idx_expr.loc,
                )
        parts = list(parts)
        parts[i] = new
        return self.node("pack", target.type, *parts)

    def loop(self, stmt: ast.For, scope: Scope, emits) -> None:
        lo, hi = self.static_range(stmt.start, stmt.stop, scope)
        self.check_name(stmt.var, stmt.loc, "loop variable")
        if stmt.var in scope.vars:
            raise self.err(
                DuplicateError, f"loop variable '{stmt.var}' is already defined", stmt.loc
            )
        self._not_global(stmt.var, stmt.loc, params=scope.context != "function")
        for i in range(lo, hi):
            self.ctx.cur_loc = stmt.loc  # every step counts in the node budget, empty ones too
            self.node("step", None)
            scope.vars[stmt.var] = Binding("loop", _num(i), stmt.loc)
            self.block(stmt.body, scope, emits, in_loop=True)
        scope.vars.pop(stmt.var, None)

    def static_range(self, start: ast.Expr, stop: ast.Expr, scope) -> tuple[int, int]:
        lo = self.expr(start, scope)
        hi = self.expr(stop, scope)
        for n, e in ((lo, start), (hi, stop)):
            if not _is_int(n):
                raise self.err(StaticError, "loop bounds must be compile-time integers", e.loc)
        if hi.extra - lo.extra > MAX_LOOP:
            raise self.err(
                StaticError,
                f"loop of {shown(hi.extra - lo.extra)} iterations is too long (at most {MAX_LOOP})",
                stop.loc,
            )
        return lo.extra, hi.extra

    def static_index(self, e: ast.Expr, scope, target_type) -> int:
        n = self.expr(e, scope)
        if not _is_int(n):
            raise self.err(StaticError, "index must be a compile-time integer", e.loc)
        size = self.length(target_type)
        if size is None:
            raise self.err(XprTypeError, f"cannot index {target_type}", e.loc)
        if not 0 <= n.extra < size:
            raise self.err(
                StaticError, f"index {shown(n.extra)} out of range for {target_type}", e.loc
            )
        return n.extra

    @staticmethod
    def length(t) -> int | None:
        if isinstance(t, VecT):
            return t.n
        if isinstance(t, MatT):
            return t.m
        if isinstance(t, ArrayT):
            return t.n
        return None
