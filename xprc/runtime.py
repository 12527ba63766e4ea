"""The few helpers generated modules import. Keep it small: generated code is plain jnp."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


class ParamSpec(NamedTuple):
    """One per-primitive parameter of a spec, as stored (raw) by the trainer and PLY files.

    name: the spec's parameter name (the key in the params dict)
    kind: "scalar", "vecN", "quat", "matN", "matMxN" or "sh"
    shape: per-primitive shape, e.g. (3,) for vec3, (16, 3) for sh(3)
    activation: "identity", "exp", "sigmoid", "normalize", "abs", "softplus", or the
        expression's text
    degree: SH degree for kind "sh", else None
    lr: the spec's learning rate (`lr 1e-3`), else None (the trainer's default)
    init: the spec's initialisation (`init ...`): "points", "colors", "identity",
        "nn_distance", "zeros", "ones", or a number (the activated value), else None
    role: "position", "opacity" or "scale" (`role ...`), else None
    init_raw: for a numeric `init` through an activation without a name (`4 * exp(raw)`), the
        raw value the compiler derived (per component), else None
    """

    name: str
    kind: str
    shape: tuple
    activation: str
    degree: int | None
    lr: float | None = None
    init: str | float | None = None
    role: str | None = None
    init_raw: float | None = None


def check_camera(method, camera) -> None:
    """Raise CameraModelError when `camera.model` is not one of the spec's CAMERA_MODELS (a
    module without the list, such as a hand-written one, accepts every model)."""
    models = getattr(method, "CAMERA_MODELS", None)
    model = getattr(camera, "model", None)
    if models is None or model is None or model in models:
        return
    from xprc.errors import CameraModelError

    name = getattr(method, "NAME", "the method")
    why = getattr(method, "CAMERA_MODELS_SOURCE", "")
    raise CameraModelError(
        f"{name} accepts the camera model{'s' if len(models) > 1 else ''} {', '.join(models)}"
        f"{f' ({why})' if why else ''}, not '{model}': render it with such a camera, or declare "
        f"'cameras {', '.join((*models, model))}' in the spec if it is right for '{model}'",
        filename=getattr(method, "SPEC_FILE", None),
    )


def broadcast(x, like):
    """A value that does not vary per element (a number, a camera scalar) shaped like `like`."""
    x = jnp.asarray(x)
    dtype = x.dtype if x.dtype == jnp.bool_ else like.dtype
    return jnp.broadcast_to(x.astype(dtype), like.shape)


def finite_and(valid, centre, depth, box):
    """valid [N] and every footprint value finite (a NaN/inf primitive is never binned)."""
    ok = jnp.isfinite(depth)
    ok = ok & jnp.all(jnp.isfinite(centre), -1) & jnp.all(jnp.isfinite(box), -1)
    return valid & ok
