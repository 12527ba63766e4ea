"""Correct by default: no render silently drops (primitive, tile) entries (issue 12).

- With no config, `render` counts the entries a scene needs and is lossless: scenes of large
  primitives equal the independent per-pixel twins for 3DGS, 3DGUT and the LinPrim octahedron.
- Under a caller's own jit with a too-small capacity, the default policy warns at run time with
  the count; "raise" raises.
- Counting cannot wrap: 6,000 full-screen boxes on a 10000x10000 grid.
- Containment: a NaN primitive changes no pixel outside its footprint and no other gradient.
- Memory: a lossless capacity over the budget is a clear error, not the OOM killer.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_3dgs as ref_gs
import reference_3dgut as ref_gut
import reference_linprim as ref_lp
from conftest import GARDEN, ROOT

from xprc.camera import Camera
from xprc.compiler.driver import load
from xprc.data.workloads import adapt_params, garden_workload, random_scene
from xprc.errors import XprError
from xprc.pipeline import RenderConfig, count_entries, entry_bucket, fit_config, render
from xprc.pipeline.binning import INT32_MAX, TileGrid, bin_and_sort, exact_total, running_max
from xprc.pipeline.capacity import parse_bytes

W, H = 96, 64
BG = (0.1, 0.2, 0.3)


@pytest.fixture(scope="module")
def gs():
    return load(ROOT / "specs" / "3dgs.xpr")


@pytest.fixture(scope="module")
def gut():
    return load(ROOT / "specs" / "3dgut.xpr")


@pytest.fixture(scope="module")
def octa():
    return load(ROOT / "specs" / "linprim_octahedron.xpr")


def camera(width=W, height=H, f=70.0):
    K = np.array([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]], np.float32)
    return Camera(viewmat=np.eye(4, dtype=np.float32), K=K, width=width, height=height)


def large_scene(n=120, factor=8.0, seed=11):
    """Random Gaussians with scales x `factor`: most cover a large part of the image."""
    p = random_scene(n, seed=seed, sh_degree=1)
    p["scales"] = (p["scales"] + np.log(factor)).astype(np.float32)
    return p


def old_default_capacity(n, cam):
    config = RenderConfig()
    return config.entry_capacity(n, TileGrid(cam.width, cam.height, config.tile_size).num_tiles)


def f64(x):
    return np.asarray(x, np.float64)


def assert_lossless(out):
    assert int(out.stats["dropped"]) == 0
    assert not bool(out.stats["entries_saturated"])
    assert int(out.stats["entry_capacity"]) >= int(out.stats["entries_needed"])


# --------------------------------------------------------------------- lossless by default


def test_default_render_of_large_gaussians_is_lossless_3dgs(gs):
    params, cam = large_scene(), camera()
    needed = count_entries(gs, params, cam)
    assert needed > old_default_capacity(120, cam)  # the old default dropped entries here
    out = render(gs, params, cam, background=np.asarray(BG, np.float32), mode="RGB+D")
    assert_lossless(out)
    assert int(out.stats["entries_needed"]) == needed
    assert int(out.stats["entry_capacity"]) == entry_bucket(needed)
    colour, alpha, dsum = ref_gs.render(params, np.eye(4), cam.K, W, H, background=BG)
    np.testing.assert_allclose(f64(out.image), colour, atol=1e-4, rtol=0)
    np.testing.assert_allclose(f64(out.alpha)[..., 0], alpha, atol=1e-4, rtol=0)
    np.testing.assert_allclose(f64(out.depth)[..., 0], dsum, atol=5e-4, rtol=1e-5)


def test_default_render_of_large_gaussians_is_lossless_3dgut(gut):
    params, cam = large_scene(80, factor=6.0), camera()
    assert count_entries(gut, params, cam) > old_default_capacity(80, cam)
    out = render(gut, params, cam, background=np.asarray(BG, np.float32), mode="RGB+D")
    assert_lossless(out)
    colour, alpha, dsum = ref_gut.render(params, cam, background=BG)
    np.testing.assert_allclose(f64(out.image), colour, atol=1e-4, rtol=0)
    np.testing.assert_allclose(f64(out.alpha)[..., 0], alpha, atol=1e-4, rtol=0)


def test_default_render_of_large_octahedra_is_lossless(octa):
    params = ref_lp.random_params(
        150, "octahedron", seed=12, sh_degree=1, spread=0.7, size=(0.8, 2.5)
    )
    cam = camera()
    assert count_entries(octa, params, cam) > old_default_capacity(150, cam)
    out = render(octa, params, cam, background=np.asarray(BG, np.float32))
    assert_lossless(out)
    colour, alpha, _ = ref_lp.render(
        params, "octahedron", np.eye(4), cam.K, W, H, background=BG, chord="analytic"
    )
    np.testing.assert_allclose(f64(out.image), colour, atol=1e-4, rtol=0)
    np.testing.assert_allclose(f64(out.alpha)[..., 0], alpha, atol=1e-4, rtol=0)


def test_batched_cameras_size_for_the_largest(gs):
    params = large_scene(60)
    cams = [camera(f=f) for f in (40.0, 70.0, 140.0)]
    counts = [count_entries(gs, params, c) for c in cams]
    assert count_entries(gs, params, Camera.stack(cams)) == max(counts)
    out = render(gs, params, Camera.stack(cams))
    assert np.all(np.asarray(out.stats["dropped"]) == 0)


def test_batched_count_runs_in_bounded_batches(gs, monkeypatch):
    """A count over many cameras projects a bounded number of (primitive, camera) pairs at a
    time (a vmap over a capture's 131 views of 3M primitives needed 17.95 GB on a TPU): here
    two cameras a batch over five, the largest last (alone in its batch, filled up with a copy),
    and still the max. Stacks at least a batch long run the same compiled program (a run's
    training and test views: a second program cost 12 s of compiling at 1M primitives on a
    TPU); a shorter one a batch of the power of two at or above its length."""
    from xprc.pipeline import capacity as cap

    params = large_scene(60)
    cams = [camera(f=f) for f in (40.0, 50.0, 60.0, 70.0, 140.0)]
    counts = [count_entries(gs, params, c) for c in cams]
    monkeypatch.setattr(cap, "COUNT_PAIRS", 2 * 60)
    cap._count_fn.cache_clear()
    try:
        assert cap.count_batch(60, 5) == 2
        assert cap.count_batch(60, 1) == 1
        monkeypatch.setattr(cap, "COUNT_PAIRS", 1 << 24)
        assert cap.count_batch(1_000_000, 131) == cap.count_batch(1_000_000, 19) == 16
        assert cap.count_batch(4000, 21) == 32 and cap.count_batch(4000, 2) == 2
        monkeypatch.setattr(cap, "COUNT_PAIRS", 2 * 60)
        fn = cap._count_fn(gs, cap._count_key(RenderConfig()), True)
        prepared = cap.prepare_params(gs, params)
        words = cap._count_stack(fn, prepared, Camera.stack(cams), 60)
        want = [[c >> 32, c & 0xFFFFFFFF] for c in counts]
        assert words.tolist() == want  # each camera's own count, none from the filling copy
        assert count_entries(gs, params, Camera.stack(cams)) == max(counts) == counts[-1]
        assert count_entries(gs, params, Camera.stack(cams[1:4])) == max(counts[1:4])
        assert fn._cache_size() == 1  # one program for stacks of 5 and 3 cameras
        assert count_entries(gs, params, Camera.stack(cams[:1])) == counts[0]
        assert fn._cache_size() == 2  # a batch of one for a stack of one
    finally:
        cap._count_fn.cache_clear()


def test_a_count_over_no_cameras_or_a_stack_of_stacks_is_an_error(gs):
    """`cams[0:0]` (an empty slice of a stack) failed in the count's max() with a ValueError,
    a stack of stacks deep in the projection with a TypeError (count_entries, fit_config and
    the default render, which counts first); each is now one XprError naming the batch."""
    params = large_scene(8)
    cams = Camera.stack([camera(), camera(f=70.0)])
    none, nested = cams[0:0], Camera.stack([cams, cams])
    empty = r"^error: camera: a Camera\.stack of no cameras \(batch shape \(0,\)\)"
    stacked = r"^error: camera: a stack of \(2, 2\) cameras; "
    for cam, said in ((none, empty), (nested, stacked)):
        with pytest.raises(XprError, match=said):
            count_entries(gs, params, cam)
        with pytest.raises(XprError, match=said):
            fit_config(gs, params, cam)
    with pytest.raises(XprError, match=empty):
        render(gs, params, none)


GARDEN_CASES = [  # (primitives, scale factor): the two scenes (the first: -m slow)
    pytest.param(1500, 8.0, marks=pytest.mark.slow),
    (300, 60.0),
]


@pytest.mark.skipif(not GARDEN.exists(), reason="shared garden data not present")
@pytest.mark.parametrize("num,factor", GARDEN_CASES)
def test_garden_large_primitives_lossless_and_equal_to_reference(gs, gut, octa, num, factor):
    params, cams = garden_workload(GARDEN, num=num, scale=0.125, sh_degree=1)
    params["scales"] = (params["scales"] + np.log(factor)).astype(np.float32)
    cam = cams[0]
    w, h = cam.width, cam.height
    colour, alpha, _ = ref_gs.render(params, np.asarray(cam.viewmat), cam.K, w, h)
    out = render(gs, params, cam)
    assert_lossless(out)
    np.testing.assert_allclose(f64(out.image), colour, atol=1e-4, rtol=0)
    out = render(gut, params, cam)
    assert_lossless(out)
    colour, alpha, _ = ref_gut.render(params, cam)
    np.testing.assert_allclose(f64(out.alpha)[..., 0], alpha, atol=1e-4, rtol=0)
    np.testing.assert_allclose(f64(out.image), colour, atol=1e-4, rtol=0)
    lp = adapt_params(octa, params)
    out = render(octa, lp, cam)
    assert_lossless(out)
    colour, alpha, _ = ref_lp.render(lp, "octahedron", np.asarray(cam.viewmat), cam.K, w, h,
                                     chord="analytic")  # fmt: skip
    np.testing.assert_allclose(f64(out.image), colour, atol=1e-4, rtol=0)


# ------------------------------------------------------------------ under the caller's jit


def test_user_jit_too_small_capacity_warns_at_run_time(gs):
    params, cam = large_scene(), camera()
    needed = count_entries(gs, params, cam)
    config = RenderConfig(max_entries=1024)

    @jax.jit
    def f(p):
        return render(gs, p, cam, config=config).image

    with pytest.warns(RuntimeWarning, match=rf"dropped {needed - 1024:,} .* {needed:,} needed"):
        jax.block_until_ready(f(params))
    # Enough capacity: silent.
    roomy = fit_config(gs, params, cam)
    assert roomy.max_entries >= needed

    @jax.jit
    def g(p):
        return render(gs, p, cam, config=roomy).image

    jax.block_until_ready(g(params))  # warnings are errors in this suite


def test_user_jit_reports_only_when_there_is_something_to_report(gs, monkeypatch):
    """The run-time report is a host callback behind a device-side test: a jitted render with
    nothing to report (the common case) calls no host code at all; one that drops calls it once
    per call (a callback costs a device-to-host transfer and a wait on an accelerator)."""
    from xprc.pipeline import capacity as cap

    calls = []
    real = cap.report_overflow

    def counting(stats, *args, **kwargs):
        calls.append(int(np.max(stats["dropped"])))
        return real(stats, *args, **kwargs)

    monkeypatch.setattr(cap, "report_overflow", counting)
    params, cam = large_scene(), camera()
    batch = Camera.stack([cam, cam])

    def jitted(config, camera):
        return jax.jit(lambda p: render(gs, p, camera, config=config).image)

    roomy = jitted(fit_config(gs, params, cam), cam)
    roomy_batch = jitted(fit_config(gs, params, batch), batch)
    tight = jitted(RenderConfig(max_entries=1024), cam)
    for _ in range(3):
        jax.block_until_ready(roomy(params))
        jax.block_until_ready(roomy_batch(params))
    assert calls == []  # nothing was due (warnings are errors here), and no callback ran
    with pytest.warns(RuntimeWarning, match="render dropped"):
        for _ in range(2):
            jax.block_until_ready(tight(params))
    assert len(calls) == 2 and all(c > 0 for c in calls)


def test_user_jit_raise_policy_raises(gs):
    params, cam = large_scene(), camera()
    config = RenderConfig(max_entries=1024, on_overflow="raise")

    @jax.jit
    def f(p):
        return render(gs, p, cam, config=config).image

    with pytest.raises(Exception, match="render dropped .* for lack of capacity"):
        jax.block_until_ready(f(params))


def test_eager_explicit_capacity_policies(gs):
    params, cam = large_scene(), camera()
    with pytest.raises(XprError, match="render dropped"):
        render(gs, params, cam, config=RenderConfig(max_entries=1024, on_overflow="raise"))
    out = render(gs, params, cam, config=RenderConfig(max_entries=1024, on_overflow="ignore"))
    assert int(out.stats["dropped"]) == int(out.stats["entries_needed"]) - 1024 > 0


@pytest.mark.parametrize(
    "options,message",
    [
        (dict(on_overflow="loud"), "on_overflow='loud': expected one of warn, raise"),
        (dict(max_entries=0), "max_entries=0: expected None or a whole number >= 1"),
        (dict(max_entries=-5), "max_entries=-5: expected None"),
        # these divided by zero deep in the pipeline, or rendered black without a word
        (dict(tile_size=0), r"tile_size=0: expected a whole number of pixels >= 1"),
        (dict(tile_size=16.0), r"tile_size=16.0: expected a whole number of pixels >= 1"),
        (dict(chunk=0), r"chunk=0: expected None or a whole number >= 1"),
        (dict(group=-1), r"group=-1: expected a whole number >= 1"),
        (dict(alpha_min=2.0), r"alpha_min=2.0: expected a number in \[0, 0.99\]"),
        (dict(alpha_min=float("nan")), r"alpha_min=nan: expected a number in \[0, 0.99\]"),
        (dict(t_min=1.0), r"t_min=1.0: expected a number in \[0, 0.01\)"),
        (dict(entries_per_primitive=0), r"entries_per_primitive=0: expected a finite number > 0"),
        (dict(distortion="yes"), r"distortion='yes': expected True or False"),
    ],
)
def test_bad_config_is_a_clear_error(gs, options, message):
    with pytest.raises(XprError, match=message):
        render(gs, random_scene(4), camera(), config=RenderConfig(**options))


# ------------------------------------------------------------------------ overflow-safe count


@pytest.mark.parametrize("n", [1, 7, 128, 129, 16_384, 16_385, 40_000])
def test_running_max_by_doubling_equals_numpy(n, monkeypatch):
    """The slot owners' running max by doubling, against NumPy's,
    with int32's extremes and long flat stretches (the owners' shape)."""
    rng = np.random.default_rng(n)
    x = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    x[rng.uniform(size=n) < 0.7] = np.iinfo(np.int32).min
    x[: min(n, 3)] = [np.iinfo(np.int32).min, 2**31 - 1, 0][: min(n, 3)]
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")  # the doubling, as on a TPU
    for values in (x, np.sort(x), x[::-1].copy()):
        got = np.asarray(jax.jit(running_max)(jnp.asarray(values)))
        np.testing.assert_array_equal(got, np.maximum.accumulate(values))


def test_exact_total_does_not_wrap():
    counts = jnp.full((6000,), 390_625, jnp.int32)
    hi, lo = (int(x) for x in np.asarray(exact_total(counts)))
    assert hi << 32 | lo == 6000 * 390_625


def test_binning_full_screen_boxes_on_a_huge_grid_reports_saturation():
    grid = TileGrid(10_000, 10_000, 16)
    n = 6000
    box = jnp.tile(jnp.asarray([[0.0, 0.0, 9999.0, 9999.0]], jnp.float32), (n, 1))
    valid = jnp.ones((n,), bool)
    depth = jnp.linspace(1.0, 2.0, n, dtype=jnp.float32)
    bins = jax.jit(bin_and_sort, static_argnums=(3, 4))(box, valid, depth, grid, 4096)
    true_total = n * grid.num_tiles  # 2,343,750,000 > 2^31 - 1
    hi, lo = (int(x) for x in np.asarray(bins.needed_exact))
    assert hi << 32 | lo == true_total
    assert int(bins.needed) == INT32_MAX  # saturated, flagged by the render as such
    kept = np.asarray(bins.kept)
    assert kept.sum() == 4096  # the buffer is full: the first tiles of the nearest primitive
    assert np.asarray(bins.prim)[:10].tolist() == [0] * 10
    demand = np.asarray(bins.demand)
    assert demand.min() == demand.max() == n


def test_binning_on_a_huge_grid_counts_small_boxes_exactly():
    """n x tiles past 2^31 takes the saturating cumulative sum (a plain one could wrap); when it
    does not saturate, the count is read off its end. The same count as NumPy's."""
    grid = TileGrid(10_000, 10_000, 16)
    n = 6000
    rng = np.random.default_rng(4)
    lo = rng.uniform(0, 9_900, (n, 2)).astype(np.float32)
    box = np.concatenate([lo, lo + rng.uniform(0, 60, (n, 2)).astype(np.float32)], axis=1)
    valid = rng.uniform(size=n) < 0.8
    depth = rng.uniform(1, 2, n).astype(np.float32)
    assert n * grid.num_tiles > INT32_MAX
    bins = jax.jit(bin_and_sort, static_argnums=(3, 4))(
        jnp.asarray(box), jnp.asarray(valid), jnp.asarray(depth), grid, 4096
    )
    t = np.floor(box / 16).astype(np.int64)
    want = int(np.sum(valid * (t[:, 2] - t[:, 0] + 1) * (t[:, 3] - t[:, 1] + 1)))
    hi, lo_ = (int(x) for x in np.asarray(bins.needed_exact))
    assert hi << 32 | lo_ == want == int(bins.needed)
    assert want > 4096  # an overflow: the demand comes from the scatters
    assert int(np.sum(bins.demand)) == want


