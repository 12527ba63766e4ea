"""specs/linprim_octahedron.xpr and specs/linprim_tetrahedron.xpr (issue 5).

- analytic chords through the compiled modules' `project` + `response` (axis rays, misses,
  grazing a vertex), the footprint and the near-plane rule;
- the independent NumPy twin (tests/reference_linprim.py): its dense sampler against its exact
  clipping on many rays, then whole renders through the shared pipeline against the sampler;
- gradients against central finite differences in float64, and finite everywhere (rays exactly
  through vertices, edges and faces, zero distances, zero quaternions, saturated opacity);
- one trace for new values.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_linprim as ref
from conftest import ROOT
from gradcheck import assert_grads_match_fd

from xprc.camera import Camera, look_at
from xprc.pipeline import render
from xprc.pipeline.render import TRACE_COUNT

KINDS = ("octahedron", "tetrahedron")
W, H = 64, 48
N_SCENE = 150


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


# ----------------------------------------------------------------------------- whole renders


def scene(kind, seed):
    """150 random primitives plus the awkward ones: straddling the near plane, behind the
    camera, zero distances, a zero quaternion, saturated opacity, one around the camera."""
    p = ref.random_params(N_SCENE, kind, seed=seed, spread=1.2, depth=4.0)
    nd = p["scales"].shape[1]
    p["means"][:4] = [[0.3, 0.1, 0.05], [0.1, 0.1, -1.0], [-0.5, 0.2, 3.0], [0.4, -0.3, 2.5]]
    p["scales"][2] = 0.0
    p["scales"][3, 0] = 0.0
    p["quats"][4] = 0.0
    p["opacities"][5] = 40.0
    p["means"][6] = [0, 0, 0]
    p["scales"][6] = [0.5] * nd
    return p


CAMERAS = {
    "identity": lambda: identity_camera(dtype=np.float32),
    "look_at": lambda: look_at(
        [1.5, -1.0, -0.5], [0.0, 0.0, 4.0], [0, -1, 0], W, H, 70.0, dtype=np.float32
    ),  # fmt: skip
}


@pytest.mark.parametrize("cam_name", sorted(CAMERAS))
def test_render_matches_dense_sampling_reference(kind, cam_name):
    m = load_kind(kind)
    params = scene(kind, seed=11)
    cam = CAMERAS[cam_name]()
    bg = (0.1, 0.2, 0.3)
    out = render(m, params, cam, background=jnp.asarray(bg, jnp.float32), mode="RGB+D")
    colour, alpha, dsum = ref.render(params, kind, cam.viewmat, cam.K, W, H, background=bg)
    assert float(alpha.max()) > 0.5 and float(alpha.mean()) > 0.02  # a real test
    np.testing.assert_allclose(np.asarray(out.image, np.float64), colour, atol=1e-3, rtol=0)
    np.testing.assert_allclose(np.asarray(out.alpha[..., 0], np.float64), alpha, atol=1e-3)
    np.testing.assert_allclose(np.asarray(out.depth[..., 0], np.float64), dsum, atol=1e-2)
    assert int(out.stats["dropped"]) == 0


def test_renders_trace_once_across_new_values(kind):
    m = load_kind(kind)
    bg = jnp.asarray([0.1, 0.2, 0.3], jnp.float32)
    cam = identity_camera(dtype=np.float32)
    render(m, scene(kind, seed=11), cam, background=bg, mode="RGB+D").image.block_until_ready()
    before = TRACE_COUNT["render"]
    for seed in (12, 13):
        cam = identity_camera(f=50.0 + seed, dtype=np.float32)
        out = render(m, scene(kind, seed=seed), cam, background=bg, mode="RGB+D")
        out.image.block_until_ready()
    assert TRACE_COUNT["render"] == before


# ----------------------------------------------------------------------------- gradients


@functools.cache
def loss_fns(kind):
    """sum(weights [N, M] * alpha) over primitives and rays, and its value and gradient in
    (params, origins, directions); jitted once per kind and shared by the gradient tests."""
    fn = alphas_fn(kind)
    cam = identity_camera()

    def loss(p, o, d, w):
        return jnp.sum(fn(p, o, d, cam) * w)

    return jax.jit(loss), jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))


def test_response_gradients_match_finite_differences(kind):
    raw = ref.random_params(3, kind, seed=8, dtype=np.float64, size=(0.2, 0.4))
    params = {k: jnp.asarray(v) for k, v in raw.items()}
    params["opacities"] = jnp.asarray([-0.5, 0.3, 1.0])  # peak alphas well below the cap
    prims = ref.primitives({k: np.asarray(v) for k, v in params.items()}, kind)
    rng = np.random.default_rng(9)
    origins = rng.normal(size=(60, 3)) * 0.3
    targets = prims["mu"][np.arange(60) % 3] + rng.normal(size=(60, 3)) * 0.05
    dirs = unit(targets - origins)
    weights = jnp.asarray(rng.uniform(size=(3, 60)))
    loss_w, value_and_grad = loss_fns(kind)

    def loss(p, o, d):
        return loss_w(p, o, d, weights)

    o, d = jnp.asarray(origins), jnp.asarray(dirs)
    assert np.mean(np.any(alphas(kind, params, o, d) > 0, axis=0)) > 0.8
    _, (grads, g_o, g_d) = value_and_grad(params, o, d, weights)
    eps = 1e-6

    def fd(f, x, idx):
        flat = np.asarray(x).ravel().copy()
        flat[idx] += eps
        plus = f(jnp.asarray(flat.reshape(x.shape)))
        flat[idx] -= 2 * eps
        minus = f(jnp.asarray(flat.reshape(x.shape)))
        return (float(plus) - float(minus)) / (2 * eps)

    for name in ("means", "quats", "scales", "opacities"):
        value = params[name]
        for idx in range(value.size):
            want = fd(lambda v, name=name: loss(dict(params, **{name: v}), o, d), value, idx)
            got = float(np.asarray(grads[name]).ravel()[idx])
            assert got == pytest.approx(want, rel=1e-5, abs=1e-7), (name, idx)
    for idx in rng.choice(180, 12, replace=False):
        assert float(np.asarray(g_o).ravel()[idx]) == pytest.approx(
            fd(lambda v: loss(params, v, d), o, idx), rel=1e-5, abs=1e-7
        )
        assert float(np.asarray(g_d).ravel()[idx]) == pytest.approx(
            fd(lambda v: loss(params, o, v), d, idx), rel=1e-5, abs=1e-7
        )


def test_gradients_finite_at_edges_vertices_and_degenerate_primitives(kind):
    if kind == "octahedron":
        dist_cases = [[0.3, 0.3, 0.2], [0.0, 0.3, 0.2], [0.0, 0.0, 0.2], [0.0, 0.0, 0.0]]
        vertex = np.array([0.3, 0.0, 0.0])
        edge_point = np.array([0.15, 0.15, 0.0])  # between faces (+,+,+) and (+,+,-)
        face_point = np.array([0.1, 0.1, 0.2 * (1 - 0.1 / 0.3 - 0.1 / 0.3)])
    else:
        dist_cases = [[0.3] * 4, [0.0, 0.3, 0.3, 0.3], [0.0, 0.0, 0.3, 0.3], [0.0] * 4]
        vertex = 0.3 * ref.TET_DIRS[0]
        edge_point = 0.15 * (ref.TET_DIRS[0] + ref.TET_DIRS[1])
        face_point = 0.1 * (ref.TET_DIRS[0] + ref.TET_DIRS[1] + ref.TET_DIRS[2])
    mu = np.array([0.0, 0.0, 3.0])
    origins, dirs = [], []
    for target in (np.zeros(3), vertex, edge_point, face_point):
        for direction in ([1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, -1], [1, 1, 0], [1, -1, 1]):
            u = unit(direction)
            for start in (-2.0, 0.0):  # from outside, and from the point itself
                origins.append(mu + target + start * u)
                dirs.append(u)
    rng = np.random.default_rng(10)
    for direction in rng.normal(size=(12, 3)):  # more rays through the vertex
        u = unit(direction)
        origins.append(mu + vertex - 2 * u)
        dirs.append(u)
    o, d = jnp.asarray(np.array(origins)), jnp.asarray(unit(dirs))  # [60, 3]
    _, value_and_grad = loss_fns(kind)
    weights = jnp.ones((3, 60))
    quats = [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], QUAT]  # one primitive each
    for dists in dist_cases:
        for logit in (0.0, 40.0, -40.0):
            p = {k: jnp.concatenate([v] * 3) for k, v in one(kind, mu, QUAT, dists, logit=logit)
                 .items()}  # fmt: skip
            p["quats"] = jnp.asarray(quats)
            a = alphas(kind, p, o, d)
            assert np.all(np.isfinite(a)) and np.all((a >= 0) & (a <= 0.99))
            value, grads = value_and_grad(p, o, d, weights)
            assert np.isfinite(float(value))
            for g in jax.tree_util.tree_leaves(grads):
                assert np.all(np.isfinite(np.asarray(g))), (dists, logit)


def _f64(params):
    return {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}


def test_render_gradients_match_finite_differences(kind):
    m = load_kind(kind)
    params = _f64(ref.random_params(6, kind, seed=9, sh_degree=1, spread=0.4, depth=3.0,
                                    size=(0.2, 0.5)))  # fmt: skip
    params["opacities"] = jnp.clip(params["opacities"], -1.0, 1.0)
    cam = identity_camera(width=24, height=20, f=20.0)
    weights = jnp.asarray(np.random.default_rng(0).uniform(size=(20, 24, 3)))
    bg = jnp.asarray([0.2, 0.3, 0.4], jnp.float64)

    def loss(p):
        out = render(m, p, cam, background=bg, mode="RGB+ED")
        return jnp.sum(out.image * weights) + 0.1 * jnp.sum(out.depth)

    assert_grads_match_fd(loss, params, jax.grad(loss)(params))


def test_render_gradients_finite_for_awkward_scene(kind):
    m = load_kind(kind)
    params = _f64(scene(kind, seed=14))
    cam = identity_camera()

    def loss(p):
        return jnp.sum(render(m, p, cam, mode="RGB+ED").image)

    value, grads = jax.value_and_grad(loss)(params)
    assert np.isfinite(float(value))
    for name, g in grads.items():
        assert np.all(np.isfinite(np.asarray(g))), name
