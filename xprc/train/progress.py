"""The training progress display: tqdm's bar on a terminal; elsewhere (a log file, a pipe, a
cluster job's output) plain lines, since a bar redrawn with carriage returns becomes one huge
line in a file. Both show the run's `StepRate`, the one steps/s figure xprc prints."""

from __future__ import annotations

import sys
import time


class StepRate:
    """Training speed as xprc reports it everywhere (progress lines, the summary line, train.log,
    metrics.json, `TrainResult.steps_per_second`, the benchmarks): the steps this process ran
    after its first step, divided by the wall seconds from the end of that first step to the end
    of the last one (device work finished). The first step, which compiles the training step,
    is left out; what the loop does between steps is in (densification, the periodic test
    evaluations and checkpoints, callbacks). 0.0 when nothing was timed (one step or none).
    docs/training.md says the same."""

    def __init__(self) -> None:
        self.first_step: int | None = None
        self.first_time = 0.0
        self.steps = 0  # timed steps (after the first)
        self.seconds = 0.0

    def mark(self, step: int, now: float | None = None) -> None:
        """Step `step` has ended (`now`: its perf_counter time; default the present)."""
        now = time.perf_counter() if now is None else now
        if self.first_step is None:
            self.first_step, self.first_time = step, now
        else:
            self.steps, self.seconds = step - self.first_step, now - self.first_time

    @property
    def per_second(self) -> float:
        return self.steps / self.seconds if self.steps > 0 and self.seconds > 0 else 0.0


def format_rate(per_second: float) -> str:
    """A `StepRate.per_second` as every message shows it."""
    if per_second <= 0:
        return "steps/s not measured (it leaves out the first step, and only one ran)"
    return f"{per_second:.2f} steps/s"


LINES = 20  # plain lines per run (one per 5% of the steps), and at least every INTERVAL s
INTERVAL = 60.0


def progress_bar(total: int, initial: int, desc: str, rate: StepRate, file=None):
    """A tqdm bar on a terminal, else a `PlainProgress`; both with the methods the loop uses
    and showing `rate` (which the loop marks), so the last figure is the run's steps/s."""
    file = sys.stderr if file is None else file
    isatty = getattr(file, "isatty", None)
    if isatty is not None and isatty():
        return TerminalProgress(total, initial, desc, rate, file)
    return PlainProgress(total, initial, desc, rate, file)


class TerminalProgress:
    """tqdm's bar with `rate` in its postfix in place of tqdm's own (smoothed) it/s."""

    def __init__(self, total: int, initial: int, desc: str, rate: StepRate, file) -> None:
        from tqdm import tqdm

        fmt = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"
        self.bar = tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True, file=file,
                        bar_format=fmt)  # fmt: skip
        self.rate, self.postfix = rate, {}

    def set_postfix(self, refresh: bool = False, **values) -> None:
        del refresh
        self.postfix = values

    def update(self, n: int = 1) -> None:
        self._show()
        self.bar.update(n)

    def close(self) -> None:
        self._show()
        self.bar.refresh()
        self.bar.close()

    def _show(self) -> None:
        per_second = self.rate.per_second
        items = [format_rate(per_second)] if per_second > 0 else []
        items += [f"{k} {v}" for k, v in self.postfix.items()]
        self.bar.set_postfix_str(", ".join(items), refresh=False)


class PlainProgress:
    """`update`, `set_postfix` and `close` like tqdm's, printing whole lines: one each 5% of
    the steps or each INTERVAL seconds, whichever comes first, and the last step's at `close`
    (after the loop's last `rate.mark`, so it shows the run's final steps/s)."""

    def __init__(self, total: int, initial: int, desc: str, rate: StepRate, file) -> None:
        self.total, self.n, self.desc, self.file, self.rate = total, initial, desc, file, rate
        self.every = max(total // LINES, 1)
        self.last_t, self.last_n, self.postfix = time.perf_counter(), initial, {}

    def set_postfix(self, refresh: bool = False, **values) -> None:
        del refresh
        self.postfix = values

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.perf_counter()
        if self.n >= self.total:
            return  # the last step's line is close's
        if self.n // self.every > self.last_n // self.every or now - self.last_t >= INTERVAL:
            self._line(now)

    def close(self) -> None:
        if self.n != self.last_n:
            self._line(time.perf_counter())

    def _line(self, now: float) -> None:
        per_second = self.rate.per_second
        rate = f", {format_rate(per_second)}" if per_second > 0 else ""
        extra = "".join(f", {k} {v}" for k, v in self.postfix.items())
        pct = 100.0 * self.n / max(self.total, 1)
        print(f"{self.desc}: step {self.n:,}/{self.total:,} ({pct:.0f}%){rate}{extra}",
              file=self.file, flush=True)  # fmt: skip
        self.last_t, self.last_n = now, self.n
