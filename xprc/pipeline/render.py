"""`render`: the one entry point of the shared pipeline (project -> bin -> sort -> composite)."""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import sys
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import compile_cache
from ..camera import Camera
from ..errors import XprError
from ..method_info import MethodInfo
from ..runtime import check_camera
from . import capacity as cap
from . import gather
from .binning import INT32_MAX, TileGrid, bin_and_sort
from .composite import composite
from .composite_pallas import may_use_pallas
from .composite_scan import tile_pixels
from .config import MODES, RenderConfig, entry_bucket
from .params import prepare_params, split_params

compile_cache.enable_default()  # JAX's persistent compilation cache (xprc/compile_cache.py)

# Incremented each time a render function is traced; tests use it to prove "compiled once".
TRACE_COUNT = {"render": 0}


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["image", "alpha", "depth", "stats", "extra", "distortion"],
    meta_fields=["mode"],
)
class RenderOutput:
    """What `render` returns. Leading camera axis when the camera is batched.

    image: [H, W, C] colour/features (None in depth-only modes)
    alpha: [H, W, 1] accumulated opacity 1 - T
    depth: [H, W, 1] accumulated (D) or expected (ED) depth, None in RGB mode
    extra: [H, W, K] the per-pixel outputs the response emits (the module's PIXEL_OUTPUTS),
           composited with the colour's weights; None when it emits none
    distortion: [H, W, 1] with `RenderConfig(distortion=True)`: the 2DGS depth distortion
           sum_{i,j} w_i w_j |z_i - z_j| over the composited list, computed in list order as
           2 sum_k w_k (z_k W_{k-1} - Z_{k-1}) (W, Z: prefix sums of w and w z), z the
           response's per-pixel `depth` when it emits one, else the sort depth; None otherwise
    stats: dict of arrays: entries_needed (saturated at 2^31 - 1), entries_saturated (True when
           the true count is larger), entry_capacity, dropped (total, saturated like
           entries_needed), dropped_per_tile [T], entries_per_tile [T], nonfinite (primitives
           left out because their projection is NaN or infinite), entries_culled (rectangle
           entries the spec's `ellipse` rejected; entries_needed counts rectangle entries) and
           ellipse_fallback (primitives whose ellipse is unusable and that keep the rectangle),
           alpha_out_of_range ((pixel, primitive) evaluations inside the image whose alpha
           was NaN or outside [0, 1] (signed: (-1, 1)) and was clamped; warned about),
           lens_outside (pixel centres whose ray is outside the lens model's valid domain,
           `Camera.lens_outside`; 0 for pinhole and ortho; warned about, saying what it means)
    """

    def __init__(self, image, alpha, depth, stats, mode, extra=None, distortion=None):
        self.image = image
        self.alpha = alpha
        self.depth = depth
        self.stats = stats
        self.mode = mode
        self.extra = extra
        self.distortion = distortion

    def __repr__(self) -> str:
        shape = None if self.alpha is None else tuple(self.alpha.shape)
        return f"RenderOutput(mode={self.mode!r}, alpha shape={shape})"


def _empty_output(method, mode, config, camera, background, dtype=jnp.float32):
    """The render of zero primitives: the background (or black), alpha 0, depth 0."""
    info = MethodInfo.of(method)
    channels = info.num_features
    h, w = camera.height, camera.width
    weight = jnp.zeros((h, w, 1), dtype)
    color = jnp.zeros((h, w, channels), dtype)
    if background is not None:
        color = color + jnp.asarray(background, dtype)[None, None, :]
    depth = jnp.zeros((h, w, 1), dtype) if mode.endswith("D") else None
    outputs = len(info.pixel_outputs) if config.pixel_outputs else 0
    extra = jnp.zeros((h, w, outputs), dtype) if outputs else None
    grid = TileGrid(w, h, config.tile_size)
    zeros_t = jnp.zeros((grid.num_tiles,), jnp.int32)
    stats = {
        "entries_needed": jnp.int32(0),
        "entries_saturated": jnp.bool_(False),
        "entry_capacity": jnp.int32(0),
        "dropped": jnp.int32(0),
        "dropped_per_tile": zeros_t,
        "entries_per_tile": zeros_t,
        "entries_culled": jnp.int32(0),
        "ellipse_fallback": jnp.int32(0),
        "nonfinite": jnp.int32(0),
        "alpha_out_of_range": jnp.int32(0),
        "lens_outside": camera.lens_outside(dtype),
    }
    image = color if mode.startswith("RGB") else None
    distortion = jnp.zeros((h, w, 1), dtype) if config.distortion else None
    return RenderOutput(image, weight, depth, stats, mode, extra, distortion)


