"""`demo()`: generate the bundled demo scene (once) and train a spec on it."""

from __future__ import annotations

from pathlib import Path

from .config import TrainConfig, TrainError, TrainResult
from .folder import DEMO_DATA
from .loop import train


def default_spec_path() -> Path:
    """The shipped 3DGS spec (in a checkout or an installed wheel)."""
    from ..resources import SPECS_DIR

    return SPECS_DIR / "3dgs.xpr"


def demo(
    out_dir="xprc-demo",
    *,
    method=None,
    steps: int = 1500,  # ~3 steps/s at 128x128 on 2 cores: ~10 minutes with the scene
    size: tuple[int, int] = (128, 128),
    n_train: int = 24,
    n_test: int = 8,
    seed: int = 0,
    config: TrainConfig | None = None,
    resume: bool = False,
) -> TrainResult:
    """Generate the bundled demo scene (once) in out_dir/scene and train 3DGS on it.

    method: a method module (default: specs/3dgs.xpr compiled with `xprc.load`). The run folder
    is out_dir itself (metrics.json, config.json, curves.png, sheet.png, renders/, scene.ply,
    scene.splat, checkpoint.npz).
    """
    from ..data.demo_scene import generate_demo_scene
    from ..data.scene_folder import load_scene

    out = Path(out_dir)
    scene = out / DEMO_DATA
    if not (scene / "transforms_train.json").is_file() or not (scene / "points3d.ply").is_file():
        generate_demo_scene(scene, n_train=n_train, n_test=n_test, size=size, seed=seed)
    train_set, test_set = load_scene(scene)
    if method is None:
        from ..compiler.driver import load

        path = default_spec_path()
        if not path.is_file():
            raise TrainError(f"default spec not found at {path}; pass method=")
        method = load(path)
    if config is None:
        config = TrainConfig(
            steps=steps,
            seed=seed,
            eval_every=max(steps // 6, 1),
            checkpoint_every=max(steps // 6, 1),
        )
    return train(method, train_set, test_set, out, config, resume=resume)
