"""Figures quoted on more than one user page agree, and agree with their source.

Each fact below names where its value comes from (the JSON a benchmark wrote, or the code) and,
for each page that quotes it, a regular expression whose group captures the figure there. Every
match on a page must equal the source's value at the precision the page shows, and each listed
page must quote it at least once (so a reworded sentence fails here instead of escaping the
check). The dated developer logs in docs/dev/ are history and are not checked.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass

import pytest
from conftest import ROOT

BENCH = ROOT / "docs" / "benchmarks"


def _json(name: str) -> dict:
    return json.loads((BENCH / name).read_text())


def _tpu_rows() -> list[dict]:
    """The garden rows of docs/tpu.md's speed table: the sixteenth session's for the specs it
    measured with the kernels as they ship, the eighth's for the rest."""
    calls = _json("tpu-v5e-2026-12-07-sixteenth.json")["calls"]
    rows = [calls["5_garden_default"]["3dgs"], calls["2_profile_1m"]["3dgut_garden_doubling_64"],
            calls["4_permute_1m_rest_and_2dgs"]["2dgs_garden_doubling_64"]]  # fmt: skip
    data = _json("tpu-v5e-2026-12-06-eighth.json")
    older = data["stages_py_after"]["rows"] + data["stages_py_after_more_specs"]["rows"]
    done = {r["method"] for r in rows}
    return rows + [r for r in older if r["method"] not in done]


def _tpu_row(method: str) -> dict:
    return next(r for r in _tpu_rows() if r["method"] == method)


def _cpu(method: str) -> dict:
    return _json("cpu-2core-2026-12-04.json")["methods"][method]


def _demo_size() -> str:
    from xprc.train.demo import demo

    width, height = inspect.signature(demo).parameters["size"].default
    return f"{width}x{height}"


def _compile_range() -> str:
    times = [r[k] for r in _tpu_rows() for k in ("compile_fwd_s", "compile_grad_s")]
    return f"{int(min(times))} to {int(max(times) + 1)}"  # the range, widened to whole seconds


@dataclass(frozen=True)
class Fact:
    name: str
    source: object  # a callable giving the value (float or str), or None: pages agree only
    quotes: tuple[tuple[str, str], ...]  # (page, regex with one group)


def _mcmc_1m() -> dict:
    """The 1M MCMC run with the runs transpose on one TPU v5e (fifteenth session)."""
    return _json("tpu-v5e-2026-12-07-fifteenth.json")["calls"]["1_mcmc_1m"]["mcmc_1000000"]


def _view_1m() -> dict:
    """One 1296x840 view at 1M primitives, runs transpose, ms (fourteenth session)."""
    return _json("tpu-v5e-2026-12-07-fourteenth-transpose.json")["calls"][1]["stages_1m_runs"]


def _run_3m() -> dict:
    """The 3M MCMC run on one TPU v5e (second process, thirteenth session)."""
    run = _json("tpu-v5e-2026-12-07-thirteenth-3m.json")["mcmc_3m_second_process"]["result"]
    return run["phases"]["mcmc_3000000"]


def _peer_psnr(renderer: str, name: str = "cpu-2core-2026-12-07-peers.json") -> float:
    rows = _json(name)["rows"]
    return next(r for r in rows if r["renderer"] == renderer)["psnr db"]


