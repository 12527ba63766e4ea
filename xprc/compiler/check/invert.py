"""Inverting scalar functions on the typed IR: derived footprints (`cutoff`) and numeric inits.

`solve(ck, f, x, y)` returns IR for the `x` with `f(x) = y`, peeling invertible operations off
`f` one at a time (exp <-> log, powers, affine steps, sigmoid <-> logit, ...), or None when `f`
is not such a chain (a select, min/max, `x` on both sides of an operation). The result is built
with the checker's own node constructors, so numbers fold: with a numeric `y` it is a number.

`cutoff(ck, density, extra, level)`: the largest g >= 0 with density(g, extra...) >= level, for
kernels that do not increase in g. Symbolic when `solve` succeeds (through a guard `max(g, c)`
too); otherwise a fixed number of
bisection steps on log2(g) in [-40, 40], returning the upper end of the final bracket (so the
footprint errs on the large side). Footprints are not differentiated: the result is wrapped in
`stop_gradient`.
"""

from __future__ import annotations

import math

from xprc.compiler.ast import SCALAR, BoolT, Node, ScalarT
from xprc.errors import XprError

LEVEL_FLOOR = 1e-30  # cutoff(level) treats level <= 0 as this (no kernel reaches exactly 0)
BISECT_LO, BISECT_HI, BISECT_STEPS = -40.0, 40.0, 48  # log2(g) bracket; width 80 / 2^48


def depends(node: Node, x: Node, memo: dict | None = None) -> bool:
    """Whether `node` reads the placeholder `x`."""
    memo = {} if memo is None else memo
    key = id(node)
    if key not in memo:
        memo[key] = node is x or any(depends(a, x, memo) for a in node.args)
    return memo[key]


class _Builder:
    """Scalar IR with folding, through the checker's constructors."""

    def __init__(self, ck) -> None:
        self.ck = ck
        self.loc = ck.ctx.cur_loc

    def num(self, v) -> Node:
        return Node("num", SCALAR, (), v)

    def bin(self, op: str, a, b) -> Node:
        a = self.num(a) if not isinstance(a, Node) else a
        b = self.num(b) if not isinstance(b, Node) else b
        return self.ck.binary(op, a, b, self.loc)

    def call(self, name: str, *xs: Node) -> Node:
        from xprc.compiler.builtin_functions import TABLE, UNARY
        from xprc.compiler.names import _fold_float

        if len(xs) == 1 and name in UNARY and xs[0].op == "num":
            return self.num(float(_fold_float(TABLE[name].fold, xs[0].extra)))
        if name in ("min", "max") and all(x.op == "num" for x in xs):
            return self.num(TABLE[name].fold(x.extra for x in xs))
        if name == "where" and xs[0].op == "boolean":
            return xs[1] if xs[0].extra else xs[2]
        typ = xs[1].type if name == "where" else xs[0].type
        return self.ck.node("call", typ, *xs, extra=name)


# Inverse of a one-argument builtin: y -> x with f(x) = y.
_INVERSE = {
    "exp": lambda b, y: b.call("log", y),
    "log": lambda b, y: b.call("exp", y),
    "sqrt": lambda b, y: b.bin("*", y, y),
    "rsqrt": lambda b, y: b.bin("/", 1, b.bin("*", y, y)),
    "expm1": lambda b, y: b.call("log1p", y),
    "log1p": lambda b, y: b.call("expm1", y),
    "sigmoid": lambda b, y: b.call("log", b.bin("/", y, b.bin("-", 1, y))),
    "softplus": lambda b, y: b.call("log", b.call("expm1", y)),
    "erf": lambda b, y: b.call("erfinv", y),
    "erfinv": lambda b, y: b.call("erf", y),
    "erfc": lambda b, y: b.call("erfinv", b.bin("-", 1, y)),
}


