"""`render`: the one entry point of the shared pipeline (project -> bin -> sort -> composite)."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import XprError
from .binning import TileGrid, bin_and_sort
from .composite import composite, tile_pixels
from .config import MODES, RenderConfig

# Incremented each time a render function is traced; tests use it to prove "compiled once".
TRACE_COUNT = {"render": 0}


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["image", "alpha", "depth", "stats"],
    meta_fields=["mode"],
)
class RenderOutput:
    """What `render` returns. Leading camera axis when the camera is batched.

    image: [H, W, C] colour/features (None in depth-only modes)
    alpha: [H, W, 1] accumulated opacity 1 - T
    depth: [H, W, 1] accumulated (D) or expected (ED) depth, None in RGB mode
    stats: dict of arrays: entries_needed, entry_capacity, dropped (total), dropped_per_tile [T],
           entries_per_tile [T], visible (primitives that reached at least one tile)
    """

    def __init__(self, image, alpha, depth, stats, mode):
        self.image = image
        self.alpha = alpha
        self.depth = depth
        self.stats = stats
        self.mode = mode

    def __repr__(self) -> str:
        shape = None if self.alpha is None else tuple(self.alpha.shape)
        return f"RenderOutput(mode={self.mode!r}, alpha shape={shape})"


def _param_table(method):
    return {p.name: p for p in method.PARAMS}


def prepare_params(method, params: dict) -> dict:
    """Check a raw parameter dict against the method's table; pad short SH with zeros."""
    table = _param_table(method)
    missing = [name for name in table if name not in params]
    if missing:
        raise XprError(
            f"parameters missing for {method.NAME}: {', '.join(missing)} "
            f"(expected {', '.join(table)})"
        )
    extra = [name for name in params if name not in table]
    if extra:
        raise XprError(f"unknown parameters for {method.NAME}: {', '.join(extra)}")
    out = {}
    n = None
    for name, spec in table.items():
        arr = jnp.asarray(params[name])
        want = tuple(spec.shape)
        if arr.ndim != len(want) + 1:
            raise XprError(f"parameter '{name}' has shape {tuple(arr.shape)}, expected [N, {want}]")
        if n is None:
            n = arr.shape[0]
        elif arr.shape[0] != n:
            raise XprError(f"parameter '{name}' has {arr.shape[0]} primitives, others have {n}")
        got = tuple(arr.shape[1:])
        if got != want:
            if spec.kind == "sh" and got[1:] == want[1:] and got[0] < want[0]:
                pad = [(0, 0), (0, want[0] - got[0])] + [(0, 0)] * (len(want) - 1)
                arr = jnp.pad(arr, pad)
            else:
                raise XprError(
                    f"parameter '{name}' has shape {tuple(arr.shape)}, expected [N, {want}]"
                )
        out[name] = arr
    return out


def _render_one(method, mode: str, config: RenderConfig, params, camera, background):
    TRACE_COUNT["render"] += 1
    grid = TileGrid(camera.width, camera.height, config.tile_size)
    proj = method.project(params, camera)
    attrs = proj["attrs"]
    dtype = attrs.dtype
    depth = proj["depth"].astype(dtype)
    values = jnp.concatenate([proj["features"].astype(dtype), depth[:, None]], axis=-1)
    n = attrs.shape[0]
    capacity = config.entry_capacity(n, grid.num_tiles)
    bins = bin_and_sort(proj["box"], proj["valid"], depth, grid, capacity)
    rays = None
    if method.USES_RAY:
        pix = tile_pixels(jnp.arange(grid.num_tiles, dtype=jnp.int32), grid, dtype)
        rays = camera.pixel_rays(pix[..., 0], pix[..., 1])
    sums = composite(method.response, camera, attrs, values, bins, grid, config, rays)
    # [T, P, V + 1] -> [H, W, V + 1]
    t = grid.tile
    img = sums.reshape(grid.tiles_y, grid.tiles_x, t, t, -1).transpose(0, 2, 1, 3, 4)
    img = img.reshape(grid.tiles_y * t, grid.tiles_x * t, -1)[: grid.height, : grid.width]
    channels = values.shape[-1] - 1
    weight = img[..., -1:]
    color = img[..., :channels]
    if background is not None:
        color = color + (1.0 - weight) * jnp.asarray(background, dtype)[None, None, :]
    depth_img = None
    if mode.endswith("ED"):
        depth_img = img[..., channels : channels + 1] / jnp.maximum(weight, 1e-10)
    elif mode.endswith("D"):
        depth_img = img[..., channels : channels + 1]
    dropped_per_tile = bins.demand - bins.kept
    stats = {
        "entries_needed": bins.needed,
        "entry_capacity": jnp.int32(capacity),
        "dropped": jnp.maximum(bins.needed - capacity, 0),
        "dropped_per_tile": dropped_per_tile,
        "entries_per_tile": bins.kept,
    }
    image = color if mode.startswith("RGB") else None
    return RenderOutput(image, weight, depth_img, stats, mode)


@functools.cache
def _compiled(method, mode: str, config: RenderConfig, batched: bool):
    fn = functools.partial(_render_one, method, mode, config)
    if batched:
        fn = jax.vmap(fn, in_axes=(None, 0, None))
    return jax.jit(fn)


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
    """
    if mode not in MODES:
        raise XprError(f"unknown render mode '{mode}' (expected one of {', '.join(MODES)})")
    config = config or RenderConfig()
    params = prepare_params(method, params)
    batched = len(camera.batch_shape) > 0
    return _compiled(method, mode, config, batched)(params, camera, background)


def warn_if_dropped(out: RenderOutput) -> int:
    """Warn (and return the count) when a render dropped entries for lack of capacity."""
    dropped = int(np.sum(np.asarray(out.stats["dropped"])))
    if dropped:
        needed = int(np.max(np.asarray(out.stats["entries_needed"])))
        cap = int(np.max(np.asarray(out.stats["entry_capacity"])))
        warnings.warn(
            f"render dropped {dropped} (primitive, tile) entries: {needed} needed, capacity "
            f"{cap}; raise RenderConfig.max_entries or entries_per_primitive",
            stacklevel=2,
        )
    return dropped
