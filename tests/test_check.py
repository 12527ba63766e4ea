"""Checking: types and shapes of outputs, generic functions, constants and -D, the parameter
table, scopes."""

import numpy as np
import pytest
import scipy.special

from xprc.compiler import ast, check, parse
from xprc.compiler.ast import BOOL, SCALAR, MatT, VecT
from xprc.errors import StaticError

BASE = """primitive P
param means : vec3
param quats : quat = normalize(raw)
param scales : vec3 = exp(raw)
param o : scalar = sigmoid(raw)
param w : scalar = 2 * raw + k
param sh : sh(1)
const k = 2
const k2 = k * 3 + 1
fn twice(x) = 2 * x
projection {{
  {body}
  emit centre = [0, 0], depth = 1, radius = 1, valid = true
}}
response {{ alpha = 0 }}
color = [1, 1, 1]
"""


def checked(body="x = 1", defines=None):
    return check.check(parse.parse(BASE.format(body=body), "t.xpr"), defines)


def probe(expr: str, body: str = ""):
    spec = parse.parse(BASE.format(body=f"{body}\n  emit probe = {expr}"), "t.xpr")
    c = check.check(spec)
    return c.prim["probe"]


@pytest.mark.parametrize("expr,typ", [
    ("means", VecT(3)),
    ("quats", VecT(4, True)),
    ("quats * 2", VecT(4, True)),
    ("quats + [1, 2, 3, 4]", VecT(4)),
    ("means.xy", VecT(2)),
    ("quat_to_rotmat(quats)", MatT(3, 3)),
    ("quat_to_rotmat(quats) * diag(scales)", MatT(3, 3)),
    ("[[1, 2, 3], [4, 5, 6]] * means", VecT(2)),
    ("[[1, 2, 3], [4, 5, 6]]^T", MatT(3, 2)),
    ("outer(means, [1, 2])", MatT(3, 2)),
    ("means * [[1, 2], [3, 4], [5, 6]]", VecT(2)),
    ("[means, means]", MatT(2, 3)),
    ("[[means, means], [means, means]]", ast.ArrayT(MatT(2, 3), 2)),
    ("[i for i in 0..5]", VecT(5)),
    ("means.z > 1 and true", BOOL),
    ("eval_sh(sh, means)", VecT(3)),
    ("twice(means)", VecT(3)),
    ("twice(o)", SCALAR),
    ("zeros(2, 4)", MatT(2, 4)),
    ("vec3(means.xy, 1)", VecT(3)),
    ("camera.jacobian(means)", MatT(2, 3)),
    ("camera.project_valid(means)", BOOL),
])  # fmt: skip
def test_types(expr, typ):
    assert probe(expr).type == typ


def test_quat_components_are_wxyz():
    p = probe("[quats.w, quats.x]")
    assert [a.extra for a in p.args] == [0, 1]
    p = probe("[[1, 2, 3, 4].w, [1, 2, 3, 4].x]")
    assert [a.extra for a in p.args] == [4, 1]  # folded numbers: vec4 .w is component 3


def test_constants_fold_and_defines():
    c = checked()
    assert c.constants == {"k": 2.0, "k2": 7.0}
    c = checked(defines={"k": 5})
    assert c.constants == {"k": 5.0, "k2": 16.0} and c.defines == {"k": 5}


def test_parameter_table():
    c = checked()
    table = [(p.name, p.kind, p.shape, p.activation, p.degree) for p in c.params]
    assert table == [
        ("means", "vec3", (3,), "identity", None),
        ("quats", "quat", (4,), "normalize", None),
        ("scales", "vec3", (3,), "exp", None),
        ("o", "scalar", (), "sigmoid", None),
        ("w", "scalar", (), "2 * raw + k", None),
        ("sh", "sh", (4, 3), "identity", 1),
    ]


def test_static_where_picks_a_branch():
    assert probe("where(k > 1, means, 0)").op == "input"
    assert probe("where(k > 10, means, 0)").op == "pack"  # broadcast 0


def test_loops_unroll_with_reassignment():
    p = probe("acc", body="acc = 0\n  for i in 0..3 { acc = acc + means[i] }")
    assert p.op == "add"


