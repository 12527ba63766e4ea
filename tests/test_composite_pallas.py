"""The Pallas compositor (`RenderConfig(compositor="pallas")`, issue 25) against the XLA path,
in Pallas's interpret mode on the CPU: images, alpha, depth and the per-pixel outputs to 1e-5,
and parameter and camera gradients of a loss on all of them, for 3DGS, 3DGUT (rays, a fisheye
camera), the LinPrim octahedron, Student-t (signed alpha) and 2DGS (per-pixel outputs); scenes
with empty tiles, lists longer than a chunk and tiles that saturate (the kernels' early stop).
Also: which backend "auto" picks, the located refusals, and that the kernels lower for a TPU.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import sys
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT
from jax.extend import core as jcore
from test_composite_vjp import _scene as vjp_scene

from xprc.camera import look_at
from xprc.compiler.driver import load
from xprc.errors import XprError
from xprc.pipeline import RenderConfig, render
from xprc.pipeline import composite_pallas as cp

W, H = 24, 20
XLA = RenderConfig(tile_size=8, chunk=4, group=2, max_entries=2048, compositor="xla")
PALLAS = dataclasses.replace(XLA, compositor="pallas")


def _scene(method, kind, n, seed, opacity=None):
    return vjp_scene(method, kind, n, seed, opacity, dtype=jnp.float32)


def _camera(model="pinhole"):
    dist = np.array([0.05, -0.02, 0.01, 0.0]) if model == "fisheye" else None
    return look_at([0.4, -0.3, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], W, H, 60.0,
                   model=model, dist=dist, dtype=np.float32)  # fmt: skip


def _outputs(method, params, cam, config):
    bg = jnp.linspace(0.1, 0.3, int(method.NUM_FEATURES), dtype=jnp.float32)
    out = render(method, params, cam, background=bg, mode="RGB+ED", config=config)
    return {k: getattr(out, k) for k in ("image", "alpha", "depth", "extra")
            if getattr(out, k) is not None}  # fmt: skip


def _run(method, params, cam, config):
    """Outputs and the gradients of a loss on all of them, from one compiled function."""
    rng = np.random.default_rng(0)
    k = len(getattr(method, "PIXEL_OUTPUTS", ()))
    channels = (("image", 3), ("alpha", 1), ("depth", 1), ("extra", k))
    weights = {name: jnp.asarray(rng.uniform(-1, 1, (H, W, c)), jnp.float32)
               for name, c in channels if c}  # fmt: skip

    def loss(params, cam):
        out = _outputs(method, params, cam, config)
        return sum(jnp.sum(out[name] * w) for name, w in weights.items()), out

    fn = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)
    (_, out), grads = jax.jit(fn)(params, cam)
    return out, grads


def _assert_close(got, want, tol):
    for (path, a), (_, b) in zip(
        jax.tree_util.tree_leaves_with_path(got),
        jax.tree_util.tree_leaves_with_path(want),
        strict=True,
    ):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = max(1.0, float(np.abs(b).max()))
        err = float(np.abs(a - b).max())
        assert err <= tol * scale, (jax.tree_util.keystr(path), err, scale)


def _compare(spec, params, cam, xla=XLA):
    method = load(ROOT / "specs" / f"{spec}.xpr")
    want, g_want = _run(method, params, cam, xla)
    got, g_got = _run(method, params, cam, dataclasses.replace(xla, compositor="pallas"))
    _assert_close(got, want, 1e-5)
    assert float(jnp.max(want["alpha"])) > 0.5  # something was drawn
    # float32 gradients summed in another order: relative to the largest component
    _assert_close(g_got, g_want, 2e-5)
    assert np.abs(np.asarray(g_got[1].viewmat)).max() > 0  # the camera gets a gradient
    return want


CASES = [
    ("3dgs", "pinhole", "random"),
    ("3dgut", "fisheye", "random"),
    ("linprim_octahedron", "pinhole", "random"),
    ("student_t", "pinhole", "random"),
    ("2dgs", "pinhole", "random"),
]


@pytest.mark.parametrize("spec,model,kind", CASES)
def test_pallas_equals_xla(spec, model, kind):
    method = load(ROOT / "specs" / f"{spec}.xpr")
    params = _scene(method, kind, 10, seed=3)
    want = _compare(spec, params, _camera(model))
    assert float(jnp.min(want["alpha"])) < 1e-6  # some tiles are empty


@pytest.mark.parametrize("spec", ["3dgs", pytest.param("2dgs", marks=pytest.mark.slow)])
def test_pallas_equals_xla_when_tiles_saturate(spec):
    """Opaque primitives: the stop rule ends the lists, and each tile's program stops early
    with the next chunk's copy in flight (forward and backward)."""
    method = load(ROOT / "specs" / f"{spec}.xpr")
    # 41 primitives: tiles whose runs start inside a chunk that an earlier tile, stopped early,
    # never wrote back (with 40, every run starts on a chunk boundary)
    params = _scene(method, "large", 41, seed=5, opacity=4.0)
    cam = _camera()
    want = _compare(spec, params, cam)
    assert (np.asarray(want["alpha"]) > 0.99).mean() > 0.5


