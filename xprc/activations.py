"""Inverse activations: the raw parameter value whose activation is a given value.

Each inverse is written once, against an array namespace `xp` (NumPy for float64 initialisation
and test scenes, jax.numpy inside the trainer's traced step). `abs`, `relu` and `normalize` are
inverted on their canonical branch (non-negative values, unit vectors): the identity.

Clip policy: a value is first clipped into the activation's range, short of the bounds where the
inverse is infinite: sigmoid to [1e-8, 1 - 1e-7], tanh to [-1 + 1e-7, 1 - 1e-7], exp and
softplus to at least 1e-30. The margin at 1 is 1e-7 because float32 cannot hold a value much
closer to 1 (its spacing there is 6e-8); 1e-8 is the opacity the trainer gives a dead primitive.
"""

from __future__ import annotations

import numpy as np

SIGMOID_RANGE = (1e-8, 1.0 - 1e-7)
TANH_LIMIT = 1.0 - 1e-7
POSITIVE_FLOOR = 1e-30


def _logit(v, xp):
    v = xp.clip(v, *SIGMOID_RANGE)
    return xp.log(v) - xp.log1p(-v)


def _same(v, xp):
    return v


INVERSES = {
    "identity": _same,
    "sigmoid": _logit,
    "exp": lambda v, xp: xp.log(xp.maximum(v, POSITIVE_FLOOR)),
    "softplus": lambda v, xp: xp.log(xp.expm1(xp.maximum(v, POSITIVE_FLOOR))),
    "tanh": lambda v, xp: xp.arctanh(xp.clip(v, -TANH_LIMIT, TANH_LIMIT)),
    "abs": _same,
    "relu": _same,
    "normalize": _same,
}


def inverse(activation: str, value, xp=np):
    """Raw value whose `activation` is `value` (clipped as the module says); KeyError for an
    activation not in INVERSES."""
    return INVERSES[activation](value, xp)