def test_count_entries_exact_beyond_int32(gs):
    # 1,200 big Gaussians right in front of a 4000x4000 camera with 4x4 tiles: 10^6 tiles each.
    n = 1200
    params = random_scene(n, seed=3, sh_degree=0)
    params["means"] = np.tile(np.asarray([[0.0, 0.0, 2.0]], np.float32), (n, 1))
    params["scales"] = np.full((n, 3), np.log(50.0), np.float32)
    params["opacities"] = np.full((n,), 5.0, np.float32)
    cam = camera(4000, 4000, f=500.0)
    config = RenderConfig(tile_size=4)
    assert count_entries(gs, params, cam, config) == n * 1000 * 1000
    with pytest.raises(XprError, match=r"needs 1,200,000,000 \(primitive, tile\) entries"):
        render(gs, params, cam, config=config)


# -------------------------------------------------------------------------------- memory


def test_lossless_capacity_over_the_budget_is_a_clear_error(gs):
    params, cam = large_scene(), camera()
    config = RenderConfig(memory_budget=1 << 20)
    with pytest.raises(XprError) as err:
        render(gs, params, cam, config=config)
    msg = str(err.value)
    needed = count_entries(gs, params, cam)
    assert f"this render needs {needed:,} (primitive, tile) entries on a 96x64 image" in msg
    assert "over the memory budget of 1.0 MiB" in msg and "RenderConfig.tile_size" in msg


