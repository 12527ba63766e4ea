"""Short training runs of a compiled spec on the demo scene (issue 14, done-when 4).

The scene is `xprc.demo_scene` (the photo-textured shapes on a white background that
`xprc demo` trains on) at its smallest sensible size: 32x32, 8 training and 2 test views, 400
initial surface points. It is generated once per process and shared by every spec test; each
spec trains one 300-step MCMC run (one compile) that its tests share.

Why not test_train's tiny scene: there the grey, 0.1-opacity initial state already scores ~20 dB
(dark Gaussians on black), and 300 steps of 3DGS itself gain only +5.2 dB; the new specs gain
as much or more (docs/training.md, "Short runs of every spec").
"""

from __future__ import annotations

import functools
import tempfile

from xprc import train as tr

SIZE = 32
N_TRAIN, N_TEST, N_POINTS = 8, 2, 400
STEPS = 300


@functools.cache
def demo_root() -> str:
    """The folder of the demo scene at SIZE x SIZE (generated once per process)."""
    from xprc.data.demo_scene import generate_demo_scene

    root = tempfile.mkdtemp(prefix="xprc-demo-")
    generate_demo_scene(
        root, n_train=N_TRAIN, n_test=N_TEST, size=(SIZE, SIZE), seed=0, n_points=N_POINTS
    )
    return root


@functools.cache
def demo_scene():
    """(train, test) datasets of the demo scene (`demo_root`)."""
    from xprc.data.scene_folder import load_scene

    return load_scene(demo_root())


def config(steps=STEPS, **kw) -> tr.TrainConfig:
    """A short MCMC schedule: relocation every steps/6 from steps/3, SH degree up every steps/3,
    the spec's own learning rates, one evaluation at the end."""
    base = dict(
        steps=steps,
        sh_degree_interval=steps // 3,
        refine_every=steps // 6,
        refine_from=steps // 3,
        refine_until=(87 * steps) // 100,
        eval_every=steps,
        checkpoint_every=0,
        log_every=10,
        progress=False,
        save_renders=False,
    )
    base.update(kw)
    return tr.TrainConfig(**base)


def train_spec(method, out=None, steps=STEPS, **kw):
    """Train `method` on the demo scene; returns (TrainResult, test-PSNR gain in dB)."""
    train_set, test_set = demo_scene()
    result = tr.train(method, train_set, test_set, out, config(steps, **kw))
    return result, result.metrics["psnr"] - result.initial_psnr


def spec_lines(path) -> int:
    """Non-blank, non-comment lines of a spec (what issue 14 limits to 40)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return sum(1 for line in lines if line)


def regulariser_terms(method, params) -> dict:
    """The unweighted 2DGS terms (xprc.train.losses_2dgs) of `params` averaged over the demo
    scene's test views, on a white background as in training."""
    import jax.numpy as jnp
    import numpy as np

    from xprc.pipeline import RenderConfig, render
    from xprc.train import losses_2dgs

    _, test_set = demo_scene()
    raw = {k: jnp.asarray(v) for k, v in params.items()}
    sums = {"distortion": 0.0, "normal": 0.0}
    for view in test_set.views:
        cam = view.camera()
        out = render(method, raw, cam, np.ones(3, np.float32), config=RenderConfig(distortion=True))
        for k, v in losses_2dgs.terms(method, out, cam).items():
            sums[k] += float(v) / len(test_set.views)
    return sums
