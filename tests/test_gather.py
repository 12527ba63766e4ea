"""The sorted transpose of the compositors' row gather (xprc/pipeline/gather.py) against NumPy's
unbuffered `np.add.at` in float64 (an independent scatter-add), on awkward index patterns, and
the renderer's gradients with it against the default scatter-add, for the XLA and the
interpreted Pallas compositors."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from xprc import verify
from xprc.camera import look_at
from xprc.compiler.driver import load
from xprc.pipeline import RenderConfig, gather, render
from xprc.pipeline.gather import take_rows, transpose_sorted


def _reference(g, index, n):
    out = np.zeros((n, g.shape[1]))
    np.add.at(out, index, g.astype(np.float64))
    return out


PATTERNS = {
    "random": lambda rng, e, n: rng.integers(0, n, e),
    "one row": lambda rng, e, n: np.full(e, n - 1),
    "every row once": lambda rng, e, n: rng.permutation(n)[:e],
    "first and last": lambda rng, e, n: np.where(np.arange(e) % 2 == 0, 0, n - 1),
    "sorted runs": lambda rng, e, n: np.sort(rng.integers(0, n, e)),
}


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("e,n", [(1, 1), (5, 3), (64, 200), (300, 17)])
def test_transpose_sorted_equals_a_scatter_add(pattern, e, n):
    rng = np.random.default_rng(e * 1000 + n)
    index = PATTERNS[pattern](rng, e, n).astype(np.int32)
    e = index.shape[0]  # "every row once" takes at most n
    g = rng.normal(size=(e, 3))
    out = jax.jit(transpose_sorted, static_argnums=2)(jnp.asarray(g), jnp.asarray(index), n)
    np.testing.assert_allclose(np.asarray(out), _reference(g, index, n), rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=0, max_size=40), st.integers(10, 12))
def test_transpose_sorted_any_indices(indices, n):
    index = np.asarray(indices, np.int32)
    g = np.arange(1, 2 * len(index) + 1, dtype=np.float64).reshape(-1, 2)
    out = transpose_sorted(jnp.asarray(g), jnp.asarray(index), n)
    np.testing.assert_array_equal(np.asarray(out), _reference(g, index, n))


def test_take_rows_gradients_agree_and_the_choice_is_checked():
    rng = np.random.default_rng(1)
    table = jnp.asarray(rng.normal(size=(20, 3)))
    index = jnp.asarray(rng.integers(0, 20, (6, 7)).astype(np.int32))
    w = jnp.asarray(rng.normal(size=(6, 7, 3)))

    def loss(t, how):
        return jnp.sum(jnp.sin(take_rows(t, index, how)) * w)

    scatter, ordered = (jax.grad(loss)(table, how) for how in ("scatter", "sorted"))
    # "runs" without the binning's runs is the scatter-add
    np.testing.assert_array_equal(np.asarray(jax.grad(loss)(table, "runs")), np.asarray(scatter))
    np.testing.assert_allclose(np.asarray(ordered), np.asarray(scatter), rtol=1e-12, atol=1e-14)
    assert np.count_nonzero(np.asarray(scatter)) > 0
    with pytest.raises(ValueError, match="transpose must be one of"):
        take_rows(table, index, "atomic")
    none = jnp.zeros((0,), jnp.int32)  # no entries: a zero gradient, as the scatter gives
    g = jax.grad(lambda t: jnp.sum(take_rows(t, none, "sorted")))(table)
    assert g.shape == table.shape and not np.any(np.asarray(g))


def _gradients_agree(how, loss, params, monkeypatch):
    """`loss`'s parameter gradients traced with the scatter-add and with `how`: equal, not all
    zero, and `how`'s trace really ran (its gradient holds fewer scatter-adds)."""
    grads, scatters = {}, {}
    for h in ("scatter", how):
        monkeypatch.setattr(gather, "TRANSPOSE", h)
        # the transpose is read when a render is traced (the module, not the function)
        sys.modules["xprc.pipeline.render"]._jitted.cache_clear()
        grads[h] = jax.grad(loss)(params)
        scatters[h] = str(jax.make_jaxpr(jax.grad(loss))(params)).count("scatter-add")
    assert scatters[how] < scatters["scatter"], scatters
    for name, g in grads["scatter"].items():
        assert np.count_nonzero(np.asarray(g)) > 0, name
        np.testing.assert_allclose(
            np.asarray(grads[how][name]), np.asarray(g), rtol=2e-5, atol=2e-6, err_msg=name
        )