def carries_runs(config: RenderConfig, capacity: int) -> bool:
    """Whether the binning returns its runs: for the gradient of the Pallas compositor's row
    gather by runs (xprc/pipeline/gather.py), when the kernels may run and the capacity allows."""
    return gather.wants_runs(capacity) and may_use_pallas(config)


def _render_one(method, mode: str, config: RenderConfig, params, camera, background):
    TRACE_COUNT["render"] += 1
    info = MethodInfo.of(method)
    grid = TileGrid(camera.width, camera.height, config.tile_size)
    proj = method.project(split_params(method, params), camera)
    attrs = proj["attrs"]
    dtype = attrs.dtype
    depth = proj["depth"].astype(dtype)
    values = jnp.concatenate([proj["features"].astype(dtype), depth[:, None]], axis=-1)
    n = attrs.shape[0]
    finite, valid = cap.usable(proj, params)
    capacity = config.entry_capacity(n, grid.num_tiles)
    ellipse = proj.get("ellipse")  # optional: culls the box's tiles that miss it
    bins = bin_and_sort(proj["box"], valid, depth, grid, capacity, ellipse, proj["centre"],
                        runs=carries_runs(config, capacity))  # fmt: skip
    rays = None
    if info.uses_ray:
        pix = tile_pixels(jnp.arange(grid.num_tiles, dtype=jnp.int32), grid, dtype)
        rays = camera.pixel_rays(pix[..., 0], pix[..., 1])
        if camera.one_origin:  # one origin per tile [T, 1, 3]: the response's origin-only terms
            rays = (rays[0][:, :1], rays[1])  # are then computed per entry, not per pixel
    names, signed = info.pixel_outputs, info.signed_alpha
    response = method.response
    if names and not config.pixel_outputs:  # alpha alone: the outputs' maths is dead code
        names, response = (), alpha_only(method.response)
    # the distortion's z: the response's per-pixel depth when it emits one, else the sort depth
    channels = values.shape[-1] - 1
    z_at = channels + 1 + names.index("depth") if "depth" in names else channels
    sums = composite(
        response, camera, attrs, values, bins, grid, config, rays, signed, len(names),
        z_at if config.distortion else None, method,
    )  # fmt: skip
    # [T, P, V + 1] -> [H, W, V + 1]
    t = grid.tile
    img = sums.reshape(grid.tiles_y, grid.tiles_x, t, t, -1).transpose(0, 2, 1, 3, 4)
    img = img.reshape(grid.tiles_y * t, grid.tiles_x * t, -1)[: grid.height, : grid.width]
    at_w = channels + 1 + len(names)
    weight = img[..., at_w : at_w + 1]
    # lanes whose alpha left the compositor's range (counted per pixel inside the image)
    clamped = jax.lax.stop_gradient(img[..., at_w + 1])
    clamped = jnp.sum(jnp.round(clamped).astype(jnp.int32))
    color = img[..., :channels]
    if background is not None:
        color = color + (1.0 - weight) * jnp.asarray(background, dtype)[None, None, :]
    extra = img[..., channels + 1 : channels + 1 + len(names)] if names else None
    # D / ED: the response's per-pixel depth when it emits one, else the sort depth
    depth_img = None
    if mode.endswith("ED"):
        # (a signed response's weight can be negative: divided by as it is, kept off zero)
        safe = jnp.where(jnp.abs(weight) > 1e-10, weight, 1e-10)
        depth_img = img[..., z_at : z_at + 1] / safe
    elif mode.endswith("D"):
        depth_img = img[..., z_at : z_at + 1]
    saturated = bins.needed >= INT32_MAX
    dropped = jnp.where(saturated, INT32_MAX, jnp.maximum(bins.needed - capacity, 0))
    stats = {
        "entries_needed": bins.needed,
        "entries_saturated": saturated,
        "entry_capacity": jnp.int32(capacity),
        "dropped": dropped,
        "dropped_per_tile": bins.demand - bins.kept - bins.culled,
        "entries_per_tile": bins.kept,
        "entries_culled": jnp.sum(bins.culled, dtype=jnp.int32),
        "ellipse_fallback": bins.fallback,
        "nonfinite": jnp.sum(~finite).astype(jnp.int32),
        "alpha_out_of_range": clamped,
        "lens_outside": camera.lens_outside(dtype),  # at the pixel centres the rays use
    }
    image = color if mode.startswith("RGB") else None
    distortion = img[..., -1:] if config.distortion else None
    return RenderOutput(image, weight, depth_img, stats, mode, extra, distortion)


def _compiled(method, mode: str, config: RenderConfig, batched: bool, check: bool = False):
    """The jitted render; options that do not change the traced function share one entry."""
    compile_cache.warn_pending(stacklevel=4)
    key = dataclasses.replace(
        config, memory_budget=None, on_overflow=config.on_overflow if check else "ignore"
    )
    return _jitted(method, mode, key, batched, check)


