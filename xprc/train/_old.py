"""The trainer: fits any method module (a compiled spec) to a multi-view dataset.

It knows no method by name. Everything it needs comes from the method's `PARAMS` table
(`ParamSpec(name, kind, shape, activation, degree)`, optionally with `lr`, `init` and `role`):

Initialisation rule (per parameter, first match wins; `init` on the ParamSpec overrides it):
  - role `position` (the ParamSpec's `role`, else the param whose `init` is "points", else the
    first `[3]` param with identity activation, else the first `[3]` param): the dataset's
    points ("points"), or uniform in a box around where the cameras look when there are none;
  - kind `quat`: the identity rotation (1, 0, 0, 0) ("identity");
  - kind `sh`: DC from the point colours, `(c - 0.5) / C0`, higher coefficients 0 ("colors");
  - activation `exp` (or `abs`, `softplus`, `relu`: a length): the mean distance to the 3
    nearest points, `sqrt(mean d^2)` as in 3DGS, mapped back through the activation (log for
    exp) ("nn_distance");
  - activation `sigmoid`, scalar: the raw value of opacity 0.1, `logit(0.1)`;
  - activation `sigmoid`, `[3]`: logit of the point colours ("colors");
  - anything else: zeros ("zeros").
  `init` strings: points, colors, identity, nn_distance, zeros, ones, or a number (the activated
  value, mapped back through the activation, e.g. "0.1" for a sigmoid param is logit(0.1)).

Learning rates: `ParamSpec.lr` when present, else `TrainConfig.lr[name]` (3DGS defaults of
REFERENCE.md section 8 for the 3DGS names), else `TrainConfig.lr_default`. The position lr is
multiplied by the scene scale and decays exponentially to `position_lr_final` of its start over
the run; an `sh` param's higher coefficients get `sh_rest_lr_factor` (1/20) of its lr.

SH schedule: coefficients of degree above `min(step // sh_degree_interval, degree)` are masked to
zero (so they get no gradient); shapes never change.

Densification inside a static capacity (3DGS-MCMC relocation): every `relocate_every` steps dead
primitives (activated opacity < `min_opacity`) are moved onto live ones drawn with probability
proportional to opacity; source and copies share the opacity `1 - (1 - o)^(1 / n)` and, when a
scale param is known, the MCMC scale correction; their Adam moments restart. Unused capacity
(slots beyond the initial points) is filled at most `grow_fraction` of the live count per event.
Every step, position noise ~ N(0, mean(scale^2)) * lr_position * sigmoid(100 (1 - o - 0.995))
* noise_lr moves near-dead primitives. Roles come from `role` tags (`position`, `opacity`,
`scale`), else the first `[3]` param, the first scalar sigmoid param and the first length-like
param (see `param_roles`).

The whole train step (render, loss, gradient, Adam, noise, relocation) is one jitted function
traced once per (method, render config); every run-time choice is a traced array.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .errors import XprError
from .metrics import psnr, ssim
from .pipeline import RenderConfig, render

__all__ = [
    "DEFAULT_LRS",
    "TRACE_COUNT",
    "TrainConfig",
    "TrainError",
    "TrainResult",
    "demo",
    "init_params",
    "param_roles",
    "train",
]

SH_C0 = 0.28209479177387814
# Activations of length-like params (scales, radii): initialised from neighbour distances.
SIZE_ACTIVATIONS = ("exp", "abs", "softplus", "relu")
CHECKPOINT = "checkpoint.npz"

# Incremented each time the train step is traced: a test proves "compiled once per run".
TRACE_COUNT = {"train_step": 0, "eval": 0}

# REFERENCE.md section 8 (3DGS); means are multiplied by the scene scale.
DEFAULT_LRS = {
    "means": 1.6e-4,
    "sh": 2.5e-3,
    "opacities": 5e-2,
    "scales": 5e-3,
    "quats": 1e-3,
}


class TrainError(XprError):
    """A training run cannot start or resume (bad dataset/method combination, stale checkpoint)."""

    def __init__(self, message: str, path=None) -> None:
        super().__init__(message, filename=None if path is None else str(path))


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Options of a training run. Only `render` sets shapes; everything else is a traced value.

    steps:               optimisation steps.
    capacity:            static primitive count; None: the number of initial points.
    lr / lr_default:     learning rates by parameter name / for names not in `lr` (a ParamSpec's
                         own `lr` wins over both).
    position_lr_final:   the position lr decays exponentially to this fraction of its start.
    sh_degree_interval:  raise the active SH degree by one every this many steps.
    relocate_*:          MCMC relocation every `relocate_every` steps in [from, until)
                         (until None: 5/6 of the run); 0 disables it.
    noise_lr:            scale of the position noise (0 disables it).
    opacity_reg / scale_reg: MCMC regularisers on mean opacity and mean scale.
    background:          RGB the images were composited on; None: inferred from the views
                         (median colour where alpha is 0), black without alpha.
    """

    steps: int = 7000
    seed: int = 0
    capacity: int | None = None
    num_random_points: int = 10_000
    lr: Mapping[str, float] = dataclasses.field(default_factory=lambda: dict(DEFAULT_LRS))
    lr_default: float = 1e-3
    position_lr_final: float = 0.01
    sh_rest_lr_factor: float = 1.0 / 20.0
    ssim_weight: float = 0.2
    sh_degree_interval: int = 1000
    init_opacity: float = 0.1
    relocate_every: int = 100
    relocate_from: int = 500
    relocate_until: int | None = None
    min_opacity: float = 0.005
    grow_fraction: float = 0.05
    noise_lr: float = 5e5
    opacity_reg: float = 0.01
    scale_reg: float = 0.01
    background: tuple[float, ...] | None = None
    render: RenderConfig = RenderConfig()
    eval_every: int = 1000
    checkpoint_every: int = 1000
    log_every: int = 10
    progress: bool = True
    save_renders: bool = True
    sheet_views: int = 4

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["lr"] = dict(self.lr)
        out["render"] = dataclasses.asdict(self.render)
        return out


