"""What a run leaves in its folder: metrics.json, config.json, curves.png, sheet.png,
renders/*.png and, when the spec declares the 3DGS layout (`xprc.data.ply.gaussian_layout`),
scene.ply and scene.splat (web viewers), else params.ply (every parameter, self-describing:
`xprc.data.spec_ply`); each PLY names the spec in its header.

Each file is written through a temporary sibling and a rename (`xprc.data.files.write_atomic`):
a failed write (a full disk) is a TrainError naming the file and leaves the one it would replace
whole.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from .. import __version__
from ..data.files import write_atomic
from ..data.splat import save_splat
from ..method_info import MethodInfo
from .folder import (
    CHECKPOINT,
    CONFIG,
    CURVES,
    METRICS,
    PARAMS_PLY,
    PLY,
    RENDERS,
    SHEET,
    SPLAT,
    writing,
)
from .progress import StepRate
from .strategies.adc import ADC


@dataclasses.dataclass
class RunRecord:
    """Everything the run folder reports about a finished (or interrupted) run."""

    method: object
    config: object  # TrainConfig
    params: dict  # raw numpy [N, ...]
    used: np.ndarray  # [N] bool
    test_views: list
    test_images: np.ndarray  # [V, H, W, 3] ground truth
    renders: list  # [H, W, 3] per test view (empty when not kept)
    history: list
    evals: list
    final: dict
    rate: StepRate  # steps/s, as everywhere (xprc.train.progress.StepRate)
    elapsed: float
    scene_scale: float
    interrupted: bool
    entry_capacity: int
    capacity_raises: list
    densify_totals: dict
    cameras: dict | None
    background: list
    appearance: np.ndarray | None = None  # [V, 3, 4] per training view (appearance "affine")
    data: dict | None = None  # how the training set was read (Dataset.source), for `xprc eval`


def view_names(views) -> list[str]:
    return [str(getattr(v, "name", i)) for i, v in enumerate(views)]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(name).stem) or "view"


def write_outputs(out: Path, rec: RunRecord) -> list[str]:
    """Write the run's files; returns what the user should be told (a file not written)."""
    from .. import plots

    if rec.renders:
        for name, img in zip(view_names(rec.test_views), rec.renders, strict=True):
            path = out / RENDERS / f"{_safe(name)}.png"
            _write(path, lambda f, img=img: plots.save_png(f, img))
        pairs = [(rec.test_images[i], rec.renders[i]) for i in range(len(rec.renders))]
        sheet = pairs[: rec.config.sheet_views]
        _write(out / SHEET, lambda f: plots.comparison_sheet(f, sheet))
    _write(out / CURVES, lambda f: plots.training_curves(f, rec.history, rec.evals))
    notes = _write_ply(out / PLY, rec)
    method, info = rec.method, MethodInfo.of(rec.method)
    run = {
        "method": info.name,
        "spec_sha256": info.spec_sha256,
        "xprc_version": __version__,
        "strategy": rec.config.strategy,
        "config": rec.config.to_json(),
        "regularisers": rec.config.regulariser_record(method),
        "data": rec.data,
        # the split spread used (config.split_offset None defers to the spec's split_spread)
        "split_offset": (
            ADC(method).split_offset(rec.config) if rec.config.strategy == "adc" else None
        ),
    }
    report = {
        "method": info.name,
        "spec_sha256": run["spec_sha256"],
        "spec_path": info.recorded_spec_path,
        "strategy": rec.config.strategy,
        "step": rec.final["step"],
        "interrupted": rec.interrupted,
        "final": rec.final,
        "evals": rec.evals,
        "train": rec.history,
        # steps_per_second = timed_steps / timed_seconds (StepRate: the first step left out);
        # training_seconds: the whole loop, the first step's compile included
        "steps_per_second": round(rec.rate.per_second, 3),
        "timed_steps": rec.rate.steps,
        "timed_seconds": round(rec.rate.seconds, 3),
        "training_seconds": round(rec.elapsed, 3),
        "primitives": rec.final.get("primitives"),
        "scene_scale": rec.scene_scale,
        "background": rec.background,
        "entry_capacity": rec.entry_capacity,
        "capacity_raises": rec.capacity_raises,
        "densification": rec.densify_totals,
        "lpips": "not computed: no LPIPS implementation with offline weights is installed",
        "cameras": rec.cameras,
        "appearance": None if rec.appearance is None else np.asarray(rec.appearance).tolist(),
        "config": run["config"],
    }
    for name, data in ((METRICS, report), (CONFIG, run)):
        text = json.dumps(data, indent=1) + "\n"
        _write(out / name, lambda f, text=text: f.write(text.encode("utf-8")))
    return notes


