"""Ellipse culling on the garden workload (issue 17, "fewer entries"): entries and time with and
without the spec's `ellipse` output, in one process, interleaved run by run.

    python benchmarks/ellipse_culling.py [--spec specs/3dgs.xpr] [--repeat 3] [--out FILE]

"rectangle" is the same compiled spec with its `ellipse` output dropped (the footprint's
bounding rectangle of tiles, what a plain `radii` footprint gives); "ellipse" is the spec as
shipped. Both render with the same capacity (the bucket above the rectangle count, which is what
`xprc.render` sizes) and must give the same image; the largest difference is recorded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xprc.camera import Camera  # noqa: E402
from xprc.compiler.driver import load  # noqa: E402
from xprc.data.workloads import adapt_params, garden_workload  # noqa: E402
from xprc.pipeline import RenderConfig, sized_config  # noqa: E402
from xprc.pipeline.params import prepare_params  # noqa: E402
from xprc.pipeline.render import _compiled  # noqa: E402


class Rectangle:
    """The method with its `ellipse` output dropped: rectangle footprints only."""

    def __init__(self, method):
        self._method = method

    def __getattr__(self, name):
        return getattr(self._method, name)

    def project(self, raw, camera):
        out = dict(self._method.project(raw, camera))
        out.pop("ellipse", None)
        return out


def once(fn, *args) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def compiled_pair(method, config, params, cam):
    fwd = _compiled(method, "RGB", config, False)

    def loss(p, c):
        return jnp.sum(fwd(p, c, None).image)

    grad = jax.jit(jax.grad(loss))
    return fwd.lower(params, cam, None).compile(), grad.lower(params, cam).compile()


def camera_row(variants, params, cam, repeat):
    """Interleaved timings of every variant on one camera, and its entry stats."""
    row = {}
    for name, (fwd, grad) in variants.items():
        jax.block_until_ready(fwd(params, cam, None))  # warm
        jax.block_until_ready(grad(params, cam))
        out = fwd(params, cam, None)
        row[name] = {
            "entries_needed": int(out.stats["entries_needed"]),
            "entries_kept": int(jnp.sum(out.stats["entries_per_tile"])),
            "entries_culled": int(out.stats["entries_culled"]),
            "dropped": int(out.stats["dropped"]),
            "fallback": int(out.stats["ellipse_fallback"]),
            "image": np.asarray(out.image),
            "fwd": [],
            "fwdbwd": [],
        }
    for _ in range(repeat):
        for name, (fwd, _) in variants.items():
            row[name]["fwd"].append(once(fwd, params, cam, None))
        for name, (_, grad) in variants.items():
            row[name]["fwdbwd"].append(once(grad, params, cam))
    diff = float(np.abs(row["ellipse"]["image"] - row["rectangle"]["image"]).max())
    for r in row.values():
        del r["image"]
        r["forward_s"] = statistics.median(r["fwd"])
        r["forward_backward_s"] = statistics.median(r["fwdbwd"])
    row["max_abs_image_diff"] = diff
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "specs" / "3dgs.xpr"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cameras", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ellipse.json"))
    args = ap.parse_args(argv)
    method = load(args.spec)
    raw, cams = garden_workload()
    params = prepare_params(
        method, {k: jnp.asarray(v) for k, v in adapt_params(method, raw).items()}
    )
    cams = cams[: args.cameras]
    config = sized_config(Rectangle(method), params, Camera.stack(cams), RenderConfig())
    methods = {"rectangle": Rectangle(method), "ellipse": method}
    variants = {k: compiled_pair(m, config, params, cams[0]) for k, m in methods.items()}
    rows = [camera_row(variants, params, cam, args.repeat) for cam in cams]
    result = {"spec": Path(args.spec).name, "capacity": config.max_entries, "cameras": rows,
              "device": str(jax.devices()[0]), "repeat": args.repeat}  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    head = ["camera", "entries rect -> kept", "forward rect / ellipse (s)"]
    head += ["fwd+bwd rect / ellipse (s)", "max diff"]
    print("| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
    for i, row in enumerate(rows):
        r, e = row["rectangle"], row["ellipse"]
        print(
            f"| {i} | {r['entries_kept']:,} -> {e['entries_kept']:,} "
            f"({e['entries_kept'] / r['entries_kept']:.2f}x) | {r['forward_s']:.3f} / "
            f"{e['forward_s']:.3f} ({e['forward_s'] / r['forward_s']:.2f}x) | "
            f"{r['forward_backward_s']:.3f} / {e['forward_backward_s']:.3f} "
            f"({e['forward_backward_s'] / r['forward_backward_s']:.2f}x) | "
            f"{row['max_abs_image_diff']:.1e} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
