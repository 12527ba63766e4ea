"""Lowering: every language construct computes what it should (checked numerically through the
generated code against NumPy), and the constructs 3DGUT and LinPrim need (static loops,
reassignment, array literals, comprehensions, indexed assignment, ray inputs, camera calls per
sigma point, min/max footprints) are expressible in a spec and evaluate correctly."""

import importlib.util
import itertools
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
import sympy

from xprc.camera import Camera
from xprc.compiler import check, driver, lower, parse, symops

ROOT_SPECS = pathlib.Path(__file__).resolve().parent.parent / "specs"

# ---------------------------------------------------------------------------------------------
# Builtins and operators, one expression at a time (the value becomes the spec's `color`).

EXPR_SPEC = """primitive Probe
param a : vec3
param b : vec3
param m : mat3
param q : quat
param s : scalar
fn f(x, y) = x * y + 1
density(g) = exp(-0.5 * g)
projection {{ emit centre = [0, 0], depth = 1, radius = 1, valid = true }}
response {{ alpha = 0 }}
color = {expr}
"""

RNG = np.random.default_rng(0)
RAW = {
    "a": RNG.normal(size=(5, 3)),
    "b": RNG.normal(size=(5, 3)),
    "m": RNG.normal(size=(5, 3, 3)) + 3 * np.eye(3),
    "q": RNG.normal(size=(5, 4)),
    "s": RNG.uniform(0.5, 2.0, size=(5,)),
}


def _rot(q):
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def _maxeig(m2):
    return np.linalg.eigvalsh((m2 + m2.T) / 2).max()