# (method, mode, config, batched, input shapes) whose Pallas kernels failed to compile: XLA
# from then on; and those that ran (compiled), whose later errors are not compile failures
_PALLAS_FAILED: set = set()
_PALLAS_RAN: set = set()


def _call_compiled(info, method, mode: str, config: RenderConfig, batched: bool, args):
    """The compiled render called on `args`. With `compositor="auto"`, kernels that Mosaic
    cannot compile for this chip (a response too large for its VMEM, say) fall back to the XLA
    path with a warning naming the reason, once per configuration."""
    shapes = tuple(np.shape(x) for x in jax.tree_util.tree_leaves(args))
    key = (method, mode, config, batched, shapes)
    if key not in _PALLAS_FAILED:
        try:
            out = _compiled(method, mode, config, batched)(*args)
        except jax.errors.JaxRuntimeError as err:
            if key in _PALLAS_RAN or xla_instead(info.name, config, err) is None:
                raise
            _PALLAS_FAILED.add(key)
        else:
            if config.compositor == "auto":
                _PALLAS_RAN.add(key)
            return out
    xla = dataclasses.replace(config, compositor="xla")
    return _compiled(method, mode, xla, batched)(*args)


def xla_instead(name: str, config: RenderConfig, err: Exception):
    """`config` with the XLA compositor, after a warning naming the reason, when `err` (raised
    by the first call of a compiled function) is the Pallas kernels failing to compile for this
    chip under `compositor="auto"`; else None (the caller raises). Used by `render` and by the
    trainer, whose step is traced as a whole. The warning points at the caller's own code."""
    if config.compositor != "auto" or not _kernel_compile_failure(err):
        return None
    reason = next((ln for ln in str(err).splitlines() if ln.strip()), "")[:300]
    warnings.warn(
        f"{name}: the Pallas kernels did not compile on this "
        f"{jax.default_backend().upper()} ({reason}); composited by the XLA path "
        "instead (RenderConfig(compositor='xla') skips the attempt)",
        RuntimeWarning,
        stacklevel=_outside_xprc(),
    )
    return dataclasses.replace(config, compositor="xla")


def _outside_xprc() -> int:
    """The `warnings.warn` stacklevel, in the function that calls this one, of the first frame
    outside the xprc package (the user's code, however deep the call came through xprc)."""
    package = str(pathlib.Path(__file__).resolve().parent.parent) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and str(pathlib.Path(frame.f_code.co_filename).resolve()).startswith(
        package
    ):
        frame, level = frame.f_back, level + 1
    return level


def _kernel_compile_failure(err: Exception) -> bool:
    """The error names a Pallas TPU kernel (Mosaic's custom call), not another op of the
    program (an XLA fusion short of VMEM is not the kernels' failure)."""
    text = str(err)
    return "tpu_custom_call" in text or "Mosaic" in text


@functools.cache
def _jitted(method, mode: str, config: RenderConfig, batched: bool, check: bool):
    fn = functools.partial(_render_one, method, mode, config)
    if batched:
        fn = jax.vmap(fn, in_axes=(None, 0, None))
    if check:  # after the batch axis: one test of the whole batch's counts, one branch
        fn = _checked(fn, config.on_overflow)
    return jax.jit(fn)


def _checked(fn, policy: str):
    """`fn` (a render) followed by the run-time report of its stats under `policy`."""

    def checked(params, camera, background):
        out = fn(params, camera, background)
        cap.runtime_overflow_check(policy, out.stats, camera.model)
        return out

    return checked


def _traced(tree) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


def _check_background(method, background, camera):
    if background is None:
        return None
    if _traced(background):
        shape = tuple(background.shape)
    else:
        background = np.asarray(background)
        shape = background.shape
        if background.dtype.kind not in "biuf" or not np.all(np.isfinite(background)):
            raise XprError(f"background must be finite numbers, got {background!r}")
    info = MethodInfo.of(method)
    want = (info.num_features,)
    if shape != want:
        raise XprError(
            f"background has shape {shape}, expected {want}: one value per colour channel of "
            f"{info.name}"
        )
    return background


def sized_config(
    method, params: dict, camera, config: RenderConfig | None = None, margin: float = 1.0
):
    """`config` with `max_entries` set to the capacity bucket above `margin` times the entries
    `params` need from `camera` (a batch: the largest), checked against the memory budget."""
    config = config or RenderConfig()
    cap.check_policy(config)
    needed = cap.count_entries(method, params, camera, config)
    capacity = entry_bucket(int(needed * margin))
    grid = TileGrid(camera.width, camera.height, config.tile_size)
    cap.check_memory(capacity, needed, method, grid, config)
    return dataclasses.replace(config, max_entries=capacity)


