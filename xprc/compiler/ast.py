"""Data shared by the compiler stages: the spec AST (with locations), value types, and the typed IR.

parse.py builds the AST; check/ resolves it into the typed IR (loops unrolled, functions inlined,
names resolved, shapes known); lower.py turns the IR into SymPy. Nothing here does any work.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# Locations


@dataclass(frozen=True)
class Loc:
    line: int
    column: int
    file: str | None = None  # a base spec's name (`extends`); None: the spec being compiled


NOLOC = Loc(0, 0)

# ---------------------------------------------------------------------------------------------
# Expressions


@dataclass(eq=False)
class Expr:
    loc: Loc


@dataclass(eq=False)
class Num(Expr):
    value: float | int
    text: str  # as written, for messages and activation descriptions


@dataclass(eq=False)
class BoolLit(Expr):
    value: bool


@dataclass(eq=False)
class Name(Expr):
    id: str


@dataclass(eq=False)
class Unary(Expr):
    op: str  # "-", "+", "not"
    operand: Expr


@dataclass(eq=False)
class Binary(Expr):
    op: str  # + - * / ^ < <= > >= == != and or
    left: Expr
    right: Expr


@dataclass(eq=False)
class Transpose(Expr):
    operand: Expr


@dataclass(eq=False)
class Call(Expr):
    func: Expr  # a Name, or an Attr such as camera.project
    args: list[Expr]


@dataclass(eq=False)
class Index(Expr):
    target: Expr
    indices: list[Expr]


@dataclass(eq=False)
class Attr(Expr):
    target: Expr
    name: str
    name_loc: Loc


@dataclass(eq=False)
class ListLit(Expr):
    items: list[Expr]


@dataclass(eq=False)
class Comprehension(Expr):
    body: Expr
    var: str
    var_loc: Loc
    start: Expr
    stop: Expr


# ---------------------------------------------------------------------------------------------
# Statements and declarations


@dataclass(eq=False)
class Assign:
    loc: Loc
    name: str
    indices: list[Expr]  # `name[i][j] = value`
    value: Expr


@dataclass(eq=False)
class Emit:
    loc: Loc
    name: str
    value: Expr


@dataclass(eq=False)
class For:
    loc: Loc
    var: str
    start: Expr
    stop: Expr
    body: list


@dataclass(eq=False)
class TypeRef:
    loc: Loc
    name: str
    arg: int | None


@dataclass(eq=False)
class ParamClause:
    """A training annotation after a parameter: `lr EXPR`, `init EXPR` or `role NAME`."""

    loc: Loc  # the keyword
    key: str  # "lr" | "init" | "role"
    value: Expr


@dataclass(eq=False)
class Param:
    loc: Loc
    name: str
    type: TypeRef
    activation: Expr | None
    clauses: list[ParamClause] = field(default_factory=list)


@dataclass(eq=False)
class Const:
    loc: Loc
    name: str
    value: Expr


@dataclass(eq=False)
class FnBody:
    """`{ statements; result }`: the body of a function with statements (`fn f(x) = { ... }`)."""

    loc: Loc  # the opening brace
    stmts: list  # Assign, Emit (refused by the checker) and For, as in a block
    result: Expr | None  # the value the function returns (None: missing, a located error)
    end: Loc = field(default_factory=lambda: NOLOC)  # the closing brace


@dataclass(eq=False)
class Fn:
    loc: Loc
    name: str
    args: list[tuple[str, Loc]]
    body: Expr | FnBody


@dataclass(eq=False)
class Block:
    loc: Loc
    kind: str  # "projection" | "response"
    body: list
    signed: bool = False  # `response signed { ... }`: alpha in (-1, 1)
    # A derived spec's block that replaced a base's whole (extends.py): the base block's file,
    # line and what it emitted (the response: assigned `alpha`), for the missing-output errors.
    replaces: tuple[str, int, tuple[str, ...]] | None = None


@dataclass(eq=False)
class Extend:
    """`extend projection { ... }` / `extend response { ... }`: statements that replace or add
    single statements of the base spec's block (merged by extends.py)."""

    loc: Loc  # the keyword
    kind: str  # "projection" | "response"
    body: list


