"""An independent float64 NumPy twin of LinPrim rendering (REFERENCE.md sections 1, 3 and 6).

Deliberately naive and written from the reference text, not from the specs:

- chords by DENSE SAMPLING along each ray with a point-in-polyhedron test (octahedron:
  ``|x/d1| + |y/d2| + |z/d3| <= 1`` in the local frame; tetrahedron: barycentric coordinates all
  non-negative), the first and last inside samples refined by bisection on the same test;
- an exact analytic chord by half-space clipping (Cyrus-Beck), used to cross-check the sampler;
- one global depth sort (camera z of the centre), every primitive against every pixel, front to
  back with the 3DGS rules (skip alpha < 1/255, stop before T < 1e-4, background).

Parameters (the layout of specs/linprim_*.xpr, raw = pre-activation):
  means [N, 3]; quats [N, 4] (w, x, y, z), normalised; scales [N, 3] (octahedron: vertex distances
  d_i) or [N, 4] (tetrahedron: distances along the regular-tetrahedron directions), activation
  abs; opacities [N] logit, activation sigmoid: o is the primitive's PEAK opacity, the alpha along
  its longest chord (its diameter L), so the homogeneous density is ``sigma = -ln(1 - o) / L``
  (with 1 - o >= 1e-6 and L >= 1e-6) and ``alpha = min(0.99, 1 - exp(-sigma * chord))``;
  sh [N, K, 3].

Sampler accuracy: a chord is missed only when it is shorter than the sample spacing ``h``; with
``h < 1 / (255 sigma)`` such a chord has alpha < 1/255 and is skipped anyway, so with enough
samples (`samples_for`) the sampled render equals the exact one up to the bisection tolerance.
"""

from __future__ import annotations

import numpy as np
from reference_3dgs import sh_colour

# Unit directions of a regular tetrahedron's vertices from its centre.
TET_DIRS = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], np.float64) / np.sqrt(3)
ALPHA_MAX = 0.99


# ----------------------------------------------------------------------------- primitives


def quat_to_rot(q):
    """(w, x, y, z) [N, 4], normalised -> R [N, 3, 3]; a zero quaternion gives the identity."""
    q = np.asarray(q, np.float64)
    q = q / np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), 1e-12)
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], -1).reshape(-1, 3, 3)  # fmt: skip


def primitives(params, kind):
    """Activated primitives: dict of float64 arrays.

    mu [N, 3], R [N, 3, 3] (local -> world), d [N, 3|4], opacity [N], verts [N, V, 3],
    diameter [N], sigma [N] (density per world unit).
    """
    mu = np.asarray(params["means"], np.float64)
    R = quat_to_rot(np.asarray(params["quats"], np.float64))
    d = np.abs(np.asarray(params["scales"], np.float64))
    raw_o = np.asarray(params["opacities"], np.float64)
    o = 1.0 / (1.0 + np.exp(-raw_o))
    if kind == "octahedron":
        local = np.concatenate([np.eye(3), -np.eye(3)])[None] * np.concatenate([d, d], 1)[..., None]
    elif kind == "tetrahedron":
        local = TET_DIRS[None] * d[..., None]
    else:
        raise ValueError(kind)
    verts = mu[:, None] + np.einsum("nij,nvj->nvi", R, local)
    diameter = np.max(np.linalg.norm(verts[:, :, None] - verts[:, None], axis=-1), axis=(1, 2))
    # sigma = -ln(1 - o) / L, with the specs' guards: 1 - o >= 1e-6 and L >= 1e-6.
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = -np.log(np.maximum(1.0 - o, 1e-6)) / np.maximum(diameter, 1e-6)
    return {"mu": mu, "R": R, "d": d, "opacity": o, "verts": verts, "diameter": diameter,
            "sigma": sigma, "kind": kind}  # fmt: skip


def _one(prims, i):
    return {k: (v if k == "kind" else v[i]) for k, v in prims.items()}


# ----------------------------------------------------------------------------- point tests


def inside(prim, x):
    """Point-in-polyhedron for one primitive; x [..., 3] world -> bool [...]."""
    if degenerate(prim):
        return np.zeros(x.shape[:-1], bool)
    if prim["kind"] == "octahedron":
        local = (x - prim["mu"]) @ prim["R"]  # R^T (x - mu)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.sum(np.abs(local) / prim["d"], axis=-1)
        return s <= 1.0
    v = prim["verts"]
    M = np.stack([v[1] - v[0], v[2] - v[0], v[3] - v[0]], axis=1)  # columns
    b = (x - v[0]) @ np.linalg.inv(M).T
    return np.all(b >= 0, axis=-1) & (np.sum(b, axis=-1) <= 1.0)


