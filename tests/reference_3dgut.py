"""An independent float64 NumPy twin of 3DGUT (REFERENCE.md sections 4-5).

Deliberately naive: its own lens models, its own unscented transform, its own pixel rays (the
OpenCV undistortion too, by Newton steps on a finite-difference Jacobian), one global depth sort,
no tiles, no footprints: every primitive is tested against every pixel. The 3D response uses the
closest-approach form (`t* = (mu - o)^T Sigma^-1 d / (d^T Sigma^-1 d)`, Mahalanobis distance at
`o + t* d`), not the cross-product form of the spec. Used only by tests.
"""

from __future__ import annotations

import numpy as np
from reference_3dgs import quat_to_rot, sh_colour

MIN_RESPONSE = 0.0113
CULL_Z = 0.2

# Generalised kernels of degree n (REFERENCE.md section 4), as functions of g = squared distance.
KERNELS = {
    2: lambda g: np.exp(-0.5 * g),
    4: lambda g: np.exp(-0.055556 * g * g),
    1: lambda g: np.exp(-1.5 * np.sqrt(g)),
    0: lambda g: np.maximum(1.0 - 0.32963 * np.sqrt(g), 0.0),
}


def camera_arrays(camera):
    """xprc Camera -> plain float64 NumPy pieces (the reference never calls its methods)."""
    return {
        "R": np.asarray(camera.viewmat, np.float64)[:3, :3],
        "t": np.asarray(camera.viewmat, np.float64)[:3, 3],
        "K": np.asarray(camera.K, np.float64),
        "dist": np.asarray(camera.dist, np.float64),
        "model": camera.model,
        "width": camera.width,
        "height": camera.height,
        "near": camera.near,
        "far": camera.far,
    }


# ---------------------------------------------------------------------- lens models


def opencv_distort(a, b, dist):
    k1, k2, k3, k4, k5, k6, p1, p2, s1, s2, s3, s4 = dist
    r2 = a * a + b * b
    radial = (1 + k1 * r2 + k2 * r2**2 + k3 * r2**3) / (1 + k4 * r2 + k5 * r2**2 + k6 * r2**3)
    ad = radial * a + 2 * p1 * a * b + p2 * (r2 + 2 * a * a) + s1 * r2 + s2 * r2**2
    bd = radial * b + p1 * (r2 + 2 * b * b) + 2 * p2 * a * b + s3 * r2 + s4 * r2**2
    return ad, bd, radial


def fisheye_theta_max(dist):
    """First positive zero of d theta_d / d theta within (0, pi], else pi (a polynomial in t^2)."""
    k1, k2, k3, k4 = dist[:4]
    roots = np.roots([9 * k4, 7 * k3, 5 * k2, 3 * k1, 1.0]) if np.any(dist[:4]) else []
    best = np.pi
    for r in roots:
        if abs(r.imag) < 1e-12 and r.real > 0:
            best = min(best, float(np.sqrt(r.real)))
    return best


def project(cam, p):
    """Camera-space points [..., 3] -> pixels [..., 2] through the full lens model."""
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    K, model = cam["K"], cam["model"]
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    if model == "ortho":
        a, b = x, y
    elif model == "fisheye":
        k1, k2, k3, k4 = cam["dist"][:4]
        rho = np.hypot(x, y)
        theta = np.arctan2(rho, z)
        td = theta * (1 + k1 * theta**2 + k2 * theta**4 + k3 * theta**6 + k4 * theta**8)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(rho > 0, td / np.where(rho > 0, rho, 1.0), 1.0 / z)
        a, b = x * scale, y * scale
    else:
        a, b = x / z, y / z
        if model == "opencv":
            a, b, _ = opencv_distort(a, b, cam["dist"])
    return np.stack([fx * a + cx, fy * b + cy], -1)


def project_valid(cam, p):
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    ok = (z > cam["near"]) & (z < cam["far"])
    if cam["model"] == "opencv":
        with np.errstate(divide="ignore", invalid="ignore"):
            _, _, radial = opencv_distort(x / z, y / z, cam["dist"])
        ok &= (radial > 0.8) & (radial < 1.2)
    elif cam["model"] == "fisheye":
        ok &= np.arctan2(np.hypot(x, y), z) < fisheye_theta_max(cam["dist"])
    return ok


