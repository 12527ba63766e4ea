"""Stage 5: straight-line programs -> the source of a readable Python/JAX module.

Our own SymPy printer: `jnp.` functions, exact integer powers (`x*x`, or `x ** 3` which JAX
lowers to `lax.integer_pow`), `1/sqrt` as `lax.rsqrt`, min/max as `jnp.minimum/maximum` (in the
response, a nest of them as one `rt.minimum/maximum` call with a cheap backward), selects as
`jnp.where` (already NaN-guarded by simplify.py). Numbers print as Python literals, which JAX
treats as weakly typed, so the module runs in float32 and float64 alike. The only names in the
output that come from the spec are identifiers the checker accepted (no `__`, no keywords), and
they appear as string keys or behind a prefix; everything else is numbers and our own text.
Lines stay readable: an expression longer than MAX_EXPR names its longest parts (`z_<n> = ...`,
evaluated in the same order, so the numbers do not change) and long stacks take a line an item.
"""

from __future__ import annotations

import math
import re
import textwrap

import sympy

from xprc.compiler.simplify import Call, Program, Simplified
from xprc.compiler.symops import (
    CAMERA_CODE,
    Abs,
    Acos,
    Asin,
    Atan,
    Atan2,
    CameraCall,
    Ceil,
    Cmp,
    Cos,
    Exp,
    Expm1,
    Floor,
    LAnd,
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
    Softplus,
    Sqrt,
    StopGrad,
    Tan,
    Tanh,
    Where,
    XMax,
    XMin,
)
from xprc.method_info import GENERATED

ATOM, UNARY, MUL, ADD, CMP = 100, 60, 50, 40, 30
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9_.+-]")

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


def safe_filename(name: str) -> str:
    """The spec's file name as it may appear in the generated header: every character outside
    `A-Za-z0-9_.+-` becomes `_` (no quotes, newlines or spaces), at most 80 characters."""
    return _UNSAFE_IN_NAME.sub("_", name)[:80] or "spec"


def _float(x: float) -> str:
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
        if e is sympy.zoo or e is sympy.oo:
            return "jnp.inf", ATOM
        if e is sympy.S.NegativeInfinity:
            return "-jnp.inf", UNARY
        if e is sympy.nan or e is sympy.I:
            return "jnp.nan", ATOM
        if isinstance(e, (sympy.Number, sympy.NumberSymbol)):
            v = float(e)
            s = _float(v)
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
            return _float(float(a))
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


# ---------------------------------------------------------------------------------------------
# Module assembly


def _input_code(sym, inp) -> str:
    idx = "".join(f", {i}" for i in inp.index)
    if inp.kind == "raw":
        key = repr(ident(inp.name))
        return f"raw[{key}][...{idx}]" if inp.index else f"raw[{key}]"
    if inp.kind == "camera":
        attr = ident(CAMERA_CODE.get(inp.name, inp.name))
        return f"camera.{attr}[{', '.join(map(str, inp.index))}]" if inp.index else f"camera.{attr}"
    if inp.kind == "camera_model":  # static: a Python bool when the module is traced
        return f"camera.model == {ident(inp.name)!r}"
    if inp.kind == "pixel":
        return f"pixel[..., {inp.index[0]}]"
    if inp.kind == "ray_origin":
        return f"ray_origin[..., {inp.index[0]}]"
    if inp.kind == "ray_dir":
        return f"ray_dir[..., {inp.index[0]}]"
    if inp.kind == "attr":
        return f"attrs[..., {inp.index[0]}]"
    raise AssertionError(inp)  # pragma: no cover


_KIND_ORDER = ("camera", "camera_model", "raw", "pixel", "ray_origin", "ray_dir", "attr")


def _body(prog: Program, inputs, printer: Printer, indent="    ") -> list[str]:
    lines = []
    order = sorted(
        prog.inputs,
        key=lambda s: (_KIND_ORDER.index(inputs[s].kind), inputs[s].name, inputs[s].index),
    )
    for s in order:
        lines.append(f"{indent}{ident(s.name)} = {_input_code(s, inputs[s])}")
    for st in prog.body:
        if isinstance(st, Call):
            outs = ", ".join(ident(o.name) for o in st.outs)  # project_valid returns one array
            args = ", ".join(printer(a) for a in st.args)
            if len(indent) + len(outs) + len(args) + len(st.method) + 20 > MAX_LINE:
                args = ", ".join(printer.name(a) for a in st.args)
            lines += printer.flush(indent)
            lines.append(f"{indent}{outs} = camera.{ident(st.method)}({args})")
        else:
            sym, e = st
            text = printer(e)
            lines += printer.flush(indent)
            lines.append(f"{indent}{ident(printer.names.get(sym, sym.name))} = {text}")
    return lines


