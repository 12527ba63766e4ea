"""Densification strategies (xprc.train.strategy / adc), roles from the spec, the capacity bucket.

Training runs reuse the tiny scene and the annotated hand-written 3DGS module of test_train.py,
and share one render capacity so the ADC step compiles as few times as possible.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, load_handwritten
from test_train import METHOD, TaggedSpec, _annotated, _config, _interrupt_at

import xprc
from xprc import train as tr
from xprc.pipeline import RenderConfig
from xprc.train import optim
from xprc.train.step import TRACE_COUNT
from xprc.train.strategies.adc import ADC, screen_gradient

# ----------------------------------------------------------------------------- ADC, constructed


def adc_hyper() -> dict:
    """ADC's hyper-parameters for the constructed cases (step 500, inside the refine window)."""
    return {
        "min_opacity": jnp.float32(0.005),
        "grad_threshold": jnp.float32(2e-4),
        "percent_dense": jnp.float32(0.01),
        "split_factor": jnp.float32(1.6),
        "split_offset": jnp.float32(1.0),
        "reset_every": jnp.int32(3000),
        "prune_scale": jnp.float32(0.1),
        "step": jnp.int32(500),
    }


def _adc_case():
    """8 slots, 6 used: 0 (large) and 1, 2 (small) over the gradient threshold, 4 nearly
    transparent; slots 6 and 7 free."""
    n = 8
    logit = lambda o: math.log(o / (1 - o))  # noqa: E731
    opac = [0.5, 0.5, 0.5, 0.5, 0.001, 0.5, 1e-8, 1e-8]
    sizes = [0.1, 0.005, 0.005, 0.005, 0.005, 0.005, 0.005, 0.005]
    params = {
        "means": jnp.asarray(np.arange(n * 3, dtype=np.float32).reshape(n, 3)),
        "quats": jnp.asarray(np.tile([1.0, 0, 0, 0], (n, 1)).astype(np.float32)),
        "scales": jnp.asarray(np.log(np.repeat(np.array(sizes)[:, None], 3, 1)), jnp.float32),
        "opacities": jnp.asarray([logit(o) for o in opac], jnp.float32),
        "sh": jnp.asarray(np.arange(n * 48, dtype=np.float32).reshape(n, 16, 3)),
    }
    used = jnp.asarray([True] * 6 + [False] * 2)
    # mean gradients 0.02, 0.01, 0.005 (over 2 views), 1e-4 (below 2e-4), rest 0
    sstate = {
        "grad_sum": jnp.asarray([0.04, 0.02, 0.01, 2e-4, 0, 0, 0, 0], jnp.float32),
        "grad_count": jnp.asarray([2, 2, 2, 2, 2, 2, 0, 0], jnp.int32),
    }
    return params, used, sstate, adc_hyper()


def test_adc_clone_split_prune_on_a_constructed_case():
    params, used, sstate, hyper = _adc_case()
    adc = ADC(METHOD)
    opt = optim.optimizer(optim.lr_arrays(METHOD, tr.TrainConfig()), {"means": 1.0})
    opt_state = jax.tree_util.tree_map(lambda x: x + 1, opt.init(params))
    densify = jax.jit(adc.densify)
    key = jax.random.PRNGKey(0)
    new, new_opt, new_used, counts = densify(
        params, opt_state, used, sstate, key, hyper, jnp.float32(1.0)
    )
    # Three candidates (0, 1, 2), two free slots: the two highest gradients win, one skipped.
    assert {k: int(v) for k, v in counts.items()} == {
        "cloned": 1, "split": 1, "pruned": 1, "skipped": 1,
    }  # fmt: skip
    assert np.asarray(new_used).tolist() == [True] * 4 + [False] + [True] * 3
    p = {k: np.asarray(v) for k, v in params.items()}
    q = {k: np.asarray(v) for k, v in new.items()}
    # slot 7 is an exact clone of slot 1 (the small one)
    for name in p:
        np.testing.assert_array_equal(q[name][7], p[name][1], err_msg=name)
        np.testing.assert_array_equal(q[name][1], p[name][1], err_msg=name)
    # slots 0 and 6 are the split of slot 0: sizes / 1.6, moved by ~ N(0, 0.1^2), same colour
    for i in (0, 6):
        np.testing.assert_allclose(q["scales"][i], np.log(0.1 / 1.6), rtol=1e-6)
        np.testing.assert_array_equal(q["sh"][i], p["sh"][0])
        assert 0 < np.linalg.norm(q["means"][i] - p["means"][0]) < 0.6
    assert not np.array_equal(q["means"][0], q["means"][6])
    # slot 2 (third gradient) found no free slot: unchanged
    for name in p:
        np.testing.assert_array_equal(q[name][2], p[name][2], err_msg=name)
    # slot 4 pruned: invisible
    assert jax.nn.sigmoid(q["opacities"][4]) < 1e-6
    mu = np.asarray(new_opt[0].mu["means"])
    assert [bool(np.all(mu[i] == 0)) for i in range(8)] == [True] + [False] * 5 + [True, True]


