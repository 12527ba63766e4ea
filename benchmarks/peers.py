"""The JAX peers side by side: xprc, splax and jax-gs render the same frame from the same Gaussians.

    python benchmarks/peers.py --splax PATH --jax-gs PATH  # garden workload, first camera
    python benchmarks/peers.py --num 20000 --scale 0.5 ... # a lighter CPU run (garden subset)
    python benchmarks/peers.py --quick                     # smoke run: 800 random primitives
    python benchmarks/peers.py --precision highest ...    # full float32 matmuls, on a TPU too
    python benchmarks/peers.py --tpu-default-dots ...     # the peers' matmuls rounded as on a TPU

Each renderer gets the workload's 3DGS Gaussians and camera converted to its own conventions.
Per row: the forward (`jax.jit` of the image) and forward + backward (`jax.jit` of the gradient of
the image's sum with respect to all the renderer's Gaussian parameters), as the median of
`--repeat` calls after one warm call (`block_until_ready`), the first call's seconds (tracing and
compiling), the PSNR of the image against xprc's (which equals gsplat's to float32 rounding:
README), and whether every gradient entry is finite. xprc renders through its public API
(`benchmarks.run.public_render`: `jax.jit` of `xprc.render` with the fitted capacity).

The peers are not dependencies of xprc; each is found at the path given, else imported:

- splax: github.com/maurock/splax ("Implementation of Gaussian Splatting in pure JAX", not on
  PyPI): `git clone https://github.com/maurock/splax` and `--splax CLONE` (its `src/` is used);
  it imports chex, jaxtyping, flax and transformers (its gaussians.py imports
  `transformers.pipeline` at import time). `pip install splax` installs another project of the
  same name (learnsyslab/splax, Warp kernels, for NVIDIA GPUs); when that is the `splax` found,
  its row renders through `splax.render` and says which one it is.
- jax-gs: github.com/ghif/jax-gs (not on PyPI): `git clone https://github.com/ghif/jax-gs` and
  `--jax-gs CLONE`; it needs chex. Two rows: its standard rasteriser and its TPU rasteriser
  (`render(..., fast_tpu_rasterizer=True)`).

A peer that is not found is a row that says so and how to install it; a peer that raises is a row
with the error's first line; each row's notes list what the peer computes differently from
gsplat's 3DGS (read in its source), which is what its PSNR measures. The workload's colours are
degree-0 spherical harmonics (the garden's are; `--quick`'s random scene is made so): splax's
colour is a sigmoid of the SH sum, which converts exactly only for a constant colour.

Prints a markdown table and writes benchmarks/results/peers.json (--quick: peers_quick.json).
"""

import argparse
import contextlib
import dataclasses
import importlib
import inspect
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import xprc  # noqa: E402
from benchmarks.run import (  # noqa: E402
    fmt_table,
    load_average,
    machine,
    public_render,
    workload,
    write_json,
)
from xprc.conventions import SH_C0  # noqa: E402

SPLAX_INSTALL = (
    "git clone https://github.com/maurock/splax, pip install chex jaxtyping flax transformers, "
    "and pass --splax CLONE (`pip install splax` is another project: learnsyslab/splax, Warp "
    "kernels for NVIDIA GPUs)"
)
JAX_GS_INSTALL = "git clone https://github.com/ghif/jax-gs, pip install chex, pass --jax-gs CLONE"
COLOUR_EPS = 1e-6  # splax's colours are sigmoids: a colour is kept inside (eps, 1 - eps)


class PeerMissing(Exception):
    """The peer (or a package it imports) is not installed."""


@dataclasses.dataclass(frozen=True)
class Scene:
    """One frame's 3DGS Gaussians (raw, as xprc and gsplat store them) and its pinhole camera."""

    means: np.ndarray  # [N, 3]
    quats: np.ndarray  # [N, 4] (w, x, y, z), not necessarily unit
    log_scales: np.ndarray  # [N, 3]
    logit_opacities: np.ndarray  # [N]
    sh: np.ndarray  # [N, K, 3] coefficient-major, K = (degree + 1)^2
    viewmat: np.ndarray  # [4, 4] world->camera, OpenCV axes
    K: np.ndarray  # [3, 3] intrinsics in pixels
    width: int
    height: int

    @classmethod
    def of(cls, params: dict, camera) -> "Scene":
        f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
        return cls(
            f32(params["means"]), f32(params["quats"]), f32(params["scales"]),
            f32(params["opacities"]).reshape(-1), f32(params["sh"]), f32(camera.viewmat),
            f32(camera.K), int(camera.width), int(camera.height),
        )  # fmt: skip

    @property
    def colour(self) -> np.ndarray:
        """[N, 3] the degree-0 colour, as 3DGS computes it: SH_C0 * sh[0] + 0.5, at least 0."""
        return np.maximum(SH_C0 * self.sh[:, 0].astype(np.float64) + 0.5, 0.0)

    def view_dependent(self) -> int:
        """How many primitives have a nonzero SH coefficient beyond degree 0."""
        return int(np.any(self.sh[:, 1:] != 0, axis=(1, 2)).sum())


