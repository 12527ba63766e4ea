"""Checkpoints of a training run: the whole train state plus JSON metadata in one `.npz`.

Written atomically by `xprc.io.save_checkpoint` (temporary sibling, fsync, rename, fsync of the
folder), so a kill at any moment leaves the previous checkpoint intact; a `.tmp` left by a kill
during a write is removed when the next run starts.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..io import load_checkpoint, save_checkpoint
from .config import TrainError

CHECKPOINT = "checkpoint.npz"
_TREES = ("opt", "strategy", "cams", "cams_opt")
_ARRAYS = ("step", "key", "used")


def remove_stale_tmp(path: Path) -> Path | None:
    """Delete the temporary file an interrupted checkpoint write left behind (its name)."""
    tmp = path.with_name(path.name + ".tmp")
    if tmp.is_file():
        tmp.unlink()
        return tmp
    return None


def _leaves(tree) -> dict[str, np.ndarray]:
    return {str(i): np.asarray(x) for i, x in enumerate(jax.tree_util.tree_leaves(tree))}


def save(path: Path, state: dict, meta: dict) -> None:
    tree = {
        "params": {k: np.asarray(v) for k, v in state["params"].items()},
        "state": {k: np.asarray(state[k]) for k in _ARRAYS},
    }
    for name in _TREES:
        tree[name] = _leaves(state[name])
    save_checkpoint(path, tree, meta)


def _restore(tree: dict, template, what: str, path: Path):
    leaves, treedef = jax.tree_util.tree_flatten(template)
    stored = tree.get(what, {})
    if len(stored) != len(leaves):
        raise TrainError(
            f"checkpoint {what} state has {len(stored)} arrays, this run needs {len(leaves)} "
            "(different strategy or camera options?)",
            path,
        )
    out = [jnp.asarray(stored[str(i)]) for i in range(len(leaves))]
    for a, b in zip(out, leaves, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise TrainError(f"checkpoint {what} state does not match this run", path)
    return jax.tree_util.tree_unflatten(treedef, out)


def load(path: Path, template: dict) -> tuple[dict, dict]:
    """(state shaped like `template`, meta); TrainError when it does not fit this run."""
    tree, meta = load_checkpoint(path)
    try:
        params = {k: jnp.asarray(tree["params"][k]) for k in template["params"]}
        arrays = {k: jnp.asarray(tree["state"][k]) for k in _ARRAYS}
    except KeyError as e:
        raise TrainError(f"checkpoint lacks entry {e}", path) from None
    for name, arr in params.items():
        want = template["params"][name]
        if arr.shape != want.shape or arr.dtype != want.dtype:
            raise TrainError(
                f"checkpoint parameter '{name}' is {arr.dtype}{list(arr.shape)}, this run needs "
                f"{want.dtype}{list(want.shape)} (different capacity or method?)",
                path,
            )
    state = {"params": params, **arrays}
    for name in _TREES:
        state[name] = _restore(tree, template[name], name, path)
    return state, meta
