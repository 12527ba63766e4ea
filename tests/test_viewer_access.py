"""The viewer beyond the browser check (tests/test_viewer.py), issue 42: frames come from
programs compiled once per frame size (no compile while the camera moves, nothing dropped,
the same image `xprc.render` gives); the address lines say how another machine reaches it;
`xprc train --view` keeps serving the final scene for a person at a terminal until Ctrl-C,
and a run nobody can interrupt (no terminal) does not wait."""

from __future__ import annotations

import importlib
import io
import math
import socket
import types

import numpy as np
import pytest
from test_commands import tiny_scene  # noqa: F401 - the fixture

import xprc
from xprc.cli import main
from xprc.data import save_ply
from xprc.data.colmap import qvec_to_rotmat
from xprc.data.colmap_write import rotmat_to_qvec
from xprc.data.workloads import random_scene
from xprc.viewer import FrameRenderer, access_lines

RENDER = importlib.import_module("xprc.pipeline.render")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_loopback_viewer_says_how_to_reach_it_from_another_machine():
    assert access_lines("127.0.0.1", 8080) == [
        "viewer: http://127.0.0.1:8080 (Ctrl-C to stop; this machine only: from another "
        "machine, forward the port with `ssh -L 8080:localhost:8080 USER@THIS_MACHINE` and open "
        "http://localhost:8080 there, or listen on every address with --host 0.0.0.0)"
    ]
    assert access_lines("localhost", 8081)[0].startswith("viewer: http://localhost:8081 (")
    assert "ssh -L 9000:localhost:9000" in access_lines("::1", 9000)[0]


