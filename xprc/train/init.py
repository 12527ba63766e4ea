"""Initial raw parameters of any method from a dataset's points (or a box where cameras look).

Per parameter, first match wins (`init` on the ParamSpec overrides the rule):
  - role `position`: the dataset's points ("points"), or uniform in a box around where the
    cameras look when there are none;
  - role `opacity`: the activated value `TrainConfig.init_opacity` (0.1), mapped back;
  - kind `quat`: the identity rotation (1, 0, 0, 0) ("identity");
  - kind `sh`: DC from the point colours, `(c - 0.5) / C0`, higher coefficients 0 ("colors");
  - role `scale`: the mean distance to the 3 nearest points, `sqrt(mean d^2)` as in 3DGS,
    mapped back through the activation ("nn_distance");
  - a `[3]` sigmoid param: logit of the point colours ("colors");
  - anything else: zeros ("zeros").
`init` strings: points, colors, identity, nn_distance, zeros, ones, or a number (the activated
value, mapped back through the activation, e.g. "0.1" for a sigmoid param is logit(0.1)).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ..conventions import SH_C0
from ..method_info import MethodInfo
from .config import TrainConfig, TrainError
from .roles import inverse_np, param_roles, shape_of, where


def nn_distance(points: np.ndarray) -> np.ndarray:
    """sqrt of the mean squared distance to the 3 nearest other points, [P] float64."""
    p = np.asarray(points, np.float64)
    if len(p) < 2:
        return np.full(len(p), 0.01)
    k = min(4, len(p))
    d, _ = cKDTree(p).query(p, k=k)
    d2 = np.mean(np.square(d[:, 1:]), axis=1)
    return np.sqrt(np.maximum(d2, 1e-14))


def views_of(dataset) -> list:
    views = getattr(dataset, "views", None)
    return list(views if views is not None else dataset)


def camera_poses(views) -> tuple[np.ndarray, np.ndarray]:
    """Camera centres and forward axes in world, [V, 3] each (float64)."""
    centres, forwards = [], []
    for v in views:
        vm = np.asarray(v.viewmat, np.float64)
        R, t = vm[:3, :3], vm[:3, 3]
        centres.append(-R.T @ t)
        forwards.append(R[2])  # camera +z in world
    return np.asarray(centres), np.asarray(forwards)


def look_target(centres: np.ndarray, forwards: np.ndarray) -> np.ndarray:
    """The point closest (least squares) to all optical axes; the centroid when ill-posed."""
    a = np.zeros((3, 3))
    b = np.zeros(3)
    for c, d in zip(centres, forwards, strict=True):
        m = np.eye(3) - np.outer(d, d)
        a += m
        b += m @ c
    if np.linalg.cond(a) > 1e6:
        return centres.mean(axis=0) + forwards.mean(axis=0)
    return np.linalg.solve(a, b)


def scene_scale(dataset) -> float:
    """The 3DGS scene scale: 1.1 x the largest distance of a camera centre from their mean
    (1.0 for a single view or coincident cameras)."""
    c, _ = camera_poses(views_of(dataset))
    extent = float(1.1 * np.linalg.norm(c - c.mean(axis=0), axis=1).max()) if len(c) > 1 else 1.0
    return extent if extent > 1e-6 else 1.0


def _const(method, spec, value: float, n: int) -> np.ndarray:
    raw = getattr(spec, "init_raw", None)  # the compiler inverted a text activation (issue 13)
    if raw is not None and getattr(spec, "init", None) == value:
        return np.full((n,) + shape_of(spec), np.float64(raw))
    return np.full((n,) + shape_of(spec), inverse_np(method, spec, np.float64(value)))


def _init_one(method, spec, rule, n: int, pts, cols, nn) -> np.ndarray:
    shape = shape_of(spec)
    bad = f"{where(method, spec.name)}: init"
    if isinstance(rule, (int, float)):
        return _const(method, spec, float(rule), n)
    if rule == "points":
        if shape != (3,):
            raise TrainError(f"{bad} 'points' needs shape [3], has {shape}")
        return pts
    if rule == "identity":
        out = np.zeros((n,) + shape)
        if spec.kind == "quat" or shape == (4,):
            out[:, 0] = 1.0
        elif len(shape) == 2 and shape[0] == shape[1]:
            out[:] = np.eye(shape[0])
        else:
            out[:] = inverse_np(method, spec, np.float64(1.0))
        return out
    if rule == "colors":
        if spec.kind == "sh" and len(shape) == 2 and shape[1] == 3:
            out = np.zeros((n,) + shape)
            out[:, 0, :] = (cols - 0.5) / SH_C0
            return out
        if shape == (3,):
            return inverse_np(method, spec, cols)
        raise TrainError(f"{bad} 'colors' needs shape [3] or sh, has {shape}")
    if rule == "nn_distance":
        raw = inverse_np(method, spec, nn)
        return np.broadcast_to(raw.reshape((n,) + (1,) * len(shape)), (n,) + shape).copy()
    if rule == "zeros":
        return np.zeros((n,) + shape)
    if rule == "ones":
        return _const(method, spec, 1.0, n)
    try:
        value = float(rule)
    except (TypeError, ValueError):
        raise TrainError(
            f"{bad} {rule!r} is unknown (expected points, colors, identity, nn_distance, zeros, "
            "ones or a number)"
        ) from None
    return _const(method, spec, value, n)


def default_rule(spec, roles: dict, init_opacity: float):
    role = getattr(spec, "role", None)
    if role == "position" and spec.name == roles["position"]:
        return "points"
    if role == "opacity" and spec.name == roles["opacity"]:
        return init_opacity
    if spec.kind == "quat":
        return "identity"
    if spec.kind == "sh":
        return "colors"
    if role == "scale" and spec.name == roles["scale"]:
        return "nn_distance"
    if spec.activation == "sigmoid" and shape_of(spec) == (3,):
        return "colors"
    return "zeros"


def _points(dataset, config: TrainConfig, capacity: int | None, rng):
    points = getattr(dataset, "points", None)
    colors = getattr(dataset, "colors", None)
    if points is not None and len(points) > 0:
        pts = np.asarray(points, np.float64).reshape(-1, 3)
        cols = np.full_like(pts, 0.5) if colors is None else np.asarray(colors, np.float64)
        return pts, cols.reshape(-1, 3)
    centres, forwards = camera_poses(views_of(dataset))
    target = look_target(centres, forwards)
    half = 0.4 * float(np.mean(np.linalg.norm(centres - target, axis=1)))
    n_rand = capacity or config.num_random_points
    pts = target + rng.uniform(-half, half, (n_rand, 3))
    return pts, 0.5 + 0.05 * rng.standard_normal((n_rand, 3))


def init_params(method, dataset, config: TrainConfig | None = None, capacity: int | None = None):
    """Initial raw parameters for `method` from `dataset` (see the module docstring's rule).

    Returns (params {name: float32 [N, *shape]}, used bool [N]) with N = `capacity` (default
    `config.capacity`) or the number of points; slots past the points are unused (opacity ~ 0)
    until a strategy fills them.
    """
    config = config or TrainConfig()
    rng = np.random.default_rng(config.seed)
    capacity = capacity or config.capacity
    roles = param_roles(method)
    pts, cols = _points(dataset, config, capacity, rng)
    n = capacity or len(pts)
    if len(pts) > n:
        keep = np.sort(rng.choice(len(pts), n, replace=False))
        pts, cols = pts[keep], cols[keep]
    n_used = len(pts)
    nn = nn_distance(pts)
    if n > n_used:  # unused slots: copies of points, made invisible below
        extra = rng.integers(0, n_used, n - n_used)
        pts = np.concatenate([pts, pts[extra]])
        cols = np.concatenate([cols, cols[extra]])
        nn = np.concatenate([nn, nn[extra]])
    params, table = {}, MethodInfo.of(method).param_table
    for spec in table.values():
        rule = getattr(spec, "init", None)
        if rule is None:
            rule = default_rule(spec, roles, config.init_opacity)
        arr = np.asarray(_init_one(method, spec, rule, n, pts, cols, nn), np.float64)
        params[spec.name] = arr.astype(np.float32)
    used = np.arange(n) < n_used
    if n > n_used and roles["opacity"] is not None:
        spec = table[roles["opacity"]]
        params[spec.name][~used] = np.float32(inverse_np(method, spec, 1e-8))
    return params, used
