"""The compiler under hostile sizes and numbers (issue 26): folding that is numerically stable
(a finite value folds to itself, only a truly non-finite constant is an error), huge literals
and sizes as located errors, and budgets that stop a spec that would compile for minutes."""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import pytest

from xprc.compiler import driver
from xprc.errors import StaticError, XprError

SPEC = """primitive Blob
param means : vec3
const k = {value}
projection {{
  p = camera.world_to_camera(means)
  emit centre = camera.project(p), depth = p.z, radius = 3.0, valid = p.z > camera.near
}}
response {{ alpha = 0.5 }}
color = [1, 1, 1]
"""


def _constant(value: str) -> float:
    checked = driver.check_source(SPEC.format(value=value), "blob.xpr")
    return checked.constants["k"]


# ---------------------------------------------------------------------------------------------
# Folding (item 6): what JAX computes in float64, never an overflow of a naive formula.

STABLE = [
    ("sigmoid(-1000)", jax.nn.sigmoid, -1000.0),
    ("sigmoid(-700)", jax.nn.sigmoid, -700.0),
    ("sigmoid(1000)", jax.nn.sigmoid, 1000.0),
    ("softplus(-1000)", jax.nn.softplus, -1000.0),
    ("softplus(1000)", jax.nn.softplus, 1000.0),
    ("exp(-1000)", jnp.exp, -1000.0),
    ("expm1(-1000)", jnp.expm1, -1000.0),
    ("tanh(-1000)", jnp.tanh, -1000.0),
]


@pytest.mark.parametrize("text,fn,x", STABLE, ids=[s[0] for s in STABLE])
def test_finite_values_fold_to_what_jax_computes(text, fn, x):
    """`const k = sigmoid(-1000)` was reported 'not finite' (1 / (1 + exp(1000)) overflowed);
    its value is 0."""
    assert _constant(text) == pytest.approx(float(fn(jnp.float64(x))), rel=1e-12, abs=0)


NON_FINITE = [  # (value, what it folds to, column of the caret: the call or the operator)
    ("exp(1000)", "inf", 11),
    ("log(0)", "-inf", 11),
    ("log1p(-1)", "-inf", 11),
    ("rsqrt(0)", "inf", 11),
    ("0 ^ -1", "inf", 13),
    ("sqrt(-1)", "nan", 11),
]


@pytest.mark.parametrize("text,value,col", NON_FINITE, ids=[s[0] for s in NON_FINITE])
def test_non_finite_constant_is_a_located_error(text, value, col):
    with pytest.raises(StaticError) as e:
        _constant(text)
    assert str(e.value) == (
        f"blob.xpr:3:{col}: error: constant 'k' is not finite (it folds to {value})\n"
        f"    const k = {text}\n"
        f"    {' ' * (col - 1)}^"
    )


# ---------------------------------------------------------------------------------------------
# Hostile sizes and literals (item 5): located errors where there were tracebacks (Python's
# int() refuses more than 4300 digits; an integer folded past the float range overflowed where
# it met a float, or grew for minutes: `s = s * s` in a loop).

D = "9" * 5000


def _spec(value="1", decl="", body="") -> str:
    text = SPEC.format(value=value)
    text = text.replace("const k", f"{decl}\nconst k") if decl else text
    return text.replace("  p = camera", f"  {body}\n  p = camera") if body else text


HOSTILE = [
    ("vec_type", _spec(decl=f"param b : vec{D}"),
     f"blob.xpr:3:11: error: unknown type 'vec{D}'\n    param b : vec{D}\n              ^"),
    ("mat_type", _spec(decl=f"param b : mat3x{D}"),
     f"blob.xpr:3:11: error: unknown type 'mat3x{D}'\n    param b : mat3x{D}\n              ^"),
    ("vec_constructor", _spec(body=f"x = vec{D}(1)"),
     f"blob.xpr:5:7: error: vectors have at most 64 components\n      x = vec{D}(1)\n"
     "          ^"),
    ("sh_degree", _spec(decl=f"param b : sh({D})"),
     f"blob.xpr:3:14: error: number too large (5000 digits)\n    param b : sh({D})\n"
     "                 ^"),
    ("integer_literal", _spec(value=D),
     f"blob.xpr:3:11: error: number too large (more than 308 digits)\n    const k = {D}\n"
     "              ^"),
    ("power_tower", _spec(value="10^10^10"),
     "blob.xpr:3:13: error: constant 'k' is not finite (it folds to inf)\n"
     "    const k = 10^10^10\n                ^"),
    ("integer_product", _spec(value="65535^64 * 65535^64"),
     "blob.xpr:3:20: error: constant 'k' is not finite (it folds to inf)\n"
     "    const k = 65535^64 * 65535^64\n                       ^"),
    ("integer_sum", _spec(value="-(65535^64) - 65535^64"),
     "blob.xpr:3:23: error: constant 'k' is not finite (it folds to -inf)\n"
     "    const k = -(65535^64) - 65535^64\n                          ^"),
    ("loop_bound", _spec(body="for i in 0..65535^64 { s = i }"),
     "blob.xpr:5:20: error: loop of 1.796e+308 iterations is too long (at most 1024)\n"
     "      for i in 0..65535^64 { s = i }\n                       ^"),
    ("index", _spec(body="v = [1, 2]\n  s = v[65535^64]"),
     "blob.xpr:6:14: error: index 1.796e+308 out of range for vec2\n"
     "      s = v[65535^64]\n                 ^"),
]  # fmt: skip


