"""`TrainConfig.random_background` / `--random-background`: the re-composited target, a short
run on the demo scene (one trace, a fresh colour every step) and the error without alpha."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

import xprc
from xprc import train as tr
from xprc.cli import main
from xprc.data.demo_scene import generate_demo_scene
from xprc.data.scene_folder import load_scene
from xprc.metrics import psnr
from xprc.pipeline import RenderConfig
from xprc.train.data import infer_background, stack_views
from xprc.train.loop import Run
from xprc.train.step import TRACE_COUNT, composite_target, random_backgrounds

SIZE = (32, 32)
STEPS = 6


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("scene")
    generate_demo_scene(root, n_train=4, n_test=1, size=SIZE, seed=1, n_points=200)
    return root


@pytest.fixture(scope="module")
def scene(scene_dir):
    return load_scene(scene_dir)


def _config(**kw):
    # 4 tiles x 200 primitives: the fixed entry capacity never overflows (one compile)
    base = dict(
        steps=STEPS, eval_every=0, checkpoint_every=0, progress=False, save_renders=False,
        random_background=True, render=RenderConfig(max_entries=1024),
    )  # fmt: skip
    base.update(kw)
    return tr.TrainConfig(**base)


# ----------------------------------------------------------------------------- the target


def test_composite_target_matches_numpy():
    """gt composited on `background` with coverage alpha -> rgb * alpha + (1 - alpha) new, for
    one view ([C] colour) and a device batch ([D, C] colours, one per view)."""
    rng = np.random.default_rng(0)
    rgb = rng.uniform(0, 1, (2, 5, 7, 3)).astype(np.float32)
    alpha = rng.uniform(0, 1, (2, 5, 7, 1)).astype(np.float32)
    alpha[:, 0] = 0.0
    alpha[:, 1] = 1.0
    old = np.array([1.0, 1.0, 1.0], np.float32)
    gt = rgb * alpha + (1 - alpha) * old  # as xprc.datasets composites an RGBA image
    new = rng.uniform(0, 1, (2, 3)).astype(np.float32)
    want = rgb * alpha + (1 - alpha) * new[:, None, None, :]
    got = composite_target(jnp.asarray(gt), jnp.asarray(alpha), jnp.asarray(old), jnp.asarray(new))
    assert got.dtype == jnp.float32 and got.shape == gt.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1e-6)
    one = composite_target(jnp.asarray(gt[1]), jnp.asarray(alpha[1]), old, jnp.asarray(new[1]))
    np.testing.assert_allclose(np.asarray(one), want[1], rtol=0, atol=1e-6)
    # where alpha is 0 the target is exactly the new colour, where it is 1 exactly the image
    np.testing.assert_array_equal(np.asarray(got)[:, 1], gt[:, 1])
    np.testing.assert_allclose(np.asarray(got)[:, 0], np.broadcast_to(want[:, 0], (2, 7, 3)))


def test_demo_scene_target_from_the_png(scene_dir, scene):
    """On a dataset view: the re-composited image equals the PNG's premultiplied colour plus
    (1 - alpha) x the new colour."""
    train_set, _ = scene
    view = train_set.views[0]
    rgba = np.asarray(Image.open(scene_dir / f"{view.name}.png"), np.float32) / 255.0
    new = np.array([0.2, 0.7, 0.4], np.float32)
    want = rgba[..., :3] * rgba[..., 3:] + (1 - rgba[..., 3:]) * new
    data = stack_views(train_set.views[:1], "training", alphas=True)
    background = infer_background(train_set.views)
    got = composite_target(data["images"][0], data["alphas"][0], background, jnp.asarray(new))
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=2e-6)


# ----------------------------------------------------------------------------- a short run


@pytest.fixture(scope="module")
def run(scene, tmp_path_factory):
    train_set, test_set = scene
    out = tmp_path_factory.mktemp("run")
    seen = []
    traces = TRACE_COUNT["train_step"]
    result = tr.train(
        xprc.load("3dgs"), train_set, test_set, out, _config(),
        callback=lambda step, info: seen.append(np.asarray(info["background"])),
    )  # fmt: skip
    return result, out, seen, TRACE_COUNT["train_step"] - traces


def test_run_traces_once_and_draws_a_colour_per_step(run):
    result, _, seen, traces = run
    assert result.step == STEPS and np.isfinite(result.metrics["psnr"])
    assert traces == 1
    assert len(seen) == STEPS
    bgs = np.stack(seen)
    assert bgs.shape == (STEPS, 3) and np.all((bgs >= 0) & (bgs < 1))
    assert len({tuple(b) for b in bgs.tolist()}) == STEPS  # a new colour every step
    key = jax.random.PRNGKey(0)  # the run's seed
    want = [random_backgrounds(key, jnp.int32(i), (3,), jnp.float32) for i in range(STEPS)]
    np.testing.assert_array_equal(bgs, np.stack(want))


def test_run_folder_records_the_option(run):
    _, out, _, _ = run
    config = json.loads((out / "config.json").read_text())
    assert config["config"]["random_background"] is True
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["background"] == [1.0, 1.0, 1.0]  # evaluation keeps the dataset's colour


def test_interrupt_and_resume_equal_the_uninterrupted_run(scene, run, tmp_path):
    """The colours come from the checkpointed key: stopping at step 3 and resuming gives the
    uninterrupted run's parameters bit for bit (and no new trace)."""
    train_set, test_set = scene
    full = run[0]

    def stop_at_3(step, info):
        if step == 3:
            raise KeyboardInterrupt

    traces = TRACE_COUNT["train_step"]
    method = xprc.load("3dgs")
    part = tr.train(method, train_set, test_set, tmp_path, _config(), callback=stop_at_3)
    assert part.interrupted and part.step == 3
    resumed = tr.train(method, train_set, test_set, tmp_path, _config(), resume=True)
    assert resumed.step == STEPS and TRACE_COUNT["train_step"] == traces
    for name, value in full.params.items():
        np.testing.assert_array_equal(resumed.params[name], value, err_msg=name)