def test_memory_budget_environment_is_parsed_strictly(monkeypatch, gs):
    assert parse_bytes("12GiB", "X") == 12 << 30 and parse_bytes("1e9", "X") == 10**9
    monkeypatch.setenv("XPRC_MEMORY_BUDGET", "lots; rm -rf /")
    with pytest.raises(XprError, match=r"XPRC_MEMORY_BUDGET='lots; rm -rf /' is not a size"):
        render(gs, random_scene(4), camera())
    monkeypatch.setenv("XPRC_MEMORY_BUDGET", "64KiB")
    with pytest.raises(XprError, match="over the memory budget"):
        render(gs, large_scene(), camera())


# --------------------------------------------------------------------------- containment


def _with_nan(params, k):
    bad = {name: np.array(v) for name, v in params.items()}
    bad["scales"][k] = np.nan
    return bad


def test_finite_primitive_whose_footprint_overflows_is_counted_and_said(gs):
    """Finite parameters whose projection leaves float range (a raw log-scale of 40.6, from a
    diverging run, say) were dropped by the module's own finiteness check and counted nowhere:
    an image without that primitive, no warning. A primitive the spec rejects (behind the
    camera) is not counted."""
    params, cam = random_scene(6, seed=3, sh_degree=0), camera()
    params["scales"][0], params["means"][0], params["quats"][0] = 40.54, (0, 0, 3), (1, 0, 0, 0)
    params["means"][1] = (0.0, 0.0, -5.0)  # behind the camera: invalid by the spec, not lost
    with pytest.warns(RuntimeWarning, match=r"left out 1 primitive.*footprint overflows"):
        out = render(gs, params, cam)
    assert int(out.stats["nonfinite"]) == 1
    proj = gs.project({k: jnp.asarray(v) for k, v in params.items()}, cam)
    assert np.asarray(proj["lost"]).tolist() == [True] + [False] * 5
    assert np.all(np.isfinite(np.asarray(proj["attrs"])))  # only its footprint overflowed
    assert np.all(np.isfinite(np.asarray(params["scales"])))