# --------------------------------------------------------------------------- conversions


def splax_arrays(scene: Scene) -> tuple[dict, int]:
    """maurock/splax's GaussianParams fields (gaussians.py) and how many colour channels were
    clipped into (eps, 1 - eps). splax's colour is sigmoid(sum of SH terms) over a flat [N, 48]
    (reshaped to [N, 16, 3]), so the degree-0 coefficient becomes logit(colour) / SH_C0; a
    view-dependent colour has no exact conversion and is refused."""
    n = scene.means.shape[0]
    if scene.view_dependent():
        raise ValueError(
            f"splax's colour is a sigmoid of the SH sum: {scene.view_dependent():,} primitives "
            "with SH beyond degree 0 have no exact conversion"
        )
    colour = scene.colour
    clipped = int(np.sum((colour < COLOUR_EPS) | (colour > 1 - COLOUR_EPS)))
    colour = np.clip(colour, COLOUR_EPS, 1 - COLOUR_EPS)
    sh = np.zeros((n, 16, 3), np.float64)
    sh[:, 0] = np.log(colour / (1 - colour)) / SH_C0
    return {
        "xyz": scene.means,
        "sh": sh.reshape(n, 48).astype(np.float32),
        "opacity": scene.logit_opacities.reshape(n, 1),  # sigmoid in render_image
        "log_scale": scene.log_scales,
        "quaternion": scene.quats,  # (w, x, y, z), normalised in quaternion_to_rot_matrix
    }, clipped


def splax_camera(scene: Scene) -> dict:
    """maurock/splax's CameraParams.make_camera_params arguments: no principal point (it is the
    image centre in project_gaussians)."""
    return {
        "w2c": scene.viewmat, "focal_x": float(scene.K[0, 0]), "focal_y": float(scene.K[1, 1]),
        "img_width": scene.width, "img_height": scene.height,
    }  # fmt: skip


def jax_gs_arrays(scene: Scene) -> dict:
    """jax-gs's Gaussians fields (core/gaussians.py): log scales, (w, x, y, z) quaternions,
    opacity logits [N, 1], SH [N, K, 3] with colour = sum + 0.5 clipped to [0, 1]."""
    return {
        "means": scene.means,
        "scales": scene.log_scales,
        "quaternions": scene.quats,
        "opacities": scene.logit_opacities.reshape(-1, 1),
        "sh_coeffs": scene.sh,
    }


def jax_gs_camera(scene: Scene) -> dict:
    """jax-gs's Camera fields (core/camera.py; full_proj is not read by its renderer)."""
    k = scene.K
    return {
        "W": scene.width, "H": scene.height, "fx": float(k[0, 0]), "fy": float(k[1, 1]),
        "cx": float(k[0, 2]), "cy": float(k[1, 2]), "W2C": scene.viewmat,
        "full_proj": np.eye(4, dtype=np.float32),
    }  # fmt: skip


def sh_degree(scene: Scene) -> int:
    return round(scene.sh.shape[1] ** 0.5) - 1


# --------------------------------------------------------------------------- the renderers

# A builder takes the scene and returns (parameters pytree, image function of it [H, W, 3],
# which package renders, notes); it raises PeerMissing when the peer is not installed.
Build = Callable[[Scene], tuple]


def import_peer(module: str, path: str | None, install: str):
    """`module` from `path` (put first on sys.path) when given, else as installed."""
    if path:
        folder = Path(path).expanduser()
        if (folder / "src" / module).is_dir():
            folder = folder / "src"
        if not (folder / module).is_dir():
            raise PeerMissing(f"no {module}/ package in {path}: {install}")
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = e.name or str(e)
        what = "" if missing.split(".")[0] == module else f" (it needs {missing})"
        raise PeerMissing(f"{module} cannot be imported{what}: {install}") from None


