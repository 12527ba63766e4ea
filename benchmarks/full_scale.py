"""Training at full scale on the generated capture (issue 39): steps/s, memory, compiles,
checkpoint and PLY, on one device, through `xprc.train` as a user calls it.

    python benchmarks/full_scale.py --capture DIR --jobs 12                    # all phases
    python benchmarks/full_scale.py --capture DIR --phases stages,mcmc --prims 1000000
    python benchmarks/full_scale.py --quick          # a small capture: a smoke run (CPU)

Phases (each appends to the JSON as it ends, a training run also every 10 steps, so a run cut
short keeps what it measured):
  capture  write the capture (`xprc capture`'s generator) or reuse the one in DIR; its seconds.
  stages   one training view at --prims primitives (the sparse points replicated with jitter):
           count, projection, binning + sort, forward, forward + backward (benchmarks/stages.py).
  mcmc     MCMC at capacity --prims, started full (--prims primitives from the first step):
           steps/s over a window at the start and at the end, the device-only rate of the same
           compiled step (no host read per step), peak device memory, compiles, the seconds and
           MB of the checkpoint and the PLY, and a resume that continues the run.
  adc      ADC from the capture's sparse points, or from --adc-init primitives replicated from
           them (capacity --adc-capacity), densifying every --refine-every steps from
           --refine-from: primitives over time, windows, compiles.
  mcmc3m   MCMC at capacity --big, started full: does it fit, steps/s, peak memory.
  memory   the MCMC training step at capacity --prims on --views views of --size, compiled for
           abstract inputs and not run (no capture needed): XLA's memory analysis (arguments,
           temporaries, outputs) beside xprc's estimate (benchmarks/step_memory.py); with
           --tpu-aot compiled for a TPU v5e from this machine (needs the libtpu package).

    python benchmarks/full_scale.py --phases memory --prims 3000000            # on a CPU

The 30k-step time is extrapolated from the end window's rate (compiles and evaluations not
counted). Writes benchmarks/results/full_scale.json (--out).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run import SPECS, machine, write_json  # noqa: E402
from benchmarks.stages import measure  # noqa: E402
from xprc.compiler.driver import load  # noqa: E402
from xprc.data.capture import CaptureParams, generate_capture  # noqa: E402
from xprc.data.scene_folder import load_scene  # noqa: E402
from xprc.pipeline import gather  # noqa: E402
from xprc.train import TRACE_COUNT, init_params, nn_distance, train  # noqa: E402
from xprc.train import checkpoint as ckpt_module  # noqa: E402
from xprc.train import outputs as outputs_module  # noqa: E402
from xprc.train.config import preset  # noqa: E402


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def memory() -> dict:
    """The device's bytes in use and peak (None where the backend reports none: a CPU)."""
    stats = jax.devices()[0].memory_stats() or {}
    return {"in_use_gb": _gb(stats.get("bytes_in_use")),
            "peak_gb": _gb(stats.get("peak_bytes_in_use")),
            "limit_gb": _gb(stats.get("bytes_limit"))}  # fmt: skip


def _gb(n):
    return None if n is None else round(n / 1e9, 3)


def densified(dataset, n: int, seed: int = 0):
    """`dataset` with its sparse points replicated to `n` (each copy jittered by half its
    nearest-neighbour distance): a run that starts with n primitives."""
    pts = np.asarray(dataset.points, np.float64)
    cols = np.asarray(dataset.colors, np.float32)
    rng = np.random.default_rng(seed)
    pick = np.concatenate([np.arange(len(pts)), rng.integers(0, len(pts), max(n - len(pts), 0))])
    pick = pick[:n]
    nn = nn_distance(pts.astype(np.float32), lambda _m: None)[pick]
    jitter = rng.normal(size=(n, 3)) * 0.5 * nn[:, None]
    jitter[: min(n, len(pts))] = 0.0  # the points themselves, then jittered copies
    return dataclasses.replace(dataset, points=(pts[pick] + jitter).astype(np.float32),
                               colors=cols[pick])  # fmt: skip


class Timed:
    """Wraps a module function, recording each call's seconds (the checkpoint and PLY writers)."""

    def __init__(self, module, name: str) -> None:
        self.module, self.name, self.calls = module, name, []
        self.inner = getattr(module, name)

    def __enter__(self):
        def wrapped(*args, **kw):
            t0 = time.perf_counter()
            try:
                return self.inner(*args, **kw)
            finally:
                self.calls.append(time.perf_counter() - t0)

        setattr(self.module, self.name, wrapped)
        return self

    def __exit__(self, *exc):
        setattr(self.module, self.name, self.inner)


