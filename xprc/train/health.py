"""Divergence: a loss or a parameter that is no longer finite stops the run with a TrainError.

The train step reduces each parameter (and camera correction) to one "all finite" flag, which
travels with the step's info the loop fetches anyway, so the check costs no extra device sync.
A step that went non-finite is never applied: the error names the step, the loss, the
parameters, and the largest magnitudes of the inputs (camera centres, focal lengths, points), the
usual cause; the last checkpoint written stays the last good state.
"""

from __future__ import annotations

import numpy as np

from .config import TrainError


def input_magnitudes(cameras, names: list[str], points) -> str:
    """The training data's largest camera centre distance, focal length and point distance from
    the origin, each with where it is (a hint at the input that made a run diverge).
    cameras: the training views' stacked Camera; names: their names; points: [P, 3] or None."""
    viewmat = np.asarray(cameras.viewmat, np.float64)
    centres = -np.einsum("vji,vj->vi", viewmat[:, :3, :3], viewmat[:, :3, 3])  # -R^T t
    dist = np.linalg.norm(centres, axis=1)
    i = int(np.argmax(dist))
    focal = np.abs(np.asarray(cameras.K, np.float64)[:, [0, 1], [0, 1]]).max(axis=1)
    j = int(np.argmax(focal))
    parts = [
        f"camera centre at distance {dist[i]:.3g} (view {names[i]!r})",
        f"focal length {focal[j]:.3g} px (view {names[j]!r})",
    ]
    if points is not None and len(points):
        norms = np.linalg.norm(np.asarray(points, np.float64), axis=1)
        k = int(np.argmax(norms))
        parts.append(f"point at distance {norms[k]:.3g} (point {k})")
    return "the largest inputs: " + ", ".join(parts)


def nonfinite(flags: dict) -> list[str]:
    """The names whose "all finite" flag is false."""
    return [name for name, ok in flags.items() if not bool(ok)]


def check_initial(params: dict, cameras, names: list[str], points, path=None) -> None:
    """A TrainError (located at the run folder `path`) when the initial parameters are not
    finite; the rest as in `input_magnitudes`."""
    bad = [k for k, v in params.items() if not np.isfinite(np.asarray(v)).all()]
    if bad:
        hint = input_magnitudes(cameras, names, points)
        raise TrainError(
            f"the initial parameters {', '.join(bad)} are not finite (made by the spec's init "
            f"rules from the dataset: {hint})",
            path,
        )


def diverged(info: dict) -> bool:
    """Whether a step's info (host values with "loss" and "finite" {name: bool}) shows a
    non-finite loss or parameter."""
    return not np.isfinite(float(info["loss"])) or bool(nonfinite(info["finite"]))


def divergence_error(
    step: int, info: dict, cameras, names: list[str], points, checkpoint: str, path=None
) -> TrainError:
    """The error for training step `step` that made the loss or a parameter non-finite
    (`diverged`), located at the run folder `path`. checkpoint: what the run folder keeps (a
    sentence); the rest as in `input_magnitudes`."""
    loss = float(info["loss"])
    bad = nonfinite(info["finite"])
    what = []
    if not np.isfinite(loss):
        what.append(f"the loss is {loss}")
    if bad:
        what.append(f"{', '.join(bad)} became non-finite")
    hint = input_magnitudes(cameras, names, points)
    return TrainError(
        f"training diverged at step {step}: {' and '.join(what)} (the step was not applied; "
        f"{checkpoint}). Often an input far outside the scene: {hint}",
        path,
    )
