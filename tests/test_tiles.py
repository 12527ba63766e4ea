"""Ellipse footprints (issue 17, "fewer entries"): a spec's optional `ellipse` output culls the
tiles of its footprint rectangle that the ellipse misses.

- The closed-form test (minimum of the quadratic form over the rectangle of a tile's pixel
  centres) against brute force: every tile with a pixel centre inside is kept; a kept tile with
  none is one the ellipse reaches between pixel centres (checked on a fine grid), and how many
  there are is measured.
- float32 ellipses as the 3DGS response rounds them: no pixel a float32 response reaches is lost.
- `bin_and_sort` with an ellipse against the rectangle enumeration: per-tile lists keep their
  depth order, an overflow is still counted exactly, unusable ellipses keep their rectangle.
- Renders with culling equal renders without it (float64, 1e-12) for 3DGS and Student-t scenes
  of large, elongated primitives, and the entry counts drop.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT

from xprc.camera import Camera
from xprc.compiler import check, parse
from xprc.compiler.driver import load
from xprc.data.workloads import adapt_params, random_scene
from xprc.errors import XprTypeError
from xprc.pipeline import RenderConfig, render
from xprc.pipeline.binning import (
    TileGrid,
    bin_and_sort,
    ellipse_hits,
    ellipse_usable,
    spread,
    tile_rects,
)

W, H = 96, 64


def random_ellipses(n, rng, width, height, max_axis=40.0):
    """Centres in and around the image; axes from 0.3 to `max_axis` px, any rotation."""
    centre = rng.uniform([-10, -10], [width + 10, height + 10], (n, 2))
    r1 = np.exp(rng.uniform(np.log(0.3), np.log(max_axis), n))
    r2 = r1 * np.exp(rng.uniform(np.log(0.02), 0, n))  # up to 50:1
    th = rng.uniform(0, np.pi, n)
    c, s = np.cos(th), np.sin(th)
    # A = R diag(1/r1^2, 1/r2^2) R^T
    a = c * c / r1**2 + s * s / r2**2
    b = c * s * (1 / r1**2 - 1 / r2**2)
    cc = s * s / r1**2 + c * c / r2**2
    return centre, np.stack([a, b, cc], -1)


def quad(e, dx, dy):
    return e[..., 0] * dx * dx + 2 * e[..., 1] * dx * dy + e[..., 2] * dy * dy


def centres_of(tx, ty, grid, step=1.0):
    """Points of the rectangle the tile's in-image pixel centres span, `step` apart."""
    t = grid.tile
    xs = np.arange(tx * t + 0.5, min((tx + 1) * t, grid.width) - 0.5 + 1e-9, step)
    ys = np.arange(ty * t + 0.5, min((ty + 1) * t, grid.height) - 0.5 + 1e-9, step)
    return np.meshgrid(xs, ys)


def all_pairs(centre, ellipse, grid):
    n = centre.shape[0]
    tx, ty = np.meshgrid(np.arange(grid.tiles_x), np.arange(grid.tiles_y))
    tx, ty = np.tile(tx.ravel(), n), np.tile(ty.ravel(), n)
    k = np.repeat(np.arange(n), grid.num_tiles)
    hit = ellipse_hits(jnp.asarray(centre[k]), jnp.asarray(ellipse[k]), jnp.asarray(tx),
                       jnp.asarray(ty), grid)  # fmt: skip
    return k, tx, ty, np.asarray(hit)


def test_ellipse_tile_test_against_brute_force():
    rng = np.random.default_rng(0)
    grid = TileGrid(53, 37, 8)  # partial tiles at the right and bottom edges
    centre, ellipse = random_ellipses(300, rng, grid.width, grid.height)
    k, tx, ty, hit = all_pairs(centre, ellipse, grid)
    brute = np.zeros_like(hit)
    fine = np.zeros_like(hit)
    for i in range(k.size):
        x, y = centres_of(tx[i], ty[i], grid)
        brute[i] = np.any(quad(ellipse[k[i]], x - centre[k[i], 0], y - centre[k[i], 1]) <= 1)
        x, y = centres_of(tx[i], ty[i], grid, step=1 / 32)
        fine[i] = np.any(quad(ellipse[k[i]], x - centre[k[i], 0], y - centre[k[i], 1]) <= 1)
    assert not np.any(brute & ~hit), "a tile with a pixel centre inside the ellipse was culled"
    # Exact over the rectangle of pixel centres: what it keeps beyond the pixel centres the
    # ellipse reaches between them (a fine grid finds those, up to its 1/32 px spacing).
    extra = hit & ~brute
    assert not np.any(fine & ~hit)
    assert np.sum(extra & ~fine) <= 0.05 * max(np.sum(extra), 1)
    # How conservative against pixel centres: measured 54 of 691 kept tiles (7.8%) here, most
    # from sub-pixel ellipses (axes down to 0.3 px) that fit between pixel centres.
    assert np.sum(extra) <= 0.1 * np.sum(hit), (np.sum(extra), np.sum(hit))
    assert 0.02 * hit.size < np.sum(hit) < 0.5 * hit.size  # the cases are neither trivial nor all


