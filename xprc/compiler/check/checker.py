"""Stage 2: AST -> typed IR (ast.Checked). Names, types, shapes, required outputs.

The checker interprets the spec over types: static loops are unrolled, user functions are inlined
at each call (so they are generic over their argument types), constants are folded, and every
name is resolved. Each user mistake raises an XprError subclass pointing at the spec; a spec that
passes is guaranteed to lower and generate code.

One Checker is made per spec; its whole state is `self.ctx` (context.Context). Its methods are
split by what they check: declarations and constants here, outputs.py (projection, response,
required outputs), statements.py, exprs.py, calls.py (user functions, camera methods, built-in
calls) and params.py (types, activations, training annotations).
"""

from __future__ import annotations

import keyword
import math

from xprc.compiler import ast
from xprc.compiler.ast import Loc, Node
from xprc.compiler.builtin_functions import BUILTINS
from xprc.compiler.check import recursion
from xprc.compiler.check.calls import CallChecks
from xprc.compiler.check.context import Context
from xprc.compiler.check.exprs import ExprChecks
from xprc.compiler.check.outputs import OutputChecks
from xprc.compiler.check.params import ParamChecks
from xprc.compiler.check.scopes import Binding, Scope
from xprc.compiler.check.statements import FN_EMIT, StatementChecks
from xprc.compiler.check.unused import unused
from xprc.compiler.names import (
    _LANG_RESERVED,
    _PY_RESERVED,
    BUILTIN_CONSTANTS,
    CAMERA_MODELS,
    FOOTPRINTS,
    MAX_NODES,
    OPTIONAL_OUTPUTS,
    _is_num,
    _num,
    suggest,
    vec_size,
    work,
)
from xprc.compiler.parse import float32_becomes, outside_float32
from xprc.errors import (
    DefineError,
    DuplicateError,
    MissingOutputError,
    ReservedNameError,
    ReuseError,
    ScopeError,
    StaticError,
    UnknownNameError,
    XprError,
)