@pytest.mark.parametrize("scan", ["doubling", "serial"])
def test_pallas_equals_xla_at_the_default_chunks(scan, monkeypatch):
    """RenderConfig.chunk=None: 64 entries a kernel step, 32 a step of the XLA path (the same
    lists cut differently), with either way along a chunk (`SCAN`: the products and sums by
    doubling over sublane rolls, or entry by entry); many chunks a tile, some saturating."""
    monkeypatch.setattr(cp, "SCAN", scan)
    method = load(ROOT / "specs" / "3dgs.xpr")
    params = _scene(method, "random", 800, seed=6, opacity=1.0)
    xla = dataclasses.replace(XLA, chunk=None, max_entries=8192)
    assert (xla.chunk_for(True), xla.chunk_for(False)) == (64, 32)
    assert xla.chunk_for(True, 2**23) == 64 and xla.chunk_for(True, 2**23 + 1) == 32
    out = render(method, params, _camera(), config=xla)
    kept = int(np.sum(out.stats["entries_per_tile"]))
    assert kept > 3 * 64 * 9 and int(out.stats["dropped"]) == 0  # tiles of several chunks
    _compare("3dgs", params, _camera(), xla)


def test_pallas_equals_xla_with_chunks_shared_by_many_tiles():
    """Tiles of 4x4 pixels and chunks of 16 entries: a chunk holds the entries of up to five
    tiles, each of which reads it back and writes its own lanes over it in the backward."""
    method = load(ROOT / "specs" / "3dgs.xpr")
    params = _scene(method, "random", 10, seed=3)
    xla = dataclasses.replace(XLA, tile_size=4, chunk=16)
    _compare("3dgs", params, _camera(), xla)


def test_pallas_equals_xla_with_a_capacity_of_odd_size_that_overflows():
    """A capacity that is not a whole number of chunks (the kernels' sorted buffer is padded to
    one) and too small for the scene (the last tiles lose entries): the same images and
    gradients as the XLA path."""
    method = load(ROOT / "specs" / "3dgs.xpr")
    params = _scene(method, "large", 12, seed=4)
    cam = _camera()
    xla = dataclasses.replace(XLA, max_entries=41, on_overflow="ignore")
    out = render(method, params, cam, config=xla)
    assert int(out.stats["dropped"]) > 0 and 41 % xla.chunk
    _compare("3dgs", params, cam, xla)


