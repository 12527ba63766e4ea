"""Cameras: a frozen JAX pytree carrying pose, intrinsics and a lens model (docs/design.md).

Conventions (REFERENCE.md section 1): `viewmat` is world->camera, `p_cam = R p_world + t`, OpenCV
axes (+x right, +y down, +z forward); `K` is in pixels; pixel (row i, col j) has its centre at
`(j + 0.5, i + 0.5)`. Lens models (REFERENCE.md section 5):

- `pinhole`: `u = fx x/z + cx`, `v = fy y/z + cy`.
- `opencv`: pinhole with radial (k1..k6, rational), tangential (p1, p2) and thin-prism (s1..s4)
  distortion of the normalised coordinates;
  `dist = [k1, k2, k3, k4, k5, k6, p1, p2, s1, s2, s3, s4]` (not OpenCV's own ordering).
- `fisheye`: OpenCV equidistant fisheye, `theta_d = theta (1 + k1 theta^2 + ... + k4 theta^8)`,
  `dist[0:4] = k1..k4`.
- `ortho`: `u = fx x + cx`, `v = fy y + cy` (fx in pixels per world unit).

Every per-point method is elementwise over broadcastable arguments and computes in the dtype of
its arguments (camera arrays are cast to it), so a float64 camera renders float32 points and back.
Methods act on one (unbatched) camera; use `jax.vmap` over a `Camera.stack` for a batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xprc.errors import XprError
from xprc.runtime import EXACT

__all__ = ["Camera", "CameraError", "MODELS", "look_at"]

MODELS = ("pinhole", "opencv", "fisheye", "ortho")
NUM_DIST = 12

# Fixed iteration counts keep every inverse jit-friendly (no data-dependent loops).
_NEWTON_STEPS = 20
_LIMIT_GRID = 512  # grid over [0, pi] bracketing the first maximum of theta_d(theta)
_LIMIT_BISECT = 40


class CameraError(XprError):
    """A malformed camera (bad shape, unknown model, mismatched batch)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, filename="<camera>")


_ROTATION_TOL = 1e-3  # |R R^T - I| and |det R - 1|: float32 poses are good to ~1e-6


def _concrete(x) -> np.ndarray | None:
    """x as float64 NumPy when its values are known; None for a tracer (inside jit / vmap)."""
    if isinstance(x, jax.core.Tracer):
        return None
    return np.asarray(x, dtype=np.float64)


def _check_values(viewmat, K, dist) -> None:
    """Positive finite focal lengths, finite coefficients and a proper rotation (R R^T = I,
    det R = +1: a zero or scaled view matrix is not a camera). Only concrete values are
    checked: a Camera built inside jit or vmap from traced arrays is taken as it comes."""
    k, v, d = _concrete(K), _concrete(viewmat), _concrete(dist)
    if k is not None:
        if not np.isfinite(k).all():
            raise CameraError("K must be finite")
        fx, fy = k[..., 0, 0], k[..., 1, 1]
        bad = ~((fx > 0) & (fy > 0))
        if bad.any():
            i = np.unravel_index(np.argmax(bad), bad.shape)
            raise CameraError(f"focal lengths must be positive, got fx={fx[i]}, fy={fy[i]}")
    if d is not None and not np.isfinite(d).all():
        raise CameraError("dist must be finite")
    if v is None:
        return
    if not np.isfinite(v).all():
        raise CameraError("viewmat must be finite")
    R = v[..., :3, :3]
    ortho = np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max(axis=(-2, -1), initial=0.0)
    det = np.linalg.det(R) if R.size else np.zeros(R.shape[:-2])
    error = np.maximum(ortho, np.abs(det - 1.0))
    if (error > _ROTATION_TOL).any():
        raise CameraError(
            "viewmat[:3, :3] must be a rotation (R R^T = I, det R = 1); "
            f"off by {float(error.max()):.3g}"
        )


def _as_array(value, dtype=None):
    """numpy/jax/list -> jax array, keeping a floating dtype (float32 stays float32)."""
    arr = jnp.asarray(value) if dtype is None else jnp.asarray(value, dtype=dtype)
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(jnp.result_type(float))
    return arr


