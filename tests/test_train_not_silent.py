"""Nothing silent in training: each guess of the initialisation (random points, points dropped to
fit the capacity, grey colours, a lone point's size, the look target, the scene scale), the
background inferred from the views, ADC candidates left without a free slot and MCMC copies over
the correction's cap is one line on the console and in train.log (or a count in the step's)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import before_determinant
from test_strategies import adc_hyper
from test_train import METHOD, _view

from xprc import train as tr
from xprc.camera import look_at
from xprc.data.datasets import Dataset
from xprc.data.ply import load_points_ply
from xprc.pipeline import RenderConfig
from xprc.train import optim
from xprc.train.folder import TrainLog
from xprc.train.loop import Run
from xprc.train.reports import StepReports
from xprc.train.strategies.adc import ADC
from xprc.train.strategies.mcmc import MCMC, MCMC_MAX_COPIES

SIZE = 16


def _views(n: int, alpha: np.ndarray | None = None) -> tuple:
    """n cameras on a circle of radius 3 looking at the origin, random images."""
    rng = np.random.default_rng(n)
    views = []
    for i in range(n):
        theta = 2 * math.pi * i / n
        eye = 3.0 * np.array([math.cos(theta), math.sin(theta), 0.3])
        cam = look_at(eye, [0, 0, 0], [0, 0, 1], SIZE, SIZE, 20.0, dtype=np.float32)
        view = _view(f"v{i}", cam, rng.uniform(0, 1, (SIZE, SIZE, 3)))
        views.append(view if alpha is None else _with_alpha(view, alpha))
    return tuple(views)


def _with_alpha(view, alpha):
    return dataclasses.replace(view, alpha=np.asarray(alpha, np.float32))


def _points(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n points in [-1, 1]^3 and their colours, float32 [n, 3] each."""
    rng = np.random.default_rng(seed)
    pts, cols = rng.uniform(-1, 1, (n, 3)), rng.uniform(0, 1, (n, 3))
    return pts.astype(np.float32), cols.astype(np.float32)


def _init(dataset, capacity=None):
    lines: list[str] = []
    params, used = tr.init_params(METHOD, dataset, tr.TrainConfig(), capacity, log=lines.append)
    return params, used, lines


# ------------------------------------------------------------------------ initialisation


def test_no_points_says_how_many_random_points_and_where():
    _, used, lines = _init(Dataset(views=_views(4)), capacity=500)
    assert int(used.sum()) == 500
    assert len(lines) == 1, lines
    number = r"-?[0-9.e+-]+"
    assert re.fullmatch(
        r"init: the dataset has no points \(no points3d.ply or COLMAP points3D\): 500 random "
        rf"points in a box of half-width {number} around \({number}, {number}, {number}\), "
        r"where the cameras look, with grey colours",
        lines[0],
    ), lines[0]


def test_points_over_the_capacity_are_counted():
    pts, cols = _points(4000)
    params, used, lines = _init(Dataset(views=_views(4), points=pts, colors=cols), 1000)
    assert lines == [
        "init: the dataset has 4,000 points; the capacity 1,000 keeps a random 1,000 "
        "(3,000 dropped)"
    ]
    assert used.tolist() == [True] * 1000 and params["means"].shape == (1000, 3)


def test_points_without_colours_start_grey_and_say_so(tmp_path):
    pts, _ = _points(50)
    _, _, lines = _init(Dataset(views=_views(4), points=pts), 60)
    assert lines == ["init: the dataset's 50 points have no colours: they start grey (0.5)"]
    # a points3d.ply without red/green/blue reads as grey (xprc.data.ply): said at the init
    ply = tmp_path / "points3d.ply"
    body = "".join(f"{x} {y} {z}\n" for x, y, z in pts[:3])
    ply.write_text(
        "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
        f"property float z\nend_header\n{body}"
    )
    points, colors = load_points_ply(ply)
    _, _, lines = _init(Dataset(views=_views(4), points=points, colors=colors))
    assert lines == [
        "init: the dataset's 3 point colours are all grey (0.5), as a point cloud without "
        "colours reads: the colours start grey"
    ]