class Clock:
    """The trainer's callback: each step's end time and primitive count (no device read: the
    trainer already reads the step's numbers). Every 10 steps a line with the rate over those
    steps, and `partial` (if given) gets the row so far: a run cut short by a device call's time
    limit keeps what it measured."""

    def __init__(self, partial=None) -> None:
        self.marks: list[tuple[int, float, int]] = []
        self.partial = partial

    def __call__(self, step: int, info) -> None:
        self.marks.append((step, time.perf_counter(), int(info["live"])))
        if step % 10 == 0:
            rate = self.window(step - 10, step)
            per_s = f", {rate['steps_per_s']} steps/s over the last 10" if rate else ""
            _say(f"[step {step}] {int(info['live']):,} primitives{per_s}")
            if self.partial is not None:
                self.partial(self.so_far())

    def summary(self) -> dict:
        """Steps, the rate over a window after the first compiles and over one at the end (a
        third of the run, at most 50 steps), and the primitives at about 20 steps."""
        first, last = self.marks[0][0], self.marks[-1][0]
        w = max(min(50, (last - first) // 3), 1)
        return {"steps": [first, last],
                "window_start": self.window(first + 2, first + 2 + w),
                "window_end": self.window(last - w, last),
                "primitives_over_time": self.curve(max((last - first) // 20, 1))}  # fmt: skip

    def so_far(self) -> dict:
        """The run's numbers up to its last step (for a row written before it ends)."""
        first, last = self.marks[0][0], self.marks[-1][0]
        return {"partial": f"steps {first}-{last} (the run had not ended)", **self.summary()}

    def window(self, first: int, last: int) -> dict | None:
        """steps/s from the end of step `first` to the end of step `last`."""
        by = {s: (t, n) for s, t, n in self.marks}
        if first not in by or last not in by or last <= first:
            return None
        (t0, n0), (t1, n1) = by[first], by[last]
        return {"steps": f"{first}-{last}", "steps_per_s": round((last - first) / (t1 - t0), 3),
                "primitives": [n0, n1]}  # fmt: skip

    def curve(self, every: int) -> list:
        return [[s, n] for s, _t, n in self.marks if s % every == 0 or s == self.marks[-1][0]]


class CompileLog(list):
    """Seconds of each XLA backend compile, in order; `names` the compiled functions'."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def slowest(self, since: int, most: int = 8) -> list:
        """[name, seconds] of the `most` slowest compiles from the `since`-th on."""
        rows = sorted(zip(self.names[since:], self[since:], strict=True), key=lambda r: -r[1])
        return [[name, round(s, 1)] for name, s in rows[:most]]


def compile_counter() -> CompileLog:
    """A list that grows by one per XLA backend compile (jax.monitoring's event)."""
    seen = CompileLog()

    def listen(event: str, seconds: float, **kw) -> None:
        if "backend_compile" in event:
            seen.append(seconds)
            seen.names.append(str(kw.get("fun_name", "?")))

    jax.monitoring.register_event_duration_secs_listener(listen)
    return seen


def run_training(method, train_set, test_set, config, out: Path, compiles: list, label: str,
                 resume: bool = False, partial=None) -> dict:  # fmt: skip
    clock = Clock(partial)
    before = (len(compiles), sum(compiles), dict(TRACE_COUNT))
    t0 = time.perf_counter()
    with Timed(ckpt_module, "save") as saves, Timed(outputs_module, "_write_ply") as plys:
        try:
            result = train(method, train_set, test_set, out, config, callback=clock,
                           resume=resume)  # fmt: skip
        except Exception as err:  # an out-of-memory is a result here, not a crash
            _say(f"[{label}] failed: {type(err).__name__}: {str(err)[:500]}")
            row = {"error": f"{type(err).__name__}: {str(err)[:2000]}", "memory": memory()}
            return {**(clock.so_far() if clock.marks else {}), **row}  # what it measured
    wall = time.perf_counter() - t0
    row = {
        "wall_s": round(wall, 1),
        "steps_per_s_trainer": result.steps_per_second,
        **clock.summary(),
        "final": {k: result.metrics.get(k) for k in ("psnr", "ssim", "primitives")},
        "entry_capacity": result.entry_capacity,
        "xla_compiles": len(compiles) - before[0],
        "xla_compile_s": round(sum(compiles) - before[1], 1),
        "slowest_compiles": compiles.slowest(before[0]),
        "step_traces": TRACE_COUNT["train_step"] - before[2]["train_step"],
        "eval_traces": TRACE_COUNT["eval"] - before[2]["eval"],
        "checkpoint_s": [round(s, 2) for s in saves.calls],
        "ply_s": [round(s, 2) for s in plys.calls],
        "memory": memory(),
    }
    for name in ("checkpoint.npz", "scene.ply", "scene.splat"):
        if (out / name).exists():
            row[f"{name}_mb"] = round((out / name).stat().st_size / 1e6, 1)
    end = (row["window_end"] or {}).get("steps_per_s")
    if end:
        row["extrapolated_30k_min"] = round(30_000 / end / 60, 1)
    _say(f"[{label}] {json.dumps(row)[:1500]}")
    return row


def device_only_rate(method, train_set, test_set, config, steps: int = 20) -> dict:
    """The trainer's compiled step run back to back without reading anything on the host: what
    the device alone sustains (the trainer reads each step's numbers: the gap is the host's)."""
    from xprc.train.loop import Run
    from xprc.train.step import step_fn

    run = Run(method, train_set, test_set, None, config, 1)
    fn = step_fn(run.step_key())
    state = run.state
    views = [run.order.views(i, 1) for i in range(steps + 1)]
    state, _ = fn(state, run.data, run.hyper, views[0])
    jax.block_until_ready(state)
    t0 = time.perf_counter()
    for i in range(steps):
        state, _ = fn(state, run.data, run.hyper, views[i + 1])
    jax.block_until_ready(state)
    return {"steps": steps, "steps_per_s": round(steps / (time.perf_counter() - t0), 3)}


def memory_phase(args, width: int, height: int) -> dict:
    """The step's memory at capacity --prims (benchmarks/step_memory.py), printed and returned."""
    from benchmarks import step_memory

    method = load(ROOT / SPECS[args.spec])
    train_views = args.views - len(range(0, args.views, 8))  # every 8th held out for testing
    row = step_memory.analyse(method, args.prims, step_memory.entries_for(args.prims),
                              (width, height), train_views, tpu=args.tpu_aot)  # fmt: skip
    print(step_memory.report(row), flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", default=None, help="the capture's folder (made if missing)")
    ap.add_argument("--phases", default="capture,stages,mcmc,adc,mcmc3m")
    ap.add_argument("--views", type=int, default=150)
    ap.add_argument("--size", default="1296x840")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--images", default="images_4")
    ap.add_argument("--spec", default="3dgs")
    ap.add_argument("--prims", type=int, default=1_000_000)
    ap.add_argument("--big", type=int, default=3_000_000)
    ap.add_argument("--steps", type=int, default=200, help="steps of each MCMC run")
    ap.add_argument("--adc-steps", type=int, default=400)
    ap.add_argument("--adc-capacity", type=int, default=2_000_000)
    ap.add_argument("--adc-init", type=int, default=0,
                    help="ADC starts from this many primitives (the sparse points replicated "
                         "as for MCMC) rather than the sparse points: its steps/s at scale "
                         "within one device call")  # fmt: skip
    ap.add_argument("--refine-from", type=int, default=100)
    ap.add_argument("--refine-every", type=int, default=50)
    ap.add_argument(
        "--transpose",
        choices=gather.TRANSPOSES,
        default=gather.TRANSPOSE,
        help="the row gather's transpose in the backward (xprc/pipeline/gather.py)",
    )
    ap.add_argument("--quick", action="store_true", help="a small capture and counts (CPU smoke)")
    ap.add_argument(
        "--tpu-aot",
        action="store_true",
        help="memory phase: compile for a TPU v5e ahead of time (needs libtpu)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "full_scale.json"))
    args = ap.parse_args(argv)
    gather.TRANSPOSE = args.transpose  # read when a step is traced: before any is
    if args.quick:
        args.views, args.size, args.prims, args.big = 16, "96x64", 4000, 8000
        args.steps, args.adc_steps, args.adc_capacity = 12, 12, 8000
        args.refine_from, args.refine_every = 4, 4
    if not 0 <= args.adc_init <= args.adc_capacity:
        ap.error(f"--adc-init {args.adc_init} must be in 0 .. --adc-capacity "
                 f"({args.adc_capacity}): ADC would start full and never densify")  # fmt: skip
    width, height = (int(v) for v in args.size.split("x"))
    capture = Path(args.capture or tempfile.mkdtemp(prefix="xprc-capture-")) / "capture"
    phases = args.phases.split(",")
    results = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    results.update({"machine": machine(), "args": vars(args)})
    results.setdefault("phases", {})

    def done(name, row):
        results["phases"][name] = row
        write_json(args.out, results, f"({name}) ")

    if "memory" in phases:
        done(f"memory_{args.prims}", memory_phase(args, width, height))
        if phases == ["memory"]:
            return results
    compiles = compile_counter()
    params = CaptureParams(views=args.views, size=(width, height),
                           points=min(150_000, args.prims))  # fmt: skip
    t0 = time.perf_counter()
    info = generate_capture(capture, params, jobs=args.jobs, log=_say)
    if "capture" in phases:
        kept = {k: info.get(k) for k in ("views", "size", "points", "cached")}
        done("capture", {"seconds": round(time.perf_counter() - t0, 1), **kept})
    t0 = time.perf_counter()
    train_set, test_set = load_scene(capture, test_every=8, images=args.images)
    v = train_set.views[0].image.shape
    results["data"] = {
        "load_s": round(time.perf_counter() - t0, 1),
        "train_views": len(train_set.views),
        "test_views": len(test_set.views),
        "image": f"{v[1]}x{v[0]}",
        "sparse_points": len(train_set.points),
    }
    _say(f"[data] {results['data']}")
    method = load(ROOT / SPECS[args.spec])
    full = densified(train_set, args.prims)
    base = dict(progress=False, save_renders=False, eval_every=0, checkpoint_every=0,
                log_every=10)  # fmt: skip

    if "stages" in phases:
        p, _used = init_params(method, full, preset("3dgs-30k", capacity=args.prims))
        cam = train_set.views[0].camera()
        comp = "pallas" if jax.default_backend() == "tpu" else "xla"
        row = measure(method, p, [cam], comp, 3, dense=False)
        seconds = ("compile", "trace_lower")  # kept in s; the stage times in ms
        row = {k: (round(v * 1e3, 2) if k.endswith("_s") and not k.startswith(seconds) and v
                   else v) for k, v in row.items()}  # fmt: skip
        done(
            "stages",
            {
                "primitives": args.prims,
                "ms_or_s": "*_s in ms, compile_* and trace_lower_* in s",
                **row,
            },
        )

    if "mcmc" in phases:
        out = Path(tempfile.mkdtemp(prefix="xprc-mcmc-"))
        cfg = preset("3dgs-30k", steps=args.steps, strategy="mcmc", capacity=args.prims, **base)
        row = run_training(method, full, test_set, cfg, out, compiles, "mcmc",
                           partial=functools.partial(done, f"mcmc_{args.prims}"))  # fmt: skip
        done(f"mcmc_{args.prims}", row)  # kept if the legs below are cut short
        if "error" not in row:
            more = dataclasses.replace(cfg, steps=args.steps + 20)
            res = run_training(method, full, test_set, more, out, compiles, "resume", True)
            row["resume"] = {k: res.get(k) for k in ("steps", "wall_s", "steps_per_s_trainer",
                             "window_end", "final", "xla_compiles", "xla_compile_s",
                             "slowest_compiles", "step_traces", "memory", "error")}  # fmt: skip
            row["device_only"] = device_only_rate(method, full, test_set, cfg)
        done(f"mcmc_{args.prims}", row)

    if "adc" in phases:
        out = Path(tempfile.mkdtemp(prefix="xprc-adc-"))
        start = densified(train_set, args.adc_init) if args.adc_init else train_set
        cfg = preset("3dgs-30k", steps=args.adc_steps, strategy="adc",
                     capacity=args.adc_capacity, refine_from=args.refine_from,
                     refine_every=args.refine_every, refine_until=args.adc_steps,
                     reset_every=0, **base)  # fmt: skip
        name = f"adc_from_{args.adc_init or 'sparse'}"  # another start: another row
        row = run_training(method, start, test_set, cfg, out, compiles, "adc",
                           partial=functools.partial(done, name))  # fmt: skip
        done(name, {"start_primitives": len(start.points), "capacity": args.adc_capacity, **row})

    if "mcmc3m" in phases:
        out = Path(tempfile.mkdtemp(prefix="xprc-big-"))
        cfg = preset("3dgs-30k", steps=max(args.steps // 4, 8), strategy="mcmc",
                     capacity=args.big, **base)  # fmt: skip
        big = densified(train_set, args.big)
        done(f"mcmc_{args.big}", run_training(method, big, test_set, cfg, out, compiles, "big"))
    return results


if __name__ == "__main__":
    main()