@dataclasses.dataclass(frozen=True, eq=False)
class Camera:
    """A camera: pose + intrinsics + lens model.

    Array leaves (a leading batch axis after `Camera.stack`):
      viewmat: [4, 4] world->camera, OpenCV axes.
      K:       [3, 3] intrinsics in pixels.
      dist:    [12] lens coefficients (see module docstring); zeros by default, same dtype as K.
    Static fields (hashable, part of the jit cache key): width, height, model, near, far.
    """

    viewmat: jax.Array
    K: jax.Array
    width: int
    height: int
    model: str = "pinhole"
    dist: jax.Array | None = None
    near: float = 0.01
    far: float = 1e10

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise CameraError(f"unknown camera model {self.model!r}; expected one of {MODELS}")
        viewmat = _as_array(self.viewmat)
        K = _as_array(self.K)
        if self.dist is None:
            dist = jnp.zeros(K.shape[:-2] + (NUM_DIST,), K.dtype)
        else:
            # Lists and ints take K's dtype; float arrays keep their own.
            given = getattr(self.dist, "dtype", None)
            given_float = given is not None and jnp.issubdtype(given, jnp.floating)
            dist = _as_array(self.dist, None if given_float else K.dtype)
            if dist.ndim == 0 or dist.shape[-1] > NUM_DIST:
                raise CameraError(f"dist must have at most {NUM_DIST} entries, got {dist.shape}")
            # Shorter coefficient vectors (e.g. fisheye k1..k4) are zero-padded.
            pad = [(0, 0)] * (dist.ndim - 1) + [(0, NUM_DIST - dist.shape[-1])]
            dist = jnp.pad(dist, pad)
        if viewmat.shape[-2:] != (4, 4):
            raise CameraError(f"viewmat must be [..., 4, 4], got {viewmat.shape}")
        if K.shape[-2:] != (3, 3):
            raise CameraError(f"K must be [..., 3, 3], got {K.shape}")
        batch = viewmat.shape[:-2]
        if K.shape[:-2] != batch or dist.shape[:-1] != batch:
            raise CameraError(
                f"batch shapes differ: viewmat {viewmat.shape}, K {K.shape}, dist {dist.shape}"
            )
        width, height = int(self.width), int(self.height)
        if width <= 0 or height <= 0 or width != self.width or height != self.height:
            raise CameraError(
                f"width and height must be positive ints, got {self.width}x{self.height}"
            )
        near, far = float(self.near), float(self.far)
        if not 0.0 <= near < far:
            raise CameraError(f"need 0 <= near < far, got near={near}, far={far}")
        _check_values(viewmat, K, dist)
        for name, value in (
            ("viewmat", viewmat),
            ("K", K),
            ("dist", dist),
            ("width", width),
            ("height", height),
            ("near", near),
            ("far", far),
        ):
            object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ pytree / batching

    @classmethod
    def stack(cls, cameras: Sequence[Camera]) -> Camera:
        """Batch cameras with equal static fields: every array leaf gets a leading axis."""
        cameras = list(cameras)
        if not cameras:
            raise CameraError("Camera.stack needs at least one camera")
        first = cameras[0]
        for i, cam in enumerate(cameras[1:], start=1):
            if cam._static() != first._static():
                raise CameraError(
                    f"Camera.stack: camera {i} has static fields {cam._static_dict()}, "
                    f"camera 0 has {first._static_dict()}; all must be equal"
                )
            for name in ("viewmat", "K", "dist"):
                a, b = getattr(first, name), getattr(cam, name)
                if a.shape != b.shape or a.dtype != b.dtype:
                    raise CameraError(
                        f"Camera.stack: camera {i} has {name} {b.dtype}{list(b.shape)}, "
                        f"camera 0 has {a.dtype}{list(a.shape)}"
                    )
        return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *cameras)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.viewmat.shape[:-2])

    def _static(self) -> tuple:
        return (self.width, self.height, self.model, self.near, self.far)

    def _static_dict(self) -> dict:
        return dict(zip(("width", "height", "model", "near", "far"), self._static(), strict=True))

    def __getitem__(self, index) -> Camera:
        """Index the batch axes of a stacked camera: `cams[i]` is one camera."""
        if not self.batch_shape:
            raise CameraError("cannot index an unbatched camera")
        return jax.tree_util.tree_map(lambda a: a[index], self)

    def replace(self, **changes) -> Camera:
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ pose and intrinsics

    @property
    def R(self) -> jax.Array:  # [..., 3, 3]
        return self.viewmat[..., :3, :3]

    @property
    def t(self) -> jax.Array:  # [..., 3]
        return self.viewmat[..., :3, 3]

    @property
    def position(self) -> jax.Array:  # [..., 3] camera centre in world, -R^T t
        return -jnp.einsum("...ji,...j->...i", self.R, self.t, precision=EXACT)

    @property
    def central(self) -> bool:
        """Every ray starts at the camera centre (all models but `ortho`)."""
        return self.model != "ortho"

    @property
    def fx(self) -> jax.Array:
        return self.K[..., 0, 0]

    @property
    def fy(self) -> jax.Array:
        return self.K[..., 1, 1]

    @property
    def cx(self) -> jax.Array:
        return self.K[..., 0, 2]

    @property
    def cy(self) -> jax.Array:
        return self.K[..., 1, 2]

    def world_to_camera(self, p):
        """[..., 3] world points -> [..., 3] camera points, `R p + t`, in p's dtype."""
        p = jnp.asarray(p)
        dt = self._dtype(p)
        R, t = self.R.astype(dt), self.t.astype(dt)
        out = jnp.einsum("ij,...j->...i", R, p.astype(dt), precision=EXACT)
        return out + t.reshape((1,) * (out.ndim - 1) + (3,))

    # ------------------------------------------------------------------ projection

    def project(self, x, y, z):
        """Camera-space point -> (u, v) pixels through the full lens model (elementwise).

        Finite everywhere (z == 0 is guarded) but meaningful only where `project_valid`.
        """
        x, y, z, dt = self._cast(x, y, z)
        fx, fy, cx, cy = (a.astype(dt) for a in (self.fx, self.fy, self.cx, self.cy))
        if self.model == "ortho":
            return fx * x + cx, fy * y + cy
        if self.model == "fisheye":
            s = _fisheye_scale(x, y, z, self.dist.astype(dt))
            return fx * (x * s) + cx, fy * (y * s) + cy
        zs = jnp.where(z == 0, 1.0, z)
        a, b = x / zs, y / zs
        if self.model == "opencv":
            a, b = _opencv_distort(a, b, self.dist.astype(dt))
        return fx * a + cx, fy * b + cy

    def project_valid(self, x, y, z):
        """Bool: the point is in the model's valid domain (elementwise).

        All models need `near < z < far` (camera-space depth, the sort key; for `ortho` this
        means in front of the image plane). `opencv` also needs the radial factor inside
        (0.8, 1.2); `fisheye` needs `theta` below the first maximum of `theta_d(theta)`
        (where the lens map folds back). A fisheye therefore covers at most 180 degrees.
        """
        x, y, z, dt = self._cast(x, y, z)
        valid = (z > self.near) & (z < self.far)
        if self.model == "opencv":
            zs = jnp.where(z == 0, 1.0, z)
            a, b = x / zs, y / zs
            radial = _opencv_radial(a * a + b * b, self.dist.astype(dt))
            valid = valid & (radial > 0.8) & (radial < 1.2)
        elif self.model == "fisheye":
            theta = jnp.arctan2(jnp.sqrt(x * x + y * y), z)
            valid = valid & (theta < self.fisheye_theta_max().astype(dt))
        return valid

    def jacobian(self, x, y, z):
        """d(u, v)/d(x, y, z) at camera-space points: (j00, j01, j02, j10, j11, j12)."""
        x, y, z, dt = self._cast(x, y, z)
        fx, fy = self.fx.astype(dt), self.fy.astype(dt)
        zero = jnp.zeros_like(x)
        if self.model == "ortho":
            return fx + zero, zero, zero, zero, fy + zero, zero
        if self.model == "fisheye":
            # pixel = f (x, y) s(rho^2, z) + c; the chain rule needs only ds/drho^2 and ds/dz.
            dist = self.dist.astype(dt)

            def scale(rho2, z):
                return _fisheye_scale_rho2(rho2, z, dist)

            rho2 = x * x + y * y
            s, s_r = jax.jvp(scale, (rho2, z), (jnp.ones_like(x), zero))
            _, s_z = jax.jvp(scale, (rho2, z), (zero, jnp.ones_like(x)))
            return (
                fx * (s + 2.0 * x * x * s_r),
                fx * (2.0 * x * y * s_r),
                fx * (x * s_z),
                fy * (2.0 * x * y * s_r),
                fy * (s + 2.0 * y * y * s_r),
                fy * (y * s_z),
            )
        iz = 1.0 / jnp.where(z == 0, 1.0, z)
        if self.model == "pinhole":
            return fx * iz, zero, -fx * x * iz * iz, zero, fy * iz, -fy * y * iz * iz
        # opencv: d pixel / d(a, b) (analytic distortion Jacobian) times d(a, b) / d(x, y, z).
        a, b = x * iz, y * iz
        d00, d01, d10, d11 = _opencv_distort_jacobian(a, b, self.dist.astype(dt))
        return (
            fx * d00 * iz,
            fx * d01 * iz,
            -fx * (d00 * a + d01 * b) * iz,
            fy * d10 * iz,
            fy * d11 * iz,
            -fy * (d10 * a + d11 * b) * iz,
        )

    def fisheye_theta_max(self) -> jax.Array:
        """First maximum of theta_d(theta) on (0, pi] (pi if monotonic); 0-d, no gradient.

        The derivative `1 + 3 k1 t^2 + 5 k2 t^4 + 7 k3 t^6 + 9 k4 t^8` is sampled on a fixed
        grid to bracket its first sign change, then bisected a fixed number of times.
        """
        k = lax.stop_gradient(self.dist[..., :4])
        grid = jnp.linspace(0.0, np.pi, _LIMIT_GRID + 1, dtype=k.dtype)
        d = _fisheye_dtheta(grid, k)
        nonpos = d <= 0
        first = jnp.argmax(nonpos)  # index of first non-positive derivative (0 if none)
        has_root = jnp.any(nonpos)
        hi0 = grid[first]
        lo0 = grid[jnp.maximum(first - 1, 0)]

        def bisect(_, lohi):
            lo, hi = lohi
            mid = 0.5 * (lo + hi)
            pos = _fisheye_dtheta(mid, k) > 0
            return jnp.where(pos, mid, lo), jnp.where(pos, hi, mid)

        lo, _ = lax.fori_loop(0, _LIMIT_BISECT, bisect, (lo0, hi0))
        return jnp.where(has_root, lo, jnp.asarray(np.pi, k.dtype))

    # ------------------------------------------------------------------ rays

    def pixel_rays(self, px, py):
        """Pixel coordinates -> world rays (origin [..., 3], unit direction [..., 3]).

        `px, py` broadcast; pixel (row i, col j) centre is (j + 0.5, i + 0.5). Distortion is
        inverted with a fixed number of (safeguarded) Newton steps; the result carries exact
        first-order gradients through one final differentiable Newton step.
        `ortho` rays start on the image plane (camera z = 0) and point along camera +z.
        """
        px, py = jnp.broadcast_arrays(jnp.asarray(px), jnp.asarray(py))
        dt = self._dtype(px, py)
        px, py = px.astype(dt), py.astype(dt)
        fx, fy, cx, cy = (a.astype(dt) for a in (self.fx, self.fy, self.cx, self.cy))
        a, b = (px - cx) / fx, (py - cy) / fy
        zero, one = jnp.zeros_like(a), jnp.ones_like(a)
        if self.model == "ortho":
            o_cam = jnp.stack([a, b, zero], axis=-1)
            d_cam = jnp.stack([zero, zero, one], axis=-1)
        else:
            if self.model == "pinhole":
                d_cam = jnp.stack([a, b, one], axis=-1)
            elif self.model == "opencv":
                ua, ub = _opencv_undistort(a, b, self.dist.astype(dt))
                d_cam = jnp.stack([ua, ub, one], axis=-1)
            else:
                d_cam = _fisheye_unproject(a, b, self.dist.astype(dt), self.fisheye_theta_max())
            d_cam = d_cam * lax.rsqrt(jnp.sum(d_cam * d_cam, axis=-1, keepdims=True))
            o_cam = jnp.stack([zero, zero, zero], axis=-1)
        R, t = self.R.astype(dt), self.t.astype(dt)
        lead = (1,) * (o_cam.ndim - 1)
        origin = jnp.einsum("ji,...j->...i", R, o_cam - t.reshape(lead + (3,)), precision=EXACT)
        direction = jnp.einsum("ji,...j->...i", R, d_cam, precision=EXACT)
        return origin, direction

    # ------------------------------------------------------------------ helpers

    def _dtype(self, *xs):
        dt = jnp.result_type(*xs)
        return dt if jnp.issubdtype(dt, jnp.floating) else self.K.dtype

    def _cast(self, x, y, z):
        x, y, z = jnp.broadcast_arrays(*(jnp.asarray(a) for a in (x, y, z)))
        dt = self._dtype(x, y, z)
        return x.astype(dt), y.astype(dt), z.astype(dt), dt


