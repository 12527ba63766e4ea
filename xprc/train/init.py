"""Initial raw parameters of any method from a dataset's points (or a box where cameras look).

Per parameter, first match wins (`init` on the ParamSpec overrides the rule):
  - role `position`: the dataset's points ("points"), or uniform in a box around where the
    cameras look when there are none;
  - role `opacity`: the activated value `TrainConfig.init_opacity` (0.1), mapped back (a
    value set there that the spec's `init` overrides is reported through `log`);
  - kind `quat`: the identity rotation (1, 0, 0, 0) ("identity");
  - kind `sh`: DC from the point colours, `(c - 0.5) / C0`, higher coefficients 0 ("colors");
  - role `scale`: the mean distance to the 3 nearest points, `sqrt(mean d^2)` as in 3DGS,
    mapped back through the activation ("nn_distance");
  - a `[3]` sigmoid param: logit of the point colours ("colors");
  - anything else: zeros ("zeros").
`init` strings: points, colors, identity, nn_distance, zeros, ones, or a number (the activated
value, mapped back through the activation, e.g. "0.1" for a sigmoid param is logit(0.1)); or a
random rule of the raw value, ("normal", mean, std), ("uniform", low, high) or ("unit",) (unit
vectors, uniform on the sphere), drawn from `TrainConfig.seed` and the parameter's name
(`param_rng`), so a run is reproducible and one parameter's draws do not depend on the others.

A parameter that starts from raw 0 because it declares no `init` (and no role or type gives
it one), and one without `lr` (`config.method_lrs`), are named on one line each.

Every guess is reported through `log` (one line each; the trainer's console and train.log): random
points for a dataset without any, points dropped to fit the capacity, grey for points without
colours, the fallback size of a lone point, the look target and the scene scale when the cameras
cannot give them.
"""

from __future__ import annotations

import math
import os
import sys
import zlib
from collections.abc import Callable

import numpy as np
from scipy.spatial import cKDTree

from ..compiler.names import RANDOM_INITS
from ..conventions import SH_C0
from ..memory import physical_memory, size_text
from ..method_info import MethodInfo
from ..pipeline.capacity import BUDGET_ENV, parse_bytes
from .config import TrainConfig, TrainError, as_config, default_of
from .roles import inverse_np, param_roles, shape_of, where

Log = Callable[[str], None]  # reports one line (the trainer's TrainLog, or stderr)
LONE_SIZE = 0.01  # the initial size of a point with no neighbour to measure


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


def nn_distance(points: np.ndarray, log: Log | None = None) -> np.ndarray:
    """sqrt of the mean squared distance to the 3 nearest other points, [P] float64
    (LONE_SIZE for fewer than 2 points, reported through `log`)."""
    p = np.asarray(points, np.float64)
    if len(p) < 2:
        if log is not None and len(p):
            log(f"init: {len(p)} point, no neighbour to measure: its size is assumed {LONE_SIZE}")
        return np.full(len(p), LONE_SIZE)
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


def look_target(centres: np.ndarray, forwards: np.ndarray, log: Log | None = None) -> np.ndarray:
    """The point closest (least squares) to all optical axes; when that is ill-posed (one view,
    parallel axes) one unit in front of the centroid, reported through `log`."""
    a = np.zeros((3, 3))
    b = np.zeros(3)
    for c, d in zip(centres, forwards, strict=True):
        m = np.eye(3) - np.outer(d, d)
        a += m
        b += m @ c
    if np.linalg.cond(a) > 1e6:
        target = centres.mean(axis=0) + forwards.mean(axis=0)
        if log is not None:
            log(f"init: the {len(centres)} camera axes do not meet at a point (one view or "
                f"parallel axes): assuming the cameras look at {numbers_text(target)}, about one "
                "unit in front of their mean centre")  # fmt: skip
        return target
    return np.linalg.solve(a, b)


