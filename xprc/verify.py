"""`xprc verify SPEC`: does the spec's footprint hold every pixel its response reaches?

A footprint (`radius`, `radii` or `box`) only selects tiles; a pixel outside it whose alpha would
reach 1/255 is silently lost. `verify` renders random scenes (ordinary, large, near, edge-on and
partly-behind primitives) through every camera model the spec accepts (its `cameras`), once with
the spec's footprints and once with every footprint replaced by the whole image, and reports the
largest difference (colour, alpha or depth) and the primitive and pixel that escaped. Above `tol`
(1e-6) the spec fails. A primitive whose projection is not finite (NaN or inf: the pipeline
leaves it out and counts it in `stats["nonfinite"]`) fails it too, named with the output.

Both renders share one compiled function per camera model: the wrapper method below takes a flag
as an extra (traced) parameter that swaps the box. Rendering is float64 (the caller enables x64:
`verify_cli` does), so the two renders differ only by what the footprint dropped.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np

from xprc.activations import inverse
from xprc.conventions import CAMERA_MODELS
from xprc.errors import XprError, cut_to
from xprc.method_info import MethodInfo

MODELS = CAMERA_MODELS
SCENES = ("random", "large", "near", "edge-on", "behind")
TOL = 1e-6
MAX_SEEDS = 1000  # x 5 scenes x 4 camera models renders: hours already
# A parameter without a role (a kernel's shape, say) is drawn as raw values uniform in
# [-RAW_RANGE, RAW_RANGE], so a footprint is checked over most of its activation's range:
# `0.25 + softplus(raw)` from 0.27 to 4.3, `1 + exp(raw)` from 1.02 to 55.6.
RAW_RANGE = 4.0
_FLAG = "verify__whole_image"  # extra parameter of the wrapper (`__`: never a spec name)


@dataclass
class Escape:
    """The worst difference found, and what caused it."""

    diff: float
    scene: str
    model: str
    pixel: tuple[int, int] | None  # (x, y)
    primitive: int | None
    alpha: float  # the escaped primitive's alpha at that pixel


@dataclass
class NonFinite:
    """The first primitive found with a non-finite projection output."""

    scene: str
    model: str
    primitive: int
    output: str  # e.g. "attrs 'conic.x'", "depth", "box[2]"
    value: float
    count: int  # primitives with a non-finite output in that render


@dataclass
class Report:
    spec: str
    cases: int
    worst: Escape
    tol: float
    nonfinite: NonFinite | None = None

    @property
    def ok(self) -> bool:
        """Every render held its footprints; a report of no renders is never ok."""
        return self.cases > 0 and self.worst.diff <= self.tol and self.nonfinite is None

    def format(self) -> str:
        w = self.worst
        if self.cases <= 0:
            return f"{self.spec}: nothing verified (0 renders): not a pass"
        head = (
            f"{self.spec}: largest difference {w.diff:.3g} over {self.cases} renders "
            f"(tolerance {self.tol:g})"
        )
        if self.nonfinite is not None:
            f = self.nonfinite
            return (
                f"{head}: non-finite projection in scene '{f.scene}', camera model '{f.model}': "
                f"primitive {f.primitive} has {f.output} = {f.value} ({f.count} primitive"
                f"{'s' if f.count != 1 else ''} in that render; the pipeline leaves them out)"
            )
        if self.ok:
            return head + ": footprints hold"
        where = f"scene '{w.scene}', camera model '{w.model}'"
        if w.pixel is None:
            return f"{head} in {where}"
        prim = (
            f"primitive {w.primitive} (alpha {w.alpha:.3g} there) lies outside its footprint"
            if w.primitive is not None
            else "no single primitive escaped (a difference in compositing)"
        )
        return f"{head}: footprint too small in {where}, pixel {w.pixel}: {prim}"


@functools.cache
def switch_for(method) -> _WholeImageSwitch:
    """One wrapper per method, so its compiled renders are reused."""
    return _WholeImageSwitch(method)


def render_pair(method, raw: dict, cam, config):
    """(spec footprints, whole-image footprints) renders of raw params, mode RGB+D."""
    import jax.numpy as jnp

    from xprc.pipeline import render

    switch = switch_for(method)
    n = next(iter(raw.values())).shape[0]
    return tuple(
        render(switch, {**raw, _FLAG: jnp.full((n,), flag)}, cam, mode="RGB+D", config=config)
        for flag in (0.0, 1.0)
    )


def config_for(n: int, width: int, height: int, tile: int):
    """A render config with room for every primitive on every tile."""
    from xprc.pipeline import RenderConfig

    tiles = math.ceil(width / tile) * math.ceil(height / tile)
    return RenderConfig(tile_size=tile, max_entries=n * tiles + 64)


class _WholeImageSwitch:
    """The method with one extra scalar parameter: > 0.5 replaces every box by the image."""

    def __init__(self, method) -> None:
        from xprc.runtime import ParamSpec

        self._method = method
        self.PARAMS = (*method.PARAMS, ParamSpec(_FLAG, "scalar", (), "identity", None))

    def __getattr__(self, name):
        return getattr(self._method, name)

    def project(self, raw, camera):
        import jax.numpy as jnp

        raw = dict(raw)
        flag = raw.pop(_FLAG)
        out = dict(self._method.project(raw, camera))
        box = out["box"]
        whole = jnp.stack(
            [
                jnp.zeros_like(box[:, 0]),
                jnp.zeros_like(box[:, 0]),
                jnp.full_like(box[:, 0], camera.width - 0.5),
                jnp.full_like(box[:, 0], camera.height - 0.5),
            ],
            -1,
        )
        out["box"] = jnp.where(flag[:, None] > 0.5, whole, box)
        if "ellipse" in out:  # whole image: an ellipse of radius 1e6 pixels (positive definite)
            wide = jnp.asarray([1e-12, 0.0, 1e-12], out["ellipse"].dtype)
            out["ellipse"] = jnp.where(flag[:, None] > 0.5, wide, out["ellipse"])
        return out


# ---------------------------------------------------------------------------------------------
# Scenes


def _raw_from(activation: str, value: np.ndarray) -> np.ndarray:
    """A raw value whose activation is `value` for exp, sigmoid and softplus; any other
    parameter takes `value` as its raw value."""
    if activation in ("exp", "sigmoid", "softplus"):
        return inverse(activation, value)
    return value


def _edge_on_quats(rng, n: int) -> np.ndarray:
    """Rotations taking the local z axis (the thin one) to a direction in the image plane."""
    a = rng.uniform(0, 2 * np.pi, n)
    normal = np.stack([np.cos(a), np.sin(a), np.zeros(n)], -1)
    axis = np.cross([0.0, 0.0, 1.0], normal)
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    h = np.sqrt(0.5)  # 90 degrees
    return np.concatenate([np.full((n, 1), h), axis * h], -1)


def scene(method, kind: str, n: int, seed: int) -> dict:
    """Raw parameters of `n` primitives of scene `kind`, for the camera of `cameras()`."""
    rng = np.random.default_rng(seed)
    specs = list(MethodInfo.of(method).params)
    roles = {getattr(p, "role", None): p for p in specs}
    pos = roles.get("position") or next(
        (p for p in specs if tuple(p.shape) == (3,) and p.kind != "quat"), None
    )
    if kind == "random":
        means, size = rng.normal(0, 0.8, (n, 3)), rng.uniform(0.02, 0.4, n)
    elif kind == "large":
        means, size = rng.normal(0, 0.5, (n, 3)), rng.uniform(0.8, 2.5, n)
    elif kind == "near":  # just in front of the camera at z = -4
        means = np.c_[rng.normal(0, 0.15, (n, 2)), rng.uniform(-3.95, -3.5, n)]
        size = rng.uniform(0.02, 0.2, n)
    elif kind == "edge-on":
        means, size = rng.normal(0, 0.6, (n, 3)), rng.uniform(0.2, 0.8, n)
    elif kind == "behind":  # partly behind the camera plane
        means = np.c_[rng.normal(0, 0.4, (n, 2)), rng.uniform(-4.4, -3.7, n)]
        size = rng.uniform(0.3, 1.0, n)
    else:
        raise XprError(f"unknown scene {kind!r} (expected {', '.join(SCENES)})")
    out = {}
    for p in specs:
        shape = (n, *p.shape)
        role = getattr(p, "role", None)
        if p is pos:
            value = means
        elif role == "scale":
            value = size.reshape((n,) + (1,) * len(p.shape)) * rng.uniform(0.5, 1.5, shape)
            if kind == "edge-on" and tuple(p.shape) == (3,):
                value[:, 2] = 1e-3 * size
        elif role == "opacity":
            value = rng.uniform(0.02, 0.99, shape)
        elif p.kind == "quat":
            value = _edge_on_quats(rng, n) if kind == "edge-on" else rng.normal(size=shape)
        elif p.kind == "sh":
            value = rng.normal(0, 0.3, shape)
        else:  # raw values over the trainer's whole working range: the activation's range
            out[p.name] = rng.uniform(-RAW_RANGE, RAW_RANGE, shape)
            continue
        out[p.name] = _raw_from(p.activation, np.asarray(value, np.float64))
    return out


def camera(model: str, width: int, height: int):
    from xprc.camera import look_at

    kwargs = {}
    if model == "opencv":
        kwargs["dist"] = np.array([-0.08, 0.01, 0, 0, 0, 0, 0.002, -0.001])
    elif model == "fisheye":
        kwargs["dist"] = np.array([0.02, -0.005, 0, 0])
    fov = 140.0 if model == "fisheye" else 60.0
    return look_at(
        [0.0, 0.0, -4.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], width, height, fov, model=model,
        near=0.01, **kwargs,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------


def _escaped(method, params: dict, cam, pixel: tuple[int, int], tile: int, alpha_min: float):
    """(primitive, alpha) of the strongest primitive that reaches `pixel` from outside its
    footprint's tiles, or (None, 0)."""
    import jax.numpy as jnp

    from xprc.pipeline.binning import TileGrid, tile_rects

    proj = method.project(params, cam)
    x, y = pixel
    px = jnp.asarray([[x + 0.5, y + 0.5]], jnp.float64)
    ro, rd = cam.pixel_rays(px[..., 0], px[..., 1])
    attrs = proj["attrs"]
    alpha = np.asarray(method.response(px[:, None, :], ro[:, None, :], rd[:, None, :],
                                       attrs[None], cam))  # fmt: skip
    alpha = np.broadcast_to(alpha, (1, attrs.shape[0]))[0]
    grid = TileGrid(cam.width, cam.height, tile)
    x0, y0, w, h, _ = (np.asarray(a) for a in tile_rects(proj["box"], proj["valid"], grid))
    tx, ty = x // tile, y // tile
    covered = (x0 <= tx) & (tx < x0 + w) & (y0 <= ty) & (ty < y0 + h)
    if "ellipse" in proj:  # the tile must also meet the ellipse (an unusable one keeps it)
        from xprc.pipeline.binning import ellipse_hits, ellipse_usable

        n = covered.shape[0]
        at = [jnp.full((n,), v, jnp.int32) for v in (tx, ty)]
        hit = ellipse_hits(proj["centre"], proj["ellipse"], *at, grid)
        covered &= np.asarray(hit | ~ellipse_usable(proj["ellipse"]))
    bad = np.asarray(proj["valid"]) & (alpha >= alpha_min) & ~covered
    if not bad.any():
        return None, 0.0
    i = int(np.argmax(np.where(bad, alpha, -1.0)))
    return i, float(alpha[i])


