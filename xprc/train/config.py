"""Options and results of a training run, and the trainer's error."""

from __future__ import annotations

import dataclasses
import json
import numbers
from collections.abc import Mapping
from pathlib import Path

from ..errors import XprError
from ..method_info import MethodInfo
from ..pipeline import RenderConfig
from .strategies import STRATEGIES

REGULARISERS = ("auto", "on", "off")
# options that change what a run reports and saves, not what it computes (resume may change them)
_REPORTING = ("steps", "eval_every", "checkpoint_every", "log_every", "progress", "save_renders",
              "sheet_views")  # fmt: skip
# render options that bound or report, and leave every rendered value unchanged
_RENDER_POLICY = ("memory_budget", "on_overflow")
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
    lr / lr_default:     learning rates by parameter name / for parameters with neither a spec
                         `lr` nor an entry in `lr` (a ParamSpec's own `lr` wins over both).
    position_lr_final:   the position lr decays exponentially to this fraction of its start.
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
    background:          RGB the images were composited on; None: inferred from the views
                         (median colour where alpha is 0), black without alpha.
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
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TrainError(f"seed must be an integer, got {seed!r}")
        if not 0 <= int(seed) <= SEED_MAX:
            raise TrainError(f"seed must be in 0..{SEED_MAX} (2**32 - 1), got {int(seed)}")
        if self.strategy not in STRATEGIES:
            raise TrainError(
                f"unknown strategy {self.strategy!r} (expected {' or '.join(STRATEGIES)})"
            )
        for name in ("steps", "refine_every", "eval_every", "checkpoint_every", "log_every"):
            if int(getattr(self, name)) < 0:
                raise TrainError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.regularisers not in REGULARISERS:
            raise TrainError(
                f"unknown regularisers {self.regularisers!r} (expected auto, on or off)"
            )
        if self.distortion_form not in ("squared", "l1"):
            raise TrainError(
                f"unknown distortion_form {self.distortion_form!r} (expected squared or l1)"
            )
        if self.random_background not in (True, False):  # 0 and 1 pass
            raise TrainError(f"random_background must be a bool, got {self.random_background!r}")
        for name in ("position_lr_final", "pose_lr_final"):
            value = float(getattr(self, name))
            if not 0.0 < value < float("inf"):
                raise TrainError(f"{name} must be a positive number, got {getattr(self, name)!r}")
        if self.capacity is not None and int(self.capacity) < 1:
            raise TrainError(f"capacity must be >= 1, got {self.capacity}")

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
        return has and self.regularisers != "off"

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
        all but the reporting ones, `steps` (a longer run may extend a shorter one) and the
        render's memory budget and overflow policy, as JSON values (what a checkpoint's
        metadata holds)."""
        out = {k: v for k, v in self.to_json().items() if k not in _REPORTING}
        render = out.pop("render")  # one key per render option: a difference names the option
        out.update({f"render.{k}": v for k, v in render.items() if k not in _RENDER_POLICY})
        return json.loads(json.dumps(out, default=str))


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
    steps_per_second: float  # this run's optimisation speed, compile excluded
    initial_psnr: float | None
    cameras: dict | None = None  # learned camera corrections (pose_opt / intrinsics_opt)
    entry_capacity: int = 0  # the render capacity bucket the run ended with
