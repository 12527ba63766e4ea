"""Parameters for the checker: types, activations and training annotations (`lr`, `init`,
`role`), including the raw value of a numeric init through any activation. Part of
check.Checker (its `ctx`, `err`, `expr` and `node`)."""

from __future__ import annotations

import math

from xprc.activations import init_problem
from xprc.compiler import ast
from xprc.compiler.ast import SCALAR, Loc, MatT, ScalarT, VecT
from xprc.compiler.check import invert
from xprc.compiler.check.scopes import Binding, Scope
from xprc.compiler.names import (
    _TYPE_NAMES,
    INIT_RULES,
    MAX_VEC,
    NAMED_ACTIVATIONS,
    RANDOM_INITS,
    ROLES,
    _is_num,
    size_digits,
    suggest,
    unparse,
    vec_size,
)
from xprc.compiler.parse import float32_becomes, outside_float32
from xprc.errors import (
    DuplicateError,
    StaticError,
    UnknownNameError,
    XprTypeError,
)


class ParamChecks:
    def param(self, p: ast.Param) -> ast.ParamInfo:
        t = p.type
        degree = None
        if t.name == "sh":
            if t.arg is None:
                raise self.err(XprTypeError, "'sh' needs a degree, e.g. sh(3)", t.loc)
            if not 0 <= t.arg <= 3:
                raise self.err(XprTypeError, f"sh degree must be 0..3, got {t.arg}", t.loc)
            degree = t.arg
            typ, kind = MatT((t.arg + 1) ** 2, 3), "sh"
        else:
            if t.arg is not None:
                raise self.err(XprTypeError, f"type '{t.name}' takes no argument", t.loc)
            typ = self.type_named(t.name, t.loc)
            kind = t.name
        raw = self.node("input", typ, extra=("raw", p.name))
        act = "identity"
        value = raw
        if p.activation is not None:
            scope = Scope("activation", {"raw": Binding("local", raw, p.loc)})
            self.ctx.cur_loc = p.activation.loc
            value = self.expr(p.activation, scope)
            if ast.plain(value.type) != ast.plain(typ):
                raise self.err(
                    XprTypeError,
                    f"activation of '{p.name}' must give {typ}, got {value.type}",
                    p.activation.loc,
                )
            if isinstance(value.type, VecT) and value.type.quat != typ.quat and typ.quat:
                value = self.node("pack", typ, *self.components(value))
            a = p.activation
            if isinstance(a, ast.Name) and a.id == "raw":
                act = "identity"
            elif (
                isinstance(a, ast.Call)
                and isinstance(a.func, ast.Name)
                and len(a.args) == 1
                and isinstance(a.args[0], ast.Name)
                and a.args[0].id == "raw"
                and a.func.id in NAMED_ACTIVATIONS
            ):
                act = a.func.id
            else:
                act = unparse(a)
        info = ast.ParamInfo(p.name, kind, typ, ast.shape_of(typ), act, degree, value)
        self.clauses(p, info)
        return info

    def clauses(self, p: ast.Param, info: ast.ParamInfo) -> None:
        """`lr`, `init` and `role` of a parameter -> info.lr / .init / .role."""
        declared = f"sh({info.degree})" if info.kind == "sh" else str(info.type)
        seen: set[str] = set()
        for c in p.clauses:
            self.ctx.cur_loc = c.loc
            if c.key in seen:
                raise self.err(
                    DuplicateError, f"duplicate '{c.key}' for parameter '{p.name}'", c.loc
                )
            seen.add(c.key)
            v = c.value
            if c.key == "role":
                info.role = self.role(p, info, v, declared)
            elif c.key == "init" and isinstance(v, ast.Name) and v.id in INIT_RULES:
                info.init = self.init_rule(p, info, v, declared)
            elif c.key == "init" and _random_rule(v) is not None:
                info.init = self.random_init(p, info, v, declared)
            else:
                self.number_clause(p, info, c.key, v)

    def role(self, p: ast.Param, info: ast.ParamInfo, v, declared: str) -> str:
        """A `role` clause's name, checked against the parameter's type."""
        if v.id not in ROLES:
            hint = suggest(v.id, ROLES) or " (expected position, opacity or scale)"
            raise self.err(UnknownNameError, f"unknown role '{v.id}'{hint}", v.loc)
        need = {"position": VecT(3), "opacity": SCALAR}.get(v.id)
        if v.id == "scale" and not isinstance(info.type, (ScalarT, VecT)):
            raise self.err(
                XprTypeError,
                f"role 'scale' needs a scalar or vector parameter, '{p.name}' is {declared}",
                v.loc,
            )
        if need is not None and ast.plain(info.type) != need:
            raise self.err(
                XprTypeError,
                f"role '{v.id}' needs a {need} parameter, '{p.name}' is {declared}",
                v.loc,
            )
        return v.id

    def init_rule(self, p: ast.Param, info: ast.ParamInfo, v, declared: str) -> str:
        """An `init` rule name (points, colors, ...), checked against the parameter's type."""
        if v.id == "points" and ast.plain(info.type) != VecT(3):
            raise self.err(
                XprTypeError,
                f"init 'points' needs a vec3 parameter, '{p.name}' is {declared}",
                v.loc,
            )
        if v.id == "colors" and ast.plain(info.type) != VecT(3) and info.kind != "sh":
            raise self.err(
                XprTypeError,
                f"init 'colors' needs a vec3 or sh parameter, '{p.name}' is {declared}",
                v.loc,
            )
        return v.id

    def random_init(self, p: ast.Param, info: ast.ParamInfo, v, declared: str) -> tuple:
        """`normal(mean, std)`, `uniform(low, high)` or `unit()`: random raw values, checked
        here (numbers, std > 0, low < high, unit() on a vector) -> ("normal", mean, std), ..."""
        rule = _random_rule(v)
        wanted = RANDOM_INITS[rule]
        form = f"{rule}({', '.join(wanted)})"
        if not isinstance(v, ast.Call):
            raise self.err(StaticError, f"init '{rule}' needs its arguments: {form}", v.loc)
        if len(v.args) != len(wanted):
            raise self.err(
                StaticError,
                f"init {form} takes {len(wanted)} argument{'s' * (len(wanted) != 1)}, "
                f"got {len(v.args)}",
                v.loc,
            )
        if rule == "unit" and not (isinstance(info.type, VecT) and info.type.n >= 2):
            raise self.err(
                XprTypeError,
                f"init unit() needs a vector or quat parameter, '{p.name}' is {declared}",
                v.loc,
            )
        values = []
        for what, arg in zip(wanted, v.args, strict=True):
            value = self.expr(arg, Scope("constant"))
            x = float(value.extra) if _is_num(value) else math.nan
            if not math.isfinite(x):
                got = value.type if not _is_num(value) else repr(x)
                raise self.err(
                    StaticError,
                    f"init {form}: {what} must be a finite compile-time number, got {got}",
                    arg.loc,
                )
            if float32_becomes(x) == "inf":  # (a fold: a literal is checked as it is read)
                shown = f"init {form}: {what} {x!r}"
                raise self.err(StaticError, outside_float32(shown, "inf"), arg.loc)
            values.append(x)
        if rule == "normal" and not values[1] > 0:
            raise self.err(
                StaticError, f"init {form}: std must be > 0, got {values[1]!r}", v.args[1].loc
            )
        if rule == "uniform" and not values[0] < values[1]:
            raise self.err(
                StaticError,
                f"init {form}: low must be below high, got {values[0]!r} and {values[1]!r}",
                v.args[0].loc,
            )
        return (rule, *values)

    def number_clause(self, p: ast.Param, info: ast.ParamInfo, key: str, v) -> None:
        """A numeric `lr` or `init` (a compile-time expression) -> info.lr / .init (and the raw
        value of an init through an activation expression)."""
        if key == "init" and isinstance(v, ast.Name) and v.id not in self.ctx.consts:
            hint = suggest(v.id, INIT_RULES) or (
                " (expected " + ", ".join(INIT_RULES) + ", normal(mean, std), uniform(low, high),"
                " unit() or a number)"
            )
            raise self.err(UnknownNameError, f"unknown init rule '{v.id}'{hint}", v.loc)
        what = "a compile-time number"
        if key == "init":
            what = "a rule name or " + what
        value = self.expr(v, Scope("constant"))
        if not _is_num(value):
            raise self.err(
                StaticError, f"{key} of '{p.name}' must be {what}, got {value.type}", v.loc
            )
        x = float(value.extra)
        if not math.isfinite(x) or (key == "lr" and x < 0):
            bound = " >= 0" if key == "lr" else ""
            raise self.err(
                StaticError, f"{key} of '{p.name}' must be a finite number{bound}, got {x!r}", v.loc
            )
        becomes = float32_becomes(x)  # a fold (a literal is checked as it is read)
        if becomes == "inf":  # (one below float32's smallest normal: 0, as computed)
            raise self.err(
                StaticError, outside_float32(f"{key} {x!r} of '{p.name}'", becomes), v.loc
            )
        if key == "lr":
            info.lr = x
            return
        info.init = x
        if info.activation in (*NAMED_ACTIVATIONS, "identity"):
            self.init_in_range(p, info, x, v.loc)
        else:
            info.init_raw = self.init_raw(p, x, v.loc)

    def init_in_range(self, p: ast.Param, info: ast.ParamInfo, value: float, loc: Loc) -> None:
        """A numeric init through a named activation: the trainer inverts it (activations.py),
        clipping what it cannot invert, so a value it would change is an error here."""
        problem = init_problem(info.activation, value, math.prod(info.shape))
        if problem is None:
            return
        kind, why = problem
        head = f"init {value!r} of '{p.name}'"
        if kind == "unreachable":
            text = f"{head}: no raw value gives it through the activation '{unparse(p.activation)}'"
        else:
            text = f"{head}: too close to the edge of the activation '{unparse(p.activation)}'"
        raise self.err(StaticError, f"{text} ({why})", loc)

    def init_raw(self, p: ast.Param, value: float, loc: Loc) -> float:
        """The raw value whose activation (applied per component) is `value`."""
        with self.ctx.sampled():
            raw = invert.raw_value(self, p.activation, value)
        if raw is None:
            raise self.err(
                StaticError,
                f"init {value!r} of '{p.name}': no raw value gives it through the activation "
                f"'{unparse(p.activation)}'",
                loc,
            )
        return raw

    def type_named(self, name: str, loc: Loc):
        if name == "scalar":
            return SCALAR
        if name == "quat":
            return VecT(4, True)
        n = vec_size(name)
        if n is not None and n <= MAX_VEC:
            return VecT(n)
        if name.startswith("mat"):
            dims = name[3:].split("x")
            sizes = [size_digits(d) for d in dims]
            if 1 <= len(dims) <= 2 and None not in sizes:
                m, n = sizes[0], sizes[-1]
                if m <= MAX_VEC and n <= MAX_VEC:
                    return MatT(m, n)
        raise self.err(UnknownNameError, f"unknown type '{name}'" + suggest(name, _TYPE_NAMES), loc)


def _random_rule(v) -> str | None:
    """The random init `v` names (`normal(0, 0.1)`, or `normal` without its arguments), or
    None. A rule name wins over a function of the same name, as over a constant."""
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
        v = v.func
    if isinstance(v, ast.Name) and v.id in RANDOM_INITS:
        return v.id
    return None
