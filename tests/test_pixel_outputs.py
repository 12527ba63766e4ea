"""RenderConfig(pixel_outputs=False): a spec's per-pixel outputs (2DGS's depth, depth_sq and
normal) left out of compositing. The image, alpha and gradients of what is still rendered equal
the full render's (both compositors; the Pallas kernels interpreted on a CPU) and the 2DGS
NumPy reference's; `extra` is None; the compositor sums fewer channels; and the modes that read
the emitted depth refuse the option rather than switch to the sort depth."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_2dgs
from conftest import ROOT

from xprc import verify
from xprc.camera import look_at
from xprc.compiler.driver import load
from xprc.errors import XprError
from xprc.pipeline import RenderConfig, render

W, H, N = 40, 32, 16


@pytest.fixture(scope="module")
def surfels():
    return load(ROOT / "specs" / "2dgs.xpr")


def _scene(method):
    raw = verify.scene(method, "random", N, seed=3)
    return {k: jnp.asarray(v, jnp.float32) for k, v in raw.items()}


def _camera():
    return look_at([0.0, 0.0, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], W, H, 60.0, near=0.01,
                   dtype=np.float32)  # fmt: skip


def _config(compositor: str, **kw) -> RenderConfig:
    base = verify.config_for(N, W, H, 8)
    return dataclasses.replace(base, compositor=compositor, **kw)


@pytest.mark.parametrize("compositor", ["xla", "pallas"])
def test_alpha_only_render_equals_the_full_render_and_the_reference(surfels, compositor):
    raw, cam = _scene(surfels), _camera()
    full = render(surfels, raw, cam, config=_config(compositor))
    lean = render(surfels, raw, cam, config=_config(compositor, pixel_outputs=False))
    assert full.extra is not None and full.extra.shape[-1] == 5 and lean.extra is None
    np.testing.assert_allclose(np.asarray(lean.image), np.asarray(full.image), atol=1e-6)
    np.testing.assert_allclose(np.asarray(lean.alpha), np.asarray(full.alpha), atol=1e-6)
    colour, alpha, _depth, _normal = reference_2dgs.render(
        {k: np.asarray(v, np.float64) for k, v in raw.items()},
        np.asarray(cam.viewmat), np.asarray(cam.K), W, H,
    )  # fmt: skip
    assert alpha.max() > 0.3  # the scene shows something
    assert np.abs(np.asarray(lean.image) - colour).max() <= 1e-4
    assert np.abs(np.asarray(lean.alpha)[..., 0] - alpha).max() <= 1e-4


@pytest.mark.parametrize("compositor", ["xla", "pallas"])
def test_alpha_only_gradients_equal_the_full_renders(surfels, compositor):
    raw, cam = _scene(surfels), _camera()
    target = jax.random.uniform(jax.random.PRNGKey(0), (H, W, 3), jnp.float32)

    def loss(params, config):
        out = render(surfels, params, cam, config=config)
        return jnp.mean((out.image - target) ** 2) + jnp.mean(out.alpha)

    full = jax.grad(loss)(raw, _config(compositor))
    lean = jax.grad(loss)(raw, _config(compositor, pixel_outputs=False))
    for name in raw:
        scale = float(jnp.abs(full[name]).max())
        assert scale > 0, name  # every parameter gets a gradient
        np.testing.assert_allclose(np.asarray(lean[name]), np.asarray(full[name]),
                                   atol=1e-5 * scale, err_msg=name)  # fmt: skip


def test_the_compositor_sums_six_channels_not_eleven(surfels):
    raw, cam = _scene(surfels), _camera()

    def size(config):
        fn = lambda p: render(surfels, p, cam, config=config).image  # noqa: E731
        return len(jax.make_jaxpr(fn)(raw).eqns), str(jax.make_jaxpr(fn)(raw))

    (n_full, full), (n_lean, lean) = size(_config("xla")), size(_config("xla", pixel_outputs=False))
    assert n_lean <= n_full
    # the sums the compositor returns: 3 colours + sort depth + 5 outputs + weight + clamp count
    # with them, 3 + 1 + 1 + 1 without
    assert ",11]" in full and ",11]" not in lean and ",6]" in lean


@pytest.mark.parametrize("mode, distortion", [("D", False), ("RGB+ED", False), ("RGB", True)])
def test_modes_that_read_the_emitted_depth_refuse_it(surfels, mode, distortion):
    raw, cam = _scene(surfels), _camera()
    config = _config("xla", pixel_outputs=False, distortion=distortion)
    with pytest.raises(XprError, match="pixel_outputs=False.*depth.*keep pixel_outputs=True"):
        render(surfels, raw, cam, mode=mode, config=config)


def test_a_spec_without_outputs_renders_the_same_with_it_off():
    gs = load(ROOT / "specs" / "3dgs.xpr")
    raw, cam = _scene(gs), _camera()
    a = render(gs, raw, cam, mode="RGB+D", config=_config("xla"))
    b = render(gs, raw, cam, mode="RGB+D", config=_config("xla", pixel_outputs=False))
    assert a.extra is None and b.extra is None
    np.testing.assert_array_equal(np.asarray(a.image), np.asarray(b.image))
    np.testing.assert_array_equal(np.asarray(a.depth), np.asarray(b.depth))


def test_the_option_is_checked():
    with pytest.raises(XprError, match="pixel_outputs"):
        RenderConfig(pixel_outputs="no")


@pytest.mark.parametrize("form", ["squared", "l1"])
def test_a_run_with_the_regularisers_refuses_it_before_training(surfels, form):
    """The trainer's own render config may not leave out the outputs the 2DGS regularisers
    read: the squared form failed inside the traced step with a ValueError (a traceback), the
    l1 form with the renderer's error naming the distortion output, not the run's options."""
    from spec_training import train_spec

    from xprc.train import TrainConfig, TrainError

    lean = RenderConfig(pixel_outputs=False)
    said = (r"^error: render: RenderConfig\(pixel_outputs=False\) leaves out the per-pixel "
            r"depth, depth_sq, normal\.x, normal\.y, normal\.z the 2DGS regularisers read "
            r"\(regularisers 'auto' for Surfel2D\): keep pixel_outputs=True, or set "
            r"regularisers 'off'$")  # fmt: skip
    with pytest.raises(TrainError, match=said):
        train_spec(surfels, steps=6, render=lean, distortion_form=form)
    assert not TrainConfig(render=lean, regularisers="off").regularised(surfels)


def test_the_distributed_losses_refuse_it_where_the_depth_is_read(surfels):
    """xprc.distributed renders through the compiled render, not `render`: a sharded or
    reference loss of mode "RGB+D" with the outputs left out read the sort depth silently."""
    from xprc.distributed import data_parallel_loss, device_mesh, reference_loss

    lean = _config("xla", pixel_outputs=False)
    loss = lambda out, target: jnp.mean(out.depth)  # noqa: E731
    said = "pixel_outputs=False.*depth.*mode 'RGB\\+D'.*keep pixel_outputs=True"
    with pytest.raises(XprError, match=said):
        data_parallel_loss(surfels, loss, device_mesh(1), "RGB+D", lean)
    with pytest.raises(XprError, match=said):
        reference_loss(surfels, loss, "RGB+D", lean)
    data_parallel_loss(surfels, loss, device_mesh(1), "RGB", lean)  # nothing reads the depth


def test_evaluation_renders_the_image_alone_and_equals_a_full_render(surfels, monkeypatch):
    """The trainer's evaluation reads only the image: it renders without the outputs and the
    distortion sum, even with a render config that asks for the distortion (the l1 form's),
    and its image and PSNR are those of a full render (PSNR computed here)."""
    from xprc.camera import Camera
    from xprc.train import step

    seen = []

    def spy(method, params, camera, background=None, mode="RGB", config=None):
        seen.append((config.pixel_outputs, config.distortion))
        return render(method, params, camera, background, mode, config)

    monkeypatch.setattr(step, "render", spy)
    step.eval_fn.cache_clear()
    raw, cam = _scene(surfels), _camera()
    bg = jnp.asarray([0.2, 0.3, 0.4], jnp.float32)
    full = render(surfels, raw, cam, background=bg, config=_config("xla"))
    gt = np.random.default_rng(0).uniform(0, 1, (H, W, 3)).astype(np.float32)
    try:
        fn = step.eval_fn(surfels, _config("xla", distortion=True))
        img, dropped, _needed = fn(
            raw, jnp.int32(10**6), jnp.int32(1000), bg, Camera.stack([cam]), 0
        )
        psnr, _ssim = step.eval_metrics(img, jnp.asarray(gt[None]), 0)
    finally:
        step.eval_fn.cache_clear()
    assert seen == [(False, False)]
    want = np.clip(np.asarray(full.image, np.float64), 0, 1)
    np.testing.assert_allclose(np.asarray(img), want, atol=1e-6)
    mse = np.mean((want - gt) ** 2)
    assert float(psnr) == pytest.approx(-10 * np.log10(mse), abs=1e-4)
    assert int(dropped) == 0