def render(
    method,
    params: dict[str, Any],
    camera,
    background=None,
    mode: str = "RGB",
    config: RenderConfig | None = None,
) -> RenderOutput:
    """Render `params` (raw, keyed by the spec's parameter names) with `method` from `camera`.

    `method` is a module from `xprc.load`; `camera` an `xprc.Camera`, batched or not;
    `background` an array [C] or None (black). Differentiable in params, camera and background.

    Lossless by default: with `config.max_entries` None and concrete inputs, the entries the
    scene needs are counted first and the capacity is the bucket above them. Under a caller's
    own trace (jit, grad, vmap) the capacity comes from `RenderConfig.entry_capacity` (or
    `max_entries`; see `fit_config`) and a drop is reported by `config.on_overflow`.
    """
    if mode not in MODES:
        raise XprError(f"unknown render mode '{mode}' (expected one of {', '.join(MODES)})")
    info = MethodInfo.of(method)  # checked once here; the helpers take it for the method
    _check_camera_type(camera)
    check_camera(info, camera)  # a camera model the spec does not accept: CameraModelError
    config = config or RenderConfig()
    cap.check_policy(config)
    check_outputs(info, mode, config)
    params = prepare_params(info, params)
    background = _check_background(info, background, camera)
    batched = len(camera.batch_shape) > 0
    if not next(iter(params.values())).shape[0]:
        fn = functools.partial(_empty_output, method, mode, config)
        if batched:
            return jax.vmap(fn, in_axes=(0, None))(camera, background)
        return fn(camera, background)
    traced = _traced((params, camera, background))
    if not traced:
        if config.max_entries is None:
            config = sized_config(method, params, camera, config)
        else:
            grid = TileGrid(camera.width, camera.height, config.tile_size)
            cap.check_given_capacity(method, grid, config)
        out = _call_compiled(info, method, mode, config, batched, (params, camera, background))
        cap.report_overflow(out.stats, config.on_overflow, model=camera.model)
        return out
    return _compiled(method, mode, config, batched, True)(params, camera, background)


@functools.cache
def alpha_only(response):
    """A response with per-pixel outputs, returning its alpha alone (`pixel_outputs=False`);
    one per response, so that caches keyed by it hit."""

    @functools.wraps(response)
    def alpha(*args, **kw):
        return response(*args, **kw)[0]

    return alpha


def check_outputs(info: MethodInfo, mode: str, config: RenderConfig) -> None:
    """An XprError when `pixel_outputs=False` would take away the emitted depth that `mode`
    or the distortion output reads (they would silently fall back to the sort depth)."""
    if config.pixel_outputs or "depth" not in info.pixel_outputs:
        return
    wants = [w for w, on in ((f"mode {mode!r}", mode.endswith("D")),
                             ("the distortion output", config.distortion)) if on]  # fmt: skip
    if wants:
        raise XprError(
            f"RenderConfig(pixel_outputs=False) leaves out the per-pixel depth {info.name}'s "
            f"response emits, which {' and '.join(wants)} reads: keep pixel_outputs=True"
        )


def _check_camera_type(camera) -> None:
    """An `xprc.Camera`, one or a `Camera.stack` of at least one (a list, a bare matrix or a
    stack of stacks failed deep inside the pipeline)."""
    if not isinstance(camera, Camera):
        raise XprError(
            f"camera must be an xprc.Camera (Camera(...), look_at(...) or Camera.stack([...]) "
            f"of them), got {type(camera).__name__}"
        )
    cap.check_batch(camera)  # a stack of stacks, or of no cameras


def fit_config(method, params: dict, cameras, config: RenderConfig | None = None, margin=1.25):
    """A config for rendering under your own `jax.jit`: capacity sized from sample cameras.

    `cameras`: one camera, a batch, or a list of cameras of one size. The capacity is the
    bucket above `margin` times the largest count, so moderate changes of the scene still fit;
    a render that needs more reports it through `config.on_overflow`.
    """
    if isinstance(cameras, list | tuple):
        from ..camera import Camera

        cameras = Camera.stack(list(cameras))
    return sized_config(method, params, cameras, config, margin)


def warn_if_dropped(out: RenderOutput | dict, model: str | None = None) -> int:
    """Warn (and return the count) when a render dropped entries for lack of capacity, and
    about primitives left out for non-finite values, clamped alphas and pixels outside the
    `model` lens's domain: the report of `on_overflow="warn"`, for a render made with
    `on_overflow="defer"` under your own jit: call it on each returned output (or its `stats`)
    where your code reads results (a render whose output it never sees goes unreported). An
    XprError inside a trace."""
    stats = out.stats if isinstance(out, RenderOutput) else out  # an output or its stats
    if _traced(stats):
        raise XprError(
            "warn_if_dropped: the render's stats are traced values; call it outside jax.jit "
            "on the output the jitted function returned"
        )
    return cap.report_overflow(stats, "warn", model=model)
