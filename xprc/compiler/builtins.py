"""Calls for the checker: user functions (inlined), camera methods, constructors, the built-in
functions (arity, typing and constant folding) and the derived `cutoff`. A mixin of
check.Checker (it uses the checker's `err`, `expr`, `node`, `binary` and `components`)."""

from __future__ import annotations

import math

from xprc.compiler import ast, invert
from xprc.compiler.ast import BOOL, SCALAR, BoolT, MatT, Node, ScalarT, VecT
from xprc.compiler.names import (
    _UNARY_MATH,
    BUILTINS,
    CAMERA_ATTRS,
    CAMERA_METHODS,
    MAX_VEC,
    PINHOLE_READS,
    _Binding,
    _fold_float,
    _is_int,
    _is_num,
    _num,
    _Scope,
    suggest,
    vec_size,
)
from xprc.errors import (
    MissingOutputError,
    ScopeError,
    StaticError,
    UnknownNameError,
    XprTypeError,
)


class BuiltinChecks:
    # -- calls -----------------------------------------------------------------------------------

    def e_Call(self, e: ast.Call, scope: _Scope) -> Node:
        f = e.func
        if isinstance(f, ast.Attr) and isinstance(f.target, ast.Name) and f.target.id == "camera":
            return self.camera_call(e, f, scope)
        if not isinstance(f, ast.Name):
            raise self.err(XprTypeError, "only functions can be called", e.loc)
        args = [self.expr(a, scope) for a in e.args]
        name = f.id
        if name in ("density", "cutoff") and "density" in self.fns:
            self.implicit_args(name, args, e, scope)
        if name in self.fns:
            return self.user_call(self.fns[name], args, e)
        n = vec_size(name)
        if n is not None:
            return self.construct(VecT(n), args, e)
        if name == "quat":
            return self.construct(VecT(4, True), args, e)
        if name in BUILTINS:
            return self.builtin(name, args, e)
        if name in scope.vars or name in self.consts or name in self.params:
            raise self.err(XprTypeError, f"'{name}' is not a function", e.loc)
        raise self.err(
            UnknownNameError,
            f"unknown function '{name}'" + suggest(name, list(self.fns) + sorted(BUILTINS)),
            e.loc,
        )

    def implicit_args(self, name: str, args: list[Node], e: ast.Call, scope: _Scope) -> None:
        """`density(2 * s)` / `cutoff(level)` for a `density(g, nu)`: arguments after the first
        that the call leaves out are the values named like them where it is called (so a
        spec extending one with a one-argument kernel only redefines the kernel)."""
        fn = self.fns["density"]
        if not 1 <= len(args) < len(fn.args):
            return
        for arg, _ in fn.args[len(args) :]:
            b = scope.vars.get(arg)
            node = b.node if b is not None else getattr(self.consts.get(arg), "node", None)
            if node is None:
                n = len(fn.args)
                raise self.err(
                    XprTypeError,
                    f"'{name}' takes {n} arguments, got {len(args)} "
                    f"(nothing named '{arg}' here to pass as the density's '{arg}')",
                    e.loc,
                )
            args.append(node)

    def user_call(self, fn: ast.Fn, args: list[Node], e: ast.Call) -> Node:
        if len(args) != len(fn.args):
            raise self.err(
                XprTypeError,
                f"'{fn.name}' takes {len(fn.args)} argument"
                f"{'s' if len(fn.args) != 1 else ''}, got {len(args)}",
                e.loc,
            )
        if fn.name in self.call_stack:
            raise self.err(StaticError, f"recursive call to '{fn.name}'", e.loc)
        scope = _Scope(
            "function",
            {a: _Binding("local", v, loc) for (a, loc), v in zip(fn.args, args, strict=False)},
        )
        self.call_stack.append(fn.name)
        try:
            return self.expr(fn.body, scope)
        finally:
            self.call_stack.pop()

    def camera_call(self, e: ast.Call, f: ast.Attr, scope: _Scope) -> Node:
        if scope.context in ("function", "constant", "activation"):
            raise self.err(
                ScopeError, f"'camera' is not available in a {scope.context}", f.target.loc
            )
        if f.name not in CAMERA_METHODS:
            if f.name in CAMERA_ATTRS:
                raise self.err(XprTypeError, f"camera.{f.name} is not a method", f.loc)
            raise self.err(
                UnknownNameError,
                f"unknown camera method '{f.name}'" + suggest(f.name, CAMERA_METHODS),
                f.loc,
            )
        args = [self.expr(a, scope) for a in e.args]
        if len(args) != 1:
            raise self.err(
                XprTypeError, f"camera.{f.name} takes 1 argument, got {len(args)}", e.loc
            )
        p = args[0]
        if ast.plain(p.type) != VecT(3):
            raise self.err(
                XprTypeError, f"camera.{f.name} needs a vec3, got {p.type}", e.args[0].loc
            )
        if f.name in PINHOLE_READS:
            self.pinhole_reads.setdefault(f"camera.{f.name}", f.loc)
        if f.name == "world_to_camera":
            r = self.node("input", MatT(3, 3), extra=("camera", "rotation"))
            t = self.node("input", VecT(3), extra=("camera", "translation"))
            return self.node("add", VecT(3), self.node("matmul", VecT(3), r, p), t)
        typ = {"project": VecT(2), "project_valid": BOOL, "jacobian": MatT(2, 3)}[f.name]
        return self.node("camera", typ, p, extra=f.name)

    def construct(self, t: VecT, args: list[Node], e: ast.Call) -> Node:
        comps = []
        for a, ae in zip(args, e.args, strict=False):
            if isinstance(a.type, ScalarT):
                comps.append(a)
            elif isinstance(a.type, VecT):
                comps.extend(self.components(a))
            else:
                raise self.err(XprTypeError, f"cannot build {t} from {a.type}", ae.loc)
        if len(comps) != t.n:
            raise self.err(XprTypeError, f"{t} needs {t.n} components, got {len(comps)}", e.loc)
        return self.node("pack", t, *comps)

    def builtin(self, name: str, args: list[Node], e: ast.Call) -> Node:
        """Arity, typing and folding of a built-in call: its rule in TYPING."""
        return TYPING[name](_Call(self, name, args, e))

    def cutoff(self, args: list[Node], e: ast.Call) -> Node:
        """`cutoff(level, extra...)`: the largest g with density(g, extra...) >= level."""
        fn = self.fns.get("density")
        if fn is None:
            raise self.err(
                MissingOutputError, "'cutoff' needs a kernel: declare 'density(g) = ...'", e.loc
            )
        want = len(fn.args)
        if len(args) != want:
            extra = ", then the density's arguments after the first" if want > 1 else ""
            raise self.err(
                XprTypeError,
                f"'cutoff' takes {want} argument{'s' if want != 1 else ''} (the level{extra}), "
                f"got {len(args)}",
                e.loc,
            )
        for i, a in enumerate(args):
            if not isinstance(a.type, ScalarT):
                loc = e.args[i].loc if i < len(e.args) else e.loc  # else passed implicitly
                raise self.err(XprTypeError, f"'cutoff' needs scalars, got {a.type}", loc)
        node = invert.cutoff(self, lambda g: self.user_call(fn, [g, *args[1:]], e), args[0])
        if node is None:
            raise self.err(XprTypeError, "'cutoff' needs a density that returns a scalar", fn.loc)
        return node

    def broadcast_to(self, x: Node, t) -> Node:
        if not isinstance(x.type, ScalarT) or isinstance(t, ScalarT):
            return x
        if isinstance(t, VecT):
            return self.node("pack", t, *[x] * t.n)
        row = self.node("pack", VecT(t.n), *[x] * t.n)
        return self.node("pack", t, *[row] * t.m)

    def elementwise(self, name: str, args: list[Node], e: ast.Call) -> Node:
        t = args[0].type
        for a, ae in zip(args, e.args, strict=False):
            if not ast.numeric(a.type):
                raise self.err(
                    XprTypeError,
                    f"'{name}' needs numbers, vectors or matrices, got {a.type}",
                    ae.loc,
                )
        for a in args[1:]:
            t2 = self.broadcast(t, a.type)
            if t2 is None:
                raise self.err(XprTypeError, f"'{name}' arguments differ: {t} and {a.type}", e.loc)
            t = t2
        if all(_is_num(a) for a in args):
            xs = [a.extra for a in args]
            f = {
                "min": min,
                "max": max,
                "atan2": math.atan2,
                "pow": lambda x, y: self.fold_pow(x, y),
                "clamp": lambda x, lo, hi: min(max(x, lo), hi),
            }[name]
            return _num(_fold_float(f, *xs))
        return self.node("call", t, *args, extra=name)