@dataclasses.dataclass
class TrainResult:
    """What `train` returns. params: raw numpy arrays [capacity, *shape] by parameter name."""

    params: dict[str, np.ndarray]
    step: int
    metrics: dict  # the last evaluation: step, psnr, ssim, time, primitives
    evals: list[dict]
    history: list[dict]  # train log: step, loss, psnr, primitives
    out_dir: Path | None
    interrupted: bool
    elapsed: float  # seconds of training (all runs of a resumed training)
    steps_per_second: float  # this run's optimisation speed, compile excluded
    initial_psnr: float | None


# ----------------------------------------------------------------------------- method roles


def _shape(spec) -> tuple:
    return tuple(spec.shape)


def _is_vec3(spec) -> bool:
    return _shape(spec) == (3,)


def _is_scalar(spec) -> bool:
    return _shape(spec) in ((), (1,))


def param_roles(method) -> dict[str, str | None]:
    """Which parameter is the position, the opacity and the scale (None when not found).

    `role` tags on the ParamSpecs win; else the param initialised from points (position), the
    first [3] param (identity activation preferred), the first scalar with sigmoid activation
    and the first size-like param (activation exp, abs, softplus or relu; [3] preferred, then
    [1..4]) other than the position.
    """
    specs = list(method.PARAMS)
    roles: dict[str, str | None] = {"position": None, "opacity": None, "scale": None}
    for s in specs:
        role = getattr(s, "role", None)
        if role in roles and roles[role] is None:
            roles[role] = s.name
    if roles["position"] is None:
        cands = [s for s in specs if getattr(s, "init", None) == "points"]
        cands += [s for s in specs if _is_vec3(s) and s.activation == "identity"]
        cands += [s for s in specs if _is_vec3(s)]
        roles["position"] = cands[0].name if cands else None
    if roles["opacity"] is None:
        cands = [s for s in specs if _is_scalar(s) and s.activation == "sigmoid"]
        roles["opacity"] = cands[0].name if cands else None
    if roles["scale"] is None:
        sized = [s for s in specs if s.activation in SIZE_ACTIVATIONS]
        sized = [s for s in sized if s.name != roles["position"] and len(_shape(s)) <= 1]
        cands = [s for s in sized if _is_vec3(s)] + sized
        roles["scale"] = cands[0].name if cands else None
    return roles


def _sh_degree(spec) -> int | None:
    if spec.kind != "sh":
        return None
    if getattr(spec, "degree", None) is not None:
        return int(spec.degree)
    return round(math.sqrt(_shape(spec)[0])) - 1


# ----------------------------------------------------------------------------- activations


def _inverse_activation(activation: str, value: np.ndarray) -> np.ndarray:
    """Raw value whose activation is `value` (float64 in, float64 out)."""
    v = np.asarray(value, np.float64)
    if activation == "sigmoid":
        v = np.clip(v, 1e-8, 1 - 1e-7)
        return np.log(v / (1 - v))
    if activation == "exp":
        return np.log(np.maximum(v, 1e-30))
    if activation == "softplus":
        return np.log(np.expm1(np.maximum(v, 1e-30)))
    if activation == "tanh":
        return np.arctanh(np.clip(v, -1 + 1e-7, 1 - 1e-7))
    return v


def _inverse_activation_jnp(activation: str, value: jax.Array) -> jax.Array | None:
    """The traced twin for relocation; None when the activation is not invertible here."""
    if activation == "sigmoid":
        v = jnp.clip(value, 1e-7, 1 - 1e-7)
        return jnp.log(v) - jnp.log1p(-v)
    if activation == "exp":
        return jnp.log(jnp.maximum(value, 1e-30))
    if activation == "identity":
        return value
    return None


# ----------------------------------------------------------------------------- initialisation


def _nn_distance(points: np.ndarray) -> np.ndarray:
    """sqrt of the mean squared distance to the 3 nearest other points, [P] float64."""
    p = np.asarray(points, np.float64)
    if len(p) < 2:
        return np.full(len(p), 0.01)
    from scipy.spatial import cKDTree

    k = min(4, len(p))
    d, _ = cKDTree(p).query(p, k=k)
    d2 = np.mean(np.square(d[:, 1:]), axis=1)
    return np.sqrt(np.maximum(d2, 1e-14))


def _look_target(centres: np.ndarray, forwards: np.ndarray) -> np.ndarray:
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


def _views(dataset) -> list:
    views = getattr(dataset, "views", None)
    return list(views if views is not None else dataset)


def _camera_poses(views) -> tuple[np.ndarray, np.ndarray]:
    centres, forwards = [], []
    for v in views:
        vm = np.asarray(v.viewmat, np.float64)
        R, t = vm[:3, :3], vm[:3, 3]
        centres.append(-R.T @ t)
        forwards.append(R[2])  # camera +z in world
    return np.asarray(centres), np.asarray(forwards)


def scene_scale(dataset) -> float:
    """The 3DGS scene scale: 1.1 x the largest distance of a camera centre from their mean
    (1.0 for a single view or coincident cameras)."""
    if hasattr(dataset, "scene_extent") and len(_views(dataset)) > 1:
        extent = float(dataset.scene_extent())
    else:
        c, _ = _camera_poses(_views(dataset))
        extent = (
            float(1.1 * np.linalg.norm(c - c.mean(axis=0), axis=1).max()) if len(c) > 1 else 1.0
        )
    return extent if extent > 1e-6 else 1.0


def _const(spec, value: float, n: int) -> np.ndarray:
    raw = _inverse_activation(spec.activation, np.float64(value))
    return np.full((n,) + _shape(spec), raw)