def test_uses_ray_and_prim_values():
    spec = BASE.format(body="x = 1").replace(
        "response { alpha = 0 }", "response { alpha = dot(ray.dir, means) * o }"
    )
    c = check.check(parse.parse(spec, "t.xpr"))
    assert c.uses_ray
    assert set(c.prim) >= {"means", "o", "centre", "depth", "radius", "valid"}


def test_footprint_becomes_box():
    c = checked()
    assert c.outputs["box"].type == VecT(4)
    assert set(c.outputs) == {"centre", "depth", "box", "valid", "color"}


def test_training_annotations():
    spec = BASE.format(body="x = 1")
    for old, clauses in [
        ("param means : vec3", " lr 1.6e-4 init points role position"),
        ("param o : scalar = sigmoid(raw)", " init 0.1 lr k * 1e-2"),
        ("param sh : sh(1)", " init colors"),
        ("param w : scalar = 2 * raw + k", " role scale init -k"),
    ]:
        spec = spec.replace(old, old + clauses)
    c = check.check(parse.parse(spec, "t.xpr"), {"k": 3})
    table = {p.name: (p.lr, p.init, p.role) for p in c.params}
    assert table == {
        "means": (1.6e-4, "points", "position"),
        "quats": (None, None, None),
        "scales": (None, None, None),
        "o": (0.03, 0.1, None),  # constants (and -D) are allowed
        "w": (None, -3.0, "scale"),
        "sh": (None, "colors", None),
    }


def test_param_spec_stays_positional():
    from xprc.runtime import ParamSpec

    p = ParamSpec("means", "vec3", (3,), "identity", None)
    assert (p.lr, p.init, p.role) == (None, None, None)
    assert ParamSpec("o", "scalar", (), "sigmoid", None, lr=0.05, init=0.1).init == 0.1


# ---------------------------------------------------------------------------------------------
# Issue 13: numeric init through any activation.

INIT_SPEC = """primitive P
param means : vec3
param o : scalar = sigmoid(raw) init 0.1
param betas : scalar = 4 * exp(raw) init {beta}
param w : vec2 = max(raw, 0.1 * raw) + 1 init 0.5
param s : scalar = exp(raw) + raw^3 init 2
projection {{ emit centre = [0, 0], depth = 1, radius = 1, valid = true }}
response {{ alpha = 0 }}
color = [1, 1, 1]
"""


def test_numeric_init_is_inverted_through_any_activation():
    import math

    params = {p.name: p for p in check.check(parse.parse(INIT_SPEC.format(beta=4), "t.xpr")).params}
    assert params["o"].init == 0.1 and params["o"].init_raw is None  # named: the trainer's job
    assert params["betas"].init_raw == 0.0  # 4 * exp(0) = 4 (symbolic: log(4 / 4))
    assert params["w"].init_raw == pytest.approx(-5.0, abs=1e-12)  # max is not peeled: numeric
    r = params["s"].init_raw  # exp(r) + r^3 = 2 has no closed form: numeric
    assert math.exp(r) + r**3 == pytest.approx(2.0, abs=1e-9)
    b = check.check(parse.parse(INIT_SPEC.format(beta=218), "t.xpr")).params[2]
    assert 4 * math.exp(b.init_raw) == pytest.approx(218.0, rel=1e-12)


def test_trainer_starts_from_the_derived_raw_value(tmp_path):
    import numpy as np

    from xprc.compiler import driver
    from xprc.train import init as train_init

    path = tmp_path / "init.xpr"
    path.write_text(INIT_SPEC.format(beta=4))
    method = driver.load(path)
    spec = {p.name: p for p in method.PARAMS}["betas"]
    raw = train_init._init_one(method, spec, spec.init, 3, None, None, None)
    np.testing.assert_allclose(raw, 0.0)  # activation 4 * exp(0) = 4, not raw 4 (beta ~ 218)


# ---------------------------------------------------------------------------------------------
# The built-in functions' one table (xprc/compiler/builtin_functions.py).


def test_docs_list_the_builtin_table():
    """docs/language.md's table is the one generated from library.TABLE (regenerate it with
    `python -m xprc.compiler.builtin_functions` and paste it between the markers)."""
    from conftest import ROOT

    from xprc.compiler import builtin_functions as library

    text = (ROOT / "docs" / "language.md").read_text()
    begin, end = "<!-- built-in table: begin -->\n", "<!-- built-in table: end -->"
    assert text[text.index(begin) + len(begin) : text.index(end)] == library.markdown_table()
    for name, entry in library.TABLE.items():
        assert entry.docs and all(f"`{name}" in sig for sig, _ in entry.docs), name
    assert library.BUILTINS == set(library.TABLE) | {"quat"}