@pytest.mark.parametrize("text,message", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_literal_is_a_located_error(text, message):
    with pytest.raises(XprError) as e:
        driver.check_source(text, "blob.xpr")
    got = str(e.value)
    if len(message) < 1000:
        assert got == message
        return
    # A 5,000-digit literal: the message and the source line are shortened (errors.py windows a
    # long line around the caret and cuts a huge message in the middle); the location and the
    # message's start are whole, and the caret still ends the report.
    head = message.split("\n")[0][:60]
    assert got.startswith(head), got[:200]
    assert len(got) < 4500 and got.count("...") >= 1
    assert got.splitlines()[-1].strip() == "^"


def test_leading_zeros_and_folded_overflow_are_values():
    """Thousands of leading zeros are still the number; an integer squared past the float range
    in a loop becomes inf at once, instead of a big integer growing for minutes, and that inf
    is an error at the fold (float32 cannot hold it: tests/test_fold_range.py)."""
    assert _constant("0" * 5000 + "7") == 7
    checked = driver.check_source(_spec(decl=f"param b : sh({'0' * 5000}1)"), "blob.xpr")
    assert [p.degree for p in checked.params if p.name == "b"] == [1]
    assert driver.parse_defines({"k": "-" + "0" * 5000 + "7"}) == {"k": -7}
    body = "s = 3\n  for i in 0..64 { s = s * s }\n  emit big = s"
    with pytest.raises(StaticError, match=r"'s \* s' = inf is outside float32's range"):
        driver.check_source(_spec(body=body), "blob.xpr")


# ---------------------------------------------------------------------------------------------
# Compile time (item 4)

CHAIN = """primitive P
param a : scalar
param b : scalar
projection {{
  s = a
  for i in 0..30 {{ s = {step} }}
  emit centre = [0, 0], depth = 1, radius = 1, valid = true, v = s
}}
response {{ alpha = 0.5 * v }}
color = [1, 1, 1]
"""


@pytest.mark.parametrize("step", [
    "where(s > 0, min(s, b), max(s, b))",
    "where(s > b, min(s, 1), max(s, -1))",
    "where(s > 0, min(sqrt(s), b), max(log(-s), b))",  # guarded branches
])  # fmt: skip
def test_a_chain_of_30_selects_compiles_in_seconds(step):
    """Each select rebuilt its branches as new SymPy objects, and SymPy compares equal
    expressions by walking them as trees: the time tripled with every step (16 steps: 40 s;
    30 steps: more than 10 minutes). Now 0.2 s; 30 s leaves room for a loaded machine."""
    start = time.perf_counter()
    source = driver.compile_source(CHAIN.format(step=step), "chain.xpr")
    assert time.perf_counter() - start < 30
    assert source.count("jnp.where(") >= 30


MATRIX = """primitive P
param w : mat{n}
projection {{
  s = trace(w * w * w)
  emit centre = [0, 0], depth = 1, radius = 1, valid = true, v = s
}}
response {{ alpha = 0.5 }}
color = [1, 1, 1]
"""


def test_a_large_matrix_product_is_over_budget_at_once():
    """The budget counted a matrix product as one node: trace(w * w * w) of a mat64 (over a
    million scalar terms) compiled for about 3 minutes. It is 524288 operations now: a located
    error before any lowering."""
    start = time.perf_counter()
    with pytest.raises(StaticError) as e:
        driver.compile_source(MATRIX.format(n=64), "m.xpr")
    assert time.perf_counter() - start < 10
    assert str(e.value) == (
        "m.xpr:4:15: error: spec unrolls to too many operations (more than 200000; this mat64 * "
        "mat64 product is 524288); reduce matrix sizes\n"
        "      s = trace(w * w * w)\n"
        "                  ^"
    )


def test_work_counts_scalar_operations():
    from xprc.compiler.ast import MatT, Node, VecT
    from xprc.compiler.names import work

    m = Node("input", MatT(64, 64))
    assert work("matmul", MatT(64, 64), (m, m)) == 2 * 64**3
    assert work("matmul", VecT(64), (m, Node("input", VecT(64)))) == 2 * 64 * 64
    assert work("add", MatT(4, 4), (m, m)) == 16
    assert work("call", VecT(3), (Node("input", VecT(3)),)) == 6
    assert work("pack", VecT(3), ()) == 1
    small = driver.check_source(MATRIX.format(n=8), "m.xpr")  # 2 products of 1024: compiles
    assert small.outputs["centre"] is not None


# ---------------------------------------------------------------------------------------------
# A compile that runs long says so, naming the spec and the stage it is in.


def test_a_long_compile_says_which_stage_it_is_in(monkeypatch, capsys):
    """The 'sympy' stage made to take 2 s, the notice due after 0.4 s (parsing and checking
    take milliseconds once the grammar is loaded): one line, naming the spec (ascii-escaped, as
    every untrusted name in a message) and that stage."""
    driver.compile_source(SPEC.format(value="2.0"), "blob.xpr")  # the grammar loaded

    def slow(stage):
        def run(value, job):
            time.sleep(2.0)
            return stage.run(value, job)

        return dataclasses.replace(stage, run=run)

    stages = tuple(slow(s) if s.name == "sympy" else s for s in driver.STAGES)
    monkeypatch.setattr(driver, "STAGES", stages)
    monkeypatch.setattr(driver, "SLOW_NOTICE_S", 0.4)
    source = driver.compile_source(SPEC.format(value="2.0"), "dir/blob\u00e9.xpr")
    assert "def response" in source
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "xprc: still compiling 'dir/blob\\xe9.xpr' (stage: sympy) after 0 s; large matrix "
        "products or long chains of selects take longest"
    ]


def test_a_quick_compile_prints_nothing(capsys):
    driver.check_source(SPEC.format(value="2.0"), "blob.xpr")
    assert capsys.readouterr().err == ""
