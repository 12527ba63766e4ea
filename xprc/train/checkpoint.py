"""Checkpoints of a training run: the whole train state plus JSON metadata in one `.npz`.

Written atomically by `xprc.data.npz.save_checkpoint` (temporary sibling, fsync, rename, fsync
of the folder), so a kill at any moment leaves the previous checkpoint intact; a `.tmp` left by a
kill during a write is removed when the next run starts.

A checkpoint is untrusted input: `load` checks every array against the run's own state (shape,
dtype, finite parameters) and every metadata field the trainer reads (`META`), and a mismatch is
a TrainError naming the file and the entry, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..data.files import temporary_path
from ..data.npz import load_checkpoint, save_checkpoint
from ..errors import cut_to
from ..method_info import MethodInfo
from .config import TrainError

_TREES = ("opt", "strategy", "cams", "cams_opt", "appearance", "appearance_opt")
_ARRAYS = ("step", "key", "used")


def remove_stale_tmp(path: Path) -> Path | None:
    """Delete the temporary file an interrupted checkpoint write left behind (its name)."""
    tmp = temporary_path(path)
    if tmp.is_file():
        tmp.unlink()
        return tmp
    return None


def _leaves(tree) -> dict[str, np.ndarray]:
    return {str(i): np.asarray(x) for i, x in enumerate(jax.tree_util.tree_leaves(tree))}


def save(path: Path, state: dict, meta: dict) -> None:
    """Write the train state and `meta` atomically; a failed write (a full disk) is a
    TrainError naming the file, and the previous checkpoint is left as it was."""
    tree = {
        "params": {k: np.asarray(v) for k, v in state["params"].items()},
        "state": {k: np.asarray(state[k]) for k in _ARRAYS},
    }
    for name in _TREES:
        tree[name] = _leaves(state[name])
    try:
        save_checkpoint(path, tree, meta)
    except OSError as e:
        raise TrainError(
            f"cannot write the checkpoint ({e.strerror or e}); the previous one, if any, is kept",
            path,
        ) from None


# ------------------------------------------------------------------------------ metadata


# The key of the training images' digest (checkpoints written before it lack it).
IMAGES_KEY = "data.images"

# What a `run_inputs` key comes from on the command line (the resume error's advice).
RESUME_HINTS = (("spec.", ("spec", "-D constants")), ("data.", ("--data", "--downscale")))


def _digest(*parts) -> str:
    """A short sha256 of arrays and bytes."""
    h = hashlib.sha256()
    for a in parts:
        h.update(a if isinstance(a, bytes) else np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


# The prefix of each spec constant's key in the recorded inputs (`xprc.trained` reads them back).
CONSTANT_KEY = "spec.constants."


def images_digest(views) -> str:
    """A short sha256 of the decoded training images (and their alpha, if any), in view order:
    an image changed in place (same path, same cameras) changes it. The decoded pixels, not the
    files: they are in memory already, and a re-encoded file with the same pixels is the same
    data. Each view is hashed in a thread of its own (hashlib releases the GIL), so hundreds
    of multi-megabyte images take about a second on a few cores."""

    def one(view) -> bytes:
        h = hashlib.sha256()
        for a in (view.image, getattr(view, "alpha", None)):
            if a is not None:
                a = np.ascontiguousarray(a, np.float32)
                h.update(repr(a.shape).encode())
                h.update(memoryview(a).cast("B"))
        return h.digest()

    views = list(views)
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        return _digest(b"".join(pool.map(one, views)))


def run_inputs(method, train_set, cameras, names: list[str], background, views=None) -> dict:
    """What a run fits besides its options, as JSON values keyed for the resume check: the
    spec (its text's sha256, each constant with -D overrides applied), the training data
    (folder, views, image size, a digest of their cameras, of their decoded images and of the
    points) and the background the run composites on (given or inferred from the data). A
    checkpoint records them; a resume with others is refused. cameras: the training views'
    stacked Camera; names: their names; views: the training views (their images)."""
    root = getattr(train_set, "root", None)
    arrays = [np.asarray(a, np.float32) for a in (cameras.viewmat, cameras.K, cameras.dist)]
    shutter = []  # a rolling shutter's end poses too (a global camera's digest is unchanged)
    if cameras.viewmat_end is not None:
        arrays.append(np.asarray(cameras.viewmat_end, np.float32))
        shutter = [cameras.shutter]
    info = MethodInfo.of(method)
    out = {
        "spec.sha256": info.spec_sha256,
        **{f"{CONSTANT_KEY}{k}": float(v) for k, v in info.constants.items()},
        "data.folder": None if root is None else str(Path(root).resolve()),
        "data.views": len(names),
        "data.image_size": f"{cameras.width}x{cameras.height}",
        "data.cameras": _digest(*arrays, json.dumps([cameras.model, *names, *shutter]).encode()),
        "data.background": [float(c) for c in np.asarray(background)],
    }
    if views is not None:
        out[IMAGES_KEY] = images_digest(views)
    points = getattr(train_set, "points", None)
    if points is not None:
        colors = getattr(train_set, "colors", None)
        colors = np.zeros(0, np.float32) if colors is None else np.asarray(colors, np.float32)
        out["data.points"] = _digest(np.asarray(points, np.float32), colors)
    return json.loads(json.dumps(out))


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _rows(*numbers: str):
    """A list of objects, each with an integer 'step' and these number fields."""

    def ok(v) -> bool:
        return isinstance(v, list) and all(
            isinstance(r, dict) and _int(r.get("step")) and all(_number(r.get(k)) for k in numbers)
            for r in v
        )

    return ok


# field: (check, what it must be). A field may be missing (older checkpoints lack some; the
# trainer then uses this run's value), but one that is present must pass its check.
META = {
    "method": (lambda v: isinstance(v, str), "a string"),
    "spec_sha256": (lambda v: isinstance(v, str), "a string"),
    "spec_path": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "seed": (_int, "an integer"),
    "strategy": (lambda v: isinstance(v, str), "a string"),
    "steps": (lambda v: _int(v) and v >= 0, "an integer >= 0"),
    "elapsed": (lambda v: _number(v) and 0 <= v < math.inf, "a finite number >= 0"),
    "history": (_rows("loss", "psnr"), "a list of objects with 'step', 'loss' and 'psnr'"),
    "evals": (_rows("psnr", "ssim"), "a list of objects with 'step', 'psnr' and 'ssim'"),
    "entry_capacity": (lambda v: _int(v) and v >= 1, "an integer >= 1"),
    "eval_entry_capacity": (lambda v: _int(v) and v >= 1, "an integer >= 1"),
    "capacity_raises": (lambda v: isinstance(v, list), "a list"),
    "densification": (
        lambda v: isinstance(v, dict) and all(_int(x) for x in v.values()),
        "an object of integer counts",
    ),
    "background": (
        lambda v: isinstance(v, list) and len(v) == 3 and all(_number(c) for c in v),
        "a list of 3 numbers (RGB)",
    ),
    "config": (lambda v: isinstance(v, dict), "an object"),
    "inputs": (lambda v: isinstance(v, dict), "an object"),
}


def check_meta(meta, path: Path) -> dict:
    """`meta` when every field the trainer reads has the right type, else a TrainError."""
    if not isinstance(meta, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        raise TrainError(
            f"corrupt checkpoint: its metadata is {kind.get(type(meta), 'a number')}, not a JSON "
            "object",
            path,
        )
    for field, (ok, what) in META.items():
        if field in meta and not ok(meta[field]):
            raise TrainError(
                f"corrupt checkpoint: metadata field '{field}' must be {what}, got "
                f"{cut_to(repr(meta[field]))}",
                path,
            )
    return meta


# -------------------------------------------------------------------------------- arrays


def _describe(a) -> str:
    return f"{a.dtype}{list(a.shape)}"


def _array(group: dict, key: str, want, where: str, path: Path, hint: str = "") -> np.ndarray:
    """The stored array `group[key]` when it has `want`'s shape and dtype (`where` names it)."""
    a = group.get(key)
    if a is None:
        raise TrainError(f"checkpoint lacks entry '{where}'{hint}", path)
    if not isinstance(a, np.ndarray):
        raise TrainError(f"corrupt checkpoint: '{where}' is a group of entries, not an array", path)
    if a.shape != tuple(want.shape) or a.dtype != want.dtype:
        raise TrainError(
            f"checkpoint entry '{where}' is {_describe(a)}, this run needs {_describe(want)}{hint}",
            path,
        )
    return a


def _group(tree: dict, name: str, path: Path) -> dict:
    group = tree.get(name, {})
    if not isinstance(group, dict):
        raise TrainError(f"corrupt checkpoint: '{name}' is an array, not a group of entries", path)
    return group


def _restore(tree: dict, template, what: str, path: Path):
    leaves, treedef = jax.tree_util.tree_flatten(template)
    stored = _group(tree, what, path)
    if len(stored) != len(leaves):
        raise TrainError(
            f"checkpoint {what} state has {len(stored)} arrays, this run needs {len(leaves)} "
            "(different strategy, camera or appearance options?)",
            path,
        )
    out = [
        jnp.asarray(_array(stored, str(i), leaf, f"{what}/{i}", path))
        for i, leaf in enumerate(leaves)
    ]
    return jax.tree_util.tree_unflatten(treedef, out)


def _params(tree: dict, template: dict, path: Path) -> dict:
    stored = _group(tree, "params", path)
    out = {}
    for name, want in template.items():
        a = _array(stored, name, want, f"params/{name}", path, _PARAMS_HINT)
        bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
        if bad:
            raise TrainError(
                f"checkpoint parameter '{name}' holds {bad} non-finite values (a diverged run?)",
                path,
            )
        out[name] = jnp.asarray(a)
    return out


_PARAMS_HINT = " (a checkpoint of another spec, capacity or strategy?)"


def _expected(template: dict) -> dict:
    """{entry: (template array, hint)} of every entry a checkpoint of this run holds."""
    out = {f"params/{k}": (v, _PARAMS_HINT) for k, v in template["params"].items()}
    out.update({f"state/{k}": (template[k], "") for k in _ARRAYS})
    for name in _TREES:
        for i, leaf in enumerate(jax.tree_util.tree_leaves(template[name])):
            out[f"{name}/{i}"] = (leaf, "")
    return out


def _check_headers(path: Path, template: dict, headers: dict) -> None:
    """The shapes and dtypes the entries' headers declare, and how many each state tree
    has, against this run's, before any data is read: a header that declares (2^28, 4) is
    refused as it stands, not after gigabytes are read (the same messages as after)."""
    for where, (want, hint) in _expected(template).items():
        h = headers.get(where)
        if h is not None and (h.shape != tuple(want.shape) or h.dtype != want.dtype):
            raise TrainError(f"checkpoint entry '{where}' is {h.dtype}{list(h.shape)}, this run "
                             f"needs {_describe(want)}{hint}", path)  # fmt: skip
    for name in _TREES:
        stored = sum(k.startswith(f"{name}/") for k in headers)
        needs = len(jax.tree_util.tree_leaves(template[name]))
        if stored not in (0, needs):  # (none: `_group`'s message after the read)
            raise TrainError(f"checkpoint {name} state has {stored} arrays, this run needs "
                             f"{needs} (different strategy, camera or appearance options?)",
                             path)  # fmt: skip


def load(path: Path, template: dict) -> tuple[dict, dict]:
    """(state shaped like `template`, meta); TrainError when it does not fit this run or is
    malformed (naming the entry or metadata field). The entries' headers are checked before
    their data is read."""
    tree, meta = load_checkpoint(path, expect=lambda h: _check_headers(path, template, h))
    meta = check_meta(meta, path)
    params = _params(tree, template["params"], path)
    group = _group(tree, "state", path)
    arrays = {k: jnp.asarray(_array(group, k, template[k], f"state/{k}", path)) for k in _ARRAYS}
    if int(arrays["step"]) < 0:
        raise TrainError(f"corrupt checkpoint: 'state/step' is {int(arrays['step'])}", path)
    state = {"params": params, **arrays}
    for name in _TREES:
        state[name] = _restore(tree, template[name], name, path)
    return state, meta
