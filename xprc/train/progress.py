"""The training progress display: tqdm's bar on a terminal; elsewhere (a log file, a pipe, a
cluster job's output) plain lines, since a bar redrawn with carriage returns becomes one huge
line in a file."""

from __future__ import annotations

import sys
import time

LINES = 20  # plain lines per run (one per 5% of the steps), and at least every INTERVAL s
INTERVAL = 60.0


def progress_bar(total: int, initial: int, desc: str, file=None):
    """A tqdm bar on a terminal, else a `PlainProgress` with the same methods the loop uses."""
    file = sys.stderr if file is None else file
    isatty = getattr(file, "isatty", None)
    if isatty is not None and isatty():
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True, file=file)
    return PlainProgress(total, initial, desc, file)


class PlainProgress:
    """`update`, `set_postfix` and `close` like tqdm's, printing whole lines: one each 5% of
    the steps or each INTERVAL seconds, whichever comes first, and one at the end."""

    def __init__(self, total: int, initial: int, desc: str, file) -> None:
        self.total, self.n, self.desc, self.file = total, initial, desc, file
        self.every = max(total // LINES, 1)
        self.start_n, self.start = initial, time.perf_counter()
        self.last_t, self.last_n, self.postfix = self.start, initial, {}

    def set_postfix(self, refresh: bool = False, **values) -> None:
        del refresh
        self.postfix = values

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.perf_counter()
        if self.n // self.every > self.last_n // self.every or now - self.last_t >= INTERVAL:
            self._line(now)

    def close(self) -> None:
        if self.n != self.last_n:
            self._line(time.perf_counter())

    def _line(self, now: float) -> None:
        done, spent = self.n - self.start_n, now - self.start
        rate = f", {done / spent:.2f} steps/s" if spent > 0 and done > 0 else ""
        extra = "".join(f", {k} {v}" for k, v in self.postfix.items())
        pct = 100.0 * self.n / max(self.total, 1)
        print(f"{self.desc}: step {self.n:,}/{self.total:,} ({pct:.0f}%){rate}{extra}",
              file=self.file, flush=True)  # fmt: skip
        self.last_t, self.last_n = now, self.n