@pytest.mark.parametrize("k", [1.0, 1 / math.sqrt(10)])
def test_adc_split_offsets_follow_the_split_offset(k):
    """Each split moves the source and its copy by N(0, (k size)^2) per axis: 600 large
    primitives of size 0.2 over the threshold, 600 free slots; the 3600 offsets' standard
    deviation is k x 0.2 (within 5%: the sample std of 3600 normals has ~1.2% error)."""
    n, m, size = 1200, 600, 0.2
    params = {
        "means": jnp.zeros((n, 3), jnp.float32),
        "quats": jnp.asarray(np.tile([1.0, 0, 0, 0], (n, 1)).astype(np.float32)),
        "scales": jnp.full((n, 3), math.log(size), jnp.float32),
        "opacities": jnp.full((n,), 0.0, jnp.float32),
        "sh": jnp.zeros((n, 16, 3), jnp.float32),
    }
    used = jnp.arange(n) < m
    sstate = {"grad_sum": jnp.where(used, 1.0, 0.0), "grad_count": jnp.ones((n,), jnp.int32)}
    _, _, _, hyper = _adc_case()
    hyper = {**hyper, "split_offset": jnp.float32(k)}
    adc = ADC(METHOD)
    opt_state = optim.optimizer(optim.lr_arrays(METHOD, tr.TrainConfig()), {"means": 1.0}).init(
        params
    )
    new, _, new_used, counts = jax.jit(adc.densify)(
        params, opt_state, used, sstate, jax.random.PRNGKey(1), hyper, jnp.float32(1.0)
    )
    assert int(counts["split"]) == m and bool(jnp.all(new_used))
    offsets = np.asarray(new["means"]).ravel()
    assert abs(offsets.std() / (k * size) - 1) < 0.05 and abs(offsets.mean()) < 0.1 * k * size


def test_adc_never_exceeds_capacity():
    """No free slot: candidates are neither cloned nor split, the capacity stays as it is."""
    params, _, sstate, hyper = _adc_case()
    used = jnp.ones(8, bool)
    opt = optim.optimizer(optim.lr_arrays(METHOD, tr.TrainConfig()), {"means": 1.0})
    adc = ADC(METHOD)
    new, _, new_used, counts = jax.jit(adc.densify)(
        params, opt.init(params), used, sstate, jax.random.PRNGKey(0), hyper, jnp.float32(1.0)
    )
    assert (int(counts["cloned"]), int(counts["split"])) == (0, 0)
    assert new["means"].shape == params["means"].shape
    assert int(np.sum(np.asarray(new_used))) == 8 - int(counts["pruned"])


