"""`xprc view SCENE`: look at a trained scene in the browser (needs xprc[viewer])."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..errors import printable
from ..train.folder import DEMO_DATA
from .args import (
    SCENE_HELP,
    dataset_options,
    path_arg,
    rgb,
    spec_option,
    viewer_address,
    viewer_options,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scene", type=path_arg, help=SCENE_HELP)
    spec_option(p, scene=True)
    p.add_argument(
        "--data",
        type=path_arg,
        default=None,
        help="dataset folder: its cameras are drawn and the first one starts the view "
        "(default: the run folder's scene/ when it has one, as a demo run does; else none)",
    )
    dataset_options(p)
    p.add_argument(
        "--background",
        type=rgb,
        default=None,
        help="R,G,B in [0, 1] (default: the background the scene was trained with; black when "
        "unknown)",
    )
    viewer_options(p)


def run(args) -> int:
    """`xprc view`: serve until Ctrl-C."""
    from ..trained import load_trained, scene_method
    from ..viewer import Viewer

    views = []
    data = args.data
    scene = Path(args.scene)
    demo_data = scene / DEMO_DATA  # a demo run keeps its dataset here
    if data is None and scene.is_dir() and (demo_data / "transforms_train.json").is_file():
        data = demo_data
    if data is not None:
        from ..data.scene_folder import load_scene

        views = load_scene(data, downscale=args.downscale, test_every=args.test_every,
                           images=args.images, undistort=args.undistort)[0].views  # fmt: skip
    method = scene_method(load_trained(scene, views), args.spec, args.defines)
    host, port = viewer_address(args)
    viewer = Viewer(method, scene, views, background=args.background, host=host, port=port)
    for line in viewer.access_lines():
        print(printable(line), flush=True)
    serve_until_interrupted(viewer)
    return 0


_pause = time.sleep  # (tests stand in a Ctrl-C here)


def serve_until_interrupted(viewer) -> None:
    """Serve until Ctrl-C (KeyboardInterrupt), then stop the viewer."""
    try:
        while True:
            _pause(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        viewer.stop()


def interactive() -> bool:
    """Whether a person can stop a waiting command with Ctrl-C: standard input is a terminal
    (not a CI job, a pipe, /dev/null or a closed input)."""
    stdin = sys.stdin
    try:
        return stdin is not None and not stdin.closed and stdin.isatty()
    except (AttributeError, ValueError, OSError):
        return False