def _init_one(spec, rule, n: int, pts: np.ndarray, cols: np.ndarray, nn: np.ndarray):
    shape = _shape(spec)
    if isinstance(rule, (int, float)):
        return _const(spec, float(rule), n)
    if rule == "points":
        if shape != (3,):
            raise TrainError(f"parameter '{spec.name}': init 'points' needs shape [3], has {shape}")
        return pts
    if rule == "identity":
        out = np.zeros((n,) + shape)
        if spec.kind == "quat" or shape == (4,):
            out[:, 0] = 1.0
        elif len(shape) == 2 and shape[0] == shape[1]:
            out[:] = np.eye(shape[0])
        else:
            out[:] = _inverse_activation(spec.activation, np.float64(1.0))
        return out
    if rule == "colors":
        if spec.kind == "sh" and len(shape) == 2 and shape[1] == 3:
            out = np.zeros((n,) + shape)
            out[:, 0, :] = (cols - 0.5) / SH_C0
            return out
        if shape == (3,):
            return _inverse_activation(spec.activation, cols)
        raise TrainError(
            f"parameter '{spec.name}': init 'colors' needs shape [3] or sh, has {shape}"
        )
    if rule == "nn_distance":
        raw = _inverse_activation(spec.activation, nn)
        return np.broadcast_to(raw.reshape((n,) + (1,) * len(shape)), (n,) + shape).copy()
    if rule == "zeros":
        return np.zeros((n,) + shape)
    if rule == "ones":
        return _const(spec, 1.0, n)
    try:
        return _const(spec, float(rule), n)
    except (TypeError, ValueError):
        raise TrainError(
            f"parameter '{spec.name}': unknown init {rule!r} (expected points, colors, identity, "
            "nn_distance, zeros, ones or a number)"
        ) from None


def _default_rule(spec, roles, init_opacity: float):
    if spec.name == roles["position"]:
        return "points"
    if spec.kind == "quat":
        return "identity"
    if spec.kind == "sh":
        return "colors"
    if spec.activation in SIZE_ACTIVATIONS:
        return "nn_distance"
    if spec.activation == "sigmoid" and _is_scalar(spec):
        return init_opacity
    if spec.activation == "sigmoid" and _is_vec3(spec):
        return "colors"
    return "zeros"


def init_params(method, dataset, config: TrainConfig = TrainConfig()):
    """Initial raw parameters for `method` from `dataset` (see the module docstring's rule).

    Returns (params {name: float32 [N, *shape]}, used bool [N]) with N = `config.capacity` or the
    number of points; slots past the points are unused (opacity ~ 0) until relocation fills them.
    """
    rng = np.random.default_rng(config.seed)
    roles = param_roles(method)
    points = getattr(dataset, "points", None)
    colors = getattr(dataset, "colors", None)
    if points is not None and len(points) > 0:
        pts = np.asarray(points, np.float64).reshape(-1, 3)
        cols = (
            np.full_like(pts, 0.5)
            if colors is None
            else np.asarray(colors, np.float64).reshape(-1, 3)
        )
    else:
        centres, forwards = _camera_poses(_views(dataset))
        target = _look_target(centres, forwards)
        half = 0.4 * float(np.mean(np.linalg.norm(centres - target, axis=1)))
        n_rand = config.capacity or config.num_random_points
        pts = target + rng.uniform(-half, half, (n_rand, 3))
        cols = 0.5 + 0.05 * rng.standard_normal((n_rand, 3))
    n = config.capacity or len(pts)
    if len(pts) > n:
        keep = np.sort(rng.choice(len(pts), n, replace=False))
        pts, cols = pts[keep], cols[keep]
    n_used = len(pts)
    nn = _nn_distance(pts)
    if n > n_used:  # unused slots: copies of points, made invisible below
        extra = rng.integers(0, n_used, n - n_used)
        pts = np.concatenate([pts, pts[extra]])
        cols = np.concatenate([cols, cols[extra]])
        nn = np.concatenate([nn, nn[extra]])
    params = {}
    for spec in method.PARAMS:
        rule = getattr(spec, "init", None)
        if rule is None:
            rule = _default_rule(spec, roles, config.init_opacity)
        arr = np.asarray(_init_one(spec, rule, n, pts, cols, nn), np.float64)
        params[spec.name] = arr.astype(np.float32)
    used = np.arange(n) < n_used
    if n > n_used and roles["opacity"] is not None:
        spec = {s.name: s for s in method.PARAMS}[roles["opacity"]]
        params[spec.name][~used] = np.float32(_inverse_activation(spec.activation, 1e-8))
    return params, used


# ----------------------------------------------------------------------------- optimiser


def _lr_arrays(method, config: TrainConfig) -> dict[str, jax.Array]:
    """Per-parameter learning rates, shaped [1, ...] to broadcast against [N, *shape]."""
    out = {}
    for spec in method.PARAMS:
        lr = getattr(spec, "lr", None)
        if lr is None:
            lr = config.lr.get(spec.name, config.lr_default)
        shape = (1,) * (1 + len(_shape(spec)))
        arr = np.full(shape, float(lr))
        if spec.kind == "sh" and len(_shape(spec)) >= 1:
            k = _shape(spec)[0]
            rows = np.full(k, float(lr) * config.sh_rest_lr_factor)
            rows[0] = float(lr)
            arr = rows.reshape((1, k) + (1,) * (len(_shape(spec)) - 1))
        out[spec.name] = jnp.asarray(arr, jnp.float32)
    return out


def _scale_by_lrs(lrs, position: str | None, pos_factor):
    """optax transform: updates * -lr per leaf; position lr times `pos_factor` (a traced scalar)."""

    def init(params):
        del params
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params
        out = {}
        for name, u in updates.items():
            lr = lrs[name]
            if name == position:
                lr = lr * pos_factor
            out[name] = -lr * u
        return out, state

    return optax.GradientTransformation(init, update)


def _optimizer(lrs, position, pos_factor):
    return optax.chain(
        optax.scale_by_adam(b1=0.9, b2=0.999, eps=1e-15), _scale_by_lrs(lrs, position, pos_factor)
    )


# ----------------------------------------------------------------------------- the step