def test_auto_uses_pallas_on_a_tpu_only_and_pallas_refuses_what_it_cannot_run():
    method = load(ROOT / "specs" / "3dgs.xpr")
    on_tpu = jax.default_backend() == "tpu"
    assert cp.use_pallas(method, jnp.float32, RenderConfig()) == on_tpu
    assert cp.use_pallas(method, jnp.float32, RenderConfig(compositor="pallas"))
    with pytest.raises(XprError, match=r"cannot render Gaussian3D: .*float32 \(got float64\)"):
        cp.use_pallas(method, jnp.float64, RenderConfig(compositor="pallas"))
    with pytest.raises(XprError, match="distortion output is composited by the XLA path only"):
        cp.use_pallas(method, jnp.float32, RenderConfig(compositor="pallas", distortion=True))
    with pytest.raises(XprError, match=r"RenderConfig.compositor='cuda': expected one of"):
        RenderConfig(compositor="cuda")


def test_no_shipped_response_reads_the_camera():
    """The kernels pass no camera to the response; a response that reads one is refused."""
    for spec in ("3dgs", "3dgut", "linprim_octahedron", "student_t", "2dgs"):
        assert not cp.response_reads_camera(load(ROOT / "specs" / f"{spec}.xpr"))

    class Reads:
        NAME, NUM_ATTRS = "Reads", 1

        @staticmethod
        def response(pixel, ray_origin, ray_dir, attrs, camera):
            return attrs[..., 0] * camera.fx + 0 * pixel[..., 0]

    assert cp.response_reads_camera(Reads)


def test_kernels_lower_for_a_tpu(monkeypatch):
    """The forward and backward kernels pass Pallas's TPU (Mosaic) lowering, exported from
    this CPU: what CI can check of the TPU path without a TPU."""
    monkeypatch.setattr(cp, "INTERPRET", False)
    method = load(ROOT / "specs" / "3dgut.xpr")
    params = _scene(method, "random", 8, seed=1)
    cam = _camera()

    config = dataclasses.replace(PALLAS, on_overflow="ignore")  # no host callback to export

    def loss(p):
        return jnp.sum(render(method, p, cam, config=config).image)

    exported = jax.export.export(jax.jit(jax.value_and_grad(loss)), platforms=["tpu"])(params)
    text = exported.mlir_module()
    assert text.count("tpu_custom_call") >= 2  # the forward and the backward kernel


