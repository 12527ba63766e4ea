"""Rolling-shutter cameras (xprc/camera/shutter.py, docs/cameras.md): each image row (or column)
exposed at its own pose between `viewmat` and `viewmat_end`.

Every check compares with an independent float64 NumPy twin written here: the exposure time of
gsplat's definition, the pose by SciPy's `Slerp` (not our quaternion code), the projection
iteration, per-pixel rays through each row's pose, and for the render the 3DGUT response of
tests/reference_3dgut.py along those rays, composited front to back in the pipeline's order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_3dgut as ref
from conftest import ROOT
from scipy.spatial.transform import Rotation, Slerp

from xprc.camera import Camera, CameraError
from xprc.camera import shutter as rs
from xprc.compiler.driver import load
from xprc.data.workloads import random_scene
from xprc.pipeline import render

W, H = 48, 32
BG = (0.1, 0.2, 0.3)
ROLLING = ("top_to_bottom", "bottom_to_top", "left_to_right", "right_to_left")


def viewmat_of(rotvec, trans) -> np.ndarray:
    v = np.eye(4)
    v[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    v[:3, 3] = trans
    return v


START = viewmat_of([0.02, -0.03, 0.01], [0.05, -0.02, 0.1])
# a strong motion: about 14 degrees of rotation and 0.45 of translation during the exposure
END = viewmat_of([0.12, 0.2, -0.08], [-0.3, 0.25, -0.2])


LENS = {  # model -> (focal length, dist)
    "pinhole": (40.0, None),
    "ortho": (10.0, None),
    "opencv": (40.0, [0.08, -0.03, 0.005, 0.02, 0.0, 0.001, 0.002, -0.001, 0.001, 0.0, -0.002, 0]),
    "fisheye": (30.0, [0.05, -0.01, 0.002, 0.0]),
}


def camera(shutter="global", end=END, dtype=np.float32, model="pinhole", f=None):
    f0, dist = LENS[model]
    f = f0 if f is None else f
    K = np.array([[f, 0, W / 2], [0, f, H / 2], [0, 0, 1]])
    return Camera(
        viewmat=START.astype(dtype), K=K.astype(dtype), width=W, height=H, model=model,
        dist=None if dist is None else np.asarray(dist, dtype),
        viewmat_end=None if end is None else np.asarray(end, dtype), shutter=shutter,
    )  # fmt: skip


# ---------------------------------------------------------------------- the NumPy twin


def twin_time(shutter, u, v):
    """gsplat's relative frame time (floor / ceil of the image point), clamped to [0, 1]."""
    if shutter == "top_to_bottom":
        t = np.floor(v) / (H - 1)
    elif shutter == "bottom_to_top":
        t = (H - np.ceil(v)) / (H - 1)
    elif shutter == "left_to_right":
        t = np.floor(u) / (W - 1)
    else:
        t = (W - np.ceil(u)) / (W - 1)
    return np.clip(t, 0.0, 1.0)


def twin_pose(t, start=START, end=END):
    """(R [..., 3, 3], translation [..., 3]) at times t: SciPy's slerp, translation lerp."""
    slerp = Slerp([0.0, 1.0], Rotation.from_matrix([start[:3, :3], end[:3, :3]]))
    t = np.asarray(t, np.float64)
    R = slerp(t.ravel()).as_matrix().reshape(t.shape + (3, 3))
    trans = (1 - t[..., None]) * start[:3, 3] + t[..., None] * end[:3, 3]
    return R, trans


def twin_cam(cam, R, trans):
    c = ref.camera_arrays(cam)
    c["R"], c["t"] = R, trans
    return c


def twin_point(cam, shutter, p):
    """World point [3] -> camera-space point at the pose of its row: gsplat's iteration."""
    c = ref.camera_arrays(cam)
    if shutter == "global":
        return START[:3, :3] @ p + START[:3, 3]

    def at(t):
        R, trans = twin_pose(t)
        q = R @ p + trans
        uv = ref.project(c, q)
        return q, uv, bool(ref.project_valid(c, q))

    q0, uv0, ok0 = at(0.0)
    q1, uv1, ok1 = at(1.0)
    if not (ok0 or ok1):
        return q1
    uv = uv0 if ok0 else uv1
    for _ in range(rs.ITERATIONS):
        q, uv, _ = at(twin_time(shutter, uv[0], uv[1]))
    return q