class Checker(OutputChecks, ParamChecks, CallChecks, StatementChecks, ExprChecks):
    def __init__(self, spec: ast.Spec, defines: dict | None) -> None:
        self.ctx = Context(spec, dict(defines or {}))

    # -- errors --------------------------------------------------------------------------------

    def err(self, cls, message: str, loc: Loc) -> XprError:
        filename = loc.file or self.ctx.spec.filename  # a base spec's own name for its items
        if loc.line <= 0:
            return cls(message, filename=filename)
        return cls(
            message,
            filename=filename,
            line=loc.line,
            column=loc.column,
            source_line=self.ctx.spec.source_line(loc.line, loc.file),
        )

    def node(self, op: str, typ, *args, extra=None) -> Node:
        """A new IR node; its scalar work (names.work) counts in the spec's budget."""
        cost = work(op, typ, args)
        self.ctx.nodes += cost
        if self.ctx.nodes > MAX_NODES:
            what, sizes = "", "loop"
            if op == "matmul":
                what, sizes = f"; this {args[0].type} * {args[1].type} product is {cost}", "matrix"
            raise self.err(
                StaticError,
                f"spec unrolls to too many operations (more than {MAX_NODES}{what}); "
                f"reduce {sizes} sizes",
                self.ctx.cur_loc,
            )
        return Node(op, typ, tuple(args), extra)

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
        for fn in self.ctx.fns.values():
            bound = {a for a, _ in fn.args}
            if isinstance(fn.body, ast.FnBody):
                self.fn_statement_names(fn.body.stmts, bound)
                self.fn_names(fn.body.result, bound)
            else:
                self.fn_names(fn.body, bound)
        self.no_recursion()
        self.parameters()
        for kind in ("projection", "response"):
            if kind not in blocks:
                raise self.err(MissingOutputError, f"missing '{kind} {{ ... }}' block", start)
        emits, outputs = self.projection(blocks["projection"], color)
        prim_nodes, alpha = self.response(blocks["response"], emits)
        cameras, cameras_why = self.cameras()
        checked = ast.Checked(
            name=prim.name,
            filename=self.ctx.spec.filename,
            source=self.ctx.spec.source,
            params=list(self.ctx.param_info.values()),
            constants={k: float(v) for k, v in self.ctx.const_values.items()},
            defines=dict(self.ctx.defines),
            outputs=outputs,
            prim=prim_nodes,
            alpha=alpha.node,
            uses_ray=self.ctx.uses_ray,
            signed=blocks["response"].signed,
            pixel={k: n for k, (n, _) in self.ctx.pixel_outputs.items()},
            locs={
                **{k: emits[k][1] for k in ("centre", "depth", "valid", "color")},
                "box": next(loc for k, (_, loc) in emits.items() if k in FOOTPRINTS),
                **{k: emits[k][1] for k in OPTIONAL_OUTPUTS if k in emits},
                "alpha": alpha.loc,
                **{f"pixel_{k}": loc for k, (_, loc) in self.ctx.pixel_outputs.items()},
            },
            cameras=cameras,
            cameras_why=cameras_why,
            local_names=list(self.ctx.local_names),
            derived=list(self.ctx.derived.items()),
        )
        checked.warnings = [(message, loc, self.ctx.spec.source_line(loc.line, loc.file))
                            for message, loc in unused(checked, self.ctx)]  # fmt: skip
        return checked

    def declarations(self):
        """Collect the top-level declarations: (primitive, blocks by kind, color, constants in
        order); parameters and functions go to self.ctx.params / self.ctx.fns."""
        prim = color = None
        blocks: dict[str, ast.Block] = {}
        const_items = []
        for item in self.ctx.spec.items:
            if isinstance(item, ast.Primitive):
                if prim is not None:
                    raise self.duplicate("'primitive' declaration", prim.loc, item.loc)
                self.check_name(item.name, item.loc, "primitive")
                prim = item
            elif isinstance(item, ast.Param):
                self.check_name(item.name, item.loc, "parameter")
                self._unique(item.name, item.loc)
                self.ctx.params[item.name] = item
            elif isinstance(item, ast.Const):
                self.check_name(item.name, item.loc, "constant")
                self._unique(item.name, item.loc)
                self.ctx.consts[item.name] = Binding("const", _num(0), item.loc)  # placeholder
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
            elif isinstance(item, ast.Extend):  # (extends.py merges them into a base's block)
                raise self.err(
                    ReuseError,
                    f"'extend {item.kind}' changes single statements of a base spec's "
                    f"{item.kind}, and this spec extends none (write 'primitive NAME extends "
                    '"base.xpr"\')',
                    item.loc,
                )
            elif isinstance(item, ast.Cameras):
                if self.ctx.cameras_decl is not None:
                    raise self.duplicate(
                        "'cameras' declaration", self.ctx.cameras_decl.loc, item.loc
                    )
                self.ctx.cameras_decl = item
        return prim, blocks, color, const_items

    def cameras(self) -> tuple[tuple[str, ...], str]:
        """The camera models the spec accepts (in CAMERA_MODELS order) and why: its `cameras`
        declaration, else all models, or `pinhole` alone for a spec that reads the pinhole
        intrinsics or the Jacobian (a projection written for, or linearised at, a pinhole)."""
        decl = self.ctx.cameras_decl
        if decl is None:
            if not self.ctx.pinhole_reads:
                return CAMERA_MODELS, "the default, without a cameras declaration"
            what, loc = next(iter(self.ctx.pinhole_reads.items()))
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
        self.ctx.fns[item.name] = item

    def constants(self, const_items) -> None:
        """Fold the constants in order, with -D overrides."""
        for name in self.ctx.defines:
            if name not in self.ctx.consts:
                raise DefineError(
                    f"-D {name}: unknown constant '{name}'"
                    + suggest(name, self.ctx.consts)
                    + f"; the spec's constants: {', '.join(self.ctx.consts) or 'none'}",
                    filename="<command line>",
                )
        self.ctx.consts = {}
        for item in const_items:
            value = self.expr(item.value, Scope("constant"))
            if not _is_num(value):
                raise self.err(
                    StaticError,
                    f"constant '{item.name}' must be a compile-time number, got {value.type}",
                    item.value.loc,
                )
            if item.name in self.ctx.defines:
                value = _num(self.ctx.defines[item.name])
            if isinstance(value.extra, float) and not math.isfinite(value.extra):
                raise self.err(
                    StaticError,
                    f"constant '{item.name}' is not finite (it folds to {value.extra})",
                    item.value.loc,
                )
            # Literals are checked as read; a fold past float32's max (1e20 * 1e20) here. A fold
            # below its smallest normal is left alone: sigmoid(-700) is 0 in float32 too.
            becomes = float32_becomes(value.extra)
            if becomes == "inf":
                raise self.err(
                    StaticError,
                    outside_float32(f"constant '{item.name}' = {value.extra!r}", becomes),
                    item.value.loc,
                )
            self.ctx.consts[item.name] = Binding("const", value, item.loc)
            self.ctx.const_values[item.name] = value.extra

    def parameters(self) -> None:
        """Parameters, their activations and training annotations (each role given once)."""
        roles: dict[str, ast.Param] = {}
        for p in self.ctx.params.values():
            info = self.ctx.param_info[p.name] = self.param(p)
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

    def fn_names(self, e: ast.Expr, bound: set) -> None:
        """Every name in a function body is an argument, a constant or a function."""
        if isinstance(e, ast.Binary) and any(
            isinstance(x, ast.Attr) and x.name == "model" for x in (e.left, e.right)
        ):
            return  # `camera.model == NAME`: the call reports that `camera` is not available
        if isinstance(e, ast.Name):
            known = e.id in bound or e.id in self.ctx.consts or e.id in BUILTIN_CONSTANTS
            if not known and e.id not in ("camera", "ray"):
                if e.id in self.ctx.params or e.id == "pixel":
                    raise self.err(
                        ScopeError,
                        f"'{e.id}' is not available in a function (pass it as an argument)",
                        e.loc,
                    )
                names = list(bound) + list(self.ctx.consts) + list(BUILTIN_CONSTANTS)
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

    def fn_statement_names(self, stmts: list, bound: set) -> None:
        """Names in a function body's statements, in order: each assignment binds its name for
        what follows; a loop's locals stay visible after it (its variable does not)."""
        for st in stmts:
            if isinstance(st, ast.Emit):
                raise self.err(ScopeError, FN_EMIT, st.loc)
            if isinstance(st, ast.Assign):
                for e in (*st.indices, st.value):
                    self.fn_names(e, bound)
                bound.add(st.name)
            elif isinstance(st, ast.For):
                self.fn_names(st.start, bound)
                self.fn_names(st.stop, bound)
                inner = bound | {st.var}
                self.fn_statement_names(st.body, inner)
                bound |= inner - {st.var}

    def no_recursion(self) -> None:
        """Functions are inlined at each call: a cycle of calls is an error at the call that
        closes it, for every function, called or not."""
        found = recursion.cycle(self.ctx.fns)
        if found is None:
            return
        *before, (caller, callee, loc) = found
        why = "functions are inlined at each call, so they cannot recurse"
        if not before:
            message = f"recursive function '{caller}': it calls itself; {why}"
        else:
            chain = "".join(f", which calls '{b}' ({self._line(at, loc)})" for _, b, at in before)
            message = f"recursive functions: '{caller}' calls '{callee}'{chain}; {why}"
        raise self.err(StaticError, message, loc)

    def _line(self, at: Loc, here: Loc) -> str:
        """'line N', with the file's name when `at` is in another file than `here`."""
        if at.file != here.file:
            return f"{at.file or self.ctx.spec.filename} line {at.line}"
        return f"line {at.line}"

    def _unique(self, name: str, loc: Loc) -> None:
        for table, what in (
            (self.ctx.params, "parameter"),
            (self.ctx.consts, "constant"),
            (self.ctx.fns, "function"),
        ):
            if name in table:
                first = table[name].loc
                where = f"line {first.line}"
                if first.file != loc.file:  # the other one is in a base spec (extends)
                    where = f"{first.file or self.ctx.spec.filename} line {first.line}"
                raise self.err(
                    DuplicateError, f"'{name}' is already defined as a {what} ({where})", loc
                )


def check(spec: ast.Spec, defines: dict | None = None) -> ast.Checked:
    """Check a parsed spec; `defines` overrides constants (values already numeric)."""
    return Checker(spec, defines).run()