def _nonfinite(method, params: dict, cam, scene: str, model: str) -> NonFinite | None:
    """The first primitive with a non-finite projection output, or None. The pipeline leaves
    out a primitive whose depth, attrs or features are not finite; a valid primitive's centre,
    box or ellipse must be finite too (an invalid one's are never read)."""
    proj = _project_fn(method)(params, cam)
    valid = np.asarray(proj["valid"])
    found, rows_bad = None, np.zeros(valid.shape, bool)
    for out in ("depth", "attrs", "features", "centre", "box", "ellipse"):
        if out not in proj:
            continue
        a = np.asarray(proj[out], np.float64).reshape(valid.shape[0], -1)
        bad = ~np.isfinite(a)
        if out in ("centre", "box", "ellipse"):
            bad &= valid[:, None]
        rows_bad |= bad.any(1)
        if found is None and bad.any():
            i, k = (int(v[0]) for v in np.nonzero(bad))
            if out == "attrs":
                label = f"attrs '{MethodInfo.of(method).attrs[k]}'"
            else:
                label = out if a.shape[1] == 1 else f"{out}[{k}]"
            found = (i, label, float(a[i, k]))
    if found is None:
        return None
    return NonFinite(scene, model, *found, int(rows_bad.sum()))


@functools.cache
def _project_fn(method):
    import jax

    return jax.jit(method.project)


