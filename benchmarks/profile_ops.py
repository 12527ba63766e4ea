"""Where a render's device time goes, operation by operation: a profile of the public forward
and forward + backward (issues 39 and 40: "profile, then attack the largest stage first").

    python benchmarks/profile_ops.py                                # garden, 3DGS
    python benchmarks/profile_ops.py --methods 3dgs,3dgut --top 25
    python benchmarks/profile_ops.py --capture DIR --prims 1000000  # one capture view at 1M
    python benchmarks/profile_ops.py --quick                        # a small scene (smoke run)

The functions are those `benchmarks/stages.py` times (`benchmarks.run.public_render`: `jax.jit`
of `xprc.render` with the fitted capacity), compiled, called once, then called --repeat times
inside `jax.profiler.trace`. The trace is read back with `jax.profiler.ProfileData`: on a TPU
the device plane's "XLA Ops" line (device time of every XLA operation, the Pallas kernels as
custom calls; a while loop's time also holds its body's), on a CPU the host events that carry
an `hlo_op` (the runtime's thunks, some nested, so a CPU's sums overcount). Per
program it reports the module's device time per call, the largest operations, and the same
time by kind (kernel, sort, gather, scatter, other fusions). Operation names are HLO text, cut
to --width characters. Prints a table per program and writes benchmarks/results/profile_ops.json.
"""

from __future__ import annotations

import argparse
import collections
import glob
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run import SPECS, fmt_table, machine, public_render, workload, write_json  # noqa: E402
from xprc.camera import Camera  # noqa: E402
from xprc.compiler.driver import load  # noqa: E402
from xprc.data.workloads import adapt_params  # noqa: E402
from xprc.pipeline import RenderConfig, sized_config  # noqa: E402
from xprc.pipeline.params import prepare_params  # noqa: E402

KINDS = ("kernel", "sort", "scatter", "gather", "other")


def kind_of(op: str) -> str:
    """The kind of an operation from its HLO text (or its name, on a CPU)."""
    head = op.split("(", 1)[0] if "=" in op else op
    body = op.lower()
    if "custom-call" in body or "custom_call" in body or "tpu_custom_call" in body:
        return "kernel"
    for kind in ("sort", "scatter", "gather"):
        if kind in head.lower():
            return kind
    return "other"


def op_times(trace_dir: str, calls: int) -> dict:
    """Device ms per call of each operation, and of each module, from a trace folder."""
    from jax.profiler import ProfileData

    files = glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True)
    if not files:
        return {"ops": {}, "modules": {}, "source": "no trace written"}
    data = ProfileData.from_file(sorted(files)[-1])
    ops, counts, modules = collections.Counter(), collections.Counter(), collections.Counter()
    device = [p for p in data.planes if p.name.startswith("/device:")]
    if device:
        source = device[0].name
        for line in device[0].lines:
            if line.name == "XLA Ops":
                for e in line.events:
                    ops[e.name] += e.duration_ns
                    counts[e.name] += 1
            elif line.name == "XLA Modules":
                for e in line.events:
                    modules[e.name.split("(")[0]] += e.duration_ns
    else:  # a CPU: the runtime's per-operation events
        source = "host thunks (hlo_op)"
        for plane in data.planes:
            for line in plane.lines:
                for e in line.events:
                    stats = dict(e.stats)
                    if "hlo_op" in stats:
                        ops[stats["hlo_op"]] += e.duration_ns
                        counts[stats["hlo_op"]] += 1
                        modules[str(stats.get("hlo_module", "?"))] += e.duration_ns
    per_call = 1e-6 / calls
    return {
        "source": source,
        "ops": {k: (v * per_call, counts[k] / calls) for k, v in ops.items()},
        "modules": {k: v * per_call for k, v in modules.items()},
    }


def profile(fn, args, repeat: int) -> dict:
    """The op times of `repeat` calls of a compiled function (after one warm call)."""
    jax.block_until_ready(fn(*args))
    folder = tempfile.mkdtemp(prefix="xprc-profile-")
    start = time.perf_counter()
    with jax.profiler.trace(folder):
        for _ in range(repeat):
            jax.block_until_ready(fn(*args))
    wall = (time.perf_counter() - start) / repeat
    out = op_times(folder, repeat)
    out["wall_ms"] = wall * 1e3
    return out


