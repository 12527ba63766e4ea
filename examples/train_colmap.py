"""Train on a COLMAP folder: the layout SfM tools and the Mip-NeRF 360 captures use.

    python examples/train_colmap.py                              # writes its own COLMAP scene
    python examples/train_colmap.py --data path/to/colmap_scene  # yours: sparse/0 + images/

xprc reads COLMAP models (`xprc.data.load_colmap`, or `load_scene`, which recognises the
folder by its `sparse/`) but has no COLMAP writer. So, to need nothing outside the package,
this example ray traces the bundled demo scene and writes it out in COLMAP's text format:

    SCENE/images/NAME.png          the photos (RGB)
    SCENE/sparse/0/cameras.txt     CAMERA_ID MODEL WIDTH HEIGHT PARAMS...  (PINHOLE: fx fy cx cy)
    SCENE/sparse/0/images.txt      two lines per image: first
                                   IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME
                                   (the world->camera rotation as a unit quaternion, w first,
                                   and translation, OpenCV axes: x right, y down, z forward),
                                   then its 2D keypoints (X Y POINT3D_ID ...; empty here)
    SCENE/sparse/0/points3D.txt    POINT3D_ID X Y Z R G B ERROR TRACK[]  (colours 0..255)

COLMAP's binary files (`cameras.bin`, `images.bin`, `points3D.bin`) are read the same way.
Every 8th view (by name) is held out for testing, as in the Mip-NeRF 360 protocol; the command
line is `xprc train --spec 3dgs --data SCENE --out runs/colmap`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

import xprc
from xprc.data import generate_demo_scene, load_scene
from xprc.train import TrainConfig, train


def quaternion(R: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of a rotation matrix, w >= 0 (Shepperd's method: the largest of the four
    squared components is taken from the diagonal, the others from the off-diagonal terms)."""
    tr = np.trace(R)
    squares = [1 + tr, 1 + 2 * R[0, 0] - tr, 1 + 2 * R[1, 1] - tr, 1 + 2 * R[2, 2] - tr]
    k = int(np.argmax(squares))
    s = 2 * np.sqrt(squares[k])  # 4 x that component
    if k == 0:
        q = [s / 4, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    elif k == 1:
        q = [(R[2, 1] - R[1, 2]) / s, s / 4, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s]
    elif k == 2:
        q = [(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, s / 4, (R[1, 2] + R[2, 1]) / s]
    else:
        q = [(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, s / 4]
    q = np.array(q) / np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def write_colmap_scene(root, views, points, colors) -> Path:
    """Write `views` (xprc.data.View, pinhole) and a coloured point cloud as a COLMAP text model
    with its images under `root`. One PINHOLE camera per view."""
    root = Path(root)
    sparse, images = root / "sparse" / "0", root / "images"
    sparse.mkdir(parents=True, exist_ok=True)
    images.mkdir(parents=True, exist_ok=True)
    cam_lines = ["# CAMERA_ID MODEL WIDTH HEIGHT fx fy cx cy"]
    img_lines = ["# IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME, then a POINTS2D line"]
    for i, view in enumerate(views, start=1):
        if view.model != "pinhole":
            raise ValueError(f"{view.name}: this writer knows only pinhole cameras")
        name = f"view_{i:03d}.png"
        pixels = (np.clip(view.image, 0, 1) * 255 + 0.5).astype(np.uint8)
        Image.fromarray(pixels).save(images / name)
        fx, fy, cx, cy = (repr(float(view.K[r, c])) for r, c in ((0, 0), (1, 1), (0, 2), (1, 2)))
        cam_lines.append(f"{i} PINHOLE {view.width} {view.height} {fx} {fy} {cx} {cy}")
        R, t = view.viewmat[:3, :3].astype(np.float64), view.viewmat[:3, 3].astype(np.float64)
        pose = " ".join(repr(float(v)) for v in (*quaternion(R), *t))
        img_lines += [f"{i} {pose} {i} {name}", ""]  # no keypoints: an empty POINTS2D line
    rgb = np.clip(np.round(np.asarray(colors) * 255), 0, 255).astype(int)
    pt_lines = ["# POINT3D_ID X Y Z R G B ERROR TRACK[] (no tracks here)"]
    xyz = np.asarray(points, float).tolist()
    for k, ((x, y, z), (r, g, b)) in enumerate(zip(xyz, rgb.tolist(), strict=True), start=1):
        pt_lines.append(f"{k} {x!r} {y!r} {z!r} {r} {g} {b} 0.0")
    for name, lines in (("cameras", cam_lines), ("images", img_lines), ("points3D", pt_lines)):
        (sparse / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return root


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="a COLMAP folder (default: write one)")
    ap.add_argument("--out", default="colmap_run")
    ap.add_argument("--size", type=int, default=128, help="image side of the generated scene")
    ap.add_argument("--steps", type=int, default=1500)
    args = ap.parse_args(argv)

    out = Path(args.out)
    data = Path(args.data) if args.data else out / "colmap_scene"
    if args.data is None and not (data / "sparse").is_dir():
        demo = generate_demo_scene(out / "blender_scene", n_train=14, n_test=2,
                                   size=(args.size, args.size), n_points=1000)  # fmt: skip
        train_views, test_views = load_scene(demo.root)
        write_colmap_scene(data, [*train_views, *test_views], demo.points, demo.colors)
        print(f"wrote a COLMAP scene of {len(train_views) + len(test_views)} views to {data}")
    train_set, test_set = load_scene(data)  # every 8th view (by name) is a test view
    print(f"{data}: {len(train_set)} training and {len(test_set)} test views, "
          f"{len(train_set.points):,} points")  # fmt: skip

    steps = args.steps
    config = TrainConfig(
        # The generated photos lie on white; for other data the trainer infers it (and says so).
        background=(1.0, 1.0, 1.0) if args.data is None else None,
        steps=steps,
        sh_degree_interval=max(steps // 3, 1),
        refine_every=max(steps // 6, 1),
        refine_from=steps // 3,
        eval_every=steps,
        checkpoint_every=0,
        progress=False,
        save_renders=False,
    )
    run = out / "run"
    if run.exists():  # the trainer never replaces an earlier run: say so before training
        raise SystemExit(f"{run}: holds an earlier run; remove it or pass another --out")
    result = train(xprc.load("3dgs"), train_set, test_set, run, config)
    print(f"test PSNR {result.initial_psnr:.2f} -> {result.metrics['psnr']:.2f} dB after "
          f"{result.step} steps; the run folder: {run}")  # fmt: skip
    return result


if __name__ == "__main__":
    main()
