"""Cross-platform, proven without the hardware: every shipped spec's render and its gradient
lower with `jax.export` for CPU, CUDA, ROCm and TPU at once.

A change that ties the pipeline to one backend (a CPU-only custom call, a host callback in the
default traced path of a library function) fails here. The render uses `on_overflow="ignore"`:
the warn/raise policies are host callbacks, which `jax.export` cannot serialise
(docs/capacity.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT
from jax import export

from xprc.camera import Camera
from xprc.compiler.driver import load
from xprc.data.workloads import adapt_params, random_scene
from xprc.pipeline import RenderConfig, render

PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
SPECS = sorted(p.stem for p in (ROOT / "specs").glob("*.xpr"))


def _inputs(method):
    raw = random_scene(24, seed=2, sh_degree=1)
    params = {
        k: jnp.asarray(v, jnp.float32) for k, v in adapt_params(method, raw).items() if k in raw
    }
    K = np.array([[40.0, 0, 16], [0, 40.0, 16], [0, 0, 1]], np.float32)
    cam = Camera(viewmat=np.eye(4, dtype=np.float32), K=K, width=32, height=32)
    return params, cam


@pytest.mark.parametrize("name", SPECS)
def test_render_and_gradient_export_for_every_platform(name):
    method = load(ROOT / "specs" / f"{name}.xpr")
    params, cam = _inputs(method)
    if set(params) != {p.name for p in method.PARAMS}:
        pytest.skip(f"{name}: parameters not in the 3DGS layout")
    config = RenderConfig(max_entries=2048, on_overflow="ignore")

    def forward(p, c):
        out = render(method, p, c, config=config)
        return out.image, out.stats["dropped"]

    def loss(p, c):
        return jnp.sum(render(method, p, c, config=config).image)

    for fn in (forward, jax.grad(loss)):
        exp = export.export(jax.jit(fn), platforms=PLATFORMS)(params, cam)
        assert exp.platforms == PLATFORMS
        text = exp.mlir_module()
        assert "callback" not in text.lower()  # nothing host-side in the default path
