"""Run-folder pictures: the curves have labelled axes and legends that cover no data."""

from __future__ import annotations

import numpy as np
from PIL import Image

from xprc.plots import kind_image, training_curves


def _log(n: int = 150):
    steps = np.arange(10, 10 * n + 1, 10)
    rng = np.random.default_rng(0)
    train = [
        {"step": int(s), "loss": 0.2 * np.exp(-s / 300) + 0.02 + 0.01 * rng.random(),
         "psnr": 12 + 16 * (1 - np.exp(-s / 300)) + rng.random()}
        for s in steps
    ]  # fmt: skip
    evals = [{"step": s, "psnr": 12 + 15 * (1 - np.exp(-s / 300))} for s in range(0, 1501, 250)]
    return train, evals


def test_curves_labelled_and_legend_covers_no_data(tmp_path):
    train, evals = _log()
    fig = training_curves(tmp_path / "curves.png", train, evals)
    image = np.asarray(Image.open(tmp_path / "curves.png"))
    assert image.shape == (360, 1000, 4)
    renderer = fig.canvas.get_renderer()
    for ax, ylabel in zip(fig.axes, ("loss", "PSNR (dB)"), strict=True):
        assert ax.get_xlabel() == "step" and ax.get_ylabel() == ylabel
        box = ax.get_legend().get_window_extent(renderer)
        for line in ax.get_lines():
            xy = ax.transData.transform(np.asarray(line.get_xydata()))
            t = np.linspace(0, 1, 20)[:, None, None]  # points along every segment, too
            xy = (xy[:-1] * (1 - t) + xy[1:] * t).reshape(-1, 2)
            inside = (box.x0 <= xy[:, 0]) & (xy[:, 0] <= box.x1)
            inside &= (box.y0 <= xy[:, 1]) & (xy[:, 1] <= box.y1)
            assert not inside.any(), (ylabel, line.get_label())
    assert [t.get_text() for t in fig.axes[1].get_legend().get_texts()] == ["train", "test"]


def test_curves_of_an_empty_run(tmp_path):
    training_curves(tmp_path / "curves.png", [], [])
    assert (tmp_path / "curves.png").stat().st_size > 0


class _Out:
    image = np.full((2, 3, 3), 0.5, np.float32)
    alpha = np.array([[[1.0], [1.0], [0.0]], [[1.0], [0.6], [0.0]]], np.float32)
    depth = np.array([[[2.0], [4.0], [0.0]], [[3.0], [6.0], [0.0]]], np.float32)


def test_kind_images():
    assert kind_image(_Out, "rgb").shape == (2, 3, 3)
    np.testing.assert_array_equal(kind_image(_Out, "alpha")[..., 1], _Out.alpha[..., 0])
    depth = kind_image(_Out, "depth")[..., 0]
    lo, hi = np.percentile([2.0, 4.0, 3.0, 6.0], (1, 99))
    np.testing.assert_allclose(depth[1, 0], 1 - (3 - lo) / (hi - lo), rtol=1e-6)
    assert depth[0, 0] == 1.0 and depth[1, 1] == 0.0  # nearest bright, farthest dark (clipped)
    assert depth[0, 2] == 0 and depth[1, 2] == 0  # uncovered: black
    np.testing.assert_array_equal(kind_image(_Out, "depth", raw=True), _Out.depth)
