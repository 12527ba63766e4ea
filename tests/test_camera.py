"""Camera models: projection vs an independent NumPy reference, validity, Jacobians, pixel rays
(round trips over the whole image, corners included), gradients, batching and tracing.

Formulas: REFERENCE.md section 5. Everything runs in float64 unless a test says float32.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xprc.camera import MODELS, Camera, CameraError, look_at
from xprc.errors import XprError

W, H = 64, 48
OPENCV_DIST = [
    0.1,
    -0.02,
    0.003,
    0.01,
    -0.004,
    0.001,
    0.002,
    -0.003,
    0.001,
    -0.0005,
    -0.002,
    0.0004,
]
FISHEYE_DIST = [0.05, -0.01, 0.002, -0.0005]
FOV = {"pinhole": 70.0, "opencv": 70.0, "fisheye": 120.0, "ortho": 70.0}


def make_camera(model, dtype=np.float64, eye=(0.3, -0.2, -3.0)):
    """A camera with a generic pose and fx != fy, principal point off centre."""
    dist = {"opencv": OPENCV_DIST, "fisheye": FISHEYE_DIST}.get(model)
    dist = None if dist is None else np.asarray(dist, dtype)
    cam = look_at(
        eye, [0.1, 0.05, 0.0], [0.1, -1.0, 0.05], W, H, FOV[model], model=model, dtype=dtype
    )
    K = np.array(cam.K)
    K[1, 1] *= 1.1
    K[0, 2] += 1.5
    K[1, 2] -= 2.0
    return Camera(
        viewmat=np.array(cam.viewmat), K=K.astype(dtype), width=W, height=H, model=model, dist=dist
    )


# Eager dispatch of the Newton loops is slow; the tests call the methods through jit, as the
# generated code does.
project = jax.jit(lambda cam, x, y, z: cam.project(x, y, z))
project_valid = jax.jit(lambda cam, x, y, z: cam.project_valid(x, y, z))
jacobian = jax.jit(lambda cam, x, y, z: cam.jacobian(x, y, z))
pixel_rays = jax.jit(lambda cam, px, py: cam.pixel_rays(px, py))
world_to_camera = jax.jit(lambda cam, p: cam.world_to_camera(p))


def pixel_grid():
    """9 x 7 pixel positions spanning the image, its four corners included."""
    px, py = np.meshgrid(np.linspace(0.0, W, 9), np.linspace(0.0, H, 7))
    return jnp.asarray(px), jnp.asarray(py)


# ------------------------------------------------------------------ independent NumPy reference


def np_project(model, K, dist, p):
    """REFERENCE.md section 5, written out plainly. p: [N, 3] camera space -> [N, 2] pixels."""
    x, y, z = p[:, 0], p[:, 1], p[:, 2]
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    if model == "ortho":
        return np.stack([fx * x + cx, fy * y + cy], axis=1)
    if model == "fisheye":
        k1, k2, k3, k4 = dist[:4]
        rho = np.hypot(x, y)
        theta = np.arctan2(rho, z)
        theta_d = theta * (1 + k1 * theta**2 + k2 * theta**4 + k3 * theta**6 + k4 * theta**8)
        scale = np.where(rho > 0, theta_d / np.where(rho > 0, rho, 1.0), 1.0 / z)
        return np.stack([fx * x * scale + cx, fy * y * scale + cy], axis=1)
    u, v = x / z, y / z
    if model == "opencv":
        k1, k2, k3, k4, k5, k6, p1, p2, s1, s2, s3, s4 = dist
        r2 = u * u + v * v
        radial = (1 + k1 * r2 + k2 * r2**2 + k3 * r2**3) / (1 + k4 * r2 + k5 * r2**2 + k6 * r2**3)
        u, v = (
            radial * u + 2 * p1 * u * v + p2 * (r2 + 2 * u * u) + s1 * r2 + s2 * r2**2,
            radial * v + p1 * (r2 + 2 * v * v) + 2 * p2 * u * v + s3 * r2 + s4 * r2**2,
        )
    return np.stack([fx * u + cx, fy * v + cy], axis=1)


def random_camera_points(rng, n=64, max_angle_deg=35.0):
    """Camera-space points in front of the camera, within `max_angle_deg` of the axis."""
    theta = np.deg2rad(max_angle_deg) * np.sqrt(rng.uniform(0, 1, n))
    phi = rng.uniform(0, 2 * np.pi, n)
    r = rng.uniform(0.5, 20.0, n)
    return np.stack(
        [r * np.sin(theta) * np.cos(phi), r * np.sin(theta) * np.sin(phi), r * np.cos(theta)],
        axis=1,
    )


# ------------------------------------------------------------------ projection and rays


@pytest.mark.parametrize("model", MODELS)
def test_project_matches_numpy_reference(model):
    cam = make_camera(model)
    p = random_camera_points(np.random.default_rng(0))
    u, v = project(cam, p[:, 0], p[:, 1], p[:, 2])
    ref = np_project(model, np.asarray(cam.K), np.asarray(cam.dist), p)
    np.testing.assert_allclose(np.stack([u, v], axis=1), ref, rtol=1e-12, atol=1e-9)


def test_fisheye_on_axis_is_finite_with_finite_gradients():
    cam = make_camera("fisheye")
    u, v = project(cam, 0.0, 0.0, 2.0)
    np.testing.assert_allclose([u, v], [cam.cx, cam.cy])
    g = jax.grad(lambda x: sum(project(cam, x, 1e-9, 2.0)))(0.0)
    np.testing.assert_allclose(g, (cam.fx + 0.0) / 2.0, rtol=1e-9)  # d/dx of fx theta_d/rho x


@pytest.mark.parametrize("model", MODELS)
def test_pixel_rays_round_trip_on_grid_with_corners(model):
    """unproject(project(p)) lies on the ray through p: rays re-project onto their pixel."""
    cam = make_camera(model)
    px, py = pixel_grid()
    origin, direction = pixel_rays(cam, px, py)
    assert origin.shape == direction.shape == px.shape + (3,)
    np.testing.assert_allclose(jnp.linalg.norm(direction, axis=-1), 1.0, atol=1e-12)
    if model != "ortho":
        np.testing.assert_allclose(origin, jnp.broadcast_to(cam.position, origin.shape), atol=1e-12)
    for depth in (0.5, 2.0, 10.0, 100.0):
        p = world_to_camera(cam, origin + depth * direction)
        assert bool(jnp.all(project_valid(cam, p[..., 0], p[..., 1], p[..., 2]))), model
        u, v = project(cam, p[..., 0], p[..., 1], p[..., 2])
        np.testing.assert_allclose(u, px, atol=1e-5)
        np.testing.assert_allclose(v, py, atol=1e-5)


@pytest.mark.parametrize("model", MODELS)
def test_project_then_unproject_lies_on_the_ray(model):
    cam = make_camera(model)
    p_cam = random_camera_points(np.random.default_rng(1), max_angle_deg=30.0)
    inv = np.linalg.inv(np.asarray(cam.viewmat))
    p_world = p_cam @ inv[:3, :3].T + inv[:3, 3]
    u, v = project(cam, p_cam[:, 0], p_cam[:, 1], p_cam[:, 2])
    origin, direction = pixel_rays(cam, u, v)
    to_p = p_world - np.asarray(origin)
    off_ray = to_p - np.sum(to_p * direction, axis=1, keepdims=True) * direction
    assert np.max(np.linalg.norm(off_ray, axis=1) / np.linalg.norm(p_cam, axis=1)) < 1e-9
    assert np.all(np.sum(to_p * direction, axis=1) > 0)


def test_ortho_rays_are_parallel_and_start_on_the_image_plane():
    cam = make_camera("ortho")
    origin, direction = pixel_rays(cam, *pixel_grid())
    np.testing.assert_allclose(direction, jnp.broadcast_to(cam.R[2], direction.shape), atol=1e-12)
    np.testing.assert_allclose(world_to_camera(cam, origin)[..., 2], 0.0, atol=1e-12)


def test_fisheye_180_degree_round_trips_far_off_axis():
    """fov 180: theta = 90 deg maps to the left/right image edges; 80-89.5 deg points land
    inside the image, are valid, and their pixels' rays point back at them."""
    cam = look_at([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0], W, H, 180.0, model="fisheye")
    f = float(cam.fx)
    np.testing.assert_allclose(f * np.pi / 2, W / 2)
    theta = np.deg2rad(np.array([80.0, 82.0, 84.0, 86.0, 87.0, 88.0, 89.0, 89.5]))
    phi = np.deg2rad(np.array([0.0, 15.0, -20.0, 165.0, 180.0, 200.0, 10.0, 190.0]))
    theta, phi = (a.ravel() for a in np.meshgrid(theta, phi))
    p = 3.0 * np.stack([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], 1)
    assert bool(jnp.all(project_valid(cam, p[:, 0], p[:, 1], p[:, 2])))
    u, v = project(cam, p[:, 0], p[:, 1], p[:, 2])
    np.testing.assert_allclose(np.hypot(u - W / 2, v - H / 2), f * theta, rtol=1e-12)
    assert np.all((u > 0) & (u < W) & (v > 0) & (v < H))
    _, direction = pixel_rays(cam, u, v)
    np.testing.assert_allclose(direction, p / 3.0, atol=1e-9)
    # The near plane still applies to camera z (the sort key): 89.9 deg at distance 3 is z < near.
    assert not bool(project_valid(cam, 3 * np.sin(1.569), 0.0, 3 * np.cos(1.569)))
    # The same points are out of reach of a pinhole camera (x/z at 89.5 deg is ~115).
    pin = look_at([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0], W, H, 120.0)
    pu, _ = project(pin, p[:, 0], p[:, 1], p[:, 2])
    assert np.all((pu < 0) | (pu > W))