# (spec expression, numpy of one primitive's a, b, m, q, s)
EXPRS = [
    ("a + b * 2 - a / s", lambda a, b, m, q, s: a + b * 2 - a / s),
    ("-a^2 + 3", lambda a, b, m, q, s: -(a**2) + 3),
    ("[a.z, a.x]", lambda a, b, m, q, s: np.array([a[2], a[0]])),
    ("a.zyx", lambda a, b, m, q, s: a[::-1]),
    ("[q.w, q.x, q.y, q.z]", lambda a, b, m, q, s: q),
    ("m * a", lambda a, b, m, q, s: m @ a),
    ("a * m", lambda a, b, m, q, s: a @ m),
    ("(m * m^T)[1]", lambda a, b, m, q, s: (m @ m.T)[1]),
    ("inverse(m) * a", lambda a, b, m, q, s: np.linalg.solve(m, a)),
    ("det(m)", lambda a, b, m, q, s: np.linalg.det(m)),
    (
        "inverse([[m[0,0], m[0,1]], [m[1,0], m[1,1]]]) * [1, 2]",
        lambda a, b, m, q, s: np.linalg.solve(m[:2, :2], [1, 2]),
    ),
    ("diag(a) * b", lambda a, b, m, q, s: a * b),
    ("diag(m)", lambda a, b, m, q, s: np.diag(m)),
    ("eye(3) * a + zeros(3)", lambda a, b, m, q, s: a),
    ("outer(a, b)[2]", lambda a, b, m, q, s: np.outer(a, b)[2]),
    ("dot(a, b)", lambda a, b, m, q, s: a @ b),
    ("cross(a, b)", lambda a, b, m, q, s: np.cross(a, b)),
    ("norm(a)", lambda a, b, m, q, s: np.linalg.norm(a)),
    ("normalize(a)", lambda a, b, m, q, s: a / np.linalg.norm(a)),
    (
        "col(m, 1) + row(m, 2) + trace(m) + sum(a)",
        lambda a, b, m, q, s: m[:, 1] + m[2] + np.trace(m) + a.sum(),
    ),
    ("transpose(m)[0]", lambda a, b, m, q, s: m[:, 0]),
    (
        "exp(a) + log(abs(b)) + sqrt(abs(a)) + rsqrt(s)",
        lambda a, b, m, q, s: np.exp(a) + np.log(np.abs(b)) + np.sqrt(np.abs(a)) + s**-0.5,
    ),
    (
        "sin(a) + cos(b) + tan(s) + atan2(a, b) + tanh(a)",
        lambda a, b, m, q, s: np.sin(a) + np.cos(b) + np.tan(s) + np.arctan2(a, b) + np.tanh(a),
    ),
    (
        "sigmoid(a) + floor(a) + ceil(b) + sign(a) + pow(s, 1.7)",
        lambda a, b, m, q, s: 1 / (1 + np.exp(-a)) + np.floor(a) + np.ceil(b) + np.sign(a) + s**1.7,
    ),
    (
        "softplus(a * 30) + log1p(abs(b)) + expm1(a) + softplus(2) + log1p(0.5) + expm1(-1)",
        lambda a, b, m, q, s: (
            np.logaddexp(a * 30, 0)
            + np.log1p(np.abs(b))
            + np.expm1(a)
            + np.logaddexp(2, 0)
            + np.log1p(0.5)
            + np.expm1(-1)
        ),
    ),
    (
        "min(a, b) + max(a, 0.5) + clamp(a, -0.3, 0.4) + min(a) + max(b, a, 0)",
        lambda a, b, m, q, s: (
            np.minimum(a, b)
            + np.maximum(a, 0.5)
            + np.clip(a, -0.3, 0.4)
            + a.min()
            + np.maximum(np.maximum(b, a), 0)
        ),
    ),
    # conditions are scalars: where() picks whole vectors
    (
        "where(a.x > b.x and not (s < 1 or a.y > 0), a, b)",
        lambda a, b, m, q, s: a if (a[0] > b[0] and not (s < 1 or a[1] > 0)) else b,
    ),
    ("quat_to_rotmat(normalize(q)) * a", lambda a, b, m, q, s: _rot(q / np.linalg.norm(q)) @ a),
    (
        "max_eigenvalue([[m[0,0], 0.3], [0.3, m[1,1]]])",
        lambda a, b, m, q, s: _maxeig(np.array([[m[0, 0], 0.3], [0.3, m[1, 1]]])),
    ),
    ("f(a, b) + density(s)", lambda a, b, m, q, s: a * b + 1 + np.exp(-0.5 * s)),
    ("vec4(a.xy, s, 1)", lambda a, b, m, q, s: np.array([a[0], a[1], s, 1])),
    ("[k * a.x for k in 0..4]", lambda a, b, m, q, s: np.arange(4) * a[0]),
    # issue 13, crash 5: a comparison of a select whose branch divides (passed check, then
    # SymPy refused the comparison); a comparison with a folded NaN (`log(-1) < s`, which
    # crashed too) is now an error at the fold: tests/test_fold_range.py
    (
        "where(where(a.x * a.x > 1e-20, -b.x / a.x, -1) > 0, a, b)",
        lambda a, b, m, q, s: a if (-b[0] / a[0] if a[0] * a[0] > 1e-20 else -1) > 0 else b,
    ),
    # exp(x) compared with a positive number becomes x compared with its log (one exp fewer)
    (
        "where(exp(-0.5 * a.x * a.x) > 0.6, a, b) + where(0.3 <= exp(-s), a, b)",
        lambda a, b, m, q, s: (
            (a if np.exp(-0.5 * a[0] ** 2) > 0.6 else b) + (a if 0.3 <= np.exp(-s) else b)
        ),
    ),
    ("[[1, 2], [3, 4]] * [s, 1] + 2^-1", lambda a, b, m, q, s: np.array([s + 2.5, 3 * s + 4.5])),
    # % is the floor modulo (np.mod, the sign of the divisor); pi is a built-in constant
    (
        "a % s + b % 0.7 + (-a) % [1.5, 2, 2.5] + m[0] % -b + 7 % 4",
        lambda a, b, m, q, s: (
            np.mod(a, s) + np.mod(b, 0.7) + np.mod(-a, [1.5, 2, 2.5]) + np.mod(m[0], -b) + 3
        ),
    ),
    ("pi * s + sin(pi / 4) + (a.x * 100) % (2 * pi)",
     lambda a, b, m, q, s: np.pi * s + np.sin(np.pi / 4) + np.mod(a[0] * 100, 2 * np.pi)),
]