def twin_rays(cam, shutter):
    """Per-pixel world rays [H, W, 3] (origin, direction), each through its row's pose."""
    jj, ii = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    o = np.zeros((H, W, 3))
    d = np.zeros((H, W, 3))
    for i in range(H):
        for j in range(W):
            t = 0.0 if shutter == "global" else twin_time(shutter, jj[i, j], ii[i, j])
            R, trans = twin_pose(t)
            oo, dd = ref.pixel_rays(twin_cam(cam, R, trans), jj[i, j], ii[i, j])
            o[i, j], d[i, j] = oo, dd
    return o, d


def twin_render(params, cam, shutter):
    """(colour [H, W, 3], alpha [H, W]): 3DGUT's response along each pixel's own ray, the
    primitives sorted by the camera z of their mean at its own row's pose, front to back."""
    mu, rot, s, opac = ref.activate(params)
    pc = np.stack([twin_point(cam, shutter, m) for m in mu])
    c = ref.camera_arrays(cam)
    valid = (pc[:, 2] >= ref.CULL_Z) & ref.project_valid(c, pc)
    view = mu + START[:3, :3].T @ START[:3, 3]  # colour: seen from the start pose's centre
    colour = ref.sh_colour(
        np.asarray(params["sh"], np.float64), view / np.linalg.norm(view, axis=-1, keepdims=True)
    )
    o, d = (a.reshape(-1, 3) for a in twin_rays(cam, shutter))
    T = np.ones(len(o))
    C = np.zeros((len(o), 3))
    done = np.zeros(len(o), bool)
    for i in np.argsort(np.where(valid, pc[:, 2], np.inf), kind="stable"):
        if not valid[i]:
            break
        resp, t_star = ref.response_3d(o, d, mu[i], rot[i], s[i])
        alpha = np.minimum(0.99, opac[i] * resp)
        use = (resp > ref.MIN_RESPONSE) & (alpha >= 1 / 255) & (t_star > 0) & ~done
        test_t = T * (1 - alpha)
        stop = use & (test_t < 1e-4)
        done |= stop
        use &= ~stop
        C += np.where(use, alpha * T, 0.0)[:, None] * colour[i]
        T = np.where(use, test_t, T)
    C += T[:, None] * np.asarray(BG)
    return C.reshape(H, W, 3), (1 - T).reshape(H, W)


# ---------------------------------------------------------------------- camera pieces


@pytest.mark.parametrize("shutter", ROLLING)
def test_time_pose_and_rays_match_the_twin(shutter):
    cam = camera(shutter, dtype=np.float64)
    u = np.array([0.5, 3.2, 47.5, 20.0, -3.0, 60.0])
    v = np.array([0.5, 31.5, 9.9, 16.0, -2.0, 40.0])
    t = np.asarray(rs.relative_time(shutter, jnp.asarray(u), jnp.asarray(v), W, H))
    np.testing.assert_allclose(t, twin_time(shutter, u, v), atol=1e-15, rtol=0)
    R, trans = rs.pose_at(jnp.asarray(START), jnp.asarray(END), jnp.asarray(t))
    R_ref, trans_ref = twin_pose(t)
    np.testing.assert_allclose(np.asarray(R), R_ref, atol=1e-12)
    np.testing.assert_allclose(np.asarray(trans), trans_ref, atol=1e-12)
    jj, ii = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    o, d = cam.pixel_rays(jnp.asarray(jj), jnp.asarray(ii))
    o_ref, d_ref = twin_rays(cam, shutter)
    np.testing.assert_allclose(np.asarray(o), o_ref, atol=1e-12)
    np.testing.assert_allclose(np.asarray(d), d_ref, atol=1e-12)


