"""Stage 3: typed IR -> SymPy, one scalar expression per component.

Inputs (raw parameters, camera attributes, pixel, ray, per-primitive values read by the response)
become plain SymPy symbols whose names are the local variable names of the generated code. The
camera model is opaque: `camera.project`, `.project_valid` and `.jacobian` become `CameraCall`
applications. Operations that SymPy would rewrite in unhelpful ways (min, max, select, logic)
and elementary functions are our own unevaluated functions (SymPy's `exp` alone can spend
seconds in `logcombine` on a large argument); numbers are folded in Python so SymPy never sees
a complex intermediate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import sympy
from sympy.core.parameters import distribute

from xprc.compiler import ast
from xprc.compiler.ast import MatT, Node, ScalarT, VecT
from xprc.compiler.names import _UNARY_MATH

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


class StopGrad(Op):
    """x, with no gradient (lax.stop_gradient)."""

    nargs = 1


class CameraCall(Op):
    """CameraCall(method, output, x, y, z): output `output` of camera.<method>(x, y, z)."""

    nargs = 5


CAMERA_METHODS = ("project", "project_valid", "jacobian")
CAMERA_OUTPUTS = {"project": 2, "project_valid": 1, "jacobian": 6}
BOOLEAN_FUNCS = (LAnd, LOr, LNot, Cmp)

# Where each camera attribute lives on the Python camera object.
CAMERA_CODE = {"rotation": "R", "translation": "t", "position": "position"}

# SH constants (REFERENCE.md section 3).
SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792,
         0.5462742152960396)  # fmt: skip
SH_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
         -0.4570457994644658, 1.445305721320277, -0.5900435899266435)  # fmt: skip
NORMALIZE_EPS = 1e-24  # normalize(v) = v / sqrt(max(|v|^2, eps)): finite at v = 0


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


# ---------------------------------------------------------------------------------------------
# Input symbols


@dataclass(frozen=True)
class Input:
    """Where an input symbol's value comes from in the generated code."""

    kind: str  # raw | camera | pixel | ray_origin | ray_dir | prim
    name: str  # parameter / camera attribute / prim name ("" for pixel and rays)
    index: tuple[int, ...]  # component within the value


@dataclass
class Lowered:
    """The spec as SymPy: what simplify.py turns into straight-line programs."""

    checked: ast.Checked
    inputs: dict[sympy.Symbol, Input]
    activate: dict[str, list[sympy.Expr]]  # param -> flat components (raw symbols)
    project: dict[str, list[sympy.Expr]]  # centre, depth, box, valid, color
    prim: dict[sympy.Symbol, sympy.Expr]  # response's per-primitive symbols -> project values
    prim_display: dict[sympy.Symbol, str] = field(default_factory=dict)
    alpha: sympy.Expr = sympy.S.Zero
    pixel: dict[str, list[sympy.Expr]] = field(default_factory=dict)  # per-pixel outputs


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


def _safe(f, *xs):
    try:
        r = f(*xs)
    except (ValueError, ZeroDivisionError):
        return math.nan
    except OverflowError:
        return math.inf
    return float(r)


