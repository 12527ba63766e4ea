"""PSNR and SSIM (xprc.metrics) against scikit-image, and SSIM's gradient."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

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