def test_a_lone_point_gets_the_fallback_size_and_says_so():
    pts, cols = _points(1)
    params, _, lines = _init(Dataset(views=_views(4), points=pts, colors=cols))
    assert lines == ["init: 1 point, no neighbour to measure: its size is assumed 0.01"]
    np.testing.assert_allclose(params["scales"], math.log(0.01), rtol=1e-6)


def test_one_view_assumes_the_look_target_and_the_scene_scale():
    one = Dataset(views=_views(1))
    lines: list[str] = []
    assert tr.scene_scale(one, lines.append) == 1.0
    assert lines == [
        "init: one training view: the scene scale (learning rates, densification sizes) is "
        "assumed 1.0"
    ]
    _, _, lines = _init(one, capacity=20)
    assert len(lines) == 2, lines
    assert lines[0].startswith("init: the 1 camera axes do not meet at a point (one view or ")
    assert lines[0].endswith("about one unit in front of their mean centre")
    assert lines[1].startswith("init: the dataset has no points")
    # coincident cameras: a degenerate extent, said too
    twice = Dataset(views=_views(1) * 2)
    lines = []
    assert tr.scene_scale(twice, lines.append) == 1.0
    assert lines == [
        "init: the 2 camera centres coincide: the scene scale (learning rates, densification "
        "sizes) is assumed 1.0"
    ]


def test_a_dataset_that_needs_no_guess_says_nothing(capsys):
    pts, cols = _points(50)
    data = Dataset(views=_views(4), points=pts, colors=cols)
    _, _, lines = _init(data, 60)
    assert lines == []
    lines = []
    assert tr.scene_scale(data, lines.append) > 1.0 and lines == []
    # without a `log`, init_params reports to stderr
    tr.init_params(METHOD, data, tr.TrainConfig(), 30)
    assert capsys.readouterr().err == (
        "init: the dataset has 50 points; the capacity 30 keeps a random 30 (20 dropped)\n"
    )


# ------------------------------------------------------------------ the trainer's lines


def _run(tmp_path, dataset, **kw):
    """The trainer's setup (what `train` builds before the first step), logging to train.log."""
    config = tr.TrainConfig(
        progress=False, render=RenderConfig(max_entries=4096), steps=1, **kw
    )  # fmt: skip
    tmp_path.mkdir(exist_ok=True)
    log = TrainLog(tmp_path / "train.log", config.progress)
    try:
        Run(METHOD, dataset, None, tmp_path, config, 1, log)
    finally:
        log.close()
    return [line[20:] for line in (tmp_path / "train.log").read_text().splitlines()]


def test_trainer_says_the_background_and_the_init_guesses(tmp_path, capsys):
    """Views without alpha: the black background is said once (console and train.log), as
    are the initialisation's guesses, even without a progress bar."""
    pts, _ = _points(40)
    logged = _run(tmp_path, Dataset(views=_views(3), points=pts), capacity=30)
    want = [
        "background: black (0, 0, 0) assumed: none of the 3 training views has alpha (set "
        "TrainConfig.background if the images were composited on another colour)",
        # (the hand-written module declares no lr for its sh: issue 41)
        "lr: no `lr` declared in HandwrittenGaussian3D for 'sh': it trains at lr_default 0.001",
        "init: the dataset's 40 points have no colours: they start grey (0.5)",
        "init: the dataset has 40 points; the capacity 30 keeps a random 30 (10 dropped)",
    ]
    assert logged == want
    assert capsys.readouterr().err.splitlines() == want


def test_trainer_says_the_inferred_background(tmp_path, capsys):
    alpha = np.ones((SIZE, SIZE), np.float32)
    alpha[:2] = 0.0  # 2 transparent rows per view
    views = _views(3, alpha)
    for v in views:
        v.image[:2] = [1.0, 1.0, 1.0]
    pts, cols = _points(40)
    logged = _run(tmp_path, Dataset(views=views, points=pts, colors=cols))
    want = [
        "background: (1, 1, 1) inferred: the median colour of the 96 transparent pixels of 3 "
        "of the 3 training views",
        "lr: no `lr` declared in HandwrittenGaussian3D for 'sh': it trains at lr_default 0.001",
    ]
    assert logged == want and capsys.readouterr().err.splitlines() == want
    # alpha that is nowhere 0: black, said
    logged = _run(tmp_path / "b", Dataset(views=_views(3, np.ones((SIZE, SIZE))), points=pts,
                                          colors=cols))  # fmt: skip
    assert logged == [
        "background: black (0, 0, 0) assumed: the alpha of the 3 training views with one is "
        "nowhere 0 (set TrainConfig.background if the images were composited on another colour)",
        "lr: no `lr` declared in HandwrittenGaussian3D for 'sh': it trains at lr_default 0.001",
    ]


