"""`prepare_params`: a raw parameter dict checked against the method's table (render and the
entry count both start here)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from ..errors import XprError
from ..method_info import MethodInfo


def not_numbers(name: str, value) -> str | None:
    """Why parameter `value` is not an array of real numbers (text, bytes, objects, a group of
    arrays), or None when it is."""
    kind = getattr(value, "dtype", None)
    if kind is not None and kind.kind in "biuf":
        return None
    if kind is None and not isinstance(value, dict):  # a list or a number: jnp.asarray says
        return None
    shown = kind if kind is not None else "a group of arrays"
    return f"parameter '{name}' holds {shown}, not real numbers"


def prepare_params(method, params: dict) -> dict:
    """Check a raw parameter dict against the method's table; pad short SH with zeros.
    `method`: a method module or its MethodInfo."""
    info = MethodInfo.of(method)
    table = info.param_table
    if not isinstance(params, Mapping):
        raise XprError(
            f"parameters must be a dict of arrays keyed by name ({', '.join(table)}), got "
            f"{type(params).__name__}"
        )
    missing = [name for name in table if name not in params]
    if missing:
        raise XprError(
            f"parameters missing for {info.name}: {', '.join(missing)} "
            f"(expected {', '.join(table)})"
        )
    extra = [name for name in params if name not in table]
    if extra:
        raise XprError(f"unknown parameters for {info.name}: {', '.join(extra)}")
    out = {}
    n = None
    for name, spec in table.items():
        problem = not_numbers(name, params[name])
        if problem:  # (jnp.asarray of text is a TypeError traceback)
            raise XprError(problem)
        arr = jnp.asarray(params[name])
        if not jnp.issubdtype(arr.dtype, jnp.floating):  # (an activation's TypeError in JAX)
            raise XprError(
                f"parameter '{name}' holds {arr.dtype}: raw parameters are floating point "
                "(float32, or float64 with jax_enable_x64)"
            )
        want = tuple(spec.shape)
        expected = "[" + ", ".join(["N", *map(str, want)]) + "]"  # [N] for a scalar
        if arr.ndim != len(want) + 1:
            raise XprError(f"parameter '{name}' has shape {tuple(arr.shape)}, expected {expected}")
        if n is None:
            n = arr.shape[0]
        elif arr.shape[0] != n:
            raise XprError(f"parameter '{name}' has {arr.shape[0]} primitives, others have {n}")
        got = tuple(arr.shape[1:])
        if got != want:
            square = got[0] >= 1 and round(got[0] ** 0.5) ** 2 == got[0] if got else False
            if spec.kind == "sh" and got[1:] == want[1:] and got[0] < want[0] and square:
                # a lower SH degree: (degree + 1)^2 coefficients, the higher bands zero
                pad = [(0, 0), (0, want[0] - got[0])] + [(0, 0)] * (len(want) - 1)
                arr = jnp.pad(arr, pad)
            else:
                sh = spec.kind == "sh" and got and not square
                why = f" ({got[0]} SH coefficients: not (degree + 1)^2, at least 1)" if sh else ""
                raise XprError(
                    f"parameter '{name}' has shape {tuple(arr.shape)}, expected {expected}{why}"
                )
        out[name] = arr
    return out


class SplitParam:
    """A parameter [N, *shape] whose components a generated `project` reads one at a time
    (`raw['sh'][..., k, c]`): split once by `jnp.split`, so that its gradient is one
    concatenation of the components' cotangents. Read by plain indexing, the gradient is one
    zero-padded copy of the whole parameter per component, summed: a CPU kept about 35 of the
    48 copies of a 3DGS scene's SH [N, 16, 3] alive at once (6.7 GB at 1M primitives,
    docs/tpu.md "Training at full scale"). Any other use reads the array itself."""

    def __init__(self, value):
        self.value = value
        self.shape, self.dtype, self.ndim = value.shape, value.dtype, value.ndim
        self._parts = None

    def __getitem__(self, index):
        comp = index[1:] if isinstance(index, tuple) and index[:1] == (Ellipsis,) else None
        if comp is None or len(comp) != self.ndim - 1 or not all(type(i) is int for i in comp):
            return self.value[index]
        if self._parts is None:
            flat = self.value.reshape(self.shape[0], -1)
            self._parts = [p[:, 0] for p in jnp.split(flat, flat.shape[1], axis=1)]
        return self._parts[int(np.ravel_multi_index(comp, self.shape[1:]))]

    def __jax_array__(self):
        return self.value


def split_params(method, params: dict) -> dict:
    """`params` with each parameter of several components per primitive as a `SplitParam`, for
    a generated module's `project` (it has SPEC_FILE: it reads them only by component); a
    hand-written one gets them as they are."""
    if not isinstance(getattr(method, "SPEC_FILE", None), str):
        return params
    return {k: SplitParam(v) if v.ndim >= 2 and math.prod(v.shape[1:]) > 1 else v
            for k, v in params.items()}  # fmt: skip
