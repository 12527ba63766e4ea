"""Training and test views as stacked device arrays, the background, and the view order.

Images read from 8-bit files stay 8-bit on the device (uint8, a quarter of float32's memory)
and become float32 where a compiled step reads them (`float_images`), bit for bit the values
the loaders made; any other image stays float32.
"""

from __future__ import annotations

import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..camera import Camera
from ..memory import size_text
from .config import TrainError
from .init import numbers_text

# The float32 value of each 8-bit code k: k / 255 rounded once, as the loaders compute it
# (`np.float32(k) / np.float32(255)`). On the device an 8-bit image is read through this table
# (a gather), not divided: XLA may turn a division into a multiplication by the reciprocal,
# which differs in the last bit for about half of the codes.
EIGHT_BIT = np.arange(256, dtype=np.float32) / np.float32(255.0)


def as_8bit(image) -> np.ndarray | None:
    """The 8-bit codes [H, W, 3] uint8 of `image` when every value is exactly k / 255 in
    float32 for some k in 0..255, as the loaders compute it from an 8-bit file
    (`np.float32(k) / np.float32(255)`), else None (16-bit, float, composited on a background,
    synthetic): those stay float32, so nothing is rounded."""
    image = np.asarray(image)
    if image.dtype != np.float32:
        return None
    t = image * np.float32(255.0)
    np.rint(t, out=t)
    np.clip(t, 0.0, 255.0, out=t)  # (NaN stays NaN, and fails the comparison below)
    with np.errstate(invalid="ignore"):
        codes = t.astype(np.uint8)
    np.divide(codes, np.float32(255.0), out=t, dtype=np.float32)  # the loaders' formula
    return codes if np.array_equal(t, image) else None


def stack_images(views, what: str) -> np.ndarray:
    """The views' images [V, H, W, 3]: uint8 codes when every view's image is 8-bit
    (`as_8bit`), else float32. A TrainError when the views differ in size or are not RGB."""
    if not views:
        raise TrainError(f"the {what} set has no views")
    first: dict = {}  # each size -> the first view that has it
    for v in views:
        first.setdefault((int(v.width), int(v.height)), v)
    if len(first) > 1:
        shown = ", ".join(f"{w}x{h} (first: {getattr(v, 'name', '?')})"
                          for (w, h), v in list(first.items())[:4])  # fmt: skip
        raise TrainError(
            f"the {what} views have {len(first)} different image sizes: {shown}; "
            "training needs one size (resize or downscale the dataset)"
        )
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        codes = list(pool.map(lambda v: as_8bit(v.image), views))  # (NumPy releases the GIL)
    if any(c is None for c in codes):
        codes = None
    images = (
        np.stack(codes) if codes else np.stack([np.asarray(v.image, np.float32) for v in views])
    )
    if images.ndim != 4 or images.shape[-1] != 3:
        raise TrainError(f"the {what} images must be [H, W, 3], got {list(images.shape[1:])}")
    return images


def float_images(images):
    """Stacked images (or one) as float32 in [0, 1]: uint8 codes through `EIGHT_BIT`, bit for
    bit the loaders' values; float32 as they are. Works on device arrays (inside a compiled
    step) and on NumPy arrays."""
    if images.dtype != np.uint8:
        return images
    if isinstance(images, np.ndarray):
        return EIGHT_BIT[images]
    return jnp.asarray(EIGHT_BIT)[images]


def stack_views(views, what: str, alphas: bool = False, images=None) -> dict:
    """{"images": [V, H, W, 3] uint8 or float32 (`stack_images`; read them with
    `float_images`), "cameras": a Camera batched over V} and, with `alphas`, "alphas":
    [V, H, W, 1] float32 (the views' coverage; a TrainError when a view has none). images:
    `stack_images(views, what)` when the caller has it already."""
    if images is None:
        images = stack_images(views, what)
    cams = [v.camera() if callable(v.camera) else v.camera for v in views]
    # float32 leaves whatever the views hold: one trace for every dataset.
    cams = [jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), c) for c in cams]
    out = {"images": jnp.asarray(images), "cameras": Camera.stack(cams)}
    if alphas:
        out["alphas"] = jnp.asarray(stack_alphas(views, what, images.shape[1:3]))
    return out


# The share of the free device memory the training and test images may take: the rest is the
# render's (its tile entries, the backward pass) and the optimiser's.
IMAGE_SHARE = 0.5


def free_memory(device=None) -> tuple[int | None, str]:
    """(bytes free, what they are) on `device` (default: the first): the accelerator's
    `memory_stats()` limit less what is in use; on a CPU, or where a backend reports no
    stats, the host's available physical memory; None where neither is known."""
    device = device or jax.devices()[0]
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 (backends without the call raise their own kinds)
        stats = None
    if stats and stats.get("bytes_limit"):
        free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
        limit = size_text(stats["bytes_limit"])
        return free, f"free on {device.device_kind} {device.id} (of {limit})"
    free, what = host_available_memory()
    if free is None:
        return None, "unknown"
    return free, f"of {what} ({device.platform} device)"


