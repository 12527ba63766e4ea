"""The scene of the benchmark capture (`xprc.data.capture`): an unbounded outdoor-like scene,
ray traced in NumPy.

World axes: +z up, the ground is z = 0. Around the origin stand `objects` photo-textured
spheres, boxes and capped cylinders (scikit-image's bundled sample photos, cropped, tinted and
resized so that a texel is a few millimetres: fine detail a point-based model needs many
primitives to fit). The ground is a textured plane (grass and gravel blended by a smooth mask,
about 3 mm texels) out to a distant cylindrical wall of photos all around (radius 60, height
16); above it, a sky gradient. Shading is Lambertian under one directional light, without
shadows, so appearance is view-independent. Textures are mip-mapped and each hit samples the
level of its pixel footprint (no moire on the far ground); edges are anti-aliased by `aa x aa`
rays per pixel.

Rays are traced in bands of rows, and an object is only tested against the rays inside its
projected bounding box (a conservative bound of its bounding sphere), so a view costs about its
pixel count times the few objects that overlap each pixel.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from PIL import Image

from .demo_scene import _Box, _bundled_photo, _Cylinder, _Sphere

WALL_RADIUS, WALL_HEIGHT = 60.0, 16.0
CAMERA_RING = 5.5  # the cameras' loop radius; no object stands within 1 of it
LIGHT = np.array([0.4, -0.3, 0.85]) / np.linalg.norm([0.4, -0.3, 0.85])  # towards the sun
AMBIENT, DIFFUSE = 0.42, 0.7
SKY_ZENITH, SKY_HORIZON = np.array([0.38, 0.56, 0.86]), np.array([0.84, 0.89, 0.95])
GROUND_TEXEL = 0.003  # metres
OBJECT_TEXEL = 0.004
COLOUR_PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "immunohistochemistry", "retina",
                 "hubble_deep_field", "colorwheel")  # fmt: skip
GREY_PHOTOS = ("brick", "camera", "grass", "gravel", "moon", "coins", "clock", "cell", "page")
GROUND, WALL, SKY = 0, 1, -1  # hit ids; objects are 2, 3, ...


# --------------------------------------------------------------------------- textures


def _rgb_photo(name: str) -> np.ndarray:
    return np.asarray(_bundled_photo(name), dtype=np.float32) / np.float32(255.0)


class Mips:
    """A texture [h, w, 3] and its box-filtered halvings; `sample` picks each lookup's level
    from its footprint in texels (nearest level, bilinear within it), wrapping in u and v."""

    def __init__(self, rgb: np.ndarray) -> None:
        levels = [np.asarray(rgb, np.float32)]
        while min(levels[-1].shape[:2]) >= 8:
            a = levels[-1]
            h, w = a.shape[0] // 2 * 2, a.shape[1] // 2 * 2
            a = a[:h, :w]
            levels.append(0.25 * (a[0::2, 0::2] + a[1::2, 0::2] + a[0::2, 1::2] + a[1::2, 1::2]))
        self.levels = levels
        self.width, self.height = rgb.shape[1], rgb.shape[0]

    def sample(self, u: np.ndarray, v: np.ndarray, footprint: np.ndarray) -> np.ndarray:
        """(u, v) [R] (1 = one texture width / height; v = 0 at the top row), footprint [R] in
        texels of level 0 -> [R, 3] float32."""
        level = np.clip(np.floor(np.log2(np.maximum(footprint, 1.0))), 0, len(self.levels) - 1)
        level = level.astype(np.int64)
        out = np.empty((len(u), 3), np.float32)
        for k in np.unique(level):
            m = level == k
            out[m] = _bilinear(self.levels[k], u[m], v[m])
        return out


def _bilinear(tex: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    h, w = tex.shape[:2]
    flat = tex.reshape(-1, 3)
    x = np.mod(u * w - 0.5, w).astype(np.float32)
    y = np.mod(v * h - 0.5, h).astype(np.float32)
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    x0, y0 = x0.astype(np.int64) % w, y0.astype(np.int64) % h
    x1, y1 = (x0 + 1) % w, (y0 + 1) % h
    r0, r1 = y0 * w, y1 * w
    top = flat[r0 + x0] * (1 - fx) + flat[r0 + x1] * fx
    bottom = flat[r1 + x0] * (1 - fx) + flat[r1 + x1] * fx
    return top * (1 - fy) + bottom * fy


def _texture(rng, size_m: tuple[float, float], detail: float) -> Mips:
    """A random crop of a bundled photo, tinted, at OBJECT_TEXEL / detail metres a texel for a
    surface of size_m (width, height) metres (at least 8 and at most 1024 texels a side)."""
    name = str(rng.choice(COLOUR_PHOTOS + GREY_PHOTOS))
    src = _bundled_photo(name)
    w, h = src.size
    cw, ch = int(rng.integers(w // 3, w + 1)), int(rng.integers(h // 3, h + 1))
    x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    tw = int(np.clip(size_m[0] * detail / OBJECT_TEXEL, 8, 1024))
    th = int(np.clip(size_m[1] * detail / OBJECT_TEXEL, 8, 1024))
    crop = src.crop((x0, y0, x0 + cw, y0 + ch)).resize((tw, th), Image.Resampling.LANCZOS)
    rgb = np.asarray(crop, np.float32) / np.float32(255.0)
    tint = rng.uniform(0.55, 1.15, 3) if name in GREY_PHOTOS else rng.uniform(0.8, 1.1, 3)
    return Mips(np.clip(rgb * tint.astype(np.float32), 0.0, 1.0))


# --------------------------------------------------------------------------- shapes
# The demo's shapes intersect; these add a bounding sphere and a footprint-aware surface:
# surface(p, foot) -> (normal [R, 3], albedo [R, 3]), foot [R] = a pixel's size at p (metres).


class Ball(_Sphere):
    def __init__(self, center, radius, tex: Mips) -> None:
        super().__init__(center, radius, tex)
        self.bound = (self.c, radius)
        self.texel = 2 * np.pi * radius / tex.width

    def surface(self, p, foot):
        n = (p - self.c) / self.r
        u = 0.5 + np.arctan2(n[:, 1], n[:, 0]) / (2 * np.pi)
        v = np.arccos(np.clip(n[:, 2], -1.0, 1.0)) / np.pi
        return n, self.tex.sample(u, v, foot / self.texel)


class Crate(_Box):
    """A cube on the ground turned about +z, one texture per face."""

    def __init__(self, center, half, angle, faces: list[Mips]) -> None:
        super().__init__(center, half, angle, faces)
        self.bound = (self.c, half * math.sqrt(3.0))
        self.texels = [2 * half / f.width for f in faces]

    def surface(self, p, foot):
        q = (p - self.c) @ self.R / self.h
        axis = np.argmax(np.abs(q), axis=1)
        rows = np.arange(len(q))
        sign = np.sign(q[rows, axis])
        n_local = np.zeros_like(q)
        n_local[rows, axis] = sign
        u = np.select([axis == 0, axis == 1], [sign * q[:, 1], -sign * q[:, 0]], q[:, 0])
        v = np.where(axis == 2, -sign * q[:, 1], -q[:, 2])
        face = axis * 2 + (sign < 0)
        albedo = np.empty(q.shape, np.float32)
        for f, tex in enumerate(self.faces):
            m = face == f
            if m.any():
                albedo[m] = tex.sample(0.5 * (u[m] + 1), 0.5 * (v[m] + 1), foot[m] / self.texels[f])
        return n_local @ self.R.T, albedo


class Post(_Cylinder):
    """A capped cylinder standing on the ground: one texture around it, one on top."""

    def __init__(self, base, radius, height, side: Mips, top: Mips) -> None:
        super().__init__(base, radius, height, side, top)
        centre = np.array([base[0], base[1], 0.5 * height])
        self.bound = (centre, math.hypot(radius, 0.5 * height))
        self.side_texel = 2 * np.pi * radius / side.width
        self.top_texel = 2 * radius / top.width

    def surface(self, p, foot):
        x, y, z = p[:, 0] - self.b[0], p[:, 1] - self.b[1], p[:, 2]
        on_cap = (z >= self.hgt - 1e-6) | (z <= 1e-6)
        n = np.stack([x / self.r, y / self.r, np.zeros_like(z)], axis=1)
        n[on_cap] = [0.0, 0.0, 1.0]
        u = 0.5 + np.arctan2(y, x) / (2 * np.pi)
        albedo = self.side.sample(u, 1.0 - z / self.hgt, foot / self.side_texel)
        if on_cap.any():
            cu = 0.5 + 0.5 * x[on_cap] / self.r
            cv = 0.5 - 0.5 * y[on_cap] / self.r
            albedo[on_cap] = self.top.sample(cu, cv, foot[on_cap] / self.top_texel)
        return n, albedo


class Ground:
    """The plane z = 0 out to the wall: grass and gravel blended by a smooth mask."""

    def __init__(self) -> None:
        grass, gravel, mask = (_rgb_photo(n) for n in ("grass", "gravel", "moon"))
        self.grass = Mips(grass * np.array([0.55, 0.8, 0.38], np.float32))
        self.gravel = Mips(gravel * np.array([0.85, 0.74, 0.6], np.float32))
        self.mask = Mips(mask[..., :1].repeat(3, axis=2))
        self.tile = GROUND_TEXEL * self.grass.width  # metres per repeat (1.5 m)
        self.mask_tile = 23.0

    def intersect(self, o, d):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = -o[:, 2] / d[:, 2]
        return np.where((d[:, 2] < 0) & (t > 0), t, np.inf)

    def surface(self, p, foot):
        u, v = p[:, 0] / self.tile, p[:, 1] / self.tile
        texels = foot / GROUND_TEXEL
        grass = self.grass.sample(u, v, texels)
        gravel = self.gravel.sample(0.61 * u + 0.3, 0.61 * v + 0.7, texels * 0.61)
        m = self.mask.sample(p[:, 0] / self.mask_tile, p[:, 1] / self.mask_tile,
                             foot * self.mask.width / self.mask_tile)[:, :1]  # fmt: skip
        w = np.clip((m - 0.42) * 6.0, 0.0, 1.0)
        normal = np.broadcast_to(np.array([0.0, 0.0, 1.0]), p.shape)
        return normal, grass * (1 - w) + gravel * w


class Wall:
    """The distant background all around: a cylinder of photos seen from inside (unlit)."""

    def __init__(self, rng) -> None:
        height = 640
        tiles = []
        for name in rng.permutation(COLOUR_PHOTOS + ("brick", "grass", "camera", "clock")):
            pil = _bundled_photo(str(name))
            w = round(pil.size[0] * height / pil.size[1])
            rgb = np.asarray(pil.resize((w, height), Image.Resampling.LANCZOS), np.float32)
            tiles.append(rgb / np.float32(255.0) * rng.uniform(0.75, 1.0, 3).astype(np.float32))
        self.tex = Mips(np.concatenate(tiles, axis=1))
        self.texel = WALL_HEIGHT / height

    def intersect(self, o, d):
        a = d[:, 0] ** 2 + d[:, 1] ** 2
        b = o[:, 0] * d[:, 0] + o[:, 1] * d[:, 1]
        c = o[:, 0] ** 2 + o[:, 1] ** 2 - WALL_RADIUS**2  # < 0: every camera is inside
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (-b + np.sqrt(b * b - a * c)) / a
        z = o[:, 2] + t * d[:, 2]
        return np.where((a > 0) & (z >= 0) & (z <= WALL_HEIGHT), t, np.inf)

    def colour(self, p, foot):
        u = 0.5 + np.arctan2(p[:, 1], p[:, 0]) / (2 * np.pi)
        u = u * (2 * np.pi * WALL_RADIUS) / (self.tex.width * self.texel)  # square texels
        v = 1.0 - p[:, 2] / WALL_HEIGHT
        return self.tex.sample(u, v, foot / self.texel)


def sky(d: np.ndarray) -> np.ndarray:
    """The sky's colour for directions d [R, 3] (unit)."""
    s = np.clip(d[:, 2], 0.0, 1.0)[:, None] ** 0.6
    return (SKY_HORIZON * (1 - s) + SKY_ZENITH * s).astype(np.float32)