def test_nan_primitive_is_contained(gs):
    k = 0  # padding entries used to read primitive 0
    params, cam = random_scene(50, seed=21, sh_degree=1), camera()
    config = RenderConfig(max_entries=4096)  # the same buffer layout for both renders
    clean = render(gs, params, cam, config=config)
    others = [i for i in range(50) if i != k]
    # "Without it": the same primitive moved behind the camera (same shapes, one compile).
    without = {n: np.array(v) for n, v in params.items()}
    without["means"][k] = (0.0, 0.0, -10.0)
    ref_out = render(gs, without, cam, config=config)
    with pytest.warns(RuntimeWarning, match="left out 1 primitive.* not finite"):
        bad = render(gs, _with_nan(params, k), cam, config=config)
    assert int(bad.stats["nonfinite"]) == 1 and int(clean.stats["nonfinite"]) == 0
    # The NaN primitive is left out: every pixel equals the render without it, bit for bit.
    np.testing.assert_array_equal(np.asarray(bad.image), np.asarray(ref_out.image))
    assert np.all(np.isfinite(np.asarray(bad.image)))

    rng = np.random.default_rng(0)
    ct = jnp.asarray(rng.normal(size=(H, W, 3)), jnp.float32)

    def loss(p):
        return jnp.sum(render(gs, p, cam, config=config).image * ct)

    with pytest.warns(RuntimeWarning, match="left out 1 primitive"):  # at run time, under grad
        g_bad = jax.grad(loss)({n: jnp.asarray(v) for n, v in _with_nan(params, k).items()})
    g_ref = jax.grad(loss)({n: jnp.asarray(v) for n, v in without.items()})
    for name in g_ref:
        got, want = np.asarray(g_bad[name])[others], np.asarray(g_ref[name])[others]
        np.testing.assert_array_equal(got, want)


