"""Use xprc's renderer under `jax.jit` and `jax.grad` in a training loop of your own.

    python examples/jax_loop.py                      # 128x128 demo views, 300 steps
    python examples/jax_loop.py --size 32 --steps 30

`xprc.render` is an ordinary differentiable JAX function of the parameters, the camera and the
background. Under your own `jax.jit` the entry buffer cannot be sized from the data, so
`xprc.fit_config` sizes it once from sample cameras; a later render that needs more entries
warns with the count (`RenderConfig.on_overflow`: docs/capacity.md). This loop is plain Adam on
an L1 loss (written out, so nothing but JAX is needed; optax works the same way), with the
learning rates the spec declares; the trainer (`xprc.train.train`) adds
densification, schedules, SSIM and checkpoints on top of the same render.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import xprc
from xprc.data import generate_demo_scene, load_scene
from xprc.metrics import psnr
from xprc.train import init_params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="jax_loop_scene", help="folder for the generated scene")
    ap.add_argument("--size", type=int, default=128, help="image side in pixels")
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args(argv)

    generate_demo_scene(args.out, n_train=8, n_test=1, size=(args.size, args.size), n_points=800)
    train_views, test_views = load_scene(args.out)
    method = xprc.load("3dgs")
    params, _ = init_params(method, train_views)  # raw arrays, one Gaussian per point
    params = {k: jnp.asarray(v) for k, v in params.items()}

    cameras = [v.camera() for v in train_views]
    images = jnp.stack([jnp.asarray(v.image) for v in train_views])
    white = jnp.ones(3, jnp.float32)
    config = xprc.fit_config(method, params, cameras)  # static capacity for the jitted render

    def loss_fn(p, camera, image):
        out = xprc.render(method, p, camera, background=white, config=config)
        return jnp.mean(jnp.abs(out.image - image))

    # Adam, per parameter at the learning rate the spec declares (`lr` in its param line).
    rates = {spec.name: spec.lr or 1e-3 for spec in method.PARAMS}
    state = {
        "m": jax.tree.map(jnp.zeros_like, params),
        "v": jax.tree.map(jnp.zeros_like, params),
        "t": jnp.zeros((), jnp.float32),
    }

    def adam(p, g, state, b1=0.9, b2=0.999, eps=1e-15):
        t = state["t"] + 1
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], g)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], g)
        scale = jnp.sqrt(1 - b2**t) / (1 - b1**t)
        p = {k: p[k] - rates[k] * scale * m[k] / (jnp.sqrt(v[k]) + eps) for k in p}
        return p, {"m": m, "v": v, "t": t}

    @jax.jit  # compiled once: every camera of the dataset has the same size and model
    def step(p, state, camera, image):
        loss, grads = jax.value_and_grad(loss_fn)(p, camera, image)
        p, state = adam(p, grads, state)
        return p, state, loss

    def test_psnr(p):
        view = test_views[0]
        out = xprc.render(method, p, view.camera(), background=white)  # eager: sized exactly
        return psnr(np.clip(np.asarray(out.image), 0, 1), view.image)

    start = test_psnr(params)
    losses = []
    for i in range(args.steps):
        k = i % len(cameras)
        params, state, loss = step(params, state, cameras[k], images[k])
        losses.append(float(loss))
    end = test_psnr(params)
    first, last = np.mean(losses[: len(cameras)]), np.mean(losses[-len(cameras) :])
    print(f"L1 loss {first:.4f} -> {last:.4f} over {args.steps} steps; "
          f"test PSNR {start:.2f} -> {end:.2f} dB")  # fmt: skip
    return losses, start, end


if __name__ == "__main__":
    main()
