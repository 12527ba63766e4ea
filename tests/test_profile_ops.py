"""benchmarks/profile_ops.py (device time per XLA operation) and benchmarks/gather_layout.py
(gathers as rows and by column): the pieces that read a profile, checked on a real trace of this
machine, and the gather benchmark's own equality check on a small run."""

import json

import jax
import jax.numpy as jnp
from conftest import ROOT, import_file


def _profile_ops():
    return import_file(ROOT / "benchmarks" / "profile_ops.py", "bench_profile_ops")


def test_kinds_from_the_hlo_text_a_tpu_profile_names():
    """Operation names as a TPU profile gives them (HLO text, from the sixteenth session's
    JSON), and as a CPU trace gives them (bare names)."""
    kind_of = _profile_ops().kind_of
    said = {
        "%checked.1 = f32[4293,6,256]{2,1,0:T(8,128)} custom-call(s32[4294]{0:T(1024)}": "kernel",
        "%sort.16 = (s32[5242880]{0:T(1024)S(1)}, s32[5242880]{0:T(1024)}) sort(s32[": "sort",
        "%gather_fusion.25 = f32[5242880,10]{0,1:T(8,128)} fusion(f32[1000000,10]": "gather",
        "%scatter_custom_fusion.4 = s32[5242880]{0:T(1024)S(1)} fusion(s32[1000000]": "scatter",
        "%while.11 = (s32[]{:T(128)}, s32[11,5242880]{1,0:T(8,128)}, s32[5242880]{0": "other",
        "sort.0": "sort",
        "multiply_select_fusion": "other",
    }
    assert {op: kind_of(op) for op in said} == said


def test_op_times_read_a_trace_per_call(tmp_path):
    """A jitted sort and gather traced three times: the sort found with a positive device (here
    host) time and a whole number of events per call (a CPU trace may nest an operation's
    events), and the summary sorted by time."""
    bench = _profile_ops()
    x = jnp.arange(200_000, dtype=jnp.float32)[::-1]
    index = jnp.arange(0, 200_000, 7, dtype=jnp.int32)
    fn = jax.jit(lambda x, i: jnp.sort(x)[i] * 2.0).lower(x, index).compile()
    times = bench.profile(fn, (x, index), repeat=3)
    ops = times["ops"]
    assert ops, times["source"]
    kinds = {bench.kind_of(name) for name in ops}
    assert "sort" in kinds, sorted(ops)
    sort_ms, sort_count = next(v for k, v in ops.items() if bench.kind_of(k) == "sort")
    assert sort_ms > 0 and sort_count >= 1 and float(sort_count).is_integer()  # per call
    row = bench.summarise(times, top=5, width=40)
    ms = [op["ms"] for op in row["top_ops"]]
    assert ms == sorted(ms, reverse=True) and row["by_kind_ms"]["sort"] > 0
    assert all(len(op["op"]) <= 40 for op in row["top_ops"])


def test_gather_layout_quick_run_checks_every_form(tmp_path):
    bench = import_file(ROOT / "benchmarks" / "gather_layout.py", "bench_gather_layout")
    out = tmp_path / "gather_layout.json"
    bench.main(["--quick", "--repeat", "1", "--out", str(out)])
    cases = json.loads(out.read_text())["cases"]
    assert {c["what"] for c in cases} == {"permutation", "run ends", "lanes", "sort"}
    assert all(c["equal_to_rows"] for c in cases if c["what"] != "sort")
