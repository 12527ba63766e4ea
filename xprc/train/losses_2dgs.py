"""The 2DGS regularisers (Huang et al., SIGGRAPH 2024, section 4.2), from the per-pixel outputs
a spec's response emits (`specs/2dgs.xpr`: `depth`, `depth_sq`, `normal`), composited with the
colour's weights w_i = alpha_i T_i (`RenderOutput.extra`). See docs/2dgs.md.

- Normal consistency, exact: `sum_i w_i (1 - n_i . N) = A - (sum_i w_i n_i) . N`, with A the
  accumulated alpha and N the normal of the surface through the expected-depth points (ray origin
  + expected ray distance x direction), from central differences of neighbouring pixels, turned
  towards the camera; averaged over the interior pixels.
- Depth distortion, a **squared surrogate** of the paper's `sum_ij w_i w_j |z_i - z_j|`: the
  composited sums give `sum_ij w_i w_j (z_i - z_j)^2 = 2 (A sum_i w_i z_i^2 - (sum_i w_i z_i)^2)`
  exactly (both vanish iff the contributions of a pixel lie at one depth); the paper's L1 form
  needs pairwise sums inside the compositing loop, which the shared pipeline does not keep.

The paper's default weights: 0.05 (normal consistency) and 1000 (depth distortion, bounded
scenes; the paper applies it to NDC-mapped depth, here to ray distances).
"""

from __future__ import annotations

import jax.numpy as jnp

NORMAL_WEIGHT = 0.05
DISTORTION_WEIGHT = 1000.0
OUTPUTS = ("depth", "depth_sq", "normal.x", "normal.y", "normal.z")


def channels(method) -> dict[str, int] | None:
    """Index of each needed per-pixel output in `RenderOutput.extra`, or None if any is missing."""
    names = tuple(getattr(method, "PIXEL_OUTPUTS", ()))
    if not all(n in names for n in OUTPUTS):
        return None
    return {n: names.index(n) for n in OUTPUTS}


def depth_distortion(alpha, depth_sum, depth_sq_sum):
    """Mean over pixels of 2 (A sum w z^2 - (sum w z)^2) ([H, W, 1] arrays)."""
    return jnp.mean(2.0 * jnp.maximum(alpha * depth_sq_sum - depth_sum * depth_sum, 0.0))


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


def regulariser(
    method, out, camera, normal_weight=NORMAL_WEIGHT, distortion_weight=DISTORTION_WEIGHT
):
    """The weighted sum of both terms for one render (0 for a method without the outputs)."""
    idx = channels(method)
    if idx is None or out.extra is None:
        return 0.0
    h, w = out.alpha.shape[:2]
    ex = out.extra
    dtype = out.alpha.dtype
    ys, xs = jnp.meshgrid(jnp.arange(h, dtype=dtype) + 0.5, jnp.arange(w, dtype=dtype) + 0.5,
                          indexing="ij")  # fmt: skip
    origins, dirs = camera.pixel_rays(xs, ys)
    one = slice(idx["depth"], idx["depth"] + 1)
    sq = slice(idx["depth_sq"], idx["depth_sq"] + 1)
    nrm = slice(idx["normal.x"], idx["normal.x"] + 3)
    loss = distortion_weight * depth_distortion(out.alpha, ex[..., one], ex[..., sq])
    return loss + normal_weight * normal_consistency(
        out.alpha, ex[..., one], ex[..., nrm], origins, dirs
    )