# ---------------------------------------------------------------------------------------------
# The built-in functions: one typing rule each (arity, argument types, result type, folding).


class _Call:
    """One built-in call as its typing rule sees it, with the located-error helpers."""

    def __init__(self, ck, name: str, args: list[Node], e: ast.Call) -> None:
        self.ck, self.name, self.args, self.e = ck, name, args, e

    def arity(self, *ns: int) -> None:
        if len(self.args) not in ns:
            want = " or ".join(str(n) for n in ns)
            raise self.ck.err(
                XprTypeError,
                f"'{self.name}' takes {want} argument{'s' if ns != (1,) else ''}, "
                f"got {len(self.args)}",
                self.e.loc,
            )

    def need(self, i: int, ok, what: str) -> None:
        if not ok(self.args[i].type):
            raise self.ck.err(
                XprTypeError,
                f"'{self.name}' needs {what}, got {self.args[i].type}",
                self.e.args[i].loc,
            )

    def call(self, typ, *xs: Node, extra=None) -> Node:
        return self.ck.node("call", typ, *xs, extra=self.name if extra is None else extra)


def _is_vec(t) -> bool:
    return isinstance(t, VecT)


def _is_square(t) -> bool:
    return isinstance(t, MatT) and t.m == t.n


def _unary(c: _Call) -> Node:
    c.arity(1)
    c.need(0, ast.numeric, "a number, vector or matrix")
    x = c.args[0]
    if _is_num(x):
        return _num(float(_fold_float(_UNARY_MATH[c.name], x.extra)))
    return c.call(x.type, x)