def test_screen_gradient_is_the_gradient_of_a_pixel_offset():
    """dL/d(centre offset) from the position gradient equals autodiff through an offset of the
    position parallel to the image plane, in NDC units."""
    from xprc.camera import look_at

    cam = look_at([0.3, -2.0, 0.5], [0, 0, 0], [0, 0, 1], 40, 30, 35.0, dtype=np.float64)
    rng = np.random.default_rng(0)
    pos = jnp.asarray(rng.normal(size=(5, 3)) * 0.3)
    target = jnp.asarray(rng.normal(size=(5, 3)))

    def loss_of_pos(p):
        return jnp.sum(jnp.sin(p) * target)

    g = jax.grad(loss_of_pos)(pos)
    R, t = np.asarray(cam.R), np.asarray(cam.t)
    z = np.asarray(pos) @ R[2] + t[2]

    def loss_of_offset(d):  # d [5, 2] pixels
        cam_offset = jnp.stack([d[:, 0] * z / float(cam.fx), d[:, 1] * z / float(cam.fy)], 1)
        world = jnp.concatenate([cam_offset, jnp.zeros((5, 1))], 1) @ R
        return loss_of_pos(pos + world)

    want = jax.grad(loss_of_offset)(jnp.zeros((5, 2))) * jnp.asarray([[20.0, 15.0]])
    np.testing.assert_allclose(np.asarray(screen_gradient(g, pos, cam)), want, rtol=1e-10)


# ----------------------------------------------------------------------------- roles


def test_missing_role_is_a_located_error(tmp_path):
    no_scale = _annotated(
        load_handwritten(), means={"role": "position"}, opacities={"role": "opacity"}
    )
    with pytest.raises(tr.TrainError) as e:
        tr.train(no_scale, [], None, None, tr.TrainConfig(strategy="adc"))
    assert str(e.value) == (
        "error: method HandwrittenGaussian3D: strategy 'adc' needs a parameter with "
        "`role scale`; annotate its `param` line in the spec (e.g. `param o : scalar = "
        "sigmoid(raw) role scale`)"
    )


def _spec_variant(tmp_path, old: str, new: str):
    """specs/3dgs.xpr with `old` replaced by `new`, loaded from tmp_path; (module, path, text)."""
    import xprc

    text = (ROOT / "specs" / "3dgs.xpr").read_text()
    assert old in text
    text = text.replace(old, new)
    path = tmp_path / "variant.xpr"
    path.write_text(text)
    return xprc.load(path), path, text


def _declaration(text: str, pattern: str) -> tuple[int, int, str]:
    """(line, column, line text) of the first match of `pattern` (1-based)."""
    for i, line in enumerate(text.splitlines(), 1):
        m = re.search(pattern, line)
        if m:
            return i, m.start() + 1, line
    raise AssertionError(pattern)


def test_missing_role_in_a_spec_file_points_at_its_primitive(tmp_path):
    method, path, text = _spec_variant(tmp_path, "role scale", "          ")
    with pytest.raises(tr.TrainError) as e:
        tr.train(method, [], None, None, tr.TrainConfig(strategy="adc"))
    line, col, src = _declaration(text, r"(?<=^primitive )Gaussian3D")
    assert str(e.value) == (
        f"{path}:{line}:{col}: error: method Gaussian3D: strategy 'adc' needs a parameter with "
        "`role scale`; annotate its `param` line in the spec (e.g. `param o : scalar = "
        f"sigmoid(raw) role scale`)\n    {src}\n    {' ' * (col - 1)}^"
    )


def test_non_invertible_activation_in_a_spec_file_points_at_its_param(tmp_path):
    method, path, text = _spec_variant(
        tmp_path, "scalar = sigmoid(raw)    lr 5e-2    init 0.1", "scalar = min(raw, 1.0)   lr 5e-2"
    )
    with pytest.raises(tr.TrainError) as e:
        tr.train(method, [], None, None, tr.TrainConfig())
    line, col, src = _declaration(text, r"(?<=^param )opacities")
    assert str(e.value).startswith(
        f"{path}:{line}:{col}: error: parameter 'opacities' of method Gaussian3D: activation "
    )
    assert str(e.value).endswith(f"\n    {src}\n    {' ' * (col - 1)}^")
    # a spec edited after it was compiled is not located (the text no longer matches)
    path.write_text(text + "\n")
    with pytest.raises(tr.TrainError) as e:
        tr.train(method, [], None, None, tr.TrainConfig())
    assert str(e.value).startswith("error: parameter 'opacities' of method Gaussian3D")


