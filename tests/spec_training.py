"""Short training runs of a compiled spec on test_train's tiny scene (issue 14, done-when 4).

The scene (150 coloured Gaussians seen by 10 cameras at 32x32, 8 train and 2 test views) is the
one tests/test_train.py trains on; it is built once per process and shared by every spec test.
"""

from __future__ import annotations

import functools

from xprc import train as tr


@functools.cache
def tiny_scene():
    from test_train import _tiny_scene

    return _tiny_scene()


def train_spec(method, out, steps=300, **kw):
    """Train `method` on the tiny scene; returns (TrainResult, test-PSNR gain in dB)."""
    from test_train import _config

    train_set, test_set = tiny_scene()
    config = _config(steps=steps, eval_every=steps, checkpoint_every=0, **kw)
    result = tr.train(method, train_set, test_set, out, config)
    return result, result.metrics["psnr"] - result.initial_psnr


def spec_lines(path) -> int:
    """Non-blank, non-comment lines of a spec (what issue 14 limits to 40)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return sum(1 for line in lines if line)