def test_infinite_parameter_with_a_finite_projection_is_left_out_and_counted(gs):
    """+inf in an SH coefficient whose basis value is negative gave a finite projection (the
    colour channel clamped to 0): the primitive was drawn black in that channel, uncounted. It
    is left out and counted like any non-finite parameter; the image equals the render of the
    same primitive moved out of view."""
    params, cam = random_scene(8, seed=5, sh_degree=1), camera()
    k = 2
    for j, inf in itertools.product((1, 2, 3), (np.inf, -np.inf)):
        bad = {n: np.array(v) for n, v in params.items()}
        bad["sh"][k, j, :] = inf  # where inf times the basis value is -inf: clamped to 0
        proj = gs.project({n: jnp.asarray(v) for n, v in bad.items()}, cam)
        if np.all(np.isfinite(np.asarray(proj["features"])[k])):  # the projection hid it
            break
    else:
        raise AssertionError("no infinite degree-1 coefficient gave a finite colour")
    without = {n: np.array(v) for n, v in params.items()}
    without["means"][k] = (0.0, 0.0, -10.0)
    config = RenderConfig(max_entries=4096)
    with pytest.warns(RuntimeWarning, match="left out 1 primitive"):
        out = render(gs, bad, cam, config=config)
    assert int(out.stats["nonfinite"]) == 1
    ref = render(gs, without, cam, config=config)
    np.testing.assert_array_equal(np.asarray(out.image), np.asarray(ref.image))


