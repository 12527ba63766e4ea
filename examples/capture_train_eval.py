"""Generate a small benchmark capture, train 3DGS on it and evaluate the held-out views.

The protocol of docs/photos.md (COLMAP layout, images_4, every 8th view held out, PSNR/SSIM to
JSON) with no data outside the package.

    python examples/capture_train_eval.py --out capture_example        # 300 steps, 324x210
    python examples/capture_train_eval.py --steps 30 --size 48x32      # a quick check

It runs the three commands a user runs (`xprc capture`, `xprc train`, `xprc eval`) and prints
the mean PSNR and SSIM of the held-out views; the report is OUT/run/eval.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from xprc.cli import main as xprc


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="capture_example", help="folder for the capture and run")
    ap.add_argument("--size", default="324x210", help="WIDTHxHEIGHT of images_4")
    ap.add_argument("--views", default="48", help="cameras on the loop")
    ap.add_argument("--objects", default="40", help="textured shapes in the scene")
    ap.add_argument("--points", default="20000", help="sparse points")
    ap.add_argument("--steps", default="300", help="training steps")
    ap.add_argument("--test-every", default="8", help="hold out every N-th view")
    args = ap.parse_args(argv)

    out = Path(args.out)
    data, run = out / "capture", out / "run"
    split = ["--images", "images_4", "--test-every", args.test_every]
    steps = int(args.steps)
    commands = [
        ["capture", "--out", str(data), "--size", args.size, "--views", args.views,
         "--objects", args.objects, "--points", args.points],
        ["train", "--data", str(data), *split, "--out", str(run), "--steps", args.steps,
         "--strategy", "adc", "--eval-every", "0", "--checkpoint-every", str(steps)],
        ["eval", str(run), "--data", str(data), *split],
    ]  # fmt: skip
    for command in commands:
        print("xprc " + " ".join(command))
        status = xprc(command)
        if status != 0:
            raise SystemExit(f"xprc {command[0]} failed (exit status {status})")
    report = json.loads((run / "eval.json").read_text())
    mean = report["mean"]
    print(f"{report['views']} held-out views: PSNR {mean['psnr']:.2f} dB, SSIM {mean['ssim']:.4f}")
    return report


if __name__ == "__main__":
    main()
