"""The training step's device memory at a given capacity, from XLA's own accounting, without
running it (issue 39: "no out-of-memory at 3M").

The step is built as `xprc.train` builds it (`Run`, `step_fn(run.step_key())`) on a few small
synthetic views, then lowered and compiled for abstract inputs (`jax.ShapeDtypeStruct`) of the
asked sizes: `--prims` primitives, `--entries` (primitive, tile) entries, `--views` images of
`--size`. Nothing of that size is allocated. Prints XLA's `memory_analysis()` (arguments,
temporaries, outputs) beside xprc's own estimate (`xprc.train.step_memory`).

    python benchmarks/step_memory.py --prims 3000000                # this machine's backend
    python benchmarks/step_memory.py --prims 3000000 --tpu          # a TPU v5e's, from a CPU

--tpu compiles for a TPU v5e from this machine (JAX's ahead-of-time compilation for a TPU
topology; needs the `libtpu` package installed, no TPU): the figures a v5e's XLA gives, Pallas
kernels included. Without it the figures are this machine's backend's (a CPU lays out and
schedules buffers differently: docs/tpu.md "Training at full scale").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import compile_aot  # noqa: E402
from benchmarks.run import SPECS  # noqa: E402
from xprc.camera import look_at  # noqa: E402
from xprc.compiler.driver import load  # noqa: E402
from xprc.data.datasets import Dataset, View  # noqa: E402
from xprc.pipeline import entry_bucket, gather  # noqa: E402
from xprc.train.config import preset  # noqa: E402
from xprc.train.run import Run  # noqa: E402
from xprc.train.step import step_fn  # noqa: E402
from xprc.train.step_memory import estimate_step  # noqa: E402

SMALL = 1237  # the small run's capacity: a size no other axis of its state has
SMALL_VIEWS = 5  # (nor of its data: not 3, the colour channels)
GB = 1e9


def grey_dataset(size: tuple[int, int], views: int, points: int, fov: float = 60.0,
                 spread: float = 1.0) -> Dataset:  # fmt: skip
    """`views` flat grey views of `size` (8-bit values, so the images are stored as uint8 on
    the device as a real capture's are) on a loop around the origin, and `points` uniform
    points in [-spread, spread]^3."""
    w, h = size
    image = np.full((h, w, 3), np.float32(128) / np.float32(255), np.float32)
    out = []
    for i in range(views):
        eye = np.array([3.0 * np.cos(i), 3.0 * np.sin(i), 1.0])
        cam = look_at(eye, [0, 0, 0], [0, 0, 1], w, h, fov, dtype=np.float32)
        out.append(View(name=f"v{i}", image=image, viewmat=np.asarray(cam.viewmat),
                        K=np.asarray(cam.K), width=w, height=h))  # fmt: skip
    pts = np.random.default_rng(0).uniform(-spread, spread, (points, 3)).astype(np.float32)
    return Dataset(views=tuple(out), points=pts, colors=np.full((points, 3), 0.5, np.float32))


def small_run(method, size: tuple[int, int], strategy: str = "mcmc") -> Run:
    """A `Run` of `method` on SMALL_VIEWS grey views of `size` and SMALL points."""
    data = grey_dataset(size, SMALL_VIEWS, SMALL)
    config = preset("3dgs-30k", steps=100, strategy=strategy, capacity=SMALL, progress=False,
                    eval_every=0, checkpoint_every=0)  # fmt: skip
    return Run(method, data, data, None, config, 1, log=lambda *a, **k: None)


def _grown(tree, old: int, new: int, sharding):
    def one(a):
        shape = (new, *a.shape[1:]) if a.ndim and a.shape[0] == old else a.shape
        return jax.ShapeDtypeStruct(shape, a.dtype, sharding=sharding)

    return jax.tree_util.tree_map(one, tree)


def _tpu_sharding():
    """The sharding onto a TPU v5e's one device (ahead of time), or a one-line exit."""
    device, why = compile_aot.tpu_device()
    if device is None:
        sys.exit(f"step_memory: cannot compile for a TPU v5e here ({why}); install the libtpu "
                 "package, or run without --tpu")  # fmt: skip
    return jax.sharding.SingleDeviceSharding(device)


def analyse(method, prims: int, entries: int, size=(1296, 840), views: int = 131,
            tpu: bool = False, strategy: str = "mcmc") -> dict:  # fmt: skip
    """XLA's memory analysis of the compiled training step at these sizes (bytes), and
    xprc's estimate of the same step (`estimate_step`)."""
    run = small_run(method, size, strategy)
    key = run.step_key()
    render = dataclasses.replace(key.render, max_entries=entries)
    sharding = None
    if tpu:  # the render as a TPU runs it: the Pallas kernels, lowered for the chip
        sharding = _tpu_sharding()
        render = dataclasses.replace(render, compositor="pallas")
    with compile_aot.lowered_for_tpu(tpu):
        key = dataclasses.replace(key, render=render)
        args = (_grown(run.state, SMALL, prims, sharding),
                _grown(run.data, SMALL_VIEWS, views, sharding),
                _grown(run.hyper, SMALL_VIEWS, views, sharding),
                jax.ShapeDtypeStruct((), jnp.int32, sharding=sharding))  # fmt: skip
        t0 = time.perf_counter()
        compiled = step_fn(key).lower(*args).compile()
        seconds = time.perf_counter() - t0
    m = compiled.memory_analysis()
    xla = {"arguments": m.argument_size_in_bytes, "temporaries": m.temp_size_in_bytes,
           "outputs": m.output_size_in_bytes, "aliased": m.alias_size_in_bytes}  # fmt: skip
    xla["total"] = xla["arguments"] + xla["temporaries"] + xla["outputs"] - xla["aliased"]
    image_bytes = sum(_bytes(a) for a in jax.tree_util.tree_leaves(args[1]))
    est = estimate_step(method, prims, entries, size, image_bytes, "tpu" if tpu else None)
    return {"prims": prims, "entries": entries, "size": f"{size[0]}x{size[1]}", "views": views,
            "backend": "tpu v5e (compiled ahead of time)" if tpu else jax.default_backend(),
            "compile_s": round(seconds, 1), "xla": xla, "estimate": est}  # fmt: skip


def _bytes(a) -> int:
    return int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize


def entries_for(prims: int) -> int:
    """The entry capacity bucket a run of `prims` primitives on the generated capture gets: 1M
    primitives needed about 4.2 entries each (5,242,880 after the 1.25 margin, TPU run of
    2026-12-07); the same per primitive at other counts."""
    return entry_bucket(int(prims * 5_242_880 / 1_000_000))


def report(row: dict) -> str:
    x, e = row["xla"], row["estimate"]
    return (
        f"{row['backend']}: {row['prims']:,} primitives, {row['entries']:,} entries, "
        f"{row['views']} views of {row['size']}: XLA arguments {x['arguments'] / GB:.2f} GB, "
        f"temporaries {x['temporaries'] / GB:.2f} GB, outputs {x['outputs'] / GB:.2f} GB "
        f"(total {x['total'] / GB:.2f} GB); xprc's estimate {e['total'] / GB:.2f} GB "
        f"(state {e['state'] / GB:.2f} with the trainer's held copy, temporaries "
        f"{e['temporaries'] / GB:.2f}, images {e['images'] / GB:.2f}); compiled in "
        f"{row['compile_s']} s"
    )


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prims", default="3000000", help="comma list of capacities")
    ap.add_argument(
        "--entries",
        type=int,
        default=None,
        help="entry capacity (default: the bucket for the capture, entries_for)",
    )
    ap.add_argument("--size", default="1296x840")
    ap.add_argument("--views", type=int, default=131)
    ap.add_argument("--spec", default="3dgs")
    ap.add_argument("--tpu", action="store_true", help="compile for a TPU v5e (needs libtpu)")
    ap.add_argument(
        "--transpose", choices=gather.TRANSPOSES, default=None,
        help="the row gather's transpose in the backward (default: xprc/pipeline/gather.py's)",
    )  # fmt: skip
    ap.add_argument("--out", default=None, help="write the rows to this JSON file")
    args = ap.parse_args(argv)
    if args.transpose:
        gather.TRANSPOSE = args.transpose  # read when the step is traced: before it is
    size = tuple(int(v) for v in args.size.split("x"))
    method = load(ROOT / SPECS[args.spec])
    rows = []
    for prims in (int(p) for p in args.prims.split(",")):
        entries = args.entries or entries_for(prims)
        rows.append(analyse(method, prims, entries, size, args.views, args.tpu))
        print(report(rows[-1]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