def _load(text: str, tmp_path, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(driver.compile_source(text, f"{name}.xpr"))
    spec = importlib.util.spec_from_file_location(f"xprc_test_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("expr,want", EXPRS, ids=[e for e, _ in EXPRS])
def test_expression(expr, want, tmp_path):
    mod = _load(EXPR_SPEC.format(expr=expr), tmp_path, "expr")
    got = np.asarray(mod.project({k: jnp.asarray(v) for k, v in RAW.items()}, None)["features"])
    for i in range(5):
        args = [RAW[k][i] for k in ("a", "b", "m", "q", "s")]
        np.testing.assert_allclose(got[i], np.atleast_1d(want(*args)), rtol=1e-9, atol=1e-12)


def _lowered(text):
    return lower.lower(check.check(parse.parse(text, "t.xpr")))


def test_exp_comparison_becomes_a_comparison_of_its_argument():
    x = sympy.Symbol("x")
    assert symops.compare("gt", symops.Exp(x), sympy.Float(0.0113)) == symops.Gt(
        x, sympy.Float(np.log(0.0113))
    )
    assert symops.compare("le", sympy.Float(2.0), symops.Exp(x)) == symops.Le(
        sympy.Float(np.log(2.0)), x
    )
    # not a positive number: left alone (exp(x) > 0 is not always true: NaN)
    assert symops.compare("gt", symops.Exp(x), sympy.Float(0.0)) == symops.Gt(
        symops.Exp(x), sympy.Float(0.0)
    )


def test_one_sympy_expression_per_component():
    low = _lowered(EXPR_SPEC.format(expr="m * a"))
    assert len(low.project["color"]) == 3
    assert all(isinstance(e, sympy.Expr) for e in low.project["color"])
    assert len(low.project["box"]) == 4  # radius -> box around the centre


def test_static_loop_reassignment_and_indexed_assignment(tmp_path):
    expr_spec = EXPR_SPEC.replace(
        "projection {{",
        "projection {{ acc = 0\n for i in 0..3 {{ acc = acc + a[i] * i }}\n"
        " v = zeros(3)\n for i in 1..3 {{ v[i] = a[i - 1] }}\n"
        " mm = zeros(2, 2)\n mm[1][0] = 5\n mm[0, 1] = acc\n"
        " emit w = [acc, v.y, v.z, mm[1, 0], mm[0][1]]\n",
    )
    mod = _load(expr_spec.format(expr="w"), tmp_path, "loops")
    got = np.asarray(mod.project({k: jnp.asarray(v) for k, v in RAW.items()}, None)["features"])
    a = RAW["a"]
    acc = a[:, 1] + 2 * a[:, 2]
    np.testing.assert_allclose(got, np.stack([acc, a[:, 0], a[:, 1], 5 + 0 * acc, acc], -1))


# ---------------------------------------------------------------------------------------------
# 3DGUT and LinPrim building blocks, written in specs.

UT_SPEC = """
primitive GaussianUT
param means : vec3
param quats : quat = normalize(raw)
param scales : vec3 = exp(raw)
param opacities : scalar = sigmoid(raw)
const ut_alpha = 1.0
const ut_beta = 2.0
const ut_kappa = 0.0
const lam = ut_alpha^2 * (3 + ut_kappa) - 3
density(g) = exp(-0.5 * g)
projection {
  R = quat_to_rotmat(quats)
  wi = 1 / (2 * (3 + lam))
  wm = [lam / (3 + lam), wi, wi, wi, wi, wi, wi]
  wc = [lam / (3 + lam) + 1 - ut_alpha^2 + ut_beta, wi, wi, wi, wi, wi, wi]
  pts = zeros(7, 3)
  pts[0] = means
  for i in 0..3 {
    pts[1 + i] = means + sqrt(3 + lam) * scales[i] * col(R, i)
    pts[4 + i] = means - sqrt(3 + lam) * scales[i] * col(R, i)
  }
  img = [camera.project(camera.world_to_camera(pts[k])) for k in 0..7]
  m = zeros(2)
  for k in 0..7 { m = m + wm[k] * img[k] }
  cov2 = zeros(2, 2)
  for k in 0..7 { e = img[k] - m; cov2 = cov2 + wc[k] * outer(e, e) }
  p = camera.world_to_camera(means)
  emit centre = m, depth = p.z, radius = 3 * sqrt(max_eigenvalue(cov2 + 0.3 * eye(2))),
       valid = p.z > 0.2, cov = cov2
  emit A = diag(1 / scales) * R^T
}
response {
  og = A * (ray.origin - means)
  dg = normalize(A * ray.dir)
  c = cross(dg, og)
  resp = density(dot(c, c))
  alpha = where(resp > 0.0113, min(0.99, opacities * resp), 0)
}
color = [cov[0, 0], cov[0, 1], cov[1, 1]]
"""

OCT_SPEC = """
primitive Octahedron
param means : vec3
param quats : quat = normalize(raw)
param dists : vec3 = abs(raw)
param opacities : scalar = sigmoid(raw)
const sigma = 10
projection {
  R = quat_to_rotmat(quats)
  p = camera.world_to_camera(means)
  xs = zeros(6)
  ys = zeros(6)
  for i in 0..3 {
    up = camera.project(camera.world_to_camera(means + dists[i] * col(R, i)))
    un = camera.project(camera.world_to_camera(means - dists[i] * col(R, i)))
    xs[2 * i] = up.x; ys[2 * i] = up.y; xs[2 * i + 1] = un.x; ys[2 * i + 1] = un.y
  }
  emit centre = camera.project(p), depth = p.z, valid = p.z > camera.near,
       box = [min(xs), min(ys), max(xs), max(ys)], rot = R
}
response {
  planes = [[1, 1, 1], [1, 1, -1], [1, -1, 1], [1, -1, -1],
            [-1, 1, 1], [-1, 1, -1], [-1, -1, 1], [-1, -1, -1]]
  o = rot^T * (ray.origin - means)
  d = rot^T * ray.dir
  t_in = -1e10
  t_out = 1e10
  for f in 0..8 {
    n = planes[f] / dists
    nd = dot(n, d)
    t = (1 - dot(n, o)) / nd
    t_in = where(nd < 0, max(t_in, t), t_in)
    t_out = where(nd > 0, min(t_out, t), t_out)
  }
  alpha = min(0.99, opacities * (1 - exp(-sigma * max(0, t_out - t_in))))
}
color = [1, 1, 1]
"""


def _camera():
    R = np.eye(3)
    viewmat = np.eye(4)
    viewmat[:3, 3] = [0.2, -0.1, 5.0]
    K = np.array([[80.0, 0, 33.0], [0, 75.0, 23.0], [0, 0, 1]])
    return Camera(viewmat=jnp.asarray(viewmat), K=jnp.asarray(K), width=64, height=48), R, \
        viewmat[:3, 3], K  # fmt: skip


def test_3dgut_unscented_transform_and_3d_response(tmp_path):
    mod = _load(UT_SPEC, tmp_path, "ut")
    assert mod.USES_RAY
    cam, R, t, K = _camera()
    rng = np.random.default_rng(1)
    raw = {
        "means": rng.normal(size=(4, 3)) * 0.5,
        "quats": rng.normal(size=(4, 4)),
        "scales": rng.normal(size=(4, 3)) * 0.3 - 1.5,
        "opacities": rng.normal(size=(4,)),
    }
    out = mod.project({k: jnp.asarray(v) for k, v in raw.items()}, cam)
    for i in range(4):
        mu, s = raw["means"][i], np.exp(raw["scales"][i])
        rot = _rot(raw["quats"][i] / np.linalg.norm(raw["quats"][i]))
        pts = [mu] + [mu + np.sqrt(3) * s[j] * rot[:, j] for j in range(3)] + [
            mu - np.sqrt(3) * s[j] * rot[:, j] for j in range(3)]  # fmt: skip
        cams = [R @ p + t for p in pts]
        img = np.array([[K[0, 0] * c[0] / c[2] + K[0, 2], K[1, 1] * c[1] / c[2] + K[1, 2]]
                        for c in cams])  # fmt: skip
        w = np.array([0.0] + [1 / 6] * 6)
        wc = np.array([2.0] + [1 / 6] * 6)
        mean = w @ img
        cov = sum(wc[k] * np.outer(img[k] - mean, img[k] - mean) for k in range(7))
        np.testing.assert_allclose(out["centre"][i], mean, rtol=1e-9)
        np.testing.assert_allclose(out["features"][i], [cov[0, 0], cov[0, 1], cov[1, 1]],
                                   rtol=1e-9)  # fmt: skip
        # response: closest approach of the ray to the Gaussian, in its canonical frame
        o = np.array([0.1, 0.3, -5.0])
        d = mu - o + rng.normal(size=3) * 0.05
        d /= np.linalg.norm(d)
        sigma_inv = rot @ np.diag(1 / s**2) @ rot.T
        tstar = (mu - o) @ sigma_inv @ d / (d @ sigma_inv @ d)
        x = o + tstar * d - mu
        resp = np.exp(-0.5 * x @ sigma_inv @ x)
        o_ = 1 / (1 + np.exp(-raw["opacities"][i]))
        want = min(0.99, o_ * resp) if resp > 0.0113 else 0.0
        got = mod.response(None, jnp.asarray(o), jnp.asarray(d), out["attrs"][i], cam)
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-12)


def test_linprim_octahedron_chord_and_box(tmp_path):
    mod = _load(OCT_SPEC, tmp_path, "oct")
    cam, R, t, K = _camera()
    raw = {"means": np.array([[0.1, -0.2, 0.3]]), "quats": np.array([[1.0, 0.2, -0.1, 0.3]]),
           "dists": np.array([[0.2, -0.3, 0.4]]), "opacities": np.array([2.0])}  # fmt: skip
    out = mod.project({k: jnp.asarray(v) for k, v in raw.items()}, cam)
    rot = _rot(raw["quats"][0] / np.linalg.norm(raw["quats"][0]))
    dist = np.abs(raw["dists"][0])
    verts = [raw["means"][0] + sgn * dist[j] * rot[:, j] for j in range(3) for sgn in (1, -1)]
    uv = np.array([[K[0, 0] * c[0] / c[2] + K[0, 2], K[1, 1] * c[1] / c[2] + K[1, 2]]
                   for c in (R @ v + t for v in verts)])  # fmt: skip
    np.testing.assert_allclose(out["box"][0], [*uv.min(0), *uv.max(0)], rtol=1e-9)
    o_ = 1 / (1 + np.exp(-2.0))
    attrs = out["attrs"][0]
    for j in range(3):  # along each axis through the centre: chord 2 d_j
        axis = rot[:, j]
        got = mod.response(None, jnp.asarray(raw["means"][0] - 5 * axis), jnp.asarray(axis),
                           attrs, cam)  # fmt: skip
        np.testing.assert_allclose(got, min(0.99, o_ * (1 - np.exp(-10 * 2 * dist[j]))),
                                   rtol=1e-9)  # fmt: skip
    miss = mod.response(None, jnp.asarray(raw["means"][0] + 2 * rot[:, 0] - 5 * rot[:, 1]),
                        jnp.asarray(rot[:, 1]), attrs, cam)  # fmt: skip
    assert float(miss) == 0.0
    # a ray through the centre along a random direction: chord = 2 / sum(|d_i| / dist_i)
    for k in itertools.islice(itertools.count(), 3):
        d = np.random.default_rng(k).normal(size=3)
        d /= np.linalg.norm(d)
        local = rot.T @ d
        chord = 2 / np.sum(np.abs(local) / dist)
        got = mod.response(None, jnp.asarray(raw["means"][0] - 3 * d), jnp.asarray(d), attrs, cam)
        np.testing.assert_allclose(got, min(0.99, o_ * (1 - np.exp(-10 * chord))), rtol=1e-9)


def test_number_folding_never_raises():
    """SymPy's Float(0.0) == 0 is False; folding must not divide by a float zero (a fuzz find)."""
    one, zero = sympy.Float(1.0), sympy.Float(0.0)
    assert symops.scalar_op("div", one, zero) == sympy.oo
    assert symops.scalar_op("div", zero, zero) is sympy.nan
    assert symops.scalar_op("div", sympy.Symbol("x"), zero).has(sympy.oo)
    assert symops.power(zero, sympy.Float(-1.0)) == sympy.oo
    assert symops.modulo(one, zero) is sympy.nan
    assert symops.modulo(sympy.Integer(3), sympy.S.Zero) is sympy.nan


def test_modulo_lowers_to_one_function_and_folds_numbers():
    """`%` lowers to symops.Mod (jnp.mod), never SymPy's Mod (which rewrites its arguments);
    numbers fold as jnp.mod: integers exactly, floats with the sign of the divisor."""
    x = sympy.Symbol("x")
    assert symops.modulo(x, sympy.Integer(2)) == symops.Mod(x, sympy.Integer(2))
    assert symops.modulo(sympy.Integer(-7), sympy.Integer(3)) == sympy.Integer(2)
    assert float(symops.modulo(sympy.Float(-7.5), sympy.Integer(2))) == 0.5
    assert float(symops.modulo(sympy.Float(7.5), sympy.Float(-2.0))) == -0.5
    spec = EXPR_SPEC.format(expr="s % (a.x * 0 + 2)")  # the divisor folds only when lowered
    low = _lowered(spec)
    assert low.project["color"] == [symops.Mod(sympy.Symbol("r_s", finite=True), 2)]


def test_project_valid_for_many_primitives(tmp_path):
    """camera.project_valid returns one array (not a tuple): N > 1 primitives must work."""
    spec = EXPR_SPEC.replace(
        "valid = true", "valid = camera.project_valid(camera.world_to_camera(a))"
    )
    mod = _load(spec.format(expr="1"), tmp_path, "valid")
    cam = _camera()[0]
    raw = {k: jnp.asarray(v) for k, v in RAW.items()}
    raw["a"] = raw["a"].at[0, 2].set(-10.0)  # behind the camera
    valid = np.asarray(mod.project(raw, cam)["valid"])
    assert valid.shape == (5,) and not valid[0] and valid[1:].all()


def test_camera_model_is_static_and_visible(tmp_path):
    """`camera.model == NAME` is a bool fixed at trace time (issue 13)."""
    from xprc import verify

    text = """primitive Blob
param means : vec3
param opacities : scalar = sigmoid(raw)
projection {
  p = camera.world_to_camera(means)
  emit centre = camera.project(p), depth = p.z, valid = p.z > camera.near and camera.model != ortho,
       radius = where(camera.model == pinhole, 3, 1e4)
}
response { alpha = where(camera.model == fisheye, 0.5, min(0.99, opacities)) }
color = [1, 1, 1]
"""
    mod = _load(text, tmp_path, "model")
    raw = {"means": jnp.asarray([[0.1, 0.2, 0.0]]), "opacities": jnp.asarray([1.0])}
    for model in verify.MODELS:
        cam = verify.camera(model, 40, 32)
        out = mod.project(raw, cam)
        box = np.asarray(out["box"])[0]
        assert box[2] - box[0] == pytest.approx(6.0 if model == "pinhole" else 2e4)
        assert bool(out["valid"][0]) == (model != "ortho")
        pix = jnp.zeros((1, 1, 2))
        alpha = mod.response(pix, pix[..., :1], pix[..., :1], out["attrs"][None], cam)
        want = 0.5 if model == "fisheye" else 1 / (1 + np.exp(-1.0))
        assert float(np.asarray(alpha).ravel()[0]) == pytest.approx(want)


def test_emit_checked_dumps_the_typed_ir():
    """`--emit checked`: structured static calls (eye[2], not the string "eye/2")."""
    text = (ROOT_SPECS / "3dgs.xpr").read_text()
    dump = driver.emit(text, "3dgs.xpr", "checked")
    assert "= call eye[2]() : mat2" in dump
    assert dump.splitlines()[0].startswith("%0 = input raw:means : vec3")
    assert "alpha = %" in dump and "output box = %" in dump
    assert "\ncameras pinhole  # declared on line 4\n" in dump


def test_generated_modules_are_readable():
    """Issue 13: ATTRS named from the spec (no 34,000-character SymPy strings), a squared call
    computed once, and a `# spec line N` comment on each output."""
    import ast as pyast

    for name in ("3dgs", "3dgut", "linprim_octahedron", "linprim_tetrahedron"):
        source = (ROOT_SPECS.parent / "tests" / "golden" / f"{name}.py").read_text()
        attrs = next(
            node.value
            for node in pyast.parse(source).body
            if isinstance(node, pyast.Assign) and node.targets[0].id == "ATTRS"
        )  # one line, or one name per line where one line would pass 100 columns
        names = pyast.literal_eval(attrs)
        assert len(set(names)) == len(names) and max(map(len, names)) <= 60, name
        for out in ("centre", "depth", "box", "valid", "features"):
            assert any(
                line.startswith(f"    {out} = ") and "  # spec line " in line
                for line in source.splitlines()
            ), (name, out)
    gs = (ROOT_SPECS.parent / "tests" / "golden" / "3dgs.py").read_text()
    assert "ATTRS = ('centre.x', 'conic.x', 'centre.y', 'conic.z', 'conic.y', 'opacity',)" in gs
    text = EXPR_SPEC.format(expr="exp(s)^2 + sqrt(s)^3")
    src = driver.compile_source(text, "sq.xpr")
    assert "jnp.exp(r_s) ** 2" in src and "jnp.exp(r_s)*jnp.exp(r_s)" not in src
