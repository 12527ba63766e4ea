"""The jitted train step (render, loss, gradient, Adam, camera corrections, strategy) and the
jitted evaluation render. Each is traced once per (method, render config, devices, options):
every run-time choice is a traced array in `hyper` or the state.

The render capacity is explicit (`RenderConfig.max_entries`, `on_overflow="ignore"`): the step
returns the entries its render needed and dropped, and the loop discards a step that dropped
any (see `xprc.train.loop`).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from ..metrics import psnr, ssim
from ..pipeline import RenderConfig, render
from ..pipeline.params import prepare_params
from . import appearance, losses_2dgs
from .camera_opt import correct, corrections_optimizer, step_corrections
from .data import float_images
from .optim import adam_update, optimizer, sh_masked
from .strategies.adc import screen_gradient
from .strategies.base import per_prim
from .strategies.make import make_strategy

# Incremented each time the train step is traced: a test proves "compiled once per run".
TRACE_COUNT = {"train_step": 0, "eval": 0}
# render stats a step returns: for the capacity (dropped, needed) and the warnings (reports.py)
STATS = ("dropped", "entries_needed", "alpha_out_of_range", "nonfinite", "lens_outside")


@dataclasses.dataclass(frozen=True)
class StepKey:
    """Everything that selects a compiled step (hashable)."""

    method: object
    render: RenderConfig
    strategy: str
    devices: int = 1
    pose_opt: bool = False
    intrinsics_opt: bool = False
    regularisers: str | None = None  # the 2DGS terms' distortion form; None: off
    random_background: bool = False  # a random background colour per step (and view)
    appearance: str = "off"  # per-view colour compensation (xprc.train.appearance)


# The random backgrounds' stream: step i draws from fold_in(fold_in(key, BACKGROUND_STREAM), i);
# the strategies' fold_in(key, i) would meet it only at step BACKGROUND_STREAM (~1.65e9).
BACKGROUND_STREAM = 0x62676B64


def composite_target(gt, alpha, background, new):
    """The ground truth re-composited onto another background: gt [..., H, W, C] composited on
    `background` [C] with coverage alpha [..., H, W, 1] -> gt + (1 - alpha) (new - background),
    i.e. rgb * alpha + (1 - alpha) new; `new` [..., C] (one colour per leading index)."""
    new = new[..., None, None, :]
    old = jnp.reshape(background, (1,) * (new.ndim - 1) + (-1,)).astype(gt.dtype)
    return gt + (1.0 - alpha) * (new - old)


def random_backgrounds(key, step_i, shape, dtype):
    """The step's random background colours ~ U[0, 1]^shape (shape [C] or [devices, C]), drawn
    from their own stream of the run's key (the strategies' randomness is unchanged)."""
    k = jax.random.fold_in(jax.random.fold_in(key, BACKGROUND_STREAM), step_i)
    return jax.random.uniform(k, shape, dtype)


def photometric(pred, gt, ssim_weight):
    """(1 - w) L1 + w (1 - SSIM), the 3DGS loss (Kerbl et al. 2023, w = 0.2)."""
    l1 = jnp.mean(jnp.abs(pred - gt))
    return (1.0 - ssim_weight) * l1 + ssim_weight * (1.0 - ssim(pred, gt))


def _per_view(method, form: str | None):
    """(out, target, weights) -> {loss, psnr[, distortion, normal]} for one view; target:
    {"gt", "cam"[, "background"][, "colour"]}. The loss includes the weighted 2DGS terms with
    distortion form `form` unless it is None (weights: ssim, distortion, normal). With a
    "background" [C] the render `out` must be on black: its image is composited on it here, as
    the renderer would have (C + (1 - alpha) bg). With a "colour" [3, 4] the image is then
    compensated by the view's appearance transform (xprc.train.appearance)."""

    def per_view(out, target, w):
        gt, cam = target["gt"], target["cam"]
        image = out.image
        if "background" in target:  # rendered on black: composite on this view's background
            bg = target["background"][None, None, :].astype(image.dtype)
            image = image + (1.0 - out.alpha) * bg
        if "colour" in target:
            image = appearance.apply(image, target["colour"])
        res = {"loss": photometric(image, gt, w["ssim"]), "psnr": psnr(image, gt)}
        if form is not None:
            terms = losses_2dgs.terms(method, out, cam, form)
            res["loss"] = res["loss"] + w["distortion"] * terms["distortion"]
            res["loss"] = res["loss"] + w["normal"] * terms["normal"]
            res.update(terms)
        return res

    return per_view