MS = 1e3
FACTS = [
    Fact(
        "splax's PSNR against xprc on the garden frame, 2 CPU cores (benchmarks/peers.py)",
        lambda: _peer_psnr("splax"),
        (
            ("README.md", r"it gives splax (\d+\.\d) dB"),
            ("README.md", r"\(splax (\d+\.\d) dB, jax-gs"),
            ("docs/benchmarks.md", r"\| splax \| [\d.]+ \| [\d.]+ \| (\d+\.\d) dB \|"),
        ),
    ),
    Fact(
        "jax-gs's (TPU rasteriser) PSNR against xprc, 2 CPU cores (benchmarks/peers.py)",
        lambda: _peer_psnr("jax-gs tpu rasteriser"),
        (
            ("README.md", r"and jax-gs (\d+\.\d) dB there"),
            ("README.md", r"jax-gs (\d+\.\d) dB\) and their gradients"),
            (
                "docs/benchmarks.md",
                r"\| jax-gs, TPU rasteriser \| [\d.]+ \| [\d.]+ \| (\d+\.\d) dB",
            ),
        ),
    ),
    Fact(
        "jax-gs's (TPU rasteriser) PSNR, --tpu-default-dots, 2 CPU cores (benchmarks/peers.py)",
        lambda: _peer_psnr(
            "jax-gs tpu rasteriser", "cpu-2core-2026-12-07-peers-tpu-default-dots.json"
        ),
        (
            ("README.md", r"jax-gs gives (\d+\.\d) dB with NaN gradients, as on the TPU"),
            ("README.md", r"jax-gs gives the TPU's (\d+\.\d) dB and NaN gradients"),
            ("docs/benchmarks.md", r"\| jax-gs, TPU rasteriser \| (\d+\.\d) dB \| \d"),
        ),
    ),
    Fact(
        "jax-gs's standard rasteriser's PSNR against xprc, 2 CPU cores (benchmarks/peers.py)",
        lambda: _peer_psnr("jax-gs"),
        (
            (
                "docs/benchmarks.md",
                r"\| jax-gs, standard rasteriser \| [\d.]+ \| [\d.]+ \| (\d+\.\d) dB",
            ),
        ),
    ),
    Fact(
        "the demo's image size",
        _demo_size,
        (
            ("README.md", r"the demo's [\d,]+ primitives at (\d+x\d+)"),
            ("docs/tpu.md", r"views of (\d+x\d+)\)"),
        ),
    ),
    Fact(
        "first garden render in a fresh process, warm cache, TPU (s)",
        lambda: _json("tpu-v5e-3dgs-2026-12-06-third.json")["first_render_fresh_process"][
            "cache_warm"
        ]["total_s"],
        (
            ("README.md", r"first garden\s+render with a warm cache takes (\d+\.\d) s"),
            ("docs/tpu.md", r"first garden render, with the cache warm, takes \**(\d+\.\d) s"),
        ),
    ),
    Fact(
        "first garden render in a fresh process, cold cache, TPU (s)",
        lambda: _json("tpu-v5e-3dgs-2026-12-06-third.json")["first_render_fresh_process"][
            "cache_cold"
        ]["total_s"],
        (
            ("README.md", r"against (\d+\.\d) s with a cold one"),
            ("docs/tpu.md", r"\**(\d+\.\d) s\** with a cold cache"),
        ),
    ),
    Fact(
        "3DGS garden forward, TPU v5e (ms)",
        lambda: _tpu_row("3dgs")["forward_s"] * MS,
        (
            ("README.md", r"\| one TPU v5e \| (\d+\.\d) ms \|"),
            ("README.md", r"\| \*\*(\d+\.\d) ms\*\* \|"),
            ("docs/tpu.md", r"\| 3DGS \| \*\*(\d+\.\d)\*\* \|"),
            ("docs/tpu.md", r"\| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| (\d+\.\d) \| [\d.]+ \|"),
            ("docs/benchmarks.md", r"\(\[tpu\.md\]\(tpu\.md\):\s+(\d+\.\d) /"),
        ),
    ),
    Fact(
        "3DGS garden forward + backward, TPU v5e (ms)",
        lambda: _tpu_row("3dgs")["fwd_bwd_s"] * MS,
        (
            ("README.md", r"\| one TPU v5e \| [\d.]+ ms \| (\d+\.\d) ms \|"),
            ("docs/tpu.md", r"\| 3DGS \| \*\*[\d.]+\*\* \| \*\*(\d+\.\d)\*\* \|"),
            ("docs/benchmarks.md", r"\(\[tpu\.md\]\(tpu\.md\):\s+[\d.]+ / (\d+\.\d) ms\)"),
        ),
    ),
    Fact(
        "3DGUT's forward + backward over 3DGS's, TPU v5e",
        lambda: _tpu_row("3dgut")["fwd_bwd_s"] / _tpu_row("3dgs")["fwd_bwd_s"],
        (
            ("README.md", r"3DGUT's forward \+ backward is (\d+\.\d\d)x"),
            ("docs/tpu.md", r"\| 3DGUT \| [\d.]+ \| [\d.]+ \| (\d+\.\d\d)x \|"),
        ),
    ),
    Fact(
        "compile time per function of the shipped specs, TPU v5e (s)",
        _compile_range,
        (
            ("README.md", r"Compiling is slow on a TPU\*\*: (\d+ to \d+) s"),
            ("docs/tpu.md", r"takes (\d+ to \d+) s per function"),
        ),
    ),
    Fact(
        "3DGS garden forward, 2 CPU cores (s)",
        lambda: _cpu("3dgs")["forward_s"],
        (
            ("README.md", r"\| 2 CPU cores \(AMD EPYC\) \| (\d+\.\d+) s \|"),
            ("docs/benchmarks.md", r"takes (\d+\.\d+) s forward"),
            ("docs/benchmarks.md#On a 2-core CPU", r"\| 3dgs \|(?: [^|]+ \|){6} (\d+\.\d+) \|"),
        ),
    ),
    Fact(
        "3DGS garden forward + backward, 2 CPU cores (s)",
        lambda: _cpu("3dgs")["forward_backward_s"],
        (
            ("README.md", r"\| 2 CPU cores \(AMD EPYC\) \| [\d.]+ s \| (\d+\.\d+) s \|"),
            ("README.md", r"forward \+ backward takes (\d+\.\d+) s on\s+2 cores"),
            ("README.md", r"garden-sized forward \+\s+backward takes (\d+\.\d+) s"),
            ("docs/benchmarks.md", r"and (\d+\.\d+) s forward\+backward"),
            ("docs/benchmarks.md#On a 2-core CPU", r"\| 3dgs \|(?: [^|]+ \|){9} (\d+\.\d+) \|"),
        ),
    ),
    Fact(
        "3DGS garden forward / fwd+bwd, one H200 (ms)",
        lambda: _json("gpu-h200-2026-12-04.json")["methods"]["3dgs"]["forward_s"] * MS,
        (
            ("README.md", r"\| one NVIDIA H200 \| (\d+) ms \|"),
            ("docs/benchmarks.md", r"renders in (\d+) ms"),
        ),
    ),
    Fact(
        "3DGS garden forward + backward, one H200 (ms)",
        lambda: _json("gpu-h200-2026-12-04.json")["methods"]["3dgs"]["forward_backward_s"] * MS,
        (
            ("README.md", r"\| one NVIDIA H200 \| \d+ ms \| (\d+) ms \|"),
            ("docs/benchmarks.md", r"differentiates in (\d+) ms"),
        ),
    ),
    Fact(
        "3DGS's Pallas kernels against its XLA path on the TPU, garden image",
        lambda: _json("tpu-v5e-stages-2026-12-06.json")["check_3dgs_pallas_vs_xla"][
            "image_max_abs_diff"
        ],
        (
            ("README.md", r"XLA path to (\d\.\de-\d+) on the garden frame"),
            ("docs/tpu.md", r"XLA path's to\s+(\d\.\de-\d+) in the image"),
        ),
    ),
    Fact(
        "3DGS against its float64 NumPy twin",
        None,
        (
            ("README.md", r"\| 41 \| (\d\.\de-\d+) float64"),
            ("README.md", r"NumPy twin to (\d\.\de-\d+) in float64"),
        ),
    ),
    Fact(
        "xprc demo on one TPU v5e (steps/s)",
        None,
        (
            ("README.md", r"trained at (\d+\.\d) steps/s"),
            ("README.md", r"\| one TPU v5e \|[^\n]*\| (\d+\.\d) steps/s \|"),
            ("docs/tpu.md", r"trains at \**(\d+\.\d) steps/s"),
        ),
    ),
    Fact(
        "xprc demo on 2 CPU cores (steps/s)",
        None,
        (
            ("README.md", r"primitives, (\d+\.\d) steps/s -> demo_run"),
            ("README.md", r"\| 2 CPU cores \(AMD EPYC\) \|[^\n]*\| (\d+\.\d) steps/s \|"),
            ("docs/tpu.md", r"the (\d+\.\d) steps/s of an idle 2-core CPU"),
        ),
    ),
]

