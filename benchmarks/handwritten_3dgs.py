"""A hand-written JAX 3DGS method module, the baseline the generated code is measured against.

It implements the same contract as a generated module (docs/design.md, "The generated module")
with the 3DGS formulas (Kerbl et al. 2023: EWA splatting, SH colour; gsplat's conventions)
written by hand, so the benchmark can report the overhead of compiled specs over hand-tuned
code, and the pipeline can be developed and tested independently of the compiler.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

HIGHEST = jax.lax.Precision.HIGHEST  # float32 products, not TF32 on GPUs


class ParamSpec(NamedTuple):
    name: str
    kind: str
    shape: tuple
    activation: str
    degree: int | None = None


NAME = "HandwrittenGaussian3D"
COMPILER_VERSION = "handwritten"
SPEC_SHA256 = ""
CONSTANTS = {"eps2d": 0.3}
ATTRS = ("centre_x", "centre_y", "conic_a", "conic_b", "conic_c", "opacity")
NUM_ATTRS = len(ATTRS)
NUM_FEATURES = 3
USES_RAY = False
SH_DEGREE = 3
PARAMS = (
    ParamSpec("means", "vec3", (3,), "identity"),
    ParamSpec("quats", "quat", (4,), "normalize"),
    ParamSpec("scales", "vec3", (3,), "exp"),
    ParamSpec("opacities", "scalar", (), "sigmoid"),
    ParamSpec("sh", "sh", (16, 3), "identity", 3),
)

C0 = 0.28209479177387814
C1 = 0.4886025119029199
C2 = (
    1.0925484305920792,
    -1.0925484305920792,
    0.31539156525252005,
    -1.0925484305920792,
    0.5462742152960396,
)
C3 = (
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
)


def activate(raw):
    q = raw["quats"]
    return {
        "means": raw["means"],
        "quats": q * jax.lax.rsqrt(jnp.maximum(jnp.sum(q * q, -1, keepdims=True), 1e-24)),
        "scales": jnp.exp(raw["scales"]),
        "opacities": jax.nn.sigmoid(raw["opacities"]),
        "sh": raw["sh"],
    }


def _rotmat(q):  # [N, 4] (w, x, y, z), unit -> [N, 3, 3]
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return jnp.stack([jnp.stack(r, -1) for r in rows], -2)


def _eval_sh(sh, d):  # sh [N, 16, 3], d [N, 3] unit
    x, y, z = d[:, 0:1], d[:, 1:2], d[:, 2:3]
    xx, yy, zz = x * x, y * y, z * z
    basis = [
        C0 + 0 * x,
        -C1 * y,
        C1 * z,
        -C1 * x,
        C2[0] * x * y,
        C2[1] * y * z,
        C2[2] * (2 * zz - xx - yy),
        C2[3] * x * z,
        C2[4] * (xx - yy),
        C3[0] * y * (3 * xx - yy),
        C3[1] * x * y * z,
        C3[2] * y * (4 * zz - xx - yy),
        C3[3] * z * (2 * zz - 3 * xx - 3 * yy),
        C3[4] * x * (4 * zz - xx - yy),
        C3[5] * z * (xx - yy),
        C3[6] * x * (xx - 3 * yy),
    ]
    k = sh.shape[1]
    b = jnp.concatenate(basis[:k], -1)  # [N, k]
    return jnp.einsum("nk,nkc->nc", b, sh, precision=HIGHEST)


def project(raw, camera):
    p = activate(raw)
    mu, s, o = p["means"], p["scales"], p["opacities"]
    R, t = camera.R, camera.t
    pc = jnp.matmul(mu, R.T, precision=HIGHEST) + t[None, :]
    x, y, z = pc[:, 0], pc[:, 1], pc[:, 2]
    fx, fy, cx, cy = camera.fx, camera.fy, camera.cx, camera.cy
    W, H = camera.width, camera.height
    valid_z = z > camera.near
    zs = jnp.where(valid_z, z, 1.0)
    lim_x0, lim_x1 = -(cx / fx + 0.15 * W / fx), (W - cx) / fx + 0.15 * W / fx
    lim_y0, lim_y1 = -(cy / fy + 0.15 * H / fy), (H - cy) / fy + 0.15 * H / fy
    tx = jnp.clip(x / zs, lim_x0, lim_x1)
    ty = jnp.clip(y / zs, lim_y0, lim_y1)
    zero = jnp.zeros_like(zs)
    J = jnp.stack(
        [
            jnp.stack([fx / zs, zero, -fx * tx / zs], -1),
            jnp.stack([zero, fy / zs, -fy * ty / zs], -1),
        ],
        -2,
    )  # [N, 2, 3]
    M = jnp.einsum("ij,njk->nik", R, _rotmat(p["quats"]) * s[:, None, :], precision=HIGHEST)
    T = jnp.einsum("nij,njk->nik", J, M, precision=HIGHEST)
    cov = jnp.einsum("nik,njk->nij", T, T, precision=HIGHEST)
    a, b, c = cov[:, 0, 0] + 0.3, cov[:, 0, 1], cov[:, 1, 1] + 0.3
    det = jnp.maximum(a * c - b * b, 1e-10)
    u, v = camera.project(x, y, zs)
    r2 = 2.0 * jnp.log(jnp.maximum(255.0 * o, 1.0))
    rx, ry = jnp.sqrt(r2 * a), jnp.sqrt(r2 * c)
    valid = valid_z & (o >= 1.0 / 255.0)
    d = mu - camera.position[None, :]
    d = d * jax.lax.rsqrt(jnp.maximum(jnp.sum(d * d, -1, keepdims=True), 1e-24))
    color = jnp.maximum(_eval_sh(p["sh"], d) + 0.5, 0.0)
    return {
        "centre": jnp.stack([u, v], -1),
        "depth": z,
        "box": jnp.stack([u - rx, v - ry, u + rx, v + ry], -1),
        "valid": valid,
        "attrs": jnp.stack([u, v, c / det, -b / det, a / det, o], -1),
        "features": color,
    }


def response(pixel, ray_origin, ray_dir, attrs, camera):
    dx = pixel[..., 0] - attrs[..., 0]
    dy = pixel[..., 1] - attrs[..., 1]
    sigma = 0.5 * (attrs[..., 2] * dx * dx + attrs[..., 4] * dy * dy) + attrs[..., 3] * dx * dy
    alpha = jnp.minimum(0.99, attrs[..., 5] * jnp.exp(-jnp.maximum(sigma, 0.0)))
    return jnp.where(sigma >= 0.0, alpha, 0.0)