def _min_max(c: _Call) -> Node:
    if len(c.args) == 1:
        c.need(
            0, lambda t: isinstance(t, (VecT, MatT)), "a vector or matrix (or several arguments)"
        )
        return c.call(SCALAR, c.args[0])
    if len(c.args) < 1:
        c.arity(2)
    return c.ck.elementwise(c.name, c.args, c.e)


def _elementwise(n: int):
    def rule(c: _Call) -> Node:
        c.arity(n)
        return c.ck.elementwise(c.name, c.args, c.e)

    return rule


def _where(c: _Call) -> Node:
    c.arity(3)
    c.need(0, lambda t: isinstance(t, BoolT), "a bool condition")
    cond, a, b = c.args
    t = (
        c.ck.broadcast(a.type, b.type)
        if ast.numeric(a.type) and ast.numeric(b.type)
        else (a.type if ast.plain(a.type) == ast.plain(b.type) else None)
    )
    if t is None:
        raise c.ck.err(XprTypeError, f"'where' branches differ: {a.type} and {b.type}", c.e.loc)
    if cond.op == "boolean":
        return c.ck.broadcast_to(a if cond.extra else b, t)
    return c.call(t, *c.args)


def _dot(c: _Call) -> Node:
    c.arity(2)
    c.need(0, _is_vec, "vectors")
    c.need(1, _is_vec, "vectors")
    a, b = c.args
    if a.type.n != b.type.n:
        raise c.ck.err(XprTypeError, f"cannot dot {a.type} and {b.type}", c.e.loc)
    return c.call(SCALAR, *c.args)


def _cross(c: _Call) -> Node:
    c.arity(2)
    for i in (0, 1):
        c.need(i, lambda t: ast.plain(t) == VecT(3), "vec3")
    return c.call(VecT(3), *c.args)


def _norm(c: _Call) -> Node:
    c.arity(1)
    c.need(0, _is_vec, "a vector")
    return c.call(SCALAR, *c.args)


def _sum(c: _Call) -> Node:
    c.arity(1)
    c.need(0, lambda t: isinstance(t, (VecT, MatT)), "a vector or matrix")
    return c.call(SCALAR, *c.args)


def _normalize(c: _Call) -> Node:
    c.arity(1)
    c.need(0, _is_vec, "a vector")
    return c.call(c.args[0].type, *c.args)


def _outer(c: _Call) -> Node:
    c.arity(2)
    c.need(0, _is_vec, "vectors")
    c.need(1, _is_vec, "vectors")
    return c.call(MatT(c.args[0].type.n, c.args[1].type.n), *c.args)


