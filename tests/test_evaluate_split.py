"""`xprc eval`'s split check (xprc.evaluate): the record of what the run trained on is the
metadata `load_trained` read (Trained.meta), for a run's PLY that of the run's checkpoint.npz;
where nothing records it the console says the split is not checked."""

from __future__ import annotations

import types

import numpy as np

from xprc.data.npz import save_checkpoint
from xprc.data.ply import save_ply
from xprc.evaluate import _recorded_inputs, evaluate
from xprc.trained import load_trained

INPUTS = {"data.views": "abc", "data.cameras": "def", "data.image_size": "8x8"}


def _gaussians(n=4):
    rng = np.random.default_rng(0)
    return {
        "means": rng.normal(0, 1, (n, 3)).astype(np.float32),
        "quats": rng.normal(0, 1, (n, 4)).astype(np.float32),
        "scales": rng.normal(-3, 0.5, (n, 3)).astype(np.float32),
        "opacities": rng.normal(0, 2, n).astype(np.float32),
        "sh": rng.normal(0, 0.5, (n, 1, 3)).astype(np.float32),
    }


def test_a_runs_ply_is_checked_against_its_runs_checkpoint(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text("{}", encoding="utf-8")
    save_ply(run / "scene.ply", _gaussians())
    save_checkpoint(run / "checkpoint.npz", {"params": _gaussians()}, {"inputs": INPUTS})
    assert _recorded_inputs(load_trained(run / "scene.ply")) == INPUTS
    assert _recorded_inputs(load_trained(run / "checkpoint.npz")) == INPUTS
    (run / "checkpoint.npz").unlink()
    assert _recorded_inputs(load_trained(run / "scene.ply")) is None


def test_an_unchecked_split_is_said_on_the_console(tmp_path, monkeypatch):
    save_ply(tmp_path / "scene.ply", _gaussians())
    trained = load_trained(tmp_path / "scene.ply")
    image = np.full((12, 12, 3), 0.5, np.float32)
    monkeypatch.setattr("xprc.pipeline.render", lambda *a, **k: types.SimpleNamespace(image=image))
    view = types.SimpleNamespace(
        name="v0", image=image * 0.9, width=12, height=12, camera=lambda: None
    )
    test_set = types.SimpleNamespace(views=[view])
    said = []
    report = evaluate(None, trained, None, test_set, (0, 0, 0), log=said.append)
    assert report["split_matches_training"] == "unknown"
    assert any(line.startswith(f"note: {trained.source} has no record") for line in said)
