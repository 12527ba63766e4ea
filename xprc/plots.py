"""Run-folder pictures: training curves (matplotlib, headless Agg), image sheets and PNGs (PIL)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont


def to_uint8(img) -> np.ndarray:
    """[H, W, C] floats in [0, 1] -> uint8 (rounded, clipped)."""
    return np.round(np.clip(np.asarray(img, np.float64), 0.0, 1.0) * 255.0).astype(np.uint8)


def _destination(dest):
    """A path (its folder is created) or an open binary file, as given."""
    if isinstance(dest, str | os.PathLike):
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
    return dest


def save_png(dest, img) -> None:
    """Write an [H, W, 3] float image in [0, 1] as PNG to a path or an open binary file."""
    Image.fromarray(to_uint8(img)).save(_destination(dest), format="PNG")


def kind_image(out, kind: str, raw: bool = False) -> np.ndarray:
    """One `RenderOutput` as a picture: 'rgb' the image, 'alpha' the coverage, 'depth' the
    expected depth (needs mode RGB+ED or ED) scaled to [0, 1] over the covered pixels, near
    bright, uncovered black. raw=True: the unscaled float32 values ([H, W, 3] or [H, W, 1])."""
    if kind == "rgb":
        return np.asarray(out.image, np.float32)
    alpha = np.asarray(out.alpha, np.float32)
    if kind == "alpha":
        return alpha if raw else np.repeat(alpha, 3, axis=-1)
    depth = np.asarray(out.depth, np.float32)
    if raw:
        return depth
    covered, lo, hi = depth_scale(out)
    if lo is None:
        return np.zeros((*depth.shape[:2], 3), np.float32)
    scaled = np.where(covered[..., None], 1.0 - (depth - lo) / max(hi - lo, 1e-6), 0.0)
    return np.repeat(np.clip(scaled, 0.0, 1.0), 3, axis=-1).astype(np.float32)


def depth_scale(out) -> tuple[np.ndarray, float | None, float | None]:
    """(covered [H, W]: alpha > 0.5, lo, hi): the depths `kind_image` maps to white and black,
    the 1st and 99th percentiles of the covered pixels' (None, None when none is covered)."""
    covered = np.asarray(out.alpha, np.float32)[..., 0] > 0.5
    if not covered.any():
        return covered, None, None
    lo, hi = np.percentile(np.asarray(out.depth, np.float32)[covered, 0], (1, 99))
    return covered, float(lo), float(hi)


# The kinds of picture every render has (`kind_image` draws them); `xprc render --kind` and the
# viewer's "Show" menu offer these and the spec's per-pixel outputs (`output_kinds`).
BUILT_IN_KINDS = ("rgb", "depth", "alpha")


def output_kinds(pixel_outputs) -> dict[str, list[int]]:
    """The per-pixel outputs a spec declares (its PIXEL_OUTPUTS channel names) as render kinds:
    {name: its channels in `RenderOutput.extra`}, 'normal.x', 'normal.y', 'normal.z' grouped as
    'normal'. A name of a built-in kind is left out: an emitted `depth` is what the built-in
    depth kind shows (it replaces the sort depth), and `alpha` cannot be emitted."""
    kinds: dict[str, list[int]] = {}
    for i, channel in enumerate(pixel_outputs):
        kinds.setdefault(channel.split(".")[0], []).append(i)
    return {k: v for k, v in kinds.items() if k not in BUILT_IN_KINDS}


def needs_outputs(pixel_outputs, kind: str) -> bool:
    """Whether a picture of `kind` reads a spec's per-pixel outputs (its PIXEL_OUTPUTS): one of
    them, or the depth of a spec that emits `depth` (which replaces the sort depth). A render
    for any other kind can leave them out (`RenderConfig.pixel_outputs=False`)."""
    return kind in output_kinds(pixel_outputs) or (kind == "depth" and "depth" in pixel_outputs)


def output_image(out, channels, raw: bool = False) -> tuple[np.ndarray, str]:
    """A per-pixel output (`channels` of `out.extra`) as a picture, and what its levels mean.

    3 channels (normals, directions): (v + 1) / 2 as RGB, so [-1, 1] spans the colours; 1 channel:
    grey from its 1st (black) to 99th (white) percentile over the covered pixels (alpha > 0.5),
    the others black; any other count: one such grey panel per channel, side by side. The
    values are the composited ones, `sum_i w_i x_i` (weighted by alpha, not divided by it).
    raw=True: the float32 values [H, W, K] (and no note)."""
    values = np.asarray(out.extra, np.float32)[..., list(channels)]
    if raw:
        return values, ""
    if values.shape[-1] == 3:
        outside = int(np.sum(np.abs(values) > 1.0))
        image = np.clip((values + 1.0) / 2.0, 0.0, 1.0)
        return image, (
            f"(x, y, z) as RGB (v + 1) / 2: -1 black, 0 mid grey, +1 full; {outside} value(s) "
            "beyond [-1, 1] clipped; alpha-weighted sums, as composited"
        )
    covered = np.asarray(out.alpha, np.float32)[..., 0] > 0.5
    panels, ranges = [], []
    for k in range(values.shape[-1]):
        v = values[..., k]
        if covered.any():
            lo, hi = (float(x) for x in np.percentile(v[covered], (1, 99)))
            grey = np.where(covered, (v - lo) / max(hi - lo, 1e-12), 0.0)
            ranges.append(f"{lo:.4g} (black) to {hi:.4g} (white)")
        else:
            grey = np.zeros_like(v)
            ranges.append("no pixel covered (alpha > 0.5): black")
        panels.append(np.repeat(np.clip(grey, 0.0, 1.0)[..., None], 3, axis=-1))
    image = np.concatenate(panels, axis=1).astype(np.float32)
    where = "" if len(panels) == 1 else f" ({len(panels)} channels, left to right)"
    return image, (
        f"{'; '.join(ranges)}{where}, this view's 1st to 99th percentile over the pixels with "
        "alpha > 0.5 (the others black); alpha-weighted sums, as composited"
    )


