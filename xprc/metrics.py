"""Image metrics in JAX: PSNR and SSIM (11x11 Gaussian window, sigma 1.5).

SSIM follows scikit-image's `structural_similarity(..., gaussian_weights=True, sigma=1.5,
use_sample_covariance=False, data_range=1)`: the window is scipy's `gaussian_filter` kernel
(truncate 3.5 -> radius 5), borders are reflected (`mode="symmetric"` in NumPy terms), the SSIM
map is cropped by the window radius before averaging, and channels are averaged. The same
function, differentiable, is the structural term of the training loss.

Images under 11 pixels on a side: scikit-image refuses them ("win_size exceeds image extent") and
the cropped map would be empty (a NaN mean). Here the window shrinks to the largest that fits, the
same Gaussian (sigma 1.5) cut at radius (min(H, W) - 1) // 2 and renormalised, which is what
scikit-image computes with that truncation (tests/test_metrics.py), and `ssim` warns that the
value is not the standard 11x11 SSIM (`ssim_radius` says which window an image size gets).

Inputs: both images have the same shape (no broadcasting) and are computed in floating point:
an integer image (uint8, ...) is cast to float before any arithmetic (its subtraction wrapped)
and needs an explicit `data_range` (255 for uint8); the default, None, means 1.0 and is only
for floating images in [0, 1]. Floating inputs keep their precision (float16 and bfloat16 are
computed in float32). Anything else is an `XprError` naming the argument.
"""

from __future__ import annotations

import math
import numbers
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .errors import XprError

SSIM_SIGMA = 1.5
SSIM_RADIUS = 5  # int(3.5 * 1.5 + 0.5), scipy's truncate=3.5 -> an 11-tap window


def gaussian_window(sigma: float = SSIM_SIGMA, radius: int = SSIM_RADIUS) -> np.ndarray:
    """The normalised 1-D Gaussian taps [2 radius + 1] (float64)."""
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.exp(-0.5 * (x / sigma) ** 2)
    return w / w.sum()