def _sh_masked(method, params, step, interval):
    """Zero SH coefficients above the active degree (no gradient reaches them)."""
    out = dict(params)
    for spec in method.PARAMS:
        deg = _sh_degree(spec)
        if deg is None:
            continue
        k = _shape(spec)[0]
        active = jnp.minimum(step // jnp.maximum(interval, 1), deg)
        keep = jnp.arange(k, dtype=jnp.int32) < (active + 1) * (active + 1)
        shape = (1, k) + (1,) * (len(_shape(spec)) - 1)
        out[spec.name] = params[spec.name] * keep.astype(params[spec.name].dtype).reshape(shape)
    return out


def _flat(x: jax.Array) -> jax.Array:
    return x.reshape(x.shape[0])


MCMC_MAX_COPIES = 16


@functools.cache
def _mcmc_table(n_max: int = MCMC_MAX_COPIES) -> np.ndarray:
    """T[n, k] = sum_{i=k+1..n} C(i-1, k) (-1)^k / sqrt(k+1), [n_max + 1, n_max] float64."""
    table = np.zeros((n_max + 1, n_max))
    for n in range(1, n_max + 1):
        for i in range(1, n + 1):
            for k in range(i):
                table[n, k] += math.comb(i - 1, k) * (-1.0) ** k / math.sqrt(k + 1)
    return table


def _mcmc_scale_factor(o_old, o_new, n):
    """3DGS-MCMC scale correction for a primitive of opacity o_old split into n copies of
    opacity o_new: o_old / sum_{i=1..n} sum_{k<i} C(i-1, k) (-1)^k o_new^(k+1) / sqrt(k+1).
    o_old, o_new [N] float, n [N] int (clipped to 1..16)."""
    table = jnp.asarray(_mcmc_table(), o_new.dtype)
    rows = table[jnp.clip(n, 1, MCMC_MAX_COPIES)]  # [N, K]
    k = jnp.arange(1, MCMC_MAX_COPIES + 1, dtype=o_new.dtype)
    powers = jnp.power(o_new[:, None], k[None, :])
    denom = jnp.sum(rows * powers, axis=1)
    return o_old / jnp.maximum(denom, 1e-12)


def _relocate(method, roles, params, opt_state, used, key, hyper):
    specs = {s.name: s for s in method.PARAMS}
    op_name, sc_name = roles["opacity"], roles["scale"]
    act = method.activate(params)
    o = _flat(act[op_name]) if act[op_name].ndim > 1 else act[op_name]
    n = o.shape[0]
    live = o >= hyper["min_opacity"]
    dead = ~live
    n_live = jnp.sum(live, dtype=jnp.int32)
    fresh = dead & ~used
    allowance = jnp.floor(hyper["grow_fraction"] * n_live.astype(jnp.float32)).astype(jnp.int32)
    rank = jnp.cumsum(fresh, dtype=jnp.int32) - 1
    move = ((dead & used) | (fresh & (rank < allowance))) & (n_live > 0)
    w = jnp.where(live, o, 0.0)
    cdf = jnp.cumsum(w)
    u = jax.random.uniform(key, (n,), dtype=cdf.dtype) * cdf[-1]
    idx = jnp.arange(n, dtype=jnp.int32)
    src = jnp.clip(jnp.searchsorted(cdf, u, side="right").astype(jnp.int32), 0, n - 1)
    src = jnp.where(move, src, idx)
    copies = jax.ops.segment_sum(move.astype(jnp.int32), src, num_segments=n)
    # primitives sharing a source after the move (capped, as gsplat caps its ratios)
    total = jnp.minimum(copies + 1, MCMC_MAX_COPIES)
    o_new = 1.0 - jnp.power(1.0 - o, 1.0 / total.astype(o.dtype))
    o_new = jnp.clip(o_new, hyper["min_opacity"], 1.0 - 1e-6)
    touched_src = copies > 0
    new = {
        name: jnp.where(move.reshape((n,) + (1,) * (p.ndim - 1)), p[src], p)
        for name, p in params.items()
    }
    o_slot = o_new[src]  # for moved slots: their source's; for sources: their own (src = idx)
    change = move | touched_src
    spec = specs[op_name]
    raw_o = _inverse_activation_jnp(spec.activation, o_slot)
    if raw_o is not None:
        p = new[op_name]
        new[op_name] = jnp.where(
            change.reshape(p.shape[:1] + (1,) * (p.ndim - 1)),
            raw_o.reshape((n,) + (1,) * (p.ndim - 1)).astype(p.dtype),
            p,
        )
    if sc_name is not None and specs[sc_name].activation in ("exp", "abs", "relu"):
        factor = _mcmc_scale_factor(o, o_new, total)[src]
        p = new[sc_name]
        factor = factor.astype(p.dtype).reshape((n,) + (1,) * (p.ndim - 1))
        # exp: log-space shift; abs / relu are positively homogeneous: scale the raw value.
        scaled = p + jnp.log(factor) if specs[sc_name].activation == "exp" else p * factor
        new[sc_name] = jnp.where(change.reshape((n,) + (1,) * (p.ndim - 1)), scaled, p)

    def reset(leaf):
        if getattr(leaf, "ndim", 0) >= 1 and leaf.shape[0] == n:
            return jnp.where(change.reshape((n,) + (1,) * (leaf.ndim - 1)), 0.0, leaf).astype(
                leaf.dtype
            )
        return leaf

    opt_state = jax.tree_util.tree_map(reset, opt_state)
    return new, opt_state, used | move


def _inject_noise(method, roles, params, key, lr_pos, hyper):
    pos, op_name, sc_name = roles["position"], roles["opacity"], roles["scale"]
    act = method.activate(params)
    o = act[op_name].reshape(params[pos].shape[0])
    if sc_name is not None:
        s = act[sc_name]
        var = jnp.mean(s * s, axis=tuple(range(1, s.ndim)))
    else:
        var = jnp.full_like(o, (0.01 * hyper["scene_scale"]) ** 2)
    gate = jax.nn.sigmoid(100.0 * ((1.0 - o) - 0.995))
    p = params[pos]
    eta = jax.random.normal(key, p.shape, dtype=p.dtype)
    scale = (gate * var * lr_pos * hyper["noise_lr"]).astype(p.dtype)
    out = dict(params)
    out[pos] = p + eta * scale.reshape((p.shape[0],) + (1,) * (p.ndim - 1))
    return out


def _photometric_sharded(method, rconfig: RenderConfig, devices: int):
    """Data parallelism: (params, cameras [D], images [D], background, ssim_weight) ->
    (mean loss, mean PSNR, dropped), each device rendering its share of the camera batch with
    `shard_map`; XLA all-reduces the sums (and, in the backward pass, the gradients)."""
    from jax.sharding import PartitionSpec as P

    from .distributed import AXIS, device_mesh
    from .pipeline.render import _compiled

    mesh = device_mesh(devices)
    render_batch = _compiled(method, "RGB", rconfig, True)

    def local(params, cams, gts, background, ssim_weight):
        out = render_batch(params, cams, background)
        pred = out.image
        l1 = jnp.mean(jnp.abs(pred - gts), axis=(1, 2, 3))
        per_view = (1.0 - ssim_weight) * l1 + ssim_weight * (1.0 - jax.vmap(ssim)(pred, gts))
        sums = (jnp.sum(per_view), jnp.sum(jax.vmap(psnr)(pred, gts)))
        dropped = jnp.max(out.stats["dropped"]).astype(jnp.int32)
        return jax.lax.psum(sums, AXIS), jax.lax.pmax(dropped, AXIS)

    sharded = jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(P(), P(AXIS), P(AXIS), P(), P()),
        out_specs=(P(), P()),
        check_vma=False,  # the compositor's skip branch yields unvarying constants
    )

    def photometric(params, cams, gts, background, ssim_weight):
        (loss_sum, psnr_sum), dropped = sharded(params, cams, gts, background, ssim_weight)
        return loss_sum / devices, psnr_sum / devices, dropped

    return photometric


