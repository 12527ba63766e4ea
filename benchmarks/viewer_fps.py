"""The viewer's frame rate on this machine: frames per second of `xprc view`'s render path while
the camera moves (reduced resolution) and once it stops (full resolution).

    xprc demo                              # or `xprc demo --steps 1` for a quick scene
    python benchmarks/viewer_fps.py xprc-demo --width 1000 --height 557

The camera orbits the scene from the run's first dataset view and moves in and out, a new pose
each frame, as a drag in the browser does. A frame is what the viewer does for one camera
update: render the spec through the pipeline at the frame size and encode the JPEG it sends
(viser's encoder); the browser's side is not timed. Wall time depends on what else the machine
runs; the CPU seconds per frame (all threads) much less, and bound an idle machine's wall time.
The first frame of each size (XLA compiling) is reported apart; `compiles` counts the renders
traced while the camera moved (0 once warm: static shapes, compiled programs reused).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def orbit(view, frames: int, degrees: float, zoom: float):
    """`frames` poses (wxyz, position, fov) turning about the world z axis through the origin
    (the demo scene's centre), `degrees` per frame, and moving in and out by up to `zoom` of
    the distance (one cycle over the frames), as a user turns and zooms."""
    from xprc.data.colmap import qvec_to_rotmat
    from xprc.data.colmap_write import rotmat_to_qvec
    from xprc.viewer import view_pose

    wxyz, position, fov = view_pose(view)
    for i in range(frames):
        a = math.radians(degrees * (i + 1))
        Rz = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
        R = Rz @ qvec_to_rotmat(wxyz)
        dolly = 1.0 + zoom * math.sin(2 * math.pi * i / frames)
        yield rotmat_to_qvec(R), dolly * (Rz @ position), fov


def measure(frames_of, poses, size, encode) -> dict:
    import importlib

    render_module = importlib.import_module("xprc.pipeline.render")
    times, cpu, first = [], [], None
    traced = render_module.TRACE_COUNT["render"]
    for i, (wxyz, position, fov) in enumerate(poses):
        t0, c0 = time.perf_counter(), time.process_time()
        image = frames_of(wxyz, position, fov, *size)
        encode(image)
        dt = time.perf_counter() - t0
        if i == 0:
            first, traced = dt, render_module.TRACE_COUNT["render"]
        else:
            times.append(dt)
            cpu.append(time.process_time() - c0)
    return {
        "size": f"{size[0]}x{size[1]}",
        "first_frame_s": round(first, 3),
        "fps": round(len(times) / sum(times), 2),
        "median_frame_s": round(float(np.median(times)), 4),
        # CPU seconds (all threads) per frame: what the frame costs whatever else the machine
        # runs; on idle cores the wall time is at most this
        "median_frame_cpu_s": round(float(np.median(cpu)), 4),
        "compiles": render_module.TRACE_COUNT["render"] - traced,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", default="xprc-demo", help="a run folder (xprc demo's)")
    ap.add_argument("--width", type=int, default=1000, help="the browser canvas, CSS pixels")
    ap.add_argument("--height", type=int, default=557)
    ap.add_argument("--frames", type=int, default=36, help="frames timed per size")
    ap.add_argument("--degrees", type=float, default=10.0, help="orbit per frame")
    ap.add_argument("--zoom", type=float, default=0.4, help="dolly in and out by this much")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)

    import jax

    from xprc.data.scene_folder import load_scene
    from xprc.plots import to_uint8
    from xprc.train.folder import DEMO_DATA
    from xprc.trained import load_trained, scene_method
    from xprc.viewer import FrameRenderer

    run = Path(args.run)
    if not (run / DEMO_DATA / "transforms_train.json").is_file():
        sys.exit(f"{run}: not a demo run folder (make one with `xprc demo --out {run}`)")
    views = load_scene(run / DEMO_DATA)[0].views
    trained = load_trained(run, views)
    method = scene_method(trained, None)
    renderer = FrameRenderer(method)
    renderer.set_scene(trained.params, trained.background)

    def encode(image):  # what viser does with the frame it is given
        import io

        from PIL import Image

        Image.fromarray(to_uint8(image)).save(io.BytesIO(), format="JPEG", quality=92)

    rows = []
    aspect = args.width / args.height  # a frame is stretched over the canvas
    for scale in (renderer.moving_scale, 1):
        size = renderer.frame_size(args.width, args.height, scale)
        poses = list(orbit(views[0], args.frames + 1, args.degrees, args.zoom))
        row = measure(lambda *a: renderer.render(*a, "rgb", aspect), poses, size, encode)
        row["while"] = "moving" if scale > 1 else "still (full resolution)"
        rows.append(row)
    n = len(next(iter(trained.params.values())))
    out = {"primitives": n, "canvas": f"{args.width}x{args.height}", "rows": rows,
           "backend": jax.default_backend(), "cpus": __import__("os").cpu_count()}  # fmt: skip
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
