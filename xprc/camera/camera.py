"""Cameras: a frozen JAX pytree carrying pose, intrinsics and a lens model (docs/design.md).

Conventions (gsplat's): `viewmat` is world->camera, `p_cam = R p_world + t`, OpenCV
axes (+x right, +y down, +z forward); `K` is in pixels; pixel (row i, col j) has its centre at
`(j + 0.5, i + 0.5)`. Lens models, one module each, looked up by name in `models.LENSES`:
`pinhole`, `opencv` (OpenCV's radial, tangential and thin-prism distortion), `fisheye` (OpenCV's
equidistant model) and `ortho`. A rolling-shutter camera (`shutter`, `viewmat_end`) exposes each
row or column at its own pose between `viewmat` and `viewmat_end` (shutter.py).

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

from ..conventions import NUM_DIST
from ..errors import XprError
from ..runtime import EXACT
from . import fisheye
from . import shutter as rolling
from .models import LENSES, MODELS
from .shutter import SHUTTERS

__all__ = ["Camera", "CameraError", "check_model", "look_at"]


class CameraError(XprError):
    """A malformed camera (bad shape, unknown model, mismatched batch)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, filename="<camera>")


def check_model(model: str) -> None:
    if model not in MODELS:
        raise CameraError(f"unknown camera model {model!r}; expected one of {MODELS}")


_FORM_TOL = 1e-6  # K's skew (relative to its focal length), K's and viewmat's last rows
_ROTATION_TOL = 1e-3  # |R R^T - I| and |det R - 1|: float32 poses are good to ~1e-6


def _concrete(x) -> np.ndarray | None:
    """x as float64 NumPy when its values are known; None for a tracer (inside jit / vmap)."""
    if x is None or isinstance(x, jax.core.Tracer):
        return None
    return np.asarray(x, dtype=np.float64)


def _check_values(viewmat, K, dist, name: str = "viewmat") -> None:
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
        _check_K_form(k)
    if d is not None and not np.isfinite(d).all():
        raise CameraError("dist must be finite")
    if v is None:
        return
    if not np.isfinite(v).all():
        raise CameraError(f"{name} must be finite")
    R = v[..., :3, :3]
    ortho = np.abs(R @ np.swapaxes(R, -1, -2) - np.eye(3)).max(axis=(-2, -1), initial=0.0)
    det = np.linalg.det(R) if R.size else np.zeros(R.shape[:-2])
    error = np.maximum(ortho, np.abs(det - 1.0))
    if (error > _ROTATION_TOL).any():
        raise CameraError(
            f"{name}[:3, :3] must be a rotation (R R^T = I, det R = 1); "
            f"off by {float(error.max()):.3g}"
        )
    bottom = np.abs(v[..., 3, :] - [0.0, 0.0, 0.0, 1.0]).max(initial=0.0)
    if bottom > _FORM_TOL:
        raise CameraError(f"{name}'s last row must be [0, 0, 0, 1]; off by {float(bottom):.3g}")


def _check_K_form(k: np.ndarray) -> None:
    """K is [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]: only those four entries are read, so a skew
    or a last row other than [0, 0, 1] (a K from a projection matrix, not divided by K[2, 2])
    rendered as if it were not there."""
    last = np.abs(k[..., 2, :] - [0.0, 0.0, 1.0]).max(initial=0.0)
    if last > _FORM_TOL:
        row = np.reshape(k[..., 2, :], (-1, 3))[0].tolist()
        raise CameraError(f"K's last row must be [0, 0, 1], got {row} (divide K by K[2, 2])")
    scale = np.maximum(np.abs(k[..., 0, 0]), np.abs(k[..., 1, 1]))
    off = np.maximum(np.abs(k[..., 0, 1]), np.abs(k[..., 1, 0])) / scale
    if (off > _FORM_TOL).any():
        i = np.unravel_index(np.argmax(off), off.shape)
        raise CameraError(
            f"K has a skew or shear (K[0, 1] = {k[..., 0, 1][i]}, K[1, 0] = {k[..., 1, 0][i]}): "
            "the camera models have none; only fx, fy, cx and cy are read"
        )


