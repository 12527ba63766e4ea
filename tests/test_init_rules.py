# ruff: noqa: E501  (the table holds full error messages, source lines included)
"""Random inits in the spec (`init normal(m, s)`, `uniform(a, b)`, `unit()`): located errors,
the generated ParamSpec, the trainer's draws (statistics, reproducibility, independence of
other parameters), and the lines that name parameters trained with the trainer's defaults."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

import xprc
from xprc import train as tr
from xprc.compiler import driver
from xprc.errors import StaticError, UnknownNameError, XprTypeError

BASE = """primitive Blob
param means : vec3 lr 1e-3 init points role position
param opacities : scalar = sigmoid(raw) lr 1e-2 init 0.5 role opacity
param scales : vec3 = exp(raw) lr 1e-2 init nn_distance role scale
param normals : vec3 = normalize(raw) lr 1e-3 init unit()
param feat : vec4 lr 1e-3 init normal(0.5, 0.1)
param spin : quat = normalize(raw) init unit()
param tint : scalar = 2 * exp(raw) init uniform(-1, k)
const k = 2
projection {
  p = camera.world_to_camera(means)
  emit centre = camera.project(p), depth = p.z, radius = 3.0 * scales.x,
       valid = p.z > camera.near
}
response {
  d = pixel - centre
  alpha = min(0.99, opacities * exp(-dot(d, d)) * (1 + 0 * dot(normals, feat.xyz) * tint * spin.w))
}
color = [1, 1, 1]
"""


def sub(old, new):
    assert old in BASE, old
    return BASE.replace(old, new, 1)


CASES = [
    (
        "no_arguments",
        sub("init normal(0.5, 0.1)", "init normal"),
        StaticError,
        "blob.xpr:6:32: error: init 'normal' needs its arguments: normal(mean, std)\n"
        "    param feat : vec4 lr 1e-3 init normal\n"
        "                                   ^",
    ),
    (
        "argument_count",
        sub("init normal(0.5, 0.1)", "init normal(0.5)"),
        StaticError,
        "blob.xpr:6:32: error: init normal(mean, std) takes 2 arguments, got 1\n"
        "    param feat : vec4 lr 1e-3 init normal(0.5)\n"
        "                                   ^",
    ),
    (
        "unit_takes_none",
        sub("init unit()\nparam feat", "init unit(1)\nparam feat"),
        StaticError,
        "blob.xpr:5:52: error: init unit() takes 0 arguments, got 1\n"
        "    param normals : vec3 = normalize(raw) lr 1e-3 init unit(1)\n"
        "                                                       ^",
    ),
    (
        "std_not_positive",
        sub("normal(0.5, 0.1)", "normal(0.5, -k)"),
        StaticError,
        "blob.xpr:6:44: error: init normal(mean, std): std must be > 0, got -2.0\n"
        "    param feat : vec4 lr 1e-3 init normal(0.5, -k)\n"
        "                                               ^",
    ),
    (
        "uniform_empty",
        sub("uniform(-1, k)", "uniform(k, 1)"),
        StaticError,
        "blob.xpr:8:49: error: init uniform(low, high): low must be below high, got 2.0 and 1.0\n"
        "    param tint : scalar = 2 * exp(raw) init uniform(k, 1)\n"
        "                                                    ^",
    ),
    (
        "argument_not_a_number",
        sub("normal(0.5, 0.1)", "normal(0.5, [1, 2])"),
        StaticError,
        "blob.xpr:6:44: error: init normal(mean, std): std must be a finite compile-time number, got vec2\n"
        "    param feat : vec4 lr 1e-3 init normal(0.5, [1, 2])\n"
        "                                               ^",
    ),
    (
        "argument_beyond_float32",
        sub("normal(0.5, 0.1)", "normal(k * 3e38, 0.1)"),
        StaticError,
        "blob.xpr:6:41: error: init normal(mean, std): mean 6e+38 is outside float32's range (renders run in float32, where it would be inf)\n"
        "    param feat : vec4 lr 1e-3 init normal(k * 3e38, 0.1)\n"
        "                                            ^",
    ),
    (
        "unit_of_a_scalar",
        sub("init uniform(-1, k)", "init unit()"),
        XprTypeError,
        "blob.xpr:8:41: error: init unit() needs a vector or quat parameter, 'tint' is scalar\n"
        "    param tint : scalar = 2 * exp(raw) init unit()\n"
        "                                            ^",
    ),
    (
        "unknown_rule_lists_random_ones",
        sub("init uniform(-1, k)", "init random"),
        UnknownNameError,
        "blob.xpr:8:41: error: unknown init rule 'random' (expected points, colors, identity, nn_distance, zeros, ones, normal(mean, std), uniform(low, high), unit() or a number)\n"
        "    param tint : scalar = 2 * exp(raw) init random\n"
        "                                            ^",
    ),
]


@pytest.mark.parametrize("name,text,cls,message", CASES, ids=[c[0] for c in CASES])
def test_error(name, text, cls, message):
    with pytest.raises(cls) as info:
        driver.compile_source(text, "blob.xpr")
    assert str(info.value) == message


@pytest.fixture(scope="module")
def method(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "blob.xpr"
    path.write_text(BASE)
    return xprc.load(path)


def test_generated_param_specs(method):
    inits = {p.name: p.init for p in method.PARAMS}
    assert inits["normals"] == ("unit",)
    assert inits["feat"] == ("normal", 0.5, 0.1)
    assert inits["tint"] == ("uniform", -1.0, 2.0)  # the constant folded
    assert inits["means"] == "points" and inits["opacities"] == 0.5


def _dataset(n=4000, seed=7):
    rng = np.random.default_rng(seed)
    points = rng.uniform(-1, 1, (n, 3))
    return types.SimpleNamespace(points=points, colors=np.full((n, 3), 0.5), views=[])


def _init(method, seed=0, n=4000):
    lines = []
    params, _ = tr.init_params(method, _dataset(n), tr.TrainConfig(seed=seed), log=lines.append)
    return params, lines


def test_draws_follow_the_rules(method):
    params, _ = _init(method)
    feat = params["feat"].astype(np.float64)  # raw = activated (no activation)
    assert feat.shape == (4000, 4)
    # mean 0.5, std 0.1: the sample mean within 5 standard errors, the std within 5%
    assert abs(feat.mean() - 0.5) < 5 * 0.1 / math.sqrt(feat.size)
    assert feat.std() == pytest.approx(0.1, rel=0.05)
    tint = params["tint"].astype(np.float64)  # the raw value, not 2 * exp(raw)
    assert tint.min() >= -1.0 and tint.max() <= 2.0
    assert tint.min() < -0.99 and tint.max() > 1.99
    assert abs(tint.mean() - 0.5) < 5 * (3 / math.sqrt(12)) / math.sqrt(tint.size)
    for name, dim in (("normals", 3), ("spin", 4)):
        u = params[name].astype(np.float64)
        np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, rtol=1e-6)
        # uniform on the sphere: each coordinate has mean 0 and second moment 1 / dim
        assert np.all(np.abs(u.mean(axis=0)) < 5 / math.sqrt(dim * len(u)))
        np.testing.assert_allclose((u * u).mean(axis=0), 1 / dim, rtol=0.1)


def test_draws_are_reproducible_and_per_parameter(method, tmp_path):
    a, _ = _init(method, seed=3)
    b, _ = _init(method, seed=3)
    c, _ = _init(method, seed=4)
    for name in ("normals", "feat", "spin", "tint"):
        np.testing.assert_array_equal(a[name], b[name])
        assert not np.any(a[name] == c[name])
    # another parameter added before them changes none of their draws
    path = tmp_path / "more.xpr"
    path.write_text(sub("param feat", "param extra : vec2 init normal(0, 1)\nparam feat")
                    .replace("spin.w))", "spin.w * extra.x))"))  # fmt: skip
    d, _ = _init(xprc.load(path), seed=3)
    for name in ("normals", "feat", "spin", "tint"):
        np.testing.assert_array_equal(a[name], d[name])


def test_random_inits_are_said(method):
    _, lines = _init(method, seed=5)
    assert (
        "init: random raw values (seed 5): 'normals' unit(), 'feat' normal(0.5, 0.1), 'spin' unit(), 'tint' uniform(-1, 2)"
        in lines
    )
    assert not any("no `init` declared" in line for line in lines)


def test_defaults_are_said(tmp_path):
    """The parameters without `init`, and those without `lr`, are named on one line each."""
    path = tmp_path / "bare.xpr"
    path.write_text(sub("init uniform(-1, k)", "").replace(" lr 1e-3 init normal(0.5, 0.1)", ""))
    method = xprc.load(path)
    lines = []
    params, _ = tr.init_params(method, _dataset(50), tr.TrainConfig(), log=lines.append)
    tr.optim.lr_arrays(method, tr.TrainConfig(lr_default=2e-3), lines.append)
    assert (
        "init: no `init` declared in Blob for 'feat', 'tint': they start from raw 0 (the trainer's default)"
        in lines
    )
    assert (
        "lr: no `lr` declared in Blob for 'feat', 'spin', 'tint': they train at lr_default 0.002"
        in lines
    )
    assert np.all(params["feat"] == 0.0) and np.all(params["tint"] == 0.0)