def build_xprc(scene: Scene):
    method = xprc.load("3dgs")
    params = {
        "means": scene.means, "quats": scene.quats, "scales": scene.log_scales,
        "opacities": scene.logit_opacities, "sh": scene.sh,
    }  # fmt: skip
    params = {k: jnp.asarray(v) for k, v in params.items()}
    camera = xprc.Camera(viewmat=scene.viewmat, K=scene.K, width=scene.width, height=scene.height)
    config = xprc.fit_config(method, params, camera)
    forward, _ = public_render(method, config)  # jax.jit of xprc.render, on_overflow="defer"
    dropped = int(forward(params, camera).stats["dropped"])
    notes = [f"public API: jax.jit of xprc.render, capacity {config.max_entries:,}, "
             f"{dropped:,} entries dropped"]  # fmt: skip
    return params, lambda p: forward(p, camera).image, f"xprc {xprc.__version__}", notes


SPLAX_NOTES = [
    "maurock/splax (pure JAX), SplaxRenderer.render_image with its defaults (tile 16, at most "
    "500 Gaussians per tile)",
    "principal point fixed at the image centre (no cx, cy); pixels sampled at integer "
    "coordinates, not pixel centres",
    "colour sigmoid(SH sum) (degree 0 converted exactly); 2D covariance + 1e-4 I, not the 0.3 I "
    "low-pass; no 0.99 alpha cap, no 1/255 cut, no early stop; near plane 0.2; the projection's "
    "Jacobian is under stop_gradient",
]


CLIP_NOTE = (
    "it calls jnp.clip(x, a_min=..., a_max=...), keywords this JAX no longer takes: passed on as "
    "min=, max= (the same meaning) while its render is traced"
)


@contextlib.contextmanager
def clip_keywords():
    """jnp.clip taking the a_min/a_max keywords of older JAX, for as long as the block runs."""
    original = jnp.clip
    if "a_max" in inspect.signature(original).parameters:
        yield
        return

    def clip(arr, min=None, max=None, *, a_min=None, a_max=None):  # noqa: A002
        return original(arr, a_min if min is None else min, a_max if max is None else max)

    jnp.clip = clip
    try:
        yield
    finally:
        jnp.clip = original


@contextlib.contextmanager
def tpu_default_dots():
    """While the block runs (while jax traces a renderer), a matrix product at JAX's default
    precision is computed from its float32 operands rounded to bfloat16, as a TPU computes it
    (a CPU or GPU computes it in float32; a product that asks for more precision, as all of
    xprc's do, is left alone). jax.numpy's matmul and dot (the peers' `@`) call the private
    `jax._src.lax.lax.dot_general`, which is what this replaces; einsum, which took its
    dot_general when JAX was imported, is not reached (neither peer calls it)."""
    from jax._src.lax import lax as lax_internal

    original = getattr(lax_internal, "dot_general", None)
    if original is None:
        raise RuntimeError(f"--tpu-default-dots: JAX {jax.__version__} has no "
                           "jax._src.lax.lax.dot_general to wrap")  # fmt: skip

    def rounded(x):
        x = jnp.asarray(x)
        return x.astype(jnp.bfloat16).astype(x.dtype) if x.dtype == jnp.float32 else x

    def dot_general(lhs, rhs, dimension_numbers, precision=None, *args, **kwargs):
        canonical = lax_internal.canonicalize_precision(precision)
        if canonical is None or canonical == (jax.lax.Precision.DEFAULT,) * 2:
            lhs, rhs = rounded(lhs), rounded(rhs)
        return original(lhs, rhs, dimension_numbers, precision, *args, **kwargs)

    lax_internal.dot_general = dot_general
    try:
        yield
    finally:
        lax_internal.dot_general = original


def with_tpu_default_dots(build: Build) -> Build:
    """`build` whose image function is traced under tpu_default_dots."""

    def wrapped(scene: Scene):
        params, image_fn, package, notes = build(scene)
        jax.clear_caches()  # jax.numpy's jitted matmul traces again, through the wrap

        def image(p):
            with tpu_default_dots():
                return image_fn(p)

        note = "--tpu-default-dots: its default-precision matmuls from bfloat16-rounded operands"
        return params, image, package, [*notes, note]

    return wrapped