def scene_scale(dataset, log: Log | None = None) -> float:
    """The 3DGS scene scale: 1.1 x the largest distance of a camera centre from their mean
    (1.0 for a single view or coincident cameras, reported through `log`)."""
    c, _ = camera_poses(views_of(dataset))
    extent = float(1.1 * np.linalg.norm(c - c.mean(axis=0), axis=1).max()) if len(c) > 1 else 1.0
    if len(c) > 1 and extent > 1e-6:
        return extent
    if log is not None:
        why = "one training view" if len(c) < 2 else f"the {len(c)} camera centres coincide"
        log(f"init: {why}: the scene scale (learning rates, densification sizes) is assumed 1.0")
    return 1.0


def numbers_text(values, digits: int = 3) -> str:
    """A short vector for a log line: (0.5, 1.25, -2)."""
    return "(" + ", ".join(f"{float(x):.{digits}g}" for x in values) + ")"


def _const(method, spec, value: float, n: int) -> np.ndarray:
    raw = getattr(spec, "init_raw", None)  # the compiler inverted a text activation (issue 13)
    if raw is not None and getattr(spec, "init", None) == value:
        return np.full((n,) + shape_of(spec), np.float64(raw))
    return np.full((n,) + shape_of(spec), inverse_np(method, spec, np.float64(value)))


# the random init rules and their argument counts: the compiler's own table
RANDOM_RULES = {name: len(args) for name, args in RANDOM_INITS.items()}


def param_rng(seed: int, name: str) -> np.random.Generator:
    """The generator of a parameter's random init: from the run's seed and the parameter's name
    (its crc32), so adding, removing or reordering other parameters changes nothing."""
    return np.random.default_rng([int(seed), zlib.crc32(name.encode("utf-8"))])


def rule_text(rule) -> str:
    """An init rule as the spec writes it: 'normal(0, 0.1)', 'unit()', 'points', '0.1'."""
    if isinstance(rule, tuple) and rule and isinstance(rule[0], str):
        return f"{rule[0]}({', '.join(f'{x:g}' for x in rule[1:])})"
    return f"{rule:g}" if isinstance(rule, float) else str(rule)


def _random(method, spec, rule: tuple, n: int, seed: int) -> np.ndarray:
    """Raw values drawn by a random rule (checked here too: a hand-written module's)."""
    shape = shape_of(spec)
    name, args = rule[0], rule[1:]
    ok = name in RANDOM_RULES and len(args) == RANDOM_RULES[name]
    ok = ok and all(isinstance(x, (int, float)) and np.isfinite(x) for x in args)
    if ok and name == "normal":
        ok = args[1] > 0
    elif ok and name == "uniform":
        ok = args[0] < args[1]
    elif ok:  # unit
        ok = len(shape) == 1 and shape[0] >= 2
    if not ok:
        raise TrainError(
            f"{where(method, spec.name)}: init {rule!r} is not normal(mean, std > 0), "
            "uniform(low < high) or unit() (of a vector)"
        )
    rng = param_rng(seed, spec.name)
    if name == "normal":
        return rng.normal(args[0], args[1], (n,) + shape)
    if name == "uniform":
        return rng.uniform(args[0], args[1], (n,) + shape)
    v = rng.standard_normal((n,) + shape)  # isotropic, so its direction is uniform
    norm = np.linalg.norm(v, axis=1, keepdims=True)
    zero = norm[:, 0] == 0.0  # (a draw of exactly 0 has no direction: probability 0)
    v[zero, 0], norm[zero] = 1.0, 1.0
    return v / norm


def _init_one(method, spec, rule, n: int, pts, cols, nn, seed: int = 0) -> np.ndarray:
    shape = shape_of(spec)
    bad = f"{where(method, spec.name)}: init"
    if isinstance(rule, tuple):
        return _random(method, spec, rule, n, seed)
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