def test_zero_primitives_render_the_background(gs):
    empty = {k: v[:0] for k, v in random_scene(3).items()}
    out = render(gs, empty, camera(), background=np.asarray(BG, np.float32), mode="RGB+D")
    np.testing.assert_allclose(np.asarray(out.image), np.broadcast_to(BG, (H, W, 3)), atol=1e-7)
    assert float(np.max(np.asarray(out.alpha))) == 0.0 and int(out.stats["dropped"]) == 0


@pytest.mark.parametrize("bg", [(1.0, 2.0), (0.0, 0.0, 0.0, 0.0), (np.nan, 0, 0)])
def test_background_of_the_wrong_length_or_not_finite(gs, bg):
    with pytest.raises(XprError, match="background"):
        render(gs, random_scene(3), camera(), background=np.asarray(bg, np.float32))


def test_sh_coefficients_that_are_not_a_degree_are_refused(gs):
    """A lower SH degree ((d + 1)^2 coefficients) is padded with zero bands; 5 coefficients are
    no degree at all, and 0 no colour: both were zero-padded without a word."""
    params = random_scene(3, sh_degree=3)
    for k in (1, 4, 9):
        short = dict(params, sh=params["sh"][:, :k])
        assert np.asarray(render(gs, short, camera()).image).shape == (H, W, 3)
    for k in (5, 0):
        with pytest.raises(XprError, match=rf"\({k} SH coefficients: not \(degree \+ 1\)\^2"):
            render(gs, dict(params, sh=params["sh"][:, :k]), camera())


