"""Run-folder pictures drawn with PIL alone: training curves and a ground-truth/render sheet."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

_BG = (255, 255, 255)
_AXIS = (60, 60, 60)
_GRID = (225, 225, 225)
_COLORS = ((31, 119, 180), (214, 39, 40), (44, 160, 44))


def to_uint8(img) -> np.ndarray:
    """[H, W, C] floats in [0, 1] -> uint8 (rounded, clipped)."""
    return np.round(np.clip(np.asarray(img, np.float64), 0.0, 1.0) * 255.0).astype(np.uint8)


def save_png(path, img) -> None:
    """Write an [H, W, 3] float image in [0, 1] as PNG."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(to_uint8(img)).save(path)


def comparison_sheet(path, pairs: Sequence[tuple], labels=("ground truth", "render")) -> None:
    """One row per view: ground truth | render, images [H, W, 3] in [0, 1], all the same size."""
    if not pairs:
        return
    h, w = np.asarray(pairs[0][0]).shape[:2]
    pad, head = 4, 14
    sheet = Image.new("RGB", (2 * w + 3 * pad, head + len(pairs) * (h + pad) + pad), _BG)
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default()
    for col, label in enumerate(labels):
        draw.text((pad + col * (w + pad), 1), label, fill=_AXIS, font=font)
    for row, pair in enumerate(pairs):
        for col, img in enumerate(pair):
            sheet.paste(
                Image.fromarray(to_uint8(img)), (pad + col * (w + pad), head + row * (h + pad))
            )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sheet.save(path)


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _panel(draw, box, title, series, log_y=False, font=None) -> None:
    """Draw line series [(label, xs, ys, colour, markers)] into box (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = box
    left, bottom, top = 52, 22, 18
    px0, py0, px1, py1 = x0 + left, y0 + top, x1 - 10, y1 - bottom
    draw.text((x0 + left, y0 + 2), title, fill=_AXIS, font=font)
    pts = [
        (x, y)
        for _, xs, ys, _, _ in series
        for x, y in zip(xs, ys, strict=True)
        if math.isfinite(y)
    ]
    if log_y:
        pts = [(x, math.log10(y)) for x, y in pts if y > 0]
    if not pts:
        draw.rectangle((px0, py0, px1, py1), outline=_AXIS)
        return
    xmin, xmax = min(p[0] for p in pts), max(p[0] for p in pts)
    ymin, ymax = min(p[1] for p in pts), max(p[1] for p in pts)
    if xmax <= xmin:
        xmax = xmin + 1
    if ymax <= ymin:
        ymin, ymax = ymin - 0.5, ymax + 0.5
    span = ymax - ymin
    ymin, ymax = ymin - 0.05 * span, ymax + 0.05 * span

    def sx(x):
        return px0 + (x - xmin) / (xmax - xmin) * (px1 - px0)

    def sy(y):
        return py1 - (y - ymin) / (ymax - ymin) * (py1 - py0)

    for t in _nice_ticks(ymin, ymax):
        y = sy(t)
        draw.line((px0, y, px1, y), fill=_GRID)
        label = f"{10**t:.3g}" if log_y else f"{t:.4g}"
        draw.text((x0 + 2, y - 6), label, fill=_AXIS, font=font)
    for t in _nice_ticks(xmin, xmax):
        x = sx(t)
        draw.line((x, py0, x, py1), fill=_GRID)
        draw.text((x - 10, py1 + 4), f"{t:g}", fill=_AXIS, font=font)
    draw.rectangle((px0, py0, px1, py1), outline=_AXIS)
    legend_y = py0 + 4
    for label, xs, ys, colour, markers in series:
        xy = [
            (sx(x), sy(math.log10(y) if log_y else y))
            for x, y in zip(xs, ys, strict=True)
            if math.isfinite(y) and (y > 0 or not log_y)
        ]
        if len(xy) > 1:
            draw.line(xy, fill=colour, width=2)
        if markers:
            for x, y in xy:
                draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=colour)
        draw.text((px1 - 110, legend_y), label, fill=colour, font=font)
        legend_y += 12


def _smooth(ys: Sequence[float], window: int) -> list[float]:
    if window <= 1 or len(ys) < 2:
        return list(ys)
    arr = np.asarray(ys, np.float64)
    kernel = np.ones(window) / window
    padded = np.concatenate([np.full(window - 1, arr[0]), arr])
    return list(np.convolve(padded, kernel, mode="valid"))


def training_curves(path, train_log: Sequence[dict], evals: Sequence[dict]) -> None:
    """Loss (log scale) and PSNR against step; evaluation PSNR as markers."""
    width, height = 900, 320
    img = Image.new("RGB", (width, height), _BG)
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default()
    steps = [r["step"] for r in train_log]
    window = max(1, len(steps) // 50)
    loss = _smooth([r["loss"] for r in train_log], window)
    train_psnr = _smooth([r["psnr"] for r in train_log], window)
    _panel(
        draw,
        (0, 0, width // 2, height),
        "training loss",
        [("train loss", steps, loss, _COLORS[0], False)],
        log_y=True,
        font=font,
    )
    _panel(
        draw,
        (width // 2, 0, width, height),
        "PSNR (dB)",
        [
            ("train", steps, train_psnr, _COLORS[0], False),
            ("test", [e["step"] for e in evals], [e["psnr"] for e in evals], _COLORS[1], True),
        ],
        font=font,
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
