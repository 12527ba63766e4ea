# ruff: noqa: E501  (the tables hold full error messages, source lines included)
"""Numbers a spec writes that would be changed in silence are located errors:

- a numeric `init` through a named activation (`sigmoid(raw) init 2`) outside what the
  activation gives: activations.py clipped it into range (raw logit(1 - 1e-7)), while the same
  mistake through an unnamed activation (`2 * sigmoid(raw) init 3`) was already an error;
- a number float32 cannot hold (`1e-400`, `1e-50`, `1e39`): renders and training run in float32,
  where it is 0 (a guard `max(det, 1e-50)` disappears; XLA flushes subnormals too) or inf.
"""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest
from test_errors import BASE  # the same small spec

from xprc.activations import INVERSES, init_problem, inverse
from xprc.compiler import driver, parse
from xprc.errors import DefineError, ParseError, StaticError
from xprc.resources import shipped_specs

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC_3DGS = (ROOT / "specs" / "3dgs.xpr").read_text()


def sub(old, new, text=BASE):
    assert old in text, old
    return text.replace(old, new, 1)


def param(decl):
    """BASE with one more parameter line (line 3)."""
    return sub("param means : vec3", "param means : vec3\n" + decl)


def _message(text, cls, filename="blob.xpr"):
    with pytest.raises(cls) as info:
        driver.compile_source(text, filename)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# 1. Numeric inits through named activations

INIT_CASES = [
    (
        "3dgs_opacity_2",
        sub("init 0.1          role opacity", "init 2          role opacity", SPEC_3DGS),
        "3dgs.xpr",
        "3dgs.xpr:11:60: error: init 2.0 of 'opacities': no raw value gives it through the activation 'sigmoid(raw)' (its values are (0, 1))\n"
        "    param opacities : scalar = sigmoid(raw)    lr 5e-2    init 2          role opacity   # logits\n"
        "                                                               ^",
    ),
    (
        "sigmoid_1",
        param("param o : scalar = sigmoid(raw) init 1"),
        "blob.xpr",
        "blob.xpr:3:38: error: init 1.0 of 'o': no raw value gives it through the activation 'sigmoid(raw)' (its values are (0, 1))\n"
        "    param o : scalar = sigmoid(raw) init 1\n"
        "                                         ^",
    ),
    (
        "sigmoid_0",
        param("param o : scalar = sigmoid(raw) init 0"),
        "blob.xpr",
        "blob.xpr:3:38: error: init 0.0 of 'o': no raw value gives it through the activation 'sigmoid(raw)' (its values are (0, 1))\n"
        "    param o : scalar = sigmoid(raw) init 0\n"
        "                                         ^",
    ),
    (
        "exp_0",
        param("param s : vec3 = exp(raw) init 0"),
        "blob.xpr",
        "blob.xpr:3:32: error: init 0.0 of 's': no raw value gives it through the activation 'exp(raw)' (its values are > 0)\n"
        "    param s : vec3 = exp(raw) init 0\n"
        "                                   ^",
    ),
    (
        "exp_negative",
        param("param s : vec3 = exp(raw) init -1"),
        "blob.xpr",
        "blob.xpr:3:32: error: init -1.0 of 's': no raw value gives it through the activation 'exp(raw)' (its values are > 0)\n"
        "    param s : vec3 = exp(raw) init -1\n"
        "                                   ^",
    ),
    (
        "tanh_5",
        param("param t : scalar = tanh(raw) init 5"),
        "blob.xpr",
        "blob.xpr:3:35: error: init 5.0 of 't': no raw value gives it through the activation 'tanh(raw)' (its values are (-1, 1))\n"
        "    param t : scalar = tanh(raw) init 5\n"
        "                                      ^",
    ),
    (
        "softplus_0",
        param("param t : scalar = softplus(raw) init 0"),
        "blob.xpr",
        "blob.xpr:3:39: error: init 0.0 of 't': no raw value gives it through the activation 'softplus(raw)' (its values are > 0)\n"
        "    param t : scalar = softplus(raw) init 0\n"
        "                                          ^",
    ),
    (
        "abs_negative",
        param("param t : scalar = abs(raw) init -2"),
        "blob.xpr",
        "blob.xpr:3:34: error: init -2.0 of 't': no raw value gives it through the activation 'abs(raw)' (its values are >= 0)\n"
        "    param t : scalar = abs(raw) init -2\n"
        "                                     ^",
    ),
    (
        "normalize_1",
        param("param q : quat = normalize(raw) init 1"),
        "blob.xpr",
        "blob.xpr:3:38: error: init 1.0 of 'q': no raw value gives it through the activation 'normalize(raw)' (it gives a unit vector: equal components are 0.5 or -0.5 (or all 0))\n"
        "    param q : quat = normalize(raw) init 1\n"
        "                                         ^",
    ),
    (
        "sigmoid_clipped",
        param("param o : scalar = sigmoid(raw) init 1e-9"),
        "blob.xpr",
        "blob.xpr:3:38: error: init 1e-09 of 'o': too close to the edge of the activation 'sigmoid(raw)' (the trainer's inverse of sigmoid takes values [1e-08, 0.9999999] and would start it at 1e-08)\n"
        "    param o : scalar = sigmoid(raw) init 1e-9\n"
        "                                         ^",
    ),
    (
        "through_a_constant",  # the value is located where the init is written
        sub("const k = 2", "const k = 2\nconst top = 1\nparam o : scalar = sigmoid(raw) init top"),
        "blob.xpr",
        "blob.xpr:6:38: error: init 1.0 of 'o': no raw value gives it through the activation 'sigmoid(raw)' (its values are (0, 1))\n"
        "    param o : scalar = sigmoid(raw) init top\n"
        "                                         ^",
    ),
]