def test_the_alpha_warning_names_where_clamp_alpha_puts_an_opaque_alpha():
    """The warning's 0.99 is composite_scan.ALPHA_CAP, the value clamp_alpha gives 1 and above
    (signed: -1 and below, -ALPHA_CAP)."""
    from xprc.pipeline.capacity import alpha_message
    from xprc.pipeline.composite_scan import clamp_alpha

    fixed, bad = clamp_alpha(jnp.asarray([1.0, 2.0, -3.0]), signed=True)
    assert bool(bad.all())
    hi, _, lo = (float(v) for v in np.asarray(fixed, np.float64))
    msg = alpha_message(5)
    assert hi == -lo and f"(1 and above to {hi:.2f}: an opaque primitive draws at {hi:.2f})" in msg
    assert f"'clamp(..., -{hi:.2f}, {hi:.2f})'" in msg


def test_a_given_capacity_over_the_budget_is_refused_before_allocating(gs):
    """Hostile pass (issue 43 item 5, the render's twin of --capacity): a capacity the caller
    gives (RenderConfig.max_entries, `xprc render --max-entries`) was allocated as given, never
    checked against the budget the counted one meets: --max-entries 2000000000 asked XLA for
    768 GB (refused by XLA there; one XLA grants can take the machine's memory)."""
    from xprc.pipeline.binning import TileGrid
    from xprc.pipeline.capacity import estimate_bytes

    params, cam = random_scene(4), camera()
    grid = TileGrid(cam.width, cam.height, 16)
    budget = estimate_bytes(1000, gs.NUM_ATTRS, 4, grid)
    config = RenderConfig(max_entries=1001, memory_budget=budget)
    with pytest.raises(XprError) as err:
        render(gs, params, cam, config=config)
    assert str(err.value) == (
        f"error: RenderConfig.max_entries (xprc render --max-entries) of 1,001 entries on a "
        f"96x64 image with 16x16 tiles would take about "
        f"{estimate_bytes(1001, gs.NUM_ATTRS, 4, grid) / 1024:.1f} KiB, over the memory budget "
        f"of {budget / 1024:.1f} KiB; give at most 1,000, leave it unset (the entries are then "
        "counted and the capacity sized from them), or raise the budget "
        "(RenderConfig.memory_budget or XPRC_MEMORY_BUDGET)"
    )
    render(gs, params, cam, config=RenderConfig(max_entries=1000, memory_budget=budget))