def _varying(prog: Program, inputs, kinds) -> set:
    """Symbols of `prog` that vary per element (depend on an input of one of `kinds`)."""
    out = {s for s in prog.inputs if inputs[s].kind in kinds}
    for st in prog.body:
        reads = set()
        for e in st.args if isinstance(st, Call) else [st[1]]:
            reads |= e.free_symbols
        if reads & out:
            out |= set(st.outs) if isinstance(st, Call) else {st[0]}
    return out


def _component(e, varying, printer: Printer, like: str) -> str:
    if e.free_symbols & varying:
        return printer(e)
    return f"rt.broadcast({printer(e)}, {like})"


def _stack(items: list[str], axis: int = -1, indent: str = "    ") -> str:
    """`jnp.stack([a, b], -1)`, one item a line when that is too long for one line."""
    one = "jnp.stack([" + ", ".join(items) + f"], {axis})"
    if len(indent) + len(one) + 24 <= MAX_LINE and "\n" not in one:
        return one
    inner = indent + "    "
    return "jnp.stack([\n" + "".join(f"{inner}{it},\n" for it in items) + f"{indent}], {axis})"


def _list(items: list[str], indent: str = "    ", reserve: int = 24) -> str:
    """`[a, b]`, one item a line when that is too long for one line (`reserve`: the room the
    rest of the line needs, e.g. a comment after the list)."""
    one = "[" + ", ".join(items) + "]"
    if len(indent) + len(one) + reserve <= MAX_LINE and "\n" not in one:
        return one
    inner = indent + "    "
    return "[\n" + "".join(f"{inner}{it},\n" for it in items) + f"{indent}]"


def _interface(simplified: Simplified, *, spec_name: str, spec_sha256: str, version: str):
    """The module's constants, one per MethodInfo field (xprc/method_info.py says what each
    holds and the default a module without it gets), in GENERATED order."""
    ch = simplified.lowered.checked
    params = ["("]
    for prm in ch.params:
        tags = ""
        if prm.lr is not None:
            tags += f", lr={_float(prm.lr)}"
        if prm.init is not None:
            init = repr(ident(prm.init)) if isinstance(prm.init, str) else _float(prm.init)
            tags += f", init={init}"
        if prm.role is not None:
            tags += f", role={ident(prm.role)!r}"
        if prm.init_raw is not None:
            tags += f", init_raw={_float(prm.init_raw)}"
        params.append(
            f"    ParamSpec({ident(prm.name)!r}, {ident(prm.kind)!r}, {prm.shape!r}, "
            f"{prm.activation!r}, {prm.degree!r}{tags}),"
        )
    params.append(")")
    consts = [f"{ident(k)!r}: {_float(v)}" for k, v in ch.constants.items()]
    pixel = [ident(k) + _channel_suffix(n) for k, n in ch.pixel.items() for n in _channels(n)]
    why = re.sub(r"[^A-Za-z0-9_.()/ ,-]", "_", ch.cameras_why)  # (file names are restricted)
    values = {
        "NAME": repr(ch.name),
        "SPEC_SHA256": repr(spec_sha256),
        "COMPILER_VERSION": repr(version),
        "PARAMS": "\n".join(params),
        "CONSTANTS": _listing("CONSTANTS", "{", consts, "}"),
        "ATTRS": _names("ATTRS", simplified.attrs),
        "NUM_ATTRS": str(len(simplified.attrs)),
        "NUM_FEATURES": str(len(simplified.lowered.project["color"])),
        "USES_RAY": repr(ch.uses_ray),
        "SIGNED_ALPHA": repr(ch.signed),
        "PIXEL_OUTPUTS": _names("PIXEL_OUTPUTS", pixel),
        "CAMERA_MODELS": _names("CAMERA_MODELS", [ident(m) for m in ch.cameras]),
        "CAMERA_MODELS_SOURCE": repr(why),  # declared, or why the default
        "SPEC_FILE": repr(spec_name),
    }
    assert tuple(values) == GENERATED, "codegen and MethodInfo disagree"
    return [f"{k} = {v}" for k, v in values.items()]


def _names(constant: str, names) -> str:
    return _listing(constant, "(", [repr(n) for n in names], ")")


HEADER_WIDTH = 100  # the module's constants and header comments stay within this many columns


