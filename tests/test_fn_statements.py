"""Functions with statements (issue 41, item 2): `fn f(x) = { statements; result }` holds
locals, reassignment, indexed assignment, static loops and `where` like a block, and returns the
expression after its statements. Recursion, direct or through other functions, is a located
error before anything is inlined. Values are checked against plain Python, and the generated
module against the same spec written inline."""

from __future__ import annotations

import math
import re

import jax.numpy as jnp
import numpy as np
import pytest

from xprc import verify
from xprc.compiler import ast, driver, parse
from xprc.errors import ParseError, ScopeError, StaticError, XprError

BASE = """primitive Blob
param means : vec3
param opacities : scalar = sigmoid(raw)
const k = 2
projection {
  p = camera.world_to_camera(means)
  emit centre = camera.project(p), depth = p.z, radius = 3.0, valid = p.z > camera.near
}
response {
  d = pixel - centre
  alpha = min(0.99, opacities * exp(-dot(d, d)))
}
color = [1, 1, 1]
"""

# A truncated series of log(1 + x) with a loop, a reassigned local, an indexed assignment and a
# `where`: sum_{i=1..n} (-1)^(i+1) x^i / i, negated for x < 0 (a made-up odd extension).
SERIES = """fn series(x, n) = {
  s = 0
  p = 1
  for i in 1..n + 1 {
    p = p * x
    s = s + where(i % 2 == 1, p, -p) / i
  }
  v = [s, 0]
  v[1] = -s
  where(x >= 0, v[0], v[1])
}
"""


def series(x: float, n: int) -> float:
    s = sum((-1) ** (i + 1) * x**i / i for i in range(1, n + 1))
    return s if x >= 0 else -s