def _transpose(c: _Call) -> Node:
    c.arity(1)
    return c.ck.transpose(c.args[0], c.e.loc)


def _square(limit: int | None, result):
    """inverse / det / trace: a square matrix up to `limit`; `result(t)` is the result type."""

    def rule(c: _Call) -> Node:
        c.arity(1)
        top = MAX_VEC if limit is None else limit
        what = "a square matrix" if limit is None else f"a square matrix (up to {top}x{top})"
        c.need(0, lambda t: _is_square(t) and t.m <= top, what)
        return c.call(result(c.args[0].type), *c.args)

    return rule


def _diag(c: _Call) -> Node:
    c.arity(1)
    c.need(0, lambda t: _is_vec(t) or _is_square(t), "a vector or a square matrix")
    t = c.args[0].type
    return c.call(MatT(t.n, t.n) if _is_vec(t) else VecT(t.n), *c.args)


def _sized(c: _Call) -> Node:
    """eye(n), zeros(n), zeros(m, n): compile-time sizes, a structured static call."""
    c.arity(1, 2) if c.name == "zeros" else c.arity(1)
    dims = []
    for a, ae in zip(c.args, c.e.args, strict=False):
        if not _is_int(a) or not 1 <= a.extra <= MAX_VEC:
            raise c.ck.err(
                StaticError, f"'{c.name}' needs a compile-time size in 1..{MAX_VEC}", ae.loc
            )
        dims.append(a.extra)
    if c.name == "eye":
        t = MatT(dims[0], dims[0])
    else:
        t = VecT(dims[0]) if len(dims) == 1 else MatT(dims[0], dims[1])
    return c.ck.node("call", t, extra=ast.Static(c.name, tuple(dims)))


def _col_row(c: _Call) -> Node:
    c.arity(2)
    c.need(0, lambda t: isinstance(t, MatT), "a matrix")
    m, i = c.args
    t = m.type
    size = t.n if c.name == "col" else t.m
    if not _is_int(i):
        raise c.ck.err(StaticError, "index must be a compile-time integer", c.e.args[1].loc)
    if not 0 <= i.extra < size:
        raise c.ck.err(StaticError, f"index {i.extra} out of range for {t}", c.e.args[1].loc)
    typ = VecT(t.m if c.name == "col" else t.n)
    return c.call(typ, m, extra=ast.Static(c.name, (i.extra,)))


def _quat_to_rotmat(c: _Call) -> Node:
    c.arity(1)
    c.need(0, lambda t: ast.plain(t) == VecT(4), "a quat (w, x, y, z)")
    return c.call(MatT(3, 3), *c.args)


def _eval_sh(c: _Call) -> Node:
    c.arity(2)
    c.need(
        0,
        lambda t: isinstance(t, MatT) and t.m in (1, 4, 9, 16),
        "SH coefficients (sh(d), a mat with 1, 4, 9 or 16 rows)",
    )
    c.need(1, lambda t: ast.plain(t) == VecT(3), "a vec3 direction")
    n = c.args[0].type.n
    return c.call(SCALAR if n == 1 else VecT(n), *c.args)


def _max_eigenvalue(c: _Call) -> Node:
    c.arity(1)
    c.need(0, lambda t: t == MatT(2, 2), "a mat2")
    return c.call(SCALAR, *c.args)


def _cutoff(c: _Call) -> Node:
    return c.ck.cutoff(c.args, c.e)


TYPING = {
    **{name: _unary for name in _UNARY_MATH},
    "min": _min_max, "max": _min_max,
    "atan2": _elementwise(2), "pow": _elementwise(2), "clamp": _elementwise(3),
    "where": _where, "dot": _dot, "cross": _cross, "norm": _norm, "sum": _sum,
    "normalize": _normalize, "outer": _outer, "transpose": _transpose,
    "inverse": _square(3, lambda t: t), "det": _square(4, lambda t: SCALAR),
    "trace": _square(None, lambda t: SCALAR),
    "diag": _diag, "eye": _sized, "zeros": _sized, "col": _col_row, "row": _col_row,
    "quat_to_rotmat": _quat_to_rotmat, "eval_sh": _eval_sh, "max_eigenvalue": _max_eigenvalue,
    "cutoff": _cutoff,
}  # fmt: skip
assert set(TYPING) == BUILTINS - {"quat"}, set(TYPING) ^ BUILTINS  # quat(...) is a constructor