# -------------------------------------------------------------------------- ADC skipped


def _adc_case(n_used: int, n: int):
    """n slots, the first n_used small primitives all over the gradient threshold."""
    params = {
        "means": jnp.asarray(np.arange(n * 3, dtype=np.float32).reshape(n, 3)),
        "quats": jnp.asarray(np.tile([1.0, 0, 0, 0], (n, 1)).astype(np.float32)),
        "scales": jnp.full((n, 3), math.log(0.005), jnp.float32),
        "opacities": jnp.zeros((n,), jnp.float32),  # 0.5
        "sh": jnp.zeros((n, 16, 3), jnp.float32),
    }
    used = jnp.arange(n) < n_used
    grads = jnp.where(used, 0.01 + 0.001 * jnp.arange(n, dtype=jnp.float32), 0.0)
    sstate = {"grad_sum": grads, "grad_count": jnp.ones((n,), jnp.int32)}
    return params, used, sstate, adc_hyper()


@pytest.mark.parametrize(("n_used", "want"), [(7, 6), (4, 0)])
def test_adc_counts_the_candidates_without_a_free_slot(n_used, want):
    """7 candidates, 1 free slot: one clone and 6 skipped (the count was missing); 4 candidates
    and 4 free slots: none skipped. Under jit, shapes unchanged."""
    params, used, sstate, hyper = _adc_case(n_used, 8)
    adc = ADC(METHOD)
    opt_state = optim.optimizer(optim.lr_arrays(METHOD, tr.TrainConfig()), {"means": 1.0}).init(
        params
    )
    new, _, new_used, counts = jax.jit(adc.densify)(
        params, opt_state, used, sstate, jax.random.PRNGKey(0), hyper, jnp.float32(1.0)
    )
    cloned = min(n_used, 8 - n_used)
    assert {k: int(v) for k, v in counts.items()} == {
        "cloned": cloned, "split": 0, "pruned": 0, "skipped": want
    }  # fmt: skip
    assert set(counts) == set(adc.count_names)
    assert int(np.sum(np.asarray(new_used))) == n_used + cloned
    assert new["means"].shape == params["means"].shape


def _stub_run(strategy, name: str):
    """The run's StepReports with a log that keeps (line, always) pairs."""
    lines: list[tuple[str, bool]] = []

    def log(msg, always=False):
        lines.append((msg, always))

    log.file = lambda msg: lines.append((msg, None))  # train.log only
    return StepReports(log, strategy, name), lines


def test_trainer_shows_skipped_when_nonzero_and_totals_it():
    run, lines = _stub_run(ADC(METHOD), "adc")
    run.counts(40, {"cloned": 1, "split": 0, "pruned": 2, "skipped": 0})
    run.counts(40, {"cloned": 1, "split": 0, "pruned": 0, "skipped": 6})
    run.counts(40, {"cloned": 0, "split": 0, "pruned": 0, "skipped": 0})
    note = "over the gradient threshold but no free slot: not cloned or split"
    assert lines == [
        ("step 40: adc cloned 1, split 0, pruned 2", False),
        (f"step 40: adc cloned 1, split 0, pruned 0, skipped 6 ({note})", False),
    ]
    assert run.events == {"cloned": 2, "split": 0, "pruned": 2, "skipped": 6}  # metrics.json
    lines.clear()
    run.finish()
    assert lines == [
        (f"adc: skipped 6 in total ({note}; each event in train.log, the total in metrics.json "
         "densification)", True)
    ]  # fmt: skip
    run, lines = _stub_run(ADC(METHOD), "adc")
    run.finish()
    assert lines == []


# -------------------------------------------------------------------------- MCMC capped


