"""The bundled demo scene: photo-textured shapes, ray traced in NumPy, in the NeRF-synthetic format.

`generate_demo_scene(out_dir)` writes

    out_dir/transforms_train.json, transforms_test.json   (camera_angle_x + OpenGL camera-to-world)
    out_dir/train/r_*.png, test/r_*.png                   (RGBA; alpha 0 where no surface is hit)
    out_dir/points3d.ply                                  (initial point cloud: visible surface
                                                           points with their colours)

The scene needs no download: its textures are scikit-image's bundled sample photographs (the cat
`chelsea`, `astronaut`, `rocket`, `coffee`, a stained tissue sample, a retina, a colour wheel and a
brick wall) on a sphere, a rotated box, a capped cylinder and a square ground. Shading is
Lambertian under one directional light with hard shadows, fixed in the world, so appearance is
view-independent. Every pixel is the average of `aa x aa` exactly intersected rays (anti-aliased
edges and textures). World axes: +z up, the objects stand on z = 0 around the origin.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path

import numpy as np
from PIL import Image

__all__ = ["DemoScene", "generate_demo_scene"]

SCENE_CENTER = (0.0, 0.0, 0.3)  # every camera looks at this point
_LIGHT = np.array([0.45, -0.35, 0.82]) / np.linalg.norm([0.45, -0.35, 0.82])  # towards the light
_AMBIENT, _DIFFUSE = 0.4, 0.75
_EPS = 1e-6
_FAR = np.inf


@dataclasses.dataclass(frozen=True)
class DemoScene:
    """What `generate_demo_scene` wrote. points [P, 3] float32, colors [P, 3] float32 in [0, 1]."""

    root: Path
    points: np.ndarray
    colors: np.ndarray
    center: tuple[float, float, float]
    camera_radius: float


# --------------------------------------------------------------------------- textures


@functools.lru_cache(maxsize=16)
def _bundled_photo(name: str) -> Image.Image:
    """One of scikit-image's sample photos shipped inside its wheel (no download), as RGB."""
    import skimage.data

    img = np.asarray(getattr(skimage.data, name)())
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=2)
    return Image.fromarray(img[..., :3].astype(np.uint8))


def _photo(name: str, size: tuple[int, int]) -> np.ndarray:
    """A bundled photo resized (Lanczos, a cheap mip level) -> [h, w, 3] float64 in [0, 1]."""
    pil = _bundled_photo(name).resize(size, Image.Resampling.LANCZOS)
    return np.asarray(pil, dtype=np.float64) / 255.0


def _sample(tex: np.ndarray, u: np.ndarray, v: np.ndarray, wrap_u: bool = False) -> np.ndarray:
    """Bilinear lookup; (u, v) in [0, 1], v = 0 at the image's top row. -> [R, 3]."""
    h, w = tex.shape[:2]
    x = u * w - 0.5
    y = np.clip(v * h - 0.5, 0.0, h - 1.0)
    x = np.mod(x, w) if wrap_u else np.clip(x, 0.0, w - 1.0)
    x0, y0 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    x1 = (x0 + 1) % w if wrap_u else np.minimum(x0 + 1, w - 1)
    y1 = np.minimum(y0 + 1, h - 1)
    top = tex[y0, x0] * (1 - fx) + tex[y0, x1] * fx
    bottom = tex[y1, x0] * (1 - fx) + tex[y1, x1] * fx
    return top * (1 - fy) + bottom * fy


# --------------------------------------------------------------------------- shapes
# Each shape: intersect(o, d) -> t [R] (inf on a miss, only t > _EPS counts) and
# surface(p) -> (normal [R, 3], albedo [R, 3]) at points on it.


def _positive(t: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(t) & (t > _EPS), t, _FAR)


class _Ground:
    def __init__(self, half: float, tex: np.ndarray, tiles: int) -> None:
        self.half, self.tex, self.tiles = half, tex, tiles

    def intersect(self, o, d):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = _positive(-o[:, 2] / d[:, 2])
        p = o + np.where(np.isfinite(t), t, 0.0)[:, None] * d
        inside = (np.abs(p[:, 0]) <= self.half) & (np.abs(p[:, 1]) <= self.half)
        return np.where(inside, t, _FAR)

    def surface(self, p):
        s = (p[:, :2] + self.half) / (2 * self.half) * self.tiles
        cell = np.floor(s).astype(np.int64)
        albedo = _sample(self.tex, s[:, 0] - cell[:, 0], 1.0 - (s[:, 1] - cell[:, 1]))
        checker = np.where((cell[:, 0] + cell[:, 1]) % 2 == 0, 1.0, 0.72)[:, None]
        normal = np.broadcast_to(np.array([0.0, 0.0, 1.0]), p.shape)
        return normal, albedo * checker