# ------------------------------------------------------------------ validity


@pytest.mark.parametrize("model", MODELS)
def test_project_valid_false_behind_camera_and_before_near(model):
    cam = make_camera(model)
    z = np.array([-5.0, -1e-3, 0.0, cam.near / 2, 2 * cam.near, 1.0, 1e3, 2 * cam.far])
    x = 0.01 * np.abs(z)
    valid = project_valid(cam, x, -x, z)
    np.testing.assert_array_equal(valid, [False, False, False, False, True, True, True, False])
    assert valid.dtype == jnp.bool_


def test_fisheye_limit_is_the_first_maximum_of_theta_d():
    k1 = -0.2  # d theta_d / d theta = 1 + 3 k1 theta^2 = 0 at theta = 1 / sqrt(0.6)
    cam = Camera(viewmat=np.eye(4), K=np.diag([30.0, 30.0, 1.0]), width=W, height=H,
                 model="fisheye", dist=[k1, 0.0, 0.0, 0.0])  # fmt: skip
    limit = 1 / np.sqrt(-3 * k1)
    theta_max = jax.jit(lambda c: c.fisheye_theta_max())
    np.testing.assert_allclose(theta_max(cam), limit, atol=1e-9)
    theta = np.array([0.0, 0.5, limit - 1e-6, limit + 1e-6, 1.4, 1.55])
    p = np.stack([np.sin(theta), np.zeros_like(theta), np.cos(theta)], axis=1)
    valid = project_valid(cam, p[:, 0], p[:, 1], p[:, 2])
    np.testing.assert_array_equal(valid, [True, True, True, False, False, False])
    # Monotonic theta_d: no limit before pi (validity is then just z > near).
    plain = cam.replace(dist=None)
    np.testing.assert_allclose(theta_max(plain), np.pi)
    # A limit set by a higher-order coefficient.
    lim4 = theta_max(cam.replace(dist=[0.0, 0.0, 0.0, -0.05]))
    np.testing.assert_allclose(1 + 9 * -0.05 * lim4**8, 0.0, atol=1e-9)


