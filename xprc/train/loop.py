"""`train()`: the training loop. It knows no method by name (see `xprc.train` for the rules).

One accepted step = one call of the jitted step (`xprc.train.step`). A step whose render
dropped (primitive, tile) entries for lack of capacity is discarded, never applied: the capacity
bucket is raised (`entry_bucket` of 1.25 x the entries needed; one compile per bucket), the step
is redone from the same state and "entry capacity raised to N" is logged. The bucket starts from
an exact count on the training cameras and is stored in checkpoints. SIGTERM, SIGHUP and SIGINT
finish the current step, save a checkpoint and return `interrupted=True`. A step that makes the
loss or a parameter non-finite is not applied: the run stops with a TrainError
(`xprc.train.health`). The run folder is prepared, locked and logged by `xprc.train.folder`;
the run's state between steps is `xprc.train.run.Run`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import jax
import numpy as np

from .. import __version__
from ..method_info import MethodInfo
from . import checkpoint as ckpt
from . import folder as run_folder
from .appearance import appearance_matrices
from .config import TrainConfig, TrainResult, as_config
from .data import float_images
from .outputs import RunRecord, write_outputs
from .progress import StepRate, format_rate, progress_bar
from .run import Run
from .signals import StopRequest


def train(
    method,
    train_set,
    test_set=None,
    out_dir=None,
    config: TrainConfig | None = None,
    *,
    resume: bool = False,
    callback: Callable[[int, dict], None] | None = None,
    on_step: Callable[[int, dict], None] | None = None,
    devices: int = 1,
) -> TrainResult:
    """Train `method` (a generated module) on `train_set`; evaluate on `test_set`.

    train_set / test_set: `xprc.data.Dataset` (or anything with `views`, each with `image`
    [H, W, 3] float32, `camera()`, `viewmat`, `alpha`; optional `points`/`colors`). test_set
    None evaluates on the training views. out_dir (None: write nothing) receives metrics.json,
    config.json, curves.png, sheet.png, renders/*.png, checkpoint.npz and, for the 3DGS layout,
    scene.ply and scene.splat, else params.ply (xprc.train.outputs). resume: continue from
    out_dir/checkpoint.npz when it exists (same seed and config give the same result as an
    uninterrupted run).
    callback(step, info): after every step (info: loss, psnr, live, ... as numbers).
    on_step(step, params): after every step, with the raw parameters (device arrays), e.g. for a
    live viewer; it must not modify them.
    SIGTERM, SIGHUP, SIGINT or a KeyboardInterrupt from a callback save a checkpoint and return
    early with `interrupted=True` (`signal`: the signal's name). A stop signal while the final
    outputs are written (a second one, say) stops the writing and raises `StopSignal`.
    devices: train data-parallel on this many devices, one view per device and step (the loss
    is the mean over those views).
    The run folder is created before the first step and locked while the run lasts; train.log
    in it records what the console shows (appended on resume). A run that diverges (a loss or
    parameter that is not finite) or cannot write its files stops with a TrainError.
    """
    config = as_config(config)
    MethodInfo.of(method)  # a spec's name instead of a module: said before a folder is made
    with run_folder.opened(out_dir, config.progress) as log:
        log.file(f"xprc {__version__} train {MethodInfo.of(method).name}"
                 f"{' (resume)' if resume else ''}: {json.dumps(config.to_json())}")  # fmt: skip
        run = Run(method, train_set, test_set, out_dir, config, devices, log)
        log.file(f"inputs: {json.dumps(run.inputs)}")
        if resume:
            run.resume()
        elif run.ckpt_path is not None and ckpt.remove_stale_tmp(run.ckpt_path) is not None:
            log("removed a checkpoint .tmp left by an interrupted write")
        run.replicate()
        if run.step == 0 and not run.evals:
            run.evals.append(run.evaluate(0.0)[0])
            first = run.evals[0]
            log.file(f"step 0: test PSNR {first['psnr']:.2f} SSIM {first['ssim']:.4f}")
        initial_psnr = run.evals[0]["psnr"] if run.evals and run.evals[0]["step"] == 0 else None
        with StopRequest() as stop:
            rate = StepRate()
            elapsed = run.elapsed_before + _loop(run, stop, callback, on_step, rate)
            run.save(elapsed)  # a signal here is only noted: the checkpoint is written whole
            stop.finishing(run.step if run.ckpt_path is not None else None)
            if stop.signal_name is not None:
                run.interrupted = True
                log(f"{stop.signal_name}: stopped at step {run.step}", always=True)
            result = _finish(run, elapsed, rate, initial_psnr)
        result.signal = stop.signal_name
        return result


def _loop(run: Run, stop: StopRequest, callback, on_step, rate: StepRate) -> float:
    """Run the steps; mark each one's end in `rate`. Returns the loop's wall seconds (the
    first step's compile included: `training_seconds`)."""
    config = run.config
    pbar = None
    if config.progress:  # a bar on a terminal, plain lines in a log file
        pbar = progress_bar(config.steps, run.step, f"train {run.info.name}", rate)
    t_run = time.perf_counter()
    try:
        while run.step < config.steps and stop.signal_name is None:
            info = run.advance()
            step = run.step
            rate.mark(step)
            if step % max(config.log_every, 1) == 0 or step == config.steps:
                rec = {"step": step, "loss": float(info["loss"]), "psnr": float(info["psnr"]),
                       "primitives": int(info["live"])}  # fmt: skip
                rec.update({k: float(info[k]) for k in ("distortion", "normal") if k in info})
                run.history.append(rec)
                run.log.file(
                    f"step {step}/{config.steps}: "
                    + ", ".join(f"{k} {v:.6g}" for k, v in rec.items() if k != "step")
                )
                if pbar is not None:
                    pbar.set_postfix(loss=f"{rec['loss']:.4f}", psnr=f"{rec['psnr']:.2f}",
                                     live=rec["primitives"], refresh=False)  # fmt: skip
            if pbar is not None:
                pbar.update(1)
            elapsed = run.elapsed_before + time.perf_counter() - t_run
            if _due(step, config.eval_every, config.steps):
                rec, _ = run.evaluate(elapsed)
                run.evals.append(rec)
                run.log(f"step {step}: test PSNR {rec['psnr']:.2f} SSIM {rec['ssim']:.4f}")
            if _due(step, config.checkpoint_every, config.steps):
                run.save(elapsed)
            if callback is not None:
                callback(step, info)
            if on_step is not None:
                on_step(step, run.state["params"])
    except KeyboardInterrupt:
        run.interrupted = True
    except BaseException:
        if pbar is not None:
            pbar.close()
        raise
    jax.block_until_ready(run.state["params"])
    t_end = time.perf_counter()
    rate.mark(run.step, t_end)  # the last step's end, device work finished
    if pbar is not None:
        pbar.close()  # its last line shows this final rate
    return t_end - t_run


def _due(step: int, every: int, steps: int) -> bool:
    return every > 0 and step % every == 0 and step < steps


def _finish(run: Run, elapsed: float, rate: StepRate, initial_psnr) -> TrainResult:
    config = run.config
    keep = run.out is not None and config.save_renders
    final, images = run.evaluate(elapsed, keep_images=keep)
    if not run.evals or run.evals[-1]["step"] != final["step"]:
        run.evals.append(final)
    else:
        run.evals[-1] = final
    run.reports.finish()
    if run.interrupted:
        where = f"; checkpoint saved to {run.ckpt_path}" if run.ckpt_path is not None else ""
        run.log(f"interrupted at step {run.step}{where}")
    run.log.file(
        f"step {run.step}: final test PSNR {final['psnr']:.4f} SSIM {final['ssim']:.4f}, "
        f"{final['primitives']} primitives, {format_rate(rate.per_second)}, "
        f"{elapsed:.1f} s of training"
    )
    params = {k: np.asarray(v) for k, v in run.state["params"].items()}
    cams = {k: np.asarray(v).tolist() for k, v in run.state["cams"].items()} or None
    if cams is not None and "pose" in cams:  # the depths the rotations turn about
        cams["pose_pivot"] = np.asarray(run.hyper["pose_pivot"]).tolist()
    if run.out is not None:
        record = RunRecord(
            run.method, config, params, np.asarray(run.state["used"]), run.test_views,
            float_images(np.asarray(run.test_data["images"])), images, run.history, run.evals,
            final, rate, elapsed, run.scale, run.interrupted, run.capacity.bucket,
            run.capacity.raises + run.eval_capacity.raises, run.reports.events, cams,
            run.meta(elapsed)["background"], appearance_matrices(run.state["appearance"]),
            run.data_source,
        )  # fmt: skip
        for line in write_outputs(run.out, record):
            run.log(line, always=True)
    return TrainResult(
        params=params,
        step=run.step,
        metrics=final,
        evals=run.evals,
        history=run.history,
        out_dir=run.out,
        interrupted=run.interrupted,
        elapsed=elapsed,
        steps_per_second=rate.per_second,
        initial_psnr=initial_psnr,
        cameras=cams,
        appearance=appearance_matrices(run.state["appearance"]),
        entry_capacity=run.capacity.bucket,
    )