def _flatten_with_keys(cam: Camera):
    children = tuple(
        (jax.tree_util.GetAttrKey(n), getattr(cam, n)) for n in ("viewmat", "K", "dist")
    )
    return children, cam._static()


def _unflatten(aux, children) -> Camera:
    # Bypass __post_init__: JAX rebuilds pytrees with tracers, None or sentinel leaves.
    cam = object.__new__(Camera)
    for name, value in zip(("viewmat", "K", "dist"), children, strict=True):
        object.__setattr__(cam, name, value)
    for name, value in zip(("width", "height", "model", "near", "far"), aux, strict=True):
        object.__setattr__(cam, name, value)
    return cam


jax.tree_util.register_pytree_with_keys(Camera, _flatten_with_keys, _unflatten)


# ---------------------------------------------------------------------- lens math (elementwise)


def _opencv_radial(r2, dist):
    k1, k2, k3, k4, k5, k6 = (dist[i] for i in range(6))
    num = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
    den = 1.0 + r2 * (k4 + r2 * (k5 + r2 * k6))
    return num / den


def _opencv_distort(a, b, dist):
    """Normalised (x/z, y/z) -> distorted normalised coordinates (REFERENCE.md section 5)."""
    p1, p2, s1, s2, s3, s4 = (dist[i] for i in range(6, 12))
    r2 = a * a + b * b
    radial = _opencv_radial(r2, dist)
    ad = radial * a + 2.0 * p1 * a * b + p2 * (r2 + 2.0 * a * a) + r2 * (s1 + s2 * r2)
    bd = radial * b + p1 * (r2 + 2.0 * b * b) + 2.0 * p2 * a * b + r2 * (s3 + s4 * r2)
    return ad, bd


