"""`xprc view`: a browser viewer for a trained scene, built on viser (`pip install "xprc[viewer]"`).

Every frame is rendered by the compiled spec through `xprc.render` and sent to the page as the
scene's background image. While the camera moves, frames are rendered at about 1/`moving_scale` of
the resolution, in a few fixed sizes (each compiled once; the first also compiles the full size in
the background); once it has been still for `settle_s`, the full-resolution frame follows. The
resolution is the canvas's in device pixels as the page reports it: viser lowers it to 3/4 or 7/8
while the browser draws slowly (software GL), which is a new size to compile. The control panel
shows the frame rate and chooses what is shown (RGB, depth, alpha); dataset cameras are drawn as
frusta (click one to look through it). With `watch()`, the scene is reloaded whenever its file
changes, which is how `xprc train --view` shows a run while it trains.

Cameras: viser reports a camera as T_world_camera (OpenCV axes, +z forward, +y down) with a
vertical field of view; `viewer_camera` turns that into an `xprc.Camera` with the principal point
at the image centre, and square pixels unless the frame is stretched over a canvas of another
aspect (the page draws the frame over the whole canvas).
"""

from __future__ import annotations

import collections
import dataclasses
import ipaddress
import math
import socket
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from .data.colmap import qvec_to_rotmat
from .data.colmap_write import rotmat_to_qvec
from .errors import XprError, printable
from .method_info import MethodInfo
from .plots import BUILT_IN_KINDS, needs_outputs

# the "Show" menu's labels of the built-in kinds (`xprc.plots.BUILT_IN_KINDS`): RGB, Depth, Alpha
KINDS = {kind.upper() if kind == "rgb" else kind.capitalize(): kind for kind in BUILT_IN_KINDS}


def viewer_kinds(method) -> dict[str, str]:
    """The "Show" menu: {label: kind}, the built-in kinds and the spec's per-pixel outputs
    (`xprc.plots.output_kinds`: 2DGS's normal and depth_sq)."""
    from .plots import output_kinds

    outputs = output_kinds(MethodInfo.of(method).pixel_outputs)
    return {**KINDS, **{name: name for name in outputs if name not in KINDS}}


def _import_viser():
    try:
        import viser
    except ImportError:
        raise XprError(
            'the viewer needs viser: pip install "xprc[viewer]" (or pip install viser)'
        ) from None
    return viser


def viewer_camera(wxyz, position, fov_y: float, width: int, height: int, aspect=None):
    """A viser camera (T_world_camera as wxyz + position, vertical fov in radians) -> Camera
    of width x height pixels. aspect: the width / height of the canvas the frame is stretched
    over (None: width / height, square pixels); the frame then shows what the canvas shows."""
    from .camera import Camera

    R = qvec_to_rotmat(wxyz)
    viewmat = np.eye(4)
    viewmat[:3, :3] = R.T
    viewmat[:3, 3] = -R.T @ np.asarray(position, np.float64)
    tan = math.tan(0.5 * fov_y)
    fy = 0.5 * height / tan
    fx = fy if aspect is None else 0.5 * width / (aspect * tan)
    K = np.array([[fx, 0.0, 0.5 * width], [0.0, fy, 0.5 * height], [0.0, 0.0, 1.0]])
    return Camera(
        viewmat=viewmat.astype(np.float32), K=K.astype(np.float32), width=width, height=height
    )


def view_pose(view) -> tuple[np.ndarray, np.ndarray, float]:
    """A dataset view -> (wxyz, position, vertical fov) in viser's terms."""
    R = np.asarray(view.viewmat, np.float64)[:3, :3]
    return (
        rotmat_to_qvec(R.T),
        np.asarray(view.position),
        2 * math.atan(0.5 * view.height / float(view.K[1, 1])),
    )


