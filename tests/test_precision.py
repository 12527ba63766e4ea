"""Every matrix product xprc traces runs at full float32 precision (`xprc.runtime.EXACT`).

XLA's DEFAULT precision for float32 products is TF32 on GPUs since Ampere: a 10-bit mantissa.
On an H200 that moved the garden subset's blended colours up to 0.044 from the float64
reference. CPUs compute DEFAULT in full float32, so no CPU render can show the difference; this
test reads the traced programs instead: every `dot_general` in the forward, the custom and the
autodiff backward, the camera gradient and the trainer's pose and ADC helpers asks for HIGHEST.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, load_handwritten

from xprc import verify
from xprc.camera import look_at
from xprc.compiler.driver import load
from xprc.pipeline import RenderConfig, render
from xprc.runtime import EXACT
from xprc.train.camera_opt import pose_delta
from xprc.train.strategies.adc import screen_gradient

CONFIG = RenderConfig(tile_size=8, chunk=4, group=4, max_entries=2048)
CAMERA = look_at([0.3, -0.2, -4.0], [0, 0, 0], [0, -1, 0], 24, 20, 60.0, dtype=np.float32)


def _sub_jaxprs(value):
    if hasattr(value, "eqns"):  # a Jaxpr (duck-typed: its class moves between JAX versions)
        yield value
    elif hasattr(getattr(value, "jaxpr", None), "eqns"):  # a ClosedJaxpr
        yield value.jaxpr
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _sub_jaxprs(v)


def dot_precisions(jaxpr) -> list:
    """The `precision` of every dot_general in a jaxpr and all the jaxprs nested in it."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            found.append(eqn.params["precision"])
        for value in eqn.params.values():
            for sub in _sub_jaxprs(value):
                found.extend(dot_precisions(sub))
    return found


def assert_all_exact(fn, *args) -> int:
    found = dot_precisions(jax.make_jaxpr(fn)(*args).jaxpr)
    loose = [p for p in found if p is None or any(q != EXACT for q in p)]
    assert not loose, f"{len(loose)} of {len(found)} matrix products below HIGHEST: {loose[:3]}"
    return len(found)


def test_the_walk_sees_a_default_product():
    """The checker itself: a plain `@`, also inside a scan and under grad, is caught."""

    def f(a):
        return jax.lax.scan(lambda c, x: (c + jnp.sum(a @ x), None), 0.0, a[None])[0]

    a = jnp.eye(3)
    with pytest.raises(AssertionError, match="below HIGHEST"):
        assert_all_exact(jax.grad(f), a)
    assert assert_all_exact(lambda a: jnp.matmul(a, a, precision=EXACT), a) == 1


@pytest.mark.parametrize("name", ["handwritten", "3dgs", "3dgut", "linprim_octahedron"])
@pytest.mark.parametrize("backward", ["custom", "autodiff"])
def test_render_and_its_gradients_use_full_precision(name, backward):
    method = load_handwritten() if name == "handwritten" else load(ROOT / "specs" / f"{name}.xpr")
    raw = verify.scene(method, "random", 12, seed=0)
    params = {k: jnp.asarray(v, jnp.float32) for k, v in raw.items()}
    cam = CAMERA
    config = RenderConfig(**{**CONFIG.__dict__, "backward": backward})

    def loss(params, cam):
        out = render(method, params, cam, mode="RGB+ED", config=config)
        return jnp.sum(out.image) + jnp.sum(out.depth)

    assert assert_all_exact(jax.grad(loss, argnums=(0, 1)), params, cam) > 0


def test_pose_and_adc_helpers_use_full_precision():
    p = jnp.asarray([0.01, -0.02, 0.03, 0.1, 0.0, -0.1], jnp.float32)
    assert assert_all_exact(jax.jacobian(pose_delta), p, jnp.float32(2.0)) > 0
    cam = CAMERA
    g = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3)), jnp.float32)
    assert assert_all_exact(lambda g: screen_gradient(g, g, cam), g) > 0
