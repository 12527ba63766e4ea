"""The SymPy vocabulary the lowerer builds with: our unevaluated functions (printed by codegen),
and scalar operations that fold numbers in Python (so SymPy never sees a complex intermediate).
lower.py lowers the IR with them and builtin_functions.py lowers the built-in functions with
them; no stage logic lives here."""

from __future__ import annotations

import math

import sympy

from xprc.compiler.names import _fold_float

# ---------------------------------------------------------------------------------------------
# Our SymPy functions (printed by codegen).


class Op(sympy.Function):
    """Base of our functions: never evaluated by SymPy, and declared finite so SymPy's
    assumption queries (asked whenever it builds a Pow or Mul) stop here instead of walking
    the whole expression."""

    is_finite = True


class Recip(Op):
    """1 / x"""

    nargs = 1


class Sqrt(Op):
    nargs = 1


class RSqrt(Op):
    """1 / sqrt(x), printed as lax.rsqrt"""

    nargs = 1


class PowF(Op):
    """x ** y for a non-integer or symbolic exponent."""

    nargs = 2


class Mod(Op):
    """x mod y, the floor modulo (the sign of y, as Python's % and jnp.mod), printed as
    jnp.mod. Our own rather than SymPy's Mod, which rewrites its arguments when built."""

    nargs = 2


class Where(Op):
    """where(cond, a, b), elementwise select."""

    nargs = 3


class XMax(Op):
    nargs = 2


class XMin(Op):
    nargs = 2


class Sigmoid(Op):
    nargs = 1


class Floor(Op):
    nargs = 1


class Ceil(Op):
    nargs = 1


class Sign(Op):
    nargs = 1


class Atan2(Op):
    nargs = 2


class Cmp(Op):
    """A comparison `a OP b` (OP in the subclass). Our own rather than SymPy's relationals:
    those check their operands' realness whenever they are rebuilt (by cse, say) and refused
    `where(c, -a / where(c, b, 1), -1) > 0` (crash 5 of issue 13) and any NaN operand."""

    nargs = 2
    op = ""


class Lt(Cmp):
    op = "<"


class Le(Cmp):
    op = "<="


class Gt(Cmp):
    op = ">"


class Ge(Cmp):
    op = ">="


class EqC(Cmp):
    op = "=="


class NeC(Cmp):
    op = "!="


class LAnd(Op):
    nargs = 2


class LOr(Op):
    nargs = 2


class LNot(Op):
    nargs = 1


class Exp(Op):
    nargs = 1


class Log(Op):
    nargs = 1


class Sin(Op):
    nargs = 1


class Cos(Op):
    nargs = 1


class Tan(Op):
    nargs = 1


class Asin(Op):
    nargs = 1


class Acos(Op):
    nargs = 1


class Atan(Op):
    nargs = 1


class Tanh(Op):
    nargs = 1


class Abs(Op):
    nargs = 1


class Softplus(Op):
    """log(1 + exp(x)), printed as jax.nn.softplus (stable for large |x|)."""

    nargs = 1


class Log1p(Op):
    nargs = 1


class Expm1(Op):
    nargs = 1


class Erf(Op):
    nargs = 1


class Erfc(Op):
    nargs = 1


class ErfInv(Op):
    """The inverse of erf on [-1, 1] (jax.scipy.special.erfinv)."""

    nargs = 1


class Lgamma(Op):
    """log |Gamma(x)| (jax.scipy.special.gammaln)."""

    nargs = 1


class Sinh(Op):
    nargs = 1


class Cosh(Op):
    nargs = 1


class StopGrad(Op):
    """x, with no gradient (lax.stop_gradient)."""

    nargs = 1


class CameraCall(Op):
    """CameraCall(method, output, x, y, z[, r]): output `output` of camera.<method>(x, y, z[, r])
    (`shutter_box` takes the radius r)."""

    nargs = (5, 6)


CAMERA_METHODS = ("project", "project_valid", "jacobian", "world_to_camera_shutter", "shutter_box")
CAMERA_OUTPUTS = {
    "project": 2, "project_valid": 1, "jacobian": 6, "world_to_camera_shutter": 3, "shutter_box": 4,
}  # fmt: skip
BOOLEAN_FUNCS = (LAnd, LOr, LNot, Cmp)

# Where each camera attribute lives on the Python camera object.
CAMERA_CODE = {"rotation": "R", "translation": "t", "position": "position"}