def _write(path: Path, write) -> None:
    """`write_atomic(path, write)`; an OSError is a TrainError naming `path`."""
    with writing(path):
        write_atomic(path, write)


def _write_ply(path: Path, rec: RunRecord) -> list[str]:
    """scene.ply and scene.splat for a spec in the 3DGS layout, else params.ply; each names the
    spec in its header. Returns the lines to tell the user."""
    from ..data.ply import gaussian_layout, save_ply
    from ..data.spec_ply import save_params_ply, spec_comments, unnameable
    from ..errors import DataError
    from ..trained import GAUSSIAN_SPECS, gaussian_spec

    info = MethodInfo.of(rec.method)
    unnamed = unnameable(info.name, info.spec_sha256)
    comments = spec_comments(info.name, info.spec_sha256) if unnamed is None else []
    layout = gaussian_layout(info.params)
    if layout is None:
        params_ply = path.parent / PARAMS_PLY
        with writing(params_ply):  # (save_params_ply writes atomically itself)
            save_params_ply(params_ply, {k: v[rec.used] for k, v in rec.params.items()},
                            info.params, comments)  # fmt: skip
        notes = [f"no {path.name}: {info.name}'s parameters are not the 3DGS PLY layout, which "
                 f"3DGS viewers read; they are in {PARAMS_PLY}, a PLY that names them, and "
                 f"{CHECKPOINT} (xprc render and xprc view read both)"]  # fmt: skip
        return notes + _unnamed_note(PARAMS_PLY, unnamed)
    gaussians = {key: rec.params[name][rec.used] for key, name in layout.items()}
    with writing(path):
        save_ply(path, gaussians, comments)
    notes = _unnamed_note(path.name, unnamed)
    try:
        with writing(path.parent / SPLAT):
            clipped = save_splat(path.parent / SPLAT, gaussians)
    except DataError as e:  # (a scale beyond float32: the PLY keeps it, the .splat cannot)
        notes.append(f"no {SPLAT}: {e.message}")
    else:
        notes.append(splat_note(gaussians["sh"], clipped))
    if not gaussian_spec(info):
        notes.append(
            f"{path.name}: {info.name}'s parameters fit the 3DGS layout, but it is not a "
            f"Gaussian spec ({', '.join(GAUSSIAN_SPECS)}): 3DGS viewers, and web viewers of "
            f"{SPLAT}, will draw its primitives as Gaussians; xprc render and xprc view "
            "render them with its spec"
        )
    return notes


def splat_note(sh, clipped: int) -> str:
    """What scene.splat loses (the format's limits; path.name's PLY keeps it all)."""
    degree = math.isqrt(int(np.shape(sh)[1])) - 1 if np.ndim(sh) == 3 else 0
    dropped = f" (SH degree {degree} dropped)" if degree > 0 else ""
    return (
        f"{SPLAT}: the DC colour only{dropped}; colour, opacity and rotation in 8 bits; "
        f"{clipped:,} colour value(s) outside [0, 1] clipped ({PLY} keeps them all)"
    )


def _unnamed_note(name: str, why: str | None) -> list[str]:
    if why is None:
        return []
    return [f"{name} has no spec record in its header ({why}): taken out of its run folder "
            f"(whose {CHECKPOINT} and {METRICS} record the spec), xprc render and xprc view of "
            "it need --spec"]  # fmt: skip