def test_any_other_address_prints_a_notice_that_other_machines_can_connect():
    here = socket.gethostname()
    assert access_lines("0.0.0.0", 8080) == [
        "viewer: http://0.0.0.0:8080 (Ctrl-C to stop)",
        "notice: listening on 0.0.0.0, so other machines that can reach this one's port 8080 "
        f"can now connect, with no password: open http://{here}:8080 on them (--host 127.0.0.1 "
        "keeps the viewer to this machine)",
    ]
    assert access_lines("192.0.2.7", 8080)[1].startswith("notice: listening on 192.0.2.7, ")
    # every address, spelt otherwise: the address to open is this machine's name (it said
    # 'open http://[::0]:8080 on them'; hostile pass on issue 43)
    for every in ("::0", "0:0::0"):
        assert f"open http://{here}:8080 on them" in access_lines(every, 8080)[1], every
    assert "open http://192.0.2.7:8080 on them" in access_lines("192.0.2.7", 8080)[1]


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_xprc_view_prints_the_notice_for_an_open_address(host, tmp_path, monkeypatch, capsys):
    """Issue 43 (carried over): `xprc view --host 0.0.0.0` said nothing about other machines
    now reaching it. The command itself prints access_lines (a stand-in viewer: no port is
    opened to the network by a test)."""
    import xprc.cli.view as view_cli
    import xprc.viewer as viewer_module

    class StandIn:
        def __init__(self, method, scene, views, background, host, port):
            self.host, self.port = host, port

        def access_lines(self):
            return viewer_module.access_lines(self.host, self.port)

        def stop(self):
            pass

    def ctrl_c(seconds):
        raise KeyboardInterrupt

    ply = tmp_path / "scene.ply"
    save_ply(ply, random_scene(5, seed=1))
    monkeypatch.setattr(viewer_module, "Viewer", StandIn)
    monkeypatch.setattr(view_cli, "_pause", ctrl_c)
    assert main(["view", str(ply), "--host", host, "--port", "8123"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-len(access_lines(host, 8123)) :] == access_lines(host, 8123)
    notices = [line for line in lines if line.startswith("notice: ")]
    if host == "0.0.0.0":
        assert notices == [access_lines(host, 8123)[1]]
        assert "other machines that can reach this one's port 8123 can now connect" in notices[0]
    else:
        assert notices == []


def _poses(frames: int):
    """A camera turning about the y axis through (0, 0, 4) (random_scene's centre) and moving
    in and out, as a user drags and zooms."""
    for i in range(frames):
        a = math.radians(8 * i)
        R = np.array([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])
        distance = 4.0 * (1.0 + 0.3 * math.sin(i))
        position = np.array([0.0, 0.0, 4.0]) - R[:, 2] * distance  # looking at the centre
        yield rotmat_to_qvec(R), position, math.radians(50)


def test_frames_compile_once_per_size_and_match_a_direct_render():
    method = xprc.load("3dgs")
    params = random_scene(300, seed=5, spread=1.0)
    background = np.array([0.2, 0.3, 0.4], np.float32)
    frames = FrameRenderer(method)
    frames.set_scene(params, background)
    poses = list(_poses(8))
    frames.render(*poses[0], 64, 48, "rgb")  # the first frame of a size compiles
    traced = RENDER.TRACE_COUNT["render"]
    images = [frames.render(*pose, 64, 48, "rgb") for pose in poses[1:]]
    assert RENDER.TRACE_COUNT["render"] == traced  # moving: no compile
    assert frames.regrown == 0
    for image, (wxyz, position, fov) in zip(images, poses[1:], strict=True):
        R = qvec_to_rotmat(wxyz)  # the same camera built here: pinhole, vertical fov
        viewmat = np.eye(4)
        viewmat[:3, :3], viewmat[:3, 3] = R.T, -R.T @ position
        f = 24 / math.tan(fov / 2)
        K = np.array([[f, 0, 32], [0, f, 24], [0, 0, 1]])
        cam = xprc.Camera(viewmat=viewmat.astype(np.float32), K=K.astype(np.float32),
                          width=64, height=48)  # fmt: skip
        ref = xprc.render(method, params, cam, background=background).image
        np.testing.assert_allclose(image, np.asarray(ref), atol=2e-5)


def _reference(wxyz, position, fov: float, width: int, height: int, aspect: float):
    """A camera for a width x height frame stretched over a canvas of `aspect` (width /
    height), built here: the canvas's vertical field of view `fov` spans the frame's height,
    its horizontal one (tan = aspect * tan(fov / 2)) the frame's width."""
    R = qvec_to_rotmat(wxyz)
    viewmat = np.eye(4)
    viewmat[:3, :3], viewmat[:3, 3] = R.T, -R.T @ position
    tan_y = math.tan(fov / 2)
    fx, fy = (width / 2) / (aspect * tan_y), (height / 2) / tan_y
    K = np.array([[fx, 0, width / 2], [0, fy, height / 2], [0, 0, 1]])
    return xprc.Camera(viewmat=viewmat.astype(np.float32), K=K.astype(np.float32),
                       width=width, height=height)  # fmt: skip


class _Client:
    """What the viewer reads and calls of a viser client: its camera and its scene."""

    def __init__(self, width: int, height: int) -> None:
        self.client_id = 7
        self.camera = types.SimpleNamespace(image_width=width, image_height=height,
                                            on_update=lambda callback: None)  # fmt: skip
        self.frames = []  # the images sent
        self.scene = types.SimpleNamespace(set_background_image=self._set)

    def _set(self, image, format, jpeg_quality):
        self.frames.append(image)

    def look(self, wxyz, position, fov: float) -> None:
        self.camera.wxyz, self.camera.position, self.camera.fov = wxyz, position, fov


def test_a_moving_camera_gets_small_frames_of_one_size_and_a_resting_one_the_full_frame():
    """The viewer's serving path with a client stood in: each camera change sends a frame
    of the reduced size, no compile after the first (which also starts compiling the full
    size in the background); a camera still for `settle_s` gets one full-size frame, compiled
    already, then nothing more until it moves. The frames are what `xprc.render` gives for
    the camera built here (the reduced one stretched over the canvas), as 8 bits."""
    from xprc.viewer import Viewer

    method = xprc.load("3dgs")
    params = random_scene(300, seed=5, spread=1.0)
    background = np.array([0.2, 0.3, 0.4], np.float32)
    viewer = Viewer(method, params, background=background, port=_free_port(), settle_s=3600.0)
    W, H = 200, 120  # the canvas; moving frames of 50x30 rounded up to their size buckets
    try:
        client = _Client(W, H)
        viewer._connect(client)
        poses = list(_poses(6))
        client.look(*poses[0])
        viewer._serve(client)  # the first frame of the reduced size compiles
        viewer.frames.wait_warm()  # the full size's compile, started by that frame
        assert list(viewer.frames.capacity) == [(56, 32, "RGB", False), (W, H, "RGB", False)]
        traced = RENDER.TRACE_COUNT["render"]
        for pose in poses[1:]:
            client.look(*pose)
            viewer._serve(client)
            viewer._serve(client)  # not still for settle_s: nothing more
        assert RENDER.TRACE_COUNT["render"] == traced  # moving: no compile
        assert [f.shape for f in client.frames] == [(32, 56, 3)] * len(poses)
        for frame, (wxyz, position, fov) in zip(client.frames, poses, strict=True):
            ref = xprc.render(method, params, _reference(wxyz, position, fov, 56, 32, W / H),
                              background=background).image  # fmt: skip
            np.testing.assert_allclose(frame / 255, np.clip(ref, 0, 1), atol=1 / 254)
        frames = viewer.frames
        viewer.settle_s = 0.0  # the camera has now been still long enough
        traced = RENDER.TRACE_COUNT["render"]  # (after the references' own renders)
        viewer._serve(client)
        viewer._serve(client)  # the full frame is sent once
        assert [f.shape for f in client.frames[len(poses) :]] == [(H, W, 3)]
        # compiled while the camera moved
        assert RENDER.TRACE_COUNT["render"] == traced and frames.regrown == 0
        wxyz, position, fov = poses[-1]
        ref = xprc.render(method, params, _reference(wxyz, position, fov, W, H, W / H),
                          background=background).image  # fmt: skip
        np.testing.assert_allclose(client.frames[-1] / 255, np.clip(ref, 0, 1), atol=1 / 254)
        client.look(*poses[0])  # moving again: the reduced size, compiled already
        traced = RENDER.TRACE_COUNT["render"]
        viewer._serve(client)
        assert client.frames[-1].shape == (32, 56, 3)
        assert RENDER.TRACE_COUNT["render"] == traced
    finally:
        viewer.stop()


def test_a_frame_that_cannot_be_rendered_is_said_and_the_viewer_keeps_serving(monkeypatch, capsys):
    """A frame over the memory budget: the status line says why, stderr once, the frame at
    rest is not tried again and again, and a camera that moves (budget restored) is served."""
    from xprc.viewer import Viewer

    viewer = Viewer(xprc.load("3dgs"), random_scene(300, seed=5, spread=1.0),
                    port=_free_port(), settle_s=0.0)  # fmt: skip
    try:
        client = _Client(200, 120)
        viewer._connect(client)
        tries = []
        render_frame = viewer.render_frame
        monkeypatch.setattr(viewer, "render_frame", lambda *a: tries.append(a) or render_frame(*a))
        monkeypatch.setenv("XPRC_MEMORY_BUDGET", "1000")
        poses = list(_poses(3))
        client.look(*poses[0])
        for _ in range(3):
            viewer._serve_safely(client)  # moving, then at rest once, then nothing
        client.look(*poses[1])
        viewer._serve_safely(client)
        assert len(tries) == 3 and client.frames == []
        assert viewer._status.content.startswith("**cannot render this frame**: this render "
                                                 "needs ")  # fmt: skip
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("viewer: cannot render this frame: this render needs ")
        assert "over the memory budget of 1000 bytes" in line
        assert line.endswith("(said once; the status line shows each frame's)")
        monkeypatch.delenv("XPRC_MEMORY_BUDGET")
        client.look(*poses[2])
        viewer._serve_safely(client)
        assert [f.shape for f in client.frames] == [(32, 56, 3)]
        assert "FPS" in viewer._status.content
    finally:
        viewer.stop()


def test_resizing_the_window_while_moving_compiles_a_few_sizes():
    """Each side of a reduced frame is rounded up to a size bucket (m * 2^e, m in 4..7):
    a window dragged from 1000 to 1400 pixels wide passes 401 widths, 250..350 at 1/4,
    and the frames take three."""
    frames = FrameRenderer(None)  # the sizing rule alone
    widths = {frames.frame_size(w, 557, 4)[0] for w in range(1000, 1401)}
    assert widths == {256, 320, 384}
    assert frames.frame_size(1000, 557, 4) == (256, 160)  # 250x139 rounded up
    assert frames.frame_size(1000, 557, 1) == (1000, 557)  # at rest: the canvas's own size


def _camera(position, fov: float, width: int, height: int) -> xprc.Camera:
    """A camera looking along +z from `position`, vertical field of view `fov`, built here."""
    viewmat = np.eye(4, dtype=np.float32)
    viewmat[:3, 3] = -np.asarray(position)
    f = 0.5 * height / math.tan(0.5 * fov)
    K = np.array([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]], np.float32)
    return xprc.Camera(viewmat=viewmat, K=K, width=width, height=height)


