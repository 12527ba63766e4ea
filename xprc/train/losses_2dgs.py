"""The 2DGS regularisers (Huang et al., SIGGRAPH 2024, section 4.2) from the per-pixel outputs a
spec's response emits (`specs/2dgs.xpr`: `depth`, `depth_sq`, `normal`), composited with the
colour's weights w_i = alpha_i T_i (`RenderOutput.extra`). See docs/2dgs.md.

- Depth distortion on the official rasteriser's NDC depth `m = f / (f - n) (1 - n / z)`
  (n = 0.2, f = 100), with `c = f n / (f - n)` so that `m_i - m_j = c (z_i - z_j) / (z_i z_j)`;
  `zbar`, the pixel's expected depth, stands for z_i and z_j in the factor (a constant, no
  gradient): exact when the pixel's contributions share one depth, first order in their spread.
  Two forms (`form`):
  - "squared" (default): `sum_{i<j} w_i w_j (m_i - m_j)^2`, what the official CUDA rasteriser
    composites and what the paper's weight (1000) was tuned with; from the composited sums it
    is exactly `(c / zbar^2)^2 (A sum w z^2 - (sum w z)^2)` in any list order, and >= 0.
  - "l1": the paper's equation `sum_{i,j} w_i w_j |m_i - m_j|` from the pipeline's ordered sum
    (`RenderConfig(distortion=True)`, `RenderOutput.distortion`), scaled by `c / zbar^2`; it
    equals the double sum only where the per-pixel depths increase along the list and can be
    negative elsewhere (surfels crossing or sorted by centre depth).
- Normal consistency, exact: `sum_i w_i (1 - n_i . N) = A - (sum_i w_i n_i) . N`, with A the
  accumulated alpha and N the normal of the surface through the expected-depth points (ray origin
  + expected ray distance x direction), from central differences of neighbouring pixels, turned
  towards the camera; averaged over the interior pixels.

The paper's default weights and start steps: 1000 (distortion, bounded scenes; 100 unbounded)
from step 3000 and 0.05 (normal consistency) from step 7000 of 30000.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..method_info import MethodInfo

NORMAL_WEIGHT = 0.05
DISTORTION_WEIGHT = 1000.0
NORMAL_FROM = 7000 / 30000  # the paper's start steps, as fractions of its 30k schedule
DISTORTION_FROM = 3000 / 30000
NEAR, FAR = 0.2, 100.0  # the official rasteriser's NDC depth constants
OUTPUTS = ("depth", "depth_sq", "normal.x", "normal.y", "normal.z")
FORMS = ("squared", "l1")


def channels(method) -> dict[str, int] | None:
    """Index of each needed per-pixel output in `RenderOutput.extra`, or None if any is missing."""
    names = MethodInfo.of(method).pixel_outputs
    if not all(n in names for n in OUTPUTS):
        return None
    return {n: names.index(n) for n in OUTPUTS}


def ndc_factor(alpha, depth_sum):
    """c / zbar^2 per pixel [H, W, 1] (no gradient): d m / d z at the expected depth."""
    zbar = jax.lax.stop_gradient(depth_sum / jnp.maximum(alpha, 1e-10))
    return FAR * NEAR / (FAR - NEAR) / jnp.maximum(zbar * zbar, NEAR * NEAR)


def depth_distortion(alpha, depth_sum, depth_sq_sum, factor):
    """Mean over pixels of sum_{i<j} w_i w_j (m_i - m_j)^2 ([H, W, 1] composited sums; factor:
    `ndc_factor`)."""
    spread = jnp.maximum(alpha * depth_sq_sum - depth_sum * depth_sum, 0.0)
    return jnp.mean(jnp.square(factor) * spread)


def depth_distortion_l1(distortion, factor):
    """Mean over pixels of the pipeline's ordered sum_{i,j} w_i w_j |z_i - z_j| mapped to NDC."""
    return jnp.mean(factor * distortion)


def surface_normals(points, dirs):
    """Unit normals [H-2, W-2, 3] of the surface through points [H, W, 3] (central differences),
    turned against the ray directions."""
    dx = points[1:-1, 2:] - points[1:-1, :-2]
    dy = points[2:, 1:-1] - points[:-2, 1:-1]
    n = jnp.cross(dx, dy)
    n = n / jnp.sqrt(jnp.maximum(jnp.sum(n * n, -1, keepdims=True), 1e-24))
    facing = jnp.sum(n * dirs[1:-1, 1:-1], -1, keepdims=True) > 0
    return jnp.where(facing, -n, n)


def normal_consistency(alpha, depth_sum, normal_sum, origins, dirs):
    """Mean over interior pixels of A - (sum w n) . N ([H, W, k] arrays; rays [H, W, 3])."""
    expected = depth_sum / jnp.maximum(alpha, 1e-10)
    n = surface_normals(origins + expected * dirs, dirs)
    inner = alpha[1:-1, 1:-1, 0] - jnp.sum(normal_sum[1:-1, 1:-1] * n, -1)
    return jnp.mean(inner)


def terms(method, out, camera, form: str = "squared") -> dict:
    """{"distortion", "normal"}: both unweighted terms of one render (form "l1" needs a render
    with `RenderConfig(distortion=True)`)."""
    idx = channels(method)
    if idx is None or out.extra is None:
        raise ValueError(f"the 2DGS regularisers need per-pixel outputs {', '.join(OUTPUTS)}")
    if form not in FORMS:
        raise ValueError(f"unknown distortion form {form!r} (expected squared or l1)")
    if form == "l1" and out.distortion is None:
        raise ValueError("the l1 distortion needs a render with RenderConfig(distortion=True)")
    h, w = out.alpha.shape[:2]
    ex = out.extra
    dtype = out.alpha.dtype
    ys, xs = jnp.meshgrid(jnp.arange(h, dtype=dtype) + 0.5, jnp.arange(w, dtype=dtype) + 0.5,
                          indexing="ij")  # fmt: skip
    origins, dirs = camera.pixel_rays(xs, ys)
    depth = ex[..., idx["depth"] : idx["depth"] + 1]
    nrm = ex[..., idx["normal.x"] : idx["normal.x"] + 3]
    factor = ndc_factor(out.alpha, depth)
    if form == "l1":
        dist = depth_distortion_l1(out.distortion, factor)
    else:
        sq = ex[..., idx["depth_sq"] : idx["depth_sq"] + 1]
        dist = depth_distortion(out.alpha, depth, sq, factor)
    return {"distortion": dist, "normal": normal_consistency(out.alpha, depth, nrm, origins, dirs)}


def regulariser(
    method,
    out,
    camera,
    normal_weight=NORMAL_WEIGHT,
    distortion_weight=DISTORTION_WEIGHT,
    form: str = "squared",
):
    """The weighted sum of both terms for one render."""
    t = terms(method, out, camera, form)
    return distortion_weight * t["distortion"] + normal_weight * t["normal"]


def hyper(config) -> dict:
    """The traced weights and start steps of a `TrainConfig` (float32 / int32 scalars)."""
    d_from, n_from = config.regulariser_starts()
    return {
        "distortion_weight": jnp.asarray(config.distortion_weight, jnp.float32),
        "normal_weight": jnp.asarray(config.normal_weight, jnp.float32),
        "distortion_from": jnp.asarray(d_from, jnp.int32),
        "normal_from": jnp.asarray(n_from, jnp.int32),
    }
