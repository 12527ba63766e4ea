"""Options and results of a training run, and the trainer's error."""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import XprError
from ..method_info import MethodInfo
from ..pipeline import RenderConfig
from .strategies import STRATEGIES

REGULARISERS = ("auto", "on", "off")
APPEARANCE = ("off", "affine")  # the per-view colour compensations (xprc.train.appearance)
# options that change what a run reports and saves, not what it computes (resume may change them)
_REPORTING = ("steps", "eval_every", "checkpoint_every", "log_every", "progress", "save_renders",
              "sheet_views")  # fmt: skip
# render options that bound or report, and leave every rendered value unchanged
_RENDER_POLICY = ("memory_budget", "on_overflow")
# render options the trainer sets itself (pixel_outputs: on exactly when the 2DGS regularisers
# read the outputs), so no part of a run's trajectory; not compared on resume (a checkpoint
# written before pixel_outputs existed has none, one of 9d69eee records it)
TRAINER_SET = ("render.pixel_outputs",)
# seeds a run accepts: jax.random.PRNGKey keeps 32 bits without x64 (larger seeds would collide)
SEED_MAX = 2**32 - 1


class TrainError(XprError):
    """A training run cannot start or resume (missing role, bad dataset, stale checkpoint)."""

    def __init__(self, message: str, path=None, **where) -> None:
        # where: line, column, source_line of a spec location (see roles.spec_location)
        super().__init__(message, filename=None if path is None else str(path), **where)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Options of a training run. Only `render` sets shapes; everything else is a traced value.

    steps:               optimisation steps.
    strategy:            "mcmc" (3DGS-MCMC relocation, default) or "adc" (3DGS adaptive density
                         control in a static capacity); see docs/training.md.
    capacity:            static primitive count; None: the number of initial points (mcmc) or
                         `adc_capacity_factor` times it (adc, which needs free slots to grow).
    lr / lr_default:     learning rates by parameter name, which override the spec's `lr` (each
                         override is logged; a name that is no parameter is an error) / for
                         parameters with neither an entry in `lr` nor a spec `lr` (a value set
                         that no parameter uses is logged). Finite and >= 0 (0 freezes one).
    position_lr_final:   the position lr decays exponentially to this fraction of its start.
    init_opacity:        the initial activated opacity, in (0, 1), of the `role opacity` parameter
                         when the spec gives it no `init` (a value set that the spec's `init`
                         overrides is logged).
    sh_degree_interval:  raise the active SH degree by one every this many steps.
    refine_every / refine_from / refine_until: densification events (relocation for mcmc,
                         clone/split/prune for adc) every `refine_every` steps in [from, until);
                         until None: 5/6 of the run (mcmc) or half of it (adc, as 15k of 30k);
                         refine_every 0 disables them.
    min_opacity:         dead / prune threshold on the activated opacity.
    grow_fraction:       mcmc: unused slots filled per event, at most this fraction of the live.
    noise_lr:            mcmc position noise scale (0 disables it).
    opacity_reg / scale_reg: mcmc regularisers on mean opacity and mean scale.
    grad_threshold:      adc: mean screen-space (NDC) gradient norm above which a primitive is
                         cloned (small) or split (large).
    percent_dense:       adc: "large" is a largest activated size above this x scene scale.
    split_factor:        adc: a split divides the sizes by this (1.6 in 3DGS).
    split_offset:        adc: split offsets ~ N(0, (split_offset x size)^2). None: the spec's
                         `const split_spread` (its per-axis spatial std over its size: the
                         octahedron declares 1/sqrt(10), its size being the vertex distance),
                         else 1, a Gaussian's size being its std (docs/training.md).
    reset_every:         adc: every opacity clamped to 2 x min_opacity every this many steps.
    prune_scale:         adc: after the first reset, prune sizes above this x scene scale.
    pose_opt / intrinsics_opt: learn per-view pose corrections / shared intrinsics and lens
                         coefficients with learning rates `pose_lr` / `intrinsics_lr`.
    pose_lr_final:       the pose lr decays exponentially to this fraction of its start.
    appearance:          "off" (default) or "affine": each training view learns a colour
                         transform (3x3 matrix and offset, identity at the start) applied to its
                         render before the loss, for photos taken with automatic exposure and
                         white balance (3DGS's per-image exposure; xprc.train.appearance). Test
                         views are rendered without it. Not with `random_background`.
    appearance_lr / appearance_lr_final: its learning rate, decaying exponentially to this
                         fraction of its start (3DGS's 0.01 -> 0.001).
    background:          RGB (three numbers in [0, 1]) the images were composited on; None:
                         inferred from the views (median colour where alpha is 0), black
                         without alpha.
    random_background:   each step (and view) re-composite the ground truth on a random colour
                         ~ U[0, 1]^3 and render on it (gsplat's random_bkgd), so alpha must be
                         right at silhouettes; needs alpha in every training view. Evaluation
                         keeps `background`.
    checkpoint_every:    save a checkpoint every this many steps (0: only at the end or on a
                         signal).
    regularisers:        the 2DGS depth distortion and normal consistency (docs/2dgs.md): "auto"
                         (on for a spec whose response emits per-pixel `depth` and `normal`),
                         "on" (an error for a spec without them) or "off".
    distortion_weight / normal_weight: their weights (the paper's 1000, bounded scenes, and 0.05).
    distortion_form:     "squared" (the official rasteriser's sum_{i<j} w_i w_j (m_i - m_j)^2, which
                         the paper's 1000 was tuned with) or "l1" (the paper's equation, from the
                         pipeline's ordered sum); see xprc/train/losses_2dgs.py.
    distortion_from / normal_from: the steps they start at; None: the paper's 3000 and 7000 of
                         its 30k steps as fractions of `steps` (1/10 and 7/30).

    Every field's type and range is checked on construction (`_FIELDS`: counts are integers,
    rates and weights finite numbers >= 0, ...): a bad one is a TrainError naming the field.
    """

    steps: int = 7000
    seed: int = 0
    strategy: str = "mcmc"
    capacity: int | None = None
    adc_capacity_factor: float = 4.0
    num_random_points: int = 10_000
    lr: Mapping[str, float] = dataclasses.field(default_factory=dict)
    lr_default: float = 1e-3
    position_lr_final: float = 0.01
    sh_rest_lr_factor: float = 1.0 / 20.0
    ssim_weight: float = 0.2
    sh_degree_interval: int = 1000
    init_opacity: float = 0.1
    refine_every: int = 100
    refine_from: int = 500
    refine_until: int | None = None
    min_opacity: float = 0.005
    grow_fraction: float = 0.05
    noise_lr: float = 5e5
    opacity_reg: float = 0.01
    scale_reg: float = 0.01
    grad_threshold: float = 2e-4
    percent_dense: float = 0.01
    split_factor: float = 1.6
    split_offset: float | None = None
    reset_every: int = 3000
    prune_scale: float = 0.1
    pose_opt: bool = False
    intrinsics_opt: bool = False
    pose_lr: float = 1e-3
    pose_lr_final: float = 1.0
    intrinsics_lr: float = 1e-4
    appearance: str = "off"
    appearance_lr: float = 0.01
    appearance_lr_final: float = 0.1
    background: tuple[float, ...] | None = None
    random_background: bool = False
    render: RenderConfig = RenderConfig()
    eval_every: int = 1000
    checkpoint_every: int = 1000
    log_every: int = 10
    progress: bool = True
    save_renders: bool = True
    sheet_views: int = 4
    regularisers: str = "auto"
    distortion_weight: float = 1000.0
    distortion_form: str = "squared"
    normal_weight: float = 0.05
    distortion_from: int | None = None
    normal_from: int | None = None

    def __post_init__(self) -> None:
        """Every field's type and range (`_FIELDS`); a bad one is a TrainError naming it."""
        for name, rule in _FIELDS.items():
            value = getattr(self, name)
            if value is None and rule.optional:
                continue
            object.__setattr__(self, name, rule.check(name, value))
        object.__setattr__(self, "lr", _lr_table(self.lr))
        if self.background is not None:
            object.__setattr__(self, "background", _colour("background", self.background))
        if not isinstance(self.render, RenderConfig):
            raise TrainError(f"render must be a RenderConfig, got {_shown(self.render)}")
        if self.appearance != "off" and self.random_background:
            raise TrainError(
                f"appearance {self.appearance!r} does not combine with random_background: a "
                "random background re-composites RGBA images on a colour no camera saw, and "
                "the per-view colour transform is for photos; use one or the other"
            )

    def until(self) -> int:
        """The end of the densification window."""
        if self.refine_until is not None:
            return int(self.refine_until)
        return (5 * self.steps) // 6 if self.strategy == "mcmc" else self.steps // 2

    def regularised(self, method) -> bool:
        """Whether the run adds the 2DGS regularisers for `method` (resolves "auto")."""
        from .losses_2dgs import OUTPUTS, channels

        has = channels(method) is not None
        if self.regularisers == "on" and not has:
            raise TrainError(
                f"regularisers 'on': method {MethodInfo.of(method).name} emits no per-pixel "
                f"{', '.join(OUTPUTS)} (the 2DGS regularisers need them)"
            )
        on = has and self.regularisers != "off"
        if on and not self.render.pixel_outputs:  # the step's render would not composite them
            raise TrainError(
                "render: RenderConfig(pixel_outputs=False) leaves out the per-pixel "
                f"{', '.join(OUTPUTS)} the 2DGS regularisers read (regularisers "
                f"{self.regularisers!r} for {MethodInfo.of(method).name}): keep "
                "pixel_outputs=True, or set regularisers 'off'"
            )
        return on

    def regulariser_form(self, method) -> str | None:
        """The distortion form the train step uses for `method`, None without regularisers."""
        return self.distortion_form if self.regularised(method) else None

    def regulariser_starts(self) -> tuple[int, int]:
        """(distortion, normal consistency) start steps."""
        from .losses_2dgs import DISTORTION_FROM, NORMAL_FROM

        d, n = self.distortion_from, self.normal_from
        d = round(DISTORTION_FROM * self.steps) if d is None else int(d)
        n = round(NORMAL_FROM * self.steps) if n is None else int(n)
        return d, n

    def regulariser_record(self, method) -> dict | None:
        """What the run's 2DGS regularisers are (config.json); None when off."""
        if not self.regularised(method):
            return None
        d, n = self.regulariser_starts()
        return {
            "distortion": {
                "weight": self.distortion_weight,
                "from_step": d,
                "form": self.distortion_form,
            },
            "normal": {"weight": self.normal_weight, "from_step": n},
        }

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["lr"] = dict(self.lr)
        out["render"] = dataclasses.asdict(self.render)
        return out

    def trajectory(self) -> dict:
        """The options a resumed run must share with the checkpoint's to continue it exactly:
        all but the reporting ones, `steps` (a longer run may extend a shorter one), the
        render's memory budget and overflow policy and what the trainer sets itself
        (`TRAINER_SET`), as JSON values (what a checkpoint's metadata holds)."""
        out = {k: v for k, v in self.to_json().items() if k not in _REPORTING}
        render = out.pop("render")  # one key per render option: a difference names the option
        out.update({f"render.{k}": v for k, v in render.items() if k not in _RENDER_POLICY})
        out = {k: v for k, v in out.items() if k not in TRAINER_SET}
        return json.loads(json.dumps(out, default=str))


INT32_MAX = 2**31 - 1  # step counts and intervals are int32 inside the compiled step


def _shown(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclasses.dataclass(frozen=True)
class _Int:
    """An integer field in lo..hi (bool refused); `words` replaces the range in messages."""

    lo: int
    hi: int = INT32_MAX
    optional: bool = False
    words: str | None = None

    def check(self, name: str, value):
        either = " or None" if self.optional else ""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            kind = "an integer" if self.words else f"an integer >= {self.lo}"
            raise TrainError(f"{name} must be {kind}{either}, got {_shown(value)}")
        if not self.lo <= int(value) <= self.hi:
            low = int(value) < self.lo
            words = self.words or (f"an integer >= {self.lo}" if low else
                                   f"an integer <= {self.hi:,} (int32)")  # fmt: skip
            raise TrainError(f"{name} must be {words}{either}, got {int(value)}")
        return int(value)


@dataclasses.dataclass(frozen=True)
class _Num:
    """A finite number field in [lo, hi] (open ends with lo_open / hi_open)."""

    lo: float
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    optional: bool = False

    def words(self) -> str:
        if self.hi == math.inf:
            return "a positive number" if self.lo_open else f"a finite number >= {self.lo:g}"
        return (f"a number in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}"
                f"{')' if self.hi_open else ']'}")  # fmt: skip

    def check(self, name: str, value):
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        v = float(value) if ok else math.nan
        ok = ok and math.isfinite(v) and (self.lo < v if self.lo_open else self.lo <= v)
        if not (ok and (v < self.hi if self.hi_open else v <= self.hi)):
            either = " or None" if self.optional else ""
            raise TrainError(f"{name} must be {self.words()}{either}, got {_shown(value)}")
        return v


@dataclasses.dataclass(frozen=True)
class _Choice:
    options: tuple
    optional: bool = False

    def check(self, name: str, value):
        if not isinstance(value, str) or value not in self.options:
            said = ", ".join(self.options[:-1]) + " or " + self.options[-1]
            raise TrainError(f"unknown {name} {_shown(value)} (expected {said})")
        return value


@dataclasses.dataclass(frozen=True)
class _Bool:
    optional: bool = False

    def check(self, name: str, value):
        try:  # True, False, 0, 1 and NumPy's bools pass
            ok = value in (True, False) and not isinstance(value, float)
        except (TypeError, ValueError):  # an array
            ok = False
        if not ok:
            raise TrainError(f"{name} must be a bool, got {_shown(value)}")
        return bool(value)


_COUNT, _SOME, _WEIGHT = _Int(0), _Int(1), _Num(0.0)
_FRACTION = _Num(0.0, lo_open=True)  # a positive number (a decay's final fraction, a factor)
# every field but lr, background and render (checked in __post_init__), with its type and range
_FIELDS = {
    "steps": _COUNT, "seed": _Int(0, SEED_MAX, words=f"in 0..{SEED_MAX} (2**32 - 1)"),
    "strategy": _Choice(STRATEGIES), "capacity": _Int(1, optional=True),
    "adc_capacity_factor": _Num(1.0), "num_random_points": _SOME, "lr_default": _WEIGHT,
    "position_lr_final": _FRACTION, "sh_rest_lr_factor": _WEIGHT,
    "ssim_weight": _Num(0.0, 1.0), "sh_degree_interval": _SOME,
    "init_opacity": _Num(0.0, 1.0, lo_open=True, hi_open=True),
    "refine_every": _COUNT, "refine_from": _COUNT, "refine_until": _Int(0, optional=True),
    "min_opacity": _Num(0.0, 1.0, hi_open=True), "grow_fraction": _WEIGHT, "noise_lr": _WEIGHT,
    "opacity_reg": _WEIGHT, "scale_reg": _WEIGHT, "grad_threshold": _WEIGHT,
    "percent_dense": _WEIGHT, "split_factor": _FRACTION,
    "split_offset": _Num(0.0, optional=True), "reset_every": _COUNT, "prune_scale": _FRACTION,
    "pose_opt": _Bool(), "intrinsics_opt": _Bool(), "pose_lr": _WEIGHT,
    "pose_lr_final": _FRACTION, "intrinsics_lr": _WEIGHT, "random_background": _Bool(),
    "appearance": _Choice(APPEARANCE), "appearance_lr": _WEIGHT,
    "appearance_lr_final": _FRACTION,
    "eval_every": _COUNT, "checkpoint_every": _COUNT, "log_every": _SOME, "progress": _Bool(),
    "save_renders": _Bool(), "sheet_views": _COUNT, "regularisers": _Choice(REGULARISERS),
    "distortion_weight": _WEIGHT, "distortion_form": _Choice(("squared", "l1")),
    "normal_weight": _WEIGHT, "distortion_from": _Int(0, optional=True),
    "normal_from": _Int(0, optional=True),
}  # fmt: skip


def _lr_table(lr) -> dict[str, float]:
    """TrainConfig.lr as {name: float}: names are strings, rates finite numbers >= 0."""
    if not isinstance(lr, Mapping):
        raise TrainError(f"lr must be a mapping of parameter names to learning rates, got "
                         f"{_shown(lr)}")  # fmt: skip
    out = {}
    for key, value in lr.items():
        if not isinstance(key, str):
            raise TrainError(f"lr: parameter names must be strings, got {_shown(key)}")
        out[key] = _WEIGHT.check(f"lr[{key!r}]", value)
    return out


def _colour(name: str, value) -> tuple[float, float, float]:
    """An RGB colour: three finite numbers in [0, 1]."""
    try:
        items = list(value) if not isinstance(value, (str, bytes, Mapping)) else None
    except TypeError:
        items = None
    unit = _Num(0.0, 1.0)
    if items is None or len(items) != 3:
        raise TrainError(f"{name} must be None or three numbers in [0, 1] (RGB), got "
                         f"{_shown(value)}")  # fmt: skip
    for c in items:
        try:
            unit.check(name, c)
        except TrainError:
            raise TrainError(f"{name} must be None or three numbers in [0, 1] (RGB), got "
                             f"{_shown(value)}") from None  # fmt: skip
    return tuple(float(c) for c in items)


# Named option sets: `preset(name)`, `xprc train --preset NAME`.
# 3dgs-30k: the 3DGS paper's schedule (Kerbl et al. 2023, /work/shared/REFERENCE.md section 8 and
# its train.py defaults): 30k steps; adaptive density control every 100 steps from 500 to 15k,
# clone/split above a mean screen-space gradient of 2e-4, prune opacity < 0.005, opacity
# reset every 3000; the SH degree up by one every 1000; the position lr decaying to 1/100 of its
# start (1.6e-4 -> 1.6e-6, times the scene extent; the other rates are the spec's `lr`); loss
# 0.8 L1 + 0.2 D-SSIM. Evaluated every 7000 steps (3DGS reports 7k and 30k) and at the end.
PRESETS: dict[str, dict] = {
    "3dgs-30k": {
        "steps": 30_000, "strategy": "adc", "refine_every": 100, "refine_from": 500,
        "refine_until": 15_000, "grad_threshold": 2e-4, "min_opacity": 0.005,
        "reset_every": 3000, "percent_dense": 0.01, "sh_degree_interval": 1000,
        "position_lr_final": 0.01, "ssim_weight": 0.2, "eval_every": 7000,
        "checkpoint_every": 5000,
    },
}  # fmt: skip


def schedule_note(config: TrainConfig) -> str | None:
    """One line when the densification schedule does not fit `steps` (a preset's window kept
    with fewer steps, `--preset 3dgs-30k --steps 7000`): densification that never stops, or an
    adc opacity reset in the last 10% of the steps (opacity clamped with no time to recover);
    None when it fits."""
    steps, until = config.steps, config.until()
    said = []
    if config.refine_every > 0 and until >= steps:
        said.append(f"densification never stops (refine_until {until:,} >= steps {steps:,})")
    if config.strategy == "adc" and config.reset_every > 0:
        last = (min(steps, until - 1) // config.reset_every) * config.reset_every
        if last > 0 and last > 0.9 * steps:
            said.append(f"an opacity reset at step {last:,}, in the last 10% of the {steps:,} "
                        f"steps (reset_every {config.reset_every:,})")  # fmt: skip
    if not said:
        return None
    return (f"schedule: {'; '.join(said)}: refine_until and reset_every (TrainConfig; a "
            "preset's are for its own steps) do not suit this number of steps")  # fmt: skip


def preset(name: str, **overrides) -> TrainConfig:
    """The TrainConfig of a named preset (`PRESETS`), `overrides` replacing its fields."""
    if name not in PRESETS:
        raise TrainError(f"unknown preset {_shown(name)} (presets: {', '.join(PRESETS)})")
    return TrainConfig(**{**PRESETS[name], **overrides})


def as_config(config) -> TrainConfig:
    """`config`, or the defaults for None; anything else is a TrainError saying what to pass."""
    if config is None:
        return TrainConfig()
    if not isinstance(config, TrainConfig):  # (it was an AttributeError deep in the run)
        hint = "; pass TrainConfig(**options)" if isinstance(config, Mapping) else ""
        raise TrainError(f"config must be a TrainConfig, got {type(config).__name__} "
                         f"{_shown(config)}{hint}")  # fmt: skip
    return config


def default_of(name: str):
    """A TrainConfig field's default value (a value the run did not set)."""
    return TrainConfig.__dataclass_fields__[name].default


def method_lrs(method, config: TrainConfig, log=None) -> dict[str, float]:
    """Each parameter's learning rate: `config.lr[name]` (the run's, which overrides), else the
    spec's `lr`, else `config.lr_default`. A name in `config.lr` that is no parameter of the
    method is a TrainError listing them. With `log`, says once each rate `config.lr` takes
    from the spec, the parameters at `lr_default` (no `lr` declared), and an `lr_default` set
    to a non-default value that no parameter uses."""
    from ..compiler.names import suggest

    info = MethodInfo.of(method)
    names = [spec.name for spec in info.params]
    for key in config.lr:
        if key not in names:
            raise TrainError(
                f"lr: {key!r} is no parameter of method {info.name}{suggest(key, names)}; its "
                f"parameters are {', '.join(names)}"
            )
    out, fallback = {}, []
    for spec in info.params:
        declared = getattr(spec, "lr", None)
        if spec.name in config.lr:
            out[spec.name] = config.lr[spec.name]
            if declared is not None and log is not None and declared != out[spec.name]:
                log(f"lr of '{spec.name}': {out[spec.name]:g} (TrainConfig.lr), over the spec's "
                    f"{float(declared):g}")  # fmt: skip
        elif declared is not None:
            out[spec.name] = float(declared)
        else:
            out[spec.name] = config.lr_default
            fallback.append(spec.name)
    if fallback and log is not None:
        shown = ", ".join(f"'{n}'" for n in fallback)
        log(f"lr: no `lr` declared in {info.name} for {shown}: "
            f"{'it trains' if len(fallback) == 1 else 'they train'} at lr_default "
            f"{config.lr_default:g}")  # fmt: skip
    if not fallback and log is not None and config.lr_default != default_of("lr_default"):
        log(f"lr_default {config.lr_default:g} has no effect: every parameter of {info.name} "
            "has a learning rate (the spec's `lr` or TrainConfig.lr)")  # fmt: skip
    return out


@dataclasses.dataclass
class TrainResult:
    """What `train` returns. params: raw numpy arrays [capacity, *shape] by parameter name."""

    params: dict
    step: int
    metrics: dict  # the last evaluation: step, psnr, ssim, time, primitives, per_view
    evals: list[dict]
    history: list[dict]  # train log: step, loss, psnr, primitives
    out_dir: Path | None
    interrupted: bool
    elapsed: float  # seconds of training (all runs of a resumed training)
    steps_per_second: float  # xprc.train.progress.StepRate: first step (its compile) left out
    initial_psnr: float | None
    cameras: dict | None = None  # learned camera corrections (pose_opt / intrinsics_opt)
    # the training views' learned colour transforms [V, 3, 4] = [M | b] (appearance "affine"):
    # rgb' = M rgb + b; only their ratios between views are determined (xprc.train.appearance)
    appearance: np.ndarray | None = None
    entry_capacity: int = 0  # the render capacity bucket the run ended with
    signal: str | None = None  # the signal that stopped the run ('SIGTERM', ...), if any
