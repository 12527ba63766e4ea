"""What the trainer knows about a method: its parameters' roles and activations, from the spec.

Roles come only from the spec's `role` annotations (`ParamSpec.role`): no parameter is guessed
from its name or shape. A strategy that needs a role the spec does not declare, or an activation
the trainer cannot invert, stops the run with a `TrainError` naming the method and parameter,
located at the parameter's declaration (or the `primitive` line) in the spec file when the
module was loaded from one (`xprc.load` records `SPEC_PATH`) that still has the compiled text.
"""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..activations import INVERSES, inverse
from ..conventions import PARAM_ROLES
from ..errors import XprError
from ..method_info import MethodInfo
from .config import TrainError


def shape_of(spec) -> tuple:
    return tuple(spec.shape)


def is_scalar(spec) -> bool:
    return shape_of(spec) in ((), (1,))


def sh_degree(spec) -> int | None:
    if spec.kind != "sh":
        return None
    if getattr(spec, "degree", None) is not None:
        return int(spec.degree)
    return round(math.sqrt(shape_of(spec)[0])) - 1


def param_roles(method) -> dict[str, str | None]:
    """{role: parameter name or None} from the spec's `role` annotations."""
    roles: dict[str, str | None] = dict.fromkeys(PARAM_ROLES)
    for s in MethodInfo.of(method).params:
        role = getattr(s, "role", None)
        if role in roles and roles[role] is None:
            roles[role] = s.name
    return roles


def spec_by_name(method) -> dict:
    return MethodInfo.of(method).param_table


def where(method, name: str | None = None) -> str:
    """How an error names a method (and one of its parameters)."""
    label = f"method {MethodInfo.of(method).name}"
    return label if name is None else f"parameter '{name}' of {label}"


def spec_location(method, name: str | None = None) -> dict:
    """TrainError location of parameter `name`'s declaration (None: the `primitive` line) in
    the spec the module was loaded from: {path, line, column, source_line}, or {} when the
    module has no spec file, the file's text is no longer the compiled one (its sha256 differs)
    or the declaration is in a base spec (`extends`)."""
    info = MethodInfo.of(method)
    path = info.spec_path
    if path is None:
        return {}
    from ..compiler import ast
    from ..compiler.driver import read_spec, spec_digest
    from ..compiler.parse import parse

    try:  # read as the compiler read it (a byte-order mark, lone CRs)
        text = read_spec(Path(path))
    except XprError:
        return {}

    if spec_digest(text, path) != info.spec_sha256:
        return {}

    spec = parse(text, str(path))  # the text compiled, so it parses
    want = ast.Primitive if name is None else ast.Param
    for item in spec.items:
        if isinstance(item, want) and (name is None or item.name == name):
            line, col = item.loc.line, item.loc.column
            return {"path": path, "line": line, "column": col,
                    "source_line": spec.source_line(line)}  # fmt: skip
    return {}


def require_roles(method, needed: tuple[str, ...], why: str) -> dict[str, str]:
    """The roles `needed` by `why` (e.g. "strategy 'mcmc'"); TrainError naming the missing one,
    located at the spec's `primitive` line."""
    roles = param_roles(method)
    for role in needed:
        if roles[role] is None:
            raise TrainError(
                f"{where(method)}: {why} needs a parameter with `role {role}`; annotate its "
                f"`param` line in the spec (e.g. `param o : scalar = sigmoid(raw) role {role}`)",
                **spec_location(method),
            )
    return {r: roles[r] for r in needed}


# ----------------------------------------------------------------------------- activations


def invertible(spec) -> bool:
    return spec.activation in INVERSES


def check_invertible(method, name: str, why: str) -> None:
    spec = spec_by_name(method)[name]
    if not invertible(spec):
        raise TrainError(
            f"{where(method, name)}: activation {spec.activation!r} cannot be inverted, which "
            f"{why} needs (invertible: {', '.join(sorted(INVERSES))})",
            **spec_location(method, name),
        )


def inverse_np(method, spec, value) -> np.ndarray:
    """Raw float64 value whose activation is `value`; TrainError for a non-invertible one."""
    if not invertible(spec):
        check_invertible(method, spec.name, "initialisation from an activated value")
    return inverse(spec.activation, np.asarray(value, np.float64))


def inverse_jnp(spec, value: jax.Array) -> jax.Array:
    """The traced twin of `inverse_np` (callers check `invertible` before tracing)."""
    return inverse(spec.activation, value, jnp)


def rescale_raw(spec, raw: jax.Array, activated: jax.Array, factor: jax.Array) -> jax.Array:
    """Raw value whose activation is `activated * factor` (factor > 0), exact for each
    invertible activation: a log-space shift for exp, a raw product for the positively
    homogeneous abs / relu / identity, the inverse otherwise."""
    if spec.activation == "exp":
        return raw + jnp.log(factor)
    if spec.activation in ("abs", "relu", "identity"):
        return raw * factor
    return inverse_jnp(spec, activated * factor).astype(raw.dtype)