@dataclass(eq=False)
class Color:
    loc: Loc
    value: Expr


@dataclass(eq=False)
class Cameras:
    """`cameras pinhole, opencv`: the camera models a spec accepts."""

    loc: Loc  # the keyword
    models: list[tuple[str, Loc]]


@dataclass(eq=False)
class Primitive:
    loc: Loc
    name: str
    base: str | None = None  # `primitive NAME extends "base.xpr"`: the path as written
    base_loc: Loc | None = None


@dataclass(eq=False)
class Spec:
    """A parsed spec: its declarations in source order, plus what the errors need."""

    items: list
    filename: str
    source: str
    sources: dict = field(default_factory=dict)  # base spec name -> text (for its errors)

    def source_line(self, line: int, file: str | None = None) -> str | None:
        text = self.sources.get(file, self.source) if file is not None else self.source
        lines = source_lines(text)
        return lines[line - 1] if 1 <= line <= len(lines) else None


def source_lines(source: str) -> list[str]:
    """Lines as the parser counts them: split at '\\n' only (str.splitlines also splits at
    '\\x0c', '\\u2028' and others, which a comment may hold, and would shift the caret line)."""
    return [line.removesuffix("\r") for line in source.split("\n")]


# ---------------------------------------------------------------------------------------------
# Types


@dataclass(frozen=True)
class Type:
    def __str__(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@dataclass(frozen=True)
class ScalarT(Type):
    def __str__(self) -> str:
        return "scalar"


@dataclass(frozen=True)
class BoolT(Type):
    def __str__(self) -> str:
        return "bool"


@dataclass(frozen=True)
class VecT(Type):
    n: int
    quat: bool = False  # a quaternion (w, x, y, z): .w is component 0

    def __str__(self) -> str:
        return "quat" if self.quat else f"vec{self.n}"


@dataclass(frozen=True)
class MatT(Type):
    m: int
    n: int

    def __str__(self) -> str:
        return f"mat{self.m}" if self.m == self.n else f"mat{self.m}x{self.n}"


@dataclass(frozen=True)
class ArrayT(Type):
    elem: Type
    n: int

    def __str__(self) -> str:
        return f"{self.elem}[{self.n}]"


SCALAR = ScalarT()
BOOL = BoolT()


def numeric(t: Type) -> bool:
    return isinstance(t, (ScalarT, VecT, MatT))


def shape_of(t: Type) -> tuple[int, ...]:
    """The array shape of a value of type `t` (per primitive)."""
    if isinstance(t, VecT):
        return (t.n,)
    if isinstance(t, MatT):
        return (t.m, t.n)
    if isinstance(t, ArrayT):
        return (t.n, *shape_of(t.elem))
    return ()


def plain(t: Type) -> Type:
    """`t` without the quaternion tag (for comparisons of shape)."""
    return VecT(t.n) if isinstance(t, VecT) else t


# ---------------------------------------------------------------------------------------------
# Typed IR (output of check/): a DAG of nodes, every loop unrolled and call inlined.
#
# op         args                 extra
# num        -                    value (int | float)
# boolean    -                    value (bool)
# input      -                    (kind, name): ("raw", param) ("camera", attr) ("pixel", "")
#                                 ("ray_origin", "") ("ray_dir", "") ("prim", emitted-or-param name)
# pack       elements             -            (vec / mat / array literal, by type)
# get        (x,)                 index (int)  (component, row or array element)
# neg add sub mul div mod pow     -            (elementwise, scalars broadcast; mod: floor)
# matmul transpose                -
# lt le gt ge eq ne and or not    -
# where      (cond, a, b)         -
# call       args                 builtin name
# camera     args                 method name (project, project_valid, jacobian)


@dataclass(frozen=True)
class Static:
    """The `extra` of a call whose arguments are compile-time integers: eye(3) is
    Static("eye", (3,)), col(M, 1) is Static("col", (1,)) with M as the node argument."""

    name: str
    ints: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.name}[{', '.join(map(str, self.ints))}]"