def _opencv_distort_jacobian(a, b, dist):
    """d(ad, bd)/d(a, b) of `_opencv_distort`, analytic (small graphs inside Newton loops)."""
    k1, k2, k3, k4, k5, k6, p1, p2, s1, s2, s3, s4 = (dist[i] for i in range(NUM_DIST))
    r2 = a * a + b * b
    num = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
    den = 1.0 + r2 * (k4 + r2 * (k5 + r2 * k6))
    dnum = k1 + r2 * (2.0 * k2 + 3.0 * k3 * r2)
    dden = k4 + r2 * (2.0 * k5 + 3.0 * k6 * r2)
    radial = num / den
    dradial = (dnum * den - num * dden) / (den * den)  # d radial / d r2
    ga = 2.0 * (dradial * a)  # d radial / d a
    gb = 2.0 * (dradial * b)
    prism_u = 2.0 * (s1 + 2.0 * s2 * r2)  # d(s1 r2 + s2 r2^2)/d r2, times 2
    prism_v = 2.0 * (s3 + 2.0 * s4 * r2)
    j00 = radial + a * ga + 2.0 * p1 * b + 6.0 * p2 * a + prism_u * a
    j01 = a * gb + 2.0 * p1 * a + 2.0 * p2 * b + prism_u * b
    j10 = b * ga + 2.0 * p1 * a + 2.0 * p2 * b + prism_v * a
    j11 = radial + b * gb + 6.0 * p1 * b + 2.0 * p2 * a + prism_v * b
    return j00, j01, j10, j11