def say_defaults(method, zeros: list, randoms: dict, seed: int, log: Log) -> None:
    """One line naming the parameters that start from raw 0 because the spec declares no `init`
    for them and no role or type gives one (`default_rule`), and one naming those drawn at
    random ({name: rule})."""
    if zeros:
        shown = ", ".join(f"'{k}'" for k in zeros)
        log(f"init: no `init` declared in {MethodInfo.of(method).name} for {shown}: "
            f"{'it starts' if len(zeros) == 1 else 'they start'} from raw 0 (the trainer's "
            "default)")  # fmt: skip
    if randoms:
        shown = ", ".join(f"'{k}' {rule_text(r)}" for k, r in randoms.items())
        log(f"init: random raw values (seed {seed}): {shown}")


def _points(dataset, config: TrainConfig, capacity: int | None, rng, log: Log):
    points = getattr(dataset, "points", None)
    colors = getattr(dataset, "colors", None)
    if points is not None and len(points) > 0:
        pts = np.asarray(points, np.float64).reshape(-1, 3)
        if colors is None:
            log(f"init: the dataset's {len(pts):,} points have no colours: they start grey (0.5)")
            cols = np.full_like(pts, 0.5)
        else:
            cols = np.asarray(colors, np.float64)
            if cols.size and np.all(cols == 0.5):  # what a points3d.ply without rgb reads as
                log(f"init: the dataset's {len(pts):,} point colours are all grey (0.5), as a "
                    "point cloud without colours reads: the colours start grey")  # fmt: skip
        return pts, cols.reshape(-1, 3)
    centres, forwards = camera_poses(views_of(dataset))
    target = look_target(centres, forwards, log)
    half = 0.4 * float(np.mean(np.linalg.norm(centres - target, axis=1)))
    # num_random_points of them: a strategy that grows (ADC) keeps the rest of the capacity
    # free for its clones and splits (filling every slot left ADC no room from the start)
    n_rand = min(capacity or config.num_random_points, config.num_random_points)
    log(f"init: the dataset has no points (no points3d.ply or COLMAP points3D): {n_rand:,} "
        f"random points in a box of half-width {half:.3g} around {numbers_text(target)}, where the "
        "cameras look, with grey colours")  # fmt: skip
    pts = target + rng.uniform(-half, half, (n_rand, 3))
    return pts, 0.5 + 0.05 * rng.standard_normal((n_rand, 3))


def _say_unused_opacity(method, table, roles, config: TrainConfig, log: Log) -> None:
    """Log an `init_opacity` set to a non-default value that cannot take effect."""
    if config.init_opacity == default_of("init_opacity"):
        return
    name = roles["opacity"]
    spec = table.get(name) if name is not None else None
    if spec is None or getattr(spec, "init", None) is not None:
        why = ("it has no `role opacity` parameter" if spec is None else
               f"the spec's init of '{name}' ({rule_text(spec.init)}) sets its initial "
               "opacity")  # fmt: skip
        log(f"init: init_opacity {config.init_opacity:g} has no effect on "
            f"{MethodInfo.of(method).name}: {why}")  # fmt: skip


# copies of each parameter a training step keeps: the parameters, their gradients and Adam's
# two moments (a lower bound: strategies and the step's temporaries add more)
STATE_COPIES = 4
CAPACITY_OPTION = "--capacity, TrainConfig.capacity"  # where a capacity comes from, by default


def state_bytes(method, capacity: int) -> int:
    """At least the bytes a training run of `capacity` primitives holds: each parameter's
    float32 numbers STATE_COPIES times, and the projection's values per primitive (attrs,
    features, depth, box, centre) forward and backward."""
    info = MethodInfo.of(method)
    numbers = sum(math.prod(p.shape) for p in info.params)
    projected = info.num_attrs + info.num_features + 7
    return capacity * 4 * (STATE_COPIES * numbers + 2 * projected)