def pixel_rays(cam, px, py):
    """World rays (origin [..., 3], unit direction [..., 3]) through pixel positions."""
    K, model = cam["K"], cam["model"]
    a = (px - K[0, 2]) / K[0, 0]
    b = (py - K[1, 2]) / K[1, 1]
    one, zero = np.ones_like(a), np.zeros_like(a)
    if model == "ortho":
        o_cam = np.stack([a, b, zero], -1)
        d_cam = np.stack([zero, zero, one], -1)
    else:
        if model == "pinhole":
            d_cam = np.stack([a, b, one], -1)
        elif model == "fisheye":
            k1, k2, k3, k4 = cam["dist"][:4]
            td = np.hypot(a, b)
            theta = np.minimum(td, fisheye_theta_max(cam["dist"]))
            for _ in range(50):
                f = theta * (1 + k1 * theta**2 + k2 * theta**4 + k3 * theta**6 + k4 * theta**8)
                df = 1 + 3 * k1 * theta**2 + 5 * k2 * theta**4 + 7 * k3 * theta**6
                df = df + 9 * k4 * theta**8
                theta = theta - (f - td) / df
            sin_over = np.where(td > 0, np.sin(theta) / np.where(td > 0, td, 1.0), 1.0)
            d_cam = np.stack([a * sin_over, b * sin_over, np.cos(theta)], -1)
        else:  # opencv: Newton on the distortion with a central-difference Jacobian
            u, v = a.copy(), b.copy()
            h = 1e-7
            for _ in range(30):
                fu, fv, _ = opencv_distort(u, v, cam["dist"])
                ua, va, _ = opencv_distort(u + h, v, cam["dist"])
                ub, vb, _ = opencv_distort(u - h, v, cam["dist"])
                uc, vc, _ = opencv_distort(u, v + h, cam["dist"])
                ud, vd, _ = opencv_distort(u, v - h, cam["dist"])
                j00, j10 = (ua - ub) / (2 * h), (va - vb) / (2 * h)
                j01, j11 = (uc - ud) / (2 * h), (vc - vd) / (2 * h)
                ru, rv = fu - a, fv - b
                det = j00 * j11 - j01 * j10
                u = u - (j11 * ru - j01 * rv) / det
                v = v - (j00 * rv - j10 * ru) / det
            d_cam = np.stack([u, v, one], -1)
        d_cam = d_cam / np.linalg.norm(d_cam, axis=-1, keepdims=True)
        o_cam = np.zeros(d_cam.shape)
    R, t = cam["R"], cam["t"]
    return (o_cam - t) @ R, d_cam @ R  # R^T (o - t), R^T d


# ---------------------------------------------------------------------- unscented transform


def activate(params):
    mu = np.asarray(params["means"], np.float64)
    rot = quat_to_rot(np.asarray(params["quats"], np.float64))
    s = np.exp(np.asarray(params["scales"], np.float64))
    o = 1.0 / (1.0 + np.exp(-np.asarray(params["opacities"], np.float64)))
    return mu, rot, s, o


def ut_weights(alpha=1.0, beta=2.0, kappa=0.0, dim=3):
    lam = alpha**2 * (dim + kappa) - dim
    wm = np.full(2 * dim + 1, 1.0 / (2 * (dim + lam)))
    wc = wm.copy()
    wm[0] = lam / (dim + lam)
    wc[0] = wm[0] + (1 - alpha**2 + beta)
    return wm, wc, np.sqrt(dim + lam)


def sigma_points(mu, rot, s, alpha=1.0, kappa=0.0):
    """World sigma points [N, 7, 3]: mu, mu + delta s_i R[:, i], mu - delta s_i R[:, i]."""
    _, _, delta = ut_weights(alpha, 0.0, kappa)
    axes = rot * s[:, None, :]  # column i = s_i R[:, i]
    pts = [mu]
    pts += [mu + delta * axes[:, :, i] for i in range(3)]
    pts += [mu - delta * axes[:, :, i] for i in range(3)]
    return np.stack(pts, 1)


def unscented(params, camera, alpha=1.0, beta=2.0, kappa=0.0):
    """UT of every primitive: mean [N, 2], covariance [N, 2, 2] (no 0.3 dilation), the projected
    sigma points [N, 7, 2] and their validity [N, 7]."""
    cam = camera_arrays(camera)
    mu, rot, s, _ = activate(params)
    pts = sigma_points(mu, rot, s, alpha, kappa) @ cam["R"].T + cam["t"]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        uv = project(cam, pts)
    wm, wc, _ = ut_weights(alpha, beta, kappa)
    mean = np.einsum("k,nkc->nc", wm, uv)
    dev = uv - mean[:, None, :]
    cov = np.einsum("k,nki,nkj->nij", wc, dev, dev)
    return mean, cov, uv, project_valid(cam, pts)


