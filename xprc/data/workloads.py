"""Standard workloads: the garden test scene of ../shared/data/garden and small random scenes.

The garden recipe is the one gsplat's tests use (shared/data/garden/README.md), so figures can be
compared with other renderers on the same work.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..activations import inverse
from ..camera import Camera
from ..conventions import SH_C0
from ..errors import DataError
from ..method_info import MethodInfo
from .npz import read_npz


def gaussian_params(means, scales, quats, opacities, colors, sh_degree: int = 3, dtype=np.float32):
    """Raw 3DGS parameters from linear scales, (w, x, y, z) quats, linear opacities, RGB colours."""
    n = len(means)
    sh = np.zeros((n, (sh_degree + 1) ** 2, 3))
    sh[:, 0] = (np.asarray(colors, np.float64) - 0.5) / SH_C0
    return {
        "means": np.asarray(means, dtype),
        "quats": np.asarray(quats, dtype),
        "scales": inverse("exp", np.asarray(scales, np.float64)).astype(dtype),
        "opacities": inverse("sigmoid", np.asarray(opacities, np.float64)).astype(dtype),
        "sh": sh.astype(dtype),
    }


def default_garden_path() -> Path:
    """Where the shared garden asset lives, overridable with XPRC_GARDEN."""
    env = os.environ.get("XPRC_GARDEN")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2]
    return checkout.parent / "shared" / "data" / "garden" / "test_garden.npz"


_GARDEN = {  # key: (shape with N and V for the counts, what)
    "means3d": (("N", 3), "positions"),
    "colors": (("N", 3), "colours in 0..255"),
    "viewmats": (("V", 4, 4), "world->camera matrices"),
    "Ks": (("V", 3, 3), "intrinsics"),
    "width": ((), "the image width"),
    "height": ((), "the image height"),
}


def _read_garden(path: Path) -> tuple:
    """The garden arrays (means3d, colors, viewmats, Ks, width, height), each checked for its
    shape and finite values; width and height are positive integers."""
    if not os.path.lexists(path):
        raise DataError(path, "garden workload not found (set XPRC_GARDEN to test_garden.npz)")
    data = read_npz(path, "garden workload file", "a garden workload file")
    counts: dict[str, int] = {}
    out = []
    for key, (shape, what) in _GARDEN.items():
        if key not in data:
            raise DataError(path, f"not a garden workload file (no '{key}': {what})")
        arr = data[key]
        for dim, want in zip(arr.shape, shape, strict=False):
            if isinstance(want, str):  # N and V: the first array that has them sets them
                counts.setdefault(want, dim)
        want = tuple(counts.get(d, -1) if isinstance(d, str) else d for d in shape)
        ok = arr.dtype.kind in "iuf" and arr.shape == want and np.isfinite(arr).all()
        if not ok or (not shape and not (arr == int(arr) and 0 < arr <= 1 << 16)):
            want = f"finite numbers of shape {list(shape)}" if shape else "a positive integer"
            raise DataError(path, f"'{key}' ({what}) must be {want}, got {arr.dtype} "
                            f"{list(arr.shape)}")  # fmt: skip
        out.append(int(arr) if not shape else arr)
    return tuple(out)


def garden_workload(
    path=None, num: int | None = None, scale: float = 1.0, sh_degree: int = 3, dtype=np.float32
):
    """The garden workload: (raw 3DGS params, list of 3 Cameras).

    num:   keep an evenly strided subset of this many primitives (None: all 111,785);
    scale: image resolution factor (K is scaled with it).
    """
    path = Path(path) if path is not None else default_garden_path()
    means, colors, viewmats, ks, width, height = _read_garden(path)
    keep = np.all((means >= -2) & (means <= 2), axis=1)
    means, colors = means[keep], colors[keep] / 255.0
    n = len(means)
    rng = np.random.default_rng(0)
    scales = rng.uniform(1e-4, 0.02, (n, 3))
    quats = rng.standard_normal((n, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    opacities = rng.uniform(0, 1, n)
    if num is not None and num < n:
        idx = np.linspace(0, n - 1, num).astype(np.int64)
        means, colors, scales, quats, opacities = (
            a[idx] for a in (means, colors, scales, quats, opacities)
        )
    params = gaussian_params(means, scales, quats, opacities, colors, sh_degree, dtype)
    w, h = round(width * scale), round(height * scale)
    cams = []
    for viewmat, k in zip(viewmats, ks, strict=False):
        k = np.array(k, np.float64)
        k[0] *= w / width
        k[1] *= h / height
        cams.append(
            Camera(viewmat=np.asarray(viewmat, dtype), K=k.astype(dtype), width=w, height=h)
        )
    return params, cams


def random_scene(
    n: int, seed: int = 0, sh_degree: int = 3, dtype=np.float32, spread=1.0, depth=4.0
):
    """Random Gaussians in front of an identity camera (for tests and demos)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, spread, (n, 3)) + np.array([0, 0, depth])
    params = {
        "means": means.astype(dtype),
        "quats": rng.normal(size=(n, 4)).astype(dtype),
        "scales": np.log(rng.uniform(0.02, 0.3, (n, 3))).astype(dtype),
        "opacities": rng.normal(0, 2, n).astype(dtype),
        "sh": rng.normal(0, 0.3, (n, (sh_degree + 1) ** 2, 3)).astype(dtype),
    }
    return params


def adapt_params(method, params):
    """The 3DGS-layout parameters for any method: parameters are matched by name; a parameter
    named `scales` whose activation is `abs` gets linear sizes (3 sigma) instead of log scales,
    and a method with more sizes than 3 (LinPrim tetrahedra: 4 vertex distances) gets the extra
    ones from the mean of the three. A parameter the layout lacks (a Beta kernel's shape, a
    Student-t degree of freedom) starts at its spec's initial raw value (else 0), and a method
    with fewer sizes (2DGS surfels: two tangent scales) keeps the first ones."""
    out = {}
    n = len(next(iter(params.values())))
    for p in MethodInfo.of(method).params:
        if p.name not in params:
            init = getattr(p, "init_raw", None)
            dtype = params["means"].dtype if "means" in params else np.float32
            fill = init if isinstance(init, (int, float)) else 0.0
            out[p.name] = np.full((n, *p.shape), fill, dtype)
            continue
        value = params[p.name]
        if tuple(p.shape) and value.ndim == len(p.shape) + 1 and value.shape[-1] > p.shape[-1]:
            value = value[..., : p.shape[-1]]
        if p.activation == "abs" and p.name == "scales":
            want = tuple(p.shape)[-1] if tuple(p.shape) else 1
            if value.shape[-1] < want:
                extra = np.repeat(value.mean(-1, keepdims=True), want - value.shape[-1], -1)
                value = np.concatenate([value, extra], -1)
            value = (3.0 * np.exp(value)).astype(value.dtype)
        out[p.name] = value
    return out
