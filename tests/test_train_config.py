"""TrainConfig checks every field (type and range, one line naming it), and its per-parameter
options are never ignored in silence: `lr` overrides the spec's `lr` (logged), names only the
method's parameters, and an `lr_default` or `init_opacity` that cannot take effect is logged."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_train import METHOD, TaggedSpec, _TaggedMethod, _tiny_scene

import xprc
from xprc import train as tr
from xprc.pipeline import RenderConfig
from xprc.train import optim
from xprc.train.loop import Run

NAN, INF = float("nan"), float("inf")
BG = "background must be None or three numbers in [0, 1] (RGB), got"

BAD = [
    ({"capacity": 2.5}, "capacity must be an integer >= 1 or None, got 2.5"),
    ({"capacity": 0}, "capacity must be an integer >= 1 or None, got 0"),
    ({"render": "fast"}, "render must be a RenderConfig, got 'fast'"),
    ({"steps": 1.5}, "steps must be an integer >= 0, got 1.5"),
    ({"steps": True}, "steps must be an integer >= 0, got True"),
    ({"steps": -1}, "steps must be an integer >= 0, got -1"),
    ({"steps": 2**31}, "steps must be an integer <= 2,147,483,647 (int32), got 2147483648"),
    ({"seed": 1.5}, "seed must be an integer, got 1.5"),
    ({"strategy": "fast"}, "unknown strategy 'fast' (expected mcmc or adc)"),
    ({"ssim_weight": -1}, "ssim_weight must be a number in [0, 1], got -1"),
    ({"ssim_weight": 1.5}, "ssim_weight must be a number in [0, 1], got 1.5"),
    ({"min_opacity": 1.5}, "min_opacity must be a number in [0, 1), got 1.5"),
    ({"num_random_points": -1}, "num_random_points must be an integer >= 1, got -1"),
    ({"adc_capacity_factor": 0.5}, "adc_capacity_factor must be a finite number >= 1, got 0.5"),
    ({"lr_default": -1}, "lr_default must be a finite number >= 0, got -1"),
    ({"lr_default": NAN}, "lr_default must be a finite number >= 0, got nan"),
    ({"lr": {"means": -1}}, "lr['means'] must be a finite number >= 0, got -1"),
    ({"lr": {"means": INF}}, "lr['means'] must be a finite number >= 0, got inf"),
    ({"lr": {"means": "fast"}}, "lr['means'] must be a finite number >= 0, got 'fast'"),
    ({"lr": {3: 1e-3}}, "lr: parameter names must be strings, got 3"),
    ({"lr": 1e-3}, "lr must be a mapping of parameter names to learning rates, got 0.001"),
    ({"init_opacity": 0}, "init_opacity must be a number in (0, 1), got 0"),
    ({"init_opacity": 1.0}, "init_opacity must be a number in (0, 1), got 1.0"),
    ({"init_opacity": NAN}, "init_opacity must be a number in (0, 1), got nan"),
    ({"sh_degree_interval": 0}, "sh_degree_interval must be an integer >= 1, got 0"),
    ({"log_every": 0}, "log_every must be an integer >= 1, got 0"),
    ({"refine_until": 2.5}, "refine_until must be an integer >= 0 or None, got 2.5"),
    ({"split_offset": -1}, "split_offset must be a finite number >= 0 or None, got -1"),
    ({"split_factor": 0}, "split_factor must be a positive number, got 0"),
    ({"noise_lr": INF}, "noise_lr must be a finite number >= 0, got inf"),
    ({"pose_lr": -1e-3}, "pose_lr must be a finite number >= 0, got -0.001"),
    ({"pose_opt": "yes"}, "pose_opt must be a bool, got 'yes'"),
    ({"progress": 2}, "progress must be a bool, got 2"),
    ({"regularisers": True}, "unknown regularisers True (expected auto, on or off)"),
    ({"distortion_weight": -1}, "distortion_weight must be a finite number >= 0, got -1"),
    ({"normal_from": -5}, "normal_from must be an integer >= 0 or None, got -5"),
    ({"background": "white"}, f"{BG} 'white'"),
    ({"background": (NAN, 0, 0)}, f"{BG} (nan, 0, 0)"),
    ({"background": (1, 1)}, f"{BG} (1, 1)"),
    ({"background": (0, 0, 255)}, f"{BG} (0, 0, 255)"),
    ({"background": 1.0}, f"{BG} 1.0"),
]


@pytest.mark.parametrize(("options", "message"), BAD, ids=[str(o) for o, _ in BAD])
def test_a_bad_option_is_one_line_naming_it(options, message):
    with pytest.raises(tr.TrainError) as info:
        tr.TrainConfig(**options)
    assert info.value.message == message


def test_good_values_are_kept_as_plain_numbers():
    """NumPy scalars and arrays become Python numbers and tuples (config.json is JSON)."""
    config = tr.TrainConfig(
        steps=np.int64(5), background=np.array([1, 0.5, 0]), lr={"sh": np.float32(0.5)},
        progress=np.True_, init_opacity=0.5, render=RenderConfig(),
    )  # fmt: skip
    assert config.steps == 5 and type(config.steps) is int
    assert config.background == (1.0, 0.5, 0.0) and config.lr == {"sh": 0.5}
    assert config.progress is True
    assert tr.TrainConfig(lr={"means": 0}).lr == {"means": 0.0}  # 0 freezes a parameter
    assert tr.TrainConfig().background is None


def test_train_refuses_a_config_that_is_not_a_trainconfig():
    with pytest.raises(tr.TrainError) as info:
        tr.train(METHOD, [], None, None, {"steps": 2})
    assert info.value.message == (
        "config must be a TrainConfig, got dict {'steps': 2}; pass TrainConfig(**options)"
    )


def _lrs(method, config):
    lines: list[str] = []
    lrs = {k: np.asarray(v) for k, v in optim.lr_arrays(method, config, lines.append).items()}
    return lrs, lines


def test_an_lr_override_replaces_the_spec_lr_and_is_logged():
    """The run's `lr` is more specific than the spec's declared default: it wins, once logged."""
    gs = xprc.load("3dgs")
    spec = {p.name: p.lr for p in gs.PARAMS}
    assert spec["means"] is not None and spec["sh"] is not None
    base, lines = _lrs(gs, tr.TrainConfig())
    assert base["means"].item() == np.float32(spec["means"]) and lines == []
    lrs, lines = _lrs(gs, tr.TrainConfig(lr={"means": 1e-5, "sh": 1e-2}))
    assert lrs["means"].item() == np.float32(1e-5) != np.float32(spec["means"])
    np.testing.assert_allclose(lrs["sh"][0, :2, 0], [1e-2, 5e-4], rtol=1e-6)
    assert lrs["scales"].item() == base["scales"].item()  # the others keep the spec's
    assert lines == [
        f"lr of 'means': 1e-05 (TrainConfig.lr), over the spec's {spec['means']:g}",
        f"lr of 'sh': 0.01 (TrainConfig.lr), over the spec's {spec['sh']:g}",
    ]


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("meens", "'meens' is no parameter of method Gaussian3D (did you mean 'means'?)"),
        ("colour", "'colour' is no parameter of method Gaussian3D"),
    ],
)
def test_an_lr_naming_no_parameter_lists_them(name, said):
    with pytest.raises(tr.TrainError) as info:
        optim.lr_arrays(xprc.load("3dgs"), tr.TrainConfig(lr={name: 1.0}))
    names = "means, quats, scales, opacities, sh"
    assert info.value.message == f"lr: {said}; its parameters are {names}"


def test_an_lr_default_nothing_uses_is_logged():
    gs = xprc.load("3dgs")
    _, lines = _lrs(gs, tr.TrainConfig(lr_default=2e-3))
    assert lines == [
        "lr_default 0.002 has no effect: every parameter of Gaussian3D has a learning rate (the "
        "spec's `lr` or TrainConfig.lr)"
    ]
    lrs, lines = _lrs(_TaggedMethod(), tr.TrainConfig(lr_default=2e-3))  # colour, bias use it
    assert lines == [  # (issue 41: the parameters at lr_default are named)
        "lr: no `lr` declared in Tagged for 'colour', 'weight', 'bias': they train at lr_default "
        "0.002"
    ]
    assert lrs["bias"].item() == np.float32(2e-3)


def test_an_init_opacity_the_spec_overrides_is_logged():
    train_set, _ = _tiny_scene()
    lines: list[str] = []
    config = tr.TrainConfig(init_opacity=0.5)
    params, _ = tr.init_params(METHOD, train_set, config, log=lines.append)  # no opacity init
    assert params["opacities"][0] == pytest.approx(0.0, abs=1e-6)  # logit(0.5)
    said = lambda: [line for line in lines if "init_opacity" in line]  # noqa: E731
    assert said() == []

    class Declared(_TaggedMethod):
        PARAMS = (
            TaggedSpec("centre", "vec3", (3,), "identity", role="position"),
            TaggedSpec("weight", "scalar", (), "sigmoid", init="0.25", role="opacity"),
        )

    params, _ = tr.init_params(Declared(), train_set, config, log=lines.append)
    assert params["weight"][0] == pytest.approx(math.log(0.25 / 0.75), abs=1e-6)
    assert said() == [
        "init: init_opacity 0.5 has no effect on Tagged: the spec's init of 'weight' (0.25) sets "
        "its initial opacity"
    ]
    lines.clear()
    tr.init_params(Declared(), train_set, tr.TrainConfig(), log=lines.append)
    assert said() == []  # the default value, not set by the run: nothing to say


def test_the_run_log_says_the_override_and_refuses_a_bad_name_before_loading_views():
    train_set, test_set = _tiny_scene()
    lines: list[tuple[str, bool]] = []
    log = lambda msg, always=False: lines.append((msg, always))  # noqa: E731
    config = tr.TrainConfig(steps=1, lr={"means": 1e-5}, progress=False)
    run = Run(METHOD, train_set, test_set, None, config, 1, log=log)
    assert ("lr of 'means': 1e-05 (TrainConfig.lr), over the spec's 0.00016", True) in lines
    assert np.asarray(run.hyper["lrs"]["means"]).item() == np.float32(1e-5)
    bad = tr.TrainConfig(steps=1, lr={"mean": 1e-5}, progress=False)
    with pytest.raises(tr.TrainError, match=r"lr: 'mean' is no parameter .*did you mean 'means'"):
        Run(METHOD, None, None, None, bad, 1, log=log)  # (no views needed to say it)


def test_every_field_has_a_check():
    """A new TrainConfig field needs a row in config._FIELDS (or its own check)."""
    import dataclasses

    from xprc.train.config import _FIELDS

    fields = {f.name for f in dataclasses.fields(tr.TrainConfig)}
    assert fields == set(_FIELDS) | {"lr", "background", "render"}


def test_a_schedule_that_does_not_fit_the_steps_is_said():
    from xprc.train.config import TrainConfig, preset, schedule_note

    short = schedule_note(preset("3dgs-30k", steps=7000))  # the 15k window kept for 7k steps
    assert short.startswith("schedule: densification never stops (refine_until 15,000 >= "
                            "steps 7,000)")  # fmt: skip
    assert schedule_note(preset("3dgs-30k")) is None  # last reset at 12,000 of 30,000
    # resets after steps 3000, 6000 and 9000 (each < refine_until 9,400): 9,000 > 0.9 x 9,500
    late = schedule_note(TrainConfig(steps=9500, strategy="adc", refine_until=9400,
                                     reset_every=3000))  # fmt: skip
    assert late is not None and "an opacity reset at step 9,000, in the last 10%" in late
    assert "densification never stops" not in late
    assert schedule_note(TrainConfig(steps=7000)) is None  # mcmc, its own window: 5/6 of steps
