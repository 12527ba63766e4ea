"""`xprc render` / `xprc train` end to end on a tiny generated scene, and their user errors."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from xprc.cli import main
from xprc.demo_scene import generate_demo_scene
from xprc.io import save_ply
from xprc.scenes import random_scene


@pytest.fixture(scope="module")
def tiny_scene(tmp_path_factory):
    root = tmp_path_factory.mktemp("scene")
    generate_demo_scene(root, n_train=3, n_test=2, size=(40, 32), seed=1, n_points=300)
    return root


def test_render_ply_from_dataset_camera(tiny_scene, tmp_path, capsys):
    params = random_scene(50, seed=0)
    params["means"] = params["means"] * 0.2 - np.array([0, 0, 4], np.float32) * 0.2
    ply = tmp_path / "scene.ply"
    save_ply(ply, params)
    out = tmp_path / "view.png"
    code = main(["render", str(ply), "--data", str(tiny_scene), "--view", "1", "-o", str(out)])
    assert code == 0
    img = np.asarray(Image.open(out))
    assert img.shape == (32, 40, 3)
    assert "view 1" in capsys.readouterr().out


def test_render_errors_are_messages(tiny_scene, tmp_path, capsys):
    ply = tmp_path / "scene.ply"
    save_ply(ply, random_scene(5, seed=0))
    code = main(["render", str(ply), "--data", str(tiny_scene), "--view", "9"])
    assert code == 1
    assert capsys.readouterr().err.strip() == "error: --view 9: the test split has 2 views"
    code = main(["render", str(tmp_path / "missing.ply"), "--data", str(tiny_scene)])
    assert code == 1
    assert "missing.ply" in capsys.readouterr().err


def test_train_command_writes_a_run_folder(tiny_scene, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--data",
            str(tiny_scene),
            "--out",
            str(out),
            "--steps",
            "20",
            "--eval-every",
            "20",
        ]
    )
    assert code == 0
    assert (out / "metrics.json").exists()
    assert "test PSNR" in capsys.readouterr().out
    assert main(["train", "--data", str(tiny_scene), "--out", str(out), "--devices", "x"]) == 1
