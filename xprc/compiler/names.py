"""Names and suggestions for the checker: what is reserved, what the camera and ray
offer, the "did you mean" hint, and the canonical text of an expression (for messages and
activation descriptions). No checking logic lives here."""

from __future__ import annotations

import difflib
import math
import sys

from xprc.compiler import ast
from xprc.compiler.ast import BOOL, SCALAR, ArrayT, MatT, Node, VecT
from xprc.conventions import CAMERA_MODELS, PARAM_ROLES  # noqa: F401  (re-exported)

MAX_LOOP = 1024  # iterations of one static loop or comprehension
# Scalar operations per spec, as `work` estimates them from the IR: a guard against accidental
# exponential unrolling and against matrix products that lower to hundreds of thousands of
# scalar terms (a 64x64 product is 524,288). Lowering and simplifying run at roughly 10k-50k
# operations a second, so a spec at the budget compiles in under a minute or so.
MAX_NODES = 200_000
MAX_VEC = 64  # components of a vector / rows or columns of a matrix

# Names the generated Python uses, and Python builtins that must never appear as spec names.
_PY_RESERVED = {
    "os", "sys", "eval", "exec", "compile", "open", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "importlib", "builtins", "subprocess", "input", "breakpoint", "print",
    "jnp", "jax", "lax", "rt", "np", "math", "self", "cls",
}  # fmt: skip
_LANG_RESERVED = {"camera", "ray", "pixel", "raw", "T", "true", "false"}
# Built-in constants: a spec's own constant, parameter or variable of the same name shadows one
# (specs written before `pi` existed define it themselves).
BUILTIN_CONSTANTS = {"pi": math.pi}

CAMERA_ATTRS = {
    "rotation": MatT(3, 3),
    "translation": VecT(3),
    "position": VecT(3),
    "fx": SCALAR, "fy": SCALAR, "cx": SCALAR, "cy": SCALAR,
    "width": SCALAR, "height": SCALAR, "near": SCALAR, "far": SCALAR,
}  # fmt: skip
CAMERA_METHODS = {
    "project", "project_valid", "jacobian", "world_to_camera",
    # rolling shutter (docs/cameras.md): the pose of the moment the camera sees a world point
    "world_to_camera_shutter", "project_world", "project_world_valid", "shutter_box",
}  # fmt: skip
# What a spec reads when it writes the projection for a pinhole (its intrinsics) or linearises
# it (the Jacobian): without a `cameras` declaration such a spec accepts `pinhole` only.
PINHOLE_READS = ("fx", "fy", "cx", "cy", "jacobian")
RAY_ATTRS = {"origin", "dir"}

_TYPE_NAMES = ["scalar", "vec2", "vec3", "vec4", "quat", "mat2", "mat3", "mat4", "sh"]

# Training annotations on parameters (read by the trainer through ParamSpec).
INIT_RULES = ("points", "colors", "identity", "nn_distance", "zeros", "ones")
# Random inits, drawn per component of the raw value from the run's seed: name -> arguments.
RANDOM_INITS = {"normal": ("mean", "std"), "uniform": ("low", "high"), "unit": ()}
ROLES = PARAM_ROLES
# Activations ParamSpec names (anything else is recorded as its text).
NAMED_ACTIVATIONS = ("exp", "sigmoid", "normalize", "abs", "softplus", "tanh")

FOOTPRINTS = {"radius": SCALAR, "radii": VecT(2), "box": VecT(4)}
REQUIRED = {"centre": VecT(2), "depth": SCALAR, "valid": BOOL}
# Optional projection outputs beside the footprint: `ellipse` [a, b, c], the set
# {d = pixel - centre : a dx^2 + 2 b dx dy + c dy^2 <= 1} that holds every pixel the response
# reaches; binning culls the rectangle's tiles that miss it.
OPTIONAL_OUTPUTS = {"ellipse": VecT(3)}

_VERB = {
    "+": "add", "-": "subtract", "*": "multiply", "/": "divide", "%": "take the modulo of",
    "^": "raise",
    "<": "compare", "<=": "compare", ">": "compare", ">=": "compare", "==": "compare",
    "!=": "compare", "and": "combine", "or": "combine",
}  # fmt: skip
_BINOP = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod", "^": "pow", "<": "lt",
          "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne", "and": "and",
          "or": "or"}  # fmt: skip


def suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def shown(n) -> str:
    """A number in a message: an integer of more than 15 digits as `1.796e+308`."""
    return f"{float(n):.4g}" if isinstance(n, int) and abs(n) >= 10**15 else str(n)