def sub(old: str, new: str, text: str = BASE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def test_parse_function_body():
    spec = parse.parse(SERIES, "f.xpr")
    (fn,) = spec.items
    assert isinstance(fn.body, ast.FnBody)
    assert [type(s).__name__ for s in fn.body.stmts] == ["Assign", "Assign", "For", "Assign",
                                                         "Assign"]  # fmt: skip
    indexed = fn.body.stmts[4]
    assert indexed.name == "v" and [i.value for i in indexed.indices] == [1]
    assert isinstance(fn.body.result, ast.Call) and fn.body.result.func.id == "where"
    # a result that reads an element is not the start of an assignment `v[0] = ...`
    (g,) = parse.parse("fn g(v) = { s = v[1]; v[0] + s }", "g.xpr").items
    assert isinstance(g.body.result, ast.Binary) and isinstance(g.body.result.left, ast.Index)
    # one-expression functions are unchanged
    (h,) = parse.parse("fn h(x) = x + 1", "h.xpr").items
    assert isinstance(h.body, ast.Binary)


@pytest.mark.parametrize("x,n", [(0.5, 6), (-0.3, 5), (0.9, 1), (0.0, 3)])
def test_folded_value_matches_python(x, n):
    text = sub("const k = 2", f"const k = 2\nconst c = series({x}, {n})\n" + SERIES)
    text = sub("radius = 3.0", "radius = 3.0 + c", text)
    module = driver.compile_source(text, "blob.xpr")
    c = float(re.search(r"'c': ([-0-9.e]+)", module).group(1))
    assert c == pytest.approx(series(x, n), rel=1e-12, abs=1e-15)


def test_module_values_match_python(tmp_path):
    """The function at per-primitive values (the opacity), in the generated module's colour."""
    text = sub("color = [1, 1, 1]", SERIES + "color = [series(opacities - 0.5, 7), 1, k]")
    (tmp_path / "blob.xpr").write_text(text)
    method = driver.load(tmp_path / "blob.xpr")
    raw = verify.scene(method, "random", 9, 0)
    raw["opacities"] = np.linspace(-3.0, 3.0, 9)
    cam = verify.camera("pinhole", 40, 32)
    out = method.project({k: jnp.asarray(v, jnp.float64) for k, v in raw.items()}, cam)
    o = 1 / (1 + np.exp(-raw["opacities"]))
    want = [series(float(v) - 0.5, 7) for v in o]
    np.testing.assert_allclose(np.asarray(out["features"])[:, 0], want, rtol=1e-12, atol=1e-15)


FN_SPEC = sub(
    "projection {",
    """fn shrink(v, n) = {
  t = dot(v, v)
  for i in 0..n { t = sqrt(t + i) }
  q = v / (1 + t)
  q[0] = where(t > 2, q[0], 0)
  q
}
projection {""",
)
FN_SPEC = sub("p = camera.world_to_camera(means)", "p = camera.world_to_camera(shrink(means, 3))",
              FN_SPEC)  # fmt: skip
INLINE_SPEC = sub(
    "p = camera.world_to_camera(means)",
    """v = means
  t = dot(v, v)
  for i in 0..3 { t = sqrt(t + i) }
  q = v / (1 + t)
  q[0] = where(t > 2, q[0], 0)
  p = camera.world_to_camera(q)""",
)


def _body(source: str) -> str:
    """The module without the lines that name the spec text (its hash) or its lines."""
    drop = ("# spec sha256", "SPEC_SHA256 =")
    lines = [line for line in source.splitlines() if not line.startswith(drop)]
    return "\n".join(re.sub(r"  # spec line \d+$", "", line) for line in lines)


def test_module_equals_the_inline_written_spec():
    with_fn = driver.compile_source(FN_SPEC, "blob.xpr")
    inline = driver.compile_source(INLINE_SPEC, "blob.xpr")
    assert "jnp.sqrt" in inline and "jnp.where" in inline  # the loop and the select are there
    assert _body(with_fn) == _body(inline)


def test_function_locals_may_be_named_like_parameters():
    text = sub("color = [1, 1, 1]", "fn f(x) = { means = x * 2; means + 1 }\ncolor = [f(k), 1, 1]")
    assert "'Blob'" in driver.compile_source(text, "blob.xpr")


# (id, spec text, error class, whole message)
ERRORS = [
    (
        "recursion_direct",
        sub("color = [1, 1, 1]", "fn f(a) = f(a)\ncolor = f(1) * [1, 1, 1]"),
        StaticError,
        "blob.xpr:13:11: error: recursive function 'f': it calls itself; functions are inlined "
        "at each call, so they cannot recurse\n"
        "    fn f(a) = f(a)\n"
        "              ^",
    ),
    (
        "recursion_mutual_uncalled",
        sub("const k = 2", "const k = 2\nfn f(a) = { t = a + 1; g(t) }\nfn g(b) = 2 * f(b - 1)"),
        StaticError,
        "blob.xpr:6:15: error: recursive functions: 'g' calls 'f', which calls 'g' (line 5); "
        "functions are inlined at each call, so they cannot recurse\n"
        "    fn g(b) = 2 * f(b - 1)\n"
        "                  ^",
    ),
    (
        "recursion_through_cutoff",
        sub("const k = 2", "const k = 2\ndensity(g) = { r = cutoff(0.5); exp(-g * r) }"),
        StaticError,
        "blob.xpr:5:20: error: recursive function 'density': it calls itself; functions are "
        "inlined at each call, so they cannot recurse\n"
        "    density(g) = { r = cutoff(0.5); exp(-g * r) }\n"
        "                       ^",
    ),
    (
        "fn_without_result",
        sub("const k = 2", "const k = 2\nfn f(x) = {\n  t = x\n  -t\n}"),
        ParseError,
        "blob.xpr:8:1: error: 'f' must end with the value it returns (an expression after its "
        "statements); a new line does not end a statement, so a result that starts with '-', "
        "'+', '(' or '[' continues the assignment before it: write ';' before the result\n"
        "    }\n"
        "    ^",
    ),
    (
        "fn_emit",
        sub("const k = 2", "const k = 2\nfn f(x) = { emit y = x; y }"),
        ScopeError,
        "blob.xpr:5:18: error: 'emit' is not allowed in a function (it returns the expression "
        "after its statements)\n"
        "    fn f(x) = { emit y = x; y }\n"
        "                     ^",
    ),
    (
        "fn_assign_to_call",
        sub("const k = 2", "const k = 2\nfn f(x) = { sqrt(x) = 1; x }"),
        ParseError,
        "blob.xpr:5:13: error: cannot assign to this: assign to a name or to an element of one "
        "(v[i] = ...)\n"
        "    fn f(x) = { sqrt(x) = 1; x }\n"
        "                ^",
    ),
    (
        "fn_reads_before_assigning",
        sub("const k = 2", "const k = 2\nfn f(x) = { y = t; t = x; y }"),
        XprError,
        "blob.xpr:5:17: error: unknown name 't'\n"
        "    fn f(x) = { y = t; t = x; y }\n"
        "                    ^",
    ),
    (
        "fn_loop_local_named_param_reads_param",
        sub("color = [1, 1, 1]", "fn f(x) = { y = opacities; y }\ncolor = [f(1), 1, 1]"),
        ScopeError,
        "blob.xpr:13:17: error: 'opacities' is not available in a function (pass it as an "
        "argument)\n"
        "    fn f(x) = { y = opacities; y }\n"
        "                    ^",
    ),
]


@pytest.mark.parametrize("name,text,cls,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_error(name, text, cls, message):
    with pytest.raises(cls) as info:
        driver.compile_source(text, "blob.xpr")
    assert str(info.value) == message


def test_unused_function_local_is_a_warning():
    text = sub("color = [1, 1, 1]", "fn f(x) = { spare = 2 * x; x }\ncolor = [f(1), 1, 1]")
    with pytest.warns(UserWarning, match=r"blob.xpr:13:13: warning: 'spare' is assigned but never"):
        driver.compile_source(text, "blob.xpr")


def test_series_reference_is_right():
    assert series(0.5, 60) == pytest.approx(math.log1p(0.5), rel=1e-15)
