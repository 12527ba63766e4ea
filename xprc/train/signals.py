"""Signals during training: SIGTERM, SIGINT and SIGHUP stop a run at the next step boundary
with a checkpoint (`StopRequest`); one that arrives while the stopped or finished run writes its
final outputs stops the writing cleanly (`StopSignal`). The command line then exits with
128 + the signal's number (`xprc.cli.train.exit_status`)."""

from __future__ import annotations

import signal
import threading

# the signals that stop a run at the next step boundary with a checkpoint (SIGHUP: a closed
# terminal or ssh session; not on every platform)
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)


class StopSignal(KeyboardInterrupt):
    """A stop signal that arrived while a stopped or finished run wrote its final outputs (the
    checkpoint already saved): the writing stops at once (each file is whole or absent, no
    `.tmp` left) and `train` raises this. `signum`: the signal."""

    def __init__(self, signum: int, step: int | None = None):
        self.signum = signum
        name = signal.Signals(signum).name
        at = f" (the checkpoint holds step {step})" if step is not None else ""
        super().__init__(
            f"{name} while the run's final outputs were written: they were left out{at}; "
            "--resume writes them"
        )


class StopRequest:
    """While active, STOP_SIGNALS only set `signal_name`; the loop stops at the next step
    boundary (handlers are installed from the main thread only). After `finishing(step)` (the
    checkpoint is saved) a stop signal raises StopSignal instead: a second SIGTERM from a
    scheduler whose grace period ends, or a first one while the outputs are written, stops the
    writing cleanly where the default action killed the process mid-file."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict = {}
        self._saved_step: int | None = None
        self._finishing = False

    @property
    def signal_name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    def _handle(self, signum, frame) -> None:
        del frame
        if self.signum is None:
            self.signum = signum
        if self._finishing:
            raise StopSignal(signum, self._saved_step)

    def finishing(self, saved_step: int | None) -> None:
        """From here a stop signal raises StopSignal (the checkpoint of `saved_step` is kept)."""
        self._saved_step = saved_step
        self._finishing = True

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        self._finishing = False
        for sig, old in self._old.items():
            signal.signal(sig, old)