def test_fisheye_pixels_beyond_the_image_circle_get_the_nearest_valid_ray():
    """Beyond theta_d(theta_max) no angle reaches a pixel: its ray is the one at theta_max in
    the pixel's direction (a Newton step from the fold threw it behind the camera); pixels
    inside still round-trip."""
    k1 = -0.2
    cam = Camera(viewmat=np.eye(4), K=np.diag([30.0, 30.0, 1.0]), width=W, height=H,
                 model="fisheye", dist=[k1, 0.0, 0.0, 0.0])  # fmt: skip
    limit = 1 / np.sqrt(-3 * k1)
    td_max = limit * (1 + k1 * limit**2)
    radius = np.array([0.3, 0.9 * td_max, 1.01 * td_max, 1.5 * td_max, 3.0])  # normalised
    azimuth = np.array([0.0, 1.0, 2.0, -2.5, 0.7])
    px, py = 30.0 * radius * np.cos(azimuth), 30.0 * radius * np.sin(azimuth)
    _, d = cam.pixel_rays(px, py)
    d = np.asarray(d)
    polar = np.arccos(d[:, 2] / np.linalg.norm(d, axis=1))
    beyond = radius > td_max
    np.testing.assert_allclose(polar[beyond], limit, atol=1e-6)
    np.testing.assert_allclose(np.arctan2(d[:, 1], d[:, 0]), azimuth, atol=1e-6)
    u, v = cam.project(d[~beyond, 0], d[~beyond, 1], d[~beyond, 2])
    np.testing.assert_allclose(np.stack([u, v], 1), np.stack([px, py], 1)[~beyond], atol=1e-6)
    np.testing.assert_array_equal(np.asarray(cam.pixel_valid(px, py)), ~beyond)