def _opencv_undistort(ad, bd, dist):
    """Invert `_opencv_distort` with fixed Newton steps from the distorted point itself."""

    def step(a, b, ad, bd, dist):
        fa, fb = _opencv_distort(a, b, dist)
        j00, j01, j10, j11 = _opencv_distort_jacobian(a, b, dist)
        ra, rb = fa - ad, fb - bd
        det = j00 * j11 - j01 * j10
        ok = jnp.abs(det) > 1e-12
        dets = jnp.where(ok, det, 1.0)
        da = jnp.where(ok, (j11 * ra - j01 * rb) / dets, 0.0)
        db = jnp.where(ok, (j00 * rb - j10 * ra) / dets, 0.0)
        return a - da, b - db

    # The loop sees no differentiated value (else JAX carries tangents through every
    # iteration); exact first-order gradients come from the final step alone.
    sg = lax.stop_gradient
    fixed = (sg(ad), sg(bd), sg(dist))

    def body(_, ab):
        a, b = step(*ab, *fixed)
        good = jnp.isfinite(a) & jnp.isfinite(b)
        return jnp.where(good, a, ab[0]), jnp.where(good, b, ab[1])

    a, b = lax.fori_loop(0, _NEWTON_STEPS, body, fixed[:2])
    # One differentiable step at the converged point: implicit-function-theorem gradients.
    return step(sg(a), sg(b), ad, bd, dist)