@pytest.mark.parametrize(("n_dead", "want"), [(20, 1), (MCMC_MAX_COPIES - 1, 0)])
def test_mcmc_counts_sources_over_the_copy_cap(n_dead, want):
    """One live primitive and n_dead dead ones: all move onto it. 21 sharing it is over the
    16 the correction handles: one capped source; 16 is within it."""
    n = 24
    logit = math.log(0.5 / 0.5)
    opac = np.full(n, -20.0, np.float32)
    opac[0] = logit
    params = {
        "means": jnp.zeros((n, 3), jnp.float32),
        "quats": jnp.asarray(np.tile([1.0, 0, 0, 0], (n, 1)).astype(np.float32)),
        "scales": jnp.full((n, 3), math.log(0.05), jnp.float32),
        "opacities": jnp.asarray(opac),
        "sh": jnp.zeros((n, 16, 3), jnp.float32),
    }
    used = jnp.arange(n) <= n_dead
    hyper = {"min_opacity": jnp.float32(0.005), "grow_fraction": jnp.float32(0.0)}
    mcmc = MCMC(METHOD)
    opt_state = optim.optimizer(optim.lr_arrays(METHOD, tr.TrainConfig()), {"means": 1.0}).init(
        params
    )
    *_, moved, capped = jax.jit(mcmc.relocate_counted)(
        params, opt_state, used, jax.random.PRNGKey(0), hyper
    )
    assert int(np.sum(np.asarray(moved))) == n_dead and int(capped) == want
    run, lines = _stub_run(mcmc, "mcmc")
    run.counts(40, {"relocated": n_dead, "capped": want})
    note = (
        f"sources shared by over {MCMC_MAX_COPIES} primitives: their opacity and scale "
        f"correction is the one for {MCMC_MAX_COPIES} (approximate)"
    )
    capped_text = f", capped {want} ({note})" if want else ""
    assert lines == [(f"step 40: mcmc relocated {n_dead}{capped_text}", False)]


def test_adc_run_reports_skipped_in_train_log_and_metrics(tmp_path, capsys):
    """End to end: a full capacity (no free slot) and every seen primitive a candidate: the
    step's counts carry `skipped`, train.log has it per event, the console its total, and
    metrics.json its total under densification."""
    pts, cols = _points(30)
    data = Dataset(views=_views(2), points=pts, colors=cols)
    config = tr.TrainConfig(
        strategy="adc", capacity=30, steps=2, refine_from=1, refine_every=1, refine_until=2,
        grad_threshold=0.0, reset_every=0, eval_every=0, checkpoint_every=0, save_renders=False,
        progress=False, render=RenderConfig(max_entries=4096),
    )  # fmt: skip
    tr.train(METHOD, data, None, tmp_path, config)
    skipped = json.loads((tmp_path / "metrics.json").read_text())["densification"]["skipped"]
    assert skipped > 0
    log = (tmp_path / "train.log").read_text()
    assert re.search(rf"step 1: adc cloned 0, split 0, pruned \d+, skipped {skipped} \(", log)
    total = f"adc: skipped {skipped} in total (over the gradient threshold but no free slot"
    assert total in log and total in capsys.readouterr().err


def test_random_init_leaves_a_growing_strategy_room():
    """Without a point cloud the trainer made `capacity` random points: ADC's capacity (4x the
    random points) started full, with no free slot to clone or split into."""
    config = tr.TrainConfig(num_random_points=50)
    lines: list[str] = []
    _, used = tr.init_params(METHOD, Dataset(views=_views(4)), config, 200, log=lines.append)
    assert int(used.sum()) == 50 and used.shape[0] == 200
    assert " 50 random points" in lines[0]


def test_primitives_left_out_of_a_step_are_warned_logged_and_totalled():
    """A primitive whose projection leaves float range is left out of the step's render: the
    first step it happens warns, train.log notes each change, the run's end gives the most."""
    run, lines = _stub_run(MCMC(METHOD), "mcmc")
    with pytest.warns(RuntimeWarning, match=r"training step 7: render left out 2 primitive"):
        run.lost(7, 2)
    for step, count in ((8, 2), (9, 3), (10, 0)):
        run.lost(step, count)  # no second warning (filterwarnings = error)
    assert lines == [
        ("step 7: 2 primitive(s) left out (non-finite projection)", None),
        ("step 9: 3 primitive(s) left out (non-finite projection)", None),
        ("step 10: 0 primitive(s) left out (non-finite projection)", None),
    ]
    lines.clear()
    run.finish()
    assert lines == [
        ("up to 3 primitive(s) a step were left out of the render for a non-finite projection "
         "(see the warning and train.log)", True)
    ]  # fmt: skip