def _pallas_calls(jaxpr, found):
    """The parameters of every pallas_call inside `jaxpr` (recursively), in order."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            found.append(eqn.params)
        for sub in jcore.jaxprs_in_params(eqn.params):
            _pallas_calls(sub, found)
    return found


def _value_shapes(jaxpr, found):
    for eqn in jaxpr.eqns:
        found |= {tuple(getattr(v.aval, "shape", ())) for v in eqn.outvars}
        for sub in jcore.jaxprs_in_params(eqn.params):
            _value_shapes(sub, found)
    return found


def test_kernels_hold_the_per_pixel_outputs_one_array_each():
    """2DGS's five per-pixel outputs stacked on a trailing axis [B, P, 5] put the 5 on a TPU's
    vector lanes: 18 MiB of VMEM and a forward 4x slower than the XLA path on a TPU v5e
    (790 against 191 ms, 2026-12-06). A generated response returns them unstacked
    (`stack=False`) and the kernels never build the stacked array."""
    method = load(ROOT / "specs" / "2dgs.xpr")
    params = _scene(method, "random", 6, seed=1)
    cam = _camera()
    config = dataclasses.replace(PALLAS, on_overflow="ignore")

    def loss(p):
        return jnp.sum(render(method, p, cam, config=config).image)

    calls = _pallas_calls(jax.make_jaxpr(jax.value_and_grad(loss))(params).jaxpr, [])
    # the forward's tiles in any order; the backward's in order: a tile reads back the chunk
    # the previous tiles wrote
    semantics = [c["compiler_params"].dimension_semantics for c in calls]
    assert semantics == [("parallel",), ("arbitrary",)]
    k = len(method.PIXEL_OUTPUTS)
    for call in calls:
        stacked = [s for s in _value_shapes(call["jaxpr"], set()) if len(s) >= 3 and s[-1] == k]
        assert not stacked, stacked
    _, extra = method.response(*(jnp.zeros((2, 1, n)) for n in (2, 3, 3)),
                               jnp.zeros((1, 4, method.NUM_ATTRS)), cam, stack=False)  # fmt: skip
    assert [e.shape for e in extra] == [(2, 4)] * k


@pytest.mark.parametrize("spec", ["3dgut", "linprim_octahedron"])
def test_kernels_do_no_arithmetic_on_per_primitive_columns(spec):
    """Each attribute is spread over the chunk's pixels before the response reads it: a
    response's per-primitive arithmetic on [B, 1] columns, broadcast at each use and summed over
    the lanes per broadcast value in the backward, made 3DGUT's fwd+bwd 41.9 ms on a TPU v5e
    against 33.6 ms spread (docs/tpu.md, eighth session). Float [B, 1] values in the kernels are
    only the lanes' columns (slices), spreads, and the backward's one sum per column."""
    method = load(ROOT / "specs" / f"{spec}.xpr")
    params = _scene(method, "random", 8, seed=1)
    config = dataclasses.replace(PALLAS, on_overflow="ignore")

    def loss(p):
        return jnp.sum(render(method, p, _camera(), config=config).image)

    calls = _pallas_calls(jax.make_jaxpr(jax.value_and_grad(loss))(params).jaxpr, [])
    columns = (config.chunk, 1), (config.chunk,)
    for call, allowed in zip(calls, ({"slice"}, {"slice", "broadcast_in_dim", "reduce_sum"}),
                             strict=True):  # fmt: skip
        ops = collections.Counter()
        for eqn in _eqns(call["jaxpr"], []):
            for v in eqn.outvars:
                aval = v.aval
                if tuple(getattr(aval, "shape", ())) in columns and jnp.issubdtype(
                    aval.dtype, jnp.floating
                ):
                    ops[eqn.primitive.name] += 1
        assert set(ops) <= allowed, ops
    assert ops["reduce_sum"] <= ops["slice"]  # at most one lane sum per column read


def _eqns(jaxpr, found):
    for eqn in jaxpr.eqns:
        found.append(eqn)
        for sub in jcore.jaxprs_in_params(eqn.params):
            _eqns(sub, found)
    return found


@pytest.mark.parametrize(
    "spec,model",
    [
        # 3DGUT through a fisheye: test_pallas_equals_xla runs it (camera gradients too) by
        # default; this camera-free variant of the same kernels, under -m slow
        pytest.param("3dgut", "fisheye", marks=pytest.mark.slow),
        ("linprim_octahedron", "pinhole"),
    ],
)
def test_parameter_gradients_alone_equal_the_xla_paths(spec, model):
    """The camera not differentiated (training without pose optimisation, the TPU benchmarks):
    the parameter gradients still equal the XLA path's."""
    method = load(ROOT / "specs" / f"{spec}.xpr")
    params = _scene(method, "random", 10, seed=3)
    cam = _camera(model)
    weight = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (H, W, 3)), jnp.float32)

    def loss(p, c, config):
        return jnp.sum(_outputs(method, p, c, config)["image"] * weight)

    pallas = dataclasses.replace(XLA, compositor="pallas")
    want = jax.jit(jax.grad(functools.partial(loss, config=XLA)))(params, cam)
    got = jax.jit(jax.grad(functools.partial(loss, config=pallas)))(params, cam)
    _assert_close(got, want, 2e-5)
    assert max(float(jnp.abs(v).max()) for v in jax.tree_util.tree_leaves(got)) > 0


def test_a_hand_written_response_with_stacked_outputs_still_composites():
    """A response without the `stack` keyword (hand-written) gives its outputs stacked; the
    kernels split them, say once that this is slow on a TPU, and agree with the XLA path."""
    method = load(ROOT / "specs" / "2dgs.xpr")
    hand = types.ModuleType("hand_written_2dgs")
    hand.__dict__.update({k: v for k, v in vars(method).items() if not k.startswith("__")})
    hand.response = lambda pixel, ray_origin, ray_dir, attrs, camera: method.response(
        pixel, ray_origin, ray_dir, attrs, camera
    )
    assert not cp._takes_stack(hand.response) and cp._takes_stack(method.response)
    params = _scene(method, "random", 8, seed=2)
    cam = _camera()
    want = _outputs(hand, params, cam, XLA)
    with pytest.warns(RuntimeWarning, match=r"takes no `stack` keyword, so the Pallas kernels "
                      r"split its 5 per-pixel outputs"):  # fmt: skip
        got = _outputs(hand, params, cam, PALLAS)
    _assert_close(got, want, 1e-5)
    assert float(jnp.max(want["alpha"])) > 0.5