@dataclass(eq=False)
class Node:
    op: str
    type: Type
    args: tuple = ()
    extra: object = None


@dataclass
class ParamInfo:
    name: str
    kind: str  # "scalar", "vec3", "quat", "mat3", "sh", ...
    type: Type
    shape: tuple[int, ...]
    activation: str  # "identity", "exp", "sigmoid", "normalize", "abs" or the expression's text
    degree: int | None
    value: Node  # the activated value, in terms of the ("raw", name) input
    lr: float | None = None  # training annotations (ParamSpec.lr / .init / .role)
    # a rule name, the activated value as a number, or a random rule ("normal", mean, std)
    init: str | float | tuple | None = None
    init_raw: float | None = None  # numeric init through a text activation: its raw value
    role: str | None = None  # "position" | "opacity" | "scale"


@dataclass
class Checked:
    """The checked program: everything lower.py needs, nothing it has to verify."""

    name: str
    filename: str
    source: str
    params: list[ParamInfo]
    constants: dict[str, float]
    defines: dict[str, float]
    outputs: dict[str, Node]  # centre, depth, box, valid, color
    prim: dict[str, Node] = field(default_factory=dict)  # per-primitive values the response reads
    alpha: Node | None = None
    uses_ray: bool = False
    signed: bool = False  # alpha may be negative (`response signed`)
    pixel: dict[str, Node] = field(default_factory=dict)  # per-pixel outputs `emit` in response
    locs: dict[str, Loc] = field(default_factory=dict)  # output -> where the spec defines it
    cameras: tuple[str, ...] = ("pinhole",)  # the camera models the spec accepts
    cameras_why: str = ""  # where that comes from: the declaration or the default's reason
    # The projection's and response's locals and emits, in assignment order: (value, spec name).
    local_names: list[tuple[Node, str]] = field(default_factory=list)
    # what compiles but is probably a mistake: (message, where, its source line), reported as
    # SpecWarnings by the driver
    warnings: list[tuple[str, Loc, str | None]] = field(default_factory=list)
    # each `cutoff` call (where it is) and how it was derived: "closed form" or the bisection
    derived: list[tuple[Loc, str]] = field(default_factory=list)


def format_ir(checked: Checked) -> str:
    """The checked IR as text (`xprc compile --emit checked`): each node once, numbered in
    first-use order, then the outputs that name them."""
    ids: dict[int, int] = {}
    lines: list[str] = []

    def ref(node: Node) -> str:
        key = id(node)
        if key in ids:
            return f"%{ids[key]}"
        if node.op == "num":
            return repr(node.extra)
        if node.op == "boolean":
            return "true" if node.extra else "false"
        args = [ref(a) for a in node.args]
        if node.op == "input":
            text = "input " + ":".join(x for x in node.extra if x)
        else:
            head = node.op if node.extra is None else f"{node.op} {node.extra}"
            text = f"{head}({', '.join(args)})"
        ids[key] = len(ids)
        lines.append(f"%{ids[key]} = {text} : {node.type}")
        return f"%{ids[key]}"

    out = [
        f"primitive {checked.name}",
        f"cameras {', '.join(checked.cameras)}  # {checked.cameras_why}",
    ]
    for p in checked.params:
        out.append(f"param {p.name} : {p.type} = {ref(p.value)}")
    for name, node in checked.outputs.items():
        out.append(f"output {name} = {ref(node)}")
    for name, node in checked.prim.items():
        out.append(f"prim {name} = {ref(node)}")
    if checked.alpha is not None:
        out.append(f"alpha = {ref(checked.alpha)}")
    return "\n".join(lines + out) + "\n"


def replace(obj, **changes):
    return dataclasses.replace(obj, **changes)
