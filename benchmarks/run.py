"""Benchmarks: compile time, forward and forward+backward time, memory, tile statistics.

    python benchmarks/run.py            # full run on the garden workload (~10 minutes, 2 cores)
    python benchmarks/run.py --quick    # a smoke run: see QUICK (about a minute on 2 idle cores)

Prints markdown tables and writes benchmarks/results/latest.json (--quick: quick.json, so a
smoke run never replaces the full run's figures). Every ratio is against the hand-written JAX
3DGS module (benchmarks/handwritten_3dgs.py) measured in the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.dense import dense_fn  # noqa: E402
from xprc.camera import Camera  # noqa: E402
from xprc.data.workloads import (  # noqa: E402
    adapt_params,
    default_garden_path,
    garden_workload,
    random_scene,
)
from xprc.pipeline import (  # noqa: E402
    RenderConfig,  # noqa: E402
    count_entries,
    render,
    sized_config,
)
from xprc.pipeline.capacity import _count_fn, _count_key  # noqa: E402
from xprc.pipeline.params import prepare_params  # noqa: E402

FIRST = ("3dgs", "3dgut")  # shown first; every other shipped spec follows by name
SPECS = {
    p.stem: f"specs/{p.name}"
    for p in sorted(
        (ROOT / "specs").glob("*.xpr"),
        key=lambda p: (FIRST.index(p.stem) if p.stem in FIRST else len(FIRST), p.stem),
    )
}


# --quick: one spec, no dense baseline, no scaling sweep, a short training; its time is XLA
# compiling (45 and 47 CPU seconds measured with a cold and a warm JAX cache, 2026-12-07: about
# 22 for the render's count, forward and fwd+bwd, 23 for the training step and its evaluation;
# compiles use one core, so the wall time is about the CPU time on 2 idle cores)
QUICK_METHODS = ("3dgs",)
QUICK_TRAIN_STEPS = 10
QUICK = (
    "--quick is a smoke run that checks the benchmark runs, not a measurement to quote: "
    "specs/3dgs.xpr on 1,500 random primitives at 160x104 (forward and fwd+bwd, no dense "
    f"baseline, no scaling sweep) and a {QUICK_TRAIN_STEPS}-step training at 32x32: about 45 "
    "CPU seconds on one core, nearly all XLA compiling, so about a minute on 2 idle cores and "
    "longer on a busy machine (2 to 3.5 minutes at load 9 to 12 on 2 cores); it ends with its "
    "wall and CPU seconds and the load (--methods adds the hand-written module or other specs); "
    "the figures docs/benchmarks.md reports come from `python benchmarks/run.py`"
)


def load_handwritten():
    spec = importlib.util.spec_from_file_location(
        "handwritten_3dgs", ROOT / "benchmarks" / "handwritten_3dgs.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_methods(names):
    """name -> (module, spec compile seconds or None); missing specs are reported and skipped."""
    methods = {}
    if "handwritten" in names:
        methods["handwritten"] = (load_handwritten(), None)
    for name in names:
        if name == "handwritten":
            continue
        from xprc.compiler.driver import compile_file, load

        path = ROOT / SPECS[name]
        if not path.exists():
            print(f"[skip] {name}: {path} not found", file=sys.stderr)
            continue
        out = ROOT / "benchmarks" / "results" / f"_{name}_module.py"
        out.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        compile_file(path, out=out)
        compile_s = time.perf_counter() - start
        methods[name] = (load(path), compile_s)
    return methods


def timed(fn, *args, repeat=3):
    jax.block_until_ready(fn(*args))  # warm
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def public_render(method, config):
    """What a user's own jitted code runs, as docs/capacity.md says to write it: `jax.jit` of
    `xprc.render(method, params, camera, config=...)` with `config` and on_overflow="defer" (no
    host callback in the program), and `jax.jit` of the gradient of its image's sum, both of
    (params, camera)."""
    config = dataclasses.replace(config, on_overflow="defer")

    def forward(p, cam):
        return render(method, p, cam, config=config)

    def loss(p, cam):
        return jnp.sum(forward(p, cam).image)

    return jax.jit(forward), jax.jit(jax.grad(loss))


def measure(method, params, cams, config, repeat, with_dense=False):
    """Forward and forward+backward seconds per camera, XLA compile time and memory."""
    params = prepare_params(method, {k: jnp.asarray(v) for k, v in params.items()})
    # What `xprc.render` does by default: count the entries (a cheap jitted pass), then render
    # with the capacity bucket above the count, so nothing is dropped.
    count_fn = _count_fn(method, _count_key(config), False)
    count_s = timed(count_fn, params, cams[0], repeat=repeat)
    config = sized_config(method, params, Camera.stack(cams), config)
    needed = max(count_entries(method, params, cam, config) for cam in cams)
    fwd, grad = public_render(method, config)
    t0 = time.perf_counter()
    fwd_c = fwd.lower(params, cams[0]).compile()
    t1 = time.perf_counter()
    grad_c = grad.lower(params, cams[0]).compile()
    t2 = time.perf_counter()

    def peak(compiled):
        m = compiled.memory_analysis()
        return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes) / 2**20

    fwd_times, bwd_times, dense_times, dense_err, stats = [], [], [], [], []
    dense = dense_fn(method, config) if with_dense else None
    for cam in cams:
        fwd_times.append(timed(fwd_c, params, cam, repeat=repeat))
        bwd_times.append(timed(grad_c, params, cam, repeat=repeat))
        out = fwd_c(params, cam)
        stats.append({k: np.asarray(v) for k, v in out.stats.items()})
        if dense is not None:
            dense_times.append(timed(dense, params, cam, repeat=repeat))
            diff = np.abs(np.asarray(dense(params, cam)) - np.asarray(out.image))
            dense_err.append(float(diff.max()))
    per_tile = np.concatenate([s["entries_per_tile"] for s in stats])
    return {
        "primitives": int(params[method.PARAMS[0].name].shape[0]),
        "width": cams[0].width,
        "height": cams[0].height,
        "xla_compile_fwd_s": t1 - t0,
        "xla_compile_grad_s": t2 - t1,
        "count_s": count_s,
        "dense_forward_s": float(np.mean(dense_times)) if dense_times else None,
        "dense_max_abs_diff": max(dense_err) if dense_err else None,
        "entries_needed": needed,
        "entry_capacity": config.max_entries,
        "forward_s": float(np.mean(fwd_times)),
        "forward_backward_s": float(np.mean(bwd_times)),
        "forward_per_camera_s": [float(t) for t in fwd_times],
        "forward_backward_per_camera_s": [float(t) for t in bwd_times],
        "peak_forward_mib": peak(fwd_c),
        "peak_forward_backward_mib": peak(grad_c),
        "entries_per_tile_mean": float(per_tile.mean()),
        "entries_per_tile_max": int(per_tile.max()),
        "dropped": int(sum(int(s["dropped"]) for s in stats)),
    }


def workload(num, scale, quick):
    if quick or not default_garden_path().exists():
        if not quick:
            print(
                f"garden workload not found at {default_garden_path()} (set XPRC_GARDEN): "
                "measuring a random scene instead; the JSON records workload='random'",
                file=sys.stderr,
            )
        params = random_scene(num or 2000, seed=0, spread=1.5, depth=5.0)
        f = 120.0 * scale * 4
        w, h = round(160 * scale * 4), round(104 * scale * 4)
        K = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]], np.float32)
        cams = [Camera(viewmat=np.eye(4, dtype=np.float32), K=K, width=w, height=h)]
        return params, cams, "random"
    params, cams = garden_workload(num=num, scale=scale)
    return params, cams, "garden"


def train_benchmark(methods, quick):
    """Every method trained with the same budget on the generated demo scene (no download)."""
    import tempfile

    from xprc.data.demo_scene import generate_demo_scene
    from xprc.data.scene_folder import load_scene
    from xprc.train import TrainConfig, train

    steps, size, n_train = (QUICK_TRAIN_STEPS, (32, 32), 2) if quick else (300, (96, 96), 16)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        generate_demo_scene(tmp, n_train=n_train, n_test=2 if quick else 4, size=size, seed=0)
        train_set, test_set = load_scene(tmp)
        for name, (method, _) in methods.items():
            if name == "handwritten":
                continue
            config = TrainConfig(steps=steps, eval_every=steps, progress=False, save_renders=False)
            r = train(method, train_set, test_set, None, config)
            rows.append(
                {
                    "name": name,
                    "budget": f"{steps} steps, {size[0]}x{size[1]}, {n_train} training views",
                    "steps_per_second": r.steps_per_second,
                    "initial_psnr": r.initial_psnr,
                    "psnr": r.metrics["psnr"],
                    "ssim": r.metrics["ssim"],
                    "primitives": int(r.metrics.get("primitives", 0)),
                }
            )
            print(f"[done] training {name}: {r.metrics['psnr']:.2f} dB", file=sys.stderr)
    return rows


def machine() -> dict:
    """Where a benchmark ran, for its JSON."""
    return {"platform": platform.platform(), "jax": jax.__version__,
            "backend": jax.default_backend(), "device": str(jax.devices()[0])}  # fmt: skip


def write_json(path, results: dict, note: str = "") -> dict:
    """Write `results` to `path` (folders made) and say so on stdout."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")  # replaced whole: a run killed mid-write keeps the last
    tmp.write_text(json.dumps(results, indent=2))
    os.replace(tmp, out)
    print(f"\n{note}wrote {out}")
    return results