def test_non_invertible_activation_is_a_located_error():
    class Odd:
        NAME = "Odd"
        NUM_FEATURES = 3
        PARAMS = (
            TaggedSpec("c", "vec3", (3,), "identity", role="position"),
            TaggedSpec("w", "scalar", (), "2 * raw + k", role="opacity"),
            TaggedSpec("r", "scalar", (), "exp", role="scale"),
        )

    with pytest.raises(tr.TrainError) as e:
        tr.train(Odd(), [], None, None, tr.TrainConfig())
    assert str(e.value) == (
        "error: parameter 'w' of method Odd: activation '2 * raw + k' cannot be inverted, which "
        "strategy 'mcmc' (it sets the opacity) needs (invertible: abs, exp, identity, normalize, "
        "relu, sigmoid, softplus, tanh)"
    )


def test_trainer_names_no_shipped_parameter():
    """The trainer package knows no parameter of any shipped spec by name (`sh` is also the
    language's SH type, which the trainer reads from `ParamSpec.kind`)."""
    names = set()
    for spec in (ROOT / "specs").glob("*.xpr"):
        names |= set(re.findall(r"^param\s+(\w+)", spec.read_text(), re.M))
    assert {"means", "scales", "opacities", "quats", "sh"} <= names
    names.discard("sh")
    for path in (ROOT / "xprc" / "train").glob("*.py"):
        words = set(re.findall(r"[A-Za-z_]\w*", path.read_text()))
        assert not names & words, (path.name, names & words)


# ----------------------------------------------------------------------------- ADC training


@pytest.fixture(scope="module")
def adc_runs(tmp_path_factory):
    """ADC from the counted capacity (it grows when splits add entries), then the same run
    started at the capacity it ended with."""
    from test_train import _tiny_scene

    train_set, test_set = _tiny_scene()
    config = _config(
        strategy="adc", capacity=520, steps=120, refine_from=40, refine_every=40,
        refine_until=100, reset_every=0, eval_every=0, checkpoint_every=0, save_renders=False,
    )  # fmt: skip
    traces = TRACE_COUNT["train_step"]
    grown = tr.train(METHOD, train_set, test_set, tmp_path_factory.mktemp("adc"), config)
    grown_traces = TRACE_COUNT["train_step"] - traces
    big = RenderConfig(max_entries=grown.entry_capacity)
    large = tr.train(METHOD, train_set, test_set, None, dataclasses.replace(config, render=big))
    return train_set, test_set, config, grown, grown_traces, large


def test_adc_grows_and_traces_once_per_capacity(adc_runs):
    _, _, config, grown, traces, _ = adc_runs

    report = json.loads((grown.out_dir / "metrics.json").read_text())
    raises = [r for r in report["capacity_raises"] if r["what"] == "train"]
    assert raises, "the splits should outgrow the counted capacity"
    assert all(r["capacity"] >= r["needed"] for r in raises)
    assert report["entry_capacity"] == raises[-1]["capacity"] == grown.entry_capacity
    # one trace per capacity bucket: densification events never retrace
    assert traces == 1 + len(raises)
    d = report["densification"]
    assert d["split"] + d["cloned"] > 0 and set(d) == {"cloned", "split", "pruned", "skipped"}
    assert grown.metrics["primitives"] > 150
    for name, value in grown.params.items():
        assert value.shape[0] == config.capacity, name


