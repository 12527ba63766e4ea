"""PSNR and SSIM (xprc.metrics) against scikit-image, and SSIM's gradient."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from xprc.errors import XprError
from xprc.metrics import gaussian_window, image_metrics, psnr, ssim, ssim_radius


def _pair(seed: int, h: int, w: int, noise: float):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 1, (h, w, 3))
    # Smooth structure plus noise, so SSIM is far from both 0 and 1.
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    a = 0.5 * a + 0.5 * (0.5 + 0.5 * np.sin(6 * xx + 4 * yy))[..., None]
    b = np.clip(a + noise * rng.standard_normal(a.shape), 0, 1)
    return a, b


def _skimage_ssim(a, b):
    return structural_similarity(
        a,
        b,
        gaussian_weights=True,
        sigma=1.5,
        use_sample_covariance=False,
        data_range=1.0,
        channel_axis=-1,
    )


def test_window_is_scipy_gaussian_filter_kernel():
    from scipy.ndimage import gaussian_filter1d

    impulse = np.zeros(31)
    impulse[15] = 1.0
    expect = gaussian_filter1d(impulse, 1.5, truncate=3.5)[10:21]
    np.testing.assert_allclose(gaussian_window(), expect, atol=1e-15)


@pytest.mark.parametrize(("h", "w", "noise"), [(32, 32, 0.1), (23, 41, 0.3), (64, 48, 0.02)])
def test_ssim_matches_skimage(h, w, noise):
    a, b = _pair(h * w, h, w, noise)
    expect = _skimage_ssim(a, b)
    got64 = float(ssim(jnp.asarray(a), jnp.asarray(b)))
    got32 = float(ssim(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)))
    assert abs(got64 - expect) < 1e-10
    assert abs(got32 - expect) < 1e-4


def test_ssim_of_identical_images_is_one():
    a, _ = _pair(0, 20, 20, 0.0)
    assert float(ssim(jnp.asarray(a, jnp.float32), jnp.asarray(a, jnp.float32))) == pytest.approx(
        1.0, abs=1e-6
    )


def test_psnr_matches_skimage():
    a, b = _pair(1, 30, 30, 0.05)
    expect = peak_signal_noise_ratio(a, b, data_range=1.0)
    assert float(psnr(jnp.asarray(a), jnp.asarray(b))) == pytest.approx(expect, abs=1e-9)
    both = image_metrics(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    assert float(both["psnr"]) == pytest.approx(expect, abs=1e-4)
    assert float(both["ssim"]) == pytest.approx(_skimage_ssim(a, b), abs=1e-4)


def test_ssim_gradient_matches_finite_differences():
    a, b = _pair(2, 16, 16, 0.2)
    a, b = jnp.asarray(a), jnp.asarray(b)
    grad = jax.grad(lambda x: ssim(x, b))(a)
    rng = np.random.default_rng(3)
    direction = jnp.asarray(rng.standard_normal(a.shape))
    eps = 1e-6
    fd = (ssim(a + eps * direction, b) - ssim(a - eps * direction, b)) / (2 * eps)
    assert float(jnp.sum(grad * direction)) == pytest.approx(float(fd), rel=1e-6, abs=1e-9)


def _twin_ssim(a, b, radius: int):
    """scikit-image's SSIM written out with scipy (gaussian_filter, mode 'reflect', crop the
    radius, mean over channels) and the Gaussian's truncation as a parameter: skimage fixes it
    at 3.5 sigma (radius 5) and refuses images under 11 px instead."""
    from scipy.ndimage import gaussian_filter

    def filt(x):
        sig = (1.5, 1.5, 0.0)
        return gaussian_filter(x, sig, truncate=radius / 1.5, mode="reflect")

    ux, uy = filt(a), filt(b)
    vx, vy, vxy = filt(a * a) - ux * ux, filt(b * b) - uy * uy, filt(a * b) - ux * uy
    c1, c2 = 0.01**2, 0.03**2
    s = (2 * ux * uy + c1) * (2 * vxy + c2) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    h, w = a.shape[:2]
    return float(np.mean(s[radius : h - radius, radius : w - radius]))


def test_twin_is_skimage_at_the_standard_window():
    a, b = _pair(5, 19, 14, 0.2)
    assert _twin_ssim(a, b, 5) == pytest.approx(_skimage_ssim(a, b), abs=1e-12)


@pytest.mark.parametrize(("h", "w", "radius"), [(10, 30, 4), (7, 7, 3), (12, 4, 1), (2, 9, 0)])
def test_ssim_of_small_images_shrinks_the_window_and_warns(h, w, radius):
    """Issue 26: under 11 px the cropped SSIM map was empty and SSIM NaN (skimage refuses such
    images). The window now shrinks to the largest that fits; the value is the twin's with
    that truncation, and a warning says it is not the standard SSIM."""
    a, b = _pair(h + 100 * w, h, w, 0.2)
    assert ssim_radius(h, w) == radius
    with pytest.raises(ValueError, match="win_size exceeds image extent"):
        _skimage_ssim(a, b)
    n = 2 * radius + 1
    message = (
        f"SSIM of {h}x{w} images: the standard 11x11 window does not fit, using {n}x{n} (the "
        f"sigma 1.5 Gaussian cut at radius {radius}); the value is not comparable with an "
        "11x11 SSIM"
    )
    with pytest.warns(RuntimeWarning) as record:
        got = float(ssim(jnp.asarray(a), jnp.asarray(b)))
    assert [str(r.message) for r in record] == [message]
    assert np.isfinite(got)
    assert got == pytest.approx(_twin_ssim(a, b, radius), abs=1e-10)


def test_ssim_at_eleven_pixels_keeps_the_standard_window_without_warning():
    a, b = _pair(11, 11, 11, 0.2)
    assert ssim_radius(11, 11) == 5
    assert float(ssim(jnp.asarray(a), jnp.asarray(b))) == pytest.approx(
        _skimage_ssim(a, b), abs=1e-10
    )


# ------------------------------------------------------------------ inputs (nothing silent)


def _uint8_pair(seed: int = 7, h: int = 24, w: int = 20):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    b = np.clip(a.astype(np.int64) + rng.integers(-40, 41, a.shape), 0, 255).astype(np.uint8)
    return a, b


def _numpy_psnr(a, b, data_range):
    """PSNR written out in float64 NumPy, independent of xprc and scikit-image."""
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return 10.0 * np.log10(data_range**2 / mse)


def test_psnr_of_uint8_images_is_computed_in_floating_point():
    """The audit: uint8 a - b wrapped (29.70 dB instead of 26.24)."""
    a, b = _uint8_pair()
    expect = _numpy_psnr(a, b, 255.0)
    assert float(psnr(a, b, data_range=255)) == pytest.approx(expect, abs=1e-4)
    assert float(psnr(jnp.asarray(a), jnp.asarray(b), 255)) == pytest.approx(expect, abs=1e-4)
    floats = float(psnr(a / 255.0, b / 255.0))
    assert floats == pytest.approx(_numpy_psnr(a / 255.0, b / 255.0, 1.0), abs=1e-4)
    assert floats == pytest.approx(expect, abs=1e-4)
    # one integer and one float image (both on the 0..255 scale)
    assert float(psnr(a, b.astype(np.float32), 255)) == pytest.approx(expect, abs=1e-4)


def test_ssim_of_uint8_images_equals_ssim_of_the_same_images_in_zero_one():
    a, b = _uint8_pair()
    got = float(ssim(a, b, data_range=255))
    want = float(ssim(jnp.asarray(a / 255.0), jnp.asarray(b / 255.0)))
    assert got == pytest.approx(want, abs=1e-5)
    assert got == pytest.approx(_skimage_ssim(a / 255.0, b / 255.0), abs=1e-4)
    assert got < 0.99  # the audit's 0.9987 was the uint8 values against data_range 1


@pytest.mark.parametrize("fn", [psnr, ssim])
def test_an_integer_image_without_data_range_is_an_error(fn):
    a, b = _uint8_pair()
    name = fn.__name__
    with pytest.raises(XprError) as e:
        fn(a, b)
    assert str(e.value) == (
        f"error: {name}: a is a uint8 image: give data_range (255 for uint8 images); the default "
        "data_range, 1.0, is for floating images in [0, 1]"
    )
    with pytest.raises(XprError) as e:
        fn(a / 255.0, b.astype(np.int32))
    assert str(e.value).startswith(f"error: {name}: b is a int32 image: give data_range")


@pytest.mark.parametrize("fn", [psnr, ssim])
def test_images_of_different_shapes_are_an_error(fn):
    """The audit: psnr(img[H, W, 3], img[H, W, 1]) broadcast and gave 9.38 dB."""
    a, _ = _pair(4, 16, 16, 0.1)
    with pytest.raises(XprError) as e:
        fn(a, a[..., :1])
    assert str(e.value) == (
        f"error: {fn.__name__}: a and b must have the same shape, got a (16, 16, 3) and "
        "b (16, 16, 1)"
    )


def test_bad_data_range_empty_and_flat_images_are_errors():
    a, b = _pair(4, 16, 16, 0.1)
    for bad, shown in ((0, "0"), (-1.0, "-1.0"), (float("nan"), "nan"), (float("inf"), "inf")):
        with pytest.raises(XprError) as e:
            psnr(a, b, bad)
        assert str(e.value) == (
            f"error: psnr: data_range must be a positive finite number, got {shown}"
        )
    with pytest.raises(XprError, match=r"^error: ssim: data_range must be a number, got '1'$"):
        ssim(a, b, "1")
    with pytest.raises(XprError, match=r"^error: psnr: the images are empty \(shape \(0, 3\)\)$"):
        psnr(np.zeros((0, 3)), np.zeros((0, 3)))
    with pytest.raises(XprError) as e:
        ssim(a[..., 0], b[..., 0])
    assert str(e.value) == "error: ssim: images must be [H, W, C], got shape (16, 16)"