def test_pixels_outside_the_lens_domain_are_warned_once_logged_and_totalled():
    """A fisheye dataset whose image corners lie beyond the image circle: every step's view has
    such pixels; warned at the first step only (naming the model), changes in train.log."""
    log_lines: list[tuple[str, bool | None]] = []

    def log(msg, always=False):
        log_lines.append((msg, always))

    log.file = lambda msg: log_lines.append((msg, None))
    run = StepReports(log, MCMC(METHOD), "mcmc", "fisheye")
    with pytest.warns(RuntimeWarning, match=r"training step 3: 1,200 pixel\(s\) lie outside the "
                      r"fisheye lens model's valid domain \(beyond theta_max"):  # fmt: skip
        run.lens(3, 1200)
    for step, count in ((4, 1200), (5, 800), (6, 1200)):
        run.lens(step, count)  # no second warning (filterwarnings = error)
    assert log_lines == [
        ("step 3: 1,200 pixel(s) outside the lens's valid domain", None),
        ("step 5: 800 pixel(s) outside the lens's valid domain", None),
        ("step 6: 1,200 pixel(s) outside the lens's valid domain", None),
    ]
    log_lines.clear()
    run.finish()
    assert log_lines == [
        ("up to 1,200 pixel(s) a step lay outside the lens model's valid domain (see the "
         "warning and train.log)", True)
    ]  # fmt: skip


def test_resume_of_a_run_recorded_before_base_specs_were_hashed():
    """A checkpoint of a spec that extends another recorded the sha256 of its own text: taken
    as this spec (with a line saying so); any other sha256 is still refused."""
    import hashlib

    import xprc
    from xprc.resources import shipped_specs

    own = hashlib.sha256(shipped_specs()["student_t"].read_bytes()).hexdigest()
    assert _resume_check(xprc.load("student_t"), own) == [
        "ckpt.npz records the spec's own sha256 (written before xprc hashed the base specs it "
        "extends): taken as this spec"
    ]
    with pytest.raises(tr.TrainError, match="spec.sha256"):
        _resume_check(xprc.load("student_t"), "0" * 64)


def _resume_check(method, recorded: str) -> list[str]:
    """The lines `--resume` says for a checkpoint that recorded spec sha256 `recorded`."""
    from xprc.method_info import MethodInfo

    lines: list[str] = []
    config = tr.TrainConfig(steps=3)
    run = types.SimpleNamespace(
        config=config, inputs={"spec.sha256": method.SPEC_SHA256}, info=MethodInfo.of(method),
        log=lambda msg, always=False: lines.append(msg),
    )  # fmt: skip
    meta = {"config": config.trajectory(), "inputs": {"spec.sha256": recorded}, "steps": 3}
    Run._check_same_options(run, meta, Path("ckpt.npz"))
    return lines


def test_resume_of_a_run_of_the_spec_before_its_far_plane_cull():
    """A checkpoint of the shipped 3DGS spec as it was before it culled beyond camera.far:
    taken as this spec, with a line saying so (its hash recomputed from the text without it)."""
    import hashlib

    import xprc
    from xprc.resources import shipped_specs

    text = before_determinant("3dgs", shipped_specs()["3dgs"].read_text(encoding="utf-8"))
    before = hashlib.sha256(text.replace(" and p.z < camera.far", "").encode()).hexdigest()
    assert _resume_check(xprc.load("3dgs"), before) == [
        "ckpt.npz was trained with an earlier version of the shipped 3dgs spec, before it culled "
        "primitives beyond camera.far (2026-12-06); the same renders while a camera keeps the "
        "default far plane, 1e10 (up to float32 rounding: its 2D determinant is now computed "
        "without cancellation): taken as this spec"
    ]