# --------------------------------------------------------------------------- the scene


class Scene:
    """The scene of a seed: ground, wall and `objects` shapes (their layout drawn from the
    seed), and `trace` to shade rays. detail: the objects' texels per metre relative to the
    full-size capture's (1 at 1296 pixels wide; a small capture gets coarser textures, which
    its pixels could not show anyway, and builds faster)."""

    def __init__(self, seed: int, objects: int, detail: float = 1.0) -> None:
        rng = np.random.default_rng([seed, 1])
        self.ground, self.wall = Ground(), Wall(rng)
        self.shapes = _objects(rng, objects, min(detail, 1.0))

    def trace(self, o: np.ndarray, d: np.ndarray, rows: int, cols: int, boxes, foot_per_t):
        """Rays o, d [rows * cols, 3] (one band of an image, row-major; o may broadcast),
        `boxes` per shape (row0, row1, col0, col1) of this band or None, foot_per_t: a pixel's
        size per unit of distance. -> (colour [R, 3] float32, id [R] int (SKY, GROUND, WALL or
        2 + the shape's index), t [R])."""
        t = self.ground.intersect(o, d)
        which = np.where(np.isfinite(t), GROUND, SKY)
        tw = self.wall.intersect(o, d)
        closer = tw < t
        t, which = np.where(closer, tw, t), np.where(closer, WALL, which)
        grid_t, grid_which = t.reshape(rows, cols), which.reshape(rows, cols)
        d_grid = d.reshape(rows, cols, 3)
        for k, (shape, box) in enumerate(zip(self.shapes, boxes, strict=True)):
            if box is None:
                continue
            r0, r1, c0, c1 = box
            sub_d = d_grid[r0:r1, c0:c1].reshape(-1, 3)
            ts = shape.intersect(np.broadcast_to(o[0], sub_d.shape), sub_d).reshape(r1 - r0, -1)
            old = grid_t[r0:r1, c0:c1]
            better = ts < old
            grid_t[r0:r1, c0:c1] = np.where(better, ts, old)
            grid_which[r0:r1, c0:c1] = np.where(better, 2 + k, grid_which[r0:r1, c0:c1])
        t, which = grid_t.reshape(-1), grid_which.reshape(-1)
        return self._shade(o, d, t, which, foot_per_t), which, t

    def _shade(self, o, d, t, which, foot_per_t) -> np.ndarray:
        colour = np.empty((len(d), 3), np.float32)
        m = which == SKY
        colour[m] = sky(d[m])
        p = np.broadcast_to(o, d.shape) + np.where(np.isfinite(t), t, 0.0)[:, None] * d
        foot = t * foot_per_t
        m = which == WALL
        if m.any():
            colour[m] = self.wall.colour(p[m], foot[m])
        for k in np.unique(which):
            if k in (SKY, WALL):
                continue
            m = which == k
            shape = self.ground if k == GROUND else self.shapes[k - 2]
            pm, fm = p[m], foot[m]
            if k == GROUND:  # the footprint grows as the ground turns away from the ray
                # (1/sqrt(cos): a compromise between blur along the slant and aliasing across)
                fm = fm / np.sqrt(np.maximum(np.abs(d[m][:, 2]), 0.05))
            normal, albedo = shape.surface(pm, fm)
            lambert = np.maximum(normal @ LIGHT, 0.0)
            colour[m] = np.clip(albedo * (AMBIENT + DIFFUSE * lambert)[:, None], 0.0, 1.0)
        return colour


