"""specs/3dgs.xpr, compiled, against an independent float64 NumPy implementation of the formulas
of ../shared/REFERENCE.md sections 1-3 (written here from the reference, not from our SymPy).

Also: float32 runs under strict promotion and the functions jit. Gradients through project +
response (against finite differences, and finite even for degenerate primitives) and the
footprint box containing every pixel whose alpha reaches 1/255 are in tests/test_conformance.py,
which uses the camera, scene and pixel helpers here.
"""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xprc.camera import Camera
from xprc.compiler import driver

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPEC = ROOT / "specs" / "3dgs.xpr"
W, H = 64, 48

C0 = 0.28209479177387814
C1 = 0.4886025119029199
C2 = [1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792,
      0.5462742152960396]  # fmt: skip
C3 = [-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
      -0.4570457994644658, 1.445305721320277, -0.5900435899266435]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The NumPy reference (float64, one primitive at a time: slow and obvious).


def np_rotmat(q):
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def np_sh(coeffs, d):
    x, y, z = d
    basis = np.array([
        C0,
        -C1 * y, C1 * z, -C1 * x,
        C2[0] * x * y, C2[1] * y * z, C2[2] * (2 * z * z - x * x - y * y), C2[3] * x * z,
        C2[4] * (x * x - y * y),
        C3[0] * y * (3 * x * x - y * y), C3[1] * x * y * z, C3[2] * y * (4 * z * z - x * x - y * y),
        C3[3] * z * (2 * z * z - 3 * x * x - 3 * y * y), C3[4] * x * (4 * z * z - x * x - y * y),
        C3[5] * z * (x * x - y * y), C3[6] * x * (x * x - 3 * y * y),
    ])  # fmt: skip
    return np.maximum(basis @ coeffs + 0.5, 0.0)


def np_project(raw, cam, eps2d=0.3, antialiased=False):
    R, t = np.asarray(cam["R"]), np.asarray(cam["t"])
    fx, fy, cx, cy = cam["fx"], cam["fy"], cam["cx"], cam["cy"]
    out = {k: [] for k in ("centre", "depth", "box", "valid", "conic", "opacity", "color")}
    for i in range(raw["means"].shape[0]):
        mu = raw["means"][i]
        s = np.exp(raw["scales"][i])
        o = 1 / (1 + np.exp(-raw["opacities"][i]))
        rq = np_rotmat(raw["quats"][i])
        sigma = rq @ np.diag(s**2) @ rq.T
        x, y, z = R @ mu + t
        cov_c = R @ sigma @ R.T
        tx, ty = 0.5 * W / fx, 0.5 * H / fy
        u = np.clip(x / z, -(cx / fx + 0.3 * tx), (W - cx) / fx + 0.3 * tx)
        v = np.clip(y / z, -(cy / fy + 0.3 * ty), (H - cy) / fy + 0.3 * ty)
        J = np.array([[fx / z, 0, -fx * u / z], [0, fy / z, -fy * v / z]])
        cov = J @ cov_c @ J.T
        cov2 = cov + eps2d * np.eye(2)
        det = max(np.linalg.det(cov2), 1e-10)
        if antialiased:
            o = o * np.sqrt(max(np.linalg.det(cov) / det, 0.005**2))
        centre = np.array([fx * x / z + cx, fy * y / z + cy])
        r = np.sqrt(2 * np.log(max(255 * o, 1.0)) * np.diag(cov2))
        d = mu - (-R.T @ t)
        out["centre"].append(centre)
        out["depth"].append(z)
        out["box"].append(np.concatenate([centre - r, centre + r]))
        out["valid"].append(z > cam["near"] and o >= 1 / 255)
        out["conic"].append(np.array([cov2[1, 1], -cov2[0, 1], cov2[0, 0]]) / det)
        out["opacity"].append(o)
        out["color"].append(np_sh(raw["sh"][i], d / np.linalg.norm(d)))
    return {k: np.array(v) for k, v in out.items()}


def np_alpha(px, py, centre, conic, o):
    dx, dy = px - centre[0], py - centre[1]
    a, b, c = conic
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    return np.where(sigma < 0, 0.0, np.minimum(0.99, o * np.exp(-sigma)))


# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def method():
    return driver.load(SPEC)


@pytest.fixture(scope="module")
def method_aa():
    return driver.load(SPEC, defines={"antialiased": 1})


def make_camera(rng, dtype=np.float64):
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    angle = 0.3 * rng.uniform()
    K_ = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    R = np.eye(3) + np.sin(angle) * K_ + (1 - np.cos(angle)) * K_ @ K_
    t = np.array([0.1, -0.2, 4.0])
    viewmat = np.eye(4)
    viewmat[:3, :3], viewmat[:3, 3] = R, t
    fx, fy = 70.0 + 10 * rng.uniform(), 65.0 + 10 * rng.uniform()
    K = np.array([[fx, 0, W / 2 + 1.5], [0, fy, H / 2 - 2.0], [0, 0, 1]])
    cam = Camera(viewmat=jnp.asarray(viewmat, dtype), K=jnp.asarray(K, dtype), width=W, height=H)
    info = {"R": R, "t": t, "fx": fx, "fy": fy, "cx": K[0, 2], "cy": K[1, 2], "near": cam.near}
    return cam, info