def _check_unused(model: str, dist) -> None:
    """A nonzero coefficient the model does not read is a mistake (the wrong model, or
    coefficients in the wrong slots), not something to ignore: refused (concrete values)."""
    d = _concrete(dist)
    used = LENSES[model].DIST_USED
    if d is None or used >= d.shape[-1]:
        return
    extra = np.flatnonzero(np.any(d.reshape(-1, d.shape[-1])[:, used:] != 0, axis=0)) + used
    if extra.size:
        reads = f"reads dist[0:{used}]" if used else "has no lens distortion"
        raise CameraError(
            f"camera model '{model}' {reads}, but dist[{', '.join(map(str, extra))}] "
            "is nonzero; choose the model those coefficients belong to (e.g. 'opencv') or "
            "zero them"
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
      viewmat_end: [4, 4] world->camera at the end of the exposure (rolling shutter), or None.
    Static fields (hashable, part of the jit cache key): width, height, model, near, far,
    shutter (`global`, or the rolling direction: `top_to_bottom`, `bottom_to_top`,
    `left_to_right`, `right_to_left`). A rolling shutter needs `viewmat_end`; a global shutter
    takes one only if it equals `viewmat` (checked when the values are concrete): the whole
    image is then exposed at that one pose.
    """

    viewmat: jax.Array
    K: jax.Array
    width: int
    height: int
    model: str = "pinhole"
    dist: jax.Array | None = None
    near: float = 0.01
    far: float = 1e10
    viewmat_end: jax.Array | None = None
    shutter: str = "global"

    def __post_init__(self) -> None:
        check_model(self.model)
        if self.shutter not in SHUTTERS:
            raise CameraError(f"unknown shutter {self.shutter!r}; expected one of {SHUTTERS}")
        viewmat = _as_array(self.viewmat)
        viewmat_end = self._check_end(viewmat)
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
        _check_unused(self.model, dist)
        for name, value in (
            ("viewmat", viewmat),
            ("K", K),
            ("dist", dist),
            ("width", width),
            ("height", height),
            ("near", near),
            ("far", far),
            ("viewmat_end", viewmat_end),
        ):
            object.__setattr__(self, name, value)

    def _check_end(self, viewmat):
        """viewmat_end as an array (or None), checked against the shutter and viewmat."""
        if self.viewmat_end is None:
            if self.shutter != "global":
                raise CameraError(
                    f"shutter {self.shutter!r} needs viewmat_end, the world->camera pose at the "
                    "end of the exposure"
                )
            return None
        end = _as_array(self.viewmat_end)
        if end.shape != viewmat.shape:
            raise CameraError(
                f"viewmat_end must have viewmat's shape {viewmat.shape}, got {end.shape}"
            )
        _check_values(end, None, None, "viewmat_end")
        if self.shutter == "global":
            a, b = _concrete(viewmat), _concrete(end)
            if a is not None and b is not None and not np.array_equal(a, b):
                raise CameraError(
                    "viewmat_end differs from viewmat but the shutter is 'global' (one pose for "
                    "the whole image): choose a rolling shutter, e.g. shutter='top_to_bottom', "
                    "or drop viewmat_end"
                )
        return end

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
            if (cam.viewmat_end is None) != (first.viewmat_end is None):
                has = {True: "has no viewmat_end", False: "has a viewmat_end"}
                raise CameraError(
                    f"Camera.stack: camera {i} {has[cam.viewmat_end is None]}, camera 0 "
                    f"{has[first.viewmat_end is None]}; all or none must have one"
                )
            for name in _ARRAYS:
                a, b = getattr(first, name), getattr(cam, name)
                if a is None:
                    continue
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
        return tuple(getattr(self, n) for n in _STATIC)

    def _static_dict(self) -> dict:
        return dict(zip(_STATIC, self._static(), strict=True))

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
        return self._lens.CENTRAL

    @property
    def one_origin(self) -> bool:
        """Every pixel's ray starts at one point: a central model and a global shutter (a
        rolling shutter moves the centre from row to row)."""
        return self.central and self.shutter == "global"

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

    def world_to_camera_shutter(self, x, y, z):
        """World point -> camera-space point (x, y, z) at the pose of the moment the camera
        sees it (elementwise). A global shutter: `world_to_camera`, nothing more. A rolling
        shutter: the fixed-point iteration of shutter.py (start pose, then the pose of the row
        the point projects to, `shutter.ITERATIONS` projections)."""
        x, y, z, _dt = self._cast(x, y, z)
        p = jnp.stack([x, y, z], axis=-1)
        q = (
            self.world_to_camera(p)
            if self.shutter == "global"
            else rolling.world_to_camera(self, p)
        )
        return q[..., 0], q[..., 1], q[..., 2]

    def shutter_box(self, x, y, z, r):
        """A box (xmin, ymin, xmax, ymax) in pixels holding every pixel whose ray, at that
        pixel's exposure time, meets the world ball of centre (x, y, z) and radius r
        (elementwise): `shutter.sweep_box`. A global shutter adds nothing to the box at
        `viewmat`'s pose: the empty box (+inf, +inf, -inf, -inf), no work."""
        x, y, z, _dt = self._cast(x, y, z)
        c = jnp.stack([x, y, z], axis=-1)
        if self.shutter == "global":
            return rolling.empty_box(c)
        return rolling.sweep_box(self, c, jnp.broadcast_to(jnp.asarray(r, c.dtype), x.shape))

    # ------------------------------------------------------------------ projection

    def project(self, x, y, z):
        """Camera-space point -> (u, v) pixels through the full lens model (elementwise).

        Finite everywhere (z == 0 is guarded) but meaningful only where `project_valid`.
        """
        x, y, z, dt = self._cast(x, y, z)
        fx, fy, cx, cy = (a.astype(dt) for a in (self.fx, self.fy, self.cx, self.cy))
        return self._lens.project(x, y, z, fx, fy, cx, cy, self.dist)

    def project_valid(self, x, y, z):
        """Bool: the point is in the model's valid domain (elementwise).

        All models need `near < z < far` (camera-space depth, the sort key; for `ortho` this
        means in front of the image plane). `opencv` also needs the radial factor inside
        (0.8, 1.2); `fisheye` needs `theta` below the first maximum of `theta_d(theta)`
        (where the lens map folds back). A fisheye therefore covers at most 180 degrees.
        """
        x, y, z, dt = self._cast(x, y, z)
        valid = (z > self.near) & (z < self.far)
        domain = self._lens.domain(x, y, z, self.dist)
        return valid if domain is None else valid & domain

    def pixel_valid(self, px, py):
        """Bool: the ray through pixel (px, py) is in the model's valid domain (elementwise;
        no gradient). `fisheye`: inside the image circle, `theta_d <= theta_d(theta_max)`
        (beyond it no angle reaches the pixel: `pixel_rays` gives the ray at theta_max);
        `opencv`: the undistorted point's radial factor is inside (0.8, 1.2) and distorting it
        gives back the pixel (undistortion converged). Everywhere for `pinhole` and `ortho`."""
        inside = self._pixel_inside(px, py)
        if inside is None:
            return jnp.ones(np.broadcast_shapes(np.shape(px), np.shape(py)), bool)
        return inside

    def lens_outside(self, dtype=None) -> jax.Array:
        """int32: how many of the image's pixel centres `(j + 0.5, i + 0.5)` fail `pixel_valid`
        (computed in `dtype`, the camera's by default); a constant 0, without any work, for
        models valid everywhere. The renderer's `stats['lens_outside']`."""
        dt = self.K.dtype if dtype is None else dtype
        px = jnp.arange(self.width, dtype=dt)[None, :] + 0.5
        py = jnp.arange(self.height, dtype=dt)[:, None] + 0.5
        inside = self._pixel_inside(px, py)
        return jnp.int32(0) if inside is None else jnp.sum(~inside, dtype=jnp.int32)

    def _pixel_inside(self, px, py):
        """The lens module's `pixel_domain` at pixels (px, py): bool array, or None (everywhere)."""
        a, b, _ = self._normalised(px, py)
        return self._lens.pixel_domain(a, b, self.dist)

    def jacobian(self, x, y, z):
        """d(u, v)/d(x, y, z) at camera-space points: (j00, j01, j02, j10, j11, j12)."""
        x, y, z, dt = self._cast(x, y, z)
        fx, fy = self.fx.astype(dt), self.fy.astype(dt)
        return self._lens.jacobian(x, y, z, fx, fy, self.dist)

    def fisheye_theta_max(self) -> jax.Array:
        """First maximum of theta_d(theta) on (0, pi] (pi if monotonic); 0-d, no gradient.

        The derivative `1 + 3 k1 t^2 + 5 k2 t^4 + 7 k3 t^6 + 9 k4 t^8` is sampled on a fixed
        grid to bracket its first sign change, then bisected a fixed number of times.
        """
        return fisheye.theta_max(self.dist)

    # ------------------------------------------------------------------ rays

    def pixel_rays(self, px, py):
        """Pixel coordinates -> world rays (origin [..., 3], unit direction [..., 3]).

        `px, py` broadcast; pixel (row i, col j) centre is (j + 0.5, i + 0.5). Distortion is
        inverted with a fixed number of (safeguarded) Newton steps; the result carries exact
        first-order gradients through one final differentiable Newton step.
        `ortho` rays start on the image plane (camera z = 0) and point along camera +z.
        A rolling shutter takes each pixel's ray through the pose at its row's (column's) time.
        """
        px, py = jnp.broadcast_arrays(jnp.asarray(px), jnp.asarray(py))
        dt = self._dtype(px, py)
        px, py = px.astype(dt), py.astype(dt)
        fx, fy, cx, cy = (a.astype(dt) for a in (self.fx, self.fy, self.cx, self.cy))
        o_cam, d_cam = self._lens.rays((px - cx) / fx, (py - cy) / fy, self.dist)
        if self.shutter != "global":
            return rolling.pixel_rays(self, px, py, o_cam, d_cam)
        R, t = self.R.astype(dt), self.t.astype(dt)
        lead = (1,) * (o_cam.ndim - 1)
        origin = jnp.einsum("ji,...j->...i", R, o_cam - t.reshape(lead + (3,)), precision=EXACT)
        direction = jnp.einsum("ji,...j->...i", R, d_cam, precision=EXACT)
        return origin, direction

    # ------------------------------------------------------------------ helpers

    @property
    def _lens(self):
        return LENSES[self.model]

    def _dtype(self, *xs):
        dt = jnp.result_type(*xs)
        return dt if jnp.issubdtype(dt, jnp.floating) else self.K.dtype

    def _normalised(self, px, py):
        """Pixels -> normalised distorted coordinates ((px - cx) / fx, (py - cy) / fy) and the
        dtype, broadcast; without gradient (for the domain tests)."""
        if self.K.ndim != 2:  # (K[0, 2] would be a row of camera 0, dist[:4] four cameras)
            raise CameraError("pixel_valid / lens_outside take one camera, not a Camera.stack: "
                              "jax.vmap over the stack")  # fmt: skip
        px, py = jnp.broadcast_arrays(jnp.asarray(px), jnp.asarray(py))
        dt = self._dtype(px, py)
        K = jax.lax.stop_gradient(self.K).astype(dt)
        a = (px.astype(dt) - K[0, 2]) / K[0, 0]
        b = (py.astype(dt) - K[1, 2]) / K[1, 1]
        return a, b, dt

    def _cast(self, x, y, z):
        x, y, z = jnp.broadcast_arrays(*(jnp.asarray(a) for a in (x, y, z)))
        dt = self._dtype(x, y, z)
        return x.astype(dt), y.astype(dt), z.astype(dt), dt


