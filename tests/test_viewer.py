"""`xprc view`: the frame a real browser (headless Chromium) shows matches a direct render.

Chromium is driven over the DevTools protocol: load the viewer's page, let the server set a known
camera, screenshot the page with everything but the WebGL canvas hidden, and compare with
`xprc.render` of the same camera built here from first principles (pinhole, square pixels,
principal point at the centre, vertical field of view). Skipped only where Chromium is absent.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import numpy as np
import pytest
from PIL import Image

import xprc
from xprc.data.colmap import qvec_to_rotmat
from xprc.data.workloads import random_scene
from xprc.viewer import FrameRenderer, Viewer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
W, H = 320, 240


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self) -> None:
        from websockets.sync.client import connect

        assert CHROMIUM, "chromium is not installed (.ci/run installs it with apt-get)"
        self.profile = tempfile.mkdtemp(prefix="xprc-chromium-")
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "--hide-scrollbars",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            [CHROMIUM, *flags, "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            port = int(match.group(1)) if match else None
            assert line or self.proc.poll() is None, "chromium exited"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json") as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=2**28)
        self.n = 0

    def call(self, method: str, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self.n:
                assert "error" not in msg, msg["error"]
                return msg["result"]

    def screenshot(self) -> np.ndarray:
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.proc.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * math.log10(255.0**2 / mse)


def test_frame_size():
    viewer = FrameRenderer(None, max_pixels=640 * 480)  # the sizing rule alone: no server
    assert viewer.frame_size(640, 480, 4) == (160, 128)  # 160x120, rounded up to buckets
    assert viewer.frame_size(640, 480, 1) == (640, 480)
    assert viewer.frame_size(1280, 960, 1) == (640, 480)  # capped at max_pixels


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),  # CI installs it: there the test must run
    reason="chromium is not installed (apt-get install chromium)",
)

# A known camera, set from the server: at (0.3, -0.2, -3) looking along +z (OpenCV axes),
# rotated 10 degrees about the view axis, 60 degree vertical field of view.
ANGLE = math.radians(10)
WXYZ = np.array([math.cos(ANGLE / 2), 0.0, 0.0, math.sin(ANGLE / 2)])
POSITION = np.array([0.3, -0.2, -3.0])
FOV = math.radians(60)


def _screenshot(viewer, sent) -> np.ndarray:
    """The page's canvas (everything else hidden) once the server has set the known camera
    and `sent(client)` says the frame to look at was sent."""
    browser = Browser()
    try:
        browser.call("Emulation.setDeviceMetricsOverride", width=W, height=H,
                     deviceScaleFactor=1, mobile=False)  # fmt: skip
        browser.call("Page.navigate", url=viewer.url)
        client = _wait(lambda: list(viewer.server.get_clients().values()), "the page")[0]
        _wait(lambda: viewer.camera_known(client), "the page's camera")
        with client.atomic():
            client.camera.fov = FOV
            client.camera.position = POSITION
            client.camera.wxyz = WXYZ
        _wait(lambda: sent(client), "the frame for that camera")
        time.sleep(1.0)  # the browser decodes and draws the frame
        hide = "body * { visibility: hidden !important } canvas { visibility: visible !important }"
        browser.call(
            "Runtime.evaluate",
            expression=f"const s = document.createElement('style'); s.textContent = '{hide}';"
            "document.head.appendChild(s);",
        )
        time.sleep(0.5)
        return browser.screenshot()
    finally:
        browser.close()


def _reference(method, params, background, width: int, height: int, fx_scale: float = 1.0):
    """`xprc.render` of the known camera at width x height, built here: world->camera from the
    pose, K from the vertical field of view (fx = fx_scale * fy: a frame stretched wider)."""
    R = qvec_to_rotmat(WXYZ)
    viewmat = np.eye(4)
    viewmat[:3, :3], viewmat[:3, 3] = R.T, -R.T @ POSITION
    f = (height / 2) / math.tan(FOV / 2)
    K = np.array([[f * fx_scale, 0, width / 2], [0, f, height / 2], [0, 0, 1]])
    cam = xprc.Camera(viewmat=viewmat.astype(np.float32), K=K.astype(np.float32), width=width,
                      height=height)  # fmt: skip
    ref = xprc.render(method, params, cam, background=background).image
    return np.round(np.clip(np.asarray(ref), 0, 1) * 255).astype(np.uint8)


@needs_chromium
def test_browser_frame_matches_direct_render():
    method = xprc.load("3dgs")
    params = random_scene(400, seed=3)
    background = np.array([1.0, 1.0, 1.0], np.float32)
    viewer = Viewer(method, params, background=background, port=_free_port(), moving_scale=2)
    try:
        shot = _screenshot(viewer, lambda c: viewer.shown(c, WXYZ, POSITION, FOV))
    finally:
        viewer.stop()
    ref = _reference(method, params, background, W, H)
    # While the camera moved, the viewer sent a reduced frame first (160x120 rounded up to its
    # size buckets), then the full one.
    sizes = [(size, scale) for _, _, size, scale in viewer.sent]
    assert ((160, 128), 2) in sizes and sizes[-1] == ((W, H), 1)
    assert shot.shape == ref.shape
    assert np.abs(ref.astype(int) - 255).max() > 100  # the scene is in view, not blank
    psnr = _psnr(shot, ref)
    print(f"browser frame vs direct render: PSNR {psnr:.1f} dB")
    assert psnr > 30.0, psnr


@needs_chromium
def test_browser_stretches_a_moving_frame_over_the_canvas():
    """A moving frame of another aspect than the canvas (160x128 for 320x240) is drawn over
    the whole canvas, and its camera (wider pixels) makes it show what the canvas shows: the
    screenshot matches the full-size render of the known camera, and much better than it
    matches the same frame made with square pixels (a narrower view, stretched)."""
    method = xprc.load("3dgs")
    params = random_scene(400, seed=3)
    background = np.array([1.0, 1.0, 1.0], np.float32)
    viewer = Viewer(method, params, background=background, port=_free_port(), moving_scale=2,
                    settle_s=3600.0)  # fmt: skip

    def moving_frame_sent(client) -> bool:
        last = [s for s in viewer.sent if s[0] == client.client_id][-1:]
        return bool(last) and np.allclose(last[0][1][1], POSITION, atol=1e-4)

    try:
        shot = _screenshot(viewer, moving_frame_sent)
    finally:
        viewer.stop()
    assert viewer.sent[-1][2:] == ((160, 128), 2)
    full = _reference(method, params, background, W, H)
    # the square-pixel frame (fx = fy) stretched as the page does: a narrower view, too wide
    square = Image.fromarray(_reference(method, params, background, 160, 128))
    square = np.asarray(square.resize((W, H), Image.BILINEAR))
    assert np.abs(full.astype(int) - 255).max() > 100  # the scene is in view, not blank
    psnr, psnr_square = _psnr(shot, full), _psnr(shot, square)
    print(f"moving frame on the page vs direct render: PSNR {psnr:.1f} dB "
          f"(vs the square-pixel frame: {psnr_square:.1f} dB)")  # fmt: skip
    assert psnr > 30.0 and psnr > psnr_square + 3.0, (psnr, psnr_square)


def test_watch_picks_up_each_checkpoint(tmp_path):
    """`xprc train --view`: the viewer waits for the run's first checkpoint and reloads each new
    one (the trainer's layout: parameters under 'params')."""
    from xprc.data.npz import save_checkpoint

    run = tmp_path / "run"
    viewer = Viewer(xprc.load("3dgs"), run, port=_free_port(), wait=True, background=(1, 1, 1))
    try:
        viewer.watch(interval=0.05)
        assert viewer.params is None and viewer.version == 0
        for n in (10, 20):
            run.mkdir(exist_ok=True)
            save_checkpoint(run / "checkpoint.npz", {"params": random_scene(n, seed=n)}, {})
            _wait(lambda n=n: viewer.params is not None and len(viewer.params["means"]) == n,
                  f"the checkpoint with {n} primitives", timeout=30)  # fmt: skip
            time.sleep(0.05)  # a coarse file clock: the next write must look newer
        assert viewer.version == 2
        np.testing.assert_array_equal(viewer.background, [1, 1, 1])
    finally:
        viewer.stop()


def test_url_of_an_ipv6_host_is_bracketed():
    from xprc.viewer import http_url

    assert http_url("::1", 8099) == "http://[::1]:8099"
    assert http_url("127.0.0.1", 8080) == "http://127.0.0.1:8080"
    assert http_url("localhost", 80) == "http://localhost:80"
