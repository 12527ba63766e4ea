"""Training progress off a terminal: whole lines (a tqdm bar's carriage returns made one huge
line of a redirected log), one per 5% of the steps and one at the end, with the rate and the
loop's postfix; on a terminal, tqdm's bar."""

from __future__ import annotations

import io

from xprc.train import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_off_a_terminal():
    out = io.StringIO()
    bar = progress.progress_bar(200, 0, "train X", file=out)
    assert isinstance(bar, progress.PlainProgress)
    for step in range(1, 201):
        if step % 50 == 0:
            bar.set_postfix(loss="0.1000", psnr="20.00", refresh=False)
        bar.update(1)
    bar.close()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == 20  # each 10 steps of 200; the last is step 200 (close adds none)
    assert lines[0].startswith("train X: step 10/200 (5%), ") and "steps/s" in lines[0]
    assert lines[-1].startswith("train X: step 200/200 (100%)")
    assert lines[-1].endswith(", loss 0.1000, psnr 20.00")


def test_a_resumed_run_counts_from_its_step_and_close_says_the_last():
    out = io.StringIO()
    bar = progress.progress_bar(1000, 990, "train X", file=out)
    for _ in range(3):
        bar.update(1)
    bar.close()  # stopped early (a signal): the step it stopped at is said
    assert out.getvalue().splitlines()[-1].startswith("train X: step 993/1,000 (99%)")


def test_a_terminal_gets_the_bar():
    bar = progress.progress_bar(10, 0, "train X", file=_Terminal())
    try:
        assert not isinstance(bar, progress.PlainProgress)
        assert type(bar).__module__.startswith("tqdm")
    finally:
        bar.close()
