"""benchmarks/capture_quality.py (issue 39 item 4): its options, its curve image on made-up
runs, and (slow) the CPU-sized variant end to end at a tiny size."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import ROOT, import_file
from PIL import Image

from xprc.plots import compared_curves


def _bench():
    return import_file(ROOT / "benchmarks" / "capture_quality.py", "bench_capture_quality")


def test_options_full_and_cpu_presets():
    bench = _bench()
    full = bench.options([])
    assert (full.views, full.size, full.points, full.steps) == (150, (1296, 840), 150_000, 30_000)
    cpu = bench.options(["--cpu", "--steps", "50"])
    assert (cpu.views, cpu.size, cpu.steps) == (24, (96, 64), 50)
    assert cpu.specs == ["3dgs", "3dgut", "2dgs"]
    assert bench.options(["--size", "48x32"]).size == (48, 32)
    with pytest.raises(SystemExit):
        bench.options(["--size", "48"])


def test_budget_scales_the_paper_schedule():
    bench = _bench()
    config = bench.budget(600, 6)
    assert (config.strategy, config.steps) == ("adc", 600)
    # 3dgs-30k's window (500 to 15k of 30k) and cadence, scaled as train_strategies.py does
    assert (config.refine_from, config.refine_until, config.refine_every) == (60, 300, 30)
    assert (config.reset_every, config.sh_degree_interval, config.eval_every) == (200, 150, 100)
    assert bench.reset_steps(config) == [200]  # 400 is past the end of densification (300)
    assert bench.reset_steps(bench.budget(600, 6, reset_every=0)) == []
    assert bench.budget(600, 6, reset_every=0).reset_every == 0


def _runs():
    steps = np.arange(0, 301, 3)
    return {
        name: {
            "history": [{"step": int(s), "loss": 0.3 * np.exp(-s / (80 + 20 * k)) + 0.02}
                        for s in steps],
            "evals": [{"step": s, "psnr": 12 + (10 - k) * (1 - np.exp(-s / 100))}
                      for s in range(0, 301, 50)],
        }
        for k, name in enumerate(("3dgs", "3dgut", "2dgs"))
    }  # fmt: skip


def test_curve_image_on_made_up_runs(tmp_path):
    fig = compared_curves(tmp_path / "c.png", _runs(), "a title", resets=[100])
    with Image.open(tmp_path / "c.png") as image:
        assert image.size == (1000, 400)
    assert fig.get_suptitle() == "a title"
    psnr_ax, loss_ax = fig.axes
    assert (psnr_ax.get_ylabel(), loss_ax.get_ylabel()) == ("PSNR (dB)", "loss")
    assert psnr_ax.get_xlabel() == loss_ax.get_xlabel() == "step"
    assert loss_ax.get_yscale() == "log"
    for ax in (psnr_ax, loss_ax):
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels == ["3dgs", "3dgut", "2dgs", "opacity reset"]
    # each spec's test PSNR points are the evals given, in its own colour
    lines = [ln for ln in psnr_ax.get_lines() if ln.get_label() == "3dgut"]
    assert np.allclose(lines[0].get_ydata(), [e["psnr"] for e in _runs()["3dgut"]["evals"]])


@pytest.mark.slow
def test_cpu_variant_end_to_end(tmp_path):
    bench = _bench()
    out = tmp_path / "quality.json"
    args = bench.options(["--cpu", "--views", "16", "--size", "48x32", "--points", "500",
                          "--steps", "120", "--evals", "2", "--out", str(out),
                          # no opacity reset: 120 steps at 48x32 are too few to recover from one
                          "--reset-every", "0",
                          "--capture", str(tmp_path / "capture")])  # fmt: skip
    results = bench.run(args)
    rows = {r["spec"]: r for r in results["rows"]}
    assert sorted(rows) == ["2dgs", "3dgs", "3dgut"]
    for spec, r in rows.items():
        assert math.isfinite(r["psnr"]) and math.isfinite(r["ssim"]), spec
        assert r["psnr"] > r["initial_psnr"], (spec, results["rows"])  # training helped
        assert f"| {spec} | 120 |" in results["table"]
    assert results["capture"]["test_views"] == 2  # views 0 and 8 of 16
    assert json.loads(out.read_text())["rows"] == results["rows"]
    picture = out.with_suffix(".png")
    assert picture.stat().st_size > 0
    with Image.open(picture) as image:
        image.verify()
    with Image.open(picture) as image:
        assert image.format == "PNG" and min(image.size) > 0
