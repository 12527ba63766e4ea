"""`cutoff` derives a footprint from the density assuming the kernel never increases in g: a
density that does increase is an error at its line (the footprint would miss pixels it draws,
silently). The kernels are sampled at numbers; values in the messages are checked against NumPy."""

import re

import numpy as np
import pytest

from xprc.compiler import driver
from xprc.errors import SpecError

SPEC = """primitive Blob
param means     : vec3
param opacities : scalar = sigmoid(raw)
param nus       : scalar = exp(raw)
param sh        : sh(0)
density(g) = KERNEL
projection {
  p = camera.world_to_camera(means)
  r2 = CUTOFF
  emit centre = camera.project(p), depth = p.z, radii = [r2, r2], valid = p.z > 0.1
}
response {
  alpha = min(0.99, opacities * DENSITY)
}
color = eval_sh(sh, [0, 0, 1]) + 0 * nus
"""


def spec(kernel, args="g", cutoff="cutoff(1 / (255 * opacities))", call=None):
    call = call or "density(dot(pixel - centre, pixel - centre))"
    return (SPEC.replace("density(g)", f"density({args})").replace("KERNEL", kernel)
            .replace("CUTOFF", cutoff).replace("DENSITY", call))  # fmt: skip


INCREASING = {  # kernel -> its NumPy twin
    "1 - exp(-g)": lambda g: 1 - np.exp(-g),
    "exp(0.1 * g)": lambda g: np.exp(0.1 * g),
    "g * exp(-g)": lambda g: g * np.exp(-g),  # a ring: rises, then falls
    "where(g < 1, 0.5, where(g < 2, 1, 0))": lambda g: np.where(g < 1, 0.5, np.where(g < 2, 1, 0)),
    "exp(-0.5 * (g - 4)^2)": lambda g: np.exp(-0.5 * (g - 4) ** 2),
}


@pytest.mark.parametrize("kernel", sorted(INCREASING))
def test_an_increasing_density_is_an_error_at_its_line(kernel):
    with pytest.raises(SpecError) as info:
        driver.compile_source(spec(kernel), "blob.xpr")
    text = str(info.value)
    head = text.splitlines()[0]
    assert head.startswith("blob.xpr:6:1: error: the density increases with g"), text
    assert "'cutoff' (line 9)" in head
    assert text.splitlines()[1].strip() == f"density(g) = {kernel}"
    assert text.splitlines()[2].strip() == "^"
    num = r"([-+0-9.e]+)"
    m = re.search(rf"from density\({num}\) = {num} to density\({num}\) = {num}\.", head)
    a, fa, b, fb = (float(x) for x in m.groups())
    twin = INCREASING[kernel]
    assert a < b and fa < fb
    assert fa == pytest.approx(float(twin(a)), rel=2e-3, abs=1e-12)  # a and b printed to 6 digits
    assert fb == pytest.approx(float(twin(b)), rel=2e-3, abs=1e-12)  # a and b printed to 6 digits


@pytest.mark.parametrize(
    "kernel",
    [
        "exp(-0.5 * g)",
        "(1 + g / 2)^-2",
        "exp(-0.055556 * g * g)",
        "where(g < 1, (1 - g)^4, 0)",
        "max(exp(-g), 0.5 * exp(-0.1 * g))",
        "0.5",  # flat: never increases
        "sqrt(max(1 - g, 0))",
        "exp(-(g / 2)^1.5)",
    ],
)
def test_non_increasing_densities_compile(kernel):
    module = driver.compile_source(spec(kernel), "blob.xpr")
    assert "def response" in module


def test_numeric_extra_arguments_are_checked_and_per_primitive_ones_are_not():
    bad = "1 - exp(-g / nu)"
    with pytest.raises(SpecError, match="the density increases with g"):
        driver.compile_source(
            spec(bad, "g, nu", "cutoff(0.1, 2)", "density(1.0, 2)"), "blob.xpr"
        )
    # a per-primitive argument has no value at compile time: not sampled (docs/language.md)
    module = driver.compile_source(
        spec(bad, "g, nu", "cutoff(0.1, nus)", "density(1.0, nus)"), "blob.xpr"
    )
    assert "def response" in module