def solve(ck, f: Node, x: Node, y: Node, memo: dict | None = None) -> Node | None:
    """The `x` with f(x) = y, or None when `f` is not a chain of invertible steps in `x`."""
    memo = {} if memo is None else memo
    b = _Builder(ck)
    while True:
        if f is x:
            return y
        if not isinstance(f.type, ScalarT):
            return None
        dep = [depends(a, x, memo) for a in f.args]
        if f.op == "neg":
            f, y = f.args[0], b.bin("-", 0, y)
            continue
        if f.op in ("add", "sub", "mul", "div", "pow") and sum(dep) == 1:
            p, q = f.args
            if dep[0]:
                inv = {"add": "-", "sub": "+", "mul": "/", "div": "*"}.get(f.op)
                if inv is not None:
                    f, y = p, b.bin(inv, y, q)
                elif q.op == "num" and q.extra == 0:
                    return None
                else:  # p^q = y -> p = y^(1/q) (the non-negative root)
                    f, y = p, b.bin("^", y, b.bin("/", 1, q))
            else:
                if f.op == "add":
                    f, y = q, b.bin("-", y, p)
                elif f.op == "sub":
                    f, y = q, b.bin("-", p, y)
                elif f.op == "mul":
                    f, y = q, b.bin("/", y, p)
                elif f.op == "div":
                    f, y = q, b.bin("/", p, y)
                else:  # p^q = y -> q = log(y) / log(p)
                    f, y = q, b.bin("/", b.call("log", y), b.call("log", p))
            continue
        if f.op == "call" and f.extra in _INVERSE and len(f.args) == 1:
            f, y = f.args[0], _INVERSE[f.extra](b, y)
            continue
        if f.op == "call" and f.extra == "pow" and dep == [True, False]:
            f, y = f.args[0], b.bin("^", y, b.bin("/", 1, f.args[1]))
            continue
        if f.op == "call" and f.extra == "where":
            return _solve_where(ck, f, x, y, memo)
        if f.op == "call" and f.extra == "max" and len(f.args) == 2 and f.args.count(x) == 1:
            # A guard max(x, c) (c free of x: `max(g, 1e-20)`): x = y where it is inactive
            # (y >= c); no x gives a y below c, and c, the guard's edge, is the largest x
            # giving f(c) (the kernel's peak, where cutoff clamps its levels).
            guard = f.args[1] if f.args[0] is x else f.args[0]
            if not depends(guard, x, memo):
                return b.call("max", y, guard)
        return None


def _solve_where(ck, f: Node, x: Node, y: Node, memo) -> Node | None:
    """`where(x < k, h, c)` with c <= 0 (a kernel with compact support): for y > 0 the answer is
    min(solve(h), k)."""
    cond, a, other = f.args
    if cond.op not in ("lt", "le") or other.op != "num" or other.extra > 0:
        return None
    lhs, k = cond.args
    if not depends(lhs, x, memo) or depends(k, x, memo):
        return None
    inner = solve(ck, a, x, y, memo)
    edge = solve(ck, lhs, x, k, memo)
    if inner is None or edge is None:
        return None
    return _Builder(ck).call("min", inner, edge)


# where `first_increase` samples the kernel: g = 0 and 2^(k / 8) for log2(g) in [-40, 40]
INCREASE_SAMPLES = [0.0] + [2.0 ** (k / 8) for k in range(8 * -40, 8 * 40 + 1)]
INCREASE_TOL = 1e-9  # relative: rounding in a kernel's formula is not an increase


def first_increase(density_call) -> tuple[float, float, float, float] | None:
    """(a, density(a), b, density(b)): the first run of INCREASE_SAMPLES over which the kernel,
    folded at numbers, increases (a where it starts to, b where it stops); None when it never
    does there (or cannot be folded: a kernel of per-primitive arguments). `cutoff` assumes a
    kernel that never increases in g."""
    values = []
    for g in INCREASE_SAMPLES:
        try:
            out = density_call(Node("num", SCALAR, (), g))
        except XprError:  # outside the kernel's domain at this g (sqrt of a negative...)
            values.append(math.nan)
            continue
        if out.op != "num":
            return None
        values.append(float(out.extra))

    def rises(i: int) -> bool:
        lo, hi = values[i], values[i + 1]
        finite = math.isfinite(lo) and math.isfinite(hi)
        return finite and hi > lo + INCREASE_TOL * max(abs(lo), abs(hi))

    last = len(values) - 1
    start = next((i for i in range(last) if rises(i)), None)
    if start is None:
        return None
    end = start + 1
    while end < last and rises(end):
        end += 1
    return INCREASE_SAMPLES[start], values[start], INCREASE_SAMPLES[end], values[end]