def _fisheye_poly(t2, k):
    return 1.0 + t2 * (k[..., 0] + t2 * (k[..., 1] + t2 * (k[..., 2] + t2 * k[..., 3])))


def _fisheye_dtheta(theta, k):
    t2 = theta * theta
    return 1.0 + t2 * (
        3 * k[..., 0] + t2 * (5 * k[..., 1] + t2 * (7 * k[..., 2] + t2 * 9 * k[..., 3]))
    )


def _fisheye_scale(x, y, z, dist):
    """theta_d / rho with a series near the optical axis (no 0/0, finite gradients)."""
    return _fisheye_scale_rho2(x * x + y * y, z, dist)


def _fisheye_scale_rho2(rho2, z, dist):
    k = dist[:4]
    small = rho2 < 1e-4 * z * z  # |rho / z| < 1e-2 in front of the camera: series branch
    series_ok = small & (z > 0)
    rho = jnp.sqrt(jnp.where(series_ok | (rho2 == 0), 1.0, rho2))
    theta_full = jnp.arctan2(rho, z)
    zs = jnp.where(series_ok, z, 1.0)
    q = jnp.where(series_ok, rho2 / (zs * zs), 0.0)  # (rho / z)^2
    # atan(s)/s = 1 - s^2/3 + s^4/5 - s^6/7 (+ O(s^8) < 1e-17 for s < 1e-2)
    theta_over_rho_series = (1.0 + q * (-1.0 / 3 + q * (1.0 / 5 - q / 7))) / zs
    theta2_series = q * ((1.0 + q * (-1.0 / 3 + q * (1.0 / 5 - q / 7))) ** 2)
    theta_over_rho = jnp.where(series_ok, theta_over_rho_series, theta_full / rho)
    theta2 = jnp.where(series_ok, theta2_series, theta_full * theta_full)
    # rho == 0 behind the camera: theta = pi, direction undefined; any finite value will do.
    return theta_over_rho * _fisheye_poly(theta2, k)