def _render_loss(key: StepKey):
    """(params, cameras, gts, background, weights, colour) -> ({loss, psnr[, distortion,
    normal]}, stats {dropped, entries_needed}) over one view, or over `devices` views (one per
    device) averaged. Several devices take one background per view ([devices, C]) when
    `key.random_background`, else one for all ([C]). colour: the view's (views') appearance
    transform [3, 4] ([devices, 3, 4]), or None."""
    method, rconfig = key.method, key.render
    if key.regularisers == "l1":
        rconfig = dataclasses.replace(rconfig, distortion=True)
    if key.regularisers is None:  # no loss reads the per-pixel outputs: not composited
        rconfig = dataclasses.replace(rconfig, pixel_outputs=False)
    per_view = _per_view(method, key.regularisers)
    if key.devices > 1:
        from ..distributed import device_mesh, sharded_views

        sharded = sharded_views(method, per_view, device_mesh(key.devices), "RGB", rconfig)

        def loss(params, cams, gts, background, w, colour):
            targets, bg = {"gt": gts, "cam": cams}, background
            if key.random_background:  # per-view colours: render on black, composite per view
                targets["background"] = background
                bg = jnp.zeros(background.shape[-1:], gts.dtype)
            if colour is not None:
                targets["colour"] = colour
            sums, stats = sharded(prepare_params(method, params), cams, targets, bg, w)
            return {k: v / key.devices for k, v in sums.items()}, stats

        return loss

    def loss(params, cam, gt, background, w, colour):
        out = render(method, params, cam, background, config=rconfig)
        stats = {k: out.stats[k].astype(jnp.int32) for k in STATS}
        target = {"gt": gt, "cam": cam}
        if colour is not None:
            target["colour"] = colour
        return per_view(out, target, w), stats

    return loss


def _from_step(step_i, start, weight):
    """`weight` from step `start` on, 0 before (traced)."""
    return jnp.where(step_i >= start, weight, 0.0)


def _visible(method, params, cam):
    """[N] primitives whose footprint is valid and overlaps the image (one camera)."""
    proj = method.project(prepare_params(method, params), cam)
    box = proj["box"]
    on = (box[:, 2] >= 0) & (box[:, 0] < cam.width) & (box[:, 3] >= 0) & (box[:, 1] < cam.height)
    return proj["valid"] & on


def _screen(strategy, method, params, g_pos, cam, devices: int):
    """Summed NDC gradient norm [N] over the step's views and the views that saw each [N]."""
    pos = params[strategy.roles["position"]]

    def one(c):
        g = screen_gradient(g_pos * devices, pos, c)
        vis = _visible(method, params, c)
        return jnp.where(vis, jnp.linalg.norm(g, axis=-1), 0.0), vis.astype(jnp.int32)

    if devices == 1:
        return one(cam)
    norms, vis = jax.vmap(one)(cam)
    return jnp.sum(norms, axis=0), jnp.sum(vis, axis=0)


@functools.cache
def step_fn(key: StepKey):
    """The jitted `(state, data, hyper, view) -> (state, info)` for `key` (cached)."""
    method = key.method
    strategy = make_strategy(key.strategy, method)
    pos = strategy.roles["position"]
    render_loss = _render_loss(key)

    def step(state, data, hyper, view):
        TRACE_COUNT["train_step"] += 1
        step_i = state["step"]
        params = state["params"]
        gt, background = _target(key, state, data, hyper, view)
        cam = jax.tree_util.tree_map(lambda a: a[view], data["cameras"])
        progress = jnp.minimum(step_i.astype(jnp.float32) / hyper["total_steps"], 1.0)
        pos_factor = hyper["scene_scale"] * jnp.power(hyper["position_lr_final"], progress)

        def loss_fn(p, corr, app):
            c = correct(cam, corr, view, hyper["pose_pivot"]) if corr else cam
            masked = sh_masked(method, p, step_i, hyper["sh_interval"])
            weights = _loss_weights(key, hyper, step_i)
            colour = app["affine"][view] if app else None
            values, stats = render_loss(masked, c, gt, background, weights, colour)
            loss = values["loss"] + strategy.regulariser(method.activate(p), hyper)
            return loss, (values, stats, c, masked)

        grad = jax.value_and_grad(loss_fn, argnums=(0, 1, 2), has_aux=True)
        (loss, (values, stats, c, masked)), (grads, g_corr, g_app) = grad(
            params, state["cams"], state["appearance"]
        )
        used = state["used"]
        if strategy.freeze_unused:
            grads = {k: g * per_prim(used, g).astype(g.dtype) for k, g in grads.items()}
        opt = optimizer(hyper["lrs"], {pos: pos_factor})
        new_params, opt_state = adam_update(opt, grads, state["opt"], params)
        new_state = dict(state)
        if state["cams"]:
            copt = corrections_optimizer(
                state["cams"],
                hyper["pose_lr"] * jnp.power(hyper["pose_lr_final"], progress),
                hyper["intrinsics_lr"],
                hyper["scene_scale"],
            )
            new_state["cams"], new_state["cams_opt"] = step_corrections(
                copt, g_corr, state["cams_opt"], state["cams"]
            )
        if state["appearance"]:
            aopt = appearance.appearance_optimizer(
                state["appearance"],
                hyper["appearance_lr"] * jnp.power(hyper["appearance_lr_final"], progress),
            )
            new_state["appearance"], new_state["appearance_opt"] = appearance.step_appearance(
                aopt, g_app, state["appearance_opt"], state["appearance"]
            )
        ctx = {
            "step": step_i + 1,
            "key": jax.random.fold_in(state["key"], step_i),
            "hyper": hyper,
            "lr_pos": hyper["lrs"][pos].reshape(()) * pos_factor,
            "scene_scale": hyper["scene_scale"],
        }
        if strategy.needs_screen_grad:
            ctx["screen_grad"], ctx["visible"] = _screen(
                strategy, method, masked, grads[pos], c, key.devices
            )
        new_params, opt_state, used, sstate, counts = strategy.update(
            new_params, opt_state, used, state["strategy"], ctx
        )
        new_state.update(
            params=new_params, opt=opt_state, step=step_i + 1, used=used, strategy=sstate
        )
        info = {
            "loss": loss,
            "psnr": values["psnr"],
            **{k: values[k] for k in ("distortion", "normal") if k in values},
            "live": strategy.live(method.activate(new_params), used, hyper),
            **{k: stats[k] for k in STATS},
            "finite": _finite(new_params, new_state["cams"], new_state["appearance"]),
            **counts,
        }
        if key.random_background:
            info["background"] = background
        return new_state, info

    return jax.jit(step)