def test_float32_ellipses_lose_no_pixel_the_response_reaches():
    """Ellipses rounded to float32 and the 3DGS response's own float32 arithmetic
    (0.5 (a dx^2 + c dy^2) + b dx dy <= 0.5): every pixel inside is in a kept tile, also for
    50:1 ellipses, where the form's terms cancel."""
    rng = np.random.default_rng(1)
    grid = TileGrid(61, 45, 16)
    centre, ellipse = random_ellipses(400, rng, grid.width, grid.height, max_axis=80.0)
    centre, ellipse = centre.astype(np.float32), ellipse.astype(np.float32)
    k, tx, ty, hit = all_pairs(centre, ellipse, grid)
    lost = 0
    for i in np.flatnonzero(~hit):
        x, y = (v.astype(np.float32) for v in centres_of(tx[i], ty[i], grid))
        e, c = ellipse[k[i]], centre[k[i]]
        dx, dy = x - c[0], y - c[1]
        sigma = np.float32(0.5) * (e[0] * dx * dx + e[2] * dy * dy) + e[1] * dx * dy
        lost += int(np.sum(sigma <= np.float32(0.5)))
    assert lost == 0


def numpy_rectangle_entries(box, valid, depth, grid, capacity):
    """The rectangle entries in buffer order, (primitive, tile), the first `capacity` kept."""
    x0, y0, w, h, _ = (np.asarray(a) for a in tile_rects(jnp.asarray(box), jnp.asarray(valid),
                                                        grid))  # fmt: skip
    order = np.argsort(np.where(valid, depth, np.inf), kind="stable")
    out = []
    for i in order:
        for ty in range(y0[i], y0[i] + h[i]):
            for tx in range(x0[i], x0[i] + w[i]):
                out.append((i, ty * grid.tiles_x + tx))
    return out[:capacity], len(out)


@pytest.mark.parametrize("carry_prim", [False, True])
@pytest.mark.parametrize("capacity", [4096, 300, 150])  # 224 entries: 150 overflows
def test_bin_and_sort_with_ellipses(capacity, carry_prim):
    rng = np.random.default_rng(2)
    grid = TileGrid(70, 50, 8)
    n = 60
    centre, ellipse = random_ellipses(n, rng, grid.width, grid.height, max_axis=30.0)
    # The box around each ellipse: half-widths sqrt(A^-1 diagonal)
    det = ellipse[:, 0] * ellipse[:, 2] - ellipse[:, 1] ** 2
    rx, ry = np.sqrt(ellipse[:, 2] / det), np.sqrt(ellipse[:, 0] / det)
    box = np.stack([centre[:, 0] - rx, centre[:, 1] - ry, centre[:, 0] + rx, centre[:, 1] + ry], 1)
    valid = rng.uniform(size=n) < 0.9
    depth = rng.uniform(1, 5, n)
    ellipse[:3] = [[np.nan, 0, 1], [1, 2, 1], [0, 0, 0]]  # unusable: keep the rectangle
    valid[:3] = True
    bins = jax.jit(bin_and_sort, static_argnums=(3, 4, 7))(
        jnp.asarray(box), jnp.asarray(valid), jnp.asarray(depth), grid, capacity,
        jnp.asarray(ellipse), jnp.asarray(centre), carry_prim,
    )  # fmt: skip
    rect, total = numpy_rectangle_entries(box, valid, depth, grid, capacity)
    assert int(bins.needed) == total
    assert (total > capacity) == (capacity == 150)  # one case overflows, so its last slot is live
    usable = np.asarray(ellipse_usable(jnp.asarray(ellipse)))
    assert int(bins.fallback) == np.sum(valid & ~usable) == 3
    kept_all = 0
    for t in range(grid.num_tiles):
        got = list(np.asarray(bins.prim[bins.tile_start[t] : bins.tile_start[t + 1]]))
        listed = [i for i, tt in rect if tt == t]
        it = iter(listed)
        assert all(p in it for p in got), "kept entries are not the rectangle list in order"
        ty, tx = divmod(t, grid.tiles_x)
        x, y = centres_of(tx, ty, grid)
        for i in listed:
            inside = np.any(quad(ellipse[i], x - centre[i, 0], y - centre[i, 1]) <= 1)
            if inside or not usable[i]:
                assert i in got, (t, i)
        assert int(bins.kept[t]) == len(got)
        assert int(bins.culled[t]) == len(listed) - len(got)
        kept_all += len(got)
    demand = np.asarray(bins.demand)
    every, _ = numpy_rectangle_entries(box, valid, depth, grid, total)
    tiles = np.bincount([t for _, t in every], minlength=grid.num_tiles)
    np.testing.assert_array_equal(demand, tiles)  # counted by the sort, or by scatters
    dropped = demand - np.asarray(bins.kept) - np.asarray(bins.culled)
    assert np.sum(dropped) == max(total - capacity, 0)  # the overflow, exact
    assert kept_all + int(np.sum(bins.culled)) == min(total, capacity)
    assert int(np.sum(bins.culled)) > 0.2 * min(total, capacity)
    if capacity < total:
        assert np.all(dropped >= 0)