def test_opencv_invalid_where_radial_factor_leaves_range():
    cam = Camera(viewmat=np.eye(4), K=np.diag([30.0, 30.0, 1.0]), width=W, height=H,
                 model="opencv", dist=[0.5])  # fmt: skip
    # radial = 1 + 0.5 r^2: 1.2 at r^2 = 0.4.
    r = np.array([0.0, 0.5, np.sqrt(0.4) - 1e-6, np.sqrt(0.4) + 1e-6, 1.0])
    valid = project_valid(cam, r, np.zeros_like(r), np.ones_like(r))
    np.testing.assert_array_equal(valid, [True, True, True, False, False])


# ------------------------------------------------------------------ derivatives


def fd_jacobian(cam, p, eps=1e-6):
    cols = []
    for i in range(3):
        dp = np.zeros(3)
        dp[i] = eps
        up, vp = project(cam, *(p + dp).T)
        um, vm = project(cam, *(p - dp).T)
        cols.append(((up - um) / (2 * eps), (vp - vm) / (2 * eps)))
    return [cols[j][r] for r in range(2) for j in range(3)]  # j00 j01 j02 j10 j11 j12


@pytest.mark.parametrize("model", MODELS)
def test_jacobian_matches_finite_differences(model):
    cam = make_camera(model)
    p = random_camera_points(np.random.default_rng(2))
    jac = jacobian(cam, p[:, 0], p[:, 1], p[:, 2])
    for got, want in zip(jac, fd_jacobian(cam, p), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def directional_fd(f, x, d, eps=1e-6):
    return (f(x + eps * d) - f(x - eps * d)) / (2 * eps)


@pytest.mark.parametrize("model", MODELS)
def test_gradients_wrt_camera_arrays_and_points_match_finite_differences(model):
    """One loss over project, jacobian (as EWA backward needs) and pixel_rays (through the
    Newton inverse); its gradient w.r.t. viewmat, K, dist and the points vs central FD."""
    cam = make_camera(model)
    rng = np.random.default_rng(3)
    n = 20
    p_world = np.asarray(cam.position) + 3.0 * np.asarray(cam.R[2]) + rng.normal(0, 0.4, (n, 3))
    px, py = rng.uniform(2, W - 2, n), rng.uniform(2, H - 2, n)
    wu, wj, wd = rng.normal(size=(2, n)), rng.normal(size=(6, n)), rng.normal(size=(n, 3))

    def loss(viewmat, K, dist, p_world):
        c = cam.replace(viewmat=viewmat, K=K, dist=dist)
        p = c.world_to_camera(p_world)
        x, y, z = p[:, 0], p[:, 1], p[:, 2]
        u, v = c.project(x, y, z)
        jac = jnp.stack(c.jacobian(x, y, z))
        _, direction = c.pixel_rays(px, py)
        return jnp.sum(wu[0] * u + wu[1] * v) + jnp.sum(wj * jac) + 100.0 * jnp.sum(wd * direction)

    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))
    args = (cam.viewmat, cam.K, cam.dist, jnp.asarray(p_world))
    _, grads = value_and_grad(*args)
    for i, g in enumerate(grads):
        assert bool(jnp.all(jnp.isfinite(g)))
        d = rng.normal(size=args[i].shape)
        if i == 1:
            d[2] = [0.0, 0.0, 0.0]  # K's last row is not used

        def f(a, i=i):
            return value_and_grad(*(a if j == i else args[j] for j in range(4)))[0]

        np.testing.assert_allclose(jnp.sum(g * d), directional_fd(f, args[i], d), rtol=1e-5)