def _listing(constant: str, open_: str, items: list[str], close: str) -> str:
    """`open_ item, item, close` after `CONSTANT = ` on one line when it fits HEADER_WIDTH,
    else one item per line (a spec with many attributes or constants stays readable)."""
    one = open_ + "".join(f"{item}, " for item in items).rstrip() + close
    if open_ == "{":
        one = open_ + ", ".join(items) + close
    if len(constant) + 3 + len(one) <= HEADER_WIDTH:
        return one
    return open_ + "\n" + "".join(f"    {item},\n" for item in items) + close


def generate(simplified: Simplified, *, spec_name: str, spec_sha256: str, version: str) -> str:
    """The generated module's source text (deterministic: no paths, no timestamps)."""
    low = simplified.lowered
    ch = low.checked
    inputs = simplified.inputs
    params = ch.params
    spec_name = safe_filename(spec_name)  # a file name is untrusted text: never raw in the output

    consts = ", ".join(f"{ident(k)}={_float(v)}" for k, v in ch.constants.items())
    out = [
        f"# Generated by xprc {version} from {spec_name}. Do not edit: edit the spec and run",
        f"# `xprc compile {spec_name}` again.",
        f"# spec sha256: {spec_sha256}",
    ]
    if ch.defines:
        out.append(
            "# defines: "
            + " ".join(f"-D {ident(k)}={_float(float(v))}" for k, v in ch.defines.items())
        )
    if consts:
        out += textwrap.wrap(consts, HEADER_WIDTH, initial_indent="# constants: ",
                             subsequent_indent="#   ", break_long_words=False)  # fmt: skip
    out += [
        f'"""{ident(ch.name)}: point-based primitive generated from {spec_name} by xprc."""',
        "",
        "import jax",
        "import jax.numpy as jnp",
        "from jax import lax",
        "",
        "from xprc import runtime as rt",
        "from xprc.runtime import ParamSpec",
        "",
    ]
    out += _interface(simplified, spec_name=spec_name, spec_sha256=spec_sha256, version=version)
    out.append("")

    # activate
    out += [
        "",
        "def activate(raw):",
        '    """raw parameters [N, *shape] -> activated [N, *shape]."""',
    ]
    act = simplified.activate
    p = Printer(names=act.names)
    out += _body(act, inputs, p)
    varying = _varying(act, inputs, ("raw",))
    items = []
    for prm in params:
        key = repr(ident(prm.name))
        if prm.name in simplified.identity:
            items.append(f"{key}: raw[{key}]")
            continue
        like = f"raw[{key}]" + ("[..." + ", 0" * len(prm.shape) + "]" if prm.shape else "")
        comps = [_component(e, varying, p, like) for e in act.outputs[prm.name]]
        items.append(f"{key}: {_shaped(comps, prm.shape)}")
    out += p.flush()
    out += _dict_return(items)
    out.append("")

    # project
    ellipse_doc = ", ellipse [N,3] around centre" if "ellipse" in simplified.project.outputs else ""
    out += [
        "",
        "def project(raw, camera):",
        '    """Per primitive, for one camera: centre [N,2], depth [N], box [N,4], valid [N],',
        "    attrs [N,A] (ATTRS order), features [N,C]" + ellipse_doc + '."""',
    ]
    prj = simplified.project
    p = Printer(names=prj.names)
    out += _body(prj, inputs, p)
    varying = _varying(prj, inputs, ("raw",))
    first = params[0]
    like = f"raw[{ident(first.name)!r}]" + (
        "[..." + ", 0" * len(first.shape) + "]" if first.shape else ""
    )
    o = prj.outputs

    def comps(name):
        return [_component(e, varying, p, like) for e in o[name]]

    centre, depth, box = comps("centre"), comps("depth"), comps("box")
    valid, attrs, color = comps("valid"), comps("attrs"), comps("color")
    ellipse = comps("ellipse") if "ellipse" in o else None
    out += p.flush()
    out.append(_commented(f"    centre = {_stack(centre)}", _line(ch, "centre")))
    out.append(f"    depth = {depth[0]}" + _line(ch, "depth"))
    out.append(_commented(f"    box = {_stack(box)}", _line(ch, "box")))
    out.append(f"    valid = {valid[0]}" + _line(ch, "valid"))
    out.append("    valid = rt.finite_and(valid, centre, depth, box)")
    if attrs:
        out.append(f"    attrs = {_stack(attrs)}")
    else:
        out.append(f"    attrs = jnp.zeros({like}.shape + (0,), {like}.dtype)")
    out.append(_commented(f"    features = {_stack(color)}", _line(ch, "color")))
    ret = '"centre": centre, "depth": depth, "box": box, "valid": valid, '
    if ellipse:  # optional: culls the box's tiles that miss it (not part of `valid`)
        out.append(_commented(f"    ellipse = {_stack(ellipse)}", _line(ch, "ellipse")))
        ret += '"ellipse": ellipse, '
    ret += '"attrs": attrs, "features": features'
    out += _dict_return(ret.split(", "))
    out.append("")

    # response
    rsp = simplified.response
    if any(rsp.outputs[f"pixel_{k}"] for k in ch.pixel):
        header = [
            "def response(pixel, ray_origin, ray_dir, attrs, camera, stack=True):",
            '    """(alpha [...], per-pixel outputs [..., K]) of each (pixel, primitive) pair; '
            "inputs broadcast",
            "    against each other. stack=False: the outputs as a list of K arrays [...], as "
            "the Pallas",
            "    kernels take them (a trailing axis of K would be laid out on the vector "
            'lanes)."""',
        ]
    else:
        header = [
            "def response(pixel, ray_origin, ray_dir, attrs, camera):",
            '    """alpha [...] of each (pixel, primitive) pair; inputs broadcast against each '
            'other."""',
        ]
    out += ["", *header]
    p = Printer(chains=True, names=rsp.names)
    out += _body(rsp, inputs, p)
    varying = _varying(rsp, inputs, ("pixel", "ray_origin", "ray_dir", "attr"))
    alpha = rsp.outputs["alpha"][0]
    text = p(alpha)
    extra = [p(e) for k in ch.pixel for e in rsp.outputs[f"pixel_{k}"]]
    out += p.flush()
    if extra:  # per-pixel outputs: (alpha, [..., K]) on the broadcast shape of the inputs
        out.append(
            "    shape = jnp.broadcast_shapes(pixel.shape[:-1], ray_origin.shape[:-1], "
            "attrs.shape[:-1])"
        )
        comps = [f"jnp.broadcast_to({c}, shape)" for c in extra]
        where = ", ".join(
            f"{ident(k)}:{_line(ch, f'pixel_{k}').removeprefix('  # spec')}" for k in ch.pixel
        )
        out.append(f"    alpha = jnp.broadcast_to({text}, shape)" + _line(ch, "alpha"))
        comment = f"  # {where}"
        lead = "    extra = "
        rest = len(lead) - 4 + len(comment)  # the line beyond `_list`'s own indent
        out.append(_commented(f"{lead}{_list(comps, reserve=rest)}", comment))
        out.append("    return alpha, (jnp.stack(extra, -1) if stack else extra)")
    elif alpha.free_symbols & varying:
        out.append(f"    return {text}" + _line(ch, "alpha"))
    else:
        out.append(f"    return rt.broadcast({text}, pixel[..., 0])" + _line(ch, "alpha"))
    out.append("")
    return "\n".join(out)


