"""The training step's device memory (issue 39: MCMC at capacity 3M ran out of a TPU v5e's
memory at its first step, after compiling, with nothing said before).

- xprc's estimate of a step (`xprc.train.step_memory.estimate_step`) bounds XLA's own
  accounting of the compiled step (`memory_analysis()`: arguments, temporaries, outputs) from
  above, within a factor of 2, at a small size (benchmarks/step_memory.py builds the step as
  the trainer does and compiles it for abstract inputs).
- A run whose step would not fit the device (here XPRC_MEMORY_BUDGET) is refused before the
  step is compiled, with the estimate's parts and the capacity that fits; the two checks that
  were there before (the state alone, the render's entries alone) let it through.
- An entry capacity raised during a run is checked the same way (`Capacity.grow`).
- A generated `project` reads a parameter's components through `SplitParam`: values and
  gradients equal plain indexing, and the gradient is one concatenation, not one zero-padded
  copy of the parameter per component (a CPU kept ~35 of 3DGS's 48 alive at once).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, import_file

from xprc.camera import look_at
from xprc.compiler.driver import load
from xprc.pipeline import RenderConfig, entry_bucket, render
from xprc.pipeline.binning import TileGrid
from xprc.pipeline.capacity import BUDGET_ENV, estimate_bytes
from xprc.pipeline.params import SplitParam, split_params
from xprc.train import TRACE_COUNT, TrainConfig, TrainError, train
from xprc.train.init import state_bytes
from xprc.train.step_memory import check_step_memory, estimate_step


@pytest.fixture(scope="module")
def method():
    return load(ROOT / "specs" / "3dgs.xpr")


def test_estimate_bounds_xla_memory_analysis_of_the_compiled_step(method):
    bench = import_file(ROOT / "benchmarks" / "step_memory.py")
    row = bench.analyse(method, prims=40_000, entries=262_144, size=(160, 120), views=8)
    xla, est = row["xla"]["total"], row["estimate"]["total"]
    assert row["backend"] == "cpu" and xla > 0
    assert xla <= est <= 2 * xla, (xla, est)


def _scene(size: int = 64, views: int = 4, points: int = 300):
    bench = import_file(ROOT / "benchmarks" / "step_memory.py")
    return bench.grey_dataset((size, size), views, points, fov=50.0, spread=0.5)


def test_a_step_over_the_device_memory_is_refused_before_it_is_compiled(method, monkeypatch):
    data = _scene()
    capacity = 300
    config = TrainConfig(steps=2, capacity=capacity, progress=False, eval_every=0,
                         checkpoint_every=0)  # fmt: skip
    # a budget the state alone and the render's entries alone fit (the checks there were)
    entries_alone = estimate_bytes(8192, method.NUM_ATTRS, 4, TileGrid(64, 64, 16))
    budget = max(state_bytes(method, capacity), entries_alone) + 1
    images = 2 * 4 * 64 * 64 * 3  # training and test sets (the same 4 uint8 views)
    need = estimate_step(method, capacity, 1024, (64, 64), images)["total"]
    assert need > budget  # the image-sized values push the step over
    monkeypatch.setenv(BUDGET_ENV, str(budget))
    traces = TRACE_COUNT["train_step"]
    with pytest.raises(TrainError) as e:
        train(method, data, data, None, config)
    said = str(e.value)
    assert TRACE_COUNT["train_step"] == traces  # refused before the step was traced
    assert f"error: the training step at capacity {capacity:,} primitives with " in said
    assert "entries on 64x64 views needs about " in said
    assert f"over the memory budget ({BUDGET_ENV})" in said
    for part in ("optimiser state", "the render's or the update's temporaries", "the views"):
        assert part in said


def test_the_refusal_names_the_parts_and_the_capacity_that_fits(method):
    est = estimate_step(method, 3_000_000, 16_777_216, (1296, 840), 456_000_000, "tpu")
    have = 15_750_000_000
    with pytest.raises(TrainError) as e:
        check_step_memory(method, 3_000_000, 16_777_216, (1296, 840), 456_000_000,
                          budget=(have, "the 14.7 GiB of TPU v5"), platform="tpu")  # fmt: skip
    per = (est["total"] - est["images"]) / 3_000_000
    fits = int((have - est["images"]) // per)
    assert 1_000_000 < fits < 3_000_000
    assert str(e.value).endswith(
        f"over the 14.7 GiB of TPU v5; give a capacity of at most about {fits:,} (--capacity), "
        f"train on smaller images (--images images_8, --downscale) or set {BUDGET_ENV} to try "
        "anyway"
    )
    assert check_step_memory(method, 1000, 8192, (64, 64), 0, budget=(have, "x")) is not None


def test_split_components_equal_plain_indexing_values_and_gradients(method):
    rng = np.random.default_rng(3)
    n = 50
    params = {
        "means": jnp.asarray(rng.uniform(-0.5, 0.5, (n, 3)), jnp.float32),
        "quats": jnp.asarray(rng.normal(size=(n, 4)), jnp.float32),
        "scales": jnp.asarray(np.log(rng.uniform(0.05, 0.2, (n, 3))), jnp.float32),
        "opacities": jnp.asarray(rng.normal(size=n), jnp.float32),
        "sh": jnp.asarray(0.3 * rng.normal(size=(n, 16, 3)), jnp.float32),
    }
    cam = look_at(np.array([2.5, 0.3, 0.5]), [0, 0, 0], [0, 0, 1], 32, 32, 50.0,
                  dtype=np.float32)  # fmt: skip
    g_out = jnp.asarray(rng.normal(size=(n, method.NUM_ATTRS)), jnp.float32)

    def attrs(p, split):
        return method.project(split_params(method, p) if split else p, cam)["attrs"]

    kinds = {k: type(v) for k, v in split_params(method, params).items()}
    assert kinds == {**dict.fromkeys(params, SplitParam), "opacities": type(params["means"])}
    assert split_params(object(), params) is params  # a hand-written module's, as they are
    plain = jax.vjp(lambda p: attrs(p, False), params)
    split = jax.vjp(lambda p: attrs(p, True), params)
    np.testing.assert_array_equal(split[0], plain[0])
    for k, g in plain[1](g_out)[0].items():
        np.testing.assert_array_equal(split[1](g_out)[0][k], g, k)


def test_the_render_gradient_pads_no_copy_of_a_parameter_per_component(method):
    n = 40
    f32 = jnp.float32
    params = {"means": jnp.zeros((n, 3), f32), "quats": jnp.ones((n, 4), f32),
              "scales": jnp.zeros((n, 3), f32), "opacities": jnp.zeros(n, f32),
              "sh": jnp.zeros((n, 16, 3), f32)}  # fmt: skip
    cam = look_at(np.array([2.5, 0.0, 0.0]), [0, 0, 0], [0, 0, 1], 32, 32, 50.0,
                  dtype=np.float32)  # fmt: skip
    config = RenderConfig(max_entries=1024, on_overflow="ignore", compositor="xla")

    def loss(p):
        return jnp.sum(render(method, p, cam, config=config).image)

    jaxpr = jax.make_jaxpr(jax.grad(loss))(params)
    pads = []

    def walk(jp):
        for eqn in jp.eqns:
            if eqn.primitive.name == "pad" and eqn.outvars[0].aval.shape == (n, 16, 3):
                pads.append(eqn)
            for v in eqn.params.values():
                inner = getattr(v, "jaxpr", None)
                if inner is not None:
                    walk(getattr(inner, "jaxpr", inner))

    walk(jaxpr.jaxpr)
    assert pads == []


def test_a_capacity_raise_that_would_not_fit_the_step_is_a_train_error(method):
    """The entry capacity grows during a run (`Capacity.grow`): the step is checked again."""
    from xprc.train.run import Capacity

    budget = (10_000_000, "the budget")
    check = lambda n: check_step_memory(method, 300, n, (64, 64), 0, budget=budget)  # noqa: E731
    cap = Capacity(RenderConfig(), 1024, log=lambda *a, **k: None, step_check=check)
    cap.grow(2000, 5, "train")  # 2,560 entries fit
    assert cap.bucket == entry_bucket(2500)
    with pytest.raises(TrainError) as e:
        cap.grow(100_000, 6, "train")
    new = entry_bucket(125_000)
    need = estimate_step(method, 300, new, (64, 64), 0)["total"]
    assert str(e.value).startswith(
        f"error: train step 6 needs 100,000 (primitive, tile) entries, over the capacity bucket "
        f"{entry_bucket(2500):,}; with {new:,}, the training step at capacity 300 primitives "
        f"with {new:,} (primitive, tile) entries on 64x64 views needs about "
    )
    assert need > budget[0] and cap.bucket == entry_bucket(2500)