# ------------------------------------------------------------------ dtypes and shapes


@pytest.mark.parametrize("model", MODELS)
def test_float32_stays_float32(model):
    @jax.jit
    def chain(cam, px, py):
        origin, direction = cam.pixel_rays(px, py)
        p = cam.world_to_camera(origin + 2.0 * direction)
        x, y, z = p[..., 0], p[..., 1], p[..., 2]
        return origin, direction, p, cam.project(x, y, z), cam.jacobian(x, y, z)

    cam32 = make_camera(model, dtype=np.float32)
    assert cam32.K.dtype == cam32.viewmat.dtype == cam32.dist.dtype == jnp.float32
    px, py = (a.astype(jnp.float32) for a in pixel_grid())
    out = chain(cam32, px, py)
    assert all(a.dtype == jnp.float32 for a in jax.tree.leaves(out))
    u, v = out[3]
    np.testing.assert_allclose(u, px, atol=2e-3)
    np.testing.assert_allclose(v, py, atol=2e-3)
    # A float64 camera computes in the points' dtype (checked on shapes/dtypes only).
    shapes = jax.eval_shape(chain, make_camera(model), px, py)
    assert all(a.dtype == jnp.float32 for a in jax.tree.leaves(shapes))


def test_arguments_broadcast_without_rank_promotion():
    def shape(f, *args):
        return jax.tree.map(lambda a: a.shape, jax.eval_shape(f, *args))

    x, y, z = jnp.linspace(-0.5, 0.5, 5), jnp.linspace(-0.3, 0.3, 3)[:, None], 2.0
    for model in MODELS:
        cam = make_camera(model)
        assert shape(lambda c: c.project(x, y, z), cam) == ((3, 5), (3, 5))
        assert shape(lambda c: c.project_valid(x, y, z), cam) == (3, 5)
        assert shape(lambda c: c.jacobian(x, y, z), cam) == ((3, 5),) * 6
        rays = shape(lambda c: c.pixel_rays(jnp.arange(4.0), jnp.arange(3.0)[:, None]), cam)
        assert rays == ((3, 4, 3), (3, 4, 3))
        assert shape(lambda c: c.world_to_camera(jnp.zeros((2, 5, 3))), cam) == (2, 5, 3)
    u, _ = make_camera("opencv").project(x, y, z)  # and it runs eagerly
    assert u.shape == (3, 5)