def accepted_models(method, models=None, name: str = "spec") -> tuple[str, ...]:
    """The camera models to verify: `models`, each one the spec accepts, else all it accepts."""
    accepted = MethodInfo.of(method).camera_models
    accepted = MODELS if accepted is None else accepted  # None: every model
    if models is None:
        return accepted
    models = _sequence("models", models, "camera model names", str)
    for m in models:
        if m not in MODELS:
            raise XprError(f"unknown camera model '{m}' (expected {', '.join(MODELS)})")
        if m not in accepted:
            raise XprError(
                f"{name}: camera model '{m}' is not one the spec accepts "
                f"({', '.join(accepted)}: its 'cameras' declaration or the default)"
            )
    return tuple(models)


def verify(
    method,
    name: str = "spec",
    *,
    models=None,
    scenes=SCENES,
    seeds=(0,),
    n: int = 16,
    width: int = 40,
    height: int = 32,
    tile: int = 8,
    tol: float = TOL,
) -> Report:
    """Render each (scene, seed, model) with the spec's footprints and with whole-image ones;
    `models` None: every model the spec accepts. models, scenes and seeds are non-empty
    sequences without repeats (scenes from SCENES, seeds non-negative integers); n, width,
    height and tile positive integers; tol a finite number >= 0. Anything else is an XprError
    naming the argument, before anything is rendered."""
    import jax.numpy as jnp

    info = MethodInfo.of(method)  # not a method module: the error says so before the rest
    models = accepted_models(info, models, name)
    scenes = _sequence("scenes", scenes, "scene names", str)
    for kind in scenes:
        if kind not in SCENES:
            raise XprError(f"verify: scenes: unknown scene {kind!r} (expected {', '.join(SCENES)})")
    seeds = _sequence("seeds", seeds, "non-negative integers", numbers.Integral)
    for seed in seeds:
        if seed < 0:
            raise XprError(f"verify: seeds: {seed} is negative (seeds are integers >= 0)")
    for arg, value in (("n", n), ("width", width), ("height", height), ("tile", tile)):
        if not _is_int(value) or value < 1:
            raise XprError(f"verify: {arg} must be a positive integer, got {value!r}")
    real = isinstance(tol, numbers.Real) and not isinstance(tol, bool)
    if not (real and math.isfinite(tol) and tol >= 0):
        raise XprError(f"verify: tol must be a finite number >= 0, got {tol!r}")
    config = config_for(n, width, height, tile)
    worst = Escape(0.0, scenes[0], models[0], None, None, 0.0)
    nonfinite = None
    cases = 0
    for model in models:
        cam = camera(model, width, height)
        for kind in scenes:
            for seed in seeds:
                raw = {k: jnp.asarray(v) for k, v in scene(method, kind, n, seed).items()}
                if nonfinite is None:
                    nonfinite = _nonfinite(method, raw, cam, kind, model)
                with warnings.catch_warnings():  # left-out primitives: reported above
                    warnings.filterwarnings("ignore", "render left out", RuntimeWarning)
                    outs = render_pair(method, raw, cam, config)
                cases += 1
                diff = np.zeros((height, width))
                for a, b in zip(outs[0].__dict__.values(), outs[1].__dict__.values(),
                                strict=False):  # fmt: skip
                    if a is None or isinstance(a, (dict, str)):
                        continue
                    d = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
                    diff = np.maximum(diff, np.nan_to_num(d, nan=np.inf).max(-1))
                value = float(diff.max())
                if value > worst.diff:
                    yx = np.unravel_index(int(np.argmax(diff)), diff.shape)
                    pixel = (int(yx[1]), int(yx[0]))
                    prim, alpha = None, 0.0
                    if value > tol:
                        prim, alpha = _escaped(method, raw, cam, pixel, tile, config.alpha_min)
                    worst = Escape(value, kind, model, pixel, prim, alpha)
    return Report(name, cases, worst, tol, nonfinite)


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _sequence(arg: str, value, what: str, kind) -> tuple:
    """`value` as a tuple: a non-empty sequence of `kind`, each once; else an XprError."""
    shown = cut_to(repr(value), 40)
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise XprError(
            f"verify: {arg} must be a sequence of {what}, got {type(value).__name__} {shown}"
        )
    items = tuple(value)
    if not items:
        raise XprError(f"verify: {arg} is empty: nothing would be verified (give at least one)")
    for item in items:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise XprError(f"verify: {arg} must hold {what}, got {item!r}")
    twice = [x for i, x in enumerate(items) if x in items[:i]]
    if twice:  # each check would run (and count) twice
        raise XprError(f"verify: {arg}: {twice[0]!r} is listed twice")
    return items


def verify_file(path, defines=None, **kwargs) -> Report:
    from xprc.compiler.driver import load, parse_defines
    from xprc.resources import spec_path

    method = load(spec_path(path), defines=parse_defines(defines) or None)
    return verify(method, str(path), **kwargs)