class Lowerer:
    def __init__(self, checked: ast.Checked) -> None:
        self.checked = checked
        self.inputs: dict[sympy.Symbol, Input] = {}
        self.memo: dict[int, object] = {}
        self.display: dict[sympy.Symbol, str] = {}

    # -- inputs --------------------------------------------------------------------------------

    def symbol(self, kind: str, name: str, index: tuple[int, ...], typ) -> sympy.Symbol:
        if kind == "raw":
            base = f"r_{name}"
        elif kind == "camera":
            base = f"c_{name}"
        elif kind == "prim":
            base = f"q_{name}"
        elif kind == "camera_model":
            base = f"is_{name}"
        elif kind == "pixel":
            base = "px" if index == (0,) else "py"
            index = index
        else:
            base = ("ro_" if kind == "ray_origin" else "rd_") + "xyz"[index[0]]
        if kind in ("raw", "camera", "prim") and index:
            sym_name = base + "__" + "_".join(map(str, index))
        else:
            sym_name = base
        s = sympy.Symbol(sym_name, finite=True)
        self.inputs[s] = Input(kind, name, index)
        if kind == "prim":
            self.display[s] = name + _component_suffix(typ, index)
        return s

    def input_value(self, node: Node):
        kind, name = node.extra
        typ = node.type

        def build(t, index):
            if isinstance(t, ScalarT) or isinstance(t, ast.BoolT):
                return self.symbol(kind, name, index, node.type)
            if isinstance(t, VecT):
                return tuple(build(ast.SCALAR, (*index, i)) for i in range(t.n))
            if isinstance(t, MatT):
                return tuple(build(VecT(t.n), (*index, i)) for i in range(t.m))
            return tuple(build(t.elem, (*index, i)) for i in range(t.n))

        return build(typ, ())

    # -- expressions -----------------------------------------------------------------------------

    def value(self, node: Node):
        key = id(node)
        if key in self.memo:
            return self.memo[key][1]
        v = self.compute(node)
        self.memo[key] = (node, v)  # keep node alive so ids stay unique
        return v

    def compute(self, node: Node):
        op = node.op
        if op == "num":
            return _num(node.extra)
        if op == "boolean":
            return sympy.true if node.extra else sympy.false
        if op == "input":
            return self.input_value(node)
        args = [self.value(a) for a in node.args]
        if op == "pack":
            return tuple(args)
        if op == "get":
            return args[0][node.extra]
        if op in ("neg", "add", "sub", "mul", "div", "pow"):
            return self.elementwise(op, *args)
        if op == "matmul":
            return matmul(node.args[0].type, args[0], node.args[1].type, args[1])
        if op == "transpose":
            return transpose(args[0])
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            return compare(op, *args)
        if op in ("and", "or"):
            return logic(op, *args)
        if op == "not":
            return lnot(args[0])
        if op == "camera":
            return self.camera(node.extra, args[0])
        if op == "call":
            return self.call(node, args)
        raise AssertionError(op)  # pragma: no cover

    def elementwise(self, op, *args):
        if any(isinstance(a, tuple) for a in args):
            n = max(len(a) for a in args if isinstance(a, tuple))
            parts = [a if isinstance(a, tuple) else (a,) * n for a in args]
            return tuple(self.elementwise(op, *xs) for xs in zip(*parts, strict=False))
        return scalar_op(op, *args)

    def camera(self, method: str, p):
        x, y, z = p
        code = sympy.Integer(CAMERA_METHODS.index(method))
        outs = [CameraCall(code, sympy.Integer(k), x, y, z) for k in range(CAMERA_OUTPUTS[method])]
        if method == "project":
            return tuple(outs)
        if method == "project_valid":
            return outs[0]
        return (tuple(outs[:3]), tuple(outs[3:]))

    def call(self, node: Node, args):
        name = node.extra
        if isinstance(name, ast.Static):
            name, dims = name.name, name.ints
            if name == "eye":
                n = dims[0]
                return tuple(
                    tuple(sympy.S.One if i == j else sympy.S.Zero for j in range(n))
                    for i in range(n)
                )
            if name == "zeros":
                if len(dims) == 1:
                    return (sympy.S.Zero,) * dims[0]
                return tuple((sympy.S.Zero,) * dims[1] for _ in range(dims[0]))
            if name == "col":
                return tuple(row[dims[0]] for row in args[0])
            if name == "row":
                return args[0][dims[0]]
        if name in UNARY or name in ("min", "max", "atan2", "pow", "clamp", "where"):
            if name in ("min", "max") and len(args) == 1:
                return reduce_minmax(name, flatten(args[0]))
            if name == "where":
                c = args[0]
                return self.elementwise_where(c, args[1], args[2])
            if len(args) > 2 and name in ("min", "max"):
                acc = args[0]
                for a in args[1:]:
                    acc = self.map_fn(name, acc, a)
                return acc
            return self.map_fn(name, *args)
        return BUILTIN_IMPL[name](*args)

    def elementwise_where(self, c, a, b):
        if isinstance(a, tuple) or isinstance(b, tuple):
            n = len(a) if isinstance(a, tuple) else len(b)
            a = a if isinstance(a, tuple) else (a,) * n
            b = b if isinstance(b, tuple) else (b,) * n
            return tuple(self.elementwise_where(c, x, y) for x, y in zip(a, b, strict=False))
        return where(c, a, b)

    def map_fn(self, name, *args):
        if any(isinstance(a, tuple) for a in args):
            n = max(len(a) for a in args if isinstance(a, tuple))
            parts = [a if isinstance(a, tuple) else (a,) * n for a in args]
            return tuple(self.map_fn(name, *xs) for xs in zip(*parts, strict=False))
        if name in UNARY:
            return UNARY[name](args[0])
        if name == "min":
            return xmin(*args)
        if name == "max":
            return xmax(*args)
        if name == "clamp":
            return xmin(xmax(args[0], args[1]), args[2])
        if name == "atan2":
            y, x = args
            if _is_number(y) and _is_number(x):
                return _num(_safe(math.atan2, _fnum(y), _fnum(x)))
            return Atan2(y, x)
        if name == "pow":
            return scalar_op("pow", *args)
        raise AssertionError(name)  # pragma: no cover


def _component_suffix(typ, index) -> str:
    """`.x`, `[3]`, `[0][1]`: how a component of a value of type `typ` reads in a spec."""
    out = ""
    t = typ
    for i in index:
        if isinstance(t, VecT) and t.n <= 4:
            out += "." + ("wxyz" if t.quat else "xyzw")[i]
        else:
            out += f"[{i}]"
        t = VecT(t.n) if isinstance(t, MatT) else (t.elem if isinstance(t, ast.ArrayT) else t)
    return out