def build_splax(path: str | None) -> Build:
    def build(scene: Scene):
        splax = import_peer("splax", path, SPLAX_INSTALL)
        try:
            renderer = importlib.import_module("splax.renderer")
        except ModuleNotFoundError as e:
            if e.name == "splax.renderer" and hasattr(splax, "render"):
                return build_splax_pypi(splax, scene)
            raise PeerMissing(f"splax cannot be imported (it needs {e.name}): "
                              f"{SPLAX_INSTALL}") from None  # fmt: skip
        gaussians = importlib.import_module("splax.gaussians")
        cameras = importlib.import_module("splax.cameras")
        arrays, clipped = splax_arrays(scene)
        params = gaussians.GaussianParams(**{k: jnp.asarray(v) for k, v in arrays.items()})
        cam = splax_camera(scene)
        camera = cameras.CameraParams.make_camera_params(**{**cam, "w2c": jnp.asarray(cam["w2c"])})
        render = renderer.SplaxRenderer()
        notes = [*SPLAX_NOTES, f"{clipped:,} colour channels clipped into "
                 f"({COLOUR_EPS:g}, 1 - {COLOUR_EPS:g}) for the sigmoid"]  # fmt: skip
        notes.append(f"loaded from {Path(splax.__file__).parent}")
        if "a_max" not in inspect.signature(jnp.clip).parameters:
            notes.append(CLIP_NOTE)

        def image(p):
            with clip_keywords():  # Python runs only while jax traces it
                return render.render_image(p, camera)

        return params, image, "maurock/splax (pure JAX)", notes

    return build


def build_splax_pypi(splax, scene: Scene):
    """splax from PyPI (learnsyslab/splax): `splax.render` of raw parameters, gsplat's camera."""
    version = getattr(splax, "__version__", "?")
    params = (scene.means, scene.log_scales, scene.quats, scene.sh, scene.logit_opacities)
    params = tuple(jnp.asarray(a) for a in params)
    k = scene.K
    kwargs = {
        "viewmat": jnp.asarray(scene.viewmat), "background": jnp.zeros(3, jnp.float32),
        "img_shape": (scene.height, scene.width), "f": (float(k[0, 0]), float(k[1, 1])),
        "c": (float(k[0, 2]), float(k[1, 2])),
    }  # fmt: skip
    notes = [f"splax {version} from PyPI (learnsyslab/splax: Warp kernels through JAX's FFI, "
             "for NVIDIA GPUs), not the pure-JAX maurock/splax: splax.render"]  # fmt: skip
    package = f"splax {version} (PyPI: learnsyslab/splax, Warp)"
    return params, lambda p: splax.render(*p, **kwargs)[0], package, notes


JAX_GS_NOTES = [
    "depth sort key quantised to 13 bits; alpha kept where the exponent is > -10 (not "
    "alpha >= 1/255); a Gaussian covers at most 16 x 16 tiles; at most 4,096 Gaussians per tile",
]


def build_jax_gs(path: str | None, tpu: bool) -> Build:
    def build(scene: Scene):
        package = import_peer("jax_gs", path, JAX_GS_INSTALL)
        try:
            core = importlib.import_module("jax_gs.core.gaussians")
            camera_mod = importlib.import_module("jax_gs.core.camera")
            renderer = importlib.import_module("jax_gs.renderer.renderer")
        except ModuleNotFoundError as e:
            raise PeerMissing(f"jax_gs cannot be imported (it needs {e.name}): "
                              f"{JAX_GS_INSTALL}") from None  # fmt: skip
        params = core.Gaussians(**{k: jnp.asarray(v) for k, v in jax_gs_arrays(scene).items()})
        cam = jax_gs_camera(scene)
        camera = camera_mod.Camera(**{**cam, "W2C": jnp.asarray(cam["W2C"])})
        degree, background = sh_degree(scene), jnp.zeros(3, jnp.float32)
        which = (
            "fast_tpu_rasterizer=True (its TPU rasteriser)" if tpu else "its standard rasteriser"
        )
        notes = [f"ghif/jax-gs, jax_gs.renderer.renderer.render, {which}", *JAX_GS_NOTES,
                 f"loaded from {Path(package.__file__).parent}"]  # fmt: skip

        def image(p):
            return renderer.render(p, camera, background, fast_tpu_rasterizer=tpu,
                                   sh_degree=degree)[0]  # fmt: skip

        return params, image, "ghif/jax-gs", notes

    return build


def renderers(args) -> dict[str, Build]:
    """Row name -> builder, in the order of the table."""
    return {
        "xprc": build_xprc,
        "splax": build_splax(args.splax),
        "jax-gs": build_jax_gs(args.jax_gs, tpu=False),
        "jax-gs tpu rasteriser": build_jax_gs(args.jax_gs, tpu=True),
    }