def _check_host(host: str, port: int) -> None:
    """XprError unless `host` is a local address to listen on. viser tries port after port in
    a thread and never returns when the host itself cannot be bound (a name that does not
    resolve, another machine's address); the port it moves past when taken."""
    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.bind(address)
    except (OSError, UnicodeError) as e:
        why = getattr(e, "strerror", None) or str(e)
        where = http_url(host, port).removeprefix("http://")  # ([::1]:8080)
        raise XprError(f"viewer: cannot listen on {where} ({why})") from None


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name) listens on this machine's loopback only."""
    return _all_addresses(host, "is_loopback")


def is_every_address(host: str) -> bool:
    """Whether `host` listens on every address of this machine (0.0.0.0, ::, and their other
    spellings: ::0, 0, 000.000.000.000)."""
    return _all_addresses(host, "is_unspecified")


def _all_addresses(host: str, kind: str) -> bool:
    """Whether every address `host` (an address or a name) stands for has `kind`, an
    `ipaddress` property; False when it stands for none."""
    try:
        return getattr(ipaddress.ip_address(host.strip("[]")), kind)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    return bool(infos) and all(getattr(ipaddress.ip_address(i[4][0]), kind) for i in infos)


def access_lines(host: str, port: int) -> list[str]:
    """What the commands print about reaching the viewer: on a loopback address, how to reach
    it from another machine (SSH port forwarding, --host); on any other, a notice that other
    machines can now connect."""
    url = http_url(host, port)
    if is_loopback(host):
        return [
            f"viewer: {url} (Ctrl-C to stop; this machine only: from another machine, forward "
            f"the port with `ssh -L {port}:localhost:{port} USER@THIS_MACHINE` and open "
            f"http://localhost:{port} there, or listen on every address with --host 0.0.0.0)"
        ]
    there = http_url(socket.gethostname(), port) if is_every_address(host) else url
    return [
        f"viewer: {url} (Ctrl-C to stop)",
        f"notice: listening on {host}, so other machines that can reach this one's port {port} "
        f"can now connect, with no password: open {there} on them (--host 127.0.0.1 keeps the "
        "viewer to this machine)",
    ]