_ARRAYS = ("viewmat", "K", "dist", "viewmat_end")  # viewmat_end None: no leaf
_STATIC = ("width", "height", "model", "near", "far", "shutter")


def _flatten_with_keys(cam: Camera):
    children = tuple((jax.tree_util.GetAttrKey(n), getattr(cam, n)) for n in _ARRAYS)
    return children, cam._static()


def _unflatten(aux, children) -> Camera:
    # Bypass __post_init__: JAX rebuilds pytrees with tracers, None or sentinel leaves.
    cam = object.__new__(Camera)
    for name, value in zip(_ARRAYS, children, strict=True):
        object.__setattr__(cam, name, value)
    for name, value in zip(_STATIC, aux, strict=True):
        object.__setattr__(cam, name, value)
    return cam


jax.tree_util.register_pytree_with_keys(Camera, _flatten_with_keys, _unflatten)


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
    if not dist_to_target > 0:
        raise CameraError("look_at: `eye` and `target` are the same point")
    check_model(model)
    widest = 360.0 if model == "fisheye" else 180.0  # (a pinhole's focal length is 0 at 180)
    if not 0 < fov_deg < widest and not (model == "ortho" and ortho_width is not None):
        raise CameraError(f"look_at: fov_deg={fov_deg!r} for a {model} camera: expected a "
                          f"field of view in (0, {widest:g}) degrees")  # fmt: skip
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
    f = LENSES[model].focal(width, np.deg2rad(fov_deg) / 2, dist_to_target, ortho_width)
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
