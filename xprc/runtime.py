"""The few helpers generated modules import. Keep it small: generated code is plain jnp."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from xprc.errors import CameraModelError
from xprc.method_info import MethodInfo

# Matrix products in float32 at full float32 precision. On GPUs since Ampere XLA's DEFAULT is
# TF32 (a 10-bit mantissa): blending, camera transforms and pose corrections then differ from the
# reference by up to a few percent (measured: 0.044 on the garden subset, H200). Every einsum
# and matmul in xprc passes this; tests/test_precision.py checks the traced programs.
EXACT = lax.Precision.HIGHEST


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
        "nn_distance", "zeros", "ones", a number (the activated value), a random rule of the
        raw value (`("normal", mean, std)`, `("uniform", low, high)`, `("unit",)`), else None
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
    init: str | float | tuple | None = None
    role: str | None = None
    init_raw: float | None = None


def check_camera(method, camera) -> None:
    """Raise CameraModelError when `camera.model` is not one of the spec's CAMERA_MODELS (a
    module without the list, such as a hand-written one, accepts every model), or when the
    camera has a rolling shutter and the spec does not bound its footprint for one. `method`: a
    method module or its MethodInfo."""
    info = MethodInfo.of(method)
    shutter = getattr(camera, "shutter", "global")
    if shutter != "global" and not info.rolling_shutter:
        raise CameraModelError(
            f"{info.name} does not render rolling-shutter cameras (shutter={shutter!r}): its "
            "projection never calls camera.shutter_box, so its footprint holds the start pose's "
            "pixels only; render it with a global-shutter camera, or project with "
            "camera.project_world and bound the footprint with camera.shutter_box "
            "(docs/language.md, 'Rolling shutter')",
            filename=info.spec_file,
        )
    models = info.camera_models
    model = getattr(camera, "model", None)
    if models is None or model is None or model in models:
        return
    why = info.camera_models_source
    raise CameraModelError(
        f"{info.name} accepts the camera model{'s' if len(models) > 1 else ''} "
        f"{', '.join(models)}{f' ({why})' if why else ''}, not '{model}': render it with such a "
        f"camera, or declare 'cameras {', '.join((*models, model))}' in the spec if it is right "
        f"for '{model}'",
        filename=info.spec_file,
    )


LENS_FIX_SPEC = "3dgut"  # a shipped spec that renders every camera model (its `cameras`)


def check_views_camera(method, views, what: str, scene: bool = False) -> None:
    """CameraModelError before anything is rendered when some of `views` (a dataset's views,
    each with `model` and `name`) have a camera model the spec does not accept: it names the
    spec, the model, how many views, and the fixes for a dataset (`--undistort` for a lens when
    the spec renders pinholes; a spec that renders the model). `what`: 'training', 'test';
    `scene`: the views render a trained scene (`xprc eval`, `render`), whose spec is given."""
    info = MethodInfo.of(method)
    models = info.camera_models
    if models is None:
        return
    bad = [v for v in views if getattr(v, "model", "pinhole") not in models]
    if not bad:
        return
    model = bad[0].model
    same = sum(1 for v in bad if v.model == model)
    first = getattr(bad[0], "name", "?")
    why = f" ({info.camera_models_source})" if info.camera_models_source else ""
    only = "only " if len(models) == 1 else ""
    from .data.undistort import LENS_MODELS  # (here: xprc.data imports the camera, and it this)

    fixes = []
    if model in LENS_MODELS and "pinhole" in models:
        fixes.append("resample the images to pinhole cameras with --undistort (from Python: "
                     "load_scene or load_colmap with undistort=True)"
                     + (", as in the training" if scene else ""))  # fmt: skip
    if scene:
        fixes.append(f"give the --spec the scene was trained with if it renders '{model}' "
                     f"cameras (such as {LENS_FIX_SPEC})")  # fmt: skip
    else:
        fixes.append(f"use a spec that renders '{model}' cameras directly, such as --spec "
                     f"{LENS_FIX_SPEC}")  # fmt: skip
    raise CameraModelError(
        f"{info.name} renders {only}the camera model{'s' if len(models) > 1 else ''} "
        f"{', '.join(models)}{why}, but {same} of the {len(views)} {what} views "
        f"{'has' if same == 1 else 'have'} "
        f"'{model}' cameras (first: {first}): {', or '.join(fixes)}",
        filename=info.spec_file,
    )


def broadcast(x, like):
    """A value that does not vary per element (a number, a camera scalar) shaped like `like`."""
    x = jnp.asarray(x)
    dtype = x.dtype if x.dtype == jnp.bool_ else like.dtype
    return jnp.broadcast_to(x.astype(dtype), like.shape)


def finite_and(valid, centre, depth, box):
    """valid [N] and every footprint value finite (a NaN/inf primitive is never binned)."""
    return footprint_checked(valid, centre, depth, box)[0]


def footprint_checked(valid, centre, depth, box):
    """(valid [N] and every footprint value finite, [N] valid by the spec but with a footprint
    that is not finite): a primitive whose finite parameters project out of float range (a huge
    scale, say) is never binned, and the renderer counts it (stats['nonfinite']) and says so."""
    ok = jnp.isfinite(depth)
    ok = ok & jnp.all(jnp.isfinite(centre), -1) & jnp.all(jnp.isfinite(box), -1)
    return valid & ok, valid & ~ok


# ---------------------------------------------------------------------------------------------
# Max and min in a response. A spec's `t = max(t, ...)` loop is one chain of binary maxima;
# JAX differentiates each jnp.maximum with an even split of ties, whose masks (compares and
# selects on the running value, per link) XLA CPU materialises as many full-size arrays in the
# backward of a per-(pixel, entry) function (issue 17: with the octahedron's 16-link chains its
# garden fwd+bwd was 13.5x its forward, 7.8x after). Here a chain is one n-ary call: the value
# is exactly the chain of jnp.maximum/minimum (NaN propagates alike), and the derivative is that
# of the first argument that attains the extreme (a one-sided choice at ties, as
# `where(x >= y, x, y)` makes), selected with one index per element.


def _first(better, xs):
    """The index (int32) of the first of `xs` that no later one is `better` than."""
    best, idx = xs[0], jnp.zeros(jnp.shape(xs[0]), jnp.int32)
    for k, x in enumerate(xs[1:], 1):
        take = better(x, best)
        best = jnp.where(take, x, best)
        idx = jnp.where(take, jnp.int32(k), idx)
    return idx


def _chain(op, better):
    @jax.custom_jvp
    def chain(*xs):
        return functools.reduce(op, xs)

    @chain.defjvp
    def _jvp(primals, tangents):
        if len(primals) == 2:
            pick = jnp.where(better(primals[1], primals[0]), tangents[1], tangents[0])
        else:
            pick = lax.select_n(_first(better, primals), *tangents)
        return chain(*primals), pick

    return chain


_max_chain = _chain(jnp.maximum, lambda a, b: a > b)
_min_chain = _chain(jnp.minimum, lambda a, b: a < b)


def _extreme(chain, op, xs):
    dtype = jnp.result_type(*xs)
    if len(xs) == 1:
        return jnp.asarray(xs[0], dtype)
    if not jnp.issubdtype(dtype, jnp.floating):  # nothing to differentiate
        return functools.reduce(op, xs)
    shape = jnp.broadcast_shapes(*(jnp.shape(x) for x in xs))
    return chain(*(jnp.broadcast_to(jnp.asarray(x, dtype), shape) for x in xs))


def maximum(*xs):
    """max(xs[0], xs[1], ...) elementwise, broadcast; the value of the chain of jnp.maximum, the
    derivative of the first argument that attains it (one-sided at ties)."""
    return _extreme(_max_chain, jnp.maximum, xs)


def minimum(*xs):
    """min(xs[0], xs[1], ...) elementwise, broadcast; the value of the chain of jnp.minimum, the
    derivative of the first argument that attains it (one-sided at ties)."""
    return _extreme(_min_chain, jnp.minimum, xs)
