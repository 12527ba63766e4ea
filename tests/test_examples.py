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