def test_short_arc_and_large_rotations():
    """The slerp takes the short arc whatever the sign of the quaternions, up to 180 degrees."""
    for angle in (1e-9, 0.3, 2.0, 3.1, np.pi - 1e-6):
        end = viewmat_of(np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8]) * angle,
                         [0.0, 0.0, 0.0])  # fmt: skip
        end[:3, :3] = end[:3, :3] @ START[:3, :3]
        t = np.linspace(0, 1, 7)
        R, _ = rs.pose_at(jnp.asarray(START), jnp.asarray(end), jnp.asarray(t))
        R_ref, _ = twin_pose(t, START, end)
        np.testing.assert_allclose(np.asarray(R), R_ref, atol=1e-9)


@pytest.mark.parametrize("shutter", ["top_to_bottom", "right_to_left"])
def test_world_point_projection_matches_the_twin(shutter):
    cam = camera(shutter, dtype=np.float64)
    rng = np.random.default_rng(0)
    pts = rng.normal(0, 1.0, (30, 3)) + [0, 0, 4.0]
    pts[0] = [0.0, 0.0, -3.0]  # behind the camera at both poses: taken at the end pose
    q = np.stack(cam.world_to_camera_shutter(*jnp.asarray(pts).T), -1)
    np.testing.assert_allclose(q, np.stack([twin_point(cam, shutter, p) for p in pts]),
                               atol=1e-10)  # fmt: skip
    # a global camera: world_to_camera itself
    g = camera("global", end=None, dtype=np.float64)
    qg = np.stack(g.world_to_camera_shutter(*jnp.asarray(pts).T), -1)
    np.testing.assert_allclose(qg, pts @ START[:3, :3].T + START[:3, 3], atol=1e-12)


def test_projection_gradient_matches_finite_differences():
    """The time is a step function of the pixel (no gradient); the point moves with the pose of
    its row, so d(u, v)/dp is the projection's derivative at that pose."""
    cam = camera("top_to_bottom", dtype=np.float64)
    p = jnp.asarray([0.3, -0.2, 4.0])

    def uv(p):
        q = cam.world_to_camera_shutter(p[0], p[1], p[2])
        return jnp.stack(cam.project(*q))

    jac = np.asarray(jax.jacobian(uv)(p))
    h = 1e-6
    for k in range(3):
        e = np.zeros(3)
        e[k] = h  # small enough to stay on the same row
        fd = (np.asarray(uv(p + e)) - np.asarray(uv(p - e))) / (2 * h)
        np.testing.assert_allclose(jac[:, k], fd, rtol=1e-6, atol=1e-6)
    assert np.abs(jac).max() > 1.0


def test_pixel_ray_gradient_reaches_both_poses():
    """A rolling shutter's rays move with the end pose (d/d viewmat_end) and the start pose, and
    the derivatives match central differences (float64)."""
    cam = camera("left_to_right", dtype=np.float64)
    px = jnp.asarray([3.5, 20.5, 40.5])
    py = jnp.asarray([2.5, 17.5, 30.5])
    leaves, tree = jax.tree_util.tree_flatten(cam)

    def rays(start, end):
        c = jax.tree_util.tree_unflatten(tree, [start, leaves[1], leaves[2], end])
        return jnp.concatenate(c.pixel_rays(px, py), -1)

    jac = jax.jacobian(rays, argnums=(0, 1))(cam.viewmat, cam.viewmat_end)
    h = 1e-6
    for which in (0, 1):
        for i, j in ((0, 3), (2, 3), (0, 1)):  # translation entries and a rotation entry
            e = jnp.zeros((4, 4)).at[i, j].set(h)
            args_p = [cam.viewmat, cam.viewmat_end]
            args_m = [cam.viewmat, cam.viewmat_end]
            args_p[which] = args_p[which] + e
            args_m[which] = args_m[which] - e
            fd = (rays(*args_p) - rays(*args_m)) / (2 * h)
            np.testing.assert_allclose(jac[which][..., i, j], fd, atol=1e-7)
    assert np.abs(np.asarray(jac[1][..., 0, 3])).max() > 0.1


