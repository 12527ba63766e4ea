"""Constant expressions must fold to numbers float32 holds (renders run in float32): the compiler
folds in float64, where `1e20 * 1e20` is 1e40 and `7 ^ 1234` inf, and wrote them into the module
(inf in float32), checked ok and rendered black or NaN images. Now a located error, for folds the
checker makes, and an error naming the number for those the simplifier makes."""

import pytest
from conftest import ROOT

from xprc.compiler import driver
from xprc.errors import StaticError

SPEC = (ROOT / "specs" / "3dgs.xpr").read_text()
LINE = "  z   = max(p.z, camera.near)"


def with_z(factor: str) -> str:
    assert LINE in SPEC
    return SPEC.replace(LINE, f"{LINE} * ({factor})", 1)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    "factor,shown,becomes",
    [
        ("1e20 * 1e20 * 0 + 1", "'1e+20 * 1e+20' = 1e+40", "outside"),
        ("1 + 1e-6 * 7.0 ^ 1234", "'7.0 ^ 1234' = inf", "outside"),
        ("1e20 * 1e20 / 1e20 * 1e-20", "'1e+20 * 1e+20' = 1e+40", "outside"),  # as float32 would
        ("1 + 0 * sqrt(-1)", "'sqrt(-1)' is not a number (it folds to nan)", "nan"),
        ("1 + 0 * log(-2)", "'log(-2)' is not a number (it folds to nan)", "nan"),
        # a comparison with a folded NaN (issue 13's crash 5, then a select that was never taken)
        ("where(log(-1) < 0, 1, 2)", "'log(-1)' is not a number (it folds to nan)", "nan"),
    ],
)
def test_a_fold_float32_cannot_hold_is_a_located_error(factor, shown, becomes):
    text = with_z(factor)
    with pytest.raises(StaticError) as info:
        driver.compile_source(text, "fold.xpr")
    lines = str(info.value).splitlines()
    head = f"fold.xpr:{line_of(text, factor)}:"
    assert lines[0].startswith(head), lines[0]
    assert shown in lines[0]
    if becomes == "outside":
        assert lines[0].endswith(
            "is outside float32's range (renders run in float32, where it would be inf)"
        )
    assert lines[1].strip().startswith("z   = max(p.z, camera.near) *")
    assert lines[2].strip() == "^"


def test_a_define_that_makes_a_fold_overflow_is_an_error_at_the_fold():
    with pytest.raises(StaticError) as info:
        driver.compile_source(SPEC, "3dgs.xpr", defines={"eps2d": 1e30})
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"3dgs.xpr:{line_of(SPEC, 'eps2d^2')}:")
    assert "'eps2d ^ 2' = 1.0000000000000001e+60 is outside float32's range" in first


def test_constants_the_simplifier_combines_are_checked_too():
    with pytest.raises(StaticError) as info:
        driver.compile_source(SPEC.replace(LINE, f"{LINE} * 1e20 * 1e20", 1), "sym.xpr")
    assert str(info.value).startswith(
        "sym.xpr: error: the compiled expressions hold the number 1e+40, which float32"
    )


@pytest.mark.parametrize(
    "factor",
    ["1 + 1e-30 * 1e-30", "1e19 * 1e19", "1 + 0 * exp(-1000)", "3.4e38 / 1e38"],
)
def test_folds_float32_holds_or_flushes_to_zero_compile(factor):
    assert "def project" in driver.compile_source(with_z(factor), "ok.xpr")


def test_the_compilers_own_samples_of_a_kernel_are_not_the_specs_constants():
    """`cutoff` of a kernel it cannot invert bisects at g up to 2^40, where g^4 is beyond
    float32; those folds are the compiler's, not the spec's: no error."""
    kernel = "density(g) = max(exp(-g^4), 0.5 * exp(-0.1 * g))"
    text = SPEC.replace("density(g) = exp(-0.5 * g)", kernel, 1)
    assert kernel in text
    assert "def response" in driver.compile_source(text, "bisect.xpr")