_BOOL_TYPES = (
    sympy.core.relational.Relational,
    sympy.logic.boolalg.BooleanAtom,
    sympy.logic.boolalg.BooleanFunction,
    *BOOLEAN_FUNCS,
)


def is_boolean(e) -> bool:
    """Whether a lowered expression is bool-valued (symbols never are: inputs are floats)."""
    if isinstance(e, _BOOL_TYPES):
        return True
    if isinstance(e, CameraCall):
        return int(e.args[0]) == CAMERA_METHODS.index("project_valid")
    return isinstance(e, Where) and is_boolean(e.args[1])


def flatten(v) -> list:
    if isinstance(v, tuple):
        return [x for item in v for x in flatten(item)]
    return [v]


def _num(x) -> sympy.Expr:
    if isinstance(x, bool):
        return sympy.true if x else sympy.false
    if isinstance(x, int):
        return sympy.Integer(x)
    if math.isnan(x):
        return sympy.nan
    if math.isinf(x):
        return sympy.oo if x > 0 else -sympy.oo
    if x == int(x) and abs(x) < 2**53:
        return sympy.Float(x)
    return sympy.Float(x)


def _is_number(e) -> bool:
    return isinstance(e, sympy.Number)


def _fnum(e) -> float:
    return float(e)


def _safe(f, *xs) -> float:
    """f(*xs) as a float, NaN or inf where Python's math raises: the checker's fold
    (`names._fold_float`), so the checker and the lowerer fold a number alike."""
    return float(_fold_float(f, *xs))


# ---------------------------------------------------------------------------------------------
# Scalar operations with number folding.


def scalar_op(op, a, b=None):
    if op == "neg":
        if _is_number(a):
            return _num(-_fnum(a)) if isinstance(a, sympy.Float) else -a
        return -a
    if op == "mod":
        return modulo(a, b)
    if _is_number(a) and _is_number(b) and op != "pow":
        # (SymPy's Float(0.0) == 0 is False: compare as Python floats)
        if op == "div" and _fnum(b) == 0.0:
            return _num(math.nan if _fnum(a) == 0.0 else math.copysign(math.inf, _fnum(a)))
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        return a * b if op == "mul" else a / b
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        if _is_number(b):
            return a * (_num(math.inf) if _fnum(b) == 0.0 else 1 / b)
        return a * recip(b)
    if op == "pow":
        return power(a, b)
    raise AssertionError(op)  # pragma: no cover


def power(a, b):
    """a ** b: integer powers stay SymPy Pow (printed as products), the rest our functions."""
    if isinstance(b, sympy.Float) and float(b) == int(float(b)) and abs(float(b)) <= 64:
        b = sympy.Integer(int(float(b)))
    elif isinstance(b, sympy.Float) and float(b * 2) == int(float(b * 2)):
        b = sympy.Rational(int(float(b * 2)), 2)
    if _is_number(a) and _is_number(b):
        if _fnum(a) == 0.0 and _fnum(b) < 0:
            return _num(math.inf)
        return _num(_safe(math.pow, _fnum(a), _fnum(b)))
    if b.is_Integer and abs(int(b)) <= 64:
        n = int(b)
        if n == 0:
            return sympy.S.One
        return sympy.Pow(a, n) if n > 0 else recip(sympy.Pow(a, -n))
    if b == sympy.Rational(1, 2):
        return Sqrt(a)
    if b == sympy.Rational(-1, 2):
        return RSqrt(a)
    return PowF(a, b)


def modulo(a, b):
    """a mod b (floor modulo); numbers fold as jnp.mod computes (x mod 0 is nan)."""
    if _is_number(a) and _is_number(b):
        if a.is_Integer and b.is_Integer and int(b) != 0:
            return sympy.Integer(int(a) % int(b))
        return _num(_safe(lambda x, y: math.nan if y == 0 else x % y, _fnum(a), _fnum(b)))
    return Mod(a, b)


def recip(x):
    if _is_number(x):
        return scalar_op("div", sympy.S.One, x)
    return Recip(x)


def xmax(a, b):
    if _is_number(a) and _is_number(b):
        return _num(_safe(max, _fnum(a), _fnum(b)))
    if a == b:
        return a
    return XMax(a, b)


def xmin(a, b):
    if _is_number(a) and _is_number(b):
        return _num(_safe(min, _fnum(a), _fnum(b)))
    if a == b:
        return a
    return XMin(a, b)


