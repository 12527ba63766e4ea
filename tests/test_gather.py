"""The sorted transpose of the compositors' row gather (xprc/pipeline/gather.py) against NumPy's
unbuffered `np.add.at` in float64 (an independent scatter-add), on awkward index patterns, and
the renderer's gradients with it against the default scatter-add, for the XLA and the
interpreted Pallas compositors."""

from __future__ import annotations

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

    scatter, ordered = (jax.grad(loss)(table, how) for how in gather.TRANSPOSES)
    np.testing.assert_allclose(np.asarray(ordered), np.asarray(scatter), rtol=1e-12, atol=1e-14)
    assert np.count_nonzero(np.asarray(scatter)) > 0
    with pytest.raises(ValueError, match="transpose must be one of"):
        take_rows(table, index, "atomic")
    none = jnp.zeros((0,), jnp.int32)  # no entries: a zero gradient, as the scatter gives
    g = jax.grad(lambda t: jnp.sum(take_rows(t, none, "sorted")))(table)
    assert g.shape == table.shape and not np.any(np.asarray(g))


@pytest.mark.parametrize("compositor", ["xla", "pallas"])
def test_render_gradients_with_the_sorted_transpose(compositor, monkeypatch):
    """The same loss's parameter gradients, traced once with each transpose (distinct entry
    capacities keep the two traces apart in the renderer's caches)."""
    method = load(ROOT / "specs" / "3dgs.xpr")
    raw = verify.scene(method, "random", 40, seed=3)
    params = {k: jnp.asarray(v, jnp.float32) for k, v in raw.items()}
    cam = look_at([0.4, -0.3, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], 24, 20, 60.0,
                  dtype=np.float32)  # fmt: skip
    weights = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (20, 24, 3)), jnp.float32)
    grads, scatters = {}, {}
    for how, entries in (("scatter", 4096 + 8), ("sorted", 4096 + 16)):
        monkeypatch.setattr(gather, "TRANSPOSE", how)
        config = RenderConfig(compositor=compositor, tile_size=8, chunk=4, group=2,
                              max_entries=entries)  # fmt: skip

        def loss(p, config=config):
            return jnp.sum(render(method, p, cam, config=config).image * weights)

        grads[how] = jax.grad(loss)(params)
        scatters[how] = str(jax.make_jaxpr(jax.grad(loss))(params)).count("scatter-add")
    # the sorted trace really ran: the gathers' transposes left no scatter-add behind
    assert scatters["sorted"] < scatters["scatter"], scatters
    for name, g in grads["scatter"].items():
        assert np.count_nonzero(np.asarray(g)) > 0, name
        np.testing.assert_allclose(
            np.asarray(grads["sorted"][name]), np.asarray(g), rtol=2e-5, atol=2e-6, err_msg=name
        )
