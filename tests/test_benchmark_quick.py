"""`python benchmarks/run.py --quick` is a smoke run that says so (issue 42): one spec, no dense
baseline or scaling sweep, its own output file so the full run's figures are never replaced.
(tests/test_examples.py runs it.)"""

from conftest import ROOT, import_file


def _runner():
    return import_file(ROOT / "benchmarks" / "run.py", "bench_run")


def test_quick_defaults_to_one_spec_and_its_own_file():
    bench = _runner()
    quick = bench.options(["--quick"])
    assert quick.methods == "3dgs"
    assert quick.out == str(ROOT / "benchmarks" / "results" / "quick.json")
    full = bench.options([])
    assert full.methods.split(",") == ["handwritten", *bench.SPECS]
    assert full.out == str(ROOT / "benchmarks" / "results" / "latest.json")
    assert bench.options(["--quick", "--methods", "handwritten,3dgs"]).methods == "handwritten,3dgs"
    assert bench.QUICK.startswith("--quick is a smoke run") and "not a measurement" in bench.QUICK


def test_the_docs_quote_the_quick_runs_cpu_time_as_the_runner_says_it():
    """docs/benchmarks.md and the runner's own QUICK note give one figure for --quick."""
    import re

    bench = _runner()
    said = re.search(r"about (\d+) CPU seconds", bench.QUICK).group(1)
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    assert re.findall(r"`quick\.json` \(about (\d+) CPU seconds", docs) == [said]
