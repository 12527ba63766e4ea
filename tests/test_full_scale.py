"""benchmarks/full_scale.py keeps what a device call measured when the call is cut short: a
training run's row every 10 steps, and ADC started at scale (`--adc-init`)."""

from __future__ import annotations

import json

from benchmarks import full_scale


def test_the_clock_hands_on_the_row_so_far_every_ten_steps(monkeypatch):
    rows = []
    clock = full_scale.Clock(rows.append)
    ticks = iter(0.5 * i for i in range(100))  # each step ends 0.5 s after the last
    monkeypatch.setattr(full_scale.time, "perf_counter", lambda: next(ticks))
    for step in range(1, 26):
        clock(step, {"live": 100 + step})
    assert len(rows) == 2  # steps 10 and 20
    last = rows[-1]
    assert "steps 1-20" in last["partial"]
    assert last["window_end"]["steps_per_s"] == 2.0
    assert last["window_end"]["primitives"][1] == 120
    assert last["primitives_over_time"][-1] == [20, 120]


def test_quick_run_writes_mcmc_with_resume_and_adc_from_adc_init(tmp_path):
    out = tmp_path / "fs.json"
    full_scale.main(["--quick", "--capture", str(tmp_path / "cap"), "--jobs", "1",
                     "--phases", "capture,mcmc,adc", "--adc-init", "6000",
                     "--out", str(out)])  # fmt: skip
    phases = json.loads(out.read_text())["phases"]
    mcmc = phases["mcmc_4000"]
    assert "partial" not in mcmc and mcmc["steps"] == [1, 12]  # the finished row replaced it
    assert mcmc["resume"]["steps"] == [13, 32] and mcmc["resume"]["step_traces"] == 0
    assert mcmc["device_only"]["steps_per_s"] > 0
    adc = phases["adc"]
    assert "partial" not in adc and "error" not in adc
    assert adc["primitives_over_time"][0][1] == 6000  # started from the replicated points
