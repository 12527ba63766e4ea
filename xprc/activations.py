"""Inverse activations: the raw parameter value whose activation is a given value.

Each inverse is written once, against an array namespace `xp` (NumPy for float64 initialisation
and test scenes, jax.numpy inside the trainer's traced step). `abs`, `relu` and `normalize` are
inverted on their canonical branch (non-negative values, unit vectors): the identity.

Clip policy: a value is first clipped into the activation's range, short of the bounds where the
inverse is infinite: sigmoid to [1e-8, 1 - 1e-7], tanh to [-1 + 1e-7, 1 - 1e-7], exp and
softplus to at least 1e-30. The margin at 1 is 1e-7 because float32 cannot hold a value much
closer to 1 (its spacing there is 6e-8); 1e-8 is the opacity the trainer gives a dead primitive.
The clip is for values from data (point colours, neighbour distances); a number the spec writes
(`init 2` on `sigmoid(raw)`) is checked by the compiler with `init_problem` instead, so the
user's number is never changed in silence.
"""

from __future__ import annotations

import math

import numpy as np

SIGMOID_RANGE = (1e-8, 1.0 - 1e-7)
TANH_LIMIT = 1.0 - 1e-7
POSITIVE_FLOOR = 1e-30


def _logit(v, xp):
    v = xp.clip(v, *SIGMOID_RANGE)
    return xp.log(v) - xp.log1p(-v)


def _same(v, xp):
    return v


def _softplus_inverse(v, xp):
    # log(expm1(v)) written so it stays finite past v = 709 (where expm1 overflows float64)
    return v + xp.log(-xp.expm1(-v))


INVERSES = {
    "identity": _same,
    "sigmoid": _logit,
    "exp": lambda v, xp: xp.log(xp.maximum(v, POSITIVE_FLOOR)),
    "softplus": lambda v, xp: _softplus_inverse(xp.maximum(v, POSITIVE_FLOOR), xp),
    "tanh": lambda v, xp: xp.arctanh(xp.clip(v, -TANH_LIMIT, TANH_LIMIT)),
    "abs": _same,
    "relu": _same,
    "normalize": _same,
}


def inverse(activation: str, value, xp=np):
    """Raw value whose `activation` is `value` (clipped as the module says); KeyError for an
    activation not in INVERSES."""
    return INVERSES[activation](value, xp)


# The values each activation gives from finite raw values, per component: (low, high, whether
# low is reached, whether high is reached). normalize is checked on its own (unit vectors).
RANGES = {
    "identity": (-math.inf, math.inf, False, False),
    "sigmoid": (0.0, 1.0, False, False),
    "exp": (0.0, math.inf, False, False),
    "softplus": (0.0, math.inf, False, False),
    "tanh": (-1.0, 1.0, False, False),
    "abs": (0.0, math.inf, True, False),
    "relu": (0.0, math.inf, True, False),
}
# Where `inverse` clips (the policy above): values outside are changed.
CLIPS = {
    "sigmoid": SIGMOID_RANGE,
    "tanh": (-TANH_LIMIT, TANH_LIMIT),
    "exp": (POSITIVE_FLOOR, math.inf),
    "softplus": (POSITIVE_FLOOR, math.inf),
}


def _interval(lo, hi, lo_in, hi_in) -> str:
    if hi == math.inf:
        return f"{'>=' if lo_in else '>'} {lo:.8g}"
    return f"{'[' if lo_in else '('}{lo:.8g}, {hi:.8g}{']' if hi_in else ')'}"


def init_problem(activation: str, value: float, size: int = 1) -> tuple[str, str] | None:
    """Why a numeric init would not start a parameter at `value` (the activated value of each of
    its `size` components) through `inverse`: None when it would; ("unreachable", why) when no
    finite raw value gives `value`; ("clipped", why) when one does but `inverse` clips it. `why`
    describes the activation's values. An activation not in INVERSES: None."""
    if activation == "normalize":  # the inverse is the identity: raw (v, ..., v)
        unit = 1.0 / math.sqrt(size)
        if value == 0 or math.isclose(abs(value), unit, rel_tol=1e-6):
            return None
        kind = "a unit vector" if size > 1 else "a unit scalar"
        return "unreachable", (
            f"it gives {kind}: equal components are {unit:g} or {-unit:g} (or all 0)"
        )
    if activation not in RANGES:
        return None
    lo, hi, lo_in, hi_in = RANGES[activation]
    inside = (lo < value or (lo_in and value == lo)) and (value < hi or (hi_in and value == hi))
    if not inside:
        return "unreachable", f"its values are {_interval(lo, hi, lo_in, hi_in)}"
    clip_lo, clip_hi = CLIPS.get(activation, (-math.inf, math.inf))
    if not clip_lo <= value <= clip_hi:
        clipped = min(max(value, clip_lo), clip_hi)
        return "clipped", (
            f"the trainer's inverse of {activation} takes values "
            f"{_interval(clip_lo, clip_hi, True, clip_hi < math.inf)} and would start it at "
            f"{clipped:.8g}"
        )
    return None