def test_no_stacked_outputs_warning_when_the_outputs_are_left_out():
    """With RenderConfig(pixel_outputs=False) the kernels composite no per-pixel outputs, so a
    hand-written response without the `stack` keyword splits nothing: no warning that it does
    (it was given all the same); with the outputs it still is."""
    method = load(ROOT / "specs" / "2dgs.xpr")
    hand = types.ModuleType("hand_written_2dgs_lean")
    hand.__dict__.update({k: v for k, v in vars(method).items() if not k.startswith("__")})
    hand.response = lambda pixel, ray_origin, ray_dir, attrs, camera: method.response(
        pixel, ray_origin, ray_dir, attrs, camera
    )
    lean = RenderConfig(compositor="pallas", pixel_outputs=False)
    cp._warn_once.cache_clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert cp.use_pallas(hand, jnp.float32, lean)
        with pytest.warns(RuntimeWarning, match="takes no `stack` keyword"):
            assert cp.use_pallas(hand, jnp.float32, RenderConfig(compositor="pallas"))
    finally:
        cp._warn_once.cache_clear()


def test_kernels_ask_for_three_quarters_of_the_chips_vmem(monkeypatch):
    """Mosaic's default scoped VMEM (16 MiB) is too small for 2DGS's forward on a TPU v5e
    (18.1 MiB asked, a compile error, measured 2026-12-06): the kernels ask for 3/4 of the
    chip's VMEM; interpreted, or where the chip is unknown, they keep Mosaic's default."""
    st = cp._Static(None, None, 4, 0.0, 0.0, False, 0, 1, 1, False, False, False)

    class Info:
        vmem_capacity_bytes = 128 * 2**20

    monkeypatch.setattr(cp.pltpu, "get_tpu_info", lambda: Info)
    cp._vmem_limit.cache_clear()
    try:
        assert cp._compiler_params(st, "parallel").vmem_limit_bytes == 96 * 2**20
        st.interpret = True
        assert cp._compiler_params(st, "parallel").vmem_limit_bytes is None

        def unknown():
            raise RuntimeError("no TPU")

        monkeypatch.setattr(cp.pltpu, "get_tpu_info", unknown)
        cp._vmem_limit.cache_clear()
        st.interpret = False
        assert cp._compiler_params(st, "arbitrary").vmem_limit_bytes is None
    finally:
        cp._vmem_limit.cache_clear()