def degenerate(prim):
    """Zero volume: every ray's chord is 0 except on a set of measure zero. An octahedron is flat
    when one distance is 0; a tetrahedron only when two are (one 0 puts a vertex at the centre)."""
    return bool(np.sum(prim["d"] == 0) >= (1 if prim["kind"] == "octahedron" else 2))


def bounding_radius(prim):
    return float(np.max(np.linalg.norm(prim["verts"] - prim["mu"], axis=-1)))


# ----------------------------------------------------------------------------- chords


def chord_sampled(prim, origin, direction, samples=2048, bisect=60):
    """Chord length of rays through one primitive by dense sampling plus bisection.

    origin, direction [M, 3] (direction unit); only t >= 0 counts. Returns [M].
    The inside set along a ray is one interval (convex body): its ends are found as the first and
    last inside samples, each refined by bisection against its outside neighbour.
    """
    origin = np.asarray(origin, np.float64).reshape(-1, 3)
    direction = np.asarray(direction, np.float64).reshape(-1, 3)
    m = len(origin)
    out = np.zeros(m)
    r = bounding_radius(prim)
    tc = np.einsum("mi,mi->m", prim["mu"] - origin, direction)
    off2 = np.sum((prim["mu"] - origin - tc[:, None] * direction) ** 2, -1)
    half = np.sqrt(np.maximum(r * r * (1 + 1e-9) - off2, 0.0))
    lo = np.maximum(tc - half, 0.0)
    hi = tc + half
    rows = np.nonzero((off2 < r * r * (1 + 1e-9)) & (hi > lo))[0]
    if len(rows) == 0:
        return out
    o, dr, lo, hi = origin[rows], direction[rows], lo[rows], hi[rows]
    k = np.arange(samples + 1) / samples
    t = lo[:, None] + (hi - lo)[:, None] * k[None]  # [M', S+1]
    ins = inside(prim, o[:, None] + t[..., None] * dr[:, None])
    hit = ins.any(axis=1)
    first = np.argmax(ins, axis=1)
    last = samples - np.argmax(ins[:, ::-1], axis=1)
    rr = np.arange(len(rows))

    def refine(t_out, t_in):
        """Bisect the boundary between an outside point t_out and an inside point t_in."""
        for _ in range(bisect):
            mid = 0.5 * (t_out + t_in)
            m_in = inside(prim, o + mid[:, None] * dr)
            t_in = np.where(m_in, mid, t_in)
            t_out = np.where(m_in, t_out, mid)
        return t_in

    t_first, t_last = t[rr, first], t[rr, last]
    entry = np.where(first > 0, refine(t[rr, np.maximum(first - 1, 0)], t_first), t_first)
    exit_ = np.where(last < samples, refine(t[rr, np.minimum(last + 1, samples)], t_last), t_last)
    out[rows] = np.where(hit, exit_ - entry, 0.0)
    return out


def planes(prim):
    """Outward half-spaces n . x <= c of one primitive (world frame): n [F, 3], c [F]."""
    if prim["kind"] == "octahedron":
        signs = np.array([[a, b, c] for a in (1, -1) for b in (1, -1) for c in (1, -1)], float)
        n_local = signs / prim["d"]  # n . x_local <= 1
        n = n_local @ prim["R"].T  # x_local = R^T (x - mu)
        return n, 1.0 + n @ prim["mu"]
    v = prim["verts"]
    ns, cs = [], []
    for k in range(4):
        a, b, c = (v[j] for j in range(4) if j != k)
        n = np.cross(b - a, c - a)
        if n @ (v[k] - a) > 0:  # orient away from the opposite vertex
            n = -n
        ns.append(n)
        cs.append(n @ a)
    return np.array(ns), np.array(cs)


