"""benchmarks/full_scale.py keeps what a device call measured when the call is cut short: a
training run's row every 10 steps, and ADC started at scale (`--adc-init`)."""

from __future__ import annotations

import json

import pytest

from benchmarks import full_scale


def test_the_clock_hands_on_the_row_so_far_every_ten_steps(monkeypatch):
    rows = []
    clock = full_scale.Clock(rows.append)
    # step k ends at 0.5 k s up to step 15, then one step a second
    ticks = iter(0.5 * k if k <= 15 else 7.5 + (k - 15) for k in range(1, 30))
    monkeypatch.setattr(full_scale.time, "perf_counter", lambda: next(ticks))
    for step in range(1, 26):
        clock(step, {"live": 100 + step})
    assert len(rows) == 2  # steps 10 and 20
    last = rows[-1]
    assert "steps 1-20" in last["partial"]
    assert rows[0]["window_end"] == {"steps": "7-10", "steps_per_s": 2.0,
                                     "primitives": [107, 110]}  # fmt: skip
    assert last["window_end"]["steps"] == "14-20"  # the last third: 6 steps in 5.5 s
    assert last["window_end"]["steps_per_s"] == 1.091
    assert last["window_end"]["primitives"][1] == 120
    assert last["primitives_over_time"][-1] == [20, 120]


def test_quick_run_writes_mcmc_with_resume_and_adc_from_adc_init(tmp_path, monkeypatch):
    out = tmp_path / "fs.json"
    writes = []  # (phase, partial or not) of each row as each write of the JSON had it
    real = full_scale.write_json

    def spy(path, results, note=""):
        writes.append({k: "partial" in v for k, v in results["phases"].items()})
        return real(path, results, note)

    monkeypatch.setattr(full_scale, "write_json", spy)
    full_scale.main(["--quick", "--capture", str(tmp_path / "cap"), "--jobs", "1",
                     "--phases", "capture,mcmc,adc", "--adc-init", "6000",
                     "--out", str(out)])  # fmt: skip
    phases = json.loads(out.read_text())["phases"]
    mcmc = phases["mcmc_4000"]
    assert "partial" not in mcmc and mcmc["steps"] == [1, 12]  # the finished row replaced it
    assert mcmc["resume"]["steps"] == [13, 32] and mcmc["resume"]["step_traces"] == 0
    assert mcmc["resume"]["final"]["psnr"] > 0 and "memory" in mcmc["resume"]
    assert mcmc["device_only"]["steps_per_s"] > 0
    # written partial at step 10 of the first run, finished after it, never partial again
    states = [w["mcmc_4000"] for w in writes if "mcmc_4000" in w]
    finished = states.index(False)
    assert states[0] is True and finished > 0 and True not in states[finished:]
    adc = phases["adc_from_6000"]
    assert "partial" not in adc and "error" not in adc
    assert adc["start_primitives"] == 6000 and adc["capacity"] == 8000
    assert adc["primitives_over_time"][0][1] == 6000  # started from the replicated points


def test_an_adc_start_past_its_capacity_is_refused(capsys):
    with pytest.raises(SystemExit):
        full_scale.main(["--quick", "--phases", "adc", "--adc-init", "9000"])
    assert "--adc-init 9000 must be in 0 .. --adc-capacity (8000)" in capsys.readouterr().err
