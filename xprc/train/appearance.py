"""Per-view appearance compensation: each training view's exposure and white balance.

appearance "affine": each training view v learns a colour transform T_v [3, 4] = [M_v | b_v],
applied to the rendered image before the loss: rgb' = M_v rgb + b_v per pixel (M_v a 3x3
matrix, b_v an offset). T_v starts at the identity [I | 0] (the scene's colour as rendered).
This is the per-image 3x4 affine "exposure" of 3DGS (Kerbl et al., the 2024 release of
graphdeco-inria/gaussian-splatting, used by Hierarchical 3DGS): identity start, Adam, a learning
rate decaying exponentially from `appearance_lr` to `appearance_lr_final` of it over the run
(3DGS: 0.01 -> 0.001). Test views are rendered without it (docs/training.md).

There is a global ambiguity: the scene's colours times one common transform fit the photos as
well as the scene with the inverse folded into every T_v; only the ratios between views' T_v
are determined by the photos.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .optim import adam_update, optimizer


def init_appearance(n_views: int, mode: str) -> dict:
    """{} for "off"; {"affine": [V, 3, 4] float32 identity transforms} for "affine"."""
    if mode == "off":
        return {}
    eye = jnp.eye(3, 4, dtype=jnp.float32)
    return {"affine": jnp.broadcast_to(eye, (n_views, 3, 4))}


def appearance_note(mode: str, n_views: int) -> str:
    """The line a run with appearance compensation logs once (console and train.log)."""
    return (
        f"appearance {mode!r}: each of the {n_views} training views learns a colour transform "
        "(3x3 and offset) applied to its render before the loss; test views are rendered "
        "without one (their PSNR includes any exposure difference between them and the "
        "scene's colours)"
    )


def appearance_matrices(appearance: dict) -> np.ndarray | None:
    """The learned transforms [V, 3, 4] float64 (TrainResult.appearance); None when off."""
    return np.asarray(appearance["affine"], np.float64) if appearance else None


def apply(image: jax.Array, transform: jax.Array) -> jax.Array:
    """image [..., H, W, 3] with transform [..., 3, 4] (one per leading index) -> M rgb + b.
    Written as three multiply-adds, not a matmul: exact float32 on every backend (a TPU's
    default matmul precision rounds its inputs to bfloat16)."""
    t = transform.astype(image.dtype)[..., None, None, :, :]  # [..., 1, 1, 3, 4]
    out = t[..., 3]
    for k in range(3):
        out = out + t[..., k] * image[..., k : k + 1]
    return out


def appearance_optimizer(appearance: dict, lr):
    """Adam for the transforms (lr: a traced scalar)."""
    lrs = {name: jnp.ones((1, 1, 1), jnp.float32) for name in appearance}
    return optimizer(lrs, {name: lr for name in appearance}, eps=1e-15)


def step_appearance(opt, grads, opt_state, appearance):
    return adam_update(opt, grads, opt_state, appearance)
