"""An independent float64 NumPy twin of EVER-style constant-density ellipsoids
(specs/ever_ellipsoid.xpr), written from the model, not from the spec:

- chords by DENSE SAMPLING along each ray with the point test `|diag(1/s) R^T (x - mu)| <= 1`,
  the first and last inside samples refined by bisection on the same test;
- an exact chord from the textbook quadratic `|q + t p|^2 = 1` in the whitened frame
  (t = (-B -+ sqrt(B^2 - 4 A C)) / 2A), clipped to t >= 0, used to cross-check the sampler;
- one global depth sort (camera z of the centre), every primitive against every pixel, front to
  back with the 3DGS rules (skip alpha < 1/255, stop before T < 1e-4, background).

Parameters (raw): means [N, 3]; quats [N, 4] (w, x, y, z), normalised; scales [N, 3] log
semi-axes (activation exp); densities [N] log sigma (activation exp); sh [N, K, 3].
alpha = min(0.99, 1 - exp(-sigma L)); a primitive with a corner of its bounding box
mu + R (+-s) outside near < z < far is culled.
"""

from __future__ import annotations

import numpy as np
from reference_3dgs import sh_colour
from reference_linprim import pixel_rays, quat_to_rot

ALPHA_MAX = 0.99
CORNERS = np.array([[a, b, c] for a in (1, -1) for b in (1, -1) for c in (1, -1)], np.float64)


def primitives(params):
    """Activated: mu [N, 3], R [N, 3, 3] (local -> world), s [N, 3], sigma [N], corners."""
    mu = np.asarray(params["means"], np.float64)
    R = quat_to_rot(np.asarray(params["quats"], np.float64))
    s = np.exp(np.asarray(params["scales"], np.float64))
    sigma = np.exp(np.asarray(params["densities"], np.float64))
    corners = mu[:, None] + np.einsum("nij,ncj->nci", R, CORNERS[None] * s[:, None])
    return {"mu": mu, "R": R, "s": s, "sigma": sigma, "corners": corners}


def one(prims, i):
    return {k: v[i] for k, v in prims.items()}


def inside(prim, x):
    """x [..., 3] world -> bool [...]: inside the ellipsoid (boundary included)."""
    local = (x - prim["mu"]) @ prim["R"] / prim["s"]  # diag(1/s) R^T (x - mu)
    return np.sum(local * local, axis=-1) <= 1.0


def chord_sampled(prim, origin, direction, samples=2048, bisect=60):
    """Chord of rays (origin, unit direction [M, 3]; t >= 0) by sampling plus bisection."""
    origin = np.asarray(origin, np.float64).reshape(-1, 3)
    direction = np.asarray(direction, np.float64).reshape(-1, 3)
    out = np.zeros(len(origin))
    r = float(prim["s"].max()) * (1 + 1e-9)  # the bounding sphere
    tc = np.einsum("mi,mi->m", prim["mu"] - origin, direction)
    off2 = np.sum((prim["mu"] - origin - tc[:, None] * direction) ** 2, -1)
    half = np.sqrt(np.maximum(r * r - off2, 0.0))
    lo, hi = np.maximum(tc - half, 0.0), tc + half
    rows = np.nonzero((off2 < r * r) & (hi > lo))[0]
    if len(rows) == 0:
        return out
    o, d, lo, hi = origin[rows], direction[rows], lo[rows], hi[rows]
    t = lo[:, None] + (hi - lo)[:, None] * (np.arange(samples + 1) / samples)[None]
    ins = inside(prim, o[:, None] + t[..., None] * d[:, None])
    hit = ins.any(axis=1)
    first = np.argmax(ins, axis=1)
    last = samples - np.argmax(ins[:, ::-1], axis=1)
    rr = np.arange(len(rows))

    def refine(t_out, t_in):
        for _ in range(bisect):
            mid = 0.5 * (t_out + t_in)
            m_in = inside(prim, o + mid[:, None] * d)
            t_in, t_out = np.where(m_in, mid, t_in), np.where(m_in, t_out, mid)
        return t_in

    t_first, t_last = t[rr, first], t[rr, last]
    entry = np.where(first > 0, refine(t[rr, np.maximum(first - 1, 0)], t_first), t_first)
    exit_ = np.where(last < samples, refine(t[rr, np.minimum(last + 1, samples)], t_last), t_last)
    out[rows] = np.where(hit, exit_ - entry, 0.0)
    return out