@functools.cache
def _step_fn(method, rconfig: RenderConfig, devices: int = 1):
    """The jitted train step for a method and render config (cached: one trace per run shape).

    With devices > 1, `view` holds one training view per device and the photometric loss is
    averaged over them (data parallelism, see `_photometric_sharded`)."""
    roles = param_roles(method)
    pos, op_name, sc_name = roles["position"], roles["opacity"], roles["scale"]
    mcmc = pos is not None and op_name is not None
    sharded = _photometric_sharded(method, rconfig, devices) if devices > 1 else None

    def step_fn(state, data, hyper, view):
        TRACE_COUNT["train_step"] += 1
        step = state["step"]
        params = state["params"]
        key = jax.random.fold_in(state["key"], step)
        k_noise, k_reloc = jax.random.split(key)
        gt = data["images"][view]
        cam = jax.tree_util.tree_map(lambda a: a[view], data["cameras"])
        progress = jnp.minimum(step.astype(jnp.float32) / hyper["total_steps"], 1.0)
        pos_factor = hyper["scene_scale"] * jnp.power(hyper["position_lr_final"], progress)

        def loss_fn(p):
            masked = _sh_masked(method, p, step, hyper["sh_interval"])
            if sharded is not None:
                loss, image_psnr, dropped = sharded(
                    masked, cam, gt, hyper["background"], hyper["ssim_weight"]
                )
            else:
                out = render(method, masked, cam, hyper["background"], config=rconfig)
                pred = out.image
                l1 = jnp.mean(jnp.abs(pred - gt))
                w = hyper["ssim_weight"]
                loss = (1.0 - w) * l1 + w * (1.0 - ssim(pred, gt))
                image_psnr, dropped = psnr(pred, gt), out.stats["dropped"]
            if op_name is not None:
                act = method.activate(p)
                loss = loss + hyper["opacity_reg"] * jnp.mean(act[op_name])
                if sc_name is not None:
                    loss = loss + hyper["scale_reg"] * jnp.mean(act[sc_name])
            return loss, (image_psnr, dropped)

        (loss, (image_psnr, dropped)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        opt = _optimizer(hyper["lrs"], pos, pos_factor)
        # optax's bias correction computes `float ** int32`, which strict promotion rejects.
        with jax.numpy_dtype_promotion("standard"):
            updates, opt_state = opt.update(grads, state["opt"], params)
        params = optax.apply_updates(params, updates)
        used = state["used"]
        if mcmc:
            lr_pos = hyper["lrs"][pos].reshape(()) * pos_factor
            params = _inject_noise(method, roles, params, k_noise, lr_pos, hyper)
            done = step + 1
            do = (
                (hyper["relocate_every"] > 0)
                & (done >= hyper["relocate_from"])
                & (done < hyper["relocate_until"])
                & (done % jnp.maximum(hyper["relocate_every"], 1) == 0)
            )
            params, opt_state, used = jax.lax.cond(
                do,
                lambda a: _relocate(method, roles, *a, k_reloc, hyper),
                lambda a: a,
                (params, opt_state, used),
            )
            live = jnp.sum(
                method.activate(params)[op_name] >= hyper["min_opacity"], dtype=jnp.int32
            )
        else:
            live = jnp.int32(params[next(iter(params))].shape[0])
        new_state = {
            "params": params,
            "opt": opt_state,
            "step": step + 1,
            "key": state["key"],
            "used": used,
            "max_dropped": jnp.maximum(state["max_dropped"], dropped.astype(jnp.int32)),
        }
        info = {"loss": loss, "psnr": image_psnr, "live": live}
        return new_state, info

    return jax.jit(step_fn)


@functools.cache
def _eval_fn(method, rconfig: RenderConfig):
    def eval_fn(params, step, sh_interval, background, images, cameras, i):
        TRACE_COUNT["eval"] += 1
        cam = jax.tree_util.tree_map(lambda a: a[i], cameras)
        out = render(
            method, _sh_masked(method, params, step, sh_interval), cam, background, config=rconfig
        )
        img = jnp.clip(out.image, 0.0, 1.0)
        gt = images[i]
        return img, psnr(img, gt), ssim(img, gt)

    return jax.jit(eval_fn)


# ----------------------------------------------------------------------------- data


def _stack_views(views, what: str):
    if not views:
        raise TrainError(f"the {what} set has no views")
    sizes = {(int(v.width), int(v.height)) for v in views}
    if len(sizes) > 1:
        raise TrainError(
            f"the {what} views have {len(sizes)} different image sizes {sorted(sizes)}; "
            "training needs one size (resize or downscale the dataset)"
        )
    from .camera import Camera

    cams = [v.camera() if callable(v.camera) else v.camera for v in views]
    cams = [
        c.replace(
            viewmat=jnp.asarray(c.viewmat, jnp.float32),
            K=jnp.asarray(c.K, jnp.float32),
            dist=jnp.asarray(c.dist, jnp.float32),
        )
        for c in cams
    ]
    images = np.stack([np.asarray(v.image, np.float32) for v in views])
    if images.ndim != 4 or images.shape[-1] != 3:
        raise TrainError(f"the {what} images must be [H, W, 3], got {list(images.shape[1:])}")
    return {"images": jnp.asarray(images), "cameras": Camera.stack(cams)}


def _infer_background(views) -> np.ndarray:
    bgs = []
    for v in views:
        alpha = getattr(v, "alpha", None)
        if alpha is None:
            continue
        empty = np.asarray(alpha) <= 0.0
        if empty.any():
            bgs.append(np.asarray(v.image)[empty])
    if not bgs:
        return np.zeros(3, np.float32)
    return np.round(np.median(np.concatenate(bgs), axis=0) * 255.0).astype(np.float32) / 255.0


def _view_order(seed: int, step: int, n_views: int, cache: dict) -> int:
    """Each epoch visits every training view once, in a seeded order (stateless in step)."""
    epoch = step // n_views
    if epoch not in cache:
        cache.clear()
        cache[epoch] = np.random.default_rng([seed, epoch]).permutation(n_views)
    return int(cache[epoch][step % n_views])


def _hyper(method, config: TrainConfig, scale: float, background: np.ndarray) -> dict:
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    i32 = lambda x: jnp.asarray(x, jnp.int32)  # noqa: E731
    until = config.relocate_until
    if until is None:
        until = (5 * config.steps) // 6
    return {
        "lrs": _lr_arrays(method, config),
        "scene_scale": f32(scale),
        "position_lr_final": f32(config.position_lr_final),
        "total_steps": f32(max(config.steps, 1)),
        "sh_interval": i32(config.sh_degree_interval),
        "ssim_weight": f32(config.ssim_weight),
        "relocate_every": i32(config.relocate_every),
        "relocate_from": i32(config.relocate_from),
        "relocate_until": i32(until),
        "min_opacity": f32(config.min_opacity),
        "grow_fraction": f32(config.grow_fraction),
        "noise_lr": f32(config.noise_lr),
        "opacity_reg": f32(config.opacity_reg),
        "scale_reg": f32(config.scale_reg),
        "background": f32(background),
    }


# ----------------------------------------------------------------------------- checkpoints


def _save_checkpoint(path: Path, state, meta: dict) -> None:
    from .io import save_checkpoint

    leaves = jax.tree_util.tree_leaves(state["opt"])
    tree = {
        "params": {k: np.asarray(v) for k, v in state["params"].items()},
        "opt": {str(i): np.asarray(leaf) for i, leaf in enumerate(leaves)},
        "state": {k: np.asarray(state[k]) for k in ("step", "key", "used", "max_dropped")},
    }
    save_checkpoint(path, tree, meta)


def _load_checkpoint(path: Path, template) -> tuple[dict, dict]:
    from .io import load_checkpoint

    tree, meta = load_checkpoint(path)
    leaves, treedef = jax.tree_util.tree_flatten(template["opt"])
    try:
        params = {k: jnp.asarray(tree["params"][k]) for k in template["params"]}
        opt_leaves = [jnp.asarray(tree["opt"][str(i)]) for i in range(len(leaves))]
        st = {k: jnp.asarray(tree["state"][k]) for k in ("step", "key", "used", "max_dropped")}
    except KeyError as e:
        raise TrainError(f"checkpoint lacks entry {e}", path) from None
    for name, arr in params.items():
        want = template["params"][name]
        if arr.shape != want.shape or arr.dtype != want.dtype:
            raise TrainError(
                f"checkpoint parameter '{name}' is {arr.dtype}{list(arr.shape)}, this run needs "
                f"{want.dtype}{list(want.shape)} (different capacity or method?)",
                path,
            )
    for a, b in zip(opt_leaves, leaves, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise TrainError("checkpoint optimiser state does not match this run", path)
    state = {"params": params, "opt": jax.tree_util.tree_unflatten(treedef, opt_leaves), **st}
    return state, meta


def _is_gaussian_layout(method) -> bool:
    """The params are the 3DGS PLY layout: names, shapes and the activations the format implies
    (log scales, opacity logits, raw quaternions, SH colour)."""
    specs = {s.name: s for s in method.PARAMS}
    want = {
        "means": (((3,),), ("identity",)),
        "quats": (((4,),), ("normalize", "identity")),
        "scales": (((3,),), ("exp",)),
        "opacities": (((), (1,)), ("sigmoid",)),
    }
    if set(specs) != set(want) | {"sh"}:
        return False
    for name, (shapes, activations) in want.items():
        if _shape(specs[name]) not in shapes or specs[name].activation not in activations:
            return False
    sh = _shape(specs["sh"])
    return specs["sh"].kind == "sh" and len(sh) == 2 and sh[1] == 3


# ----------------------------------------------------------------------------- the run


def _log(msg: str, progress: bool) -> None:
    if progress:
        from tqdm import tqdm

        tqdm.write(msg, file=sys.stderr)


def train(
    method,
    train_set,
    test_set=None,
    out_dir=None,
    config: TrainConfig = TrainConfig(),
    *,
    resume: bool = False,
    callback: Callable[[int, dict], None] | None = None,
    devices: int = 1,
) -> TrainResult:
    """Train `method` (a generated module) on `train_set`; evaluate on `test_set`.

    train_set / test_set: `xprc.datasets.Dataset` (or anything with `views`, each with `image`
    [H, W, 3] float32, `camera()`, `viewmat`, `alpha`; optional `points`/`colors`). test_set
    None evaluates on the training views. out_dir (None: write nothing) receives metrics.json,
    curves.png, sheet.png, renders/*.png, checkpoint.npz and, for the 3DGS layout, scene.ply.
    resume: continue from out_dir/checkpoint.npz when it exists (same seed and config give the
    same result as an uninterrupted run). callback(step, info) runs after every step; a
    KeyboardInterrupt (Ctrl-C or from the callback) saves a checkpoint and returns early with
    `interrupted=True`. devices: train data-parallel on this many devices, one view per device
    and step (the loss is the mean over those views).
    """
    if devices < 1 or devices > jax.device_count():
        raise TrainError(f"asked for {devices} devices, {jax.device_count()} available")
    out = Path(out_dir) if out_dir is not None else None
    if int(getattr(method, "NUM_FEATURES", 3)) != 3:
        raise TrainError(
            f"{method.NAME} renders {method.NUM_FEATURES} channels; training needs RGB (3)"
        )
    train_views = _views(train_set)
    test_views = _views(test_set) if test_set is not None else train_views
    data = _stack_views(train_views, "training")
    test_data = _stack_views(test_views, "test")
    background = (
        np.asarray(config.background, np.float32)
        if config.background is not None
        else _infer_background(train_views)
    )
    scale = scene_scale(train_set)
    hyper = _hyper(method, config, scale, background)
    roles = param_roles(method)
    params0, used0 = init_params(method, train_set, config)
    params = {k: jnp.asarray(v) for k, v in params0.items()}
    opt0 = _optimizer(hyper["lrs"], roles["position"], 1.0)
    state = {
        "params": params,
        "opt": opt0.init(params),
        "step": jnp.asarray(0, jnp.int32),
        "key": jax.random.PRNGKey(config.seed),
        "used": jnp.asarray(used0),
        "max_dropped": jnp.asarray(0, jnp.int32),
    }
    history: list[dict] = []
    evals: list[dict] = []
    elapsed_before = 0.0
    ckpt = out / CHECKPOINT if out is not None else None
    if resume and ckpt is not None and ckpt.is_file():
        state, meta = _load_checkpoint(ckpt, state)
        if meta.get("method") != method.NAME or meta.get("seed") != config.seed:
            raise TrainError(
                f"checkpoint is for method {meta.get('method')!r} seed {meta.get('seed')}, "
                f"this run is {method.NAME!r} seed {config.seed}",
                ckpt,
            )
        history = list(meta.get("history", []))
        evals = list(meta.get("evals", []))
        elapsed_before = float(meta.get("elapsed", 0.0))
        _log(f"resuming from {ckpt} at step {int(state['step'])}", config.progress)

    step_fn = _step_fn(method, config.render, devices)
    if devices > 1:
        # Replicated over the mesh from the start, as the step returns it: one trace.
        from .distributed import device_mesh, replicate

        mesh = device_mesh(devices)
        state, data, hyper = replicate((state, data, hyper), mesh)
    eval_fn = _eval_fn(method, config.render)
    n_views = data["images"].shape[0]
    order_cache: dict = {}

    def meta(elapsed: float) -> dict:
        return {
            "method": method.NAME,
            "spec_sha256": getattr(method, "SPEC_SHA256", ""),
            "seed": config.seed,
            "steps": config.steps,
            "elapsed": elapsed,
            "history": history,
            "evals": evals,
        }

    def evaluate(st, elapsed: float, keep_images: bool = False):
        ps, ss, imgs = [], [], []
        for i in range(test_data["images"].shape[0]):
            img, p, s = eval_fn(
                st["params"],
                st["step"],
                hyper["sh_interval"],
                hyper["background"],
                test_data["images"],
                test_data["cameras"],
                np.int32(i),
            )
            ps.append(float(p))
            ss.append(float(s))
            if keep_images:
                imgs.append(np.asarray(img))
        live = _live_count(method, roles, st, config.min_opacity)
        rec = {
            "step": int(st["step"]),
            "psnr": float(np.mean(ps)),
            "ssim": float(np.mean(ss)),
            "time": round(elapsed, 3),
            "primitives": live,
        }
        return rec, imgs

    start = int(state["step"])
    if start == 0 and not evals:
        rec, _ = evaluate(state, 0.0)
        evals.append(rec)
    initial_psnr = evals[0]["psnr"] if evals and evals[0]["step"] == 0 else None

    pbar = None
    if config.progress:
        from tqdm import tqdm

        pbar = tqdm(
            total=config.steps,
            initial=start,
            desc=f"train {method.NAME}",
            dynamic_ncols=True,
            file=sys.stderr,
        )
    interrupted = False
    t_run = time.perf_counter()
    t_first = None  # after the first (compiling) step
    first_step = start
    step = start
    try:
        while step < config.steps:
            if devices > 1:
                view = np.asarray(
                    [
                        _view_order(config.seed, step * devices + i, n_views, order_cache)
                        for i in range(devices)
                    ],
                    np.int32,
                )
            else:
                view = np.int32(_view_order(config.seed, step, n_views, order_cache))
            state, info = step_fn(state, data, hyper, view)
            step += 1
            if t_first is None:
                jax.block_until_ready(state["step"])
                t_first = time.perf_counter()
                first_step = step
            if step % config.log_every == 0 or step == config.steps:
                rec = {
                    "step": step,
                    "loss": float(info["loss"]),
                    "psnr": float(info["psnr"]),
                    "primitives": int(info["live"]),
                }
                history.append(rec)
                if pbar is not None:
                    pbar.set_postfix(
                        loss=f"{rec['loss']:.4f}",
                        psnr=f"{rec['psnr']:.2f}",
                        live=rec["primitives"],
                        refresh=False,
                    )
            if pbar is not None:
                pbar.update(1)
            elapsed = elapsed_before + time.perf_counter() - t_run
            if config.eval_every > 0 and step % config.eval_every == 0 and step < config.steps:
                rec, _ = evaluate(state, elapsed)
                evals.append(rec)
                _log(
                    f"step {step}: test PSNR {rec['psnr']:.2f} SSIM {rec['ssim']:.4f}",
                    config.progress,
                )
            if (
                ckpt is not None
                and config.checkpoint_every > 0
                and step % config.checkpoint_every == 0
                and step < config.steps
            ):
                _save_checkpoint(ckpt, state, meta(elapsed))
            if callback is not None:
                callback(step, info)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if pbar is not None:
            pbar.close()
    jax.block_until_ready(state["params"])
    t_end = time.perf_counter()
    elapsed = elapsed_before + t_end - t_run
    done_steps = int(state["step"])
    speed = (
        (done_steps - first_step) / (t_end - t_first)
        if t_first and done_steps > first_step
        else 0.0
    )

    final, images = evaluate(state, elapsed, keep_images=out is not None and config.save_renders)
    if not evals or evals[-1]["step"] != final["step"]:
        evals.append(final)
    if interrupted:
        where = f"; checkpoint saved to {ckpt}" if ckpt is not None else ""
        _log(f"interrupted at step {done_steps}{where}", config.progress)
    max_dropped = int(state["max_dropped"])
    if max_dropped:
        _log(
            f"warning: renders dropped up to {max_dropped} (primitive, tile) entries for lack "
            "of capacity; raise RenderConfig.max_entries or entries_per_primitive",
            True,
        )

    host_params = {k: np.asarray(v) for k, v in state["params"].items()}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        _save_checkpoint(ckpt, state, meta(elapsed))
        _write_outputs(
            out,
            method,
            config,
            host_params,
            np.asarray(state["used"]),
            test_views,
            test_data,
            images,
            history,
            evals,
            final,
            speed,
            scale,
            interrupted,
            max_dropped,
        )
    return TrainResult(
        params=host_params,
        step=done_steps,
        metrics=final,
        evals=evals,
        history=history,
        out_dir=out,
        interrupted=interrupted,
        elapsed=elapsed,
        steps_per_second=speed,
        initial_psnr=initial_psnr,
    )


def _live_count(method, roles, state, min_opacity: float) -> int:
    name = roles["opacity"]
    if name is None:
        return int(state["used"].shape[0])
    o = np.asarray(method.activate(state["params"])[name])
    return int(np.sum(o >= min_opacity))


def _write_outputs(
    out: Path,
    method,
    config,
    params,
    used,
    views,
    test_data,
    images,
    history,
    evals,
    final,
    speed,
    scale,
    interrupted,
    max_dropped,
) -> None:
    from . import plots

    if images:
        names = [str(getattr(v, "name", i)) for i, v in enumerate(views)]
        for name, img in zip(names, images, strict=True):
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(name).stem)
            plots.save_png(out / "renders" / f"{safe or 'view'}.png", img)
        gts = np.asarray(test_data["images"])
        plots.comparison_sheet(
            out / "sheet.png",
            [(gts[i], images[i]) for i in range(min(config.sheet_views, len(images)))],
        )
    plots.training_curves(out / "curves.png", history, evals)
    if _is_gaussian_layout(method):
        from .io import save_ply

        save_ply(out / "scene.ply", {k: v[used] for k, v in params.items()})
    report = {
        "method": method.NAME,
        "spec_sha256": getattr(method, "SPEC_SHA256", ""),
        "step": final["step"],
        "interrupted": interrupted,
        "final": final,
        "evals": evals,
        "train": history,
        "steps_per_second": round(speed, 3),
        "scene_scale": scale,
        "max_dropped_entries": max_dropped,
        "config": config.to_json(),
    }
    (out / "metrics.json").write_text(json.dumps(report, indent=1) + "\n")


# ----------------------------------------------------------------------------- demo


def default_spec_path() -> Path:
    """specs/3dgs.xpr next to the package (a source checkout or editable install)."""
    return Path(__file__).resolve().parent.parent / "specs" / "3dgs.xpr"


def demo(
    out_dir="xprc-demo",
    *,
    method=None,
    steps: int = 1500,  # ~3 steps/s at 128x128 on 2 cores: ~10 minutes with the scene
    size: tuple[int, int] = (128, 128),
    n_train: int = 24,
    n_test: int = 8,
    seed: int = 0,
    config: TrainConfig | None = None,
    resume: bool = False,
) -> TrainResult:
    """Generate the bundled demo scene (once) in out_dir/scene and train 3DGS on it.

    method: a method module (default: specs/3dgs.xpr compiled with `xprc.load`). The run folder
    is out_dir itself (metrics.json, curves.png, sheet.png, renders/, scene.ply, checkpoint.npz).
    """
    from .datasets import load_scene
    from .demo_scene import generate_demo_scene

    out = Path(out_dir)
    scene = out / "scene"
    if not (scene / "transforms_train.json").is_file() or not (scene / "points3d.ply").is_file():
        generate_demo_scene(scene, n_train=n_train, n_test=n_test, size=size, seed=seed)
    train_set, test_set = load_scene(scene)
    if method is None:
        from .compiler.driver import load

        path = default_spec_path()
        if not path.is_file():
            raise TrainError(f"default spec not found at {path}; pass method=")
        method = load(path)
    if config is None:
        config = TrainConfig(
            steps=steps,
            seed=seed,
            eval_every=max(steps // 6, 1),
            checkpoint_every=max(steps // 6, 1),
        )
    return train(method, train_set, test_set, out, config, resume=resume)
