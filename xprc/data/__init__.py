"""Scene data: datasets, scene files, workloads and the demo scene.

- `datasets`:     `View`, `Dataset`, the train/test split, how images are read and checked
- `blender`:      the NeRF-synthetic (Blender) format
- `colmap`:       `load_colmap`: a COLMAP scene of the model `colmap_files` reads
- `colmap_files`: our own reader of COLMAP sparse models (cameras, images, points3D; .bin, .txt)
- `scene_folder`: `load_scene`, a dataset folder in either format
- `ply`:          3DGS PLYs and point-cloud PLYs
- `npz`:          native checkpoints and other `.npz` archives, read without pickles
- `files`:        `require_file` and `write_atomic`
- `demo_scene`:   the bundled demo scene (ray traced, NeRF-synthetic format)
- `workloads`:    the garden test scene and small random scenes (imports JAX, so not re-exported)

The loaders and writers users call are re-exported here: `from xprc.data import load_scene`.
"""

from .blender import load_blender
from .colmap import load_colmap
from .datasets import Dataset, View, split_every
from .demo_scene import generate_demo_scene
from .npz import load_checkpoint, save_checkpoint
from .ply import load_ply, load_points_ply, save_ply, save_points_ply
from .scene_folder import load_scene

__all__ = [
    "Dataset",
    "View",
    "generate_demo_scene",
    "load_blender",
    "load_checkpoint",
    "load_colmap",
    "load_ply",
    "load_points_ply",
    "load_scene",
    "save_checkpoint",
    "save_ply",
    "save_points_ply",
    "split_every",
]