def chord_analytic(prim, origin, direction):
    """The textbook quadratic in the whitened frame, clipped to t >= 0. [M, 3] -> [M]."""
    origin = np.asarray(origin, np.float64).reshape(-1, 3)
    direction = np.asarray(direction, np.float64).reshape(-1, 3)
    p = direction @ prim["R"] / prim["s"]
    q = (origin - prim["mu"]) @ prim["R"] / prim["s"]
    A = np.sum(p * p, -1)
    B = 2 * np.sum(p * q, -1)
    C = np.sum(q * q, -1) - 1
    disc = B * B - 4 * A * C
    root = np.sqrt(np.maximum(disc, 0.0))
    t0, t1 = (-B - root) / (2 * A), (-B + root) / (2 * A)
    return np.where(disc > 0, np.maximum(t1 - np.maximum(t0, 0.0), 0.0), 0.0)


def alpha_of(prim, chord):
    return np.minimum(ALPHA_MAX, 1.0 - np.exp(-prim["sigma"] * chord))


def samples_for(prim, margin=1.5):
    """A sample count with spacing below 1 / (255 sigma): a chord the sampler can miss has
    alpha < 1/255 and is skipped anyway."""
    r = float(prim["s"].max())
    return int(min(max(64, np.ceil(2 * r * 255 * prim["sigma"] * margin)), 20000))


def render(params, viewmat, K, width, height, background=None, chord="sample", near=0.01,
           far=1e10, alpha_min=1.0 / 255.0, t_min=1e-4):  # fmt: skip
    """(colour [H, W, 3], alpha [H, W], depth-weighted sum [H, W]) in float64."""
    prims = primitives(params)
    V = np.asarray(viewmat, np.float64)
    R, t = V[:3, :3], V[:3, 3]
    z = prims["mu"] @ R[2] + t[2]
    zc = prims["corners"] @ R[2] + t[2]
    valid = np.all((zc > near) & (zc < far), axis=1)
    campos = -R.T @ t
    dirs = prims["mu"] - campos
    dirs /= np.maximum(np.linalg.norm(dirs, axis=-1, keepdims=True), 1e-12)
    colour = sh_colour(np.asarray(params["sh"], np.float64), dirs)
    origin, direction = pixel_rays(V, K, width, height)
    npx = width * height
    T, C, D = np.ones(npx), np.zeros((npx, 3)), np.zeros(npx)
    done = np.zeros(npx, bool)
    for i in np.argsort(np.where(valid, z, np.inf), kind="stable"):
        if not valid[i]:
            break
        prim = one(prims, i)
        if chord == "sample":
            ell = chord_sampled(prim, origin, direction, samples=samples_for(prim))
        else:
            ell = chord_analytic(prim, origin, direction)
        alpha = alpha_of(prim, ell)
        use = (alpha >= alpha_min) & ~done
        test_t = T * (1 - alpha)
        stop = use & (test_t < t_min)
        done |= stop
        use &= ~stop
        w = np.where(use, alpha * T, 0.0)
        C += w[:, None] * colour[i]
        D += w * z[i]
        T = np.where(use, test_t, T)
    if background is not None:
        C += T[:, None] * np.asarray(background, np.float64)
    return C.reshape(height, width, 3), (1 - T).reshape(height, width), D.reshape(height, width)


def random_params(n, seed=0, sh_degree=3, spread=1.0, depth=4.0, size=(0.05, 0.4),
                  dtype=np.float32):  # fmt: skip
    """A random ellipsoid scene in front of an identity camera (raw parameters)."""
    rng = np.random.default_rng(seed)
    return {
        "means": (rng.normal(0, spread, (n, 3)) + [0, 0, depth]).astype(dtype),
        "quats": rng.normal(size=(n, 4)).astype(dtype),
        "scales": np.log(rng.uniform(*size, (n, 3))).astype(dtype),
        "densities": rng.normal(1.0, 1.0, n).astype(dtype),
        "sh": rng.normal(0, 0.3, (n, (sh_degree + 1) ** 2, 3)).astype(dtype),
    }
