"""The device memory a training step takes, estimated before it is compiled, and the check that
refuses a run whose step would not fit, with the numbers (issue 39: MCMC at capacity 3M on a TPU
v5e stopped at its first step with XLA's "17.95G of temporaries exceeds 15.75G of HBM", after a
minute of compiling, because nothing had added the step up before).

The estimate adds what XLA counts for the compiled step (`memory_analysis()`: arguments,
outputs, temporaries) and the state the trainer holds besides:
  state:   the primitives' parameters (float32 numbers) with Adam's two moments, in and out
           (the step does not donate them: the trainer may redo a step from its input), and
           the state the trainer holds while the step queued after it runs (`Run.advance`): 9
           copies, exact.
  images:  the views on the device, exactly (uint8 or float32 as stacked).
  temporaries: the larger of the render's phase, ENTRY_BYTES per entry of the capacity (on a
           TPU nearly all of it the compositor's chunks and their cotangents, padded to 128
           lanes in the chip's memory) plus PIXEL_BYTES per pixel of the view (image-sized
           values of the render and the loss), and the update's phase, PRIM_BYTES per primitive
           (gradients, Adam, the strategy's relocation): the render's buffers are gone when the
           update runs.
The bytes per item were fitted to `memory_analysis()` of the step (3DGS MCMC on 1296x840 views)
compiled on a CPU at several sizes (an upper bound within 1.5x at 1M and 3M primitives) and
compiled ahead of time for a TPU v5e at 3M primitives, 16,777,216 entries (XLA: 13.6 GB,
estimate 15.9 GB with the trainer's held state of 2.1 GB; docs/tpu.md "Training at full
scale", benchmarks/step_memory.py); tests/test_step_memory.py checks the estimate against
`memory_analysis()` at a small size.
"""

from __future__ import annotations

import math
import os

from ..memory import physical_memory, size_text
from ..method_info import MethodInfo
from ..pipeline.capacity import BUDGET_ENV, device_memory_limit, parse_bytes
from .config import TrainError

# parameters and Adam's two moments (3 arrays), in, out and held by the trainer: 9 (not
# init.STATE_COPIES, the lower bound the earlier state check uses before anything is allocated)
STEP_STATE_COPIES = 3 * 3
# temporaries per primitive, per entry and per pixel, by backend (others: the CPU's)
PRIM_BYTES = {"cpu": 400, "tpu": 700}
ENTRY_BYTES = {"cpu": 450, "tpu": 530}
PIXEL_BYTES = {"cpu": 1500, "tpu": 200}


def estimate_step(method, capacity: int, entries: int, size, image_bytes: int,
                  platform: str | None = None) -> dict:  # fmt: skip
    """{"state", "temporaries", "images", "total"}: bytes a training step of `capacity`
    primitives with an entry capacity of `entries` on views of `size` (width, height) takes on
    a device of `platform` ("tpu", "cpu", ...; None: JAX's default backend); image_bytes: the
    views stacked on the device (training and test)."""
    if platform is None:
        import jax

        platform = jax.default_backend()
    kind = platform if platform in PRIM_BYTES else "cpu"
    numbers = sum(math.prod(p.shape) for p in MethodInfo.of(method).params)
    render = entries * ENTRY_BYTES[kind] + int(size[0]) * int(size[1]) * PIXEL_BYTES[kind]
    parts = {
        "state": capacity * STEP_STATE_COPIES * 4 * numbers,
        "temporaries": max(render, capacity * PRIM_BYTES[kind]),
        "images": int(image_bytes),
    }
    parts["total"] = sum(parts.values())
    return parts


def device_budget() -> tuple[int | None, str]:
    """(bytes, what they are) a training step may take: XPRC_MEMORY_BUDGET when set, else the
    device's memory limit where its backend reports one (a TPU, a GPU), else the machine's
    physical memory (a CPU); None where none is known."""
    env = os.environ.get(BUDGET_ENV)
    if env is not None:
        return parse_bytes(env, BUDGET_ENV), f"the memory budget ({BUDGET_ENV})"
    limit = device_memory_limit()
    if limit is not None:
        import jax

        device = jax.devices()[0]
        return limit, f"the {size_text(limit)} of {device.device_kind} {device.id}"
    total = physical_memory()
    return total, f"the {size_text(total)} of this machine" if total else "unknown"


def check_step_memory(method, capacity: int, entries: int, size, image_bytes: int,
                      budget: tuple[int | None, str] | None = None,
                      platform: str | None = None) -> dict:  # fmt: skip
    """The estimate (`estimate_step` on `platform`); a TrainError before anything is compiled
    when it is over `budget` (bytes, what they are; default `device_budget()`), with its parts
    and the capacity that would fit."""
    have, where = budget if budget is not None else device_budget()
    est = estimate_step(method, capacity, entries, size, image_bytes, platform)
    if have is None or est["total"] <= have:
        return est
    # the capacity that fits: all but the images grow with it (entries per primitive as now)
    per = (est["total"] - est["images"]) / max(capacity, 1)
    fits = int(max(have - est["images"], 0) // per) if per else 0
    w, h = int(size[0]), int(size[1])
    ways = [f"give a capacity of at most about {fits:,} (--capacity)"] if fits else []
    ways += ["train on smaller images (--images images_8, --downscale)",
             f"set {BUDGET_ENV} to try anyway"]  # fmt: skip
    raise TrainError(
        f"the training step at capacity {capacity:,} primitives with {entries:,} (primitive, "
        f"tile) entries on {w}x{h} views needs about {size_text(est['total'])} of device memory "
        f"(parameters and optimiser state {size_text(est['state'])}, the render's or the "
        f"update's temporaries {size_text(est['temporaries'])}, the views "
        f"{size_text(est['images'])}), over {where}; " + ", ".join(ways[:-1]) + " or " + ways[-1]
    )