def test_constructor_keeps_dtypes_pads_dist_and_validates():
    K = np.diag([10.0, 10.0, 1.0]).astype(np.float32)
    cam = Camera(viewmat=np.eye(4, dtype=np.float32), K=K, width=8, height=6)
    assert cam.dist.shape == (12,) and cam.dist.dtype == jnp.float32
    assert cam.model == "pinhole" and (cam.near, cam.far) == (0.01, 1e10)
    fish = Camera(viewmat=jnp.eye(4), K=jnp.asarray(K, jnp.float64), width=8, height=6,
                  model="fisheye", dist=np.array([0.1, 0.2, 0.3, 0.4]))  # fmt: skip
    np.testing.assert_array_equal(fish.dist, [0.1, 0.2, 0.3, 0.4] + [0.0] * 8)
    assert len(jax.tree_util.tree_leaves(fish)) == 3
    for kwargs, msg in [
        (
            dict(model="fish"),
            "unknown camera model 'fish'; "
            "expected one of ('pinhole', 'opencv', 'fisheye', 'ortho')",
        ),
        (dict(K=np.eye(4)), "K must be [..., 3, 3], got (4, 4)"),
        (dict(viewmat=np.eye(3)), "viewmat must be [..., 4, 4], got (3, 3)"),
        (dict(dist=np.zeros(13)), "dist must have at most 12 entries, got (13,)"),
        (dict(width=0), "width and height must be positive ints, got 0x6"),
        (dict(near=2.0, far=1.0), "need 0 <= near < far, got near=2.0, far=1.0"),
        # only fx, fy, cx, cy are read: these rendered as if the entry were not there
        (dict(K=K * 2),
         "K's last row must be [0, 0, 1], got [0.0, 0.0, 2.0] (divide K by K[2, 2])"),
        (dict(K=K + np.array([[0, 3, 0], [0, 0, 0], [0, 0, 0]], np.float32)),
         "K has a skew or shear (K[0, 1] = 3.0, K[1, 0] = 0.0): the camera models have none; "
         "only fx, fy, cx and cy are read"),
        (dict(viewmat=np.vstack([np.eye(4)[:3], [1.0, 2.0, 3.0, 4.0]])),
         "viewmat's last row must be [0, 0, 0, 1]; off by 3"),
    ]:
        base = dict(viewmat=np.eye(4), K=K, width=8, height=6)
        with pytest.raises(CameraError) as info:
            Camera(**{**base, **kwargs})
        assert str(info.value) == f"<camera>: error: {msg}"
        assert isinstance(info.value, XprError)


def test_pose_helpers_and_look_at():
    eye, target = np.array([1.0, 2.0, -4.0]), np.array([0.5, 0.0, 1.0])
    cam = look_at(eye, target, [0.0, -1.0, 0.0], W, H, 60.0)
    np.testing.assert_allclose(cam.position, eye, atol=1e-12)
    np.testing.assert_allclose(world_to_camera(cam, eye), 0.0, atol=1e-12)
    np.testing.assert_allclose(cam.R @ cam.R.T, np.eye(3), atol=1e-12)
    tc = world_to_camera(cam, target)
    np.testing.assert_allclose(project(cam, *tc), [W / 2, H / 2], atol=1e-9)
    np.testing.assert_allclose(cam.fx, (W / 2) / np.tan(np.deg2rad(30.0)))
    assert float(tc[2]) > 0
    # World up (here -y) projects upwards in the image (smaller v).
    above = world_to_camera(cam, target + np.array([0.0, -1.0, 0.0]))
    assert float(project(cam, *above)[1]) < H / 2
    assert all(jnp.ndim(a) == 0 for a in (cam.fx, cam.fy, cam.cx, cam.cy))
    with pytest.raises(CameraError, match="parallel"):
        look_at(eye, target, target - eye, W, H, 60.0)


# ------------------------------------------------------------------ batching and tracing


def test_stack_vmap_and_index():
    cams = [make_camera("opencv", eye=(0.3 * i, -0.2, -3.0 - i)) for i in range(3)]
    batch = Camera.stack(cams)
    assert batch.batch_shape == (3,)
    assert batch.viewmat.shape == (3, 4, 4) and batch.K.shape == (3, 3, 3)
    assert batch.dist.shape == (3, 12) and batch.position.shape == (3, 3)
    p = jnp.asarray(random_camera_points(np.random.default_rng(5)))

    def render(cam, p):
        q = world_to_camera(cam, p)
        return project(cam, q[:, 0], q[:, 1], q[:, 2]), pixel_rays(cam, p[:, 0] + 30, p[:, 1] + 20)

    batched = jax.jit(jax.vmap(render, in_axes=(0, None)))(batch, p)
    for i, cam in enumerate(cams):
        single = render(cam, p)
        for got, want in zip(jax.tree.leaves(batched), jax.tree.leaves(single), strict=True):
            np.testing.assert_allclose(got[i], want, atol=1e-12)
        np.testing.assert_array_equal(batch[i].viewmat, cam.viewmat)


