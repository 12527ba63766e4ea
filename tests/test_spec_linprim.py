"""specs/linprim_octahedron.xpr and specs/linprim_tetrahedron.xpr (issue 5).

- analytic chords through the compiled modules' `project` + `response` (axis rays, misses,
  grazing a vertex), the footprint and the near-plane rule;
- the independent NumPy twin (tests/reference_linprim.py): its dense sampler against its exact
  clipping on many rays.

tests/test_conformance.py has the checks every spec answers to: whole renders through the
shared pipeline against the twin's sampler; gradients against central finite differences in
float64, and finite everywhere (rays exactly through vertices, edges and faces, zero distances,
zero quaternions, saturated opacity); one trace for new values. It uses the helpers here.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_linprim as ref
from conftest import ROOT

from xprc.camera import Camera

KINDS = ("octahedron", "tetrahedron")
W, H = 64, 48


@functools.cache
def load_kind(kind):
    from xprc.compiler.driver import load

    return load(ROOT / "specs" / f"linprim_{kind}.xpr")


@pytest.fixture(scope="module", params=KINDS)
def kind(request):
    return request.param


def identity_camera(width=W, height=H, f=60.0, dtype=np.float64):
    K = np.array([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]], dtype)
    return Camera(viewmat=np.eye(4, dtype=dtype), K=K, width=width, height=height)


def one(kind, mu, quat, dists, opacity=0.7, logit=None):
    """Raw float64 parameters of a single primitive (opacity given linear, or as a logit)."""
    if logit is None:
        logit = np.log(opacity / (1 - opacity))
    return {
        "means": jnp.asarray([mu], jnp.float64),
        "quats": jnp.asarray([quat], jnp.float64),
        "scales": jnp.asarray([dists], jnp.float64),
        "opacities": jnp.asarray([logit], jnp.float64),
        "sh": jnp.zeros((1, 16, 3), jnp.float64),
    }


def _alphas(module, params, origin, direction, camera):
    """alpha [N, M] of every primitive for every ray (origin, direction [M, 3])."""
    attrs = module.project(params, camera)["attrs"]
    n, m = attrs.shape[0], origin.shape[0]
    o = jnp.broadcast_to(origin[None], (n, m, 3))
    d = jnp.broadcast_to(direction[None], (n, m, 3))
    a = jnp.broadcast_to(attrs[:, None, :], (n, m, attrs.shape[1]))
    pixel = jnp.zeros((n, m, 2), attrs.dtype)
    return module.response(pixel, o, d, a, camera)


@functools.cache
def alphas_fn(kind):
    return jax.jit(functools.partial(_alphas, load_kind(kind)))


def alphas(kind, params, origin, direction, camera=None):
    camera = camera or identity_camera()
    origin = jnp.asarray(np.asarray(origin, np.float64).reshape(-1, 3))
    direction = jnp.asarray(np.asarray(direction, np.float64).reshape(-1, 3))
    return np.asarray(alphas_fn(kind)(params, origin, direction, camera))


def unit(v):
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def sigma_of(opacity, diameter):
    return -np.log(1 - opacity) / diameter


def rotation(quat):
    return ref.quat_to_rot(np.asarray([quat], np.float64))[0]


# ----------------------------------------------------------------------------- module surface


def test_module_surface(kind):
    m = load_kind(kind)
    acts = {p.name: p.activation for p in m.PARAMS}
    assert acts == {"means": "identity", "quats": "normalize", "scales": "abs",
                    "opacities": "sigmoid", "sh": "identity"}  # fmt: skip
    shapes = {p.name: tuple(p.shape) for p in m.PARAMS}
    assert shapes["scales"] == ((3,) if kind == "octahedron" else (4,))
    assert shapes["sh"] == (16, 3)
    assert m.USES_RAY and m.NUM_FEATURES == 3


# ----------------------------------------------------------------------------- analytic cases

QUAT = unit([0.8, 0.3, -0.4, 0.2])
MU = np.array([0.1, -0.2, 3.0])


def test_octahedron_axis_rays_have_chord_two_d():
    d = np.array([0.3, 0.5, 0.2])
    o = 0.7
    p = one("octahedron", MU, QUAT, d * [1, -1, 1], o)  # abs activation: signs do not matter
    R = rotation(QUAT)
    sigma = sigma_of(o, 2 * d.max())
    for i in range(3):
        for sign in (1, -1):
            axis = sign * R[:, i]
            got = alphas("octahedron", p, MU - 2.5 * axis, axis)[0, 0]
            assert got == pytest.approx(1 - np.exp(-sigma * 2 * d[i]), rel=1e-12)
            # From the centre only the half chord d_i counts (t >= 0).
            got = alphas("octahedron", p, MU, axis)[0, 0]
            assert got == pytest.approx(1 - np.exp(-sigma * d[i]), rel=1e-12)
    # The longest chord is the diameter: its alpha is the opacity parameter.
    assert alphas("octahedron", p, MU - 2 * R[:, 1], R[:, 1])[0, 0] == pytest.approx(o, rel=1e-12)


def test_tetrahedron_axis_rays():
    a = 0.4
    o = 0.6
    p = one("tetrahedron", MU, QUAT, [a, -a, a, a], o)
    R = rotation(QUAT)
    edge = a * np.sqrt(8 / 3)  # the diameter of a regular tetrahedron
    sigma = sigma_of(o, edge)
    for k in range(4):
        axis = R @ ref.TET_DIRS[k]
        # Through vertex k and the centre to the opposite face: a + a/3.
        got = alphas("tetrahedron", p, MU + 2 * axis, -axis)[0, 0]
        assert got == pytest.approx(1 - np.exp(-sigma * 4 * a / 3), rel=1e-12)
        assert alphas("tetrahedron", p, MU, axis)[0, 0] == pytest.approx(1 - np.exp(-sigma * a))
        assert alphas("tetrahedron", p, MU, -axis)[0, 0] == pytest.approx(
            1 - np.exp(-sigma * a / 3)
        )
    # The longest chords run along an edge; on the edge itself the ray only touches the
    # boundary (alpha 0), just inside it the chord is the edge length and alpha the opacity.
    v0, v1 = (MU + a * R @ ref.TET_DIRS[k] for k in (0, 1))
    e = unit(v1 - v0)
    assert alphas("tetrahedron", p, v0 - e, e)[0, 0] <= 1e-9
    inward = 1e-9 * unit(MU - 0.5 * (v0 + v1))
    assert alphas("tetrahedron", p, v0 + inward - e, e)[0, 0] == pytest.approx(o, rel=1e-6)


def test_misses_give_exactly_zero(kind):
    dists = [0.3, 0.5, 0.2] if kind == "octahedron" else [0.3, 0.5, 0.2, 0.4]
    p = one(kind, MU, QUAT, dists, 0.99)
    rng = np.random.default_rng(0)
    dirs = unit(rng.normal(size=(200, 3)))
    side = unit(np.cross(dirs, rng.normal(size=(200, 3))))
    origins = MU + 0.51 * side * 2 - 3 * dirs  # passes the centre at distance 1.02 > 0.5
    got = alphas(kind, p, origins, dirs)
    assert np.all(got == 0.0)
    # Pointing away: the primitive is behind the ray origin.
    got = alphas(kind, p, MU + 2 * dirs, dirs)
    assert np.all(got == 0.0)


def test_octahedron_chord_goes_to_zero_at_a_vertex():
    d = np.array([0.3, 0.5, 0.2])
    o = 0.9
    p = one("octahedron", MU, QUAT, d, o)
    R = rotation(QUAT)
    sigma = sigma_of(o, 2 * d.max())
    c, s = np.cos(0.7), np.sin(0.7)
    direction = R @ np.array([0.0, c, s])
    deltas = np.array([1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-9, 0.0, -1e-6, -1e-2])
    points = MU + (d[0] - deltas)[:, None] * R[:, 0]  # on the x axis, delta below vertex +x
    got = alphas("octahedron", p, points - direction, np.broadcast_to(direction, points.shape))[0]
    # The cross-section at x = d1 - delta is the diamond |y/d2| + |z/d3| <= delta/d1; the ray
    # through its centre has chord 2 (delta/d1) / (|c|/d2 + |s|/d3): linear in delta.
    chord = 2 * np.maximum(deltas, 0) / d[0] / (abs(c) / d[1] + abs(s) / d[2])
    np.testing.assert_allclose(got, 1 - np.exp(-sigma * chord), rtol=1e-9, atol=1e-14)
    assert np.all(got[deltas <= 0] <= 1e-14) and np.all(np.diff(got[deltas >= 0]) <= 0)


def test_tetrahedron_chord_goes_to_zero_at_a_vertex():
    a = np.array([0.3, 0.5, 0.2, 0.4])
    p = one("tetrahedron", MU, QUAT, a, 0.9)
    prim = ref._one(ref.primitives({k: np.asarray(v) for k, v in p.items()}, "tetrahedron"), 0)
    R = rotation(QUAT)
    u = R @ ref.TET_DIRS[2]
    direction = unit(np.cross(u, [0.3, 1.0, 0.2]))  # perpendicular to the vertex direction
    deltas = np.array([1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-9, 0.0, -1e-6])
    points = MU + (a[2] - deltas)[:, None] * u
    origins = points - direction
    dirs = np.broadcast_to(direction, points.shape)
    got = alphas("tetrahedron", p, origins, dirs)[0]
    expect = ref.alpha_of(prim, ref.chord_analytic(prim, origins, dirs))
    np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-14)
    # Near the vertex the cross-section is a triangle scaled by delta: chord ~ delta.
    chord = -np.log1p(-got) / prim["sigma"]
    np.testing.assert_allclose(chord[1:5] / deltas[1:5], chord[1] / deltas[1], rtol=1e-6)
    assert np.all(got[deltas <= 0] <= 1e-14)


def test_random_rays_match_exact_clipping(kind):
    params = ref.random_params(12, kind, seed=4, dtype=np.float64)
    prims = ref.primitives(params, kind)
    jp = {k: jnp.asarray(v) for k, v in params.items()}
    rng = np.random.default_rng(5)
    origins = rng.normal(size=(300, 3)) * 2 + [0, 0, 1]
    targets = prims["mu"][rng.integers(0, 12, 300)] + rng.normal(size=(300, 3)) * 0.03
    dirs = unit(targets - origins)
    got = alphas(kind, jp, origins, dirs)
    for i in range(12):
        prim = ref._one(prims, i)
        expect = ref.alpha_of(prim, ref.chord_analytic(prim, origins, dirs))
        np.testing.assert_allclose(got[i], expect, rtol=1e-9, atol=1e-12)
    assert np.mean(np.any(got > 0, axis=0)) > 0.5


def test_footprint_and_near_plane(kind):
    m = load_kind(kind)
    cam = identity_camera()
    nd = 3 if kind == "octahedron" else 4
    params = {
        "means": jnp.asarray([[0.2, 0.1, 3.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.1], [0, 0, -1.0]]),
        "quats": jnp.asarray([QUAT] * 4),
        "scales": jnp.asarray([[0.4] * nd, [1e-6] * nd, [0.2] * nd, [0.2] * nd]),
        "opacities": jnp.asarray([0.0, 0.0, 0.0, 0.0]),
        "sh": jnp.zeros((4, 16, 3)),
    }
    out = m.project(params, cam)
    box = np.asarray(out["box"])
    valid = np.asarray(out["valid"])
    np.testing.assert_array_equal(valid, [True, True, False, False])  # straddling / behind
    # Box = hull of the projected vertices.
    prim = ref._one(ref.primitives({k: np.asarray(v) for k, v in params.items()}, kind), 0)
    v = prim["verts"]
    uv = v[:, :2] / v[:, 2:] * 60.0 + [W / 2, H / 2]
    np.testing.assert_allclose(box[0], [*uv.min(0), *uv.max(0)], rtol=1e-12)
    # A tiny primitive keeps a 0.1 px footprint around its centre.
    np.testing.assert_allclose(box[1, 2:] - box[1, :2], [0.1, 0.1], rtol=1e-9)
    np.testing.assert_allclose(np.asarray(out["centre"])[1], [W / 2, H / 2])


# ----------------------------------------------------------------------------- the reference


def test_reference_sampler_matches_exact_clipping(kind):
    params = ref.random_params(10, kind, seed=6, dtype=np.float64)
    prims = ref.primitives(params, kind)
    rng = np.random.default_rng(7)
    for i in range(10):
        prim = ref._one(prims, i)
        r = ref.bounding_radius(prim)
        origins = prim["mu"] + rng.normal(size=(400, 3)) * 2
        dirs = unit(prim["mu"] + rng.normal(size=(400, 3)) * 0.5 * r - origins)
        samples = 512
        exact = ref.chord_analytic(prim, origins, dirs)
        sampled = ref.chord_sampled(prim, origins, dirs, samples=samples)
        spacing = 2 * r / samples
        # Only chords shorter than the spacing can be missed; every found chord is exact.
        found = sampled > 0
        np.testing.assert_allclose(sampled[found], exact[found], atol=1e-10)
        assert np.all(exact[~found] < spacing)
        assert found.sum() > 50