class _Sphere:
    def __init__(self, center, radius: float, tex: np.ndarray) -> None:
        self.c, self.r, self.tex = np.asarray(center, float), radius, tex

    def intersect(self, o, d):
        oc = o - self.c
        b = np.einsum("ij,ij->i", oc, d)
        c = np.einsum("ij,ij->i", oc, oc) - self.r**2
        disc = b * b - c  # d is unit length
        sq = np.sqrt(np.maximum(disc, 0.0))
        t0, t1 = _positive(-b - sq), _positive(-b + sq)
        return np.where(disc >= 0, np.minimum(t0, t1), _FAR)

    def surface(self, p):
        n = (p - self.c) / self.r
        u = 0.5 + np.arctan2(n[:, 1], n[:, 0]) / (2 * np.pi)
        v = np.arccos(np.clip(n[:, 2], -1.0, 1.0)) / np.pi
        return n, _sample(self.tex, u, v, wrap_u=True)


class _Box:
    """An axis-aligned cube turned by `angle` about +z; one photo per face."""

    def __init__(self, center, half: float, angle: float, faces: list[np.ndarray]) -> None:
        self.c, self.h, self.faces = np.asarray(center, float), half, faces
        ca, sa = math.cos(angle), math.sin(angle)
        self.R = np.array([[ca, -sa, 0.0], [sa, ca, 0.0], [0.0, 0.0, 1.0]])  # local -> world

    def intersect(self, o, d):
        lo, ld = (o - self.c) @ self.R, d @ self.R
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / np.where(ld == 0.0, 1e-30, ld)
        t1, t2 = (-self.h - lo) * inv, (self.h - lo) * inv
        tnear = np.minimum(t1, t2).max(axis=1)
        tfar = np.maximum(t1, t2).min(axis=1)
        return np.where((tnear <= tfar) & (tnear > _EPS), tnear, _FAR)

    def surface(self, p):
        q = (p - self.c) @ self.R / self.h  # in [-1, 1]^3
        axis = np.argmax(np.abs(q), axis=1)
        sign = np.sign(q[np.arange(len(q)), axis])
        n_local = np.zeros_like(q)
        n_local[np.arange(len(q)), axis] = sign
        # Face image coordinates, upright for a viewer outside: u to their right, v down.
        u = np.select(
            [axis == 0, axis == 1],
            [sign * q[:, 1], -sign * q[:, 0]],
            q[:, 0],
        )
        v = np.where(axis == 2, -sign * q[:, 1], -q[:, 2])
        face = axis * 2 + (sign < 0)
        albedo = np.empty_like(q)
        for f, tex in enumerate(self.faces):
            m = face == f
            if m.any():
                albedo[m] = _sample(tex, 0.5 * (u[m] + 1), 0.5 * (v[m] + 1))
        return n_local @ self.R.T, albedo


class _Cylinder:
    """Axis +z through `base` (x, y), z in [0, height]; photo around the side, another on top."""

    def __init__(self, base, radius, height, side: np.ndarray, top: np.ndarray) -> None:
        self.b, self.r, self.hgt = np.asarray(base, float), radius, height
        self.side, self.top = side, top

    def intersect(self, o, d):
        ox, oy = o[:, 0] - self.b[0], o[:, 1] - self.b[1]
        a = d[:, 0] ** 2 + d[:, 1] ** 2
        b = 2 * (ox * d[:, 0] + oy * d[:, 1])
        c = ox**2 + oy**2 - self.r**2
        disc = b * b - 4 * a * c
        sq = np.sqrt(np.maximum(disc, 0.0))
        best = np.full(len(o), _FAR)
        with np.errstate(divide="ignore", invalid="ignore"):
            for t in ((-b - sq) / (2 * a), (-b + sq) / (2 * a)):
                t = _positive(np.where((disc >= 0) & (a > 0), t, _FAR))
                z = o[:, 2] + np.where(np.isfinite(t), t, 0.0) * d[:, 2]
                best = np.where((z >= 0) & (z <= self.hgt) & (t < best), t, best)
            for zc in (0.0, self.hgt):
                t = _positive((zc - o[:, 2]) / d[:, 2])
                tt = np.where(np.isfinite(t), t, 0.0)
                x, y = ox + tt * d[:, 0], oy + tt * d[:, 1]
                best = np.where((x * x + y * y <= self.r**2) & (t < best), t, best)
        return best

    def surface(self, p):
        x, y, z = p[:, 0] - self.b[0], p[:, 1] - self.b[1], p[:, 2]
        on_cap = (z >= self.hgt - 1e-6) | (z <= 1e-6)
        n = np.stack([x / self.r, y / self.r, np.zeros_like(z)], axis=1)
        n[on_cap] = [0.0, 0.0, 1.0]
        n[on_cap & (z <= 1e-6)] = [0.0, 0.0, -1.0]
        u = 0.5 + np.arctan2(y, x) / (2 * np.pi)
        albedo = _sample(self.side, u, 1.0 - z / self.hgt, wrap_u=True)
        if on_cap.any():
            cu = 0.5 + 0.5 * x[on_cap] / self.r
            cv = 0.5 - 0.5 * y[on_cap] / self.r
            albedo[on_cap] = _sample(self.top, cu, cv)
        return n, albedo