def test_dead_slots_gather_distinct_rows():
    """The compositors' lane gather: live slots read their primitive, and the slots past the
    kept entries (empty ones share one owner after the sort) read distinct rows, so the
    gather's transpose does not pile their updates onto one row."""
    rng = np.random.default_rng(4)
    grid = TileGrid(70, 50, 8)
    n = 60
    centre, ellipse = random_ellipses(n, rng, grid.width, grid.height, max_axis=30.0)
    box = np.concatenate([centre - 12, centre + 12], axis=1)
    bins = bin_and_sort(jnp.asarray(box), jnp.ones(n, bool), jnp.asarray(rng.uniform(1, 5, n)),
                        grid, 2000, jnp.asarray(ellipse), jnp.asarray(centre))  # fmt: skip
    prim = np.asarray(bins.prim)
    kept = np.arange(prim.size) < int(bins.tile_start[-1])
    dead = prim[~kept]
    assert dead.size > n and np.bincount(dead).max() > dead.size // 2  # the shared row
    index = np.asarray(spread(bins.prim, jnp.asarray(kept), n))
    np.testing.assert_array_equal(index[kept], prim[kept])
    assert index.min() >= 0 and index.max() < n
    counts = np.bincount(index[~kept], minlength=n)
    assert counts.max() - counts.min() <= 1  # spread evenly over the rows


# ------------------------------------------------------------------------------ renders


class WithoutEllipse:
    """The same method with its `ellipse` output dropped: the plain rectangle footprint."""

    def __init__(self, method):
        self._method = method

    def __getattr__(self, name):
        return getattr(self._method, name)

    def project(self, raw, camera):
        out = dict(self._method.project(raw, camera))
        out.pop("ellipse")
        return out


def camera(f=60.0):
    K = np.array([[f, 0, W / 2 + 3.3], [0, f, H / 2 - 2.1], [0, 0, 1]])
    return Camera(viewmat=np.eye(4), K=K, width=W, height=H)


def elongated_scene(method, n=150, seed=5):
    """Random Gaussians, one axis stretched 8-20x, one squeezed: long, thin and rotated."""
    rng = np.random.default_rng(seed)
    p = random_scene(n, seed=seed, sh_degree=1, dtype=np.float64, spread=0.8)
    s = np.exp(p["scales"])
    s[:, 0] *= rng.uniform(8, 20, n)
    s[:, 1] *= 0.3
    p["scales"] = np.log(s)
    p["opacities"] = rng.normal(1.0, 2.0, n)
    return adapt_params(method, p)


@pytest.fixture(scope="module", params=["3dgs", "student_t"])
def spec_method(request):
    return load(ROOT / "specs" / f"{request.param}.xpr")