def load_average() -> float | None:
    """The system's 1-minute load average (None where the system has none to give)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # Windows has no getloadavg
        return None


def fmt_table(rows, columns):
    head = "| " + " | ".join(c for c, _ in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    lines = [head, sep]
    for r in rows:
        lines.append("| " + " | ".join(f(r) for _, f in columns) + " |")
    return "\n".join(lines)


def options(argv=None) -> argparse.Namespace:
    """The command line, with --quick's defaults (methods, output file) filled in."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run (45 CPU seconds: a minute on 2 idle cores)")  # fmt: skip
    ap.add_argument("--methods", default=None,
                    help="comma-separated: handwritten and shipped spec names (default: all; "
                    f"--quick: {','.join(QUICK_METHODS)})")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", default=None,
                    help="JSON output (default benchmarks/results/latest.json; --quick: "
                    "quick.json)")  # fmt: skip
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument("--no-training", action="store_true")
    args = ap.parse_args(argv)
    if args.out is None:
        name = "quick.json" if args.quick else "latest.json"
        args.out = str(ROOT / "benchmarks" / "results" / name)
    if args.methods is None:
        args.methods = ",".join(QUICK_METHODS if args.quick else ["handwritten", *SPECS])
    return args


def main(argv=None):
    t_start = time.perf_counter()
    load_start = load_average()  # the wall time depends on what else the machine runs
    args = options(argv)
    if args.quick:
        print(QUICK, file=sys.stderr)

    names = [n for n in args.methods.split(",") if n]
    methods = load_methods(names)
    config = RenderConfig()
    repeat = 1 if args.quick else args.repeat
    main_num, main_scale = (1500, 0.25) if args.quick else (None, 1.0)
    params, cams, source = workload(main_num, main_scale, args.quick)

    results = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": jax.local_device_count() and os.cpu_count(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
            "device": str(jax.devices()[0]),
        },
        "workload": source,
        "quick": QUICK if args.quick else None,
        "methods": {},
        "scaling": [],
    }
    for name, (method, compile_s) in methods.items():
        r = measure(method, adapt_params(method, params), cams, config, repeat,
                    with_dense=not args.quick)  # fmt: skip
        r["spec_compile_s"] = compile_s
        results["methods"][name] = r
        print(
            f"[done] {name}: forward {r['forward_s']:.3f} s, fwd+bwd "
            f"{r['forward_backward_s']:.3f} s",
            file=sys.stderr,
        )
    base = results["methods"].get("handwritten")
    rows = []
    gs = results["methods"].get("3dgs")
    for name, r in results["methods"].items():
        dense = r["dense_forward_s"]
        r["forward_vs_dense"] = r["forward_s"] / dense if dense else None
        r["fwdbwd_vs_forward"] = r["forward_backward_s"] / r["forward_s"]
        r["fwdbwd_vs_3dgs"] = r["forward_backward_s"] / gs["forward_backward_s"] if gs else None
        r["forward_vs_handwritten"] = r["forward_s"] / base["forward_s"] if base else None
        r["fwdbwd_vs_handwritten"] = (
            r["forward_backward_s"] / base["forward_backward_s"] if base else None
        )
        rows.append(dict(r, name=name))

    def opt(x, f):
        return "-" if x is None else f.format(x)

    table = fmt_table(
        rows,
        [
            ("method", lambda r: r["name"]),
            ("N", lambda r: f"{r['primitives']:,}"),
            ("image", lambda r: f"{r['width']}x{r['height']}"),
            ("spec compile s", lambda r: opt(r["spec_compile_s"], "{:.2f}")),
            (
                "XLA compile s (fwd/grad)",
                lambda r: f"{r['xla_compile_fwd_s']:.1f}/{r['xla_compile_grad_s']:.1f}",
            ),
            (
                "count pass s (% of fwd)",
                lambda r: f"{r['count_s']:.3f} ({100 * r['count_s'] / r['forward_s']:.1f}%)",
            ),
            (
                "entries needed / capacity",
                lambda r: f"{r['entries_needed']:,} / {r['entry_capacity']:,}",
            ),
            ("forward s/cam", lambda r: f"{r['forward_s']:.3f}"),
            ("dense s/cam", lambda r: opt(r["dense_forward_s"], "{:.3f}")),
            ("fwd / dense", lambda r: opt(r["forward_vs_dense"], "{:.2f}x")),
            ("fwd+bwd s/cam", lambda r: f"{r['forward_backward_s']:.3f}"),
            ("fwd+bwd / fwd", lambda r: f"{r['fwdbwd_vs_forward']:.2f}x"),
            ("fwd+bwd / 3DGS", lambda r: opt(r["fwdbwd_vs_3dgs"], "{:.2f}x")),
            (
                "vs hand-written (fwd/fwd+bwd)",
                lambda r: (
                    opt(r["forward_vs_handwritten"], "{:.2f}x")
                    + " / "
                    + opt(r["fwdbwd_vs_handwritten"], "{:.2f}x")
                ),
            ),
            (
                "XLA peak MiB (fwd/fwd+bwd)",
                lambda r: f"{r['peak_forward_mib']:.0f}/{r['peak_forward_backward_mib']:.0f}",
            ),
            (
                "entries/tile mean (max)",
                lambda r: f"{r['entries_per_tile_mean']:.0f} ({r['entries_per_tile_max']})",
            ),
            ("dropped", lambda r: str(r["dropped"])),
        ],
    )
    print(f"\n## Methods on the {source} workload ({len(cams)} camera(s))\n")
    print(table)

    if args.quick and not args.no_scaling:
        print("\n(--quick: no scaling sweep)", file=sys.stderr)
    if not args.no_scaling and not args.quick and "3dgs" in methods:
        nums, scales = (10_000, 30_000, 100_000), (0.5, 1.0)
        method = methods["3dgs"][0]
        for num in nums:
            for scale in scales:
                p, c, _ = workload(num, scale, args.quick)
                r = measure(method, p, c[:1], config, repeat)
                results["scaling"].append(r)
        print("\n## Scaling (specs/3dgs.xpr, first camera)\n")
        print(
            fmt_table(
                results["scaling"],
                [
                    ("N", lambda r: f"{r['primitives']:,}"),
                    ("image", lambda r: f"{r['width']}x{r['height']}"),
                    ("forward s", lambda r: f"{r['forward_s']:.3f}"),
                    ("fwd+bwd s", lambda r: f"{r['forward_backward_s']:.3f}"),
                    (
                        "XLA peak MiB (fwd/fwd+bwd)",
                        lambda r: (
                            f"{r['peak_forward_mib']:.0f}/{r['peak_forward_backward_mib']:.0f}"
                        ),
                    ),
                    ("entries/tile mean", lambda r: f"{r['entries_per_tile_mean']:.0f}"),
                    ("dropped", lambda r: str(r["dropped"])),
                ],
            )
        )
    if not args.no_training:
        results["training"] = train_benchmark(methods, args.quick)
        print(f"\n## Training on the demo scene ({results['training'][0]['budget']})\n")
        print(
            fmt_table(
                results["training"],
                [
                    ("method", lambda r: r["name"]),
                    ("steps/s", lambda r: f"{r['steps_per_second']:.2f}"),
                    (
                        "test PSNR start -> end (dB)",
                        lambda r: f"{r['initial_psnr']:.2f} -> {r['psnr']:.2f}",
                    ),
                    ("test SSIM", lambda r: f"{r['ssim']:.3f}"),
                    ("primitives", lambda r: str(r["primitives"])),
                ],
            )
        )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    results["process_peak_rss_mib"] = usage.ru_maxrss / 1024
    # wall time depends on what else the machine runs; CPU time much less (compiles use one core)
    results["wall_s"] = time.perf_counter() - t_start
    results["cpu_s"] = usage.ru_utime + usage.ru_stime
    rss, wall, cpu = results["process_peak_rss_mib"], results["wall_s"], results["cpu_s"]
    results["load_average"] = [load_start, load_average()]
    load = "load average {} at the start, {} at the end".format(
        *("unknown" if x is None else f"{x:.1f}" for x in results["load_average"])
    )
    note = f"{'--quick ' if args.quick else ''}run: {wall:.0f} s wall, {cpu:.0f} s CPU ({load}); "
    return write_json(args.out, results, f"{note}process peak RSS {rss:.0f} MiB; ")


if __name__ == "__main__":
    main()
