"""Camera refinement: per-view pose corrections and shared intrinsics / lens corrections.

pose_opt:       each training view v learns (w_v, u_v) [6]: the corrected world->camera matrix
                is exp([w_v]x) (rotation, axis-angle) and translation u_v applied in the camera
                frame, `viewmat' = [[exp(w), u], [0, 1]] @ viewmat`.
intrinsics_opt: all views share (a, b, c, d) [4] and dk [12]: fx' = fx exp(a), fy' = fy exp(b),
                cx' = cx + c, cy' = cy + d, dist' = dist + dk.
All corrections start at zero (the dataset's cameras) and are trained by their own Adam with
learning rates `pose_lr` (rotation in radians; translation x scene scale) and `intrinsics_lr`
(log-focals and lens coefficients; the principal point 100x, in pixels).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..runtime import EXACT
from .optim import adam_update, optimizer


def init_corrections(n_views: int, pose: bool, intrinsics: bool, num_dist: int) -> dict:
    out = {}
    if pose:
        out["pose"] = jnp.zeros((n_views, 6), jnp.float32)
    if intrinsics:
        out["intrinsics"] = jnp.zeros((4,), jnp.float32)
        out["dist"] = jnp.zeros((num_dist,), jnp.float32)
    return out


def rotation(w: jax.Array) -> jax.Array:
    """Rodrigues: axis-angle [3] -> rotation [3, 3] (smooth at 0)."""
    theta2 = jnp.sum(w * w)
    small = theta2 < 1e-8
    safe2 = jnp.where(small, 1.0, theta2)  # the "double where": no NaN gradient at 0
    theta = jnp.sqrt(safe2)
    a = jnp.where(small, 1.0 - theta2 / 6.0, jnp.sin(theta) / theta)
    b = jnp.where(small, 0.5 - theta2 / 24.0, (1.0 - jnp.cos(theta)) / safe2)
    zero = jnp.zeros((), w.dtype)
    k = jnp.stack(
        [
            jnp.stack([zero, -w[2], w[1]]),
            jnp.stack([w[2], zero, -w[0]]),
            jnp.stack([-w[1], w[0], zero]),
        ]
    )
    return jnp.eye(3, dtype=w.dtype) + a * k + b * jnp.matmul(k, k, precision=EXACT)


def pose_delta(p: jax.Array, pivot: jax.Array) -> jax.Array:
    """The camera-frame correction [4, 4] of pose correction p [6] = (w, u) about a pivot at
    depth `pivot` on the optical axis: x -> R(w) (x - q) + q + u with q = (0, 0, pivot)."""
    R = rotation(p[:3])
    q = jnp.zeros(3, p.dtype).at[2].set(pivot.astype(p.dtype))
    delta = jnp.eye(4, dtype=p.dtype).at[:3, :3].set(R)
    return delta.at[:3, 3].set(p[3:] + q - jnp.matmul(R, q, precision=EXACT))


def pose_matrices(pose, pivots) -> np.ndarray:
    """[V, 4, 4] float64 camera-frame corrections (left factors of the world->camera matrices)
    from learned `pose` [V, 6] and `pivots` [V] (TrainResult.cameras "pose" / "pose_pivot")."""
    pose = np.asarray(pose, np.float64)
    piv = np.asarray(pivots, np.float64)
    return np.stack(
        [
            np.asarray(pose_delta(jnp.asarray(p), jnp.asarray(d)))
            for p, d in zip(pose, piv, strict=True)
        ]
    )


def correct(camera, corrections: dict, view, pivots=None):
    """The camera of training view(s) `view` with the learned corrections applied; pivots [V]:
    the depth each view's rotation turns about (None: 0, the camera centre)."""
    viewmat, K, dist = camera.viewmat, camera.K, camera.dist
    end = camera.viewmat_end  # a rolling shutter's end pose gets the same correction
    if "pose" in corrections:
        pose = corrections["pose"][view]
        piv = jnp.zeros(pose.shape[:-1], pose.dtype) if pivots is None else pivots[view]

        def one(vm, p, d):
            return jnp.matmul(pose_delta(p, d).astype(vm.dtype), vm, precision=EXACT)

        many = viewmat.ndim == 3
        viewmat = jax.vmap(one)(viewmat, pose, piv) if many else one(viewmat, pose, piv)
        if end is not None:
            end = jax.vmap(one)(end, pose, piv) if many else one(end, pose, piv)
    if "intrinsics" in corrections:
        a, b, c, d = (corrections["intrinsics"][i].astype(K.dtype) for i in range(4))
        K = K.at[..., 0, 0].multiply(jnp.exp(a)).at[..., 1, 1].multiply(jnp.exp(b))
        K = K.at[..., 0, 2].add(c).at[..., 1, 2].add(d)
        dk = corrections["dist"].astype(dist.dtype)
        dist = dist + dk.reshape((1,) * (dist.ndim - 1) + dk.shape)
    leaves, treedef = jax.tree_util.tree_flatten(camera)
    del leaves
    return jax.tree_util.tree_unflatten(
        treedef, [viewmat, K, dist] + ([] if end is None else [end])
    )


def pivot_depths(viewmats: np.ndarray, points: np.ndarray | None, target: np.ndarray) -> np.ndarray:
    """[V] float32: per view, the median depth of the points in front of the camera (the
    scene's middle), else the depth of `target` (where the cameras look), floored at 0."""
    out = []
    for vm in np.asarray(viewmats, np.float64):
        z = None
        if points is not None and len(points):
            depth = np.asarray(points, np.float64) @ vm[2, :3] + vm[2, 3]
            z = float(np.median(depth[depth > 0])) if np.any(depth > 0) else None
        if z is None:
            z = max(float(target @ vm[2, :3] + vm[2, 3]), 0.0)
        out.append(z)
    return np.asarray(out, np.float32)


def corrections_optimizer(corrections: dict, pose_lr, intrinsics_lr, scene_scale):
    """Adam for the corrections (lrs are traced scalars)."""
    lrs, factors = {}, {}
    if "pose" in corrections:
        lrs["pose"] = jnp.concatenate(
            [jnp.full((1, 3), 1.0, jnp.float32), jnp.full((1, 3), scene_scale, jnp.float32)], 1
        )
        factors["pose"] = pose_lr
    if "intrinsics" in corrections:
        # log-focals and lens coefficients at intrinsics_lr, the principal point 100x (pixels)
        lrs["intrinsics"] = jnp.asarray([1.0, 1.0, 100.0, 100.0], jnp.float32)
        lrs["dist"] = jnp.full((1,), 1.0, jnp.float32)
        factors["intrinsics"] = factors["dist"] = intrinsics_lr
    return optimizer(lrs, factors, eps=1e-15)


def step_corrections(opt, grads, opt_state, corrections):
    return adam_update(opt, grads, opt_state, corrections)