@pytest.mark.parametrize(("name", "text", "filename", "message"), INIT_CASES, ids=[c[0] for c in INIT_CASES])
def test_init_outside_a_named_activation_is_located(name, text, filename, message):
    assert _message(text, StaticError, filename) == message


def test_unnamed_activation_gives_the_same_error():
    """The message a named activation now gives is the one `2 * sigmoid(raw)` already gave."""
    got = _message(param("param b : scalar = 2 * sigmoid(raw) init 3"), StaticError)
    assert got.startswith(
        "blob.xpr:3:42: error: init 3.0 of 'b': no raw value gives it through the activation "
        "'2 * sigmoid(raw)'"
    )
    named = _message(param("param b : scalar = sigmoid(raw) init 3"), StaticError)
    assert named.startswith(
        "blob.xpr:3:38: error: init 3.0 of 'b': no raw value gives it through the activation "
        "'sigmoid(raw)'"
    )


@pytest.mark.parametrize(
    "decl",
    [
        "param o : scalar = sigmoid(raw) init 0.5",
        "param o : scalar = sigmoid(raw) init 1e-8",
        "param o : scalar = sigmoid(raw) init 0.9999999",
        "param s : vec3 = exp(raw) init 1e-30",
        "param s : vec3 = exp(raw) init 3e38",
        "param t : scalar = tanh(raw) init -0.5",
        "param t : scalar = softplus(raw) init 1e30",
        "param t : scalar = abs(raw) init 0",
        "param q : quat = normalize(raw) init 0.5",
        "param q : quat = normalize(raw) init -0.5",
        "param q : vec3 = normalize(raw) init 0",
        "param i : scalar init -7",
    ],
)
def test_init_inside_the_range_compiles(decl):
    checked = driver.check_source(param(decl), "blob.xpr")
    info = next(i for i in checked.params if i.name == decl.split()[1])
    assert info.init_raw is None  # the trainer inverts a named activation itself


@pytest.mark.parametrize(
    ("activation", "value", "size"),
    [
        ("sigmoid", 0.1, 1), ("sigmoid", 1e-8, 1), ("sigmoid", 0.9999999, 1), ("exp", 1e-30, 1),
        ("exp", 3e38, 1), ("softplus", 1e-30, 1), ("softplus", 1e30, 1), ("tanh", -0.9999999, 1),
        ("abs", 0.0, 1), ("relu", 2.0, 1), ("normalize", 0.5, 4), ("identity", -1e30, 1),
    ],
)  # fmt: skip
def test_an_accepted_init_survives_the_inverse(activation, value, size):
    """What init_problem accepts, inverse gives back unchanged (float64, no clip)."""
    assert init_problem(activation, value, size) is None
    raw = inverse(activation, np.full(size, value))
    assert np.isfinite(raw).all()
    back = {
        "sigmoid": lambda r: 1 / (1 + np.exp(-r)),
        "exp": np.exp,
        "softplus": lambda r: np.logaddexp(0, r),
        "tanh": np.tanh,
        "abs": np.abs,
        "relu": lambda r: np.maximum(r, 0),
        "normalize": lambda r: r / np.sqrt(max(np.dot(r, r), 1e-24)),
        "identity": lambda r: r,
    }[activation](raw)
    np.testing.assert_allclose(back, value, rtol=1e-6)


def test_every_inverse_has_a_range():
    from xprc.activations import RANGES

    assert set(INVERSES) == {*RANGES, "normalize"}
    for activation in RANGES:
        assert init_problem(activation, math.inf) is not None or RANGES[activation][1] == math.inf


# ---------------------------------------------------------------------------------------------
# 2. Numbers float32 cannot hold