def chord_analytic(prim, origin, direction):
    """Exact chord by clipping the ray t >= 0 against every face half-space. [M, 3] -> [M]."""
    origin = np.asarray(origin, np.float64).reshape(-1, 3)
    direction = np.asarray(direction, np.float64).reshape(-1, 3)
    if degenerate(prim):
        return np.zeros(len(origin))
    n, c = planes(prim)
    t_in = np.zeros(len(origin))
    t_out = np.full(len(origin), np.inf)
    for nf, cf in zip(n, c, strict=True):
        den = direction @ nf
        num = cf - origin @ nf
        with np.errstate(divide="ignore", invalid="ignore"):
            t = num / den
        t_in = np.where(den < 0, np.maximum(t_in, t), t_in)
        t_out = np.where(den > 0, np.minimum(t_out, t), t_out)
        t_out = np.where((den == 0) & (num < 0), -np.inf, t_out)
    return np.maximum(t_out - t_in, 0.0)


def alpha_of(prim, chord):
    return np.minimum(ALPHA_MAX, 1.0 - np.exp(-prim["sigma"] * chord))


def samples_for(prim, margin=1.5):
    """A sample count with spacing below 1 / (255 sigma) for one primitive (see module doc)."""
    r = bounding_radius(prim)
    return int(max(64, np.ceil(2 * r * 255 * prim["sigma"] * margin)))


# ----------------------------------------------------------------------------- rendering


def pixel_rays(viewmat, K, width, height):
    """Pinhole rays through pixel centres: origin [P, 3], unit direction [P, 3] (world)."""
    V = np.asarray(viewmat, np.float64)
    K = np.asarray(K, np.float64)
    R, t = V[:3, :3], V[:3, 3]
    jj, ii = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    x = (jj.ravel() - K[0, 2]) / K[0, 0]
    y = (ii.ravel() - K[1, 2]) / K[1, 1]
    d_cam = np.stack([x, y, np.ones_like(x)], -1)
    d = d_cam @ R  # R^T d_cam
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    return np.broadcast_to(-R.T @ t, d.shape), d


def render(params, kind, viewmat, K, width, height, background=None, chord="sample",
           samples=None, near=0.01, alpha_min=1.0 / 255.0, t_min=1e-4):  # fmt: skip
    """Returns (colour [H, W, 3], alpha [H, W], depth-weighted sum [H, W]) in float64.

    chord: "sample" (dense sampling, the default) or "analytic"; samples: per ray and primitive
    (default: `samples_for`, enough that a missed chord is below the alpha threshold).
    """
    prims = primitives(params, kind)
    V = np.asarray(viewmat, np.float64)
    R, t = V[:3, :3], V[:3, 3]
    z = prims["mu"] @ R[2] + t[2]
    z_verts = prims["verts"] @ R[2] + t[2]
    valid = np.all(z_verts > near, axis=1)  # straddling the near plane: culled
    campos = -R.T @ t
    dirs = prims["mu"] - campos
    dirs /= np.maximum(np.linalg.norm(dirs, axis=-1, keepdims=True), 1e-12)
    colour = sh_colour(np.asarray(params["sh"], np.float64), dirs)
    origin, direction = pixel_rays(V, K, width, height)
    npx = width * height
    T = np.ones(npx)
    C = np.zeros((npx, 3))
    D = np.zeros(npx)
    done = np.zeros(npx, bool)
    order = np.argsort(np.where(valid, z, np.inf), kind="stable")
    for i in order:
        if not valid[i]:
            break
        prim = _one(prims, i)
        if chord == "sample":
            n = samples_for(prim) if samples is None else samples
            ell = chord_sampled(prim, origin, direction, samples=n)
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


def random_params(n, kind, seed=0, sh_degree=3, spread=1.0, depth=4.0, size=(0.05, 0.4),
                  dtype=np.float32):  # fmt: skip
    """A random LinPrim scene in front of an identity camera (raw parameters)."""
    rng = np.random.default_rng(seed)
    nd = 3 if kind == "octahedron" else 4
    means = rng.normal(0, spread, (n, 3)) + np.array([0, 0, depth])
    sizes = rng.uniform(*size, (n, nd)) * rng.choice([-1, 1], (n, nd))  # abs activation
    return {
        "means": means.astype(dtype),
        "quats": rng.normal(size=(n, 4)).astype(dtype),
        "scales": sizes.astype(dtype),
        "opacities": rng.normal(0, 2, n).astype(dtype),
        "sh": rng.normal(0, 0.3, (n, (sh_degree + 1) ** 2, 3)).astype(dtype),
    }