# Training at full scale on one TPU v5e: benchmarks/full_scale.py (JSON
# docs/benchmarks/tpu-v5e-2026-12-07-full-scale-*.json, written on the TPU machine): the pages
# must agree with each other.
FULL_SCALE = "docs/tpu.md#Training at full scale"
FACTS += [
    Fact(
        "full-scale training, a million primitives, one TPU v5e (steps/s)",
        lambda: _mcmc_1m()["steps_per_s_trainer"],
        (
            ("README.md", r"\| one TPU v5e \| (\d+\.\d+) steps/s \| [\d.]+ ms \|"),
            ("README.md", r"1296x840 views trains at (\d+\.\d+) steps/s"),
            ("README.md", r"\((\d+\.\d+) steps/s at a million primitives"),
            (FULL_SCALE, r"\*\*(\d+\.\d+) steps/s\*\*"),
            (FULL_SCALE, r"1 / (\d+\.\d+) ="),
        ),
    ),
    Fact(
        "full-scale training: 30,000 steps at that rate (hours)",
        None,
        (
            ("README.md", r"schedule would take about (\d+(?:\.\d)?) hours at that rate"),
            ("README.md", r"schedule would take\s+about (\d+(?:\.\d)?) hours \(gsplat"),
            ("README.md", r"about (\d+(?:\.\d)?) hours on one TPU v5e \(\d\.\d\d steps/s"),
            (FULL_SCALE, r"at that rate \| about (\d+(?:\.\d)?) hours"),
        ),
    ),
    Fact(
        "full-scale forward of one view, a million primitives, one TPU v5e (ms)",
        lambda: _view_1m()["forward_s"],
        (
            ("README.md", r"\| one TPU v5e \| [\d.]+ steps/s \| (\d+\.\d) ms \|"),
            (FULL_SCALE, r"million primitives: forward \| (\d+\.\d) ms"),
        ),
    ),
    Fact(
        "full-scale forward + backward of one view, a million primitives, one TPU v5e (ms)",
        lambda: _view_1m()["fwd_bwd_s"],
        (
            ("README.md", r"\| one TPU v5e \| [\d.]+ steps/s \| [\d.]+ ms \| (\d+\.\d) ms \|"),
            ("README.md", r"\((\d+\.\d) ms of its \d+[,)]"),
            (FULL_SCALE, r"forward \+ backward \| (\d+\.\d) ms"),
        ),
    ),
    Fact(
        "full-scale step, one TPU v5e (ms)",
        None,
        (("README.md", r"ms of its (\d+)[,)]"), (FULL_SCALE, r"= (\d+) ms\) is the render")),
    ),
    Fact(
        "full-scale checkpoint write (s)",
        None,
        (
            ("README.md", r"checkpoint is 709 MB in (\d+\.\d+) s"),
            (FULL_SCALE, r"709 MB in (\d+\.\d+) s"),
        ),
    ),
    Fact(
        "full-scale scene.ply write (s)",
        None,
        (
            ("README.md", r"248 MB in (\d+\.\d+) s"),
            (FULL_SCALE, r"248 MB in (\d+\.\d+) s"),
        ),
    ),
    Fact(
        "full-scale test PSNR after 200 steps (dB)",
        None,
        (
            ("README.md", r"test PSNR (\d+\.\d) dB there"),
            (FULL_SCALE, r"after 200 steps \| (\d+\.\d) dB"),
        ),
    ),
    Fact(
        "three million primitives: steps/s on one TPU v5e",
        lambda: _run_3m()["window_end"]["steps_per_s"],
        (
            ("README.md", r"but step at (\d+\.\d+) steps/s"),
            ("README.md", r"10 steps ran at (\d+\.\d+) steps/s"),
            ("docs/scale-out.md", r"three\s+million at (\d+\.\d+)"),
            (FULL_SCALE, r"\*\*fits\*\*: (\d+\.\d+) steps/s"),
        ),
    ),
    Fact(
        "three million primitives: peak device memory on one TPU v5e (GB)",
        lambda: _run_3m()["memory"]["peak_gb"],
        (
            ("README.md", r"fit \(peak (\d+\.\d) GB"),
            ("README.md", r"peak device memory (\d+\.\d) GB; the 30,000"),
            (FULL_SCALE, r"peak device memory (\d+\.\d) GB, entry capacity"),
        ),
    ),
    Fact(
        "camera refinement's rotation error, 3DGS on the demo scene, 64 / 128 / 256 px (deg)",
        None,
        (
            (
                "README.md",
                r"common pitch[^.]*?: (\d\.\d+ deg at 64x64, [\d.]+ at 128x128, [\d.]+ at 256x256)",
            ),
            (
                "docs/training.md",
                r"3DGS: (\d\.\d+ deg at 64x64, [\d.]+ at 128x128, [\d.]+ at 256x256)",
            ),
        ),
    ),
    Fact(
        "the default test run on 2 CPU cores (minutes)",
        None,
        (
            ("README.md", r"Run the tests \(about (\d+) minutes on 2 cores"),
            ("docs/testing.md", r"expect about (\d+) minutes on 2 CPU cores"),
        ),
    ),
]