def reduce_minmax(name, xs):
    acc = xs[0]
    for x in xs[1:]:
        acc = xmin(acc, x) if name == "min" else xmax(acc, x)
    return acc


def where(c, a, b):
    if c is sympy.true:
        return a
    if c is sympy.false:
        return b
    if a == b:
        return a
    return Where(c, a, b)


_REL = {"lt": Lt, "le": Le, "gt": Gt, "ge": Ge, "eq": EqC, "ne": NeC}


def compare(op, a, b):
    if _is_number(a) and _is_number(b):
        x, y = _fnum(a), _fnum(b)
        v = {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}
        return sympy.true if v[op] else sympy.false
    if op in ("lt", "le", "gt", "ge"):  # exp(x) <op> c  ->  x <op> log(c) for a number c > 0:
        # the same test (exp is increasing; NaN fails both) without an exp per evaluation
        if isinstance(a, Exp) and _is_number(b) and 0.0 < _fnum(b) < math.inf:
            return _REL[op](a.args[0], _num(math.log(_fnum(b))))
        if isinstance(b, Exp) and _is_number(a) and 0.0 < _fnum(a) < math.inf:
            return _REL[op](_num(math.log(_fnum(a))), b.args[0])
    return _REL[op](a, b)


def logic(op, a, b):
    if op == "and":
        if a is sympy.false or b is sympy.false:
            return sympy.false
        if a is sympy.true:
            return b
        if b is sympy.true:
            return a
        return LAnd(a, b)
    if a is sympy.true or b is sympy.true:
        return sympy.true
    if a is sympy.false:
        return b
    if b is sympy.false:
        return a
    return LOr(a, b)


def lnot(a):
    if a is sympy.true:
        return sympy.false
    if a is sympy.false:
        return sympy.true
    return LNot(a)


# ---------------------------------------------------------------------------------------------
# Vectors and matrices (values are nested tuples): what the operators need.


def sum_all(xs):
    """xs[0] + xs[1] + ...: one Add built at once (adding one term at a time rebuilds the
    growing sum each time: quadratic in its length)."""
    return xs[0] if len(xs) == 1 else sympy.Add(*xs)


def dot(a, b):
    return sum_all([x * y for x, y in zip(a, b, strict=False)])


def transpose(m):
    return tuple(zip(*m, strict=False))


def bmap(f, *args):
    """f applied elementwise over nested tuples (vectors, matrices), scalars broadcast."""
    if any(isinstance(a, tuple) for a in args):
        n = max(len(a) for a in args if isinstance(a, tuple))
        parts = [a if isinstance(a, tuple) else (a,) * n for a in args]
        return tuple(bmap(f, *xs) for xs in zip(*parts, strict=False))
    return f(*args)


def where_each(c, a, b):
    """where(c, a, b) for a scalar condition, elementwise over the branches."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        n = len(a) if isinstance(a, tuple) else len(b)
        a = a if isinstance(a, tuple) else (a,) * n
        b = b if isinstance(b, tuple) else (b,) * n
        return tuple(where_each(c, x, y) for x, y in zip(a, b, strict=False))
    return where(c, a, b)


# ---------------------------------------------------------------------------------------------
# Sorting networks (`sort`).


def sorting_network(n: int) -> list[tuple[int, int]]:
    """Batcher's odd-even merge sort for n inputs: compare-and-swap pairs (i, j), i < j, in
    order (a power of two's network with the pairs past n left out, which sorts any n)."""
    pairs = []
    p = 1
    while p < n:
        k = p
        while k >= 1:
            for j in range(k % p, n - k, 2 * k):
                for i in range(min(k, n - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return pairs


def sort_values(xs: tuple) -> tuple:
    """xs in ascending order through the network: each compare-and-swap is min(a, b) and
    max(b, a). The swapped order matters for gradients at a tie: a max or min chain takes the
    derivative of its first argument that attains it (runtime.maximum), so the low output
    follows a and the high one b, a permutation's derivative; jnp.maximum's even split at a
    tie gives 1/2 to each, the same for both outputs: also consistent."""
    xs = list(xs)
    for i, j in sorting_network(len(xs)):
        a, b = xs[i], xs[j]
        xs[i], xs[j] = xmin(a, b), xmax(b, a)
    return tuple(xs)
