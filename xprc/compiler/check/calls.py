"""Calls for the checker: user functions (inlined), camera methods, constructors, the built-in
functions (their typing rules are entries of builtin_functions.TABLE) and the derived `cutoff`.
Part of check.Checker (its `ctx`, `err`, `expr`, `node`, `binary` and `components`)."""

from __future__ import annotations

from xprc.compiler import ast
from xprc.compiler.ast import BOOL, MatT, Node, ScalarT, VecT
from xprc.compiler.builtin_functions import BUILTINS, TABLE, _Call
from xprc.compiler.check import invert
from xprc.compiler.check.scopes import Binding, Scope
from xprc.compiler.names import (
    CAMERA_ATTRS,
    CAMERA_METHODS,
    MAX_VEC,
    PINHOLE_READS,
    _fold_float,
    _is_num,
    _num,
    suggest,
    vec_size,
)
from xprc.errors import (
    MissingOutputError,
    ScopeError,
    SpecError,
    StaticError,
    UnknownNameError,
    XprTypeError,
)

# Names a user may expect as functions (the trainer's activation names), with what to write.
NOT_FUNCTIONS = {
    "identity": " (a parameter without an activation has none: `param x : vec3`)",
    "relu": " (write `max(x, 0)`)",
}


class CallChecks:
    # -- calls -----------------------------------------------------------------------------------

    def e_Call(self, e: ast.Call, scope: Scope) -> Node:
        f = e.func
        if isinstance(f, ast.Attr) and isinstance(f.target, ast.Name) and f.target.id == "camera":
            return self.camera_call(e, f, scope)
        if not isinstance(f, ast.Name):
            raise self.err(XprTypeError, "only functions can be called", e.loc)
        args = [self.expr(a, scope) for a in e.args]
        name = f.id
        if name in ("density", "cutoff") and "density" in self.ctx.fns:
            self.implicit_args(name, args, e, scope)
        if name in self.ctx.fns:
            return self.user_call(self.ctx.fns[name], args, e)
        n = vec_size(name)
        if n is not None:
            if n > MAX_VEC:
                raise self.err(XprTypeError, f"vectors have at most {MAX_VEC} components", e.loc)
            return self.construct(VecT(n), args, e)
        if name == "quat":
            return self.construct(VecT(4, True), args, e)
        if name in BUILTINS:
            return self.builtin(name, args, e)
        if name in scope.vars or name in self.ctx.consts or name in self.ctx.params:
            raise self.err(XprTypeError, f"'{name}' is not a function", e.loc)
        hint = NOT_FUNCTIONS.get(name) or suggest(name, list(self.ctx.fns) + sorted(BUILTINS))
        raise self.err(UnknownNameError, f"unknown function '{name}'" + hint, e.loc)

    def implicit_args(self, name: str, args: list[Node], e: ast.Call, scope: Scope) -> None:
        """`density(2 * s)` / `cutoff(level)` for a `density(g, nu)`: arguments after the first
        that the call leaves out are the values named like them where it is called (so a
        spec extending one with a one-argument kernel only redefines the kernel)."""
        fn = self.ctx.fns["density"]
        if not 1 <= len(args) < len(fn.args):
            return
        for arg, loc in fn.args[len(args) :]:
            b = scope.vars.get(arg)
            node = b.node if b is not None else getattr(self.ctx.consts.get(arg), "node", None)
            if node is None and fn.loc.file != e.loc.file:
                # the call is in another file (a base spec): the mistake is the user's
                # argument name, so the error is at the user's density line
                raise self.err(XprTypeError, self._unpassable(arg, name, args, e, scope), loc)
            if node is None:
                n = len(fn.args)
                raise self.err(
                    XprTypeError,
                    f"'{name}' takes {n} arguments, got {len(args)} "
                    f"(nothing named '{arg}' here to pass as the density's '{arg}')",
                    e.loc,
                )
            args.append(node)

    def _unpassable(self, arg: str, name: str, args: list, e: ast.Call, scope: Scope) -> str:
        """Why the density's argument `arg` cannot be passed where another file calls it."""
        where = f"{e.loc.file or self.ctx.spec.filename}:{e.loc.line}:{e.loc.column}"
        known = list(scope.vars) + list(self.ctx.consts) + list(self.ctx.params)
        return (
            f"density argument '{arg}' names nothing where {where} calls '{name}' with "
            f"{len(args)} argument{'s' if len(args) != 1 else ''}{suggest(arg, known)}; an "
            "argument a call leaves out is the parameter, constant or local of its name there"
        )

    def user_call(self, fn: ast.Fn, args: list[Node], e: ast.Call) -> Node:
        if len(args) != len(fn.args):
            raise self.err(
                XprTypeError,
                f"'{fn.name}' takes {len(fn.args)} argument"
                f"{'s' if len(fn.args) != 1 else ''}, got {len(args)}",
                e.loc,
            )
        if fn.name in self.ctx.call_stack:
            raise self.err(StaticError, f"recursive call to '{fn.name}'", e.loc)
        scope = Scope(
            "function",
            {a: Binding("local", v, loc) for (a, loc), v in zip(fn.args, args, strict=False)},
        )
        self.ctx.call_stack.append(fn.name)
        where = self.ctx.cur_loc
        try:
            if not isinstance(fn.body, ast.FnBody):
                return self.expr(fn.body, scope)
            # `fn f(x) = { statements; result }`: the statements run as a block's (locals,
            # reassignment, loops), in the function's own scope, then the result is its value
            self.block(fn.body.stmts, scope, {}, in_loop=False)
            self.ctx.cur_loc = fn.body.result.loc
            return self.expr(fn.body.result, scope)
        finally:
            self.ctx.cur_loc = where
            self.ctx.call_stack.pop()

    def camera_call(self, e: ast.Call, f: ast.Attr, scope: Scope) -> Node:
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
        want = 2 if f.name == "shutter_box" else 1
        if len(args) != want:
            what = "2 arguments (a vec3 and a scalar)" if want == 2 else "1 argument"
            raise self.err(XprTypeError, f"camera.{f.name} takes {what}, got {len(args)}", e.loc)
        p = args[0]
        if ast.plain(p.type) != VecT(3):
            raise self.err(
                XprTypeError, f"camera.{f.name} needs a vec3, got {p.type}", e.args[0].loc
            )
        if f.name in PINHOLE_READS:
            self.ctx.pinhole_reads.setdefault(f"camera.{f.name}", f.loc)
        if f.name == "world_to_camera":
            r = self.node("input", MatT(3, 3), extra=("camera", "rotation"))
            t = self.node("input", VecT(3), extra=("camera", "translation"))
            return self.node("add", VecT(3), self.node("matmul", VecT(3), r, p), t)
        if f.name in ("project_world", "project_world_valid"):
            # project(world_to_camera_shutter(p)): one iteration shared by both (CSE)
            q = self.node("camera", VecT(3), p, extra="world_to_camera_shutter")
            typ = VecT(2) if f.name == "project_world" else BOOL
            return self.node("camera", typ, q, extra=f.name.replace("_world", ""))
        if f.name == "shutter_box":
            if not isinstance(args[1].type, ScalarT):
                raise self.err(
                    XprTypeError, f"camera.shutter_box needs a scalar radius, got {args[1].type}",
                    e.args[1].loc,
                )  # fmt: skip
            return self.node("camera", VecT(4), p, args[1], extra=f.name)
        typ = {
            "project": VecT(2), "project_valid": BOOL, "jacobian": MatT(2, 3),
            "world_to_camera_shutter": VecT(3),
        }[f.name]  # fmt: skip
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
        """Arity, typing and folding of a built-in call: its rule in builtin_functions.TABLE."""
        return TABLE[name].typing(_Call(self, name, args, e))

    def cutoff(self, args: list[Node], e: ast.Call) -> Node:
        """`cutoff(level, extra...)`: the largest g with density(g, extra...) >= level."""
        fn = self.ctx.fns.get("density")
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
        self._check_never_increases(fn, args[1:], e)
        with self.ctx.sampled():
            got = invert.cutoff(self, lambda g: self.user_call(fn, [g, *args[1:]], e), args[0])
        if got is None:
            raise self.err(XprTypeError, "'cutoff' needs a density that returns a scalar", fn.loc)
        node, how = got
        self.ctx.derived.setdefault(e.loc, how)
        return node

    def _check_never_increases(self, fn: ast.Fn, extra: list[Node], e: ast.Call) -> None:
        """`cutoff` is the footprint of a kernel that never increases in g: a density that does
        (sampled at numbers; per-primitive arguments cannot be) is an error at its line."""
        if any(a.op != "num" for a in extra):
            return
        with self.ctx.sampled():
            found = invert.first_increase(lambda g: self.user_call(fn, [g, *extra], e))
        if found is None:
            return
        a, fa, b, fb = found
        raise self.err(
            SpecError,
            f"the density increases with g, from density({a:.6g}) = {fa:.6g} to "
            f"density({b:.6g}) = {fb:.6g}. 'cutoff' (line {e.loc.line}) finds the largest g "
            "where the kernel is still >= the level and assumes it never increases in g >= 0: "
            "its footprint would miss pixels the kernel draws. Make the kernel non-increasing "
            "in g, or compute the footprint without 'cutoff'",
            fn.loc,
        )

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
            return _num(_fold_float(TABLE[name].fold, *[a.extra for a in args]))
        return self.node("call", t, *args, extra=name)