def quoted(text: str, regex: str) -> list[str]:
    """The group of every match, its white space runs made one space; a space in `regex`
    matches any run of white space (a line break of the page's prose)."""
    return [" ".join(m.group(1).split()) for m in re.finditer(regex.replace(" ", r"\s+"), text)]


def section(page: str) -> str:
    """The text of `page`, or of its section when `page` is 'FILE#Heading' (up to the next
    heading of the same or a higher level)."""
    path, _, heading = page.partition("#")
    text = (ROOT / path).read_text()
    if not heading:
        return text
    m = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.M)
    assert m, f"{path}: no heading {heading!r}"
    end = re.compile(rf"^#{{1,{len(m.group(1))}}} ", re.M).search(text, m.end())
    return text[m.end() : end.start() if end else len(text)]


def agrees(shown: str, value) -> bool:
    """Whether a figure as a page shows it is `value` at the page's precision."""
    if isinstance(value, str):
        return shown == value
    if "e" in shown:  # scientific: the digits shown are significant digits
        mantissa = shown.split("e")[0]
        digits = len(mantissa.replace(".", "").lstrip("-")) - 1
        return float(shown) == float(f"{float(value):.{digits}e}")
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return float(shown) == round(float(value), decimals)


def disagreements(fact: Fact, read=section) -> list[str]:
    value = fact.source() if fact.source else None
    bad, seen = [], []
    for page, regex in fact.quotes:
        shown = quoted(read(page), regex)
        if not shown:
            bad.append(f"{page}: no quote of it (/{regex}/)")
        seen += [(page, s) for s in shown]
    if value is None and seen:
        value = seen[0][1]  # the pages must agree with each other
    bad += [f"{page}: {s}, not {value}" for page, s in seen if not agrees(s, value)]
    return bad


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: f.name)
def test_figure_agrees_everywhere(fact):
    assert disagreements(fact) == []


