"""Pose refinement on the demo scene: perturb the training poses, train with and without
`pose_opt`, report the pose error left (raw, and after the best global similarity) and test PSNR.

    python benchmarks/pose_refinement.py --steps 1200 --variant plain --variant pose
    python benchmarks/pose_refinement.py --variant pose:pose_lr=3e-3

A variant is `plain` (no refinement) or `pose`, optionally followed by `:key=value,...`
TrainConfig overrides (numbers, 0 / 1 for a bool option such as `random_background=1`;
`lr.NAME=x` sets parameter NAME's learning rate). Rows are
printed as JSON lines.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

ROOT = Path(__file__).resolve().parent.parent


def perturb(dataset, degrees: float, fraction: float, seed: int = 1, keep: tuple = ()):
    """Each view's world->camera matrix left-multiplied by a random rotation of `degrees`
    (uniform axis) and a camera-frame translation of `fraction` x scene scale (uniform
    direction); views listed in `keep` stay exact. Returns (dataset, [V, 4, 4] deltas)."""
    from xprc.train import scene_scale

    rng = np.random.default_rng(seed)
    shift = fraction * scene_scale(dataset)
    views, deltas = [], []
    for i, v in enumerate(dataset.views):
        axis, d = rng.normal(size=3), rng.normal(size=3)
        delta = np.eye(4)
        if i not in keep:
            delta[:3, :3] = Rotation.from_rotvec(
                axis / np.linalg.norm(axis) * math.radians(degrees)
            ).as_matrix()
            delta[:3, 3] = shift * d / np.linalg.norm(d)
        deltas.append(delta)
        vm = (delta @ np.asarray(v.viewmat, np.float64)).astype(np.float32)
        views.append(dataclasses.replace(v, viewmat=vm))
    return dataclasses.replace(dataset, views=tuple(views)), np.asarray(deltas)


def corrected_viewmats(views, cameras: dict | None) -> np.ndarray:
    """The world->camera matrices with the learned corrections (None: uncorrected)."""
    from xprc.train.camera_opt import pose_matrices

    viewmats = np.stack([np.asarray(v.viewmat, np.float64) for v in views])
    if cameras is None:
        return viewmats
    return pose_matrices(cameras["pose"], cameras["pose_pivot"]) @ viewmats


def _gauge(R_e, c_e, R_t, c_t):
    """The global similarity x -> s Q x + p of the estimated world onto the true one: Q the
    chordal mean of the per-view rotation offsets R_e^T R_t (so R_e Q^T ~ R_t), then s and p
    by least squares on the camera centres (s Q c_e + p ~ c_t)."""
    u, _, vt = np.linalg.svd(np.einsum("vji,vjk->ik", R_e, R_t))
    qt = u @ np.diag([1.0, 1.0, np.linalg.det(u @ vt)]) @ vt  # nearest rotation
    q = qt.T
    a = (c_e - c_e.mean(0)) @ q.T
    b = c_t - c_t.mean(0)
    s = float(np.sum(a * b) / np.sum(a * a))
    return s, q, c_t.mean(0) - s * q @ c_e.mean(0)


def pose_errors(estimated: np.ndarray, truth: np.ndarray, scale: float, align: bool) -> dict:
    """Mean / max rotation error (degrees) and camera-centre error (fraction of `scale`)
    between world->camera matrices; `align`: after the best global similarity of the
    estimated camera centres onto the true ones (the gauge the scene can absorb)."""
    R_e, t_e = estimated[:, :3, :3], estimated[:, :3, 3]
    R_t, t_t = truth[:, :3, :3], truth[:, :3, 3]
    c_e = -np.einsum("vji,vj->vi", R_e, t_e)
    c_t = -np.einsum("vji,vj->vi", R_t, t_t)
    if align:
        s, q, p = _gauge(R_e, c_e, R_t, c_t)
        c_e = s * c_e @ q.T + p
        R_e = R_e @ q.T
    rel = np.einsum("vij,vkj->vik", R_e, R_t)
    rotvec = Rotation.from_matrix(rel).as_rotvec()  # camera frame: z is the roll
    deg = np.degrees(np.linalg.norm(rotvec, axis=1))
    dist = np.linalg.norm(c_e - c_t, axis=1) / scale
    return {
        "rot_deg_mean": float(deg.mean()),
        "rot_deg_max": float(deg.max()),
        "rot_deg_axes_mean": [round(float(x), 4) for x in np.degrees(np.abs(rotvec)).mean(0)],
        "rot_deg_axes_signed_mean": [round(float(x), 4) for x in np.degrees(rotvec).mean(0)],
        "trans_frac_mean": float(dist.mean()),
        "trans_frac_max": float(dist.max()),
    }


def parse_variant(text: str) -> tuple[str, dict]:
    name, _, rest = text.partition(":")
    over: dict = {}
    for item in filter(None, rest.split(",")):
        k, _, v = item.partition("=")
        value = int(v) if v.lstrip("-").isdigit() else float(v)
        if k.startswith("lr."):  # lr.NAME=value: the learning rate of parameter NAME
            over.setdefault("lr", {})[k[3:]] = value
        else:
            over[k] = value
    return name, over


def run(args) -> list[dict]:
    from xprc.compiler.driver import load
    from xprc.data.demo_scene import generate_demo_scene
    from xprc.data.scene_folder import load_scene
    from xprc.train import TrainConfig, scene_scale, train

    method = load(ROOT / "specs" / f"{args.spec}.xpr")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        generate_demo_scene(tmp, n_train=args.train, n_test=args.test, size=(args.size,) * 2)
        train_set, test_set = load_scene(tmp)
    truth = np.asarray([np.asarray(v.viewmat, np.float64) for v in train_set.views])
    scale = scene_scale(train_set)
    noisy, _ = perturb(train_set, args.degrees, args.fraction)
    for text in args.variant:
        name, over = parse_variant(text)
        config = TrainConfig(
            steps=args.steps, eval_every=0, checkpoint_every=0, progress=False,
            save_renders=False, refine_from=args.steps // 10,
            sh_degree_interval=max(args.steps // 4, 1), pose_opt=name == "pose",
        )  # fmt: skip
        # a bool option given as a number (random_background=1) becomes a bool
        over = {k: bool(v) if isinstance(getattr(config, k, None), bool) else v
                for k, v in over.items()}  # fmt: skip
        config = dataclasses.replace(config, **over)
        t0 = time.perf_counter()
        r = train(method, noisy, test_set, None, config)
        est = corrected_viewmats(noisy.views, r.cameras)
        row = {
            "variant": text,
            "psnr": r.metrics["psnr"],
            "raw": pose_errors(est, truth, scale, align=False),
            "aligned": pose_errors(est, truth, scale, align=True),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="3dgs")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--train", type=int, default=12)
    ap.add_argument("--test", type=int, default=4)
    ap.add_argument("--degrees", type=float, default=2.0)
    ap.add_argument("--fraction", type=float, default=0.05)
    ap.add_argument("--variant", action="append", default=[])
    args = ap.parse_args(argv)
    args.variant = args.variant or ["plain", "pose"]
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
