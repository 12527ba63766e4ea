"""Stage 3: typed IR -> SymPy, one scalar expression per component.

Inputs (raw parameters, camera attributes, pixel, ray, per-primitive values read by the response)
become plain SymPy symbols whose names are the local variable names of the generated code. The
camera model is opaque: `camera.project`, `.project_valid`, `.jacobian`,
`.world_to_camera_shutter` and `.shutter_box` become `CameraCall` applications. Operations that
SymPy would rewrite in unhelpful ways (min, max, select, logic) and elementary functions are
our own unevaluated functions (symops.py; SymPy's `exp` alone can spend seconds in `logcombine`
on a large argument); numbers are folded in Python so SymPy never sees a complex intermediate.
Each built-in call lowers by its entry in builtin_functions.TABLE.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from sympy.core.parameters import distribute

from xprc.compiler import ast
from xprc.compiler.ast import MatT, Node, ScalarT, VecT
from xprc.compiler.builtin_functions import TABLE
from xprc.compiler.names import OPTIONAL_OUTPUTS
from xprc.compiler.symops import (
    CAMERA_METHODS,
    CAMERA_OUTPUTS,
    CameraCall,
    _num,
    compare,
    dot,
    flatten,
    lnot,
    logic,
    scalar_op,
    transpose,
)

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
    # The spec's locals as SymPy, a scalar component each, in assignment order: (value, `p.x`).
    local_names: list[tuple[sympy.Expr, str]] = field(default_factory=list)


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
        if op in ("neg", "add", "sub", "mul", "div", "mod", "pow"):
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
            return self.camera(node.extra, *args)
        if op == "call":
            return self.call(node, args)
        raise AssertionError(op)  # pragma: no cover

    def elementwise(self, op, *args):
        if any(isinstance(a, tuple) for a in args):
            n = max(len(a) for a in args if isinstance(a, tuple))
            parts = [a if isinstance(a, tuple) else (a,) * n for a in args]
            return tuple(self.elementwise(op, *xs) for xs in zip(*parts, strict=False))
        return scalar_op(op, *args)

    def camera(self, method: str, p, *more):
        code = sympy.Integer(CAMERA_METHODS.index(method))
        n = CAMERA_OUTPUTS[method]
        outs = [CameraCall(code, sympy.Integer(k), *p, *more) for k in range(n)]
        if method in ("project", "world_to_camera_shutter", "shutter_box"):
            return tuple(outs)
        if method == "project_valid":
            return outs[0]
        return (tuple(outs[:3]), tuple(outs[3:]))

    def call(self, node: Node, args):
        """A built-in call: its lowering in builtin_functions.TABLE."""
        name, ints = node.extra, ()
        if isinstance(name, ast.Static):
            name, ints = name.name, name.ints
        return TABLE[name].lower(args, ints)


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


def _local_suffix(typ, index) -> str:
    """A component of a local as generated code names it: a matrix's `[i][j]` (`cov[0][2]`,
    not `cov[0].z`), otherwise as the spec reads it."""
    if isinstance(typ, MatT) and len(index) == 2:
        return f"[{index[0]}][{index[1]}]"
    return _component_suffix(typ, index)


def matmul(ta, a, tb, b):
    if isinstance(ta, MatT) and isinstance(tb, MatT):
        cols = transpose(b)
        return tuple(tuple(dot(row, col) for col in cols) for row in a)
    if isinstance(ta, MatT):
        return tuple(dot(row, b) for row in a)
    return tuple(dot(a, col) for col in transpose(b))


def lower(checked: ast.Checked) -> Lowered:
    """Lower every output of the checked spec to SymPy scalars."""
    with distribute(False):  # keep -(a + b) as one node so shared sums stay shared
        lw = Lowerer(checked)
        activate = {p.name: flatten(lw.value(p.value)) for p in checked.params}
        project = {}
        optional = [k for k in OPTIONAL_OUTPUTS if k in checked.outputs]
        for name in ("centre", "depth", "box", "valid", "color", *optional):
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
        names = _local_names(lw, checked.local_names)
    return Lowered(
        checked, dict(lw.inputs), activate, project, prim, dict(lw.display), alpha, pixel, names
    )


def _local_names(lw: Lowerer, locals_: list) -> list[tuple[sympy.Expr, str]]:
    """Each scalar component of each local the outputs use, with the name it reads by in the
    spec (`p.x`, `cov[0][1]`). A local no output reads is lowered too (a pack of lowered parts
    adds nothing) unless it reads an input nothing else reads: that one is dropped."""
    out = []
    for node, name in locals_:
        n = len(lw.inputs)
        v = lw.value(node)
        if len(lw.inputs) != n:  # dead code reading its own inputs: forget it
            for s in list(lw.inputs)[n:]:
                del lw.inputs[s]
                lw.display.pop(s, None)
            continue
        stack = [(v, ())]
        while stack:
            x, index = stack.pop()
            if isinstance(x, tuple):
                stack += [(y, (*index, i)) for i, y in reversed(list(enumerate(x)))]
            elif isinstance(x, sympy.Basic):
                out.append((x, name + _local_suffix(node.type, index)))
    return out