@pytest.mark.parametrize("compositor", ["xla", "pallas"])
def test_render_gradients_with_the_sorted_transpose(compositor, monkeypatch):
    """The same loss's parameter gradients with the sorted transpose and the scatter-add."""
    method = load(ROOT / "specs" / "3dgs.xpr")
    raw = verify.scene(method, "random", 40, seed=3)
    params = {k: jnp.asarray(v, jnp.float32) for k, v in raw.items()}
    cam = look_at([0.4, -0.3, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], 24, 20, 60.0,
                  dtype=np.float32)  # fmt: skip
    weights = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (20, 24, 3)), jnp.float32)
    config = RenderConfig(compositor=compositor, tile_size=8, chunk=4, group=2,
                          max_entries=4096 + 8)  # fmt: skip

    def loss(p):
        return jnp.sum(render(method, p, cam, config=config).image * weights)

    _gradients_agree("sorted", loss, params, monkeypatch)


# --- the "runs" transpose: the binning's runs of slots summed by doubling, no scatter ---


def _bins_with_runs(capacity, ellipses, stable, monkeypatch):
    """bin_and_sort(..., runs=True) of 60 random boxes (ellipses optional) on a 70x50 grid;
    `stable` forces the sort branch for large grids x capacities (the (tile, prim, slot) sort)."""
    from test_tiles import random_ellipses

    from xprc.pipeline import binning

    if stable:
        real = binning._sort_entries
        monkeypatch.setattr(
            binning, "_sort_entries", lambda t, p, ids, c, w=False: real(t, p, 2**32, c, w)
        )
    rng = np.random.default_rng(capacity)
    grid = binning.TileGrid(70, 50, 8)
    n = 60
    centre, ellipse = random_ellipses(n, rng, grid.width, grid.height, max_axis=30.0)
    box = np.concatenate([centre - 14, centre + 14], axis=1)
    valid = rng.uniform(size=n) < 0.85
    extra = (jnp.asarray(ellipse), jnp.asarray(centre)) if ellipses else (None, None)
    bins = binning.bin_and_sort(jnp.asarray(box), jnp.asarray(valid),
                                jnp.asarray(rng.uniform(1, 5, n)), grid, capacity, *extra,
                                runs=True)  # fmt: skip
    return bins, grid, n


@pytest.mark.parametrize("by_column", [False, True])
@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("ellipses", [False, True])
@pytest.mark.parametrize("capacity", [4096, 500, 97])  # 97 and 500 overflow
def test_transpose_runs_equals_a_scatter_add(capacity, ellipses, stable, by_column, monkeypatch):
    """Per primitive, the sum of the kept entries' rows, against np.add.at in float64: with
    and without culling, with the buffer overflowing (runs cut at the capacity), with either
    sort branch (the slot carried in the sort, or read from the unique key), and with its
    gathers as rows or one column at a time (`take_columns` on a source of any size)."""
    if by_column:
        monkeypatch.setattr(gather, "WHOLE_SOURCE_BYTES", 0)
    bins, grid, n = _bins_with_runs(capacity, ellipses, stable, monkeypatch)
    assert (int(bins.needed) > capacity) == (capacity < 4096)
    prim = np.asarray(bins.prim)
    live = np.arange(capacity) < int(bins.tile_start[-1])
    g = np.random.default_rng(1).normal(size=(capacity, 5))
    g[~live] = 0.0  # the caller's contract: dead slots carry no cotangent
    steps = int(np.ceil(np.log2(grid.num_tiles)))
    out = gather.transpose_runs(jnp.asarray(g), bins.runs, steps)
    np.testing.assert_allclose(np.asarray(out), _reference(g[live], prim[live], n),
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    assert len(set(prim[live])) > 5  # many runs, some cut at the capacity


def test_runs_sort_branches_agree_on_the_slots(monkeypatch):
    """The slot each sorted entry had: read from the unique key, or carried through the stable
    sort; both a permutation of the slots in (tile, slot) order."""
    plain, _, _ = _bins_with_runs(700, True, False, monkeypatch)
    carried, _, _ = _bins_with_runs(700, True, True, monkeypatch)
    for a, b in zip(plain.runs, carried.runs, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.sort(np.asarray(plain.runs.slot)), np.arange(700))


@pytest.mark.parametrize("limit", [0, 2**40])
def test_take_columns_as_rows_or_column_by_column(limit, monkeypatch):
    """x[:, index], NaN and signed zeros included, bit for bit, whichever way it gathers."""
    monkeypatch.setattr(gather, "WHOLE_SOURCE_BYTES", limit)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 3000)).astype(np.float32)
    x[2, 5], x[0, 7] = np.nan, -0.0
    index = rng.integers(0, 3000, 5000).astype(np.int32)
    got = np.asarray(gather.take_columns(jnp.asarray(x), jnp.asarray(index)))
    np.testing.assert_array_equal(got.view(np.int32), x[:, index].view(np.int32))
    fresh = jax.jit(lambda x, i: gather.take_columns(x, i))  # (a jit of the function is cached)
    text = fresh.lower(jnp.asarray(x), jnp.asarray(index)).as_text()
    assert ("while" in text) == (limit == 0)  # one column at a time: a loop over the columns


