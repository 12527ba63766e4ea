"""How many (primitive, tile) entries a render needs, and what happens when they do not fit.

The pipeline's shapes are static, so its entry buffer has a fixed capacity. Outside a trace,
`xprc.render` counts the entries a scene needs with a cheap jitted pass (projection + footprint
rectangles, no compositing) and renders with the capacity bucket above the count, so nothing is
ever dropped. Under a caller's own `jax.jit`, the capacity cannot depend on the data; there a
render that drops entries reports it at run time according to `RenderConfig.on_overflow`.

Entries are counted in footprint *rectangles*: a spec's optional `ellipse` culls some of them
during binning (after the buffer is filled), so the count, the capacity and `dropped` are an
upper bound on the entries composited, and exact in rectangle entries.
"""

from __future__ import annotations

import functools
import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import XprError
from ..memory import physical_memory, size_text
from ..method_info import MethodInfo
from .binning import INT32_MAX, TileGrid, exact_total, tile_rects
from .composite_scan import ALPHA_CAP
from .config import RenderConfig
from .params import prepare_params

POLICIES = ("warn", "raise", "ignore", "defer")
_GIB = 1 << 30
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20}
_UNITS.update({"g": _GIB, "gib": _GIB, "t": 1 << 40, "tib": 1 << 40})
BUDGET_ENV = "XPRC_MEMORY_BUDGET"


class EntryOverflowError(XprError):
    """A render dropped (primitive, tile) entries and the policy says raise."""


class MemoryBudgetError(XprError):
    """The lossless entry capacity would exceed the memory budget."""


def check_policy(config: RenderConfig) -> None:
    if config.on_overflow not in POLICIES:
        raise XprError(
            f"RenderConfig.on_overflow={config.on_overflow!r}: expected one of "
            f"{', '.join(POLICIES)}"
        )
    if config.max_entries is not None and (
        isinstance(config.max_entries, bool)
        or not isinstance(config.max_entries, int | np.integer)
        or not 1 <= config.max_entries <= INT32_MAX
    ):
        raise XprError(
            f"RenderConfig.max_entries={config.max_entries!r}: expected None (sized from the "
            f"scene) or an integer in 1..{INT32_MAX}"
        )


