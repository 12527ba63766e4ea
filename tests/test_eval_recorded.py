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
    "not JSON": ("{", "cannot read it (JSONDecodeError)"),
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
    assert "config.json" in err and message in err and "give --data DATASET" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_eval_uses_the_recorded_folder_and_says_so(tmp_path, capsys):
    run = _run_folder(tmp_path, {"data": {**GOOD, "path": str(tmp_path / "gone")}})
    assert xprc(["eval", str(run)]) == 1
    captured = capsys.readouterr()
    assert f"dataset (from {run / 'config.json'}): {tmp_path / 'gone'}" in captured.out
    assert "gone" in captured.err and "not found" in captured.err
