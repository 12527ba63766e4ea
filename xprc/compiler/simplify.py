"""Stage 4: SymPy outputs -> straight-line programs for activate, project and response.

1. Split the response: every subexpression that depends only on per-primitive values (not on the
   pixel or the ray) is hoisted into `project` and handed over in `attrs`, deduplicated, so the
   per-pixel code does the least work possible.
2. Guard selects: inside each branch of `where(c, a, b)`, the arguments of operations that can
   produce inf/NaN (division, sqrt, log, exp, camera calls...) are replaced by a safe constant
   when the branch is not taken (the "double where"), so gradients are never NaN.
3. Camera calls become tuple-valued statements, then `sympy.cse` finds shared subexpressions.
No `sympy.simplify`: it is slow on these expressions and XLA folds what is left.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy
from sympy.core.parameters import distribute

from xprc.compiler.lower import Input, Lowered
from xprc.compiler.symops import (
    CAMERA_METHODS,
    CAMERA_OUTPUTS,
    Acos,
    Asin,
    Atan2,
    CameraCall,
    Cosh,
    ErfInv,
    Exp,
    Expm1,
    Gt,
    Lgamma,
    Log,
    Log1p,
    Mod,
    PowF,
    Recip,
    RSqrt,
    Sinh,
    Sqrt,
    Tan,
    Where,
    is_boolean,
)

RAY_KINDS = ("pixel", "ray_origin", "ray_dir")
_OP_CALL = re.compile(r"\b[A-Z][A-Za-z0-9]*\(")  # our SymPy functions (Recip, XMax, ...) in str()


@dataclass
class Call:
    """`outs = camera.<method>(*args)`."""

    method: str
    outs: list[sympy.Symbol]
    args: list[sympy.Expr]


@dataclass
class Program:
    """A straight-line function body: statements (Call or (symbol, expr)) then outputs."""

    inputs: list[sympy.Symbol]  # input symbols the body reads, in first-use order
    body: list
    outputs: dict[str, list[sympy.Expr]]
    # Temporaries whose value is a spec local's: the name codegen prints for them (`v_cov2d_0_1`).
    names: dict[sympy.Symbol, str] = field(default_factory=dict)


@dataclass
class Simplified:
    lowered: Lowered
    inputs: dict[sympy.Symbol, Input]
    attrs: list[str]  # ATTRS names
    activate: Program
    project: Program
    response: Program
    identity: set[str] = field(default_factory=set)  # params whose activation is the identity


def rebuild(e, args):
    """e with new arguments; e itself when nothing changed (rebuilding makes SymPy re-evaluate
    the node, which is most of the cost of these passes)."""
    if len(args) == len(e.args) and all(a is b for a, b in zip(args, e.args, strict=True)):
        return e
    return e.func(*args)


class NodeMemo:
    """A memo keyed by node identity (each node is kept alive by its entry, so ids stay unique).
    Not keyed by value: looking up an equal but distinct DAG compares it as a tree, which for
    our heavily shared expressions takes exponential time (a 3DGUT variant's locals did)."""

    _MISSING = object()

    def __init__(self) -> None:
        self.table: dict[int, tuple] = {}

    def get(self, e, default=None):
        got = self.table.get(id(e), self._MISSING)
        return default if got is self._MISSING else got[1]

    def __contains__(self, e) -> bool:
        return id(e) in self.table

    def __getitem__(self, e):
        return self.table[id(e)][1]

    def __setitem__(self, e, value) -> None:
        self.table[id(e)] = (e, value)


def free_symbols(e, memo: NodeMemo) -> frozenset:
    """`e.free_symbols`, memoised: SymPy recomputes it by walking the tree, which for our
    heavily shared DAGs can take exponential time."""
    got = memo.get(e)
    if got is None:
        if isinstance(e, sympy.Symbol):
            got = frozenset([e])
        else:
            got = frozenset().union(*[free_symbols(a, memo) for a in e.args])
        memo[e] = got
    return got


# ---------------------------------------------------------------------------------------------
# 1. Hoisting per-primitive work out of the response


class _Hoister:
    def __init__(self, lowered: Lowered) -> None:
        self.lowered = lowered
        self.per_pixel = {s for s, i in lowered.inputs.items() if i.kind in RAY_KINDS}
        self.prim = set(lowered.prim)
        self.attrs: dict[sympy.Expr, sympy.Symbol] = {}  # project-side expr -> attr symbol
        self.attr_exprs: list[tuple[sympy.Symbol, sympy.Expr, str]] = []
        self.memo = NodeMemo()
        self.fs = NodeMemo()
        self.local_display: dict = {}  # a local's component (`W[0].x`) by its lowered value
        for e, name in lowered.local_names:
            self.local_display.setdefault(e, name)

    def symbols(self, e) -> frozenset:
        return free_symbols(e, self.fs)

    def kind(self, e) -> str:
        """'pixel' if e depends on the pixel/ray, 'prim' on a primitive, else 'uniform'."""
        syms = self.symbols(e)
        if syms & self.per_pixel:
            return "pixel"
        if syms & self.prim:
            return "prim"
        return "uniform"

    def attr(self, e) -> sympy.Expr:
        if is_boolean(e):  # attrs are floats: hoist inside comparisons, keep the logic here
            return e.func(*[self.hoist(a) for a in e.args]) if e.args else e
        value = e.xreplace(self.lowered.prim)
        flag = is_boolean(value)  # a bool read by the response: exported as 1.0 / 0.0
        if flag:
            value = Where(value, sympy.S.One, sympy.S.Zero)
        sym = self.attrs.get(value)
        if sym is None and not flag:
            # `w` and `-w` (LinPrim's face normals s * w) share one attr: the response negates it
            # (exact in floating point). Only structurally equal negations are found.
            neg = self.attrs.get(-value)
            if neg is not None:
                return -neg
        if sym is None:
            sym = sympy.Symbol(f"a{len(self.attrs)}")
            self.attrs[value] = sym
            self.attr_exprs.append((sym, value, self.name(e)))
        return Gt(sym, sympy.Float(0.5)) if flag else sym

    def name(self, e) -> str:
        """The ATTRS entry: the spec's own name (`conic.x`, a local's `W[0].x`) or a short
        formula of them; for a long formula, the values it is computed from
        (`f(quats.w, scales.x)`), made unique."""
        display = self.lowered.prim_display
        if e in display:
            text = display[e]
        elif e in self.local_display:
            text = self.local_display[e]
        else:
            text = str(e.xreplace({s: sympy.Symbol(d) for s, d in display.items()}))
            if len(text) > 48 or _OP_CALL.search(text):
                reads = sorted({display[s] for s in self.symbols(e) if s in display})
                text = "f(" + ", ".join(reads) + ")"
        taken = {n for _, _, n in self.attr_exprs}
        out, k = text, 2
        while out in taken:
            out, k = f"{text} [{k}]", k + 1
        return out

    def hoist(self, e) -> sympy.Expr:
        if e in self.memo:
            return self.memo[e]
        k = self.kind(e)
        if k == "uniform":
            out = e
        elif k == "prim":
            out = self.attr(e)
        elif isinstance(e, (sympy.Add, sympy.Mul)):
            group = [a for a in e.args if self.kind(a) != "pixel"]
            rest = [self.hoist(a) for a in e.args if self.kind(a) == "pixel"]
            nontrivial = [a for a in group if self.kind(a) == "prim"]
            if not nontrivial:
                out = e.func(*rest, *group)
            elif len(group) == 1:
                g = group[0]
                if (
                    isinstance(e, sympy.Add)
                    and isinstance(g, sympy.Mul)
                    and g.args[0].is_Number
                    and float(g.args[0]) == -1.0
                ):
                    # keep `p - q` a subtraction: export q, not -q
                    h = sympy.Mul(-1, self.attr(sympy.Mul(*g.args[1:])))
                else:
                    h = self.attr(g)
                out = e.func(*rest, h)
            else:
                out = e.func(*rest, self.attr(e.func(*group)))
        else:
            out = rebuild(e, [self.hoist(a) for a in e.args]) if e.args else e
        self.memo[e] = out
        return out


# ---------------------------------------------------------------------------------------------
# 2. NaN-safe selects


# Operations that can give inf/NaN (or an infinite derivative), and the argument that is safe
# for each: 0 for these, 1 for the rest (log(1) = lgamma(1) = 0).
_DANGEROUS = (Exp, Expm1, Log, Log1p, Tan, Asin, Acos, Atan2, CameraCall, Recip, Sqrt, RSqrt,
              PowF, Mod, ErfInv, Lgamma, Sinh, Cosh)  # fmt: skip
_SHUTTER_POINT = CAMERA_METHODS.index("world_to_camera_shutter")
_SAFE_AT_ZERO = (Exp, Expm1, Log1p, Asin, Acos, ErfInv, Sinh, Cosh)


def _dangerous(e) -> bool:
    if isinstance(e, sympy.Pow):
        ex = e.exp
        return not (ex.is_Integer and ex >= 0)
    if isinstance(e, CameraCall) and int(e.args[0]) == _SHUTTER_POINT:
        return False  # R(t) p + t(t) at a time without gradient: affine in p, finite
    return isinstance(e, _DANGEROUS)


def _safe_value(e):
    return sympy.S.Zero if isinstance(e, _SAFE_AT_ZERO) else sympy.S.One


class _Guard:
    def __init__(self) -> None:
        self.memo = NodeMemo()
        self.made: set = set()  # the guard selects we created (already safe: never rewrapped)
        self.fs = NodeMemo()  # free_symbols memo

    def guard(self, e):
        if e in self.memo:
            return self.memo[e]
        if not e.args:
            out = e
        elif isinstance(e, Where):
            c, a, b = e.args
            c = self.guard(c)
            a = _Protect(c, True, self.made, self.fs).run(self.guard(a))
            b = _Protect(c, False, self.made, self.fs).run(self.guard(b))
            out = rebuild(e, [c, a, b])
        else:
            out = rebuild(e, [self.guard(a) for a in e.args])
        self.memo[e] = out
        return out


class _Protect:
    """Make every dangerous op in one branch of a select safe when the branch is not taken."""

    def __init__(self, cond, taken: bool, made: set, fs: NodeMemo) -> None:
        self.cond, self.taken, self.made, self.fs = cond, taken, made, fs
        self.memo = NodeMemo()

    def wrap(self, arg, safe):
        if isinstance(arg, sympy.Number) or not free_symbols(arg, self.fs) or arg in self.made:
            return arg
        out = Where(self.cond, arg, safe) if self.taken else Where(self.cond, safe, arg)
        self.made.add(out)
        return out

    def run(self, e):
        if e in self.memo:
            return self.memo[e]
        if not e.args or is_boolean(e):
            out = e
        elif isinstance(e, Where):
            out = rebuild(e, [e.args[0], self.run(e.args[1]), self.run(e.args[2])])
        elif _dangerous(e):
            if isinstance(e, sympy.Pow):
                out = sympy.Pow(self.wrap(self.run(e.base), sympy.S.One), e.exp)
            elif isinstance(e, PowF):  # only the base can make x ** y blow up
                out = PowF(self.wrap(self.run(e.args[0]), sympy.S.One), self.run(e.args[1]))
            elif isinstance(e, Mod):  # only the divisor can (x mod 0 is nan)
                out = Mod(self.run(e.args[0]), self.wrap(self.run(e.args[1]), sympy.S.One))
            elif isinstance(e, CameraCall):
                m, k, *xs = e.args
                out = CameraCall(m, k, *[self.wrap(self.run(x), sympy.S.One) for x in xs])
            else:
                out = e.func(*[self.wrap(self.run(a), _safe_value(e)) for a in e.args])
        else:
            out = rebuild(e, [self.run(a) for a in e.args])
        self.memo[e] = out
        return out


# ---------------------------------------------------------------------------------------------
# 3. Camera calls and common subexpressions


class _Calls:
    def __init__(self, prefix: str) -> None:
        self.calls: dict[tuple, Call] = {}
        self.prefix = prefix
        self.memo = NodeMemo()

    def run(self, e):
        if e in self.memo:
            return self.memo[e]
        if not e.args:
            out = e
        elif isinstance(e, CameraCall):
            m, k, *xs = e.args
            xs = [self.run(x) for x in xs]
            method = CAMERA_METHODS[int(m)]
            key = (method, *xs)
            call = self.calls.get(key)
            if call is None:
                n = len(self.calls)
                names = {
                    "project": ["u", "v"],
                    "project_valid": ["ok"],
                    "jacobian": [f"j{i}" for i in range(6)],
                    "world_to_camera_shutter": ["qx", "qy", "qz"],
                    "shutter_box": [f"sb{i}" for i in range(4)],
                }[method]
                outs = [sympy.Symbol(f"{self.prefix}{nm}{n}") for nm in names]
                assert len(outs) == CAMERA_OUTPUTS[method]
                call = self.calls[key] = Call(method, outs, xs)
            out = call.outs[int(k)]
        else:
            out = rebuild(e, [self.run(a) for a in e.args])
        self.memo[e] = out
        return out


def _program(outputs: dict[str, list], inputs: dict, temp_prefix: str, locals_=()) -> Program:
    calls = _Calls("cam_")
    outs = {k: [calls.run(e) for e in v] for k, v in outputs.items()}
    call_list = list(calls.calls.values())
    locals_ = [(calls.run(e), name) for e, name in locals_]  # after the calls are listed
    flat = [e for v in outs.values() for e in v]
    exprs = flat + [a for c in call_list for a in c.args]
    temps = sympy.numbered_symbols(temp_prefix)
    repl, reduced = sympy.cse(exprs, symbols=temps, order="none") if exprs else ([], [])
    n = len(flat)
    pos = 0
    new_outs = {}
    for k, v in outs.items():
        new_outs[k] = reduced[pos : pos + len(v)]
        pos += len(v)
    for c in call_list:
        c.args = reduced[pos : pos + len(c.args)]
        pos += len(c.args)
    assert pos == len(reduced) and n <= pos
    # Order statements so each comes after what it reads (cse temps may read call outputs).
    items = [(s, e) for s, e in repl] + call_list
    defined_by = {}
    for it in items:
        for s in it.outs if isinstance(it, Call) else [it[0]]:
            defined_by[s] = it
    deps = []
    for it in items:
        reads = set()
        for e in it.args if isinstance(it, Call) else [it[1]]:
            reads |= e.free_symbols
        deps.append({id(defined_by[s]) for s in reads if s in defined_by})
    done: set[int] = set()
    body = []
    pending = list(range(len(items)))
    while pending:
        for j, idx in enumerate(pending):
            if deps[idx] <= done:
                body.append(items[idx])
                done.add(id(items[idx]))
                del pending[j]
                break
        else:  # pragma: no cover - cse never makes cycles
            raise AssertionError("cyclic statements")
    used = []
    seen = set()
    for it in body:
        for e in it.args if isinstance(it, Call) else [it[1]]:
            for s in sorted(e.free_symbols, key=str):
                if s in inputs and s not in seen:
                    seen.add(s)
                    used.append(s)
    for e in [e for v in new_outs.values() for e in v]:
        for s in sorted(e.free_symbols, key=str):
            if s in inputs and s not in seen:
                seen.add(s)
                used.append(s)
    return Program(used, body, new_outs, _temp_names(repl, locals_))


def _temp_names(repl: list, locals_: list) -> dict[sympy.Symbol, str]:
    """The temporaries of `sympy.cse` (in `repl` order) whose whole value is a local's:
    `v_` and the local's name, sanitised (`cov[0][1]` -> `v_cov_0_1`), made unique. No name
    the compiler makes starts with `v_`, and no keyword or builtin does either. Where locals
    share a value, the first assigned names it. Only the names change: symbols stay."""
    if not locals_:
        return {}
    keys = _Keys()
    want: dict[int, str] = {}
    for e, name in locals_:
        want.setdefault(keys.key(e), name)
    names: dict[sympy.Symbol, str] = {}
    taken: set[str] = set()
    for sym, e in repl:
        keys.temps[sym] = k = keys.key(e)
        name = want.get(k)
        if name is None:
            continue
        base = local_ident(name)
        out, n = base, 2
        while out in taken:
            out, n = f"{base}_{n}", n + 1
        taken.add(out)
        names[sym] = out
    return names


def local_ident(name: str) -> str:
    """The identifier of a temporary named after the local `name` (`p.x`, `cov[0][1]`): `v_`
    then its letters and digits, runs of anything else one `_` (`v_p_x`, `v_cov_0_1`)."""
    return "v_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


class _Keys:
    """A number per expression, equal for equal values: a temporary reads as the value it
    stands for, and a sum (product) of a temporary that is a sum (product) as the flat one SymPy
    builds. Numbered once per node (by identity): comparing these DAGs as trees is exponential."""

    def __init__(self) -> None:
        self.temps: dict[sympy.Symbol, int] = {}  # cse temporary -> the key of its value
        self.table: dict[tuple, int] = {}
        self.parts: list[tuple] = []  # key -> (func, child keys) or ("atom", type, atom)
        self.memo = NodeMemo()  # expr -> its key

    def intern(self, part: tuple) -> int:
        got = self.table.get(part)
        if got is None:
            got = self.table[part] = len(self.parts)
            self.parts.append(part)
        return got

    def key(self, e) -> int:
        if isinstance(e, sympy.Symbol) and e in self.temps:
            return self.temps[e]
        if e in self.memo:
            return self.memo[e]
        if not e.args:
            k = self.intern(("atom", type(e), e))
        elif isinstance(e, (sympy.Add, sympy.Mul)):
            kids: list[int] = []
            for a in e.args:
                ka = self.key(a)
                part = self.parts[ka]
                if a in self.temps and part[0] is e.func:  # (x + y) + z is x + y + z
                    kids.extend(part[1])
                else:
                    kids.append(ka)
            k = self.intern((e.func, tuple(sorted(kids))))
        else:
            k = self.intern((e.func, tuple(self.key(a) for a in e.args)))
        self.memo[e] = k
        return k


def simplify(lowered: Lowered) -> Simplified:
    with distribute(False):
        hoister = _Hoister(lowered)
        alpha = hoister.hoist(lowered.alpha)
        pixel = {k: [hoister.hoist(e) for e in v] for k, v in lowered.pixel.items()}
        locals_ = _hoist_locals(hoister, lowered.local_names)
        attr_syms = [s for s, _, _ in hoister.attr_exprs]
        inputs = dict(lowered.inputs)
        for s in attr_syms:
            inputs[s] = Input("attr", "", (int(str(s)[1:]),))
        guard = _Guard()
        project_out = {k: [guard.guard(e) for e in v] for k, v in lowered.project.items()}
        project_out["attrs"] = [guard.guard(e) for _, e, _ in hoister.attr_exprs]
        alpha = guard.guard(alpha)
        pixel = {f"pixel_{k}": [guard.guard(e) for e in v] for k, v in pixel.items()}
        activate_out = {k: [guard.guard(e) for e in v] for k, v in lowered.activate.items()}
        identity = {
            p.name for p in lowered.checked.params
            if all(e.is_Symbol and inputs.get(e) == Input("raw", p.name, idx)
                   for e, idx in zip(lowered.activate[p.name], _indices(p.shape), strict=False))
        }  # fmt: skip
        locals_ = [(guard.guard(e), name) for e, name in locals_]  # after every output
        activate = _program(
            {k: v for k, v in activate_out.items() if k not in identity}, inputs, "t"
        )
        project = _program(project_out, inputs, "t", locals_)
        response = _program({"alpha": [alpha], **pixel}, inputs, "t", locals_)
    return Simplified(
        lowered,
        inputs,
        [n for _, _, n in hoister.attr_exprs],
        activate,
        project,
        response,
        identity,
    )


def _hoist_locals(hoister: _Hoister, locals_: list) -> list:
    """The locals as the response reads them (a projection local is unchanged). One whose
    hoisting would export a value the outputs do not is dropped, and the export undone."""
    dropped: set = set()  # attrs made for a local alone (the hoister's memo may still use them)
    out = []
    for e, name in locals_:
        n = len(hoister.attr_exprs)
        h = hoister.hoist(e)
        for sym, value, _ in hoister.attr_exprs[n:]:
            del hoister.attrs[value]
            dropped.add(sym)
        del hoister.attr_exprs[n:]
        if not hoister.symbols(h) & dropped:
            out.append((h, name))
    return out


def _indices(shape):
    if not shape:
        return [()]
    out = [()]
    for n in shape:
        out = [(*o, i) for o in out for i in range(n)]
    return out
