"""Stage 2: AST -> typed IR (ast.Checked). Names, types, shapes, required outputs.

The checker interprets the spec over types: static loops are unrolled, user functions are inlined
at each call (so they are generic over their argument types), constants are folded, and every
name is resolved. Each user mistake raises an XprError subclass pointing at the spec; a spec that
passes is guaranteed to lower and generate code.
"""

from __future__ import annotations

import keyword
import math

from xprc.compiler import ast
from xprc.compiler.ast import BOOL, SCALAR, ArrayT, BoolT, Loc, MatT, Node, ScalarT, VecT
from xprc.compiler.builtins import BuiltinChecks
from xprc.compiler.names import (  # noqa: F401  (some re-exported)
    _BINOP,
    _LANG_RESERVED,
    _PY_RESERVED,
    _VERB,
    BUILTINS,
    CAMERA_ATTRS,
    CAMERA_METHODS,
    CAMERA_MODELS,
    FOOTPRINTS,
    MAX_LOOP,
    MAX_NODES,
    MAX_VEC,
    RAY_ATTRS,
    REQUIRED,
    _Binding,
    _fold_float,
    _is_int,
    _is_num,
    _num,
    _Scope,
    suggest,
    unparse,
    vec_size,
)
from xprc.compiler.params import ParamChecks
from xprc.compiler.statements import StatementChecks
from xprc.errors import (
    DefineError,
    DuplicateError,
    MissingOutputError,
    ReservedNameError,
    ScopeError,
    StaticError,
    UnknownNameError,
    XprError,
    XprTypeError,
)


