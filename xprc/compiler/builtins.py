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
        def arity(*ns):
            if len(args) not in ns:
                want = " or ".join(str(n) for n in ns)
                raise self.err(
                    XprTypeError,
                    f"'{name}' takes {want} argument{'s' if ns != (1,) else ''}, got {len(args)}",
                    e.loc,
                )

        def need(i, ok, what):
            if not ok(args[i].type):
                raise self.err(
                    XprTypeError, f"'{name}' needs {what}, got {args[i].type}", e.args[i].loc
                )

        def call(typ, *xs):
            return self.node("call", typ, *xs, extra=name)

        is_vec = lambda t: isinstance(t, VecT)  # noqa: E731
        is_square = lambda t: isinstance(t, MatT) and t.m == t.n  # noqa: E731

        if name in _UNARY_MATH:
            arity(1)
            need(0, ast.numeric, "a number, vector or matrix")
            if _is_num(args[0]):
                return _num(float(_fold_float(_UNARY_MATH[name], args[0].extra)))
            return call(args[0].type, args[0])
        if name in ("min", "max"):
            if len(args) == 1:
                need(
                    0,
                    lambda t: isinstance(t, (VecT, MatT)),
                    "a vector or matrix (or several arguments)",
                )
                return call(SCALAR, args[0])
            if len(args) < 1:
                arity(2)
            return self.elementwise(name, args, e)
        if name in ("atan2", "pow"):
            arity(2)
            return self.elementwise(name, args, e)
        if name == "clamp":
            arity(3)
            return self.elementwise(name, args, e)
        if name == "where":
            arity(3)
            need(0, lambda t: isinstance(t, BoolT), "a bool condition")
            a, b = args[1], args[2]
            t = (
                self.broadcast(a.type, b.type)
                if ast.numeric(a.type) and ast.numeric(b.type)
                else (a.type if ast.plain(a.type) == ast.plain(b.type) else None)
            )
            if t is None:
                raise self.err(
                    XprTypeError, f"'where' branches differ: {a.type} and {b.type}", e.loc
                )
            if args[0].op == "boolean":
                return self.broadcast_to(a if args[0].extra else b, t)
            return self.node("call", t, *args, extra="where")
        if name == "dot":
            arity(2)
            need(0, is_vec, "vectors")
            need(1, is_vec, "vectors")
            if args[0].type.n != args[1].type.n:
                raise self.err(XprTypeError, f"cannot dot {args[0].type} and {args[1].type}", e.loc)
            return call(SCALAR, *args)
        if name == "cross":
            arity(2)
            for i in (0, 1):
                need(i, lambda t: ast.plain(t) == VecT(3), "vec3")
            return call(VecT(3), *args)
        if name in ("norm", "sum"):
            arity(1)
            need(
                0,
                lambda t: isinstance(t, (VecT, MatT)) if name == "sum" else is_vec(t),
                "a vector" + (" or matrix" if name == "sum" else ""),
            )
            return call(SCALAR, *args)
        if name == "normalize":
            arity(1)
            need(0, is_vec, "a vector")
            return call(args[0].type, *args)
        if name == "outer":
            arity(2)
            need(0, is_vec, "vectors")
            need(1, is_vec, "vectors")
            return call(MatT(args[0].type.n, args[1].type.n), *args)
        if name == "transpose":
            arity(1)
            return self.transpose(args[0], e.loc)
        if name in ("inverse", "det", "trace"):
            arity(1)
            limit = 4 if name == "det" else (3 if name == "inverse" else MAX_VEC)
            need(
                0,
                lambda t: is_square(t) and t.m <= limit,
                f"a square matrix (up to {limit}x{limit})"
                if limit < MAX_VEC
                else "a square matrix",
            )
            return call(args[0].type if name == "inverse" else SCALAR, *args)
        if name == "diag":
            arity(1)
            need(0, lambda t: is_vec(t) or is_square(t), "a vector or a square matrix")
            t = args[0].type
            return call(MatT(t.n, t.n) if is_vec(t) else VecT(t.n), *args)
        if name in ("eye", "zeros"):
            arity(1, 2) if name == "zeros" else arity(1)
            dims = []
            for a, ae in zip(args, e.args, strict=False):
                if not _is_int(a) or not 1 <= a.extra <= MAX_VEC:
                    raise self.err(
                        StaticError, f"'{name}' needs a compile-time size in 1..{MAX_VEC}", ae.loc
                    )
                dims.append(a.extra)
            t = (
                MatT(dims[0], dims[0])
                if name == "eye"
                else (VecT(dims[0]) if len(dims) == 1 else MatT(dims[0], dims[1]))
            )
            return self.node("call", t, extra=ast.Static(name, tuple(dims)))
        if name in ("col", "row"):
            arity(2)
            need(0, lambda t: isinstance(t, MatT), "a matrix")
            t = args[0].type
            size = t.n if name == "col" else t.m
            if not _is_int(args[1]):
                raise self.err(StaticError, "index must be a compile-time integer", e.args[1].loc)
            if not 0 <= args[1].extra < size:
                raise self.err(
                    StaticError, f"index {args[1].extra} out of range for {t}", e.args[1].loc
                )
            return self.node(
                "call",
                VecT(t.m if name == "col" else t.n),
                args[0],
                extra=ast.Static(name, (args[1].extra,)),
            )
        if name == "quat_to_rotmat":
            arity(1)
            need(0, lambda t: ast.plain(t) == VecT(4), "a quat (w, x, y, z)")
            return call(MatT(3, 3), *args)
        if name == "eval_sh":
            arity(2)
            need(
                0,
                lambda t: isinstance(t, MatT) and t.m in (1, 4, 9, 16),
                "SH coefficients (sh(d), a mat with 1, 4, 9 or 16 rows)",
            )
            need(1, lambda t: ast.plain(t) == VecT(3), "a vec3 direction")
            n = args[0].type.n
            return call(SCALAR if n == 1 else VecT(n), *args)
        if name == "cutoff":
            return self.cutoff(args, e)
        if name == "max_eigenvalue":
            arity(1)
            need(0, lambda t: t == MatT(2, 2), "a mat2")
            return call(SCALAR, *args)
        raise AssertionError(name)  # pragma: no cover

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