def test_a_frame_that_needs_more_entries_grows_its_capacity_and_drops_nothing():
    method = xprc.load("3dgs")
    params = random_scene(1000, seed=5, spread=1.0)
    frames = FrameRenderer(method, headroom=1.0)
    frames.set_scene(params, None)
    far, near = np.array([0.0, 0.0, -12.0]), np.array([0.0, 0.0, 1.0])
    wxyz = np.array([1.0, 0.0, 0.0, 0.0])
    frames.render(wxyz, far, 0.9, 128, 96, "rgb")  # 2,219 entries: capacity 2,560
    small = frames.capacity[(128, 96, "RGB", False)]
    image = frames.render(wxyz, near, 0.9, 128, 96, "rgb")  # 7,741 entries
    assert frames.regrown == 1 and frames.capacity[(128, 96, "RGB", False)] > small
    ref = xprc.render(method, params, _camera(near, 0.9, 128, 96)).image
    np.testing.assert_allclose(image, np.asarray(ref), atol=2e-5)


class _Stdin(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def _train_view(scene, out, monkeypatch, capsys, tty: bool):
    """`xprc train --view` on the tiny scene with stdin a terminal or not; returns (exit code,
    stdout, the viewers made, the times the wait was entered)."""
    import xprc.cli.view as view_cli
    import xprc.viewer as viewer_module

    made, waits = [], []

    class Recorded(viewer_module.Viewer):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            made.append(self)

    def ctrl_c(seconds):  # a person presses Ctrl-C at the first wait
        waits.append(seconds)
        raise KeyboardInterrupt

    monkeypatch.setattr(viewer_module, "Viewer", Recorded)
    monkeypatch.setattr(view_cli, "_pause", ctrl_c)
    monkeypatch.setattr("sys.stdin", _Stdin(tty))
    code = main(["train", "--data", str(scene), "--out", str(out), "--steps", "2",
                 "--checkpoint-every", "1", "--view", "--port", str(_free_port())])  # fmt: skip
    return code, capsys.readouterr().out, made, waits


def test_train_view_keeps_the_final_scene_until_ctrl_c_at_a_terminal(
    tiny_scene,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
):
    out = tmp_path / "run"
    code, text, made, waits = _train_view(tiny_scene, out, monkeypatch, capsys, tty=True)
    assert code == 0 and waits == [1.0]  # it waited, and Ctrl-C ended the wait
    (viewer,) = made
    assert viewer._stop.is_set()  # stopped after Ctrl-C
    assert viewer.params is not None and len(viewer.params["means"]) > 0  # the final scene
    lines = text.splitlines()
    (address,) = [line for line in lines if line.startswith("viewer: http")]  # (viser's box too)
    assert address.startswith(f"viewer: {viewer.url} (updates with each checkpoint; Ctrl-C to "
                              "stop; this machine only: ") and "ssh -L" in address  # fmt: skip
    assert (
        f"training done: the viewer keeps showing the final scene at {viewer.url} until Ctrl-C "
        f"(later: xprc view {out})"
    ) in lines


def test_train_view_without_a_terminal_stops_and_says_how_to_reopen(
    tiny_scene,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
):
    out = tmp_path / "run"
    code, text, made, waits = _train_view(tiny_scene, out, monkeypatch, capsys, tty=False)
    assert code == 0 and waits == []  # never waited
    assert made[0]._stop.is_set()
    assert (
        f"viewer stopped (no terminal to stop it from); to look at the scene: xprc view {out}"
    ) in text.splitlines()


@pytest.mark.parametrize("stdin", [None, "closed"])
def test_no_input_is_not_interactive(stdin, monkeypatch):
    from xprc.cli.view import interactive

    if stdin == "closed":
        stdin = _Stdin(True)
        stdin.close()
    monkeypatch.setattr("sys.stdin", stdin)
    assert not interactive()


def test_a_frame_of_normals_says_its_clipped_values_once_per_kind():
    """The note of `output_image` (what the colours mean, values beyond [-1, 1] clipped) is
    kept for the status line, and the first clipping frame of a kind warns."""
    import types

    frames = FrameRenderer(xprc.load("2dgs"))  # pixel outputs: depth, depth_sq, normal.xyz
    extra = np.zeros((4, 6, 5), np.float32)
    extra[0, 0, 2:] = [2.0, -3.0, 0.5]  # two normal values beyond [-1, 1]
    out = types.SimpleNamespace(extra=extra, alpha=np.ones((4, 6, 1), np.float32))
    with pytest.warns(RuntimeWarning, match=r"viewer, normal: .*2 value\(s\) beyond \[-1, 1\]"):
        image = frames.picture(out, "normal")
    assert image.shape == (4, 6, 3) and "2 value(s) beyond [-1, 1] clipped" in frames.note
    extra[0, 1, 2] = 5.0
    frames.picture(out, "normal")  # warned once: this one only in the note
    assert "3 value(s) beyond [-1, 1] clipped" in frames.note