F32_CASES = [
    (
        "const_1e-400",
        sub("const k = 2", "const eps2d = 1e-400"),
        "blob.xpr:4:15: error: number 1e-400 is below float32's smallest normal number (1.175494e-38; renders run in float32, and TPUs and XLA's CPU code flush smaller values to 0)\n"
        "    const eps2d = 1e-400\n"
        "                  ^",
    ),
    (
        "const_1e39",
        sub("const k = 2", "const eps2d = 1e39"),
        "blob.xpr:4:15: error: number 1e39 is outside float32's range (renders run in float32, where it would be inf)\n"
        "    const eps2d = 1e39\n"
        "                  ^",
    ),
    (
        "negative_const",
        sub("const k = 2", "const k = -4e38"),
        "blob.xpr:4:12: error: number 4e38 is outside float32's range (renders run in float32, where it would be inf)\n"
        "    const k = -4e38\n"
        "               ^",
    ),
    (
        "integer_1e39",
        sub("const k = 2", "const k = 1000000000000000000000000000000000000000"),
        "blob.xpr:4:11: error: number 1000000000000000000000000000000000000000 is outside float32's range (renders run in float32, where it would be inf)\n"
        "    const k = 1000000000000000000000000000000000000000\n"
        "              ^",
    ),
    (
        "guard_in_3dgs",  # max(.., 1e-50) is max(.., 0) in float32: no guard
        sub("eps2d^2, 1e-10)", "eps2d^2, 1e-50)", SPEC_3DGS),
        "3dgs.xpr:37:70: error: number 1e-50 is below float32's smallest normal number (1.175494e-38; renders run in float32, and TPUs and XLA's CPU code flush smaller values to 0)\n"
        "      det2  = max(det2d + eps2d * (cov2d[0, 0] + cov2d[1, 1]) + eps2d^2, 1e-50)\n"
        "                                                                         ^",
    ),
    (
        "subnormal",  # a float32 subnormal: XLA flushes it to zero
        sub("radius = 3.0", "radius = 3.0 + 1e-40"),
        "blob.xpr:7:64: error: number 1e-40 is below float32's smallest normal number (1.175494e-38; renders run in float32, and TPUs and XLA's CPU code flush smaller values to 0)\n"
        "      emit centre = camera.project(p), depth = p.z, radius = 3.0 + 1e-40, valid = p.z > camera.near\n"
        "                                                                   ^",
    ),
    (
        "lr",
        sub("param means : vec3", "param means : vec3 lr 1e39"),
        "blob.xpr:2:23: error: number 1e39 is outside float32's range (renders run in float32, where it would be inf)\n"
        "    param means : vec3 lr 1e39\n"
        "                          ^",
    ),
    (
        "init",
        sub("param means : vec3", "param means : vec3 init 1e-45"),
        "blob.xpr:2:25: error: number 1e-45 is below float32's smallest normal number (1.175494e-38; renders run in float32, and TPUs and XLA's CPU code flush smaller values to 0)\n"
        "    param means : vec3 init 1e-45\n"
        "                            ^",
    ),
]


@pytest.mark.parametrize(("name", "text", "message"), F32_CASES, ids=[c[0] for c in F32_CASES])
def test_number_outside_float32_is_located(name, text, message):
    filename = message.split(":", 1)[0]
    assert _message(text, ParseError, filename) == message


FOLDED_CASES = [
    (
        "const",
        sub("const k = 2", "const k = 1e20 * 1e20"),
        "blob.xpr:4:16: error: constant 'k' = 1e+40 is outside float32's range (renders run in float32, where it would be inf)\n"
        "    const k = 1e20 * 1e20\n"
        "                   ^",
    ),
    (
        "lr",
        sub("param means : vec3", "param means : vec3 lr 1e20 * 1e20"),
        "blob.xpr:2:28: error: lr 1e+40 of 'means' is outside float32's range (renders run in float32, where it would be inf)\n"
        "    param means : vec3 lr 1e20 * 1e20\n"
        "                               ^",
    ),
]


@pytest.mark.parametrize(("name", "text", "message"), FOLDED_CASES, ids=[c[0] for c in FOLDED_CASES])
def test_a_folded_number_outside_float32_is_located(name, text, message):
    assert _message(text, StaticError) == message


@pytest.mark.parametrize(
    "value", ["1e-30", "1.2e-38", "1.1754944e-38", "3.4028235e38", "0", "0e9", "0.0", "123456789", "1e38"]
)
def test_numbers_float32_holds_compile(value):
    driver.check_source(sub("const k = 2", f"const k = {value}"), "blob.xpr")


def test_a_fold_below_float32_is_its_value():
    """A computed value that underflows (sigmoid(-700), 1e-20 * 1e-20) is what float32 computes
    too (0): only the numbers written are refused below float32's smallest normal."""
    checked = driver.check_source(sub("const k = 2", "const k = 1e-20 * 1e-20"), "blob.xpr")
    assert checked.constants["k"] == pytest.approx(1e-40)


def test_one_test_for_spec_numbers_and_defines():
    """The -D check and the literal check are the same function (parse.float32_becomes)."""
    for text, becomes in [("1e39", "inf"), ("1e-40", "0"), ("1e-400", "0"), ("-4e38", "inf")]:
        assert parse.float32_becomes(float(text), text) == becomes
        said = "where it would be inf)" if becomes == "inf" else "flush smaller values to 0)"
        with pytest.raises(DefineError, match=re.escape(said) + "$"):
            driver.parse_defines([f"k={text}"])
    assert parse.float32_becomes(0.0, "0e5") is None
    assert parse.float32_becomes(1.2e-38) is None


@pytest.mark.parametrize("name", list(shipped_specs()))
def test_shipped_specs_still_compile(name):
    path = shipped_specs()[name]
    driver.check_source(path.read_text(), path.name, spec_dir=path.parent)