def _target(key: StepKey, state, data, hyper, view):
    """(the view's ground truth, the background to render on): with random backgrounds, the
    target's transparent parts are composited on this step's random colour."""
    gt = float_images(data["images"][view])  # (uint8 on the device for 8-bit files)
    background = hyper["background"]
    if key.random_background:
        shape = tuple(gt.shape[:-3]) + tuple(background.shape)  # [C] or [devices, C]
        background = random_backgrounds(state["key"], state["step"], shape, gt.dtype)
        gt = composite_target(gt, data["alphas"][view], hyper["background"], background)
    return gt, background


def _loss_weights(key: StepKey, hyper, step_i):
    """The loss terms' weights at this step (the regularisers start at their own step)."""
    weights = {"ssim": hyper["ssim_weight"]}
    if key.regularisers is not None:
        weights["distortion"] = _from_step(
            step_i, hyper["distortion_from"], hyper["distortion_weight"]
        )
        weights["normal"] = _from_step(step_i, hyper["normal_from"], hyper["normal_weight"])
    return weights


def _finite(params, cams, app):
    """One flag per parameter, camera correction and appearance transform: all finite
    (xprc.train.health)."""
    return {
        **{k: jnp.all(jnp.isfinite(v)) for k, v in params.items()},
        **{f"camera {k}": jnp.all(jnp.isfinite(v)) for k, v in cams.items()},
        **{f"appearance {k}": jnp.all(jnp.isfinite(v)) for k, v in app.items()},
    }


@functools.cache
def eval_fn(method, rconfig: RenderConfig):
    """Jitted `(params, step, sh_interval, background, cameras, i) -> (image, dropped,
    entries_needed)` for test view i, the image clipped to [0, 1]; `eval_metrics` scores it.
    Only the image is read: rendered without the spec's per-pixel outputs and the distortion sum
    (2DGS: about twice as fast)."""
    rconfig = dataclasses.replace(rconfig, pixel_outputs=False, distortion=False)

    def evaluate(params, step, sh_interval, background, cameras, i):
        TRACE_COUNT["eval"] += 1
        cam = jax.tree_util.tree_map(lambda a: a[i], cameras)
        masked = sh_masked(method, params, step, sh_interval)
        out = render(method, masked, cam, background, config=rconfig)
        return (
            jnp.clip(out.image, 0.0, 1.0),
            out.stats["dropped"].astype(jnp.int32),
            out.stats["entries_needed"].astype(jnp.int32),
        )

    return jax.jit(evaluate)


@jax.jit
def eval_metrics(image, images, i):
    """(PSNR, SSIM) of a test view's render `image` against `images[i]`. A program of its own:
    compiled into the render's, the two metrics made its compile a third longer (for a TPU v5e,
    garden frame: 54-58 s against 41 s; alone they compile in 3.3 s: docs/dev/tpu-log.md)."""
    gt = float_images(images[i])
    return psnr(image, gt), ssim(image, gt)