def cutoff(ck, density_call, level: Node) -> tuple[Node, str] | None:
    """The largest g >= 0 with density(g) >= level (`density_call(g)` inlines the kernel), and
    how it was derived (`xprc check` prints it): "closed form" or the bisection and its cost."""
    b = _Builder(ck)
    y = b.call("max", level, b.num(LEVEL_FLOOR))
    g = Node("input", SCALAR, (), ("cutoff_g", ""))
    f = density_call(g)
    if not isinstance(f.type, ScalarT):
        return None
    top = density_call(b.num(0))  # levels above the peak have no g: clamp, giving g = 0
    x = None
    if isinstance(top.type, ScalarT):
        try:
            x = solve(ck, f, g, b.call("min", y, top))
        except XprError:  # a step folded to nonsense (0 * g: division by zero): bisect instead
            x = None
    if x is not None and not depends(x, g):
        return b.call("stop_gradient", b.call("max", x, b.num(0))), "closed form"
    # Bisection on s = log2(g): the kernel at 2^s is >= y for s <= s*, below it after.
    lo, hi = b.num(BISECT_LO), b.num(BISECT_HI)
    ln2 = math.log(2.0)
    for _ in range(BISECT_STEPS):
        mid = b.bin("*", b.bin("+", lo, hi), 0.5)
        inside = density_call(b.call("exp", b.bin("*", mid, ln2)))
        ok = b.bin(">=", inside, y)
        if not isinstance(ok.type, BoolT):  # pragma: no cover - density is scalar here
            return None
        lo = b.call("where", ok, mid, lo)
        hi = b.call("where", ok, hi, mid)
    upper = b.call("exp", b.bin("*", hi, ln2))
    node = b.call("stop_gradient", b.bin("*", upper, 1.0 + 1e-6))
    how = (
        f"bisection, {BISECT_STEPS} steps ({count_selects(node)} selects, {BISECT_STEPS} "
        "evaluations of the density): no closed form (see docs/language.md, Derived footprints)"
    )
    return node, how


def count_selects(node: Node) -> int:
    """The `where` nodes `node` is built from (each counted once)."""
    seen: set[int] = set()
    stack = [node]
    count = 0
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        count += n.op == "call" and n.extra == "where"
        stack.extend(n.args)
    return count


def raw_value(ck, activation, value: float) -> float | None:
    """The raw scalar r with activation(r) = value (the activation applied to a scalar `raw`):
    peeled symbolically when possible, else bisection on a sign change over a wide grid."""
    from xprc.compiler.check.scopes import Binding, Scope

    def apply(raw: Node) -> Node | None:
        scope = Scope("activation", {"raw": Binding("local", raw, ck.ctx.cur_loc)})
        try:
            out = ck.expr(activation, scope)
        except XprError:  # e.g. normalize(raw) needs a vector: not invertible per component
            return None
        return out if isinstance(out.type, ScalarT) else None

    def forward(r: float) -> float:
        out = apply(Node("num", SCALAR, (), r))
        return float(out.extra) if out is not None and out.op == "num" else math.nan

    def close(r) -> bool:
        return math.isfinite(r) and abs(forward(r) - value) <= 1e-9 * max(1.0, abs(value))

    x = Node("input", SCALAR, (), ("cutoff_g", ""))
    f = apply(x)
    if f is None:
        return None
    got = solve(ck, f, x, Node("num", SCALAR, (), value))
    if got is not None and got.op == "num" and close(float(got.extra)):
        return float(got.extra)
    grid = [-(10.0**k) for k in range(6, -7, -1)] + [0.0] + [10.0**k for k in range(-6, 7)]
    vals = [forward(r) - value for r in grid]
    for lo, hi, flo, fhi in zip(grid, grid[1:], vals, vals[1:], strict=False):
        if math.isfinite(flo) and math.isfinite(fhi) and (flo <= 0) != (fhi <= 0):
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                fm = forward(mid) - value
                if not math.isfinite(fm):
                    break
                if (fm <= 0) == (flo <= 0):
                    lo, flo = mid, fm
                else:
                    hi = mid
            r = 0.5 * (lo + hi)
            return r if close(r) or abs(forward(r) - value) <= 1e-7 * max(1, abs(value)) else None
    return None
