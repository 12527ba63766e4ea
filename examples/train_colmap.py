"""Train on a COLMAP folder from Python: the layout SfM tools and the Mip-NeRF 360 captures use.

    python examples/train_colmap.py                              # generates a capture, 324x210
    python examples/train_colmap.py --size 64x42 --steps 60      # a quick try
    python examples/train_colmap.py --data path/to/colmap_scene  # yours: sparse/0 + images*/

A COLMAP folder, as `xprc.data.load_scene` reads it (it recognises the folder by `sparse/`):

    SCENE/sparse/0/cameras.bin    the cameras: model (PINHOLE, OPENCV, ...), size, intrinsics
    SCENE/sparse/0/images.bin     per image: its name, camera, and world->camera pose (a unit
                                  quaternion, w first, and a translation; OpenCV axes: x right,
                                  y down, z forward), then its 2D keypoints
    SCENE/sparse/0/points3D.bin   the sparse points, their colours (0..255) and tracks
    SCENE/images/NAME             the photos; images_4/ the same shrunk 4 times (Mip-NeRF 360)

COLMAP's text files (`cameras.txt`, `images.txt`, `points3D.txt`) are read the same way. To
need nothing outside the package, this example generates one with `xprc capture`'s generator,
`xprc.data.capture.generate_capture`: a ray-traced outdoor-like scene seen from a loop of
cameras, written as a binary COLMAP model with `images_4/` and SfM-like sparse points. It
trains 3DGS on it (every 8th view held out, the Mip-NeRF 360 protocol) and writes
OUT/heldout.png: a held-out view's ground truth beside its render. The command line does the
same: `xprc train --data SCENE --images images_4 --out runs/colmap` (docs/photos.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from PIL import Image

import xprc
from xprc.data import load_scene
from xprc.data.capture import CaptureParams, generate_capture
from xprc.train import TrainConfig, train


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="a COLMAP folder (default: generate one)")
    ap.add_argument("--images", default="images_4", help="the image folder under --data")
    ap.add_argument("--out", default="colmap_run")
    ap.add_argument("--size", default="324x210", help="WIDTHxHEIGHT of the generated images_4")
    ap.add_argument("--views", type=int, default=48, help="views of the generated capture")
    ap.add_argument("--steps", type=int, default=1500)
    args = ap.parse_args(argv)

    out = Path(args.out)
    run = out / "run"
    if run.exists():  # the trainer never replaces an earlier run: say so before anything runs
        raise SystemExit(f"{run}: holds an earlier run; remove it or pass another --out")
    data = Path(args.data) if args.data else out / "capture"
    if args.data is None:
        width, height = (int(s) for s in args.size.lower().split("x"))
        params = CaptureParams(views=args.views, size=(width, height), objects=40, points=20_000)
        info = generate_capture(data, params, jobs=2)
        print(f"{'reused' if info['cached'] else 'wrote'} a COLMAP capture of {params.views} "
              f"views of {width}x{height} in {data}")  # fmt: skip
    train_set, test_set = load_scene(data, images=args.images)  # every 8th view: a test view
    print(f"{data}: {len(train_set)} training and {len(test_set)} test views, "
          f"{len(train_set.points):,} sparse points")  # fmt: skip

    method = xprc.load("3dgs")
    steps = args.steps
    config = TrainConfig(
        steps=steps,
        sh_degree_interval=max(steps // 3, 1),
        refine_every=max(steps // 6, 1),
        refine_from=steps // 3,
        eval_every=steps,
        checkpoint_every=0,
        progress=False,
        save_renders=False,
    )  # background: None, so the trainer infers it from the images (and says which)
    result = train(method, train_set, test_set, run, config)
    print(f"test PSNR {result.initial_psnr:.2f} -> {result.metrics['psnr']:.2f} dB after "
          f"{result.step} steps; the run folder: {run}")  # fmt: skip

    view = test_set[0]  # ground truth | render, on the background the run trained with
    background = json.loads((run / "metrics.json").read_text())["background"]
    background = np.asarray(background, np.float32)
    image = xprc.render(method, result.params, view.camera(), background=background).image
    pair = np.concatenate([view.image, np.clip(np.asarray(image), 0, 1)], axis=1)
    sheet = out / "heldout.png"
    Image.fromarray((pair * 255 + 0.5).astype(np.uint8)).save(sheet)
    print(f"{view.name}: ground truth | render -> {sheet}")
    return result


if __name__ == "__main__":
    main()