def summarise(times: dict, top: int, width: int) -> dict:
    ops = sorted(times["ops"].items(), key=lambda kv: -kv[1][0])
    by_kind = collections.Counter()
    for name, (ms, _) in ops:
        by_kind[kind_of(name)] += ms
    return {
        "source": times["source"],
        "wall_ms": round(times["wall_ms"], 3),
        "ops_ms": round(sum(ms for ms, _ in times["ops"].values()), 3),
        "modules_ms": {k: round(v, 3) for k, v in times["modules"].items()},
        "by_kind_ms": {k: round(by_kind.get(k, 0.0), 3) for k in KINDS},
        "top_ops": [
            {"op": name[:width], "kind": kind_of(name), "ms": round(ms, 4), "count": n}
            for name, (ms, n) in ops[:top]
        ],
    }


def capture_view(folder: str, prims: int, images: str, spec):
    """One training view of a capture and `prims` primitives replicated from its sparse points
    (as `benchmarks/full_scale.py` starts MCMC)."""
    from benchmarks.full_scale import densified
    from xprc.data.scene_folder import load_scene
    from xprc.train import init_params
    from xprc.train.config import preset

    train_set, _ = load_scene(Path(folder) / "capture", test_every=8, images=images)
    full = densified(train_set, prims)
    params, _ = init_params(spec, full, preset("3dgs-30k", capacity=prims))
    return params, [train_set.views[0].camera()], f"capture view 0, {prims:,} primitives"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="3dgs")
    ap.add_argument("--compositor", default=None, help="xla or pallas (default: auto)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--width", type=int, default=160, help="characters kept of an op's text")
    ap.add_argument("--capture", default=None, help="a capture folder (full_scale.py's)")
    ap.add_argument("--prims", type=int, default=1_000_000)
    ap.add_argument("--images", default="images_4")
    ap.add_argument("--quick", action="store_true", help="a small random scene (smoke run)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "profile_ops.json"))
    args = ap.parse_args(argv)
    results = {"machine": machine(), "args": vars(args), "rows": []}
    compositor = args.compositor or ("pallas" if jax.default_backend() == "tpu" else "xla")
    for name in args.methods.split(","):
        method = load(ROOT / SPECS[name])
        if args.capture:
            params, cams, source = capture_view(args.capture, args.prims, args.images, method)
        else:
            num, scale = (800, 0.2) if args.quick else (None, 1.0)
            params, cams, source = workload(num, scale, args.quick)
            params = adapt_params(method, params)
        params = prepare_params(method, {k: jnp.asarray(v) for k, v in params.items()})
        config = RenderConfig(compositor=compositor, on_overflow="ignore")
        config = sized_config(method, params, Camera.stack(cams), config)
        fwd, grad = public_render(method, config)
        for program, fn in (("forward", fwd), ("fwd_bwd", grad)):
            compiled = fn.lower(params, cams[0]).compile()
            row = {"method": name, "program": program, "workload": source,
                   "compositor": compositor, "entry_capacity": config.max_entries,
                   **summarise(profile(compiled, (params, cams[0]), args.repeat), args.top,
                               args.width)}  # fmt: skip
            results["rows"].append(row)
            write_json(args.out, results, "(so far) ")
            print(f"\n## {name} {program} on {source}: wall {row['wall_ms']:.2f} ms a call, "
                  f"ops {row['ops_ms']:.2f} ms ({row['source']})\n")  # fmt: skip
            kinds = ", ".join(f"{k} {v:.2f}" for k, v in row["by_kind_ms"].items())
            print(f"by kind (ms): {kinds}")
            print(fmt_table(row["top_ops"][: args.top], [
                ("ms", lambda r: f"{r['ms']:.3f}"),
                ("n", lambda r: f"{r['count']:g}"),
                ("kind", lambda r: r["kind"]),
                ("op", lambda r: r["op"][:100].replace("|", "/")),
            ]))  # fmt: skip
    return results


if __name__ == "__main__":
    main()
