"""Run in a subprocess by the signal tests, so that a signal the trainer does not handle kills
this process, not the test's.

signal_check.py RUN_FOLDER: trains test_train.py's tiny scene through the Python API, printing
each finished step, so the test can send SIGTERM mid-run (test_train.py).

signal_check.py cli DATA RUN_FOLDER: `xprc train` on DATA through the CLI's `main`, sending
itself SIGTERM after step 2 and a second SIGTERM while `curves.png.tmp` is being written (a
scheduler's second signal), then exits with `main`'s status (test_train_hardening.py)."""

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import conftest  # noqa: E402, F401  (the tests' JAX configuration)
from test_train import METHOD, _tiny_scene, interrupt_config  # noqa: E402

from xprc import train as tr  # noqa: E402


def main(out: str) -> None:
    train_set, test_set = _tiny_scene()

    def callback(step, info):
        print(f"step {step}", flush=True)
        time.sleep(0.05)  # leave the test time to signal before the run ends

    result = tr.train(METHOD, train_set, test_set, out, interrupt_config(), callback=callback)
    print(f"done {result.step} interrupted={result.interrupted}", flush=True)


def cli(data: str, out: str) -> int:
    from xprc import plots
    from xprc.cli import main as xprc_main
    from xprc.train import loop

    advance, curves = loop.Run.advance, plots.training_curves

    def advance_then_signal(self):
        info = advance(self)
        if self.step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return info

    def curves_then_signal(dest, *args, **kwargs):
        curves(dest, *args, **kwargs)  # half of curves.png.tmp is on disk when ...
        os.kill(os.getpid(), signal.SIGTERM)  # ... the second SIGTERM arrives
        time.sleep(0.5)  # (delivered at the next bytecode: never reached with the fix)
        print("second SIGTERM not delivered", flush=True)

    loop.Run.advance = advance_then_signal
    plots.training_curves = curves_then_signal
    args = ["train", "--data", data, "--out", out, "--steps", "6", "--eval-every", "0",
            "--checkpoint-every", "0", "--capacity", "64"]  # fmt: skip
    return xprc_main(args)


if __name__ == "__main__":
    if sys.argv[1] == "cli":
        sys.exit(cli(sys.argv[2], sys.argv[3]))
    main(sys.argv[1])