def _read_meminfo() -> str | None:
    """/proc/meminfo's text, or None where there is none (not Linux) or it cannot be read."""
    try:
        return Path("/proc/meminfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


def host_available_memory() -> tuple[int | None, str]:
    """(bytes, what they are): Linux's MemAvailable (free memory plus the page cache and other
    memory the kernel can reclaim), else the host's physical memory; None where neither is
    known. (MemFree alone, SC_AVPHYS_PAGES, leaves out the page cache: after reading a dataset
    it can be a small part of what a run can have.)"""
    m = re.search(r"^MemAvailable:\s*([0-9]+)\s*kB\s*$", _read_meminfo() or "", re.MULTILINE)
    if m is not None:
        return int(m[1]) * 1024, "available host memory"
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "host physical memory"
    except (AttributeError, ValueError, OSError):
        return None, "unknown"


def check_image_memory(sets, alphas: bool, free=None, itemsizes=None) -> None:
    """A TrainError, before any image is put on the device, when the views of `sets` (the
    training and test views) take more than IMAGE_SHARE of the free device memory (plus
    float32 alpha with `alphas`, for the training views): the numbers and the downscale that
    would fit. itemsizes: the bytes a value of each set's images takes on the device (1 for
    uint8, 4 for float32: `stack_images(...).itemsize`; default 4). free: (bytes, what) as
    `free_memory` gives it (a test passes its own)."""
    have, where = free if free is not None else free_memory()
    if have is None:
        return
    itemsizes = list(itemsizes) if itemsizes is not None else [4] * len(sets)
    count = sum(len(views) for views in sets)
    need = 0
    for k, views in enumerate(sets):
        per_pixel = 3 * itemsizes[k] + (4 if alphas and k == 0 else 0)
        need += sum(int(v.width) * int(v.height) * per_pixel for v in views)
    if need <= IMAGE_SHARE * have:
        return
    factor = math.ceil(math.sqrt(need / (IMAGE_SHARE * have)))
    shrink = 2 ** math.ceil(math.log2(factor))
    v = sets[0][0] if sets and sets[0] else None
    size = f" of {v.width}x{v.height}" if v is not None else ""
    kinds = {1: "uint8", 4: "float32"}
    used = {kinds.get(b, f"{b}-byte values") for b, vs in zip(itemsizes, sets, strict=True) if vs}
    used = sorted(used, reverse=True)  # uint8 first
    said = " and ".join(used) + (" (alpha float32)" if alphas else "")
    raise TrainError(
        f"the {count} training and test images{size} need {size_text(need)} on the device as "
        f"{said}, more than {IMAGE_SHARE:.0%} of the {size_text(have)} {where} (the rest is for "
        f"rendering and the optimiser); train on smaller images: --images images_{shrink} where "
        f"the dataset has that folder (the Mip-NeRF 360 layout), else --downscale {factor} "
        f"(about {size_text(need / factor**2)})"
    )


def stack_alphas(views, what: str, size) -> np.ndarray:
    """The views' alpha as [V, H, W, 1] float32 for `random_background` (size: (H, W))."""
    missing = [v for v in views if getattr(v, "alpha", None) is None]
    if missing:
        raise TrainError(
            f"--random-background needs RGBA {what} images; {len(missing)} of {len(views)} "
            f"views have no alpha (e.g. {getattr(missing[0], 'name', '?')!r})"
        )
    alphas = np.stack([np.asarray(v.alpha, np.float32) for v in views])
    if alphas.shape != (len(views), *size):
        raise TrainError(
            f"the {what} alphas must be [H, W] = {list(size)}, got {list(alphas.shape[1:])}"
        )
    return alphas[..., None]


def infer_background(views, log=None) -> np.ndarray:
    """The median colour where the views' alpha is 0 (rounded to 8 bits); black without alpha
    or without a transparent pixel. `log` (a callable) gets one line saying which it was."""
    bgs, with_alpha = [], 0
    for v in views:
        alpha = getattr(v, "alpha", None)
        if alpha is None:
            continue
        with_alpha += 1
        empty = np.asarray(alpha) <= 0.0
        if empty.any():
            bgs.append(np.asarray(v.image)[empty])
    if not bgs:
        if log is not None:
            why = (
                f"none of the {len(views)} training views has alpha" if not with_alpha
                else f"the alpha of the {with_alpha} training views with one is nowhere 0"
            )  # fmt: skip
            log(f"background: black (0, 0, 0) assumed: {why} (set TrainConfig.background if the "
                "images were composited on another colour)")  # fmt: skip
        return np.zeros(3, np.float32)
    bg = np.round(np.median(np.concatenate(bgs), axis=0) * 255.0).astype(np.float32) / 255.0
    if log is not None:
        pixels = sum(len(b) for b in bgs)
        log(f"background: {numbers_text(bg, 4)} inferred: the median colour of the {pixels:,} "
            f"transparent pixels of {len(bgs)} of the {len(views)} training views")  # fmt: skip
    return bg


class ViewOrder:
    """Each epoch visits every training view once, in a seeded order (stateless in step)."""

    def __init__(self, seed: int, n_views: int) -> None:
        self.seed, self.n_views = seed, n_views
        self._epoch, self._perm = -1, None

    def __call__(self, step: int) -> int:
        epoch = step // self.n_views
        if epoch != self._epoch:
            self._epoch = epoch
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n_views)
        return int(self._perm[step % self.n_views])

    def views(self, step: int, devices: int):
        """The view index (devices == 1) or indices [devices] for training step `step`."""
        if devices == 1:
            return np.int32(self(step))
        return np.asarray([self(step * devices + i) for i in range(devices)], np.int32)