# ---------------------------------------------------------------------- rendering


def response_3d(o, d, mu, rot, s, kernel=2):
    """Ray (o, d) [P, 3] against one Gaussian: (response [P], t* [P]) by closest approach."""
    sigma_inv = rot @ np.diag(1.0 / s**2) @ rot.T
    diff = mu - o
    sd = d @ sigma_inv
    t_star = np.einsum("pi,pi->p", diff, sd) / np.einsum("pi,pi->p", d, sd)
    x = o + t_star[:, None] * d - mu
    g = np.einsum("pi,ij,pj->p", x, sigma_inv, x)
    return KERNELS[kernel](g), t_star


def render(
    params,
    camera,
    background=None,
    kernel=2,
    alpha_max=0.99,
    alpha_min=1.0 / 255.0,
    t_min=1e-4,
    rays=None,
):
    """(colour [H, W, 3], alpha [H, W], depth-weighted sum [H, W]), float64.

    `rays`: optional (origin, dir) [H, W, 3] (e.g. from `Camera.pixel_rays`); by default the
    reference's own rays.
    """
    cam = camera_arrays(camera)
    w, h = cam["width"], cam["height"]
    mu, rot, s, opac = activate(params)
    pc = mu @ cam["R"].T + cam["t"]
    depth = pc[:, 2]
    valid = (depth >= CULL_Z) & project_valid(cam, pc)
    campos = -cam["R"].T @ cam["t"]
    view = mu - campos
    colour = sh_colour(
        np.asarray(params["sh"], np.float64), view / np.linalg.norm(view, axis=-1, keepdims=True)
    )
    if rays is None:
        jj, ii = np.meshgrid(np.arange(w), np.arange(h))
        o, d = pixel_rays(cam, (jj + 0.5).ravel().astype(np.float64), (ii + 0.5).ravel())
    else:
        o = np.asarray(rays[0], np.float64).reshape(-1, 3)
        d = np.asarray(rays[1], np.float64).reshape(-1, 3)
    n_pix = o.shape[0]
    T = np.ones(n_pix)
    C = np.zeros((n_pix, 3))
    D = np.zeros(n_pix)
    done = np.zeros(n_pix, bool)
    order = np.argsort(np.where(valid, depth, np.inf), kind="stable")
    for i in order:
        if not valid[i]:
            break
        resp, t_star = response_3d(o, d, mu[i], rot[i], s[i], kernel)
        alpha = np.minimum(alpha_max, opac[i] * resp)
        use = (resp > MIN_RESPONSE) & (alpha >= alpha_min) & (t_star > 0) & ~done
        test_t = T * (1 - alpha)
        stop = use & (test_t < t_min)
        done |= stop
        use &= ~stop
        wgt = np.where(use, alpha * T, 0.0)
        C += wgt[:, None] * colour[i]
        D += wgt * depth[i]
        T = np.where(use, test_t, T)
    if background is not None:
        C += T[:, None] * np.asarray(background, np.float64)
    return C.reshape(h, w, 3), (1 - T).reshape(h, w), D.reshape(h, w)


def lit_pixels(params, camera, rays=None, kernel=2, alpha_min=1.0 / 255.0):
    """Per primitive, the pixels [N, H, W] (bool) where it can contribute (response, alpha and
    t* rules), ignoring occlusion: what a footprint must cover."""
    cam = camera_arrays(camera)
    w, h = cam["width"], cam["height"]
    mu, rot, s, opac = activate(params)
    if rays is None:
        jj, ii = np.meshgrid(np.arange(w), np.arange(h))
        o, d = pixel_rays(cam, (jj + 0.5).ravel().astype(np.float64), (ii + 0.5).ravel())
    else:
        o = np.asarray(rays[0], np.float64).reshape(-1, 3)
        d = np.asarray(rays[1], np.float64).reshape(-1, 3)
    out = np.zeros((len(mu), h * w), bool)
    for i in range(len(mu)):
        resp, t_star = response_3d(o, d, mu[i], rot[i], s[i], kernel)
        alpha = np.minimum(0.99, opac[i] * resp)
        out[i] = (resp > MIN_RESPONSE) & (alpha >= alpha_min) & (t_star > 0)
    return out.reshape(len(mu), h, w)
