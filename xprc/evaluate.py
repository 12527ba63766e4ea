"""Evaluate a trained scene on a dataset's held-out views: PSNR and SSIM per view and their mean
(`xprc eval`), with `xprc.metrics` (the trainer's own metrics: SSIM is scikit-image's Gaussian
11x11 SSIM).

LPIPS is not computed: it needs a network's weights (AlexNet or VGG, as the 3DGS and gsplat
evaluations use), which xprc does not ship and never downloads. The report says so in its
`lpips` field; compute it from the renders with the reference implementation where its weights
are at hand.

The held-out views must be ones the run did not train on: the run's checkpoint records a digest
of its training cameras, and a split that gives other training views (another --test-every,
--images with other names) is said in a warning, as the metrics are then not held-out metrics.
"""

from __future__ import annotations

import datetime
import json
import warnings
from pathlib import Path

import numpy as np

from . import __version__
from .errors import XprError

LPIPS_NOTE = (
    "not computed: LPIPS needs network weights (AlexNet/VGG) that xprc does not ship and does "
    "not download"
)


def _recorded_inputs(trained) -> dict | None:
    """What the run trained on, as its checkpoint records it (`Trained.meta`: the checkpoint
    read, or a run's PLY's checkpoint.npz); None when nothing records it (a bare PLY)."""
    inputs = (trained.meta or {}).get("inputs")
    return inputs if isinstance(inputs, dict) else None


def _check_split(trained, method, train_set, background) -> str:
    """'same' when the training views of this split are those the run recorded, 'unknown'
    when it recorded none; else a warning and 'different'."""
    recorded = _recorded_inputs(trained)
    if recorded is None or "data.cameras" not in recorded:
        return "unknown"
    from .train.checkpoint import run_inputs
    from .train.data import stack_views
    from .train.outputs import view_names

    views = list(train_set.views)
    cams = stack_views(views, "training")["cameras"]
    mine = run_inputs(method, train_set, cams, view_names(views), background)
    keys = ("data.views", "data.cameras", "data.image_size")
    if all(mine.get(k) == recorded.get(k) for k in keys):
        return "same"
    warnings.warn(
        f"{trained.source}: the training views of this split ({mine['data.views']} at "
        f"{mine['data.image_size']}) are not those the run trained on "
        f"({recorded.get('data.views')} at {recorded.get('data.image_size')}): the test views "
        "may have been trained on, so these are not held-out metrics (give the --images, "
        "--downscale, --test-every and --undistort of the training)",
        RuntimeWarning,
        stacklevel=3,
    )
    return "different"


def evaluate(method, trained, train_set, test_set, background, log=None) -> dict:
    """Render each test view with `trained` (xprc.trained.Trained) and compare: -> the report
    (per_view rows of name, psnr, ssim; mean; lpips note; the split check)."""
    from .metrics import image_metrics
    from .pipeline import render

    views = list(test_set.views)
    if not views:
        raise XprError("the dataset's test split has no views: nothing to evaluate")
    split = _check_split(trained, method, train_set, background)
    if split == "unknown" and log is not None:
        log(f"note: {trained.source} has no record of the views its run trained on (a PLY "
            "outside its run folder, or a checkpoint without it): the split is not checked, so "
            "make sure these test views were held out of its training")  # fmt: skip
    bg = np.asarray(background, np.float32)
    rows = []
    for i, view in enumerate(views):
        out = render(method, trained.params, view.camera(), background=bg)
        image = np.clip(np.asarray(out.image, np.float32), 0.0, 1.0)
        m = image_metrics(image, np.asarray(view.image, np.float32))
        rows.append({"name": view.name, "psnr": float(m["psnr"]), "ssim": float(m["ssim"])})
        if log is not None:
            log(f"view {i} ({view.name}): PSNR {rows[-1]['psnr']:.2f} dB, SSIM "
                f"{rows[-1]['ssim']:.4f}")  # fmt: skip
    return {
        "per_view": rows,
        "mean": {k: float(np.mean([r[k] for r in rows])) for k in ("psnr", "ssim")},
        "lpips": LPIPS_NOTE,
        "split_matches_training": split,
        "views": len(rows),
        "image_size": f"{views[0].width}x{views[0].height}",
        "background": [float(c) for c in bg],
        "xprc_version": __version__,
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def write_report(path: Path, report: dict) -> None:
    from .data.files import write_atomic

    text = json.dumps(report, indent=1) + "\n"
    write_atomic(path, lambda f: f.write(text.encode("utf-8")))
