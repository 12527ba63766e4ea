"""Compositing: which of the three ways composites a render.

- `composite_scan.py`: the XLA path, a `lax.scan` over groups of chunks of the depth-sorted tile
  lists (and the pieces the ways share: the chunk layout and the response on a group, for both
  scans; the pixel centres and `clamp_alpha`, for all three), differentiated by autodiff of
  the rematerialised scan;
- `composite_vjp.py`: the same scan with the method-agnostic custom VJP (the default backward);
- `composite_pallas.py`: fused per-tile Pallas kernels (`RenderConfig.compositor`), which read
  the sorted entries in place (no chunk layout).
"""

from __future__ import annotations

from collections.abc import Callable

import jax

from . import composite_pallas as cp
from .binning import Bins, TileGrid
from .composite_scan import composite_autodiff, gather, layout
from .composite_vjp import composite_custom
from .config import RenderConfig


def composite(
    response: Callable,
    camera,
    attrs: jax.Array,  # [N, A]
    values: jax.Array,  # [N, V] what is accumulated: features, then depth
    bins: Bins,
    grid: TileGrid,
    config: RenderConfig,
    rays: tuple[jax.Array, jax.Array] | None = None,  # ([T, P or 1, 3], [T, P, 3]) world rays
    signed: bool = False,
    pixel_channels: int = 0,
    distortion: int | None = None,
    method=None,
) -> jax.Array:
    """Returns per-tile sums [T, P, V + K + 2 (+ 1)]: sum_k w_k values_k, then sum_k w_k extra_k
    for the K per-pixel channels the response returns beside alpha (`pixel_channels`), then
    sum_k w_k (= 1 - T), then the count of lanes whose alpha `clamp_alpha` changed (not
    differentiable: callers stop its gradient), then, when `distortion` is set, the depth distortion
    sum_{i,j} w_i w_j |z_i - z_j| in list order, with z the lane channel `distortion` of
    [values (V), extra (K)].

    `signed`: alpha may be negative (a subtractive primitive). The threshold is on |alpha|, and
    as transmittance is then not monotone along the list, there is no early stop.

    `method`: the generated module, for `RenderConfig.compositor` to pick the Pallas kernels
    (None: the XLA path)."""
    if method is not None and cp.use_pallas(method, attrs.dtype, config):
        return cp.composite_pallas(
            response, attrs, values, bins, rays, grid, config, signed, pixel_channels
        )
    lay = layout(bins, grid, config)
    if distortion is None and config.backward == "custom":
        return composite_custom(
            response, camera, gather(attrs, lay), gather(values, lay), lay, grid, config,
            rays, signed, pixel_channels,
        )  # fmt: skip
    # The custom VJP covers colour, depth, the weight and the per-pixel outputs; the distortion
    # carry (and `backward="autodiff"`) is differentiated by autodiff of the scan.
    return composite_autodiff(
        response, camera, gather(attrs, lay), gather(values, lay), lay, grid, config,
        rays, signed, pixel_channels, distortion,
    )  # fmt: skip
