"""Render the garden workload with specs/3dgs.xpr and write one PNG per camera, timed.

    python benchmarks/render_garden.py --out garden_renders
    python benchmarks/render_garden.py --num 5000 --scale 0.25   # a quick, smaller render

A benchmark, not an example: the garden workload (111,785 Gaussians built from a real point
cloud, three real cameras at 648x420; `xprc.data.workloads.garden_workload`) is a file of the
project's shared data, `../shared/data/garden/test_garden.npz` beside a checkout (or the file
named by `$XPRC_GARDEN`, or `--garden`), not part of the package. Without it this stops with
"garden workload not found". The examples in examples/ need nothing outside the package.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from PIL import Image

import xprc
from xprc.data.workloads import garden_workload

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "specs" / "3dgs.xpr"))
    ap.add_argument("--garden", default=None, help="path to test_garden.npz")
    ap.add_argument("--num", type=int, default=None, help="primitives to keep (default all)")
    ap.add_argument("--scale", type=float, default=1.0, help="resolution factor")
    ap.add_argument("--out", default="garden_renders")
    args = ap.parse_args(argv)

    method = xprc.load(args.spec)
    params, cams = garden_workload(args.garden, num=args.num, scale=args.scale)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, cam in enumerate(cams):
        start = time.perf_counter()
        out = xprc.render(method, params, cam, background=np.zeros(3, np.float32))
        image = np.asarray(out.image)
        seconds = time.perf_counter() - start
        path = out_dir / f"garden_cam{i}.png"
        Image.fromarray((np.clip(image, 0, 1) * 255 + 0.5).astype(np.uint8)).save(path)
        dropped = int(out.stats["dropped"])
        print(
            f"camera {i}: {cam.width}x{cam.height} in {seconds:.2f} s "
            f"(first call includes compilation), dropped {dropped} -> {path}"
        )
        paths.append(path)
    return paths


if __name__ == "__main__":
    main()