def parse_bytes(text: str, source: str) -> int:
    """'12GiB', '512 MiB', '1e9' -> bytes; anything else is an XprError naming `source`."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?(?:[eE][0-9]{1,2})?)\s*([a-zA-Z]{0,3})\s*", text)
    unit = m and m.group(2).lower()
    if not m or unit not in _UNITS:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise XprError(
            f"{source}={shown!r} is not a size: expected bytes or a number with K, M, G or T "
            "(binary units), e.g. 12GiB"
        )
    value = float(m.group(1)) * _UNITS[unit]
    if not 1 <= value < 2**62:
        raise XprError(f"{source}={text!r}: expected a size between 1 byte and 4 EiB")
    return int(value)


def default_memory_budget() -> int:
    """XPRC_MEMORY_BUDGET if set, else half the machine's memory, at most 16 GiB and at most
    the device's memory where its backend reports it (a TPU v5e's 15.75 GB is less than 16 GiB;
    its host's memory says nothing about it)."""
    env = os.environ.get(BUDGET_ENV)
    if env is not None:
        return parse_bytes(env, BUDGET_ENV)
    total = physical_memory() or 8 * _GIB
    budget = int(min(16 * _GIB, max(total // 2, _GIB)))
    limit = device_memory_limit()
    return budget if limit is None else min(budget, limit)


def device_memory_limit() -> int | None:
    """The first device's memory limit in bytes where its backend reports one (a TPU, a GPU;
    `memory_stats()["bytes_limit"]`), else None (a CPU)."""
    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # noqa: BLE001 (backends without the call raise their own kinds)
        return None
    limit = stats.get("bytes_limit")
    return int(limit) if limit else None


def estimate_bytes(capacity: int, num_attrs: int, num_values: int, grid: TileGrid) -> int:
    """A generous estimate of the memory a forward + backward render plans for its entries.

    Per entry: the binning arrays (keys, owners, indices: ~12 int32), the gathered attributes
    and values (float32), their cotangents, and the compositor's per-chunk sums
    (pixels x (values + 1) per 32 entries, the XLA path's chunk), doubled for the backward pass.
    """
    pix = grid.tile * grid.tile
    per_entry = 48 + 8 * (num_attrs + num_values) + (pix * 4 * (num_values + 1)) // 32
    tiles = grid.num_tiles * pix * 4 * (num_values + 2)
    return 2 * capacity * per_entry + tiles


def _planned_bytes(capacity: int, method, grid: TileGrid) -> int:
    """`estimate_bytes` of `capacity` entries for `method` on `grid`."""
    info = MethodInfo.of(method)
    return estimate_bytes(capacity, info.num_attrs, info.num_features + 1, grid)


def check_memory(capacity: int, needed: int, method, grid: TileGrid, config: RenderConfig):
    """Raise a MemoryBudgetError when `capacity` entries would not fit the budget."""
    budget = config.memory_budget or default_memory_budget()
    need = _planned_bytes(capacity, method, grid)
    if capacity <= INT32_MAX and need <= budget:
        return
    raise MemoryBudgetError(
        f"this render needs {needed:,} (primitive, tile) entries on a {grid.width}x"
        f"{grid.height} image with {grid.tile}x{grid.tile} tiles; a capacity of {capacity:,} "
        f"would take about {size_text(need)}, over the memory budget of "
        f"{size_text(budget)}. Render at a lower resolution (downscale), use larger tiles "
        f"(RenderConfig.tile_size), fewer or smaller primitives, or raise the budget "
        f"(RenderConfig.memory_budget or {BUDGET_ENV})"
    )


def check_given_capacity(method, grid: TileGrid, config: RenderConfig) -> None:
    """A MemoryBudgetError when a capacity the caller gave (`config.max_entries`, `xprc render
    --max-entries`) would not fit the budget a counted one meets (`check_memory`): it is
    allocated as given (2,000,000,000 asked XLA for 768 GB)."""
    budget = config.memory_budget or default_memory_budget()
    need = _planned_bytes(config.max_entries, method, grid)
    if need <= budget:
        return
    base = _planned_bytes(0, method, grid)
    fits = max(budget - base, 0) // (_planned_bytes(1, method, grid) - base)
    raise MemoryBudgetError(
        f"RenderConfig.max_entries (xprc render --max-entries) of {config.max_entries:,} "
        f"entries on a {grid.width}x{grid.height} image with {grid.tile}x{grid.tile} tiles "
        f"would take about {size_text(need)}, over the memory budget of {size_text(budget)}; "
        + (f"give at most {fits:,}, " if fits else "")
        + "leave it unset (the entries are then counted and the capacity sized from them), or "
        f"raise the budget (RenderConfig.memory_budget or {BUDGET_ENV})"
    )


def overflow_message(dropped: int, needed: int, capacity: int, saturated: bool) -> str:
    if saturated:
        amount = f"more than {INT32_MAX:,} (primitive, tile) entries (count saturated)"
        needed_s = f"more than {INT32_MAX:,}"
    else:
        amount = f"{dropped:,} (primitive, tile) entries"
        needed_s = f"{needed:,}"
    return (
        f"render dropped {amount} for lack of capacity: {needed_s} needed, capacity "
        f"{capacity:,}; the image is missing those contributions. Leave "
        "RenderConfig.max_entries=None outside jit (sized from the scene), or size it with "
        "xprc.fit_config(method, params, cameras)"
    )


def nonfinite_message(count: int) -> str:
    return (
        f"render left out {count:,} primitive(s) whose projection is not finite (NaN or "
        "infinite parameters, or finite ones whose footprint overflows float range, e.g. a "
        "huge scale); stats['nonfinite'] counts them"
    )


def alpha_message(count: int) -> str:
    cap = ALPHA_CAP  # (where composite_scan.clamp_alpha puts them)
    return (
        f"the spec's response gave {count:,} (pixel, primitive) alpha value(s) that are NaN, "
        "outside [0, 1), or so close to 1 that the stop rule would draw nothing "
        "(1 - alpha < RenderConfig.t_min) (a signed response: outside (-1, 1)); they were "
        f"clamped into range (1 and above to {cap}: an opaque primitive draws at {cap}). "
        f"Keep alpha in range in the spec's response, e.g. 'alpha = min({cap}, ...)' above and "
        f"'max(0, ...)' below (a signed response: 'clamp(..., -{cap}, {cap})'); "
        "stats['alpha_out_of_range'] counts them"
    )


_LENS_DOMAINS = {  # model -> (where its domain ends, what that means for those pixels)
    "fisheye": ("beyond theta_max, the first maximum of theta_d(theta): outside the image "
                "circle", "no ray reaches them, so they show the nearest valid ray's content, "
                "at theta_max"),
    "opencv": ("the radial factor of their undistorted point leaves (0.8, 1.2), where the "
               "model's projection is defined, or their undistortion did not converge",
               "their rays are exact where undistortion converged, a guess where it did not"),
}  # fmt: skip


def lens_message(count: int, model: str | None = None, cameras: int = 1) -> str:
    name = f"the {model} lens model's" if model else "the camera model's"
    where, means = _LENS_DOMAINS.get(model, ("no ray reaches them", "they show a guessed ray"))
    over = f" of {cameras:,} cameras' images" if cameras > 1 else ""
    return (
        f"{count:,} pixel(s){over} lie outside {name} valid domain ({where}); {means}, and "
        "specs that test camera.project_valid do not draw primitives centred there. "
        "Crop the images to the valid region or check the lens coefficients; "
        "stats['lens_outside'] counts them"
    )


def report_overflow(stats: dict, policy: str, stacklevel: int = 3, model: str | None = None) -> int:
    """Apply the overflow policy to concrete render stats; returns the dropped count ("defer"
    reports as "warn": the stats are concrete, so this is where it reports).

    Primitives left out for non-finite values, alphas clamped into range and pixels outside
    the `model` lens's valid domain are reported as warnings unless ignored."""
    # a batch renders the same primitives from each camera (max) at different pixels (sum)
    for key, message, total in (("nonfinite", nonfinite_message, np.max),
                                ("alpha_out_of_range", alpha_message, np.sum)):  # fmt: skip
        count = int(total(np.asarray(stats.get(key, 0)).astype(np.int64)))
        if count and policy != "ignore":
            warnings.warn(message(count), RuntimeWarning, stacklevel=stacklevel)
    outside = np.asarray(stats.get("lens_outside", 0)).astype(np.int64)
    if outside.any() and policy != "ignore":  # each camera its own image: pixels add up
        text = lens_message(int(outside.sum()), model, outside.size)
        warnings.warn(text, RuntimeWarning, stacklevel=stacklevel)
    dropped = np.asarray(stats["dropped"])
    if policy == "ignore" or not np.any(dropped > 0):
        return int(np.sum(dropped, dtype=np.int64))
    saturated = bool(np.any(np.asarray(stats["entries_saturated"])))
    needed = int(np.max(np.asarray(stats["entries_needed"])))
    capacity = int(np.max(np.asarray(stats["entry_capacity"])))
    total = int(np.sum(dropped, dtype=np.int64))
    message = overflow_message(total, needed, capacity, saturated)
    if policy == "raise":
        raise EntryOverflowError(message)
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
    return total


def runtime_overflow_check(policy: str, stats: dict, model: str | None = None) -> None:
    """Inside a trace: warn or raise at run time when entries were dropped (and warn about
    primitives left out for non-finite values, clamped alphas and pixels outside the `model`
    lens's valid domain).

    The host callback sits in the branch of a `lax.cond` taken only when one of those counts is
    not zero: a render with nothing to report moves no data to the host and waits for nothing
    (the callback costs a device-to-host transfer and a synchronisation each time it runs)."""
    if policy in ("ignore", "defer"):  # "defer": the caller reports `stats` (warn_if_dropped)
        return
    names = ("dropped", "entries_needed", "entry_capacity", "entries_saturated", "nonfinite",
             "alpha_out_of_range", "lens_outside")  # fmt: skip

    def callback(*values):
        report_overflow(dict(zip(names, values, strict=True)), policy, stacklevel=2, model=model)

    def report(*values):
        jax.debug.callback(callback, *values)

    values = tuple(stats[k] for k in names)
    jax.lax.cond(problem(stats), report, lambda *_: None, *values)


def problem(stats: dict) -> jax.Array:
    """[] bool: the render has something to report (a drop, primitives left out for
    non-finite values, clamped alphas, pixels outside the lens's domain); any batch axes are
    reduced."""
    keys = ("dropped", "nonfinite", "alpha_out_of_range", "lens_outside")
    return functools.reduce(jnp.logical_or, (jnp.any(stats[k] != 0) for k in keys))


def finite_rows(*arrays) -> jax.Array:
    """[N] bool: every value of the primitive's row is finite in every array."""
    ok = None
    for a in arrays:
        f = jnp.isfinite(a).reshape(a.shape[0], -1).all(axis=1)
        ok = f if ok is None else ok & f
    return ok


def usable(proj: dict, params: dict | None = None):
    """([N] finite, [N] valid): a primitive whose projection or parameters are not finite is
    left out of binning (and counted), so its NaN cannot reach other pixels or gradients. Its
    parameters too: an infinite one can give a finite but meaningless projection (an infinite
    SH coefficient clamps a colour channel to 0). `lost` (generated modules): valid by the
    spec, but its centre, depth or footprint box is not finite."""
    finite = finite_rows(proj["attrs"], proj["features"], proj["depth"], *(params or {}).values())
    if "lost" in proj:
        finite = finite & ~proj["lost"]
    return finite, proj["valid"] & finite


def _count_one(method, config: RenderConfig, params, camera):
    grid = TileGrid(camera.width, camera.height, config.tile_size)
    proj = method.project(params, camera)
    _, valid = usable(proj, params)
    *_, count = tile_rects(proj["box"], valid, grid)
    return exact_total(count)


# (primitive, camera) pairs one batch of a count projects at once: a count over many cameras
# runs in batches of about this many, so its memory does not grow with the cameras (a vmap
# over a capture's 131 views of 3M primitives needed 17.95 GB on a TPU v5e, over its 15.75).
COUNT_PAIRS = 1 << 24
COUNT_BATCH_MAX = 64  # cameras one batch of a count takes at most


def count_batch(prims: int, cameras: int) -> int:
    """Cameras one batch of a count over a stack of `cameras` takes: COUNT_PAIRS (primitive,
    camera) pairs, at most COUNT_BATCH_MAX cameras, and no more than the power of two at or
    above `cameras` (a short stack fills its batch with copies of its last camera). Stacks at
    least that long share one compiled program (a run's training and test views at scale: a
    second program cost 12 s of compiling at 1M primitives on a TPU v5e); shorter ones take one
    of a few, and project at most twice their cameras."""
    return max(1, min(COUNT_BATCH_MAX, COUNT_PAIRS // max(prims, 1),
                      1 << max(cameras - 1, 0).bit_length()))  # fmt: skip


@functools.cache
def _count_fn(method, config: RenderConfig, batched: bool):
    """The jitted count of one camera, or with `batched` of a stack of cameras (count_batch)."""
    one = functools.partial(_count_one, method, config)
    if not batched:
        return jax.jit(one)
    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


def _fill(a: np.ndarray, short: int) -> np.ndarray:
    """`a` with `short` copies of its last row appended."""
    return np.concatenate([a, np.repeat(a[-1:], short, axis=0)])


def _count_stack(fn, params, camera, prims: int) -> np.ndarray:
    """[V, 2] the count words of each camera of a stack, in batches of count_batch cameras (the
    last one filled up with copies of its last camera)."""
    total = camera.batch_shape[0]
    per = count_batch(prims, total)
    host = jax.tree_util.tree_map(np.asarray, camera)  # a few numbers a camera
    words = []
    for start in range(0, total, per):
        part = host[start : start + per]
        short = per - part.batch_shape[0]
        if short:
            fill = functools.partial(_fill, short=short)
            part = jax.tree_util.tree_map(fill, part)
        words.append(np.asarray(fn(params, part))[: per - short])
    return np.concatenate(words)


def check_batch(camera) -> None:
    """An XprError for a camera batch a render cannot take: a stack of stacks, or no cameras
    (an empty slice of a stack: the count's max over none failed with a ValueError)."""
    shape = tuple(camera.batch_shape)
    if len(shape) > 1:
        raise XprError(
            f"camera: a stack of {shape} cameras; render takes one camera or one "
            "Camera.stack of them (stack the cameras themselves, not stacks)"
        )
    if shape and not shape[0]:
        raise XprError(
            f"camera: a Camera.stack of no cameras (batch shape {shape}): give at least one"
        )


def count_entries(method, params: dict, camera, config: RenderConfig | None = None) -> int:
    """Exact (primitive, tile) entries a render of `params` from `camera` needs (max over a
    batch of cameras), in footprint rectangles (before any ellipse culling). Cheap: projection
    and footprint rectangles only."""
    check_batch(camera)
    config = config or RenderConfig()
    params = prepare_params(method, params)
    prims = next(iter(params.values())).shape[0]
    if not prims:
        return 0
    batched = len(camera.batch_shape) > 0
    fn = _count_fn(method, _count_key(config), batched)
    words = _count_stack(fn, params, camera, prims) if batched else np.asarray(fn(params, camera))
    words = words.reshape(-1, 2).astype(np.uint64)
    return int(max(int(h) << 32 | int(lo) for h, lo in words))


def _count_key(config: RenderConfig) -> RenderConfig:
    """Only the tile size matters to the count: one compiled counter per tile size."""
    return RenderConfig(tile_size=config.tile_size)