def check_capacity_memory(
    method, capacity: int, config: TrainConfig | None = None, source: str = CAPACITY_OPTION
) -> None:
    """A TrainError, before anything is allocated, when `capacity` primitives' training state
    cannot fit the memory: XPRC_MEMORY_BUDGET when set, else the machine's physical memory
    (`--capacity 300000000` grew to 20 GB and was killed by the kernel without a word).
    RenderConfig.memory_budget bounds a render's entry buffers, not this. `source` says where
    the capacity came from (a strategy's default is not an option the user gave)."""
    del config  # (the state's size depends on the method and the capacity only)
    env = os.environ.get(BUDGET_ENV)
    budget = parse_bytes(env, BUDGET_ENV) if env is not None else physical_memory()
    need = state_bytes(method, capacity)
    if budget is None or need <= budget:
        return
    info = MethodInfo.of(method)
    numbers = sum(math.prod(p.shape) for p in info.params)
    fits = budget // state_bytes(method, 1)
    over = (f"over the memory budget of {size_text(budget)} ({BUDGET_ENV})" if env is not None
            else f"more than the {size_text(budget)} this machine has ({BUDGET_ENV} sets "
            "another budget)")  # fmt: skip
    raise TrainError(
        f"capacity {capacity:,} ({source}): the training state of "
        f"{capacity:,} {info.name} primitives takes at least {size_text(need)} ({numbers} "
        f"numbers each, kept {STATE_COPIES} times: parameters, gradients and Adam's moments), "
        f"{over}; " + (f"give a capacity of at most {fits:,}" if fits else "no capacity fits")
    )


def init_params(
    method,
    dataset,
    config: TrainConfig | None = None,
    capacity: int | None = None,
    log: Log | None = None,
):
    """Initial raw parameters for `method` from `dataset` (see the module docstring's rule).

    Returns (params {name: float32 [N, *shape]}, used bool [N]) with N = `capacity` (default
    `config.capacity`) or the number of points; slots past the points are unused (opacity ~ 0)
    until a strategy fills them. Each guess it makes is one line to `log` (default: stderr).
    """
    config = as_config(config)
    log = log or _stderr
    rng = np.random.default_rng(config.seed)
    capacity = capacity or config.capacity
    if capacity:  # (None: the points', already in memory)
        check_capacity_memory(method, capacity, config)
    roles = param_roles(method)
    pts, cols = _points(dataset, config, capacity, rng, log)
    n = capacity or len(pts)
    if len(pts) > n:
        log(f"init: the dataset has {len(pts):,} points; the capacity {n:,} keeps a random "
            f"{n:,} ({len(pts) - n:,} dropped)")  # fmt: skip
        keep = np.sort(rng.choice(len(pts), n, replace=False))
        pts, cols = pts[keep], cols[keep]
    n_used = len(pts)
    nn = nn_distance(pts, log)
    if n > n_used:  # unused slots: copies of points, made invisible below
        extra = rng.integers(0, n_used, n - n_used)
        pts = np.concatenate([pts, pts[extra]])
        cols = np.concatenate([cols, cols[extra]])
        nn = np.concatenate([nn, nn[extra]])
    params, table = {}, MethodInfo.of(method).param_table
    _say_unused_opacity(method, table, roles, config, log)
    zeros, randoms = [], {}
    for spec in table.values():
        rule = getattr(spec, "init", None)
        if rule is None:
            rule = default_rule(spec, roles, config.init_opacity)
            zeros += [spec.name] if rule == "zeros" else []
        elif isinstance(rule, tuple):
            randoms[spec.name] = rule
        arr = _init_one(method, spec, rule, n, pts, cols, nn, config.seed)
        params[spec.name] = np.asarray(arr, np.float64).astype(np.float32)
    say_defaults(method, zeros, randoms, config.seed, log)
    used = np.arange(n) < n_used
    if n > n_used and roles["opacity"] is not None:
        spec = table[roles["opacity"]]
        params[spec.name][~used] = np.float32(inverse_np(method, spec, 1e-8))
    return params, used
