"""Run in a subprocess by test_train.py: trains the tiny scene, printing each finished step, so
the test can send SIGTERM mid-run. Usage: signal_check.py RUN_FOLDER"""

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


if __name__ == "__main__":
    main(sys.argv[1])