def make_raw(rng, n=48, dtype=np.float64):
    raw = {
        "means": rng.normal(size=(n, 3)) * [1.0, 0.8, 1.0],
        "quats": rng.normal(size=(n, 4)),
        "scales": rng.normal(size=(n, 3)) * 0.4 - 2.3,
        "opacities": rng.normal(size=(n,)) * 2,
        "sh": rng.normal(size=(n, 16, 3)) * 0.3,
    }
    raw["opacities"][:3] = -7.0  # below 1/255: invalid
    return {k: v.astype(dtype) for k, v in raw.items()}


def pixels(dtype=np.float64):
    ys, xs = np.meshgrid(np.arange(H) + 0.5, np.arange(W) + 0.5, indexing="ij")
    return np.stack([xs, ys], -1).reshape(-1, 2).astype(dtype)  # [P, 2]


def test_module_constants(method):
    assert method.NAME == "Gaussian3D"
    assert [p.name for p in method.PARAMS] == ["means", "quats", "scales", "opacities", "sh"]
    assert [p.activation for p in method.PARAMS] == [
        "identity", "normalize", "exp", "sigmoid", "identity"]  # fmt: skip
    assert method.PARAMS[4].shape == (16, 3) and method.PARAMS[4].degree == 3
    # training annotations: REFERENCE.md section 8 (init numbers are activated values)
    assert [(p.lr, p.init, p.role) for p in method.PARAMS] == [
        (1.6e-4, "points", "position"),
        (1e-3, "identity", None),
        (5e-3, "nn_distance", "scale"),
        (5e-2, 0.1, "opacity"),
        (2.5e-3, "colors", None),
    ]
    assert method.CONSTANTS == {"eps2d": 0.3, "antialiased": 0.0}
    assert method.NUM_ATTRS == len(method.ATTRS) == 6  # centre 2, conic 3, opacity 1
    assert method.NUM_FEATURES == 3 and method.USES_RAY is False


def test_activate(method):
    rng = np.random.default_rng(1)
    raw = make_raw(rng)
    act = method.activate({k: jnp.asarray(v) for k, v in raw.items()})
    q = raw["quats"] / np.linalg.norm(raw["quats"], axis=-1, keepdims=True)
    np.testing.assert_allclose(act["quats"], q, rtol=1e-12)
    np.testing.assert_allclose(act["scales"], np.exp(raw["scales"]), rtol=1e-12)
    np.testing.assert_allclose(act["opacities"], 1 / (1 + np.exp(-raw["opacities"])), rtol=1e-12)
    np.testing.assert_array_equal(act["means"], raw["means"])
    np.testing.assert_array_equal(act["sh"], raw["sh"])


@pytest.mark.parametrize("antialiased", [False, True])
def test_project_and_response_match_numpy(method, method_aa, antialiased):
    m = method_aa if antialiased else method
    rng = np.random.default_rng(2 + antialiased)
    cam, info = make_camera(rng)
    raw = make_raw(rng)
    ref = np_project(raw, info, antialiased=antialiased)
    out = m.project({k: jnp.asarray(v) for k, v in raw.items()}, cam)
    assert out["attrs"].shape == (48, m.NUM_ATTRS)
    np.testing.assert_array_equal(out["valid"], ref["valid"])
    assert 10 < ref["valid"].sum() < 48
    for key in ("centre", "depth", "box"):
        np.testing.assert_allclose(out[key], ref[key], rtol=1e-5, atol=1e-9, err_msg=key)
    np.testing.assert_allclose(out["features"], ref["color"], rtol=1e-5, atol=1e-9)

    px = pixels()
    alpha = m.response(jnp.asarray(px)[:, None, :], None, None, out["attrs"][None], cam)
    assert alpha.shape == (px.shape[0], 48)
    want = np.stack([np_alpha(px[:, 0], px[:, 1], ref["centre"][i], ref["conic"][i],
                              ref["opacity"][i]) for i in range(48)], -1)  # fmt: skip
    np.testing.assert_allclose(alpha, want, rtol=1e-5, atol=1e-12)


def test_float32_strict_promotion_and_jit(method):
    rng = np.random.default_rng(3)
    cam, _ = make_camera(rng, np.float32)
    raw = {k: jnp.asarray(v) for k, v in make_raw(rng, dtype=np.float32).items()}
    out = jax.jit(method.project)(raw, cam)
    for key in ("centre", "depth", "box", "attrs", "features"):
        assert out[key].dtype == jnp.float32, key
    assert out["valid"].dtype == jnp.bool_
    act = jax.jit(method.activate)(raw)
    assert all(act[k].dtype == jnp.float32 for k in act)
    px = jnp.asarray(pixels(np.float32))
    # the pipeline's call: pixel [T, P, 1, 2], attrs [T, 1, K, A]
    alpha = jax.jit(method.response)(px.reshape(4, -1, 1, 2), None, None,
                                     out["attrs"].reshape(4, 1, 12, -1), cam)  # fmt: skip
    assert alpha.dtype == jnp.float32 and alpha.shape == (4, px.shape[0] // 4, 12)
    ref = method.project({k: v.astype(jnp.float64) for k, v in raw.items()},
                         make_camera(np.random.default_rng(3))[0])  # fmt: skip
    np.testing.assert_allclose(out["centre"], ref["centre"], rtol=1e-4)
