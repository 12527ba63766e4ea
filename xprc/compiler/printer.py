"""SymPy expressions -> Python/JAX source text: the printer of the generated modules.

`jnp.` functions, exact integer powers (`x*x`, or `x ** 3` which JAX lowers to
`lax.integer_pow`), `1/sqrt` as `lax.rsqrt`, min/max as `jnp.minimum/maximum` (in the response,
a nest of them as one `rt.minimum/maximum` call with a cheap backward), selects as `jnp.where`
(already NaN-guarded by simplify.py). Numbers print as Python literals, which JAX treats as
weakly typed, so the module runs in float32 and float64 alike. An expression longer than
MAX_EXPR names its longest parts (`z_<n> = ...`, evaluated in the same order, so the numbers do
not change); one nested deeper than HOIST_DEPTH is hoisted the same way (Python's parser limit).
codegen.py assembles the module around what this prints.
"""

from __future__ import annotations

import math
import re

import sympy

from xprc.compiler.parse import float32_becomes
from xprc.compiler.symops import (
    Abs,
    Acos,
    Asin,
    Atan,
    Atan2,
    CameraCall,
    Ceil,
    Cmp,
    Cos,
    Cosh,
    Erf,
    Erfc,
    ErfInv,
    Exp,
    Expm1,
    Floor,
    LAnd,
    Lgamma,
    LNot,
    Log,
    Log1p,
    LOr,
    Mod,
    PowF,
    Recip,
    RSqrt,
    Sigmoid,
    Sign,
    Sin,
    Sinh,
    Softplus,
    Sqrt,
    StopGrad,
    Tan,
    Tanh,
    Where,
    XMax,
    XMin,
)

ATOM, UNARY, MUL, ADD, CMP = 100, 60, 50, 40, 30
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

# The special functions' module; codegen imports it in the modules that call it.
SPECIAL = "jax.scipy.special"

_FUNCS = {
    Exp: "jnp.exp", Log: "jnp.log", Sin: "jnp.sin", Cos: "jnp.cos",
    Tan: "jnp.tan", Asin: "jnp.arcsin", Acos: "jnp.arccos",
    Atan: "jnp.arctan", Tanh: "jnp.tanh", Abs: "jnp.abs",
    Sigmoid: "jax.nn.sigmoid", Floor: "jnp.floor", Ceil: "jnp.ceil", Sign: "jnp.sign",
    Atan2: "jnp.arctan2", XMax: "jnp.maximum", XMin: "jnp.minimum", Where: "jnp.where",
    LAnd: "jnp.logical_and", LOr: "jnp.logical_or", LNot: "jnp.logical_not",
    Sqrt: "jnp.sqrt", RSqrt: "lax.rsqrt",
    Softplus: "jax.nn.softplus", Log1p: "jnp.log1p", Expm1: "jnp.expm1",
    StopGrad: "lax.stop_gradient", Mod: "jnp.mod",
    Erf: f"{SPECIAL}.erf", Erfc: f"{SPECIAL}.erfc", ErfInv: f"{SPECIAL}.erfinv",
    Lgamma: f"{SPECIAL}.gammaln", Sinh: "jnp.sinh", Cosh: "jnp.cosh",
}  # fmt: skip


_CHAINS = {XMax: "rt.maximum", XMin: "rt.minimum"}


def _flatten(e) -> list:
    """The arguments of a nest of the same max/min, in order: max(max(a, b), c) -> a, b, c."""
    out = []
    for a in e.args:
        out += _flatten(a) if a.func is e.func else [a]
    return out


def ident(name: str) -> str:
    """Assert that `name` is a plain identifier before it is written as code."""
    if not _IDENT.match(name):
        raise AssertionError(f"not an identifier: {name!r}")  # pragma: no cover
    return name


class OutsideFloat32(Exception):
    """A number of the simplified code that float32, where renders run, cannot hold (constants
    combined by the simplifier: `x * 1e20 * 1e20` is `1e40 * x`); `args[0]` the number."""


def literal(x: float) -> str:
    """A number as a Python literal (nan and infinities as `jnp.` constants)."""
    if math.isnan(x):
        return "jnp.nan"
    if math.isinf(x):
        return "jnp.inf" if x > 0 else "-jnp.inf"
    return repr(float(x))


# Python's parser refuses more than 200 nested brackets in one statement ("too many nested
# parentheses"): a deeper subexpression is hoisted into its own statement `z_<n> = ...`.
HOIST_DEPTH = 50
# An expression printed longer than this names its longest parts (`z_<n> = ...` statements
# before it), so generated lines stay readable (about 100 characters).
MAX_EXPR = 84
MAX_LINE = 100  # a stack of outputs longer than this is written one item a line


