"""Expressions for the checker: names, unary and binary operators (with constant folding and
broadcasting), `camera.model == NAME`, indexing, attributes and swizzles, camera and ray
attributes, list literals and comprehensions. Part of check.Checker (its `ctx`,
`err`, `node` and `static_index`; calls are in calls.py)."""

from __future__ import annotations

import math

from xprc.compiler import ast
from xprc.compiler.ast import BOOL, SCALAR, ArrayT, BoolT, Loc, MatT, Node, ScalarT, VecT
from xprc.compiler.builtin_functions import BUILTINS, fold_pow
from xprc.compiler.check.scopes import Binding, Scope
from xprc.compiler.names import (
    _BINOP,
    _VERB,
    BUILTIN_CONSTANTS,
    CAMERA_ATTRS,
    CAMERA_METHODS,
    CAMERA_MODELS,
    MAX_VEC,
    PINHOLE_READS,
    RAY_ATTRS,
    _is_num,
    _num,
    suggest,
    unparse,
)
from xprc.compiler.parse import float32_becomes, outside_float32
from xprc.errors import DuplicateError, ScopeError, StaticError, UnknownNameError, XprTypeError


class ExprChecks:
    def components(self, node: Node) -> list[Node]:
        """Elements (vec), rows (mat) or items (array) of a composite node."""
        if node.op == "pack":
            return list(node.args)
        t = node.type
        n = self.length(t)
        sub = self.element_type(t)
        return [self.node("get", sub, node, extra=i) for i in range(n)]

    @staticmethod
    def element_type(t):
        if isinstance(t, VecT):
            return SCALAR
        if isinstance(t, MatT):
            return VecT(t.n)
        return t.elem

    def pack(self, items: list[Node], loc: Loc) -> Node:
        first = items[0].type
        for it in items[1:]:
            if ast.plain(it.type) != ast.plain(first):
                raise self.err(
                    XprTypeError,
                    f"array elements must have the same type, got {first} and {it.type}",
                    loc,
                )
        if isinstance(first, ScalarT):
            t = VecT(len(items))
        elif isinstance(first, VecT):
            t = MatT(len(items), first.n)
        else:
            t = ArrayT(ast.plain(first), len(items))
        return self.node("pack", t, *items)

    def expr(self, e: ast.Expr, scope: Scope) -> Node:
        method = getattr(self, "e_" + type(e).__name__)
        node = method(e, scope)
        if node.op == "num" and not self.ctx.sampling and scope.context != "constant":
            self._check_fold(node.extra, e)  # (constants and lr: their value is checked)
        return node

    def _check_fold(self, value, e: ast.Expr) -> None:
        """A constant expression must fold to a number float32 holds: renders run in float32,
        where `1e20 * 1e20` is inf and `sqrt(-1)` NaN (the compiler folds in float64, which
        would hide it; literals and constants are checked as read, this catches their
        combinations). A fold below float32's smallest normal is left alone: it is 0 there."""
        if not isinstance(value, float):  # an integer: a count or an index, checked where used
            return
        nan = math.isnan(value)
        if not nan and float32_becomes(value) != "inf":
            return
        text = unparse(e)
        shown = text if len(text) <= 60 else text[:57] + "..."
        if nan:
            message = f"'{shown}' is not a number (it folds to nan)"
        else:
            message = outside_float32(f"'{shown}' = {value!r}", "inf")
        raise self.err(StaticError, message, e.loc)

    def e_Num(self, e: ast.Num, scope) -> Node:
        return _num(e.value)

    def e_BoolLit(self, e, scope) -> Node:
        return self.node("boolean", BOOL, extra=e.value)

    def e_Name(self, e: ast.Name, scope: Scope) -> Node:
        b = scope.vars.get(e.id)
        if b is not None:
            if b.kind == "local":
                self.ctx.local_reads.add(b.loc)
            return b.node
        if e.id in self.ctx.consts:
            return self.ctx.consts[e.id].node
        if e.id in BUILTIN_CONSTANTS:
            return _num(BUILTIN_CONSTANTS[e.id])
        if e.id == "pixel":
            if scope.context != "response":
                raise self.err(ScopeError, "'pixel' is only available in the response", e.loc)
            return self.node("input", VecT(2), extra=("pixel", ""))
        if e.id in ("camera", "ray"):
            raise self.err(XprTypeError, f"'{e.id}' is not a value; use {e.id}.<attribute>", e.loc)
        if e.id in self.ctx.params and scope.context not in ("function", "constant", "activation"):
            return self.ctx.param_info[e.id].value  # pragma: no cover - params are in scope.vars
        if scope.context == "response" and e.id in self.ctx.proj_locals:
            raise self.err(
                ScopeError,
                f"'{e.id}' is local to the projection; emit it to use it in the response",
                e.loc,
            )
        if e.id in self.ctx.fns or e.id in BUILTINS:
            raise self.err(XprTypeError, f"function '{e.id}' used as a value (call it)", e.loc)
        names = list(scope.vars) + list(self.ctx.consts) + list(BUILTIN_CONSTANTS)
        if scope.context == "response":
            names.append("pixel")
        raise self.err(UnknownNameError, f"unknown name '{e.id}'" + suggest(e.id, names), e.loc)

    def e_Unary(self, e: ast.Unary, scope) -> Node:
        x = self.expr(e.operand, scope)
        if e.op == "not":
            if not isinstance(x.type, BoolT):
                raise self.err(XprTypeError, f"'not' needs a bool, got {x.type}", e.loc)
            if x.op == "boolean":
                return self.node("boolean", BOOL, extra=not x.extra)
            return self.node("not", BOOL, x)
        if not ast.numeric(x.type):
            raise self.err(XprTypeError, f"cannot negate {x.type}", e.loc)
        if e.op == "+":
            return x
        if _is_num(x):
            return _num(-x.extra)
        return self.node("neg", x.type, x)

    def e_Transpose(self, e: ast.Transpose, scope) -> Node:
        x = self.expr(e.operand, scope)
        return self.transpose(x, e.loc)

    def camera_model(self, e: ast.Binary, scope) -> Node | None:
        """`camera.model == NAME` / `!=`: a bool fixed when the module is traced (the camera
        model is static), or None when `e` is not such a comparison."""

        def is_model(x) -> bool:
            return (
                isinstance(x, ast.Attr)
                and x.name == "model"
                and isinstance(x.target, ast.Name)
                and x.target.id == "camera"
                and "camera" not in scope.vars
            )

        left, right = e.left, e.right
        if is_model(right) and not is_model(left):
            left, right = right, left
        if not is_model(left):
            return None
        if scope.context in ("function", "constant", "activation"):
            raise self.err(
                ScopeError, f"'camera' is not available in a {scope.context}", left.target.loc
            )
        if e.op not in ("==", "!="):
            raise self.err(
                XprTypeError,
                f"camera.model can only be compared with == or !=, not '{e.op}'",
                e.loc,
            )
        models = ", ".join(CAMERA_MODELS)
        if not isinstance(right, ast.Name):
            raise self.err(
                XprTypeError,
                f"camera.model can only be compared with a model name ({models})",
                right.loc,
            )
        if right.id not in CAMERA_MODELS:
            hint = suggest(right.id, CAMERA_MODELS)
            raise self.err(
                UnknownNameError,
                f"unknown camera model '{right.id}'{hint} (models: {models})",
                right.loc,
            )
        node = self.node("input", BOOL, extra=("camera_model", right.id))
        return node if e.op == "==" else self.node("not", BOOL, node)

    def transpose(self, x: Node, loc: Loc) -> Node:
        if not isinstance(x.type, MatT):
            raise self.err(XprTypeError, f"cannot transpose {x.type}", loc)
        return self.node("transpose", MatT(x.type.n, x.type.m), x)

    def e_Binary(self, e: ast.Binary, scope) -> Node:
        model = self.camera_model(e, scope)
        if model is not None:
            return model
        a = self.expr(e.left, scope)
        b = self.expr(e.right, scope)
        return self.binary(e.op, a, b, e.loc)

    def binary(self, op: str, a: Node, b: Node, loc: Loc) -> Node:
        ta, tb = a.type, b.type
        fail = f"cannot {_VERB[op]} {ta} and {tb}"
        if op in ("and", "or"):
            if not (isinstance(ta, BoolT) and isinstance(tb, BoolT)):
                raise self.err(XprTypeError, f"'{op}' needs bool operands, got {ta} and {tb}", loc)
            if a.op == "boolean" and b.op == "boolean":
                v = (a.extra and b.extra) if op == "and" else (a.extra or b.extra)
                return self.node("boolean", BOOL, extra=v)
            return self.node(op, BOOL, a, b)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            if not (isinstance(ta, ScalarT) and isinstance(tb, ScalarT)):
                raise self.err(XprTypeError, fail, loc)
            if _is_num(a) and _is_num(b):
                x, y = a.extra, b.extra
                v = {
                    "<": x < y,
                    "<=": x <= y,
                    ">": x > y,
                    ">=": x >= y,
                    "==": x == y,
                    "!=": x != y,
                }[op]
                return self.node("boolean", BOOL, extra=bool(v))
            return self.node(_BINOP[op], BOOL, a, b)
        if not (ast.numeric(ta) and ast.numeric(tb)):
            raise self.err(XprTypeError, fail, loc)
        if op == "^":
            if not isinstance(tb, ScalarT) or isinstance(ta, MatT):
                raise self.err(
                    XprTypeError,
                    f"cannot raise {ta} to the power {tb}"
                    + (" (use M * M for matrix powers)" if isinstance(ta, MatT) else ""),
                    loc,
                )
            if _is_num(a) and _is_num(b):
                return _num(fold_pow(a.extra, b.extra))
            return self.node("pow", ta, a, b)
        if (
            op == "*"
            and (isinstance(ta, MatT) or isinstance(tb, MatT))
            and not (isinstance(ta, ScalarT) or isinstance(tb, ScalarT))
        ):
            k1 = ta.n if isinstance(ta, MatT) else ta.n
            k2 = tb.m if isinstance(tb, MatT) else tb.n
            if k1 != k2:
                raise self.err(XprTypeError, fail, loc)
            if isinstance(ta, MatT) and isinstance(tb, MatT):
                t = MatT(ta.m, tb.n)
            elif isinstance(ta, MatT):
                t = VecT(ta.m)
            else:
                t = VecT(tb.n)
            outer, self.ctx.cur_loc = self.ctx.cur_loc, loc  # a product over budget: at its `*`
            try:
                return self.node("matmul", t, a, b)
            finally:
                self.ctx.cur_loc = outer
        if op == "/" and isinstance(ta, MatT) and isinstance(tb, MatT):
            raise self.err(XprTypeError, fail, loc)
        t = self.broadcast(ta, tb)
        if t is None:
            raise self.err(XprTypeError, fail, loc)
        if _is_num(a) and _is_num(b):
            x, y = a.extra, b.extra
            if op == "+":
                return _num(x + y)
            if op == "-":
                return _num(x - y)
            if op == "*":
                return _num(x * y)
            if y == 0:
                what = "modulo" if op == "%" else "division"
                raise self.err(StaticError, f"{what} by zero", loc)
            return _num(x % y if op == "%" else x / y)  # %: floor modulo, as Python and jnp.mod
        return self.node(_BINOP[op], t, a, b)

    @staticmethod
    def broadcast(ta, tb):
        if isinstance(ta, ScalarT):
            return tb
        if isinstance(tb, ScalarT):
            return ta
        if ast.plain(ta) == ast.plain(tb):
            if isinstance(ta, VecT):
                return VecT(ta.n, ta.quat and tb.quat)
            return ta
        return None

    def e_Index(self, e: ast.Index, scope) -> Node:
        x = self.expr(e.target, scope)
        for idx in e.indices:
            i = self.static_index(idx, scope, x.type)
            x = (
                self.components(x)[i]
                if x.op == "pack"
                else self.node("get", self.element_type(x.type), x, extra=i)
            )
        return x

    def e_Attr(self, e: ast.Attr, scope) -> Node:
        if (
            isinstance(e.target, ast.Name)
            and e.target.id == "camera"
            and "camera" not in scope.vars
        ):
            if scope.context in ("function", "constant", "activation"):
                raise self.err(
                    ScopeError, f"'camera' is not available in a {scope.context}", e.target.loc
                )
            if e.name in CAMERA_ATTRS:
                if e.name in PINHOLE_READS:
                    self.ctx.pinhole_reads.setdefault(f"camera.{e.name}", e.loc)
                return self.node("input", CAMERA_ATTRS[e.name], extra=("camera", e.name))
            if e.name == "model":
                raise self.err(
                    XprTypeError,
                    "camera.model can only be compared with a model name, e.g. "
                    "'camera.model == pinhole' (models: " + ", ".join(CAMERA_MODELS) + ")",
                    e.loc,
                )
            if e.name in CAMERA_METHODS:
                raise self.err(XprTypeError, f"camera.{e.name} is a method; call it", e.loc)
            raise self.err(
                UnknownNameError,
                f"unknown camera attribute '{e.name}'"
                + suggest(e.name, [*CAMERA_ATTRS, *CAMERA_METHODS, "model"]),
                e.loc,
            )
        if isinstance(e.target, ast.Name) and e.target.id == "ray" and "ray" not in scope.vars:
            if scope.context != "response":
                raise self.err(ScopeError, "'ray' is only available in the response", e.target.loc)
            if e.name not in RAY_ATTRS:
                raise self.err(
                    UnknownNameError,
                    f"unknown ray attribute '{e.name}'" + suggest(e.name, RAY_ATTRS),
                    e.loc,
                )
            self.ctx.uses_ray = True
            kind = "ray_origin" if e.name == "origin" else "ray_dir"
            return self.node("input", VecT(3), extra=(kind, ""))
        x = self.expr(e.target, scope)
        t = x.type
        if not isinstance(t, VecT):
            raise self.err(XprTypeError, f"{t} has no component '.{e.name}'", e.loc)
        letters = "wxyz" if t.quat else "xyzw"
        if not (1 <= len(e.name) <= 4) or any(c not in letters for c in e.name):
            raise self.err(UnknownNameError, f"{t} has no component '.{e.name}'", e.loc)
        idx = [letters.index(c) for c in e.name]
        if any(i >= t.n for i in idx):
            raise self.err(XprTypeError, f"{t} has no component '.{e.name}'", e.loc)
        comps = self.components(x)
        if len(idx) == 1:
            return comps[idx[0]]
        return self.node("pack", VecT(len(idx)), *[comps[i] for i in idx])

    def e_ListLit(self, e: ast.ListLit, scope) -> Node:
        items = [self.expr(x, scope) for x in e.items]
        if len(items) > MAX_VEC and isinstance(items[0].type, ScalarT):
            raise self.err(XprTypeError, f"vector literal too long (at most {MAX_VEC})", e.loc)
        return self.pack(items, e.loc)

    def e_Comprehension(self, e: ast.Comprehension, scope: Scope) -> Node:
        lo, hi = self.static_range(e.start, e.stop, scope)
        if hi <= lo:
            raise self.err(StaticError, "empty array (the range has no elements)", e.start.loc)
        self.check_name(e.var, e.var_loc, "loop variable")
        if e.var in scope.vars:
            raise self.err(DuplicateError, f"loop variable '{e.var}' is already defined", e.var_loc)
        items = []
        for i in range(lo, hi):
            self.ctx.cur_loc = e.loc  # every step counts in the node budget
            self.node("step", None)
            inner = Scope(scope.context, scope.vars)
            inner.vars[e.var] = Binding("loop", _num(i), e.var_loc)
            items.append(self.expr(e.body, inner))
        return self.pack(items, e.loc)
