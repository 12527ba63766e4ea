"""The built-in functions, one entry each (Builtin): the typing rule the checker runs (arity,
argument and result types, constant folding), the lowering to SymPy that lower.py runs, the
Python function that folds numbers (elementwise built-ins: both stages fold with it), and the
line docs/language.md prints. Adding a built-in is one entry here (and its rule functions).

The checker (check/calls.py) and the lowerer (lower.py) read TABLE; tests/test_check.py asserts that
the docs' table is `markdown_table()`. `cutoff` is typed here but built by the checker
(check/invert.py); it never reaches the lowerer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import sympy

from xprc.compiler import ast, folds
from xprc.compiler.ast import SCALAR, BoolT, MatT, Node, VecT
from xprc.compiler.folds import fold_pow
from xprc.compiler.names import MAX_VEC, _fold_float, _is_int, _is_num, _num, shown
from xprc.compiler.symops import (
    Abs,
    Acos,
    Asin,
    Atan,
    Atan2,
    Ceil,
    Cos,
    Cosh,
    Erf,
    Erfc,
    ErfInv,
    Exp,
    Expm1,
    Floor,
    Lgamma,
    Log,
    Log1p,
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
    _fnum,
    _is_number,
    _safe,
    bmap,
    dot,
    flatten,
    power,
    recip,
    scalar_op,
    sort_values,
    sorting_network,
    sum_all,
    transpose,
    where_each,
    xmax,
    xmin,
)  # fmt: skip
from xprc.compiler.symops import _num as _sym_num
from xprc.conventions import SH_C0
from xprc.errors import StaticError, XprTypeError

# ---------------------------------------------------------------------------------------------
# Typing rules: each gets the call (_Call) and returns its checked node.


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
        return _num(float(_fold_float(TABLE[c.name].fold, x.extra)))
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
        raise c.ck.err(StaticError, f"index {shown(i.extra)} out of range for {t}", c.e.args[1].loc)
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


MAX_SORT = 16  # `sort` unrolls a sorting network: 63 compare-and-swaps for 16 values


def _sort(c: _Call) -> Node:
    c.arity(1)
    c.need(0, _is_vec, "a vector (`sort([a, b, c])`)")
    n = c.args[0].type.n
    if n > MAX_SORT:
        pairs = len(sorting_network(n))
        raise c.ck.err(
            StaticError,
            f"'sort' sorts at most {MAX_SORT} values (a sorting network of min/max, unrolled), "
            f"got vec{n} ({pairs} compare-and-swaps)",
            c.e.args[0].loc,
        )
    x = c.args[0]
    if x.op == "pack" and all(_is_num(a) for a in x.args):  # numbers: sorted now
        return c.ck.pack(sorted(x.args, key=lambda a: a.extra), c.e.loc)
    return c.call(VecT(n), x)


def _max_eigenvalue(c: _Call) -> Node:
    c.arity(1)
    c.need(0, lambda t: t == MatT(2, 2), "a mat2")
    return c.call(SCALAR, *c.args)


# ---------------------------------------------------------------------------------------------
# Lowering: lowered arguments (SymPy scalars in nested tuples) -> the call's value.

# SH constants: the real SH basis of degree 0-3 of the 3DGS code (Kerbl et al. 2023), as gsplat.
SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792,
         0.5462742152960396)  # fmt: skip
SH_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
         -0.4570457994644658, 1.445305721320277, -0.5900435899266435)  # fmt: skip
NORMALIZE_EPS = 1e-24  # normalize(v) = v / sqrt(max(|v|^2, eps)): finite at v = 0


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def norm(v):
    return _sqrt(dot(v, v))


def normalize(v):
    s = power(xmax(dot(v, v), sympy.Float(NORMALIZE_EPS)), sympy.Rational(-1, 2))
    return tuple(x * s for x in v)


def outer(a, b):
    return tuple(tuple(x * y for y in b) for x in a)


def total(v):
    return sum_all(flatten(v))


def det(m):
    n = len(m)
    if n == 1:
        return m[0][0]
    if n == 2:
        return m[0][0] * m[1][1] - m[0][1] * m[1][0]
    terms = []
    for j in range(n):
        minor = tuple(tuple(r[k] for k in range(n) if k != j) for r in m[1:])
        t = m[0][j] * det(minor)
        terms.append(t if j % 2 == 0 else -t)
    return sum_all(terms)


def inverse(m):
    n = len(m)
    d = det(m)
    inv = recip(d)
    if n == 1:
        return ((inv,),)
    if n == 2:
        return ((m[1][1] * inv, -m[0][1] * inv), (-m[1][0] * inv, m[0][0] * inv))
    cof = []
    for i in range(n):
        row = []
        for j in range(n):
            minor = tuple(tuple(m[r][c] for c in range(n) if c != j) for r in range(n) if r != i)
            c = det(minor)
            row.append(c if (i + j) % 2 == 0 else -c)
        cof.append(row)
    return tuple(tuple(cof[j][i] * inv for j in range(n)) for i in range(n))  # adjugate / det


def diag(x):
    if isinstance(x[0], tuple):
        return tuple(x[i][i] for i in range(len(x)))
    n = len(x)
    return tuple(tuple(x[i] if i == j else sympy.S.Zero for j in range(n)) for i in range(n))


def trace(m):
    return sum_all([m[i][i] for i in range(len(m))])


def quat_to_rotmat(q):
    w, x, y, z = q
    return (
        (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )


def sh_basis(d, count: int) -> list:
    """The real SH basis of 3DGS (degree 0-3), constants included, first `count` terms."""
    x, y, z = d
    xx, yy, zz = x * x, y * y, z * z
    basis = [
        sympy.Float(SH_C0),
        -SH_C1 * y, SH_C1 * z, -SH_C1 * x,
        SH_C2[0] * (x * y), SH_C2[1] * (y * z), SH_C2[2] * (2 * zz - xx - yy),
        SH_C2[3] * (x * z), SH_C2[4] * (xx - yy),
        SH_C3[0] * (y * (3 * xx - yy)), SH_C3[1] * (x * y * z),
        SH_C3[2] * (y * (4 * zz - xx - yy)), SH_C3[3] * (z * (2 * zz - 3 * xx - 3 * yy)),
        SH_C3[4] * (x * (4 * zz - xx - yy)), SH_C3[5] * (z * (xx - yy)),
        SH_C3[6] * (x * (xx - 3 * yy)),
    ]  # fmt: skip
    return [sympy.sympify(b) for b in basis[:count]]


def eval_sh(coeffs, d):
    basis = sh_basis(d, len(coeffs))
    channels = len(coeffs[0])
    out = tuple(sum_all([b * coeffs[k][c] for k, b in enumerate(basis)]) for c in range(channels))
    return out[0] if channels == 1 else out


def max_eigenvalue(m):
    a, b, c = m[0][0], m[0][1], m[1][1]
    mid = (a + c) / 2
    return mid + _sqrt(xmax(mid * mid - (a * c - b * m[1][0]), sympy.S.Zero))


def _unary_lower(op, fold):
    def f(x):
        if _is_number(x):
            return _sym_num(_safe(fold, _fnum(x)))
        return op(x)

    return f


def _sqrt(x):  # inside norm and max_eigenvalue: sqrt's own entry
    return TABLE["sqrt"].lower([x], ())


def _atan2(fold):
    def f(y, x):
        if _is_number(y) and _is_number(x):
            return _sym_num(_safe(fold, _fnum(y), _fnum(x)))
        return Atan2(y, x)

    return f


def _lower_min_max(pair):
    def lower(args, ints):
        if len(args) == 1:  # min(v), max(v): reduce
            xs = flatten(args[0])
            acc = xs[0]
            for x in xs[1:]:
                acc = pair(acc, x)
            return acc
        acc = args[0]
        for a in args[1:]:
            acc = bmap(pair, acc, a)
        return acc

    return lower


def _lower_sized(name):
    def lower(args, ints):
        zero, one = sympy.S.Zero, sympy.S.One
        if name == "eye":
            n = ints[0]
            return tuple(tuple(one if i == j else zero for j in range(n)) for i in range(n))
        if len(ints) == 1:
            return (zero,) * ints[0]
        return tuple((zero,) * ints[1] for _ in range(ints[0]))

    return lower


def _lower_cutoff(args, ints):  # pragma: no cover - the checker builds cutoff (check/invert.py)
    raise AssertionError("cutoff is built by the checker")


def _map(f):
    return lambda args, ints: bmap(f, *args)


def _plain(f):
    return lambda args, ints: f(*args)


# ---------------------------------------------------------------------------------------------
# The table.


@dataclass(frozen=True)
class Builtin:
    """One built-in function."""

    typing: Callable  # (_Call) -> Node: arity, argument and result types, check-time folding
    lower: Callable  # (lowered args, static ints) -> lowered value
    docs: tuple  # ((call as the docs write it, what it does), ...): equal texts share a row
    fold: Callable | None = None  # numbers -> number (elementwise built-ins)


_ELEMENTWISE = "elementwise"
_BROADCAST = "elementwise (scalars broadcast)"
_REDUCE = "reduce a vector or matrix to a scalar"
_VECTORS = "vectors"
_MATRICES = "matrices"
_SIZED = "built from compile-time sizes: `diag(v)` a matrix, `diag(M)` a vector"
_INDEXED = "a column / row (compile-time index)"
_NORMALIZE = (
    f"`v / sqrt(max(dot(v, v), {NORMALIZE_EPS:g}))`: finite, with finite gradients, at `v = 0`"
)
_SPECIAL = (
    "elementwise, with exact derivatives (`jax.scipy.special.erf`, `.erfc`, `.erfinv`, "
    "`.gammaln`; `jnp.sinh`, `jnp.cosh`): `erfc(x)` = `1 - erf(x)` without the cancellation, "
    "`erfinv` the inverse of `erf` on [-1, 1] (infinite at -1 and 1), `lgamma(x)` = "
    "`log(abs(Gamma(x)))` (infinite at 0, -1, -2, ...)"
)
_ACCURATE = (
    "elementwise, accurate where the naive forms are not (`jax.nn.softplus`, `jnp.log1p`, "
    "`jnp.expm1`); `softplus` is finite with finite gradients for every real `x`"
)


def _u(op, fold, doc=_ELEMENTWISE, sig=None) -> Callable:
    """An elementwise function of one argument: lowers to `op`, folds numbers with `fold`."""
    return lambda name: Builtin(
        _unary, _map(_unary_lower(op, fold)), ((sig or f"`{name}`", doc),), fold
    )


_UNARY = {
    "exp": _u(Exp, math.exp), "log": _u(Log, folds.log), "sqrt": _u(Sqrt, math.sqrt),
    "rsqrt": _u(RSqrt, folds.rsqrt), "sin": _u(Sin, math.sin),
    "cos": _u(Cos, math.cos), "tan": _u(Tan, math.tan), "asin": _u(Asin, math.asin),
    "acos": _u(Acos, math.acos), "atan": _u(Atan, math.atan), "tanh": _u(Tanh, math.tanh),
    "abs": _u(Abs, abs), "sigmoid": _u(Sigmoid, folds.sigmoid), "floor": _u(Floor, math.floor),
    "ceil": _u(Ceil, math.ceil), "sign": _u(Sign, lambda x: float((x > 0) - (x < 0))),
    "softplus": _u(Softplus, folds.softplus, _ACCURATE, "`softplus(x)` = `log(1 + exp(x))`"),
    "log1p": _u(Log1p, folds.log1p, _ACCURATE, "`log1p(x)` = `log(1 + x)`"),
    "expm1": _u(Expm1, math.expm1, _ACCURATE, "`expm1(x)` = `exp(x) - 1`"),
    "erf": _u(Erf, math.erf, _SPECIAL), "erfc": _u(Erfc, math.erfc, _SPECIAL),
    "erfinv": _u(ErfInv, folds.erfinv, _SPECIAL), "lgamma": _u(Lgamma, folds.lgamma, _SPECIAL),
    "sinh": _u(Sinh, math.sinh, _SPECIAL), "cosh": _u(Cosh, math.cosh, _SPECIAL),
}  # fmt: skip

TABLE: dict[str, Builtin] = {
    **{name: make(name) for name, make in _UNARY.items()},
    "atan2": Builtin(_elementwise(2), _map(_atan2(math.atan2)),
                     (("`atan2(y, x)`", _ELEMENTWISE),), math.atan2),
    "pow": Builtin(_elementwise(2), _map(lambda a, b: scalar_op("pow", a, b)),
                   (("`pow(x, y)`", _ELEMENTWISE),), fold_pow),
    "min": Builtin(_min_max, _lower_min_max(xmin),
                   (("`min(a, b, ...)`", _BROADCAST), ("`min(v)`", _REDUCE)), min),
    "max": Builtin(_min_max, _lower_min_max(xmax),
                   (("`max(a, b, ...)`", _BROADCAST), ("`max(v)`", _REDUCE)), max),
    "clamp": Builtin(_elementwise(3), _map(lambda x, lo, hi: xmin(xmax(x, lo), hi)),
                     (("`clamp(x, lo, hi)`", _BROADCAST),), lambda x, lo, hi: min(max(x, lo), hi)),
    "sum": Builtin(_sum, _plain(lambda v: sum_all(flatten(v))), (("`sum(v)`", _REDUCE),)),
    "where": Builtin(_where, _plain(where_each), (("`where(cond, a, b)`", "select on a scalar "
                     "`bool` (a compile-time condition picks a branch)"),)),
    "dot": Builtin(_dot, _plain(dot), (("`dot(a, b)`", _VECTORS),)),
    "cross": Builtin(_cross, _plain(cross), (("`cross(a, b)`", _VECTORS),)),
    "norm": Builtin(_norm, _plain(norm), (("`norm(v)`", _VECTORS),)),
    "normalize": Builtin(_normalize, _plain(normalize), (("`normalize(v)`", _NORMALIZE),)),
    "outer": Builtin(_outer, _plain(outer), (("`outer(a, b)`", _VECTORS),)),
    "transpose": Builtin(_transpose, _plain(transpose), (("`transpose(M)`", _MATRICES),)),
    "inverse": Builtin(_square(3, lambda t: t), _plain(inverse),
                       (("`inverse(M)` (n <= 3)", _MATRICES),)),
    "det": Builtin(_square(4, lambda t: SCALAR), _plain(det), (("`det(M)` (n <= 4)", _MATRICES),)),
    "trace": Builtin(_square(None, lambda t: SCALAR), _plain(trace), (("`trace(M)`", _MATRICES),)),
    "diag": Builtin(_diag, _plain(diag), (("`diag(v)`, `diag(M)`", _SIZED),)),
    "eye": Builtin(_sized, _lower_sized("eye"), (("`eye(n)`", _SIZED),)),
    "zeros": Builtin(_sized, _lower_sized("zeros"), (("`zeros(n)`, `zeros(m, n)`", _SIZED),)),
    "col": Builtin(_col_row, lambda args, ints: tuple(r[ints[0]] for r in args[0]),
                   (("`col(M, j)`", _INDEXED),)),
    "row": Builtin(_col_row, lambda args, ints: args[0][ints[0]], (("`row(M, i)`", _INDEXED),)),
    "quat_to_rotmat": Builtin(_quat_to_rotmat, _plain(quat_to_rotmat), (("`quat_to_rotmat(q)`",
                              "unit quaternion (w, x, y, z) -> `mat3`"),)),
    "eval_sh": Builtin(_eval_sh, _plain(eval_sh), (("`eval_sh(sh, dir)`", "the real SH of "
                       "3DGS, degree 0-3 (from the rows), -> `vec3`"),)),
    "sort": Builtin(_sort, _plain(sort_values), (("`sort(v)`", "`v`'s components in "
                    f"ascending order (n <= {MAX_SORT}): a sorting network of `min` / `max`, "
                    "with their gradients"),)),
    "max_eigenvalue": Builtin(_max_eigenvalue, _plain(max_eigenvalue), (("`max_eigenvalue(M)`",
                              "symmetric `mat2`: `mid + sqrt(max(mid^2 - det, 0))`"),)),
    "cutoff": Builtin(lambda c: c.ck.cutoff(c.args, c.e), _lower_cutoff, (
        ("`cutoff(level)`, `cutoff(level, nu, ...)`", "the largest `g >= 0` with `density(g, nu, "
         "...) >= level` (see \"Derived footprints\"); no gradient"),)),
    "stop_gradient": _u(StopGrad, lambda x: x, "`x`, with no gradient (`lax.stop_gradient`)",
                        "`stop_gradient(x)`")("stop_gradient"),
}  # fmt: skip
BUILTINS = frozenset(TABLE) | {"quat"}  # quat(w, x, y, z) is a constructor (check/calls.py)
UNARY = frozenset(name for name, b in TABLE.items() if b.typing is _unary)  # elementwise, 1 arg


def markdown_table() -> str:
    """The built-in functions' table of docs/language.md: one row per description."""
    rows: dict[str, list[str]] = {}
    for entry in TABLE.values():
        for sig, doc in entry.docs:
            rows.setdefault(doc, []).append(sig)
    lines = ["| function | what it does |", "|---|---|"]
    lines += [f"| {', '.join(sigs)} | {doc} |" for doc, sigs in rows.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m xprc.compiler.builtin_functions: the docs' table
    print(markdown_table(), end="")