def _nesting(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


class Printer:
    """SymPy expression -> Python source text, with minimal parentheses. Subexpressions nested
    deeper than HOIST_DEPTH become statements in `hoisted`, which the caller emits (`flush`)
    before the lines that use them; use one Printer per generated function."""

    def __init__(self, chains: bool = False, names: dict | None = None) -> None:
        self.names = names or {}  # symbol -> the name it prints as (simplify's Program.names)
        self.memo: dict = {}
        self.hoisted: list[str] = []
        self.count = 0  # z_<n> names made so far (unique in the function)
        # In the response: a nested max (min) is one `rt.maximum(a, b, c, ...)`, whose backward
        # is cheap (runtime.py); per-primitive code keeps jnp.maximum and its even split of ties.
        self.chains = chains

    def __call__(self, e) -> str:
        return self.pr(e)[0]

    def wrap(self, e, prec: int) -> str:
        s, p = self.pr(e)
        return f"({s})" if p < prec else s

    def pr(self, e) -> tuple[str, int]:
        if e in self.memo:
            return self.memo[e]
        out = self._pr(e)
        for _ in range(len(e.args) * 2):  # each turn names one part: the text shrinks or stops
            if len(out[0]) <= MAX_EXPR or not self._shorten(e, out[0]):
                break
            out = self._pr(e)
        if out[0].count("(") > HOIST_DEPTH and _nesting(out[0]) > HOIST_DEPTH:
            out = (self._hoist_text(out[0]), ATOM)
        self.memo[e] = out
        return out

    def _hoist_text(self, text: str) -> str:
        name = f"z_{self.count}"
        self.count += 1
        self.hoisted.append(f"{name} = {text}")
        return name

    def _shorten(self, e, text: str) -> bool:
        """Name the longest part of `e` (an argument, or an argument's argument) that its text
        `text` spells out, so the text fits MAX_EXPR; False when no part is left to name.
        Python evaluates the parts in the same order either way, so numbers do not change."""
        args = _flatten(e) if self.chains and e.func in _CHAINS else e.args  # rt.maximum(a, b, c)
        parts = [a for a in args if a.args]
        parts += [g for a in parts for g in a.args if g.args]
        parts += [-a for a in parts if _negative(a)]  # an Add prints `- x` for a term -x
        best = None
        for x in parts:
            got = self.memo.get(x)
            if got is None or _IDENT.match(got[0]) or len(got[0]) < 8:
                continue
            if got[0] in text and (best is None or len(got[0]) > len(self.memo[best][0])):
                best = x
        if best is None:
            return False
        self.memo[best] = (self._hoist_text(self.memo[best][0]), ATOM)
        for a in e.args:  # an argument that spelled out the named part is printed again
            if a is not best and best in a.args:
                self.memo.pop(a, None)
        return True

    def name(self, e) -> str:
        """`e` printed as one name: a statement of its own when it is not one already."""
        text, prec = self.pr(e)
        if _IDENT.match(text) or prec == ATOM and len(text) < 24:
            return text
        self.memo[e] = (self._hoist_text(text), ATOM)
        return self.memo[e][0]

    def flush(self, indent: str = "    ") -> list[str]:
        """The hoisted statements printed so far (then forgotten), indented."""
        lines, self.hoisted = [indent + h for h in self.hoisted], []
        return lines

    def _pr(self, e) -> tuple[str, int]:
        if e is sympy.true or e is sympy.false:
            return ("True" if e is sympy.true else "False"), ATOM
        if isinstance(e, sympy.Symbol):
            return ident(self.names.get(e, e.name)), ATOM
        if e in (sympy.zoo, sympy.oo, sympy.S.NegativeInfinity, sympy.nan, sympy.I):
            raise OutsideFloat32(str(e))
        if isinstance(e, (sympy.Number, sympy.NumberSymbol)):
            v = float(e)
            if math.isnan(v) or float32_becomes(v) == "inf":
                raise OutsideFloat32(repr(v))
            s = literal(v)
            return s, (UNARY if s.startswith("-") else ATOM)
        if isinstance(e, sympy.Add):
            return self.add(e)
        if isinstance(e, sympy.Mul):
            return self.mul(e)
        if isinstance(e, sympy.Pow):
            return self.power(e)
        if isinstance(e, (Cmp, sympy.core.relational.Relational)):
            op = e.op if isinstance(e, Cmp) else e.rel_op
            return f"{self.wrap(e.args[0], CMP + 1)} {op} {self.wrap(e.args[1], CMP + 1)}", CMP
        if isinstance(e, CameraCall):  # pragma: no cover - simplify turns these into statements
            raise AssertionError("camera call left in an expression")
        if isinstance(e, Recip):
            return f"1.0/{self.wrap(e.args[0], MUL + 1)}", MUL
        if isinstance(e, PowF):
            return f"{self.wrap(e.args[0], ATOM)} ** {self.wrap(e.args[1], ATOM)}", MUL + 5
        if self.chains and e.func in _CHAINS:
            args = ", ".join(self.arg(a) for a in _flatten(e))
            return f"{_CHAINS[e.func]}({args})", ATOM
        if e.func in _FUNCS:
            if e.func in (XMax, XMin, Where, Mod) and len(e.args) > 1:
                args = ", ".join(self.arg(a) for a in e.args)
            else:
                args = ", ".join(self(a) for a in e.args)
            return f"{_FUNCS[e.func]}({args})", ATOM
        raise AssertionError(f"cannot print {type(e).__name__}")  # pragma: no cover

    def arg(self, a) -> str:
        """Integers print as floats inside selects so the result stays floating point."""
        if isinstance(a, sympy.Integer):
            return literal(float(a))
        return self(a)

    def add(self, e) -> tuple[str, int]:
        terms = list(e.args)
        # numbers last reads better: x + 1.0
        terms = [t for t in terms if not t.is_Number] + [t for t in terms if t.is_Number]
        out = ""
        for i, t in enumerate(terms):
            neg = _negative(t)
            if i == 0:
                out = "-" + self.wrap(-t, MUL) if neg else self.wrap(t, ADD)
            elif neg:
                out += " - " + self.wrap(-t, MUL)
            else:
                out += " + " + self.wrap(t, ADD + 1)
            if len(out) > MAX_EXPR and i < len(terms) - 1:  # (a + b) + c: the same sum
                out = self._hoist_text(out)
        return out, ADD

    def mul(self, e) -> tuple[str, int]:
        coeff, rest = e.as_coeff_mul()
        for f in rest:  # SymPy can leave 1.0 (or another number) beside the coefficient
            if f.is_Number:
                coeff = coeff * f
        rest = [f for f in rest if not f.is_Number]
        num: list[str] = []
        den: list[str] = []
        for f in rest:
            if isinstance(f, Recip):
                den.append(self.wrap(f.args[0], MUL + 1))
            elif isinstance(f, sympy.Pow) and isinstance(f.base, Recip) and f.exp.is_Integer:
                den.append(self.wrap(sympy.Pow(f.base.args[0], f.exp), MUL + 1))
            elif isinstance(f, sympy.Pow) and f.exp.is_Number and f.exp < 0:
                ex = -f.exp
                if ex == sympy.Rational(1, 2):
                    num.append(f"lax.rsqrt({self(f.base)})")
                elif ex == 1:
                    den.append(self.wrap(f.base, MUL + 1))
                else:
                    den.append(self.wrap(sympy.Pow(f.base, ex, evaluate=False), MUL + 1))
            else:
                num.append(self.wrap(f, MUL))
        sign = ""
        if float(coeff) == -1.0:
            sign = "-"
        elif float(coeff) != 1.0:
            c = self.arg(coeff) if isinstance(coeff, sympy.Integer) else self(coeff)
            if c.startswith("-"):
                sign, c = "-", c[1:]
            num.insert(0, c)
        text = "*".join(num) if num else "1.0"
        if den:
            d = den[0] if len(den) == 1 else "(" + "*".join(den) + ")"
            text = f"{text}/{d}"
        return sign + text, MUL

    def power(self, e) -> tuple[str, int]:
        b, ex = e.base, e.exp
        if ex.is_Integer:
            n = int(ex)
            if n < 0:
                return f"1.0/{self.wrap(sympy.Pow(b, -n, evaluate=False), MUL + 1)}", MUL
            bs, bp = self.pr(b)
            if bp >= ATOM and n <= 3 and isinstance(b, sympy.Symbol):
                return "*".join([bs] * n), MUL  # a call is computed once: `f(x) ** 2`
            return f"{self.wrap(b, ATOM)} ** {n}", MUL + 5
        if ex == sympy.Rational(1, 2):
            return f"jnp.sqrt({self(b)})", ATOM
        if ex == sympy.Rational(-1, 2):
            return f"lax.rsqrt({self(b)})", ATOM
        if ex.is_Rational and ex.q == 2:
            root = f"jnp.sqrt({self(b)})"
            n = int(ex.p)
            if n > 0:
                return f"{root} ** {n}", MUL + 5
            return f"1.0/({root} ** {-n})", MUL
        return f"{self.wrap(b, ATOM)} ** {self.wrap(ex, ATOM)}", MUL + 5


def _negative(t) -> bool:
    if t.is_Number:
        return bool(t < 0)
    if isinstance(t, sympy.Mul):
        c, _ = t.as_coeff_mul()
        return bool(c < 0)
    return False