def test_inverse_permutation():
    perm = np.random.default_rng(0).permutation(1000).astype(np.int32)
    inv = np.asarray(gather.inverse_permutation(jnp.asarray(perm)))
    np.testing.assert_array_equal(inv[perm], np.arange(1000))


@pytest.mark.parametrize("entries", [4096 + 24, 120])  # 120 overflows
def test_render_gradients_with_the_runs_transpose(entries, monkeypatch):
    """The Pallas compositor (interpreted) with the runs transpose: the same gradients as the
    scatter-add, for one camera and a batch of two, with and without the buffer overflowing."""
    method = load(ROOT / "specs" / "3dgs.xpr")
    raw = verify.scene(method, "random", 40, seed=5)
    params = {k: jnp.asarray(v, jnp.float32) for k, v in raw.items()}
    cams = [look_at([x, -0.3, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], 24, 20, 60.0,
                    dtype=np.float32) for x in (0.4, -0.5)]  # fmt: skip
    batch = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *cams)
    weights = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (20, 24, 3)), jnp.float32)
    config = RenderConfig(compositor="pallas", tile_size=8, chunk=4, group=2,
                          max_entries=entries, on_overflow="ignore")  # fmt: skip

    def loss(p):
        one = render(method, p, cams[0], config=config).image
        two = render(method, p, batch, config=config).image
        return jnp.sum(one * weights) + jnp.sum(two * weights[None])

    _gradients_agree("runs", loss, params, monkeypatch)


def test_runs_only_up_to_the_entry_limit(monkeypatch):
    """Past RUNS_MAX_ENTRIES per view the render keeps the scatter-add (the 3M step's memory
    with the runs is unproven on a chip): the traced gradient holds the scatter's scatter-adds."""
    method = load(ROOT / "specs" / "3dgs.xpr")
    raw = verify.scene(method, "random", 12, seed=2)
    params = {k: jnp.asarray(v, jnp.float32) for k, v in raw.items()}
    cam = look_at([0.0, 0.0, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], 16, 16, 60.0,
                  dtype=np.float32)  # fmt: skip
    config = RenderConfig(compositor="pallas", tile_size=8, chunk=4, max_entries=512)

    def scatter_adds(how, limit):
        monkeypatch.setattr(gather, "TRANSPOSE", how)
        monkeypatch.setattr(gather, "RUNS_MAX_ENTRIES", limit)
        sys.modules["xprc.pipeline.render"]._jitted.cache_clear()
        grad = jax.grad(lambda p: jnp.sum(render(method, p, cam, config=config).image))
        return str(jax.make_jaxpr(grad)(params)).count("scatter-add")

    assert scatter_adds("runs", 512) < scatter_adds("scatter", 512)
    assert scatter_adds("runs", 511) == scatter_adds("scatter", 512)


def test_runs_transpose_without_its_inputs_is_an_error():
    """Without `live` or with no doubling step the sums would be wrong, silently: refused."""
    table = jnp.zeros((4, 2))
    index = jnp.zeros((3,), jnp.int32)
    runs = object()  # never read: the check comes first
    for kw in ({"steps": 2}, {"live": jnp.ones((3,), bool), "steps": 0}):
        with pytest.raises(ValueError, match="needs `live` and `steps`"):
            take_rows(table, index, "runs", runs=runs, **kw)