def test_disagreements_are_found():
    pages = {
        "a.md": "the demo trains on 200x200 views; it takes 1.90 s",
        "b.md": "views of 128x128, 1.9 s",
    }
    size = Fact("size", lambda: "128x128", (("a.md", r"on (\d+x\d+) views"),
                                            ("b.md", r"views of (\d+x\d+)")))  # fmt: skip
    assert disagreements(size, pages.__getitem__) == ["a.md: 200x200, not 128x128"]
    assert agrees("4.8e-7", 4.768e-7) and not agrees("4.7e-7", 4.768e-7)
    assert agrees("0.62", 0.6185) and not agrees("0.61", 0.6185) and agrees("67", 67.2)
    secs = Fact("s", lambda: 1.9013, (("a.md", r"takes (\d+\.\d+) s"),
                                      ("b.md", r"(\d+\.\d+) s")))  # fmt: skip
    assert disagreements(secs, pages.__getitem__) == []
    gone = Fact("gone", None, (("a.md", r"takes (\d+\.\d+) s"), ("b.md", r"missing (\d+)")))
    assert disagreements(gone, pages.__getitem__) == ["b.md: no quote of it (/missing (\\d+)/)"]
    pages["b.md"] = "takes 2.10 s"
    both = Fact("both", None, (("a.md", r"takes (\d+\.\d+) s"), ("b.md", r"takes (\d+\.\d+) s")))
    assert disagreements(both, pages.__getitem__) == ["b.md: 2.10, not 1.90"]