def _build_shapes(scale: float) -> list:
    """The fixed scene; texture resolutions follow the image size (about 2 texels per pixel)."""

    def px(n: int) -> int:
        return max(8, round(n * scale))

    face = (px(72), px(72))
    return [
        _Ground(1.6, _photo("brick", (px(96), px(96))) * [1.1, 0.85, 0.66], tiles=3),
        _Sphere((0.55, -0.45, 0.45), 0.45, _photo("chelsea", (px(160), px(80)))),
        _Box(
            (-0.55, -0.35, 0.36),
            0.36,
            math.radians(25.0),
            [
                _photo("rocket", face),
                _photo("astronaut", face),
                _photo("immunohistochemistry", face),
                _photo("coffee", face),
                _photo("retina", face),
                _photo("colorwheel", face),
            ],
        ),
        _Cylinder(
            (0.05, 0.7),
            0.3,
            0.9,
            side=_photo("astronaut", (px(160), px(72))),
            top=_photo("colorwheel", face),
        ),
    ]


def _trace(shapes, o, d):
    """Nearest hit -> (hit [R] bool, point [R, 3], shaded colour [R, 3])."""
    ts = np.stack([s.intersect(o, d) for s in shapes])  # [S, R]
    which = np.argmin(ts, axis=0)
    t = ts[which, np.arange(len(o))]
    hit = np.isfinite(t)
    p = o + np.where(hit, t, 0.0)[:, None] * d
    normal = np.zeros_like(o)
    albedo = np.zeros_like(o)
    for k, shape in enumerate(shapes):
        m = hit & (which == k)
        if m.any():
            normal[m], albedo[m] = shape.surface(p[m])
    # Hard shadows: a ray towards the light from just above the surface.
    lit = np.zeros(len(o), bool)
    if hit.any():
        origin = p[hit] + 1e-4 * normal[hit]
        towards = np.broadcast_to(_LIGHT, origin.shape)
        blocked = np.stack([s.intersect(origin, towards) for s in shapes]).min(axis=0)
        lit[hit] = ~np.isfinite(blocked)
    lambert = np.maximum(normal @ _LIGHT, 0.0) * lit
    colour = albedo * (_AMBIENT + _DIFFUSE * lambert)[:, None]
    return hit, p, np.clip(colour, 0.0, 1.0)


# --------------------------------------------------------------------------- cameras


def _look_at_opencv(position, target) -> np.ndarray:
    """Camera-to-world [4, 4] with OpenCV axes (+x right, +y down, +z forward), world +z up."""
    f = np.asarray(target, float) - position
    f /= np.linalg.norm(f)
    r = np.cross(f, [0.0, 0.0, 1.0])
    r /= np.linalg.norm(r)
    down = np.cross(f, r)
    c2w = np.eye(4)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = r, down, f, position
    return c2w


def _positions(rng, n: int, radius: float, center, elevation=(12.0, 62.0)) -> np.ndarray:
    """n camera centres on the upper hemisphere: stratified azimuth and elevation, jittered."""
    az = 2 * np.pi * (np.arange(n) + rng.uniform(0.0, 1.0, n)) / n + rng.uniform(0, 2 * np.pi)
    lo, hi = (math.sin(math.radians(e)) for e in elevation)
    s = lo + (hi - lo) * (rng.permutation(n) + rng.uniform(0.0, 1.0, n)) / n
    el = np.arcsin(s)
    dirs = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=1)
    return np.asarray(center, float) + radius * dirs