def ssim_radius(height: int, width: int) -> int:
    """The SSIM window radius for an image of this size: SSIM_RADIUS (an 11x11 window), or the
    largest radius whose window fits an image under 11 pixels on a side (0 for one pixel)."""
    return max(0, min(SSIM_RADIUS, (min(int(height), int(width)) - 1) // 2))


def small_image_message(height: int, width: int) -> str:
    r = ssim_radius(height, width)
    n = 2 * SSIM_RADIUS + 1
    return (
        f"SSIM of {height}x{width} images: the standard {n}x{n} window does not fit, using "
        f"{2 * r + 1}x{2 * r + 1} (the sigma {SSIM_SIGMA} Gaussian cut at radius {r}); the value "
        f"is not comparable with an {n}x{n} SSIM"
    )


def _array(fn: str, arg: str, x) -> jax.Array:
    try:
        return jnp.asarray(x)
    except (TypeError, ValueError) as e:
        raise XprError(
            f"{fn}: {arg} is not an array of numbers ({type(x).__name__}: {e})"
        ) from None


def _images(fn: str, a, b, data_range) -> tuple[jax.Array, jax.Array, float]:
    """(a, b, data_range) checked and in one floating dtype; an XprError naming `fn`'s argument.

    Integer (and boolean) images are cast to float before any arithmetic, and need an explicit
    `data_range`; None means 1.0, for floating images in [0, 1]."""
    a, b = _array(fn, "a", a), _array(fn, "b", b)
    if a.shape != b.shape:
        raise XprError(
            f"{fn}: a and b must have the same shape, got a {tuple(a.shape)} and b {tuple(b.shape)}"
        )
    if a.size == 0:
        raise XprError(f"{fn}: the images are empty (shape {tuple(a.shape)})")
    for arg, x in (("a", a), ("b", b)):
        if jnp.issubdtype(x.dtype, jnp.complexfloating):
            raise XprError(f"{fn}: {arg} is a {x.dtype} image; images must be real")
    floating = [x.dtype for x in (a, b) if jnp.issubdtype(x.dtype, jnp.floating)]
    if data_range is None:
        exact = [(arg, x.dtype) for arg, x in (("a", a), ("b", b))
                 if not jnp.issubdtype(x.dtype, jnp.floating)]  # fmt: skip
        if exact:
            arg, dtype = exact[0]
            raise XprError(
                f"{fn}: {arg} is a {dtype} image: give data_range (255 for uint8 images); the "
                "default data_range, 1.0, is for floating images in [0, 1]"
            )
        data_range = 1.0
    if isinstance(data_range, bool) or not isinstance(data_range, numbers.Real):
        raise XprError(f"{fn}: data_range must be a number, got {data_range!r}")
    if not (math.isfinite(data_range) and data_range > 0):
        raise XprError(f"{fn}: data_range must be a positive finite number, got {data_range}")
    # float16 / bfloat16 / integers -> float32; float32 and float64 stay as they are
    # (chosen by hand: the tests' strict promotion has no float32 + float64 rule)
    dtype = max((jnp.dtype(jnp.float32), *floating), key=lambda d: d.itemsize)
    return a.astype(dtype), b.astype(dtype), float(data_range)


def _filter(img: jax.Array, taps: np.ndarray) -> jax.Array:
    """Separable 'valid' filtering of a reflect-padded image: [H + 2r, W + 2r, C] -> [H, W, C]."""
    r = (len(taps) - 1) // 2
    h = img.shape[0] - 2 * r
    w = img.shape[1] - 2 * r
    rows = sum(float(t) * img[i : i + h] for i, t in enumerate(taps))
    return sum(float(t) * rows[:, j : j + w] for j, t in enumerate(taps))


def _ssim_images(fn: str, a, b, data_range) -> tuple[jax.Array, jax.Array, float]:
    a, b, data_range = _images(fn, a, b, data_range)
    if a.ndim != 3:
        raise XprError(f"{fn}: images must be [H, W, C], got shape {tuple(a.shape)}")
    return a, b, data_range


def ssim_map(
    a: jax.Array, b: jax.Array, data_range: float | None = None, radius: int = SSIM_RADIUS
) -> jax.Array:
    """Per-pixel SSIM of images a, b [H, W, C] -> [H, W, C] (not cropped), with the Gaussian
    window cut at `radius` (at most (min(H, W) - 1) // 2: the reflected border must fit).
    data_range as in `ssim`."""
    a, b, data_range = _ssim_images("ssim_map", a, b, data_range)
    return _ssim_map(a, b, data_range, radius)


def _ssim_map(a: jax.Array, b: jax.Array, data_range: float, radius: int) -> jax.Array:
    r = int(radius)
    taps = gaussian_window(radius=r)
    pad = ((r, r), (r, r), (0, 0))
    stack = jnp.concatenate([a, b, a * a, b * b, a * b], axis=-1)
    mu = _filter(jnp.pad(stack, pad, mode="symmetric"), taps)
    c = a.shape[-1]
    ux, uy, uxx, uyy, uxy = (mu[..., i * c : (i + 1) * c] for i in range(5))
    vx = uxx - ux * ux
    vy = uyy - uy * uy
    vxy = uxy - ux * uy
    c1 = (0.01 * data_range) ** 2
    c2 = (0.03 * data_range) ** 2
    num = (2.0 * ux * uy + c1) * (2.0 * vxy + c2)
    den = (ux * ux + uy * uy + c1) * (vx + vy + c2)
    return num / den


def ssim(a: jax.Array, b: jax.Array, data_range: float | None = None) -> jax.Array:
    """Mean SSIM of images a, b [H, W, C] of one shape (values in [0, data_range]) -> scalar.

    data_range: None (1.0) for floating images in [0, 1]; an integer image (uint8, ...) needs it
    given (255 for uint8) and is computed in floating point. The window radius is cropped from
    each border, as scikit-image does. Images under 11 pixels on a side get a smaller window
    (`ssim_radius`) and a RuntimeWarning (at trace time under jit).
    """
    a, b, data_range = _ssim_images("ssim", a, b, data_range)
    h, w = a.shape[:2]
    r = ssim_radius(h, w)
    if r < SSIM_RADIUS:
        warnings.warn(small_image_message(h, w), RuntimeWarning, stacklevel=2)
    s = _ssim_map(a, b, data_range, r)
    return jnp.mean(s[r : h - r, r : w - r])


def psnr(a: jax.Array, b: jax.Array, data_range: float | None = None) -> jax.Array:
    """Peak signal-to-noise ratio in dB of images a, b [..., C] of one shape -> scalar.

    data_range: None (1.0) for floating images in [0, 1]; an integer image (uint8, ...) needs it
    given (255 for uint8) and is computed in floating point (no wrapping subtraction).
    """
    a, b, data_range = _images("psnr", a, b, data_range)
    mse = jnp.mean((a - b) ** 2)
    return (20.0 * math.log10(data_range)) - 10.0 * jnp.log10(jnp.maximum(mse, 1e-20))


@jax.jit
def image_metrics(a: jax.Array, b: jax.Array) -> dict:
    """PSNR and SSIM of a rendered image against ground truth, both [H, W, C] in [0, 1]."""
    return {"psnr": psnr(a, b), "ssim": ssim(a, b)}
