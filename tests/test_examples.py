"""Examples and the benchmark runner stay runnable (tiny sizes)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
from conftest import GARDEN, ROOT
from PIL import Image


def _load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not GARDEN.exists(), reason="shared garden data not present")
def test_render_garden_example(tmp_path):
    example = _load(ROOT / "examples" / "render_garden.py")
    paths = example.main(["--num", "2000", "--scale", "0.25", "--out", str(tmp_path)])
    assert len(paths) == 3
    img = np.asarray(Image.open(paths[0]))
    assert img.shape == (105, 162, 3) and img.std() > 5


def test_benchmark_runner_quick(tmp_path):
    bench = _load(ROOT / "benchmarks" / "run.py")
    out = tmp_path / "bench.json"
    bench.main(
        [
            "--quick",
            "--methods",
            "handwritten,3dgs",
            "--no-scaling",
            "--no-training",
            "--out",
            str(out),
        ]
    )
    data = json.loads(out.read_text())
    assert set(data["methods"]) == {"handwritten", "3dgs"}
    assert data["methods"]["3dgs"]["dropped"] == 0
    r = data["methods"]["3dgs"]
    assert r["entry_capacity"] >= r["entries_needed"] > 0 and r["count_s"] > 0
    assert data["methods"]["3dgs"]["forward_s"] > 0


def test_binning_benchmark_quick(tmp_path):
    bench = _load(ROOT / "benchmarks" / "binning.py")
    out = tmp_path / "binning.json"
    data = bench.main(["--quick", "--repeat", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == data
    assert data["workload"] == "random" and data["entry_capacity"] >= 1024
    assert len(data["rows"]) == 16 and all(r["ms"] > 0 for r in data["rows"])


def test_capture_train_eval_example(tmp_path, capsys):
    """The capture -> train -> eval example at a tiny size; eval's PSNR of a held-out view is
    the one NumPy computes from `xprc render`'s float output and the view's image."""
    import warnings

    from xprc.cli import main as xprc
    from xprc.data.scene_folder import load_scene

    example = _load(ROOT / "examples" / "capture_train_eval.py")
    report = example.main(
        ["--out", str(tmp_path), "--size", "48x32", "--views", "8", "--objects", "10",
         "--points", "300", "--steps", "20", "--test-every", "4"]
    )  # fmt: skip
    assert [r["name"] for r in report["per_view"]] == ["view_000.jpg", "view_004.jpg"]
    assert report["lpips"].startswith("not computed")
    assert report["split_matches_training"] == "same" and report["test_every"] == 4
    psnrs = [r["psnr"] for r in report["per_view"]]
    assert report["mean"]["psnr"] == pytest.approx(np.mean(psnrs))
    assert all(np.isfinite(psnrs)) and all(0 < r["ssim"] <= 1 for r in report["per_view"])
    data, run = tmp_path / "capture", tmp_path / "run"
    split = ["--images", "images_4", "--test-every", "4"]
    out = str(tmp_path / "v.npy")
    assert xprc(["render", str(run), "--data", str(data), *split, "--view", "1", "-o", out]) == 0
    image = np.clip(np.load(tmp_path / "v.npy"), 0.0, 1.0)
    gt = load_scene(data, images="images_4", test_every=4)[1][1].image
    mse = np.mean((image.astype(np.float64) - gt) ** 2)
    assert report["per_view"][1]["psnr"] == pytest.approx(-10 * np.log10(mse), abs=1e-3)
    assert "held-out views: PSNR" in capsys.readouterr().out
    # another split than the training's: said, as the test views may have been trained on
    args = ["eval", str(run), "--data", str(data), "--images", "images_4", "--test-every", "3"]
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as outside pytest, which makes warnings errors
        assert xprc([*args, "-o", str(tmp_path / "e3.json")]) == 0
    assert "not those the run trained on" in capsys.readouterr().err
    assert json.loads((tmp_path / "e3.json").read_text())["split_matches_training"] == "different"
