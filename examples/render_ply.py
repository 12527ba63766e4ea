"""Render a 3DGS PLY written by any standard 3DGS trainer (INRIA's, gsplat's, nerfstudio's).

    python examples/render_ply.py                               # makes its own PLY (below)
    python examples/render_ply.py --ply point_cloud.ply --data path/to/dataset

A 3DGS PLY stores per Gaussian: x y z, f_dc_0..2 and f_rest_* (SH colour), opacity (a logit),
scale_0..2 (log) and rot_0..3 (a quaternion, w first). `xprc.data.load_ply` reads it into the
raw arrays of the shipped `3dgs` spec (means, quats, scales, opacities, sh), so any trainer's
output renders with `xprc.render`. Without `--ply`, this example writes a stand-in PLY with
`xprc.data.save_ply` (the Gaussians a trainer starts from, one per point of the demo scene's
cloud), so it needs nothing outside the package. Each test view becomes OUT/NAME.png: the
photo, the render on white, and its expected depth (near dark, far light; white where the
render is mostly transparent). The command line renders the same way:
`xprc render scene.ply --data DATASET --view all -o renders/`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

import xprc
from xprc.data import generate_demo_scene, load_ply, load_scene, save_ply
from xprc.train import init_params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ply", default=None, help="a 3DGS PLY (default: write a stand-in)")
    ap.add_argument("--data", default=None, help="a Blender or COLMAP folder for the cameras")
    ap.add_argument("--out", default="ply_renders")
    ap.add_argument("--size", type=int, default=128, help="image side of the generated scene")
    args = ap.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = args.data
    if data is None:
        data = out / "scene"
        if not (data / "transforms_train.json").is_file():
            generate_demo_scene(data, n_train=4, n_test=2, size=(args.size, args.size))
    train_views, test_views = load_scene(data)

    method = xprc.load("3dgs")
    ply = args.ply
    if ply is None:  # the stand-in for a trainer's point_cloud.ply
        ply = out / "stand_in.ply"
        save_ply(ply, init_params(method, train_views)[0])
    params = load_ply(ply)
    n = len(params["means"])
    degree = int(np.sqrt(params["sh"].shape[1])) - 1
    print(f"{ply}: {n:,} Gaussians, SH degree {degree}")

    white = np.ones(3, np.float32)
    paths = []
    for view in test_views:
        render = xprc.render(method, params, view.camera(), background=white, mode="RGB+ED")
        image = np.clip(np.asarray(render.image), 0, 1)
        depth = np.asarray(render.depth)[..., 0]  # expected depth: shown where alpha > 0.5
        covered = np.asarray(render.alpha)[..., 0] > 0.5
        near, far = np.percentile(depth[covered], [2, 98]) if covered.any() else (0.0, 1.0)
        depth = np.where(covered, np.clip((depth - near) / max(far - near, 1e-6), 0, 1), 1.0)
        depth = depth[..., None].repeat(3, -1)
        sheet = np.concatenate([view.image, image, depth], axis=1)  # truth | render | depth
        path = out / f"{Path(view.name).stem}.png"
        Image.fromarray((sheet * 255 + 0.5).astype(np.uint8)).save(path)
        print(f"{view.name}: dropped {int(render.stats['dropped'])} entries -> {path}")
        paths.append(path)
    return paths


if __name__ == "__main__":
    main()