def test_sweep_bound_holds():
    """The slerp's departure from the chord, at the same time t, is at most |c| theta^2 / 8."""
    t = np.linspace(0, 1, 4001)
    for theta in np.linspace(1e-3, np.pi, 200):
        arc = np.stack([np.cos(t * theta), np.sin(t * theta)])
        chord = np.stack([(1 - t) + t * np.cos(theta), t * np.sin(theta)])
        assert np.linalg.norm(arc - chord, axis=0).max() <= theta * theta / 8 * (1 + 1e-12)


@pytest.mark.parametrize("model", ["pinhole", "ortho", "opencv", "fisheye"])
def test_shutter_box_holds_every_lit_pixel(model):
    """Balls seen with a strongly moving camera: every pixel whose own ray meets the ball lies
    in camera.shutter_box (the global start-pose box alone misses some), and the box is not the
    whole image for most of them."""
    cam = camera("bottom_to_top", dtype=np.float64, model=model)
    o, d = (a.reshape(-1, 3) for a in twin_rays(cam, "bottom_to_top"))
    jj, ii = (a.ravel() for a in np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5))
    rng = np.random.default_rng(1)
    missed_by_start = tight = 0
    for _ in range(40):
        c = rng.normal(0, 1.0, 3) + [0, 0, 4.0]
        r = rng.uniform(0.05, 0.5)
        t_star = np.einsum("pi,pi->p", c - o, d)
        near = o + np.maximum(t_star, 0)[:, None] * d
        lit = np.linalg.norm(near - c, axis=-1) <= r
        box = [float(b) for b in cam.shutter_box(*c, r)]
        inside = (jj >= box[0]) & (jj <= box[2]) & (ii >= box[1]) & (ii <= box[3])
        assert not (lit & ~inside).any()
        tight += box != [0, 0, W, H]
        g = camera("global", end=None, dtype=np.float64, model=model)
        ob, db = (np.asarray(a) for a in g.pixel_rays(jj, ii))
        lit0 = (
            np.linalg.norm(
                ob + np.maximum(np.einsum("pi,pi->p", c - ob, db), 0)[:, None] * db - c,
                axis=-1,
            )
            <= r
        )
        missed_by_start += int((lit & ~lit0).sum())
    assert missed_by_start > 0 and tight >= 30
    # global shutter: the empty box
    np.testing.assert_array_equal(
        [float(b) for b in camera("global", end=None).shutter_box(0.0, 0.0, 4.0, 1.0)],
        [np.inf, np.inf, -np.inf, -np.inf],
    )
    # a ball around the camera at the end pose: the whole image
    whole = camera("top_to_bottom", dtype=np.float64, model=model).shutter_box(
        *(-END[:3, :3].T @ END[:3, 3]), 0.5
    )
    if model != "ortho":
        assert [float(b) for b in whole] == [0, 0, W, H]


# ---------------------------------------------------------------------- the Camera pytree


def test_camera_validation_messages():
    bad = END.copy()
    bad[:3, :3] *= 2
    cases = [
        (dict(shutter="top_to_bottom", end=None), "shutter 'top_to_bottom' needs viewmat_end, "
         "the world->camera pose at the end of the exposure"),
        (dict(shutter="rolling"), "unknown shutter 'rolling'; expected one of ('global', "
         "'top_to_bottom', 'bottom_to_top', 'left_to_right', 'right_to_left')"),
        (dict(shutter="global", end=END), "viewmat_end differs from viewmat but the shutter is "
         "'global' (one pose for the whole image): choose a rolling shutter, e.g. "
         "shutter='top_to_bottom', or drop viewmat_end"),
        (dict(shutter="top_to_bottom", end=np.eye(3)),
         "viewmat_end must have viewmat's shape (4, 4), got (3, 3)"),
        (dict(shutter="top_to_bottom", end=bad),
         "viewmat_end[:3, :3] must be a rotation (R R^T = I, det R = 1); off by 7"),
    ]  # fmt: skip
    for kw, message in cases:
        with pytest.raises(CameraError) as info:
            camera(**kw)
        assert str(info.value) == "<camera>: error: " + message
    camera("global", end=START)  # the one pose again: allowed