# --------------------------------------------------------------------------- measuring


def psnr(image, reference) -> float:
    """PSNR in dB of `image` against `reference` (colours in [0, 1])."""
    diff = np.asarray(image, np.float64) - np.asarray(reference, np.float64)
    mse = float(np.mean(diff * diff))
    return float("inf") if mse == 0 else -10.0 * float(np.log10(mse))


def one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= 240 else text[:237] + "..."


def _timed(fn, arg, repeat: int):
    """(output, first call's seconds, median ms of `repeat` calls after it)."""
    start = time.perf_counter()
    out = jax.block_until_ready(fn(arg))
    first = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(arg))
        times.append((time.perf_counter() - start) * 1e3)
    return out, first, statistics.median(times)


def _nonfinite(tree) -> tuple[int, int]:
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]
    return sum(int((~np.isfinite(x)).sum()) for x in leaves), sum(x.size for x in leaves)


def measure(name: str, build: Build, scene: Scene, reference, repeat: int) -> dict:
    """One row: build the renderer's inputs, time its forward and fwd+bwd, compare its image
    with `reference` (None: this is the reference) and check its gradients are finite."""
    row: dict = {"renderer": name, "status": "ok", "notes": []}
    try:
        params, image_fn, row["package"], row["notes"] = build(scene)
    except PeerMissing as e:
        row["status"] = f"not installed: {e}"
        return row
    except Exception as e:  # a peer's own failure is the row's result
        row["status"] = f"error: {one_line(e)}"
        return row
    try:
        image, row["forward first s"], row["forward ms"] = _timed(jax.jit(image_fn), params, repeat)
    except Exception as e:
        row["status"] = f"error (forward): {one_line(e)}"
        return row
    image = np.asarray(image)
    row["image_array"] = image
    row["image"] = list(image.shape)
    row["image nonfinite"] = int((~np.isfinite(image)).sum())
    if row["image nonfinite"]:  # no PSNR of it: a NaN would make the JSON invalid
        row["psnr db"] = None
        row["notes"].append(f"{row['image nonfinite']:,} of {image.size:,} image values NaN/inf")
    elif reference is not None and image.shape == reference.shape:
        row["psnr db"] = psnr(image, reference)
        row["max abs diff"] = float(np.max(np.abs(image.astype(np.float64) - reference)))
    elif reference is not None:
        row["psnr db"] = None
        row["notes"].append(f"image {list(image.shape)}, xprc's {list(reference.shape)}")
    grad = jax.jit(jax.grad(lambda p: jnp.sum(image_fn(p))))
    try:
        grads, row["fwd+bwd first s"], row["fwd+bwd ms"] = _timed(grad, params, repeat)
    except Exception as e:
        row["status"] = f"error (gradient): {one_line(e)}"
        return row
    row["gradient nonfinite"], row["gradient entries"] = _nonfinite(grads)
    return row


# --------------------------------------------------------------------------- main


def options(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splax", default=None, help="a clone of github.com/maurock/splax")
    ap.add_argument("--jax-gs", default=None, help="a clone of github.com/ghif/jax-gs")
    ap.add_argument("--num", type=int, default=None, help="primitives (default: all)")
    ap.add_argument("--scale", type=float, default=1.0, help="image resolution factor")
    ap.add_argument("--camera", type=int, default=0, help="which of the workload's cameras")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default=None,
                    help="comma list of rows to run (xprc always runs: the reference)")  # fmt: skip
    ap.add_argument("--precision", choices=("default", "high", "highest"), default=None,
                    help="jax_default_matmul_precision for the run (default: JAX's own; on a "
                    "TPU that computes float32 matmuls in bfloat16)")  # fmt: skip
    ap.add_argument("--tpu-default-dots", action="store_true",
                    help="the peers' matrix products at JAX's default precision computed from "
                    "bfloat16-rounded operands, as on a TPU")  # fmt: skip
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 800 random primitives at 128x83, one repeat")  # fmt: skip
    ap.add_argument("--out", default=None,
                    help="JSON output (default benchmarks/results/peers.json; --quick: "
                    "peers_quick.json)")  # fmt: skip
    args = ap.parse_args(argv)
    for name, value, ok in (("--num", args.num, args.num is None or args.num >= 1),
                            ("--scale", args.scale, args.scale > 0),
                            ("--repeat", args.repeat, args.repeat >= 1)):  # fmt: skip
        if not ok:
            ap.error(f"{name} {value}: expected a positive number")
    if args.out is None:
        name = "peers_quick.json" if args.quick else "peers.json"
        args.out = str(ROOT / "benchmarks" / "results" / name)
    if args.quick:
        args.num, args.scale, args.repeat = 800, 0.2, 1
    return args