def test_culled_renders_equal_rectangle_renders(spec_method):
    cam = camera()
    params = elongated_scene(spec_method)
    config = RenderConfig(tile_size=8)
    culled = render(spec_method, params, cam, mode="RGB+D", config=config)
    plain = render(WithoutEllipse(spec_method), params, cam, mode="RGB+D", config=config)
    for a, b in ((culled.image, plain.image), (culled.alpha, plain.alpha),
                 (culled.depth, plain.depth)):  # fmt: skip
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-12)
    assert float(jnp.max(plain.alpha)) > 0.5
    s, r = culled.stats, plain.stats
    assert int(s["entries_needed"]) == int(r["entries_needed"])  # rectangle entries
    assert int(s["dropped"]) == 0 and int(jnp.sum(s["dropped_per_tile"])) == 0
    assert int(s["ellipse_fallback"]) == 0 and int(r["entries_culled"]) == 0
    kept = int(jnp.sum(s["entries_per_tile"]))
    assert kept + int(s["entries_culled"]) == int(s["entries_needed"])
    assert kept < 0.7 * int(s["entries_needed"])  # elongated primitives: fewer entries


def test_gradients_with_culling_equal_rectangle_gradients(spec_method):
    cam = camera()
    params = elongated_scene(spec_method, n=40, seed=8)
    config = RenderConfig(tile_size=8, max_entries=4096)

    def loss(m):
        def f(p):
            out = render(m, p, cam, config=config)
            return jnp.sum(out.image * jnp.linspace(0.1, 1.0, W)[None, :, None])

        return jax.grad(f)(params)

    g1, g2 = loss(spec_method), loss(WithoutEllipse(spec_method))
    for k in g1:
        np.testing.assert_allclose(np.asarray(g1[k]), np.asarray(g2[k]), rtol=0, atol=1e-10)


def test_thin_diagonal_gaussians_need_few_entries():
    """A 45-degree streak crosses a diagonal of tiles, not its bounding square."""
    gs = load(ROOT / "specs" / "3dgs.xpr")
    cam = Camera(
        viewmat=np.eye(4), K=np.array([[200.0, 0, 128], [0, 200.0, 128], [0, 0, 1]]),
        width=256, height=256,
    )  # fmt: skip
    n = 4
    params = {
        "means": np.array([[x, x, 5.0] for x in (-0.8, -0.2, 0.2, 0.8)]),
        "quats": np.tile([np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)], (n, 1)),  # 45 deg about z
        "scales": np.log(np.tile([2.0, 0.01, 0.01], (n, 1))),
        "opacities": np.full(n, 3.0),
        "sh": np.zeros((n, 4, 3)),
    }
    out = render(gs, params, cam, config=RenderConfig(tile_size=16))
    needed = int(out.stats["entries_needed"])
    kept = int(jnp.sum(out.stats["entries_per_tile"]))
    assert needed > 200  # the bounding squares cover most of the image
    assert kept < 0.3 * needed, (kept, needed)
    assert kept + int(out.stats["entries_culled"]) == needed


def test_ellipse_must_be_a_vec3():
    text = """primitive P
param means : vec3
projection {
  emit centre = [0, 0], depth = 1, radius = 1, valid = true, ellipse = [1, 1]
}
response { alpha = 0 }
color = [1, 1, 1]
"""
    with pytest.raises(XprTypeError, match="'ellipse' must be vec3") as e:
        check.check(parse.parse(text, "t.xpr"))
    assert "t.xpr:4:" in str(e.value)


def test_bin_and_sort_of_half_precision_equals_float32():
    """float16 footprints: the ellipse test's inputs are widened to float32 bits for the row
    gather and read back as float32 (they came back with an extra axis of 2)."""
    rng = np.random.default_rng(4)
    n, grid = 64, TileGrid(64, 48, 8)
    centre = rng.uniform(0, 60, (n, 2)).round()
    box = np.concatenate([centre - 5, centre + 5], axis=1)
    ellipse = np.tile([[0.0625, 0.0, 0.0625]], (n, 1))
    depth = rng.permutation(n) + 1.0
    got = {}
    for dtype in (jnp.float16, jnp.float32):
        args = [jnp.asarray(a, dtype) for a in (box, depth, ellipse, centre)]
        got[dtype] = bin_and_sort(args[0], jnp.ones(n, bool), args[1], grid, 2048, *args[2:])
    half, single = got[jnp.float16], got[jnp.float32]
    assert int(single.culled.sum()) > 0
    for field in ("tile_start", "kept", "culled", "demand", "prim"):
        np.testing.assert_array_equal(getattr(half, field), getattr(single, field), field)