class Checker(ParamChecks, BuiltinChecks, StatementChecks):
    def __init__(self, spec: ast.Spec, defines: dict | None) -> None:
        self.spec = spec
        self.defines = dict(defines or {})
        self.consts: dict[str, _Binding] = {}
        self.const_values: dict[str, float | int] = {}
        self.params: dict[str, ast.Param] = {}
        self.param_info: dict[str, ast.ParamInfo] = {}
        self.fns: dict[str, ast.Fn] = {}
        self.call_stack: list[str] = []
        self.nodes = 0
        self.uses_ray = False

    # -- errors --------------------------------------------------------------------------------

    def err(self, cls, message: str, loc: Loc) -> XprError:
        filename = loc.file or self.spec.filename  # a base spec's own name for its items
        if loc.line <= 0:
            return cls(message, filename=filename)
        return cls(
            message,
            filename=filename,
            line=loc.line,
            column=loc.column,
            source_line=self.spec.source_line(loc.line, loc.file),
        )

    def node(self, op: str, typ, *args, extra=None) -> Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.err(
                StaticError,
                f"spec unrolls to too many operations (more than {MAX_NODES}); reduce loop sizes",
                self._cur_loc,
            )
        return Node(op, typ, tuple(args), extra)

    _cur_loc = ast.NOLOC

    # -- names -----------------------------------------------------------------------------------

    def check_name(self, name: str, loc: Loc, what: str) -> None:
        if name.startswith("_") or "__" in name:
            raise self.err(
                ReservedNameError,
                f"{what} '{name}': names starting with '_' or containing '__' are reserved",
                loc,
            )
        if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in _PY_RESERVED:
            raise self.err(
                ReservedNameError, f"'{name}' is reserved and cannot be used as a name", loc
            )
        if name in _LANG_RESERVED:
            raise self.err(ReservedNameError, f"'{name}' is a built-in name of the language", loc)
        if name in BUILTINS or vec_size(name) is not None:
            raise self.err(ReservedNameError, f"'{name}' is a built-in function", loc)

    # -- top level -------------------------------------------------------------------------------

    def run(self) -> ast.Checked:
        spec = self.spec
        prim = None
        blocks: dict[str, ast.Block] = {}
        color = None
        const_items = []
        for item in spec.items:
            if isinstance(item, ast.Primitive):
                if prim is not None:
                    raise self.err(
                        DuplicateError,
                        f"duplicate 'primitive' declaration (first on line {prim.loc.line})",
                        item.loc,
                    )
                self.check_name(item.name, item.loc, "primitive")
                prim = item
            elif isinstance(item, ast.Param):
                self.check_name(item.name, item.loc, "parameter")
                self._unique(item.name, item.loc)
                self.params[item.name] = item
            elif isinstance(item, ast.Const):
                self.check_name(item.name, item.loc, "constant")
                self._unique(item.name, item.loc)
                self.consts[item.name] = _Binding("const", _num(0), item.loc)  # placeholder
                const_items.append(item)
            elif isinstance(item, ast.Fn):
                if item.name != "density":
                    self.check_name(item.name, item.loc, "function")
                self._unique(item.name, item.loc)
                seen = {}
                for a, aloc in item.args:
                    self.check_name(a, aloc, "argument")
                    if a in seen:
                        raise self.err(DuplicateError, f"duplicate argument '{a}'", aloc)
                    seen[a] = aloc
                self.fns[item.name] = item
            elif isinstance(item, ast.Block):
                if item.kind in blocks:
                    raise self.err(
                        DuplicateError,
                        f"duplicate '{item.kind}' block (first on "
                        f"line {blocks[item.kind].loc.line})",
                        item.loc,
                    )
                blocks[item.kind] = item
            elif isinstance(item, ast.Color):
                if color is not None:
                    raise self.err(
                        DuplicateError,
                        f"duplicate 'color' (first on line {color.loc.line})",
                        item.loc,
                    )
                color = item
        start = Loc(1, 1)
        if prim is None:
            raise self.err(MissingOutputError, "missing 'primitive NAME' declaration", start)

        # Constants, in order, with -D overrides.
        for name in self.defines:
            if name not in self.consts:
                raise DefineError(
                    f"-D {name}: unknown constant '{name}'"
                    + suggest(name, self.consts)
                    + f"; the spec's constants: {', '.join(self.consts) or 'none'}",
                    filename="<command line>",
                )
        self.consts = {}
        for item in const_items:
            scope = _Scope("constant")
            value = self.expr(item.value, scope)
            if not _is_num(value):
                raise self.err(
                    StaticError,
                    f"constant '{item.name}' must be a compile-time number, got {value.type}",
                    item.value.loc,
                )
            if item.name in self.defines:
                value = _num(self.defines[item.name])
            if isinstance(value.extra, float) and not math.isfinite(value.extra):
                raise self.err(StaticError, f"constant '{item.name}' is not finite", item.value.loc)
            self.consts[item.name] = _Binding("const", value, item.loc)
            self.const_values[item.name] = value.extra

        # Function bodies are checked for types at each call; names are checked here, so an
        # unused function with a typo is still reported.
        for fn in self.fns.values():
            self.fn_names(fn.body, {a for a, _ in fn.args})

        # Parameters, their activations and training annotations.
        roles: dict[str, ast.Param] = {}
        for p in self.params.values():
            info = self.param_info[p.name] = self.param(p)
            if info.role is not None:
                if info.role in roles:
                    first = roles[info.role]
                    clause = [c for c in p.clauses if c.key == "role"][0]
                    raise self.err(
                        DuplicateError,
                        f"role '{info.role}' is already given to '{first.name}' "
                        f"(line {first.loc.line})",
                        clause.value.loc,
                    )
                roles[info.role] = p

        if "projection" not in blocks:
            raise self.err(MissingOutputError, "missing 'projection { ... }' block", start)
        if "response" not in blocks:
            raise self.err(MissingOutputError, "missing 'response { ... }' block", start)

        # Projection (and colour, which sees the projection's names).
        proj = blocks["projection"]
        scope = _Scope("projection")
        for name, info in self.param_info.items():
            scope.vars[name] = _Binding("param", info.value, self.params[name].loc)
        emits: dict[str, tuple[Node, Loc]] = {}
        self.block(proj.body, scope, emits, in_loop=False)
        if color is not None:
            if "color" in emits:
                raise self.err(
                    DuplicateError,
                    "'color' is both emitted by the projection (line "
                    f"{emits['color'][1].line}) and declared here",
                    color.loc,
                )
            self._cur_loc = color.loc
            emits["color"] = (self.expr(color.value, _Scope("color", scope.vars)), color.loc)
        outputs = self.outputs(proj, emits, [k for k, b in scope.vars.items() if b.kind == "local"])

        # Response.
        resp = blocks["response"]
        rscope = _Scope("response")
        prim_nodes: dict[str, Node] = {}
        for name, info in self.param_info.items():
            rscope.vars[name] = _Binding(
                "prim",
                self.node("input", info.type, extra=("prim", name)),
                info_loc(self.params[name]),
            )
            prim_nodes[name] = info.value
        for name, (n, loc) in emits.items():
            rscope.vars[name] = _Binding(
                "prim", self.node("input", n.type, extra=("prim", name)), loc
            )
            prim_nodes[name] = n
        self.proj_locals = {k: b for k, b in scope.vars.items() if b.kind == "local"}
        self.pixel_outputs: dict[str, tuple[Node, Loc]] = {}
        self.block(resp.body, rscope, None, in_loop=False)
        alpha = rscope.vars.get("alpha")
        if alpha is None or alpha.kind != "local":
            raise self.err(MissingOutputError, "response must assign 'alpha'", resp.loc)
        if not isinstance(alpha.node.type, ScalarT):
            raise self.err(
                XprTypeError, f"'alpha' must be scalar, got {alpha.node.type}", alpha.loc
            )

        return ast.Checked(
            name=prim.name,
            filename=spec.filename,
            source=spec.source,
            params=list(self.param_info.values()),
            constants={k: float(v) for k, v in self.const_values.items()},
            defines=dict(self.defines),
            outputs=outputs,
            prim=prim_nodes,
            alpha=alpha.node,
            uses_ray=self.uses_ray,
            signed=resp.signed,
            pixel={k: n for k, (n, _) in self.pixel_outputs.items()},
            locs={
                **{k: emits[k][1] for k in ("centre", "depth", "valid", "color")},
                "box": next(loc for k, (_, loc) in emits.items() if k in FOOTPRINTS),
                "alpha": alpha.loc,
                **{f"pixel_{k}": loc for k, (_, loc) in self.pixel_outputs.items()},
            },
        )

    def fn_names(self, e: ast.Expr, bound: set) -> None:
        """Every name in a function body is an argument, a constant or a function."""
        if isinstance(e, ast.Binary) and any(
            isinstance(x, ast.Attr) and x.name == "model" for x in (e.left, e.right)
        ):
            return  # `camera.model == NAME`: the call reports that `camera` is not available
        if isinstance(e, ast.Name):
            if e.id not in bound and e.id not in self.consts and e.id not in ("camera", "ray"):
                if e.id in self.params or e.id == "pixel":
                    raise self.err(
                        ScopeError,
                        f"'{e.id}' is not available in a function (pass it as an argument)",
                        e.loc,
                    )
                raise self.err(
                    UnknownNameError,
                    f"unknown name '{e.id}'" + suggest(e.id, list(bound) + list(self.consts)),
                    e.loc,
                )
        elif isinstance(e, ast.Call):
            if not isinstance(e.func, ast.Name):
                self.fn_names(e.func, bound)
            for a in e.args:
                self.fn_names(a, bound)
        elif isinstance(e, ast.Comprehension):
            self.fn_names(e.start, bound)
            self.fn_names(e.stop, bound)
            self.fn_names(e.body, bound | {e.var})
        else:
            for f in ("operand", "left", "right", "target"):
                if hasattr(e, f):
                    self.fn_names(getattr(e, f), bound)
            for f in ("items", "indices"):
                for x in getattr(e, f, ()):
                    self.fn_names(x, bound)

    def _unique(self, name: str, loc: Loc) -> None:
        for table, what in (
            (self.params, "parameter"),
            (self.consts, "constant"),
            (self.fns, "function"),
        ):
            if name in table:
                first = table[name].loc
                where = f"line {first.line}"
                if first.file != loc.file:  # the other one is in a base spec (extends)
                    where = f"{first.file or self.spec.filename} line {first.line}"
                raise self.err(
                    DuplicateError, f"'{name}' is already defined as a {what} ({where})", loc
                )

    def outputs(self, proj: ast.Block, emits, local_names=()) -> dict[str, Node]:
        out = {}
        for name, typ in REQUIRED.items():
            if name not in emits:
                hint = (
                    f"; it is assigned but not emitted: write 'emit {name} = ...'"
                    if (name in local_names)
                    else ""
                )
                raise self.err(
                    MissingOutputError, f"projection must emit '{name}' ({typ}){hint}", proj.loc
                )
            node, loc = emits[name]
            if ast.plain(node.type) != typ:
                raise self.err(XprTypeError, f"'{name}' must be {typ}, got {node.type}", loc)
            out[name] = node
        found = [n for n in emits if n in FOOTPRINTS]
        if not found:
            raise self.err(
                MissingOutputError,
                "projection must emit a footprint: 'radius' "
                "(scalar), 'radii' (vec2) or 'box' (vec4)",
                proj.loc,
            )
        if len(found) > 1:
            raise self.err(
                DuplicateError,
                f"projection emits more than one footprint ('{found[0]}' and '{found[1]}')",
                emits[found[1]][1],
            )
        fp = found[0]
        node, loc = emits[fp]
        if ast.plain(node.type) != FOOTPRINTS[fp]:
            raise self.err(XprTypeError, f"'{fp}' must be {FOOTPRINTS[fp]}, got {node.type}", loc)
        if fp == "box":
            out["box"] = node
        else:
            cx, cy = self.components(out["centre"])
            rx, ry = (node, node) if fp == "radius" else self.components(node)
            out["box"] = self.node(
                "pack",
                VecT(4),
                self.node("sub", SCALAR, cx, rx),
                self.node("sub", SCALAR, cy, ry),
                self.node("add", SCALAR, cx, rx),
                self.node("add", SCALAR, cy, ry),
            )
        if "color" not in emits:
            raise self.err(
                MissingOutputError,
                "missing 'color = ...' (or 'emit color = ...' in the projection)",
                Loc(1, 1),
            )
        node, loc = emits["color"]
        if not isinstance(node.type, (ScalarT, VecT)):
            raise self.err(
                XprTypeError, f"'color' must be scalar or a vector, got {node.type}", loc
            )
        out["color"] = node
        return out

    # -- expressions ---------------------------------------------------------------------------

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

    def expr(self, e: ast.Expr, scope: _Scope) -> Node:
        method = getattr(self, "e_" + type(e).__name__)
        return method(e, scope)

    def e_Num(self, e: ast.Num, scope) -> Node:
        return _num(e.value)

    def e_BoolLit(self, e, scope) -> Node:
        return self.node("boolean", BOOL, extra=e.value)

    def e_Name(self, e: ast.Name, scope: _Scope) -> Node:
        b = scope.vars.get(e.id)
        if b is not None:
            return b.node
        if e.id in self.consts:
            return self.consts[e.id].node
        if e.id == "pixel":
            if scope.context != "response":
                raise self.err(ScopeError, "'pixel' is only available in the response", e.loc)
            return self.node("input", VecT(2), extra=("pixel", ""))
        if e.id in ("camera", "ray"):
            raise self.err(XprTypeError, f"'{e.id}' is not a value; use {e.id}.<attribute>", e.loc)
        if e.id in self.params and scope.context not in ("function", "constant", "activation"):
            return self.param_info[e.id].value  # pragma: no cover - params are in scope.vars
        if scope.context == "response" and e.id in getattr(self, "proj_locals", {}):
            raise self.err(
                ScopeError,
                f"'{e.id}' is local to the projection; emit it to use it in the response",
                e.loc,
            )
        if e.id in self.fns or e.id in BUILTINS:
            raise self.err(XprTypeError, f"function '{e.id}' used as a value (call it)", e.loc)
        names = list(scope.vars) + list(self.consts)
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
                return _num(self.fold_pow(a.extra, b.extra))
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
            return self.node("matmul", t, a, b)
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
                raise self.err(StaticError, "division by zero", loc)
            return _num(x / y)
        return self.node(_BINOP[op], t, a, b)

    @staticmethod
    def fold_pow(x, y):
        if isinstance(x, int) and isinstance(y, int) and 0 <= y <= 64 and abs(x) < 2**16:
            return x**y
        r = _fold_float(math.pow, float(x), float(y))
        return r

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
            self.uses_ray = True
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

    def e_Comprehension(self, e: ast.Comprehension, scope: _Scope) -> Node:
        lo, hi = self.static_range(e.start, e.stop, scope)
        if hi <= lo:
            raise self.err(StaticError, "empty array (the range has no elements)", e.start.loc)
        self.check_name(e.var, e.var_loc, "loop variable")
        if e.var in scope.vars:
            raise self.err(DuplicateError, f"loop variable '{e.var}' is already defined", e.var_loc)
        items = []
        for i in range(lo, hi):
            self._cur_loc = e.loc  # every step counts in the node budget
            self.node("step", None)
            inner = _Scope(scope.context, scope.vars)
            inner.vars[e.var] = _Binding("loop", _num(i), e.var_loc)
            items.append(self.expr(e.body, inner))
        return self.pack(items, e.loc)


def info_loc(p: ast.Param) -> Loc:
    return p.loc


def check(spec: ast.Spec, defines: dict | None = None) -> ast.Checked:
    """Check a parsed spec; `defines` overrides constants (values already numeric)."""
    return Checker(spec, defines).run()