def _fisheye_unproject(a, b, dist, theta_max):
    """Distorted normalised (a, b) -> camera-space direction (not normalised) [..., 3]."""
    k = dist[:4]
    td2 = a * a + b * b
    nz = td2 > 0
    td = jnp.sqrt(jnp.where(nz, td2, 1.0))
    td = jnp.where(nz, td, 0.0)
    theta_max = theta_max.astype(a.dtype)
    td_max = theta_max * _fisheye_poly(theta_max * theta_max, k)

    sk = lax.stop_gradient
    k_fixed, td_fixed = sk(k), sk(td)

    def f(theta):
        return theta * _fisheye_poly(theta * theta, k_fixed) - td_fixed

    # Safeguarded Newton on [0, theta_max] where theta_d is increasing: keep a bracket and
    # fall back to bisection when a Newton step leaves it.
    def body(_, state):
        theta, lo, hi = state
        fv = f(theta)
        lo = jnp.where(fv < 0, theta, lo)
        hi = jnp.where(fv < 0, hi, theta)
        d = _fisheye_dtheta(theta, k_fixed)
        newton = theta - fv / jnp.where(d > 0, d, 1.0)
        inside = (d > 0) & (newton >= lo) & (newton <= hi)
        return jnp.where(inside, newton, 0.5 * (lo + hi)), lo, hi

    tdc = jnp.minimum(td_fixed, sk(td_max))
    theta0 = jnp.minimum(tdc, sk(theta_max))
    lo0 = jnp.zeros_like(theta0)
    hi0 = jnp.broadcast_to(sk(theta_max), theta0.shape)
    theta, _, _ = lax.fori_loop(0, _NEWTON_STEPS, body, (theta0, lo0, hi0))
    theta = sk(theta)
    # Differentiable final Newton step (implicit-function gradients w.r.t. pixel and k).
    # Pixels beyond the lens limit (no solution) stay finite: bounded step, clipped angle.
    slope = jnp.maximum(_fisheye_dtheta(theta, k), 1e-6)
    theta = theta - (theta * _fisheye_poly(theta * theta, k) - td) / slope
    theta = jnp.clip(theta, 0.0, np.pi)
    # sin(theta)/theta_d -> 1 on the axis.
    sin_over_td = jnp.where(nz, jnp.sin(theta) / jnp.where(nz, td, 1.0), 1.0)
    return jnp.stack([a * sin_over_td, b * sin_over_td, jnp.cos(theta)], axis=-1)


# ---------------------------------------------------------------------- construction helpers


def look_at(
    eye,
    target,
    up,
    width: int,
    height: int,
    fov_deg: float = 60.0,
    *,
    model: str = "pinhole",
    dist=None,
    near: float = 0.01,
    far: float = 1e10,
    ortho_width: float | None = None,
    dtype=np.float64,
) -> Camera:
    """A camera at `eye` looking at `target`; `up` is the world up (image -y).

    `fov_deg` is the horizontal field of view: `fx = fy = (W/2) / tan(fov/2)` for pinhole and
    opencv, `(W/2) / (fov/2 in radians)` for fisheye (so fov_deg=180 puts theta = 90 deg at the
    left/right image edges). `ortho` shows `ortho_width` world units across (default: the width
    the perspective camera would see at the target's distance). Principal point at the centre.
    """
    eye, target, up = (np.asarray(v, dtype=np.float64) for v in (eye, target, up))
    fwd = target - eye
    dist_to_target = float(np.linalg.norm(fwd))
    fwd = fwd / dist_to_target
    right = np.cross(fwd, up)
    n = np.linalg.norm(right)
    if n < 1e-12:
        raise CameraError("look_at: `up` is parallel to the viewing direction")
    right = right / n
    down = np.cross(fwd, right)
    R = np.stack([right, down, fwd])
    viewmat = np.eye(4)
    viewmat[:3, :3] = R
    viewmat[:3, 3] = -R @ eye
    half = np.deg2rad(fov_deg) / 2
    if model == "fisheye":
        f = (width / 2) / half
    elif model == "ortho":
        extent = ortho_width if ortho_width is not None else 2 * dist_to_target * np.tan(half)
        f = width / extent
    else:
        f = (width / 2) / np.tan(half)
    K = np.array([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]])
    if dist is not None:
        dist = np.asarray(dist, dtype=dtype)
    return Camera(
        viewmat=viewmat.astype(dtype),
        K=K.astype(dtype),
        width=width,
        height=height,
        model=model,
        dist=dist,
        near=near,
        far=far,
    )
