"""`xprc eval RUN` without --data reads the dataset the run recorded (config.json's `data`):
a run folder whose record is missing, absent or malformed is a one-line error naming
config.json and saying to give --data. (The working case trains a run: tests/test_examples.py,
test_capture_train_eval_example.)"""

from __future__ import annotations

import json

import pytest

from xprc.cli import main as xprc


def _run_folder(tmp_path, record):
    run = tmp_path / "run"
    run.mkdir()
    (run / "scene.ply").write_bytes(b"not read: the dataset is looked up first")
    if record is not None:
        (run / "config.json").write_text(record if isinstance(record, str) else json.dumps(record))
    return run


GOOD = {"path": "/nowhere", "downscale": 1, "images": None, "test_every": None,
        "undistort": False}  # fmt: skip
CASES = {
    "no config.json": (None, "not found, so the run's dataset is unknown"),
    "not JSON": ("{", "invalid JSON"),
    "nested too deeply": ("[" * 200_000, "nested too deeply"),
    "relative path": ({"data": {**GOOD, "path": "data/scene"}}, "malformed (no absolute path)"),
    "no data record": ({"method": "Gaussian3D"}, "records no dataset"),
    "data not a dict": ({"data": ["x"]}, "its `data` record is malformed"),
    "empty path": ({"data": {**GOOD, "path": ""}}, "its `data` record is malformed"),
    "bad downscale": ({"data": {**GOOD, "downscale": "4"}}, "malformed 'downscale'"),
    "bad test_every": ({"data": {**GOOD, "test_every": 1}}, "malformed 'test_every'"),
    "bad undistort": ({"data": {**GOOD, "undistort": 1}}, "malformed 'undistort'"),
}


@pytest.mark.parametrize("case", CASES)
def test_eval_without_data_needs_a_sound_record(case, tmp_path, capsys):
    record, message = CASES[case]
    run = _run_folder(tmp_path, record)
    assert xprc(["eval", str(run)]) == 1
    err = capsys.readouterr().err
    assert "config.json" in err and message in err
    assert "give --data DATASET" in err or "invalid" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_eval_uses_the_recorded_folder_and_says_so(tmp_path, capsys):
    run = _run_folder(tmp_path, {"data": {**GOOD, "path": str(tmp_path / "gone")}})
    assert xprc(["eval", str(run)]) == 1
    captured = capsys.readouterr()
    assert f"dataset (from {run / 'config.json'}): {tmp_path / 'gone'}" in captured.out
    assert "gone" in captured.err and "not found" in captured.err


def test_eval_keeps_the_options_given_and_says_which_it_took(tmp_path, capsys):
    """--downscale 1 given is kept although the run recorded 4 (an explicit option is never
    taken for one left at its default); the options taken from the record are named."""
    record = {**GOOD, "path": str(tmp_path / "gone"), "downscale": 4, "test_every": 3,
              "undistort": True}  # fmt: skip
    run = _run_folder(tmp_path, {"data": record})
    assert xprc(["eval", str(run), "--downscale", "1"]) == 1
    out = capsys.readouterr().out
    assert out.strip().endswith(f"{tmp_path / 'gone'} with --test-every 3, --undistort")


def test_eval_of_a_run_that_is_not_there_says_so(tmp_path, capsys):
    _run_folder(tmp_path, {"data": {**GOOD, "path": str(tmp_path)}})  # a real run beside it
    assert xprc(["eval", str(tmp_path / "run_typo")]) == 1
    err = capsys.readouterr().err
    assert "run_typo" in err and "not found: give a run folder" in err and "config.json" not in err


def test_a_subset_is_no_longer_the_dataset_its_source_names():
    import numpy as np

    from xprc.data.datasets import Dataset

    d = Dataset(views=(), points=np.zeros((0, 3)), source={"path": "/x"})
    assert d.subset([]).source is None