def size_digits(text: str) -> int | None:
    """A size written in a name (`vec3`, `mat3x4`) or a type (`sh(3)`): its value, without
    converting thousands of digits (Python refuses more than 4300); MAX_VEC + 1 for any size
    too long to be valid; None when `text` is not digits without a leading zero."""
    if not (text.isascii() and text.isdigit()) or text[0] == "0":
        return None
    return int(text) if len(text) <= 6 else 10**6


def vec_size(name: str) -> int | None:
    """`vecN` -> N (10**6 for any N of more than 6 digits); None for other names."""
    return size_digits(name[3:]) if name.startswith("vec") else None


def scalars(t) -> int:
    """Scalar components of a value of type `t` (1 for scalars and bools)."""
    if isinstance(t, VecT):
        return t.n
    if isinstance(t, MatT):
        return t.m * t.n
    if isinstance(t, ArrayT):
        return t.n * scalars(t.elem)
    return 1


_ELEMENTWISE_OPS = frozenset(
    ("neg", "add", "sub", "mul", "div", "mod", "pow", "lt", "le", "gt", "ge", "eq", "ne", "and",
     "or", "not")
)  # fmt: skip


def work(op: str, typ, args) -> int:
    """The scalar operations a checked node lowers to, estimated from its types (what the
    node budget counts): an elementwise op on a mat4 is 16, a product of an m x k and a k x n
    matrix 2 m k n, a built-in call its result's and arguments' components; 1 otherwise."""
    if op == "matmul":
        return 2 * scalars(typ) * args[0].type.n  # (the inner size: columns, or vector length)
    if op in _ELEMENTWISE_OPS:
        return scalars(typ)
    if op == "call":
        return scalars(typ) + sum(scalars(a.type) for a in args)
    return 1


def _is_num(node: Node) -> bool:
    return node.op == "num"


def _is_int(node: Node) -> bool:
    return node.op == "num" and isinstance(node.extra, int) and not isinstance(node.extra, bool)


# The largest integer a float64 holds: an integer folded past it (`s = s * s` in a loop, a
# product of large powers) becomes +-inf, a float, as the generated code would compute it,
# instead of growing without bound (minutes of big-integer arithmetic, then an OverflowError
# where it meets a float).
FLOAT_MAX_INT = int(sys.float_info.max)


def _num(value) -> Node:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > FLOAT_MAX_INT:
        value = math.inf if value > 0 else -math.inf
    return Node("num", SCALAR, (), value)


def _fold_float(f, *xs):
    try:
        return f(*xs)
    except (ValueError, ZeroDivisionError):
        return math.nan
    except OverflowError:
        return math.inf


_PREC = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4, "+": 5, "-": 5,
         "*": 6, "/": 6, "%": 6, "^": 8}  # fmt: skip


def unparse(e: ast.Expr, prec: int = 0) -> str:
    """Canonical text of an expression (identifiers, numbers and operators only)."""
    if isinstance(e, ast.Num):
        return repr(e.value)
    if isinstance(e, ast.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Unary):
        p = 3 if e.op == "not" else 7
        s = ("not " if e.op == "not" else e.op) + unparse(e.operand, p)
        return f"({s})" if p < prec else s
    if isinstance(e, ast.Binary):
        p = _PREC[e.op]
        right_p = p if e.op == "^" else p + 1
        left_p = p + 1 if e.op == "^" else p
        s = f"{unparse(e.left, left_p)} {e.op} {unparse(e.right, right_p)}"
        return f"({s})" if p < prec else s
    if isinstance(e, ast.Transpose):
        return unparse(e.operand, 9) + "^T"
    if isinstance(e, ast.Call):
        return unparse(e.func, 9) + "(" + ", ".join(unparse(a) for a in e.args) + ")"
    if isinstance(e, ast.Index):
        return unparse(e.target, 9) + "[" + ", ".join(unparse(a) for a in e.indices) + "]"
    if isinstance(e, ast.Attr):
        return unparse(e.target, 9) + "." + e.name
    if isinstance(e, ast.ListLit):
        return "[" + ", ".join(unparse(a) for a in e.items) + "]"
    if isinstance(e, ast.Comprehension):
        return f"[{unparse(e.body)} for {e.var} in {unparse(e.start)}..{unparse(e.stop)}]"
    raise AssertionError(type(e))  # pragma: no cover