def test_stack_index_and_tree():
    a, b = camera("left_to_right"), camera("left_to_right", end=START)
    both = Camera.stack([a, b])
    assert both.viewmat_end.shape == (2, 4, 4) and both.shutter == "left_to_right"
    np.testing.assert_array_equal(np.asarray(both[1].viewmat_end), START.astype(np.float32))
    assert len(jax.tree_util.tree_leaves(a)) == 4
    assert len(jax.tree_util.tree_leaves(camera("global", end=None))) == 3
    with pytest.raises(CameraError, match="static fields"):
        Camera.stack([a, camera("top_to_bottom")])
    with pytest.raises(CameraError) as info:
        Camera.stack([camera("global", end=START), camera("global", end=None)])
    assert str(info.value) == (
        "<camera>: error: Camera.stack: camera 1 has no viewmat_end, camera 0 has a viewmat_end; "
        "all or none must have one"
    )
    leaves, tree = jax.tree_util.tree_flatten(a)
    back = jax.tree_util.tree_unflatten(tree, leaves)
    assert back.shutter == "left_to_right" and back.viewmat_end is leaves[3]


def test_camera_refinement_corrects_both_poses():
    """Training's pose correction of a view is a camera-frame factor: a rolling-shutter view
    gets it on its end pose too (else the end pose stayed where the data put it)."""
    from xprc.train.camera_opt import correct, pose_matrices

    cams = Camera.stack([camera("top_to_bottom", dtype=np.float64)] * 2)
    pose = np.array([[0.0] * 6, [0.02, -0.01, 0.03, 0.1, -0.05, 0.2]])
    out = correct(cams, {"pose": jnp.asarray(pose)}, jnp.asarray([0, 1]))
    delta = pose_matrices(pose, np.zeros(2))
    np.testing.assert_allclose(np.asarray(out.viewmat), delta @ START, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out.viewmat_end), delta @ END, atol=1e-12)
    assert out.shutter == "top_to_bottom"


# ---------------------------------------------------------------------- renders


@pytest.fixture(scope="module")
def gut():
    return load(ROOT / "specs" / "3dgut.xpr")


def scene():
    p = random_scene(40, seed=5, spread=0.8)
    p["opacities"] = np.abs(p["opacities"]) + 1.0  # mostly opaque: order matters
    return p


def draw(gut, cam):
    out = render(gut, scene(), cam, jnp.asarray(BG, jnp.float32), "RGB")
    assert int(out.stats["dropped"]) == 0
    return np.asarray(out.image, np.float64), np.asarray(out.alpha, np.float64)[..., 0]


@pytest.mark.parametrize(
    "shutter,model",
    # the others' times, rays, projections and boxes are checked above without a render
    [("top_to_bottom", "pinhole"),
     pytest.param("right_to_left", "pinhole", marks=pytest.mark.slow),
     pytest.param("left_to_right", "fisheye", marks=pytest.mark.slow),
     pytest.param("bottom_to_top", "opencv", marks=pytest.mark.slow)],
)  # fmt: skip
def test_render_matches_the_per_pixel_twin(gut, shutter, model):
    cam = camera(shutter, model=model)
    image, alpha = draw(gut, cam)
    colour, alpha_ref = twin_render(scene(), cam, shutter)
    assert alpha_ref.mean() > 0.2 and alpha_ref.min() < 0.1  # (the fisheye sees more background)
    np.testing.assert_allclose(alpha, alpha_ref, atol=2e-4, rtol=0)
    np.testing.assert_allclose(image, colour, atol=2e-4, rtol=0)
    # the motion matters: the start pose's global image is far from it
    still, _ = twin_render(scene(), camera("global", end=None, model=model), "global")
    assert np.abs(still - colour).max() > 0.3