def test_stack_rejects_mismatched_cameras():
    a = make_camera("pinhole")
    with pytest.raises(CameraError) as info:
        Camera.stack([a, make_camera("opencv")])
    assert str(info.value) == (
        "<camera>: error: Camera.stack: camera 1 has static fields {'width': 64, 'height': 48, "
        "'model': 'opencv', 'near': 0.01, 'far': 10000000000.0, 'shutter': 'global'}, camera 0 "
        "has {'width': 64, 'height': 48, 'model': 'pinhole', 'near': 0.01, 'far': 10000000000.0, "
        "'shutter': 'global'}; all must be equal"
    )
    with pytest.raises(
        CameraError, match=r"camera 1 has viewmat float32\[4, 4\], camera 0 has float64\[4, 4\]"
    ):
        Camera.stack([a, make_camera("pinhole", dtype=np.float32)])
    with pytest.raises(CameraError, match="at least one camera"):
        Camera.stack([])


@pytest.mark.parametrize("model", MODELS)
def test_jit_traces_once_for_cameras_with_equal_static_fields(model):
    traces = []

    @jax.jit
    def f(cam, x):
        traces.append(1)
        u, v = cam.project(x, x, x + 2.0)
        return u + v, cam.pixel_rays(u, v), cam.project_valid(x, x, x + 2.0)

    x = jnp.linspace(0.0, 0.3, 4)
    out_a = f(make_camera(model), x)
    out_b = f(make_camera(model, eye=(1.0, 0.0, -5.0)), x)
    assert len(traces) == 1
    assert not np.allclose(out_a[1][0], out_b[1][0])


# ---------------------------------------------------------------------------------------------
# Untrusted camera values (issue 15): checked where a Camera is built, when they are concrete.

GOOD_K = np.diag([10.0, 12.0, 1.0])


def _camera_error(**kwargs) -> str:
    base = dict(viewmat=np.eye(4), K=GOOD_K, width=8, height=6)
    with pytest.raises(CameraError) as info:
        Camera(**{**base, **kwargs})
    return str(info.value)


def _scaled_eye(scale):
    v = np.eye(4)
    v[:3, :3] *= scale
    return v


@pytest.mark.parametrize("kwargs,msg", [
    (dict(K=np.full((3, 3), np.nan)), "K must be finite"),
    (dict(K=np.zeros((3, 3))), "focal lengths must be positive, got fx=0.0, fy=0.0"),
    (dict(K=np.diag([-10.0, 12.0, 1.0])), "focal lengths must be positive, got fx=-10.0, fy=12.0"),
    (dict(K=np.diag([10.0, np.inf, 1.0])), "K must be finite"),
    (dict(viewmat=np.zeros((4, 4))),
     "viewmat[:3, :3] must be a rotation (R R^T = I, det R = 1); off by 1"),
    (dict(viewmat=np.full((4, 4), np.nan)), "viewmat must be finite"),
    (dict(viewmat=_scaled_eye(2.0)),
     "viewmat[:3, :3] must be a rotation (R R^T = I, det R = 1); off by 7"),
    (dict(viewmat=np.diag([1.0, 1.0, -1.0, 1.0])),
     "viewmat[:3, :3] must be a rotation (R R^T = I, det R = 1); off by 2"),
    (dict(dist=[0.1, np.nan]), "dist must be finite"),
])  # fmt: skip
def test_camera_rejects_bad_values(kwargs, msg):
    assert _camera_error(**kwargs) == f"<camera>: error: {msg}"