def _commented(text: str, comment: str) -> str:
    """`comment` at the end of the first line of `text` (a statement over several lines)."""
    first, sep, rest = text.partition("\n")
    return first + comment + sep + rest


def _line(ch, output: str) -> str:
    """`  # spec line N`: where the spec defines an output (numbers only reach the code)."""
    loc = ch.locs.get(output)
    if loc is None or loc.line <= 0:
        return ""
    return f"  # spec line {int(loc.line)}" + (", base spec" if loc.file else "")


def _channels(node) -> list:
    """Component indices of a per-pixel output (scalar: one, vecN: N)."""
    n = getattr(node.type, "n", None)
    return [None] if n is None else list(range(n))


def _channel_suffix(i) -> str:
    return "" if i is None else "." + ("xyzw"[i] if i < 4 else str(i))


def _shaped(comps: list[str], shape: tuple[int, ...], indent: str = "        ") -> str:
    if not shape:
        return comps[0]
    if len(shape) == 1:
        return _stack(comps, -1, indent)
    n = shape[-1]
    inner = indent + "    "
    rows = [_shaped(comps[i : i + n], shape[-1:], inner) for i in range(0, len(comps), n)]
    if len(shape) == 2:
        return _stack(rows, -2, indent)
    raise AssertionError(shape)  # pragma: no cover


def _dict_return(items: list[str]) -> list[str]:
    """`    return {k: v, ...}`, one entry a line when that is too long for one line."""
    one = "    return {" + ", ".join(items) + "}"
    if len(one) <= MAX_LINE and "\n" not in one:
        return [one]
    return ["    return {", *[f"        {it}," for it in items], "    }"]
