"""benchmarks/compile_aot.py: the abstract inputs it compiles for, and its one-line refusals
(the compiles themselves are timed by running it: they take a minute on a TPU's compiler)."""

import jax
import numpy as np
import pytest
from conftest import ROOT, import_file

from xprc.compiler.driver import load


@pytest.fixture(scope="module")
def bench():
    return import_file(ROOT / "benchmarks" / "compile_aot.py", "bench_compile_aot")


def test_abstract_inputs_have_the_garden_sizes_and_every_parameter(bench):
    method = load(ROOT / "specs" / "3dgs.xpr")
    n, _, w, h = bench.GARDEN
    params, cam = bench.abstract_inputs(method, bench.GARDEN, None)
    assert set(params) == {"means", "scales", "quats", "opacities", "sh"}
    assert params["sh"].shape == (n, 16, 3) and params["opacities"].shape == (n,)
    assert all(p.dtype == np.float32 for p in params.values())
    assert (cam.width, cam.height) == (w, h)
    leaves = jax.tree_util.tree_leaves(cam)
    assert leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)


def test_tpu_without_libtpu_is_a_one_line_refusal(bench, monkeypatch):
    monkeypatch.setattr(bench, "tpu_device", lambda: (None, "RuntimeError: no libtpu"))
    with pytest.raises(SystemExit) as e:
        bench.main(["--tpu", "--specs", "3dgs"])
    assert "cannot compile for a TPU v5e here (RuntimeError: no libtpu)" in str(e.value)
    assert "\n" not in str(e.value)


def test_unknown_spec_is_a_one_line_refusal(bench, tmp_path):
    with pytest.raises(SystemExit) as e:
        bench.main(["--quick", "--specs", "nope", "--out", str(tmp_path / "o.json")])
    assert "unknown spec 'nope'" in str(e.value)


def test_step_memory_tpu_without_libtpu_is_a_one_line_refusal(monkeypatch):
    # (importing the script puts the checkout on sys.path, as running it does)
    step_memory = import_file(ROOT / "benchmarks" / "step_memory.py", "bench_step_memory")
    import benchmarks.compile_aot as aot

    monkeypatch.setattr(aot, "tpu_device", lambda: (None, "RuntimeError: no libtpu"))
    with pytest.raises(SystemExit) as e:
        step_memory._tpu_sharding()
    assert "cannot compile for a TPU v5e here (RuntimeError: no libtpu)" in str(e.value)