def test_auto_falls_back_to_xla_when_the_kernels_do_not_compile(monkeypatch):
    """With compositor "auto", kernels Mosaic refuses (a VMEM overflow, as a TPU reports it)
    give one warning naming the reason and the XLA path's image; later renders skip the
    attempt. "pallas" asked for explicitly, and any other error, are raised as they are."""
    render_mod = sys.modules["xprc.pipeline.render"]  # the module, not the function

    method = load(ROOT / "specs" / "3dgs.xpr")
    params = _scene(method, "random", 6, seed=3)
    cam = _camera()
    real = render_mod._compiled
    attempts = []

    def compiled(method, mode, config, batched, check=False):
        if config.compositor == "xla":
            return real(method, mode, config, batched, check)

        def fails(*args):
            attempts.append(config.compositor)
            raise jax.errors.JaxRuntimeError(message)

        return fails

    monkeypatch.setattr(render_mod, "_compiled", compiled)
    monkeypatch.setattr(render_mod, "_PALLAS_FAILED", set())
    monkeypatch.setattr(render_mod, "_PALLAS_RAN", set())
    message = ("RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom: Ran out of memory in "
               "memory space vmem (custom_call_target=\"tpu_custom_call\")")  # fmt: skip
    auto = dataclasses.replace(XLA, compositor="auto")
    want = render(method, params, cam, config=XLA).image
    pattern = (r"Gaussian3D: the Pallas kernels did not compile on this CPU "
               r"\(RESOURCE_EXHAUSTED.*vmem.*XLA path instead")  # fmt: skip
    with pytest.warns(RuntimeWarning, match=pattern) as caught:
        got = render(method, params, cam, config=auto).image
    assert [w.filename for w in caught] == [__file__]  # the line that called render
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    render(method, params, cam, config=auto)  # no second attempt, no second warning
    assert attempts == ["auto"]
    with pytest.raises(jax.errors.JaxRuntimeError, match="CompileTimeScopedVmemOom"):
        render(method, params, cam, config=PALLAS)
    message = "INTERNAL: something else"
    with pytest.raises(jax.errors.JaxRuntimeError, match="something else"):
        render(method, params, cam, config=dataclasses.replace(auto, chunk=8))

    # A configuration that ran (so it compiled): a later error naming the kernels is raised.
    calls = []

    def compiled_then_fails(method, mode, config, batched, check=False):
        def call(*args):
            calls.append(config.compositor)
            if len(calls) > 1:
                raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Mosaic: out of memory "
                                                 "at run time")  # fmt: skip
            xla = dataclasses.replace(config, compositor="xla")
            return real(method, mode, xla, batched, check)(*args)

        return call

    monkeypatch.setattr(render_mod, "_compiled", compiled_then_fails)
    ran = dataclasses.replace(auto, chunk=16)
    render(method, params, cam, config=ran)
    with pytest.raises(jax.errors.JaxRuntimeError, match="out of memory at run time"):
        render(method, params, cam, config=ran)
    assert calls == ["auto", "auto"]


def test_pallas_in_interpret_mode_refuses_a_grid_that_would_take_minutes(monkeypatch):
    """At 4096 x 4096 (65,536 tiles) `compositor="pallas"` on a CPU gave no result and no word
    for more than 150 s (interpret mode's time grows with the square of the tile count; the
    XLA path: 1.8 s). It is refused at once, with the numbers and what to use instead; the
    limit is a module setting, and a grid at it still renders."""
    grid = cp.TileGrid(512, 512, 16)  # 1,024 tiles: taken; one row more is not
    assert cp.interpret_size_problem(grid, True) is None
    assert cp.interpret_size_problem(cp.TileGrid(512, 513, 16), True) is not None
    assert cp.interpret_size_problem(cp.TileGrid(4096, 4096, 16), False) is None  # a TPU
    method = load(ROOT / "specs" / "3dgs.xpr")
    params = _scene(method, "random", 10, seed=0)
    big = look_at([0.0, 0.0, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], 4096, 4096, 60.0,
                  dtype=np.float32)  # fmt: skip
    with pytest.raises(XprError) as info:  # raised while tracing: nothing compiles or runs
        render(method, params, big, config=RenderConfig(compositor="pallas"))
    assert str(info.value) == (
        "error: RenderConfig(compositor='pallas') off a TPU runs the Pallas kernels in "
        "interpret mode, whose time grows with the square of the tile count: this 4096x4096 "
        "image is 65,536 tiles of 16x16 pixels, over the 1,024 it allows (1,024 tiles take "
        "about 7 s on a CPU, 4,096 about 3 minutes); use compositor='xla' or 'auto' here (the "
        "same result to float32 rounding), or raise "
        "xprc.pipeline.composite_pallas.INTERPRET_MAX_TILES to wait"
    )
    monkeypatch.setattr(cp, "INTERPRET_MAX_TILES", 4)  # the test scene's 9 tiles, refused
    with pytest.raises(XprError, match="this 24x20 image is 9 tiles of 8x8 pixels, over the 4 "):
        render(method, params, _camera(), config=PALLAS)