def test_step_renders_and_compares_on_the_random_colour(scene, run):
    """With every primitive transparent the step's render is its background: the step's PSNR
    is that of the flat random colour against the re-composited view."""
    train_set, test_set = scene
    method = xprc.load("3dgs")
    r = Run(method, train_set, test_set, None, _config(), 1)
    opacity = r.strategy.roles["opacity"]
    params = dict(r.state["params"])
    params[opacity] = jnp.full_like(params[opacity], -40.0)
    r.state = {**r.state, "params": params}
    traces = TRACE_COUNT["train_step"]
    view = int(r.order.views(0, 1))
    info = r.advance()
    assert TRACE_COUNT["train_step"] == traces  # the run's compiled step
    bg = np.asarray(info["background"])
    v = train_set.views[view]
    a = v.alpha[..., None]
    target = v.image + (1 - a) * (bg - np.ones(3, np.float32))
    flat = np.broadcast_to(bg, target.shape).astype(np.float32)
    assert float(info["psnr"]) == pytest.approx(float(psnr(flat, target)), abs=1e-3)


# ----------------------------------------------------------------------------- no alpha


def test_views_without_alpha_are_a_train_error(scene):
    train_set, test_set = scene
    views = tuple(dataclasses.replace(v, alpha=None) for v in train_set.views[:3])
    rgb = dataclasses.replace(train_set, views=views + train_set.views[3:])
    with pytest.raises(tr.TrainError, match="needs RGBA training images; 3 of 4 views have no"):
        tr.train(xprc.load("3dgs"), rgb, test_set, None, _config())


def test_cli_without_alpha_is_a_message(scene_dir, tmp_path, capsys):
    """An RGB dataset with --random-background: exit status 1 and one line, no traceback."""
    data = tmp_path / "rgb"
    for path in scene_dir.rglob("*"):
        dest = data / path.relative_to(scene_dir)
        if path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
        elif path.suffix == ".png":
            dest.parent.mkdir(parents=True, exist_ok=True)
            Image.open(path).convert("RGB").save(dest)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(path.read_bytes())
    argv = ["train", "--data", str(data), "--out", str(tmp_path / "run"), "--steps", "2"]
    assert main([*argv, "--random-background"]) == 1
    err = capsys.readouterr().err
    assert "--random-background needs RGBA training images; 4 of 4 views have no alpha" in err
    assert "Traceback" not in err


def test_config_rejects_a_non_bool():
    with pytest.raises(tr.TrainError, match="random_background must be a bool"):
        tr.TrainConfig(random_background="yes")


# ----------------------------------------------------------------------------- two devices

TWO_DEVICES = """
import sys
import jax.numpy as jnp
import numpy as np
import xprc
from xprc import train as tr
from xprc.data.scene_folder import load_scene
from xprc.metrics import psnr
from xprc.pipeline import RenderConfig
from xprc.train.loop import Run

train_set, test_set = load_scene(sys.argv[1])
config = tr.TrainConfig(
    steps=3, eval_every=0, checkpoint_every=0, progress=False, save_renders=False,
    random_background=True, render=RenderConfig(max_entries=1024),
)
method = xprc.load("3dgs")
r = Run(method, train_set, test_set, None, config, 2)
opacity = r.strategy.roles["opacity"]
params = dict(r.state["params"])
params[opacity] = jnp.full_like(params[opacity], -40.0)
r.state = {**r.state, "params": params}
r.replicate()
views = r.order.views(0, 2)
info = r.advance()
bg = np.asarray(info["background"])
assert bg.shape == (2, 3) and not np.array_equal(bg[0], bg[1]), bg
want = []
for k, i in enumerate(views):
    v = train_set.views[int(i)]
    target = v.image + (1 - v.alpha[..., None]) * (bg[k] - 1.0)
    want.append(float(psnr(np.broadcast_to(bg[k], target.shape).astype(np.float32), target)))
assert abs(float(info["psnr"]) - np.mean(want)) < 1e-3, (float(info["psnr"]), want)
print("two devices OK")
"""


@pytest.mark.slow  # a fresh process compiles the sharded step (~1 min on 2 cores)
def test_two_devices_one_colour_per_view(scene_dir):
    """Data-parallel steps draw one colour per device's view; the step's PSNR (mean over the
    views) is that of each flat colour against its re-composited view."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    proc = subprocess.run(
        [sys.executable, "-c", TWO_DEVICES, str(scene_dir)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "two devices OK" in proc.stdout