_NUMPY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "tanh": np.tanh, "abs": np.abs, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "floor": np.floor, "ceil": np.ceil, "sign": np.sign, "softplus": lambda x: np.log1p(np.exp(x)),
    "log1p": np.log1p, "expm1": np.expm1, "stop_gradient": lambda x: x,
    "erf": scipy.special.erf, "erfc": scipy.special.erfc, "erfinv": scipy.special.erfinv,
    "lgamma": scipy.special.gammaln, "sinh": np.sinh, "cosh": np.cosh,
}  # fmt: skip


@pytest.mark.parametrize("x", [0.3, -0.7, 2.5])
def test_unary_builtins_fold_like_numpy(x):
    """Every one-argument elementwise built-in folds a number at check time (its table fold)
    to NumPy's value; where NumPy gives nan, the fold is an error at the call (a NaN constant
    would reach the module: tests/test_fold_range.py)."""
    from xprc.compiler import builtin_functions as library

    assert set(_NUMPY) == set(library.UNARY)
    for name, f in _NUMPY.items():
        with np.errstate(invalid="ignore"):
            want = float(f(np.float64(x)))
        if np.isnan(want):
            with pytest.raises(StaticError, match=r"is not a number \(it folds to nan\)"):
                probe(f"{name}({x})")
            continue
        node = probe(f"{name}({x})")
        assert node.op == "num", name
        # (math.lgamma and scipy's gammaln are independent: a few ulps apart)
        rtol = 4e-15 if name == "lgamma" else 1e-15
        np.testing.assert_allclose(node.extra, want, rtol=rtol, err_msg=name)


@pytest.mark.parametrize(
    "expr,want",
    [
        ("min(3, 1.5, 2)", 1.5), ("max(-1, -4)", -1.0), ("clamp(5, 0, 2)", 2.0),
        ("atan2(1, -1)", float(np.arctan2(1, -1))), ("pow(2, 10)", 1024.0),
        ("pow(2, 0.5)", float(np.sqrt(2))),
    ],
)  # fmt: skip
def test_elementwise_builtins_fold_like_numpy(expr, want):
    node = probe(expr)
    assert node.op == "num" and node.extra == pytest.approx(want, rel=1e-15)


# ---------------------------------------------------------------------------------------------
# `pi` and `%` (floor modulo)


@pytest.mark.parametrize("expr,want", [
    ("7 % 3", 1), ("-7 % 3", 2), ("7 % -3", -2),  # integers stay integers (Python's %)
    ("7.5 % 2", float(np.mod(7.5, 2))), ("-7.5 % 2", float(np.mod(-7.5, 2))),
    ("7.5 % -2", float(np.mod(7.5, -2))), ("pi", np.pi), ("2 * pi % pi", 0.0),
    ("twice(pi) % 4", float(np.mod(2 * np.pi, 4))),
])  # fmt: skip
def test_pi_and_modulo_fold_like_numpy(expr, want):
    """`%` is the floor modulo (the sign of the divisor), as Python's % and jnp.mod."""
    node = probe(expr)
    assert node.op == "num" and node.extra == want and type(node.extra) is type(want)


def test_modulo_types_like_the_other_elementwise_operators():
    assert probe("means % 2").type == VecT(3)
    assert probe("2 % means").type == VecT(3)
    assert probe("quat_to_rotmat(quats) % quat_to_rotmat(quats)").type == MatT(3, 3)
    assert probe("o % w").type == SCALAR


def test_a_spec_name_shadows_the_builtin_pi():
    """Specs written before `pi` existed define it themselves: theirs wins, everywhere."""
    spec = BASE.replace("const k = 2", "const k = 2\nconst pi = 3").format(
        body="x = pi\n  emit probe = [x, twice(pi)]"
    )
    c = check.check(parse.parse(spec, "t.xpr"))
    assert [n.extra for n in c.prim["probe"].args] == [3, 6]
    local = probe("pi", body="pi = 2")
    assert local.extra == 2