@pytest.mark.parametrize("model", ["pinhole", "ortho", "opencv", "fisheye"])
def test_3dgut_box_holds_every_pixel_it_reaches(gut, model):
    """Big, flat Gaussians close to a strongly moving camera: every pixel whose own ray (at its
    row's pose) sees a valid primitive lies in that primitive's box; at the start pose alone
    some would not (the motion matters)."""
    rng = np.random.default_rng(7)
    n = 24
    params = {
        "means": rng.normal(0, 0.6, (n, 3)) + [0, 0, 2.5],
        "quats": rng.normal(size=(n, 4)),
        "scales": np.log(rng.uniform(0.05, 0.6, (n, 3)) * [1, 1, 0.05]),
        "opacities": np.full(n, 3.0),
        "sh": np.zeros((n, 16, 3)),
    }
    f = 12.0 if model == "ortho" else None
    cam = camera("top_to_bottom", dtype=np.float64, model=model, f=f)
    out = gut.project({k: jnp.asarray(v) for k, v in params.items()}, cam)
    valid, box = np.asarray(out["valid"]), np.asarray(out["box"])
    lit = ref.lit_pixels(params, cam, rays=twin_rays(cam, "top_to_bottom"))
    still = camera("global", end=None, dtype=np.float64, model=model, f=f)
    lit0 = ref.lit_pixels(params, still)
    jj, ii = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    assert valid.sum() > n // 2 and (lit & ~lit0).any()
    for i in np.nonzero(valid)[0]:
        x0, y0, x1, y1 = box[i]
        inside = (jj >= x0) & (jj <= x1) & (ii >= y0) & (ii <= y1)
        assert not np.any(lit[i] & ~inside), (i, box[i])


def test_zero_motion_and_a_global_end_pose_equal_the_global_camera(gut):
    image, alpha = draw(gut, camera("global", end=None))
    # the global image against the twin too (the spec's world-space sigma points)
    colour, alpha_ref = twin_render(scene(), camera("global", end=None), "global")
    np.testing.assert_allclose(image, colour, atol=2e-4, rtol=0)
    still, still_alpha = draw(gut, camera("top_to_bottom", end=START))
    np.testing.assert_allclose(still, image, atol=2e-5, rtol=0)
    np.testing.assert_allclose(still_alpha, alpha, atol=2e-5, rtol=0)
    same, _ = draw(gut, camera("global", end=START))
    np.testing.assert_array_equal(same, image)


def test_resume_check_tells_end_poses_apart(gut):
    """A checkpoint's digest of the training cameras covers a rolling shutter's end poses (and
    keeps a global camera's digest as it was: viewmat, K, dist, model, names)."""
    from xprc.train.checkpoint import run_inputs

    def digest(cam):
        return run_inputs(gut, object(), Camera.stack([cam]), ["v"], BG)["data.cameras"]

    moving, still = digest(camera("top_to_bottom")), digest(camera("top_to_bottom", end=START))
    assert len({digest(camera("global", end=None)), moving, still}) == 3


BLOB = """primitive Blob
param means : vec3
param opacities : scalar = sigmoid(raw)
projection {
  p = camera.world_to_camera_shutter(means)
  b = camera.shutter_box(means, 0.5)
  emit centre = camera.project_world(means), depth = p.z, valid = camera.project_world_valid(means),
       box = [min(b.x, 0), min(b.y, 0), max(b.z, 1), max(b.w, 1)]
}
response {
  d = pixel - centre
  alpha = min(0.99, opacities * exp(-dot(d, d)))
}
color = [1, 1, 1]
"""


def test_spec_methods_compile_and_misuse_is_reported():
    from xprc.compiler.driver import compile_source
    from xprc.errors import XprTypeError

    src = compile_source(BLOB, "blob.xpr")
    for call in ("world_to_camera_shutter(", "shutter_box(", "project(", "project_valid("):
        assert f"= camera.{call}" in src
    bad = {
        "camera.shutter_box(means, 0.5)": (
            "camera.shutter_box(means)",
            "blob.xpr:6:14: error: camera.shutter_box takes 2 arguments (a vec3 and a scalar), "
            "got 1\n      b = camera.shutter_box(means)\n                 ^",
        ),
        "0.5)": (
            "means)",
            "blob.xpr:6:33: error: camera.shutter_box needs a scalar radius, got vec3\n"
            "      b = camera.shutter_box(means, means)\n                                    ^",
        ),
    }
    for old, (new, message) in bad.items():
        with pytest.raises(XprTypeError) as info:
            compile_source(BLOB.replace(old, new, 1), "blob.xpr")
        assert str(info.value) == message