def load_scene(args) -> tuple[Scene, str]:
    params, cams, source = workload(args.num, args.scale, args.quick)
    if not 0 <= args.camera < len(cams):
        raise SystemExit(f"error: --camera {args.camera}: the workload has {len(cams)} cameras")
    scene = Scene.of(params, cams[args.camera])
    if scene.view_dependent():
        print(f"{source} scene: {scene.view_dependent():,} primitives' SH beyond degree 0 set to "
              "0 (colours of degree 0, as the garden's)", file=sys.stderr)  # fmt: skip
        sh = scene.sh.copy()
        sh[:, 1:] = 0
        scene = dataclasses.replace(scene, sh=sh)
    return scene, source


def _cell(row, key, fmt):
    return "-" if row.get(key) is None else format(row[key], fmt)


def _gradients(row) -> str:
    if "gradient nonfinite" not in row:
        return "-"
    bad, total = row["gradient nonfinite"], row["gradient entries"]
    return "finite" if not bad else f"{bad:,} of {total:,} NaN/inf"


def _psnr_cell(row) -> str:
    if row.get("image nonfinite"):
        return f"NaN image ({row['image nonfinite']:,} values)"
    if row["renderer"] == "xprc" and "image" in row:
        return "reference"
    return _cell(row, "psnr db", ".1f")


def table(rows) -> str:
    return fmt_table(rows, [
        ("renderer", lambda r: r["renderer"]),
        ("package", lambda r: r.get("package", "-")),
        ("forward ms", lambda r: _cell(r, "forward ms", ".1f")),
        ("fwd+bwd ms", lambda r: _cell(r, "fwd+bwd ms", ".1f")),
        ("first call s (fwd/grad)",
         lambda r: f"{_cell(r, 'forward first s', '.1f')}/{_cell(r, 'fwd+bwd first s', '.1f')}"),
        ("PSNR vs xprc dB", _psnr_cell),
        ("gradients", _gradients),
        ("status", lambda r: r["status"]),
    ])  # fmt: skip


def main(argv=None, builders: dict[str, Build] | None = None) -> dict:
    args = options(argv)
    if args.precision:  # every renderer's matmuls (the peers project with them)
        jax.config.update("jax_default_matmul_precision", args.precision)
    scene, source = load_scene(args)
    builders = builders or renderers(args)
    if args.tpu_default_dots:  # the peers only: xprc's products all ask for full float32
        builders = {k: v if k == "xprc" else with_tpu_default_dots(v) for k, v in builders.items()}
    if args.only:
        keep = {"xprc", *args.only.split(",")}
        if keep - set(builders):
            raise SystemExit(f"error: --only {args.only}: no row named "
                             f"{', '.join(sorted(keep - set(builders)))} (rows: "
                             f"{', '.join(builders)})")  # fmt: skip
        builders = {k: v for k, v in builders.items() if k in keep}
    n = scene.means.shape[0]
    print(f"{source}: {n:,} primitives, {scene.width}x{scene.height}, camera {args.camera}, "
          f"{jax.default_backend()}", file=sys.stderr)  # fmt: skip
    rows, reference = [], None
    for name, build in builders.items():
        row = measure(name, build, scene, reference, args.repeat)
        if name == "xprc":
            reference = row.pop("image_array", None)
        row.pop("image_array", None)
        rows.append(row)
        print(f"[{name}] {row['status']}", file=sys.stderr, flush=True)
    print(f"\n## Peers on the {source} workload ({n:,} primitives, {scene.width}x"
          f"{scene.height}, {jax.default_backend()}, ms per frame)\n")  # fmt: skip
    print(table(rows))
    for row in rows:
        for note in row["notes"]:
            print(f"- {row['renderer']}: {note}")
    results = {
        "machine": machine(), "load average": load_average(), "workload": source,
        "primitives": n, "image": [scene.width, scene.height], "camera": args.camera,
        "repeat": args.repeat, "quick": args.quick,
        "matmul precision": args.precision or "JAX's default",
        "tpu default dots": args.tpu_default_dots, "rows": rows,
    }  # fmt: skip
    return write_json(args.out, results)


if __name__ == "__main__":
    main()
