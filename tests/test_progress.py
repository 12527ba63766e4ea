"""Training progress off a terminal: whole lines (a tqdm bar's carriage returns made one huge
line of a redirected log), one per 5% of the steps and one at the end, with the rate and the
loop's postfix; on a terminal, tqdm's bar. steps/s is one figure (`progress.StepRate`): the last
progress line, the summary line, train.log and metrics.json agree."""

from __future__ import annotations

import io
import json
import re

from xprc.train import progress


def _rate(per_step: float = 0.1) -> progress.StepRate:
    """A StepRate whose steps take `per_step` seconds each (marked by hand, no clock)."""
    rate = progress.StepRate()
    rate.mark(1, 0.0)
    rate.mark(11, 10 * per_step)
    return rate


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_off_a_terminal():
    out = io.StringIO()
    bar = progress.progress_bar(200, 0, "train X", _rate(), file=out)
    assert isinstance(bar, progress.PlainProgress)
    for step in range(1, 201):
        if step % 50 == 0:
            bar.set_postfix(loss="0.1000", psnr="20.00", refresh=False)
        bar.update(1)
    bar.close()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == 20  # each 10 steps of 200; the last, step 200, is close's
    assert lines[0].startswith("train X: step 10/200 (5%), 10.00 steps/s")
    assert lines[-1].startswith("train X: step 200/200 (100%)")
    assert lines[-1].endswith(", loss 0.1000, psnr 20.00")


def test_a_resumed_run_counts_from_its_step_and_close_says_the_last():
    out = io.StringIO()
    bar = progress.progress_bar(1000, 990, "train X", progress.StepRate(), file=out)
    for _ in range(3):
        bar.update(1)
    bar.close()  # stopped early (a signal): the step it stopped at is said
    assert out.getvalue().splitlines()[-1].startswith("train X: step 993/1,000 (99%)")


def test_a_terminal_gets_the_bar():
    out = _Terminal()
    bar = progress.progress_bar(10, 0, "train X", _rate(0.25), file=out)
    try:
        assert not isinstance(bar, progress.PlainProgress)
        assert type(bar.bar).__module__.startswith("tqdm")
        bar.update(1)
    finally:
        bar.close()
    assert "4.00 steps/s" in out.getvalue() and "it/s" not in out.getvalue()


def test_step_rate_leaves_out_the_first_step():
    rate = progress.StepRate()
    assert rate.per_second == 0.0
    rate.mark(5, 100.0)  # the end of the first step (a resumed run's: step 5)
    assert rate.per_second == 0.0
    assert progress.format_rate(rate.per_second).startswith("steps/s not measured")
    rate.mark(6, 100.5)
    rate.mark(9, 101.0)
    assert (rate.steps, rate.seconds, rate.per_second) == (4, 1.0, 4.0)
    assert progress.format_rate(rate.per_second) == "4.00 steps/s"


def test_printed_summary_metrics_and_last_progress_line_agree(tmp_path, capsys):
    """A short run with its first step (the compile) far slower than the rest: each place
    steps/s is shown gives the same figure (they gave 9.92 and 11.2 in one run of issue 42)."""
    from test_train import METHOD, _config, _tiny_scene

    from xprc import train as tr
    from xprc.cli.train import report

    config = _config(steps=8, eval_every=0, checkpoint_every=0, save_renders=False,
                     log_every=1, progress=True)  # fmt: skip
    result = tr.train(METHOD, *_tiny_scene(), tmp_path, config)
    report(result)
    out, err = capsys.readouterr()
    number = r"([0-9]+\.[0-9]{2}) steps/s"
    # the last progress line (notes on the written files may follow it)
    last = [ln for ln in err.strip().splitlines() if ln.startswith("train ")][-1]
    figures = {
        "last progress line": re.search(number, last).group(1),
        "summary line": re.search(number, out).group(1),
        "train.log": re.findall(number, (tmp_path / "train.log").read_text())[-1],
    }
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["timed_steps"] == 7  # the first of 8 steps left out
    # timed_seconds is written to the millisecond: the rate lies between the bounds it allows
    seconds = metrics["timed_seconds"]
    low, high = (metrics["timed_steps"] / (seconds + d) for d in (5e-4, -5e-4))
    assert low - 1e-3 <= metrics["steps_per_second"] <= high + 1e-3
    assert f"{result.steps_per_second:.3f}" == f"{metrics['steps_per_second']:.3f}"
    shown = f"{result.steps_per_second:.2f}"
    assert figures == dict.fromkeys(figures, shown)
    # training_seconds is another figure, the whole loop, first step included
    assert metrics["training_seconds"] > metrics["timed_seconds"]