def comparison_sheet(dest, pairs: Sequence[tuple], labels=("ground truth", "render")) -> None:
    """One row per view: ground truth | render, images [H, W, 3] in [0, 1], all the same size;
    a PNG written to a path or an open binary file."""
    if not pairs:
        return
    h, w = np.asarray(pairs[0][0]).shape[:2]
    pad, head = 4, 14
    sheet = Image.new("RGB", (2 * w + 3 * pad, head + len(pairs) * (h + pad) + pad), "white")
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default()
    for col, label in enumerate(labels):
        draw.text((pad + col * (w + pad), 1), label, fill=(60, 60, 60), font=font)
    for row, pair in enumerate(pairs):
        for col, img in enumerate(pair):
            sheet.paste(
                Image.fromarray(to_uint8(img)), (pad + col * (w + pad), head + row * (h + pad))
            )
    sheet.save(_destination(dest), format="PNG")


def _smooth(ys: Sequence[float], window: int) -> np.ndarray:
    """Trailing moving average (the first values average over what exists)."""
    arr = np.asarray(ys, np.float64)
    if window <= 1 or arr.size < 2:
        return arr
    padded = np.concatenate([np.full(window - 1, arr[0]), arr])
    return np.convolve(padded, np.ones(window) / window, mode="valid")


def training_curves(dest, train_log: Sequence[dict], evals: Sequence[dict]):
    """Training loss (log scale) and PSNR (train, smoothed; test at each evaluation) by step.
    Returns the matplotlib Figure written (PNG) to `dest`, a path or an open binary file."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # headless; no pyplot state
    from matplotlib.figure import Figure

    steps = [r["step"] for r in train_log]
    window = max(1, len(steps) // 50)
    fig = Figure(figsize=(10, 3.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    loss_ax, psnr_ax = fig.subplots(1, 2)
    if steps:
        loss = _smooth([r["loss"] for r in train_log], window)
        loss_ax.plot(steps, np.where(loss > 0, loss, np.nan), color="C0", label="train loss")
        loss_ax.set_yscale("log")
        psnr_ax.plot(steps, _smooth([r["psnr"] for r in train_log], window), "C0", label="train")
    if evals:
        psnr_ax.plot(
            [e["step"] for e in evals], [e["psnr"] for e in evals], "o-", color="C3", label="test"
        )
    loss_ax.set(title="training loss", xlabel="step", ylabel="loss")
    psnr_ax.set(title="PSNR", xlabel="step", ylabel="PSNR (dB)")
    return _finish(fig, (loss_ax, psnr_ax), dest)


def _finish(fig, axes, dest):
    """Grid and legend on each of `axes`, the figure written as PNG to `dest`; returns it."""
    for ax in axes:
        ax.grid(True, color="0.9")
        if ax.has_data():
            ax.legend(loc="best")
    fig.savefig(_destination(dest), format="png")
    return fig


def compared_curves(dest, runs: dict, title: str, resets: Sequence[int] = ()):
    """Several runs on shared axes: test PSNR at each evaluation (left) and training loss (log
    scale, smoothed as `training_curves` does; right) by step, one colour a run. `runs`:
    {label: {"history": train log rows (step, loss), "evals": rows (step, psnr)}}; `resets`:
    steps drawn as dotted grey lines labelled "opacity reset" (ADC's). Returns the matplotlib
    Figure written (PNG) to `dest`, a path or an open binary file."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # headless; no pyplot state
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    psnr_ax, loss_ax = fig.subplots(1, 2, sharex=True)
    for i, (label, run) in enumerate(runs.items()):
        colour = f"C{i}"
        evals = run.get("evals") or []
        if evals:
            psnr_ax.plot([e["step"] for e in evals], [e["psnr"] for e in evals], "o-",
                         color=colour, label=label)  # fmt: skip
        history = run.get("history") or []
        if history:
            window = max(1, len(history) // 50)
            loss = _smooth([r["loss"] for r in history], window)
            loss_ax.plot([r["step"] for r in history], np.where(loss > 0, loss, np.nan),
                         color=colour, label=label)  # fmt: skip
    if loss_ax.has_data():
        loss_ax.set_yscale("log")
    for ax in (psnr_ax, loss_ax):
        for i, step in enumerate(resets):
            ax.axvline(step, color="0.5", linestyle=":", label="opacity reset" if i == 0 else None)
    psnr_ax.set(title="test PSNR (held-out views)", xlabel="step", ylabel="PSNR (dB)")
    loss_ax.set(title="training loss (smoothed)", xlabel="step", ylabel="loss")
    fig.suptitle(title)
    return _finish(fig, (psnr_ax, loss_ax), dest)
