"""The trainer queues each step before it reads the numbers of the step before (issue 39: no host
round trip per step). The run must equal one that reads every step before dispatching the next,
including a step redone with a larger capacity while the step after it was already queued."""

from __future__ import annotations

import jax
import numpy as np
from test_train import METHOD, _config, _tiny_scene

from xprc import train as tr
from xprc.pipeline import RenderConfig
from xprc.train.loop import Run
from xprc.train.step import step_fn

STEPS = 4


def test_queued_steps_change_nothing_even_when_a_step_is_redone():
    train_set, test_set = _tiny_scene()
    # a capacity far too small for the scene: the first step drops entries and is redone
    cfg = _config(steps=STEPS, eval_every=0, checkpoint_every=0, log_every=1,
                  render=RenderConfig(max_entries=64))  # fmt: skip
    seen = []

    def callback(step, info):
        seen.append((step, float(info["loss"])))

    result = tr.train(METHOD, train_set, test_set, None, cfg, callback=callback)

    # The reference: every step read on the host before the next is dispatched.
    run = Run(METHOD, train_set, test_set, None, cfg, 1)
    state, raised, losses = run.state, 0, []
    for step in range(STEPS):
        while True:
            view = run.order.views(step, 1)
            new, info = step_fn(run.step_key())(state, run.data, run.hyper, view)
            info = jax.device_get(info)
            if int(info["dropped"]) == 0:
                break
            run.capacity.grow(int(info["entries_needed"]), step + 1, "train")
            raised += 1
        state = new
        losses.append((step + 1, float(info["loss"])))
    assert raised >= 1  # the redo ran, with the next step already queued in the trainer
    assert result.entry_capacity == run.capacity.bucket > 64
    assert seen == losses  # each step's numbers reach the callback once, in order
    for name, value in state["params"].items():
        np.testing.assert_array_equal(result.params[name], np.asarray(value), err_msg=name)

    # After a step is accepted, the one after it is already on the device, unread.
    fresh = Run(METHOD, train_set, test_set, None, cfg, 1)
    fresh.capacity.bucket = run.capacity.bucket
    fresh.advance()
    assert fresh.ahead is not None and int(fresh.ahead[1]["step"]) == fresh.step + 1 == 2