def test_capacity_growth_equals_a_run_started_large(adc_runs):
    """Issue 12: a run whose primitives outgrow the capacity redoes the step with a larger one;
    its result equals the run that had the large capacity from the start."""
    _, _, _, grown, _, large = adc_runs
    assert large.entry_capacity == grown.entry_capacity
    for name, value in grown.params.items():
        np.testing.assert_allclose(value, large.params[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_adc_resume_is_bit_identical_and_keeps_the_capacity(adc_runs, tmp_path):
    """Interrupted after its capacity grew, the run resumes with the stored bucket (no new
    compile) and ends bit-identical to the uninterrupted run."""
    train_set, test_set, config, grown, _, _ = adc_runs
    part = tr.train(METHOD, train_set, test_set, tmp_path, config, callback=_interrupt_at(100))
    assert part.interrupted and part.step == 100
    assert part.entry_capacity == grown.entry_capacity
    traces = TRACE_COUNT["train_step"]
    resumed = tr.train(METHOD, train_set, test_set, tmp_path, config, resume=True)
    assert TRACE_COUNT["train_step"] == traces
    assert resumed.step == 120 and resumed.entry_capacity == grown.entry_capacity
    for name, value in grown.params.items():
        np.testing.assert_array_equal(resumed.params[name], value, err_msg=name)


RENAMES = {"means": "mu", "quats": "q", "scales": "axes", "opacities": "dens", "sh": "coef"}


@pytest.mark.slow  # two compiles of the train step (~1 min on 2 cores)
def test_renamed_parameters_train_to_the_same_result(tmp_path):
    """The 3DGS spec with every parameter renamed (same maths) trains to the same parameters."""
    from test_train import _tiny_scene

    from xprc.compiler.driver import load

    text = (ROOT / "specs" / "3dgs.xpr").read_text()
    renamed = re.sub(r"^param sh(\s)", r"param coef\1", text, flags=re.M)
    renamed = renamed.replace("eval_sh(sh,", "eval_sh(coef,")
    for old, new in RENAMES.items():
        if old != "sh":
            renamed = re.sub(rf"\b{old}\b", new, renamed)
    assert "means" not in renamed and "eval_sh(coef," in renamed
    (tmp_path / "renamed.xpr").write_text(renamed)
    train_set, test_set = _tiny_scene()
    config = _config(
        steps=30, refine_from=10, refine_every=10, refine_until=30, eval_every=0,
        checkpoint_every=0, save_renders=False,
    )  # fmt: skip
    base = tr.train(load(ROOT / "specs" / "3dgs.xpr"), train_set, test_set, None, config)
    other = tr.train(load(tmp_path / "renamed.xpr"), train_set, test_set, None, config)
    assert set(other.params) == set(RENAMES.values())
    for old, new in RENAMES.items():
        np.testing.assert_allclose(
            other.params[new], base.params[old], rtol=1e-4, atol=1e-5, err_msg=old
        )


def test_numeric_init_through_an_unnamed_activation_uses_init_raw():
    """`init 4` on `4 * exp(raw)`: the compiler's init_raw (0), not an inverse the trainer lacks."""

    class Spec(NamedTuple):
        name: str
        kind: str
        shape: tuple
        activation: str
        degree: int | None = None
        lr: float | None = None
        init: object = None
        role: str | None = None
        init_raw: float | None = None

    class Beta:
        NAME = "Beta"
        PARAMS = (
            Spec("c", "vec3", (3,), "identity", role="position"),
            Spec("b", "scalar", (), "4 * exp(raw)", init=4.0, init_raw=0.0),
        )

    from test_train import _tiny_scene

    params, _ = tr.init_params(Beta(), _tiny_scene()[0], tr.TrainConfig())
    assert np.all(params["b"] == 0.0)


def test_adc_split_offset_comes_from_the_spec_unless_configured():
    """The octahedron and tetrahedron declare `const split_spread` (per-axis std of the uniform
    solid over its vertex distance: 1/sqrt(10) = sqrt(E[x^2]) for |x|+|y|+|z| <= d, and
    1/sqrt(15) for the regular tetrahedron, sum v v^T / 20 = d^2/15); a Gaussian spec declares
    none (1); an explicit TrainConfig.split_offset wins."""
    root = ROOT / "specs"
    octa = xprc.load(root / "linprim_octahedron.xpr")
    tetra = xprc.load(root / "linprim_tetrahedron.xpr")
    # Monte-Carlo check of the declared constants against the solids themselves
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (400_000, 3))
    inside = x[np.abs(x).sum(1) <= 1]
    assert abs(inside[:, 0].std() - ADC(octa).split_offset(tr.TrainConfig())) < 3e-3
    dirs = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) / math.sqrt(3)
    w = rng.dirichlet(np.ones(4), 400_000)  # uniform in the simplex
    pts = w @ dirs
    assert abs(pts[:, 0].std() - ADC(tetra).split_offset(tr.TrainConfig())) < 3e-3
    assert ADC(METHOD).split_offset(tr.TrainConfig()) == 1.0
    assert ADC(octa).split_offset(tr.TrainConfig(split_offset=0.5)) == 0.5