# ---------------------------------------------------------------------------------------------
# Scalar operations with number folding.


def scalar_op(op, a, b=None):
    if op == "neg":
        if _is_number(a):
            return _num(-_fnum(a)) if isinstance(a, sympy.Float) else -a
        return -a
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


def recip(x):
    if _is_number(x):
        return scalar_op("div", sympy.S.One, x)
    return Recip(x)


def _unary(fn_sym, fn_math):
    def f(x):
        if _is_number(x):
            return _num(_safe(fn_math, _fnum(x)))
        return fn_sym(x)

    return f


# The Op each elementwise builtin lowers to; the numbers it folds with come from the checker's
# own table (names._UNARY_MATH), so folding is written once.
_UNARY_OPS = {
    "exp": Exp, "log": Log, "sqrt": Sqrt, "rsqrt": RSqrt, "sin": Sin, "cos": Cos, "tan": Tan,
    "asin": Asin, "acos": Acos, "atan": Atan, "tanh": Tanh, "abs": Abs, "sigmoid": Sigmoid,
    "floor": Floor, "ceil": Ceil, "sign": Sign, "softplus": Softplus, "log1p": Log1p,
    "expm1": Expm1, "stop_gradient": StopGrad,
}  # fmt: skip
assert set(_UNARY_OPS) == set(_UNARY_MATH), set(_UNARY_OPS) ^ set(_UNARY_MATH)
UNARY = {name: _unary(op, _UNARY_MATH[name]) for name, op in _UNARY_OPS.items()}


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
# Vector and matrix builtins (values are nested tuples).


def _sum(xs):
    acc = xs[0]
    for x in xs[1:]:
        acc = acc + x
    return acc


def dot(a, b):
    return _sum([x * y for x, y in zip(a, b, strict=False)])


def matmul(ta, a, tb, b):
    if isinstance(ta, MatT) and isinstance(tb, MatT):
        cols = transpose(b)
        return tuple(tuple(dot(row, col) for col in cols) for row in a)
    if isinstance(ta, MatT):
        return tuple(dot(row, b) for row in a)
    return tuple(dot(a, col) for col in transpose(b))


def transpose(m):
    return tuple(zip(*m, strict=False))


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def norm(v):
    return UNARY["sqrt"](dot(v, v))


def normalize(v):
    s = power(xmax(dot(v, v), sympy.Float(NORMALIZE_EPS)), sympy.Rational(-1, 2))
    return tuple(x * s for x in v)


def outer(a, b):
    return tuple(tuple(x * y for y in b) for x in a)


def total(v):
    return _sum(flatten(v))


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
    return _sum(terms)


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
    return _sum([m[i][i] for i in range(len(m))])


def quat_to_rotmat(q):
    w, x, y, z = q
    return (
        (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )


def sh_basis(d, count: int) -> list:
    """Real SH basis of REFERENCE.md section 3, constants included, first `count` terms."""
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
    out = tuple(_sum([b * coeffs[k][c] for k, b in enumerate(basis)]) for c in range(channels))
    return out[0] if channels == 1 else out


def max_eigenvalue(m):
    a, b, c = m[0][0], m[0][1], m[1][1]
    mid = (a + c) / 2
    return mid + UNARY["sqrt"](xmax(mid * mid - (a * c - b * m[1][0]), sympy.S.Zero))


BUILTIN_IMPL = {
    "dot": dot, "cross": cross, "norm": norm, "normalize": normalize, "outer": outer,
    "sum": total, "transpose": transpose, "inverse": inverse, "det": det, "diag": diag,
    "trace": trace, "quat_to_rotmat": quat_to_rotmat, "eval_sh": eval_sh,
    "max_eigenvalue": max_eigenvalue,
}  # fmt: skip


def lower(checked: ast.Checked) -> Lowered:
    """Lower every output of the checked spec to SymPy scalars."""
    with distribute(False):  # keep -(a + b) as one node so shared sums stay shared
        lw = Lowerer(checked)
        activate = {p.name: flatten(lw.value(p.value)) for p in checked.params}
        project = {}
        for name in ("centre", "depth", "box", "valid", "color"):
            v = lw.value(checked.outputs[name])
            project[name] = flatten(v)
        alpha = lw.value(checked.alpha)
        pixel = {k: flatten(lw.value(n)) for k, n in checked.pixel.items()}
        prim_syms = [s for s, i in lw.inputs.items() if i.kind == "prim"]
        prim = {}
        for s in prim_syms:
            info = lw.inputs[s]
            v = lw.value(checked.prim[info.name])
            for i in info.index:
                v = v[i]
            prim[s] = v
    return Lowered(
        checked, dict(lw.inputs), activate, project, prim, dict(lw.display), alpha, pixel
    )
