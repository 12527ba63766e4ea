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
from xprc.compiler.ast import SCALAR, Loc, Node, ScalarT, VecT
from xprc.compiler.builtins import BuiltinChecks
from xprc.compiler.exprs import ExprChecks
from xprc.compiler.library import BUILTINS
from xprc.compiler.names import (  # noqa: F401  (some re-exported)
    _BINOP,
    _LANG_RESERVED,
    _PY_RESERVED,
    _VERB,
    BUILTIN_CONSTANTS,
    CAMERA_ATTRS,
    CAMERA_METHODS,
    CAMERA_MODELS,
    FOOTPRINTS,
    MAX_LOOP,
    MAX_NODES,
    MAX_VEC,
    OPTIONAL_OUTPUTS,
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
    work,
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


class Checker(ParamChecks, BuiltinChecks, StatementChecks, ExprChecks):
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
        self.pinhole_reads: dict[str, Loc] = {}  # camera.fx, .jacobian ... -> first read
        self.cameras_decl: ast.Cameras | None = None

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
        """A new IR node; its scalar work (names.work) counts in the spec's budget."""
        cost = work(op, typ, args)
        self.nodes += cost
        if self.nodes > MAX_NODES:
            what, sizes = "", "loop"
            if op == "matmul":
                what, sizes = f"; this {args[0].type} * {args[1].type} product is {cost}", "matrix"
            raise self.err(
                StaticError,
                f"spec unrolls to too many operations (more than {MAX_NODES}{what}); "
                f"reduce {sizes} sizes",
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
        prim, blocks, color, const_items = self.declarations()
        start = Loc(1, 1)
        if prim is None:
            raise self.err(MissingOutputError, "missing 'primitive NAME' declaration", start)
        self.constants(const_items)
        # Function bodies are checked for types at each call; names are checked here, so an
        # unused function with a typo is still reported.
        for fn in self.fns.values():
            self.fn_names(fn.body, {a for a, _ in fn.args})
        self.parameters()
        for kind in ("projection", "response"):
            if kind not in blocks:
                raise self.err(MissingOutputError, f"missing '{kind} {{ ... }}' block", start)
        emits, outputs = self.projection(blocks["projection"], color)
        prim_nodes, alpha = self.response(blocks["response"], emits)
        cameras, cameras_why = self.cameras()
        return ast.Checked(
            name=prim.name,
            filename=self.spec.filename,
            source=self.spec.source,
            params=list(self.param_info.values()),
            constants={k: float(v) for k, v in self.const_values.items()},
            defines=dict(self.defines),
            outputs=outputs,
            prim=prim_nodes,
            alpha=alpha.node,
            uses_ray=self.uses_ray,
            signed=blocks["response"].signed,
            pixel={k: n for k, (n, _) in self.pixel_outputs.items()},
            locs={
                **{k: emits[k][1] for k in ("centre", "depth", "valid", "color")},
                "box": next(loc for k, (_, loc) in emits.items() if k in FOOTPRINTS),
                **{k: emits[k][1] for k in OPTIONAL_OUTPUTS if k in emits},
                "alpha": alpha.loc,
                **{f"pixel_{k}": loc for k, (_, loc) in self.pixel_outputs.items()},
            },
            cameras=cameras,
            cameras_why=cameras_why,
        )

    def declarations(self):
        """Collect the top-level declarations: (primitive, blocks by kind, color, constants in
        order); parameters and functions go to self.params / self.fns."""
        prim = color = None
        blocks: dict[str, ast.Block] = {}
        const_items = []
        for item in self.spec.items:
            if isinstance(item, ast.Primitive):
                if prim is not None:
                    raise self.duplicate("'primitive' declaration", prim.loc, item.loc)
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
                self.function(item)
            elif isinstance(item, ast.Block):
                if item.kind in blocks:
                    raise self.duplicate(f"'{item.kind}' block", blocks[item.kind].loc, item.loc)
                blocks[item.kind] = item
            elif isinstance(item, ast.Color):
                if color is not None:
                    raise self.duplicate("'color'", color.loc, item.loc)
                color = item
            elif isinstance(item, ast.Cameras):
                if self.cameras_decl is not None:
                    raise self.duplicate("'cameras' declaration", self.cameras_decl.loc, item.loc)
                self.cameras_decl = item
        return prim, blocks, color, const_items

    def cameras(self) -> tuple[tuple[str, ...], str]:
        """The camera models the spec accepts (in CAMERA_MODELS order) and why: its `cameras`
        declaration, else all models, or `pinhole` alone for a spec that reads the pinhole
        intrinsics or the Jacobian (a projection written for, or linearised at, a pinhole)."""
        decl = self.cameras_decl
        if decl is None:
            if not self.pinhole_reads:
                return CAMERA_MODELS, "the default, without a cameras declaration"
            what, loc = next(iter(self.pinhole_reads.items()))
            where = f"{loc.file} line {loc.line}" if loc.file else f"line {loc.line}"
            why = (
                f"the default for a spec that reads {what} ({where}), without a cameras declaration"
            )
            return ("pinhole",), why
        seen: dict[str, Loc] = {}
        for name, loc in decl.models:
            if name not in CAMERA_MODELS:
                raise self.err(
                    UnknownNameError,
                    f"unknown camera model '{name}'{suggest(name, CAMERA_MODELS)} "
                    f"(models: {', '.join(CAMERA_MODELS)})",
                    loc,
                )
            if name in seen:
                raise self.err(DuplicateError, f"camera model '{name}' is listed twice", loc)
            seen[name] = loc
        where = f"in {decl.loc.file} " if decl.loc.file else ""
        models = tuple(m for m in CAMERA_MODELS if m in seen)
        return models, f"declared {where}on line {decl.loc.line}"

    def duplicate(self, what: str, first: Loc, loc: Loc) -> XprError:
        return self.err(DuplicateError, f"duplicate {what} (first on line {first.line})", loc)

    def function(self, item: ast.Fn) -> None:
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

    def constants(self, const_items) -> None:
        """Fold the constants in order, with -D overrides."""
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
            value = self.expr(item.value, _Scope("constant"))
            if not _is_num(value):
                raise self.err(
                    StaticError,
                    f"constant '{item.name}' must be a compile-time number, got {value.type}",
                    item.value.loc,
                )
            if item.name in self.defines:
                value = _num(self.defines[item.name])
            if isinstance(value.extra, float) and not math.isfinite(value.extra):
                raise self.err(
                    StaticError,
                    f"constant '{item.name}' is not finite (it folds to {value.extra})",
                    item.value.loc,
                )
            self.consts[item.name] = _Binding("const", value, item.loc)
            self.const_values[item.name] = value.extra

    def parameters(self) -> None:
        """Parameters, their activations and training annotations (each role given once)."""
        roles: dict[str, ast.Param] = {}
        for p in self.params.values():
            info = self.param_info[p.name] = self.param(p)
            if info.role is None:
                continue
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

    def projection(self, proj: ast.Block, color: ast.Color | None):
        """The projection block (and colour, which sees its names): (emits, outputs)."""
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
        self.proj_locals = {k: b for k, b in scope.vars.items() if b.kind == "local"}
        outputs = self.outputs(proj, emits, [k for k, b in scope.vars.items() if b.kind == "local"])
        return emits, outputs

    def response(self, resp: ast.Block, emits):
        """The response block: (per-primitive values it reads, the alpha binding)."""
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
        self.pixel_outputs: dict[str, tuple[Node, Loc]] = {}
        self.block(resp.body, rscope, None, in_loop=False)
        alpha = rscope.vars.get("alpha")
        if alpha is None or alpha.kind != "local":
            raise self.err(MissingOutputError, "response must assign 'alpha'", resp.loc)
        if not isinstance(alpha.node.type, ScalarT):
            raise self.err(
                XprTypeError, f"'alpha' must be scalar, got {alpha.node.type}", alpha.loc
            )
        return prim_nodes, alpha

    def fn_names(self, e: ast.Expr, bound: set) -> None:
        """Every name in a function body is an argument, a constant or a function."""
        if isinstance(e, ast.Binary) and any(
            isinstance(x, ast.Attr) and x.name == "model" for x in (e.left, e.right)
        ):
            return  # `camera.model == NAME`: the call reports that `camera` is not available
        if isinstance(e, ast.Name):
            known = e.id in bound or e.id in self.consts or e.id in BUILTIN_CONSTANTS
            if not known and e.id not in ("camera", "ray"):
                if e.id in self.params or e.id == "pixel":
                    raise self.err(
                        ScopeError,
                        f"'{e.id}' is not available in a function (pass it as an argument)",
                        e.loc,
                    )
                names = list(bound) + list(self.consts) + list(BUILTIN_CONSTANTS)
                raise self.err(
                    UnknownNameError, f"unknown name '{e.id}'" + suggest(e.id, names), e.loc
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
        for name, typ in OPTIONAL_OUTPUTS.items():
            if name in emits:
                node, loc = emits[name]
                if ast.plain(node.type) != typ:
                    raise self.err(XprTypeError, f"'{name}' must be {typ}, got {node.type}", loc)
                out[name] = node
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


def info_loc(p: ast.Param) -> Loc:
    return p.loc


def check(spec: ast.Spec, defines: dict | None = None) -> ast.Checked:
    """Check a parsed spec; `defines` overrides constants (values already numeric)."""
    return Checker(spec, defines).run()