def test_camera_checks_replace_and_each_camera_of_a_batch():
    cam = Camera(viewmat=np.eye(4), K=GOOD_K, width=8, height=6)
    with pytest.raises(CameraError):
        cam.replace(K=np.zeros((3, 3)))
    K = np.stack([GOOD_K, np.diag([10.0, 0.0, 1.0])])
    assert _camera_error(viewmat=np.stack([np.eye(4)] * 2), K=K) == (
        "<camera>: error: focal lengths must be positive, got fx=10.0, fy=0.0"
    )


def test_camera_accepts_float32_poses_from_a_dataset():
    cam = look_at([0.3, -0.2, -3.0], [0.1, 0.05, 0.0], [0.1, -1.0, 0.05], W, H, dtype=np.float32)
    again = Camera(viewmat=np.asarray(cam.viewmat), K=np.asarray(cam.K), width=W, height=H)
    assert again.viewmat.dtype == jnp.float32


def test_traced_cameras_are_not_checked():
    """Inside jit or vmap the values are tracers: the Camera is built without looking at them
    (a zero K is no error at trace time; it projects everything onto the principal point)."""

    def centre_u(K):
        cam = Camera(viewmat=jnp.eye(4), K=K, width=8, height=6)
        return cam.project(jnp.ones(()), jnp.ones(()), jnp.ones(()))[0]

    assert float(jax.jit(centre_u)(jnp.asarray(GOOD_K))) == 10.0
    assert float(jax.jit(centre_u)(jnp.zeros((3, 3)))) == 0.0
    us = jax.vmap(centre_u)(jnp.stack([jnp.asarray(GOOD_K), 2 * jnp.asarray(GOOD_K)]))
    np.testing.assert_allclose(np.asarray(us), [10.0, 20.0])


@pytest.mark.parametrize(
    ("model", "dist", "slots"),
    [("pinhole", [-0.3, 0.1], "0, 1"), ("ortho", [0, 0, 0.01], "2"),
     ("fisheye", [0.1, 0, 0, 0, 0.2], "4")],
)  # fmt: skip
def test_coefficients_the_model_does_not_read_are_refused(model, dist, slots):
    """A pinhole camera given OpenCV coefficients rendered undistorted without a word."""
    K = np.array([[50.0, 0, 32], [0, 50.0, 24], [0, 0, 1]])
    with pytest.raises(CameraError, match=rf"'{model}' .*dist\[{slots}\] is nonzero"):
        Camera(viewmat=np.eye(4), K=K, width=64, height=48, model=model, dist=dist)
    used = {"pinhole": 0, "ortho": 0, "fisheye": 4}[model]
    ok = Camera(viewmat=np.eye(4), K=K, width=64, height=48, model=model, dist=dist[:used] or None)
    assert ok.model == model
    Camera(viewmat=np.eye(4), K=K, width=64, height=48, model="opencv", dist=[0.1] * 12)


@pytest.mark.parametrize(
    ("kwargs", "msg"),
    [
        # a pinhole's focal length is 0 at 180 degrees: an almost empty render
        (dict(fov_deg=180), "look_at: fov_deg=180 for a pinhole camera: expected a field of view "
                            "in (0, 180) degrees"),
        (dict(fov_deg=0, model="opencv"), "look_at: fov_deg=0 for a opencv camera: expected a "
                                          "field of view in (0, 180) degrees"),
        (dict(fov_deg=400, model="fisheye"), "look_at: fov_deg=400 for a fisheye camera: "
                                             "expected a field of view in (0, 360) degrees"),
        (dict(eye=[0.0, 0.0, 0.0]), "look_at: `eye` and `target` are the same point"),
    ],
)  # fmt: skip
def test_look_at_refuses_a_view_it_cannot_make(kwargs, msg):
    base = dict(eye=[0.0, 0.0, -4.0], target=[0.0, 0.0, 0.0], up=[0.0, -1.0, 0.0], width=8,
                height=6)  # fmt: skip
    with pytest.raises(CameraError) as info:
        look_at(**{**base, **kwargs})
    assert str(info.value) == f"<camera>: error: {msg}"
    assert look_at(**{**base, "fov_deg": 200, "model": "fisheye"}).model == "fisheye"