def _render(shapes, c2w, fx, width, height, aa):
    """-> (rgba [H, W, 4] straight alpha in [0, 1], hit points [M, 3], their colours [M, 3])."""
    jj, ii = np.meshgrid(np.arange(width), np.arange(height))
    premult = np.zeros((height * width, 3))
    cover = np.zeros(height * width)
    pts, cols = [], []
    offsets = (np.arange(aa) + 0.5) / aa
    for oy in offsets:
        for ox in offsets:
            x = ((jj.ravel() + ox) - 0.5 * width) / fx
            y = ((ii.ravel() + oy) - 0.5 * height) / fx
            d_cam = np.stack([x, y, np.ones_like(x)], axis=1)
            d = d_cam @ c2w[:3, :3].T
            d /= np.linalg.norm(d, axis=1, keepdims=True)
            o = np.broadcast_to(c2w[:3, 3], d.shape)
            hit, p, colour = _trace(shapes, o, d)
            premult += colour * hit[:, None]
            cover += hit
            pts.append(p[hit])
            cols.append(colour[hit])
    n = aa * aa
    alpha = cover / n
    rgb = np.where(cover[:, None] > 0, premult / np.maximum(cover, 1)[:, None], 0.0)
    rgba = np.concatenate([rgb, alpha[:, None]], axis=1).reshape(height, width, 4)
    return rgba, np.concatenate(pts), np.concatenate(cols)


# --------------------------------------------------------------------------- driver


def generate_demo_scene(
    out_dir,
    n_train: int = 24,
    n_test: int = 8,
    size: tuple[int, int] = (128, 128),
    seed: int = 0,
    *,
    fov_x_deg: float = 45.0,
    camera_radius: float = 4.0,
    aa: int = 2,
    n_points: int = 4000,
) -> DemoScene:
    """Ray trace the demo scene into `out_dir` (NeRF-synthetic layout); deterministic per seed.

    size is (W, H); aa x aa rays per pixel; n_points surface points (from what the training
    cameras see, with their shaded colours) go to points3d.ply for initialisation.
    """
    from .ply import save_points_ply

    width, height = (int(s) for s in size)
    if width < 8 or height < 8 or n_train < 1 or n_test < 0 or aa < 1:
        raise ValueError("need size >= 8x8, n_train >= 1, n_test >= 0, aa >= 1")
    out = Path(out_dir)
    rng = np.random.default_rng(seed)
    shapes = _build_shapes(width / 128.0)
    angle_x = math.radians(fov_x_deg)
    fx = 0.5 * width / math.tan(0.5 * angle_x)
    flip = np.diag([1.0, -1.0, -1.0, 1.0])  # OpenCV <-> OpenGL camera axes

    train_pts, train_cols = [], []
    for split, n in (("train", n_train), ("test", n_test)):
        (out / split).mkdir(parents=True, exist_ok=True)
        frames = []
        for i, pos in enumerate(_positions(rng, n, camera_radius, SCENE_CENTER)):
            c2w = _look_at_opencv(pos, SCENE_CENTER)
            rgba, pts, cols = _render(shapes, c2w, fx, width, height, aa)
            png = np.round(np.clip(rgba, 0.0, 1.0) * 255.0).astype(np.uint8)
            Image.fromarray(png, "RGBA").save(out / split / f"r_{i}.png", optimize=False)
            frames.append(
                {
                    "file_path": f"./{split}/r_{i}",
                    "transform_matrix": np.round(c2w @ flip, 9).tolist(),
                }
            )
            if split == "train":
                train_pts.append(pts)
                train_cols.append(cols)
        meta = {"camera_angle_x": angle_x, "frames": frames}
        (out / f"transforms_{split}.json").write_text(json.dumps(meta, indent=2) + "\n")

    pts, cols = np.concatenate(train_pts), np.concatenate(train_cols)
    pick = rng.choice(len(pts), size=min(n_points, len(pts)), replace=False)
    points, colors = pts[pick].astype(np.float32), cols[pick].astype(np.float32)
    save_points_ply(out / "points3d.ply", points, colors)
    return DemoScene(out, points, colors, SCENE_CENTER, camera_radius)