@pytest.mark.slow  # the ray and projection gradients are checked above without a render
def test_render_gradient_matches_finite_differences(gut):
    """Gradients reach a primitive's mean and the end pose (through every pixel's ray) in a
    float64 rolling-shutter render: each against a central difference."""
    params = {k: jnp.asarray(v, jnp.float64) for k, v in scene().items()}
    cam = camera("top_to_bottom", dtype=np.float64)
    weights = jnp.asarray(np.random.default_rng(2).normal(size=(H, W, 3)))

    def loss(means, end):
        c = jax.tree_util.tree_unflatten(
            jax.tree_util.tree_structure(cam), [cam.viewmat, cam.K, cam.dist, end]
        )
        out = render(gut, {**params, "means": means}, c, jnp.asarray(BG, jnp.float64), "RGB")
        return jnp.sum(out.image * weights)

    f = jax.jit(loss)
    g_means, g_end = jax.jit(jax.grad(loss, argnums=(0, 1)))(params["means"], cam.viewmat_end)
    h = 1e-5
    k = int(np.argmax(np.abs(np.asarray(g_means[:, 0]))))
    e = jnp.zeros_like(params["means"]).at[k, 0].set(h)
    fd = (f(params["means"] + e, cam.viewmat_end) - f(params["means"] - e, cam.viewmat_end)) / (
        2 * h
    )
    np.testing.assert_allclose(float(g_means[k, 0]), float(fd), rtol=1e-4)
    e = jnp.zeros((4, 4)).at[0, 3].set(h)
    fd = (f(params["means"], cam.viewmat_end + e) - f(params["means"], cam.viewmat_end - e)) / (
        2 * h
    )
    np.testing.assert_allclose(float(g_end[0, 3]), float(fd), rtol=1e-4)
    assert abs(float(g_end[0, 3])) > 1e-3


def test_pallas_compositor_takes_one_origin_per_pixel(gut):
    """The Pallas compositor (interpret mode on the CPU) reads a rolling shutter's per-pixel ray
    origins as the XLA one does (a central global camera has one origin per tile)."""
    import dataclasses

    from xprc.pipeline import RenderConfig

    xla = RenderConfig(tile_size=8, chunk=4, group=2, max_entries=4096, compositor="xla")
    cam = camera("bottom_to_top")
    outs = [
        render(gut, scene(), cam, jnp.asarray(BG, jnp.float32), "RGB", config=c)
        for c in (xla, dataclasses.replace(xla, compositor="pallas"))
    ]
    assert float(outs[0].alpha.max()) > 0.5
    for a, b in ((outs[0].image, outs[1].image), (outs[0].alpha, outs[1].alpha)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=0)


def test_specs_without_a_rolling_shutter_footprint_refuse_such_cameras():
    """3DGS projects at the start pose only (no camera.shutter_box): a rolling-shutter camera
    would render as a global one, so it is refused, not drawn."""
    from xprc.errors import CameraModelError

    gs = load(ROOT / "specs" / "3dgs.xpr")
    assert gs.ROLLING_SHUTTER is False
    with pytest.raises(CameraModelError) as info:
        render(gs, scene(), camera("left_to_right"), jnp.asarray(BG, jnp.float32), "RGB")
    assert str(info.value) == (
        "3dgs.xpr: error: Gaussian3D does not render rolling-shutter cameras "
        "(shutter='left_to_right'): its projection never calls camera.shutter_box, so its "
        "footprint holds the start pose's pixels only; render it with a global-shutter camera, "
        "or project with camera.project_world and bound the footprint with camera.shutter_box "
        "(docs/language.md, 'Rolling shutter')"
    )