def _objects(rng, count: int, detail: float) -> list:
    """`count` shapes standing on the ground, none overlapping another (in plan) nor within 1
    of the camera ring: about half near the centre, the rest scattered out to 16."""
    shapes, placed = [], []  # placed: (x, y, plan radius)
    tries = 0
    while len(shapes) < count and tries < 200 * max(count, 1):
        tries += 1
        near = len(shapes) < count // 2
        r = rng.uniform(0.0, 3.2) if near else rng.uniform(CAMERA_RING + 1.6, 16.0)
        az = rng.uniform(0, 2 * np.pi)
        x, y = r * np.cos(az), r * np.sin(az)
        size = rng.uniform(0.18, 0.55) if near else rng.uniform(0.3, 1.1)
        kind = int(rng.integers(0, 3))
        plan = size * (math.sqrt(2.0) if kind == 1 else 1.0)
        if abs(math.hypot(x, y) - CAMERA_RING) < plan + 1.0:
            continue
        if any(math.hypot(x - px, y - py) < plan + pr + 0.05 for px, py, pr in placed):
            continue
        placed.append((x, y, plan))
        if kind == 0:
            tex = _texture(rng, (2 * np.pi * size, np.pi * size), detail)
            shapes.append(Ball((x, y, size), size, tex))
        elif kind == 1:
            faces = [_texture(rng, (2 * size, 2 * size), detail) for _ in range(6)]
            shapes.append(Crate((x, y, size), size, rng.uniform(0, np.pi / 2), faces))
        else:
            height = size * rng.uniform(1.5, 3.5)
            side = _texture(rng, (2 * np.pi * size, height), detail)
            top = _texture(rng, (2 * size, 2 * size), detail)
            shapes.append(Post((x, y), size, height, side, top))
    return shapes


@functools.lru_cache(maxsize=2)
def scene(seed: int, objects: int, detail: float = 1.0) -> Scene:
    """The scene of (seed, objects, detail), built once per process."""
    return Scene(seed, objects, detail)