def http_url(host: str, port: int) -> str:
    """The address to open; an IPv6 host in brackets (RFC 3986: `http://[::1]:8080`)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _mode(kind: str) -> str:
    """The render mode a frame of `kind` needs (depth: the expected depth too)."""
    return "RGB+ED" if kind == "depth" else "RGB"


class FrameRenderer:
    """The viewer's frames, rendered with programs compiled once: the scene's parameters go to
    the device once per scene (not per frame), and each frame size and mode keeps one entry
    capacity, sized from the first frame's count with `headroom` and only ever grown, so a
    moving camera reuses one compiled program per size instead of counting its entries and
    compiling for a new capacity bucket. A frame that needs more entries than its size's
    capacity is rendered again with a larger one (nothing is dropped from what is shown;
    `regrown` counts it); run-time trouble the render reports is warned as by `xprc.render`.
    `warm` compiles a size in the background (the full frame's, while the camera moves)."""

    def __init__(
        self, method, *, moving_scale: int = 4, max_pixels: int = 1280 * 800, headroom=2.0
    ) -> None:
        self.method = method
        self.moving_scale, self.max_pixels, self.headroom = moving_scale, max_pixels, headroom
        self.params: dict | None = None  # prepared, on the device
        self.background = np.zeros(3, np.float32)
        self.capacity: dict[tuple, int] = {}  # (width, height, mode) -> entry capacity
        self.regrown = 0
        self.note = ""  # what the last frame's levels mean, for a spec's per-pixel output
        self.warned: set[str] = set()  # the kinds whose clipped values were warned
        self._lock = threading.Lock()  # (guards _warming)
        self._warming: dict[tuple, threading.Thread] = {}  # size key -> its warm-up

    def set_scene(self, params: dict, background) -> None:
        """A new scene (raw parameters) and background; sizes keep their capacities."""
        import jax

        from .pipeline.params import prepare_params

        self.params = jax.device_put(prepare_params(self.method, params))
        bg = (0.0, 0.0, 0.0) if background is None else background
        self.background = np.asarray(bg, np.float32)

    def frame_size(self, width: int, height: int, scale: int) -> tuple[int, int]:
        """The rendered size for a canvas of width x height: at most max_pixels, / scale. A
        reduced frame (scale > 1, while moving) has each side rounded up to a size bucket
        (`entry_bucket`'s: four per octave, at least 16), so that resizing the window compiles
        a handful of sizes, not one per size it passes through (seconds each on a CPU); it is
        stretched over the canvas, its camera made for the canvas's aspect (`viewer_camera`)."""
        from .pipeline.config import entry_bucket

        shrink = max(1.0, math.sqrt(width * height / self.max_pixels)) * scale
        w, h = max(1, round(width / shrink)), max(1, round(height / shrink))
        if scale == 1:
            return w, h
        return entry_bucket(w, minimum=16), entry_bucket(h, minimum=16)

    def render(self, wxyz, position, fov: float, width: int, height: int, kind: str, aspect=None):
        """The image the viewer shows for this camera: [H, W, 3] floats in [0, 1]; aspect: the
        canvas's width / height when the frame is stretched over it (`viewer_camera`)."""
        from .pipeline.capacity import report_overflow

        camera = viewer_camera(wxyz, position, fov, width, height, aspect)
        mode, outputs = _mode(kind), needs_outputs(MethodInfo.of(self.method).pixel_outputs, kind)
        warming = self._warming.get((width, height, mode, outputs))
        if warming is not None:
            warming.join()  # its program, compiled in the background
        out = self._render(camera, mode, outputs)
        report_overflow(out.stats, "warn", model=camera.model)
        return self.picture(out, kind)

    def _render(self, camera, mode: str, outputs: bool):
        """`xprc.render` of `camera` with its size's capacity, grown when a frame needs more;
        `outputs`: with the spec's per-pixel outputs (`_needs_outputs`)."""
        from .pipeline import RenderConfig, count_entries, render

        key = (camera.width, camera.height, mode, outputs)
        if key not in self.capacity:
            self._size(key, count_entries(self.method, self.params, camera), camera)
        while True:
            config = RenderConfig(max_entries=self.capacity[key], on_overflow="ignore",
                                  pixel_outputs=outputs)  # fmt: skip
            out = render(self.method, self.params, camera, self.background, mode, config)
            if not int(out.stats["dropped"]):
                return out
            self._size(key, int(out.stats["entries_needed"]), camera)
            self.regrown += 1

    def warm(self, wxyz, position, fov: float, width: int, height: int, kind: str, aspect=None):
        """Compile frames of this size and kind in a background thread, unless they are
        compiled or another warm-up runs (one at a time: a window resized passes many sizes),
        so that the first such frame (the full one when the camera rests) need not wait for
        the compiler; `render` of the size waits for its warm-up. A warm-up that fails leaves
        the error to that render, which meets it again and reports it."""
        mode, outputs = _mode(kind), needs_outputs(MethodInfo.of(self.method).pixel_outputs, kind)
        key = (width, height, mode, outputs)
        with self._lock:
            busy = any(t.is_alive() for t in self._warming.values())
            if key in self.capacity or key in self._warming or busy or self.params is None:
                return
            camera = viewer_camera(wxyz, position, fov, width, height, aspect)
            thread = threading.Thread(target=self._warm, args=(camera, mode, outputs), daemon=True,
                                      name="xprc-viewer-warm")  # fmt: skip
            self._warming[key] = thread
        thread.start()

    def _warm(self, camera, mode: str, outputs: bool) -> None:
        try:
            self._render(camera, mode, outputs)
        except Exception:  # noqa: BLE001 - `render` of this size meets it again and reports it
            pass

    def wait_warm(self) -> None:
        """Wait for the warm-ups started so far."""
        for thread in list(self._warming.values()):
            thread.join()

    def picture(self, out, kind: str):
        """The frame `out` as the picture of `kind`; for a spec's per-pixel output, `note` is
        what its levels mean and how many values were clipped (shown in the viewer's status
        line), warned once per kind the first time a frame clips any."""
        from .plots import kind_image, output_image, output_kinds

        self.note = ""
        outputs = output_kinds(MethodInfo.of(self.method).pixel_outputs)
        if kind not in outputs:
            return kind_image(out, kind)
        # a spec's per-pixel output, shown as `xprc render --kind` writes it
        image, self.note = output_image(out, outputs[kind])
        values = np.asarray(out.extra, np.float32)[..., outputs[kind]]
        if values.shape[-1] == 3 and np.any(np.abs(values) > 1.0) and kind not in self.warned:
            self.warned.add(kind)
            warnings.warn(f"viewer, {kind}: {self.note} (said once; the status line gives each "
                          "frame's count)", RuntimeWarning, stacklevel=2)  # fmt: skip
        return image

    def _size(self, key: tuple, needed: int, camera) -> None:
        """The capacity for frames of `key`: the bucket above `headroom` x `needed`, checked
        against the memory budget as `xprc.render` checks its own."""
        from .pipeline import RenderConfig
        from .pipeline.binning import TileGrid
        from .pipeline.capacity import check_memory
        from .pipeline.config import entry_bucket

        capacity = entry_bucket(int(needed * self.headroom))
        config = RenderConfig()
        grid = TileGrid(camera.width, camera.height, config.tile_size)
        check_memory(capacity, needed, self.method, grid, config)
        self.capacity[key] = capacity


@dataclasses.dataclass
class _ClientState:
    key: tuple | None = None  # the camera, size, kind and scene version last rendered
    changed: float = 0.0  # when `key` last changed
    full: bool = False  # whether the full-resolution frame for `key` was sent


class Viewer:
    """Serve `scene` (a run folder, checkpoint, PLY, or a dict of raw parameters) in the browser.

    method: the compiled spec (`xprc.load`); views: dataset views drawn as frusta (the first one
    is where new clients start). background: RGB in [0, 1] (None: the one recorded with the run,
    else black). wait: the scene's file may not exist yet (a run that has not written its first
    checkpoint); nothing is shown until it does (see `watch`).
    """

    def __init__(
        self,
        method,
        scene,
        views=(),
        *,
        background=None,
        host: str = "127.0.0.1",
        port: int = 8080,
        moving_scale: int = 4,
        settle_s: float = 0.25,
        max_pixels: int = 1280 * 800,
        jpeg_quality: int = 92,
        wait: bool = False,
    ) -> None:
        viser = _import_viser()
        self.method = method
        self.kinds = viewer_kinds(method)
        self.views = list(views)
        self.frames = FrameRenderer(method, moving_scale=moving_scale, max_pixels=max_pixels)
        self.moving_scale, self.settle_s = moving_scale, settle_s
        self.max_pixels, self.jpeg_quality = max_pixels, jpeg_quality
        self._source = None if isinstance(scene, dict) else Path(scene)
        self._fixed_background = background
        self.params, self.version, self._mtime = None, 0, None
        if self._source is None or not (wait and not self._source_file().exists()):
            self._load(scene)
        self._states: dict[int, _ClientState] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._watch_interval: float | None = None
        self._said: set[type] = set()  # the kinds of render error printed
        self.fps = 0.0
        self.sent: collections.deque = collections.deque(maxlen=64)  # (client id, key, size)
        _check_host(host, port)
        try:
            self.server = viser.ViserServer(host=host, port=port, verbose=False)
        except OSError as e:
            raise XprError(f"viewer: cannot listen on {host}:{port} ({e.strerror})") from None
        self.server.gui.configure_theme(show_logo=False, show_share_button=False)
        self._kind = self.server.gui.add_dropdown("Show", tuple(self.kinds), initial_value="RGB")
        self._kind.on_update(lambda _: self._wake.set())
        self._status = self.server.gui.add_markdown("starting")
        self._add_frusta()
        self.server.on_client_connect(self._connect)
        self._thread = threading.Thread(target=self._loop, name="xprc-viewer", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return http_url(self.server.get_host(), self.server.get_port())

    def _load(self, scene) -> None:
        mtime = self._mtime
        if isinstance(scene, dict):
            params, recorded = scene, None
        else:
            from .trained import load_trained, scene_params

            trained = load_trained(scene, self.views)
            params, recorded = scene_params(trained, self.method), trained.background
            mtime = self._source_file().stat().st_mtime_ns
        choices = (self._fixed_background, recorded, (0.0, 0.0, 0.0))
        background = np.asarray(next(b for b in choices if b is not None), np.float32)
        self.frames.set_scene(params, background)  # (on the device before it is shown)
        self.params, self.background, self._mtime = params, background, mtime
        self.version += 1

    def _source_file(self) -> Path:
        src = self._source
        if src.is_dir():
            from .train.folder import PLY, scene_file

            return scene_file(src) or src / PLY
        return src

    def access_lines(self) -> list[str]:
        """What to print about reaching this viewer (`access_lines`)."""
        return access_lines(self.server.get_host(), self.server.get_port())

    def reload(self) -> None:
        """Load the scene's file again now if it changed (the run's final checkpoint)."""
        self._reload_if_changed()

    def watch(self, interval: float = 1.0) -> None:
        """Reload the scene whenever its file (a run folder's checkpoint) changes."""
        self._watch_interval = interval

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        self.frames.wait_warm()  # (a compile left running could crash the interpreter's exit)
        self.server.stop()

    # ---------------------------------------------------------------------------- clients

    def _connect(self, client) -> None:
        self._states[client.client_id] = _ClientState()
        client.camera.on_update(lambda _: self._wake.set())
        if self.views:
            self.look_through(client, self.views[0])

    def look_through(self, client, view) -> None:
        """Put `client`'s camera where a dataset view's camera is."""
        wxyz, position, fov = view_pose(view)
        with client.atomic():
            client.camera.fov = fov
            client.camera.position = position
            client.camera.wxyz = wxyz

    def _add_frusta(self) -> None:
        if not self.views:
            return
        centres = np.stack([v.position for v in self.views])
        extent = float(np.max(np.linalg.norm(centres - centres.mean(0), axis=1))) or 1.0
        ups = np.stack([-np.asarray(v.viewmat, np.float64)[1, :3] for v in self.views])
        up = ups.mean(0)
        if np.linalg.norm(up) > 1e-6:
            self.server.scene.set_up_direction(up / np.linalg.norm(up))
        for i, view in enumerate(self.views):
            wxyz, position, fov = view_pose(view)
            frustum = self.server.scene.add_camera_frustum(
                f"/cameras/{i}",
                fov=fov,
                aspect=view.width / view.height,
                scale=0.05 * extent,
                wxyz=wxyz,
                position=position,
                color=(200, 60, 40),
            )
            frustum.on_click(lambda event, v=view: self.look_through(event.client, v))

    @staticmethod
    def camera_known(client) -> bool:
        """Whether `client` has reported its camera yet."""
        try:
            return client.camera.update_timestamp > 0
        except AssertionError:
            return False

    def shown(self, client, wxyz, position, fov: float, atol: float = 1e-4) -> bool:
        """Whether the last frame sent to `client` is the full-resolution one for this camera."""
        last = [s for s in self.sent if s[0] == client.client_id][-1:]
        if not last or last[0][3] != 1:
            return False
        k_wxyz, k_position, k_fov = last[0][1][:3]
        return (
            np.allclose(k_wxyz, wxyz, atol=atol)
            and np.allclose(k_position, position, atol=atol)
            and abs(k_fov - fov) < atol
        )

    # ---------------------------------------------------------------------------- frames

    def _loop(self) -> None:
        next_watch = 0.0
        while not self._stop.is_set():
            self._wake.wait(timeout=0.05)
            self._wake.clear()
            now = time.monotonic()
            if self._watch_interval is not None and now >= next_watch:
                next_watch = now + self._watch_interval
                self._reload_if_changed()
            for client in list(self.server.get_clients().values()):
                self._serve_safely(client)

    def _serve_safely(self, client) -> None:
        """`_serve`; a frame that cannot be rendered (an `XprError`: e.g. over the memory
        budget at this window's size) is said in the status line, each kind of error once on
        stderr, and the viewer keeps serving (a camera that moves tries again), instead of a
        traceback from its thread and a page that no longer changes."""
        try:
            self._serve(client)
        except (AssertionError, KeyError):
            pass  # the client has not reported its camera yet, or has left
        except XprError as e:
            self._status.content = f"**cannot render this frame**: {printable(e.message)}"
            if type(e) not in self._said:
                self._said.add(type(e))
                said = f"viewer: cannot render this frame: {e.message} (said once; the status line "
                print(printable(said + "shows each frame's)"), file=sys.stderr, flush=True)

    def _reload_if_changed(self) -> None:
        try:
            path = self._source_file()
            if path.exists() and path.stat().st_mtime_ns != self._mtime:
                self._load(self._source)
        except (OSError, XprError):
            pass  # mid-write or gone: keep showing the last good scene

    def _serve(self, client) -> None:
        state = self._states[client.client_id]
        cam = client.camera
        size = (cam.image_width, cam.image_height)
        key = (
            tuple(np.round(cam.wxyz, 9)),
            tuple(np.round(cam.position, 9)),
            round(cam.fov, 9),
            size,
            self._kind.value,
            self.version,
        )
        now = time.monotonic()
        if key != state.key:
            state.key, state.changed, state.full = key, now, False
            self._send(client, key, scale=self.moving_scale)
        elif not state.full:
            if now - state.changed >= self.settle_s:
                state.full = True  # (once: a frame that fails is not tried again at rest)
                self._send(client, key, scale=1)
            else:
                self._wake.set()

    def frame_size(self, width: int, height: int, scale: int) -> tuple[int, int]:
        return self.frames.frame_size(width, height, scale)

    def render_frame(
        self, wxyz, position, fov: float, width: int, height: int, kind: str, aspect=None
    ):
        """The image the viewer shows for this camera: [H, W, 3] floats in [0, 1]."""
        return self.frames.render(wxyz, position, fov, width, height, kind, aspect)

    def _send(self, client, key, scale: int) -> None:
        from .plots import to_uint8

        wxyz, position, fov, (w, h), label, _ = key
        if w <= 0 or h <= 0 or self.params is None:
            return
        fw, fh = self.frame_size(w, h, scale)
        t0 = time.perf_counter()
        kind = self.kinds[label]
        image = self.render_frame(np.array(wxyz), np.array(position), fov, fw, fh, kind, w / h)
        dt = time.perf_counter() - t0
        self.fps = 1.0 / max(dt, 1e-6)
        client.scene.set_background_image(
            to_uint8(image), format="jpeg", jpeg_quality=self.jpeg_quality
        )
        if scale != 1:  # the full frame of this canvas, compiled while the camera moves
            self.frames.warm(np.array(wxyz), np.array(position), fov,
                             *self.frame_size(w, h, 1), kind, w / h)  # fmt: skip
        self.sent.append((client.client_id, key, (fw, fh), scale))
        what = "full" if scale == 1 else f"1/{scale} while moving"
        note = f"; {self.frames.note}" if self.frames.note else ""
        self._status.content = f"**{self.fps:.1f} FPS** ({fw}x{fh}, {what}){note}"
