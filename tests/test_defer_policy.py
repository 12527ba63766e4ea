"""`RenderConfig(on_overflow="defer")`: under a caller's jit the render holds no host callback
(so the persistent compilation cache can keep the program), its stats count what "warn" would
report, and `xprc.warn_if_dropped(out)` reports exactly what "warn" reports at run time; eager,
"defer" reports as "warn" does."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from conftest import ROOT

import xprc
from xprc.camera import Camera
from xprc.compiler.driver import load
from xprc.data.workloads import random_scene
from xprc.errors import XprError
from xprc.pipeline import RenderConfig, count_entries, render

W, H = 96, 64


@pytest.fixture(scope="module")
def gs():
    return load(ROOT / "specs" / "3dgs.xpr")


def _scene():
    p = random_scene(120, seed=11, sh_degree=1)
    p["scales"] = (p["scales"] + np.log(8.0)).astype(np.float32)  # large: many entries
    K = np.array([[70.0, 0, W / 2], [0, 70.0, H / 2], [0, 0, 1]], np.float32)
    return p, Camera(viewmat=np.eye(4, dtype=np.float32), K=K, width=W, height=H)


def _jitted(gs, cam, policy):
    config = RenderConfig(max_entries=1024, on_overflow=policy)
    return jax.jit(lambda p: render(gs, p, cam, config=config))


def test_defer_under_jit_reports_through_warn_if_dropped(gs):
    params, cam = _scene()
    needed = count_entries(gs, params, cam)
    with pytest.warns(RuntimeWarning) as at_run_time:
        jax.block_until_ready(_jitted(gs, cam, "warn")(params))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing may be said while the deferred render runs
        out = jax.block_until_ready(_jitted(gs, cam, "defer")(params))
    assert int(out.stats["dropped"]) == needed - 1024
    with pytest.warns(RuntimeWarning) as deferred:
        assert xprc.warn_if_dropped(out) == needed - 1024
    with pytest.warns(RuntimeWarning, match=f"dropped {needed - 1024:,}"):
        assert xprc.warn_if_dropped(out.stats) == needed - 1024  # the stats alone will do
    said = [str(w.message) for w in deferred]
    assert said == [str(w.message) for w in at_run_time]
    assert any(f"dropped {needed - 1024:,}" in m for m in said)


def test_defer_holds_no_host_callback(gs):
    params, cam = _scene()
    texts = {p: _jitted(gs, cam, p).lower(params).as_text() for p in ("warn", "defer")}
    assert "callback" in texts["warn"]  # the run-time report of "warn"
    assert "callback" not in texts["defer"]


def test_defer_eager_warns_as_warn_does(gs):
    params, cam = _scene()
    config = RenderConfig(max_entries=1024, on_overflow="defer")
    with pytest.warns(RuntimeWarning, match="render dropped"):
        render(gs, params, cam, config=config)


def test_warn_if_dropped_inside_a_trace_is_an_error(gs):
    params, cam = _scene()
    config = RenderConfig(max_entries=1024, on_overflow="defer")

    def f(p):
        out = render(gs, p, cam, config=config)
        xprc.warn_if_dropped(out)
        return out.image

    with pytest.raises(XprError, match="call it outside jax.jit"):
        jax.jit(f)(params)
