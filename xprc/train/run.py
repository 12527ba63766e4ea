"""`Run`: one training run's state between steps, on the host side of `train()`.

It builds the run from the dataset (views stacked on the device, hyper-parameters, initial
parameters, the render capacity), takes the steps (`advance`: the next one queued before the
current one's numbers are read; a step that dropped entries redone with a larger capacity),
evaluates, checkpoints and resumes. `xprc.train.loop` drives it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..method_info import MethodInfo
from ..pipeline import RenderConfig, entry_bucket
from ..pipeline.binning import TileGrid
from ..pipeline.capacity import MemoryBudgetError, check_memory
from ..pipeline.config import KERNEL_CHUNK, XLA_CHUNK
from ..pipeline.render import xla_instead
from ..runtime import check_views_camera
from . import checkpoint as ckpt
from . import folder as run_folder
from . import health, losses_2dgs
from .appearance import appearance_note, appearance_optimizer, init_appearance
from .camera_opt import corrections_optimizer, init_corrections, pivot_depths
from .config import (
    TRAINER_SET,
    TrainConfig,
    TrainError,
    method_lrs,
    schedule_note,
)
from .data import (
    ViewOrder,
    check_image_memory,
    infer_background,
    stack_images,
    stack_views,
)
from .init import (
    camera_poses,
    check_capacity_memory,
    init_params,
    look_target,
    numbers_text,
    scene_scale,
    views_of,
)
from .optim import lr_arrays, optimizer
from .outputs import view_names
from .reports import StepReports
from .step import StepKey, eval_fn, eval_metrics, step_fn
from .step_memory import check_step_memory
from .strategies.make import make_strategy

GROWTH = 1.25  # a raised capacity bucket leaves this much headroom over the entries needed


@dataclasses.dataclass
class Capacity:
    """The render capacity bucket of the step (or the evaluation) and its growth record."""

    base: RenderConfig
    bucket: int
    method: object = None  # with `grid`: the memory budget check of a raised bucket
    grid: TileGrid | None = None
    raises: list = dataclasses.field(default_factory=list)
    log: Callable = print  # the run's TrainLog
    step_check: Callable | None = None  # bucket -> the training step's memory check (or None)

    def config(self) -> RenderConfig:
        return dataclasses.replace(self.base, max_entries=self.bucket, on_overflow="ignore")

    def grow(self, needed: int, step: int, what: str) -> None:
        new = entry_bucket(int(needed * GROWTH))
        if new <= self.bucket:  # a saturated count: at least double
            new = entry_bucket(2 * self.bucket)
        if self.grid is not None:
            try:
                check_memory(new, needed, self.method, self.grid, self.base)
            except MemoryBudgetError as e:
                raise TrainError(
                    f"{what} step {step} needs {needed:,} (primitive, tile) entries, over the "
                    f"capacity bucket {self.bucket:,}; raising it to {new:,} does not fit: {e}"
                ) from None
        if self.step_check is not None:
            try:
                self.step_check(new)
            except TrainError as e:
                raise TrainError(
                    f"{what} step {step} needs {needed:,} (primitive, tile) entries, over the "
                    f"capacity bucket {self.bucket:,}; with {new:,}, {e.message}"
                ) from None
        self.bucket = new
        self.raises.append({"step": step, "what": what, "needed": needed, "capacity": new})
        self.log(f"entry capacity raised to {new} ({what} step {step} needed {needed})")


def _initial_bucket(method, params, cameras, base: RenderConfig) -> int:
    """The bucket above GROWTH x the entries the cameras need (exact count, checked against
    the memory budget), or the config's own capacity when it sets one."""
    if base.max_entries is not None:
        return int(base.max_entries)
    from ..pipeline import sized_config

    return int(sized_config(method, params, cameras, base, margin=GROWTH).max_entries)


def _capacity(method, params, cameras, base: RenderConfig, log) -> Capacity:
    grid = TileGrid(int(cameras.width), int(cameras.height), base.tile_size)
    return Capacity(base, _initial_bucket(method, params, cameras, base), method, grid, log=log)


def _pivots(train_set, views) -> np.ndarray:
    """The depth each training view's pose correction rotates about (camera_opt.pose_delta)."""
    centres, forwards = camera_poses(views)
    target = look_target(centres, forwards)
    viewmats = np.stack([np.asarray(v.viewmat, np.float64) for v in views])
    return pivot_depths(viewmats, getattr(train_set, "points", None), target)


def _hyper(method, config: TrainConfig, strategy, scale: float, background, log) -> dict:
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return {
        "lrs": lr_arrays(method, config, log),
        "scene_scale": f32(scale),
        "position_lr_final": f32(config.position_lr_final),
        "total_steps": f32(max(config.steps, 1)),
        "sh_interval": jnp.asarray(config.sh_degree_interval, jnp.int32),
        "ssim_weight": f32(config.ssim_weight),
        "background": f32(background),
        "pose_lr": f32(config.pose_lr),
        "pose_lr_final": f32(config.pose_lr_final),
        "intrinsics_lr": f32(config.intrinsics_lr),
        "appearance_lr": f32(config.appearance_lr),
        "appearance_lr_final": f32(config.appearance_lr_final),
        **strategy.hyper(config),
        **losses_2dgs.hyper(config),
    }


class Run:
    """The state of one training run between steps (host side)."""

    def __init__(
        self, method, train_set, test_set, out_dir, config: TrainConfig, devices: int, log=None
    ):
        self.log = log or run_folder.TrainLog(None, config.progress)
        if devices < 1 or devices > jax.device_count():
            raise TrainError(f"asked for {devices} devices, {jax.device_count()} available")
        self.info = info = MethodInfo.of(method)
        if info.num_features != 3:
            raise TrainError(
                f"{info.name} renders {info.num_features} channels; training needs RGB (3)"
            )
        self.method, self.config, self.devices = method, config, devices
        self.out = Path(out_dir) if out_dir is not None else None
        self.strategy = make_strategy(config.strategy, method)
        config.regularised(method)  # regularisers "on" without the outputs stops here
        method_lrs(method, config)  # so does an `lr` naming no parameter
        train_views = views_of(train_set)
        self.data_source = getattr(train_set, "source", None)  # recorded in config.json
        points = getattr(train_set, "points", None)
        self.points, self.names = points, view_names(train_views)  # (the divergence hint)
        self.test_views = views_of(test_set) if test_set is not None else train_views
        check_views_camera(method, train_views, "training")  # before any step is compiled
        check_views_camera(method, self.test_views, "test")
        images = stack_images(train_views, "training"), stack_images(self.test_views, "test")
        check_image_memory([train_views, self.test_views], bool(config.random_background),
                           itemsizes=[a.itemsize for a in images])  # fmt: skip
        self.data = stack_views(train_views, "training", bool(config.random_background), images[0])
        self.test_data = stack_views(self.test_views, "test", images=images[1])
        del images
        note = lambda msg: self.log(msg, always=True)  # noqa: E731 (an assumption: always shown)
        bg = config.background
        if bg is None:
            background = infer_background(train_views, note)
        else:
            background = np.asarray(bg, np.float32)
            self.log(f"background: {numbers_text(background, 4)} (configured)")
        self.scale = scene_scale(train_set, note)
        self.hyper = _hyper(method, config, self.strategy, self.scale, background, note)
        if (said := schedule_note(config)) is not None:
            note(said)
        if config.appearance != "off":
            note(appearance_note(config.appearance, len(train_views)))
        self.hyper["pose_pivot"] = jnp.asarray(_pivots(train_set, train_views))
        n_points = len(points) if points is not None and len(points) else config.num_random_points
        cap = config.capacity or self.strategy.default_capacity(n_points, config)
        if not config.capacity:  # (init_params checks it too, naming the option)
            source = self.strategy.default_capacity_words(n_points, config)
            check_capacity_memory(method, cap, source=f"{source}; --capacity sets another")
        params, used = init_params(method, train_set, config, capacity=cap, log=note)
        cams = self.data["cameras"], self.test_data["cameras"]
        health.check_initial(params, cams[0], self.names, points, self.out)
        self.inputs = ckpt.run_inputs(
            method, train_set, cams[0], self.names, background, train_views
        )
        self.state = self._initial_state(params, used, len(train_views))
        self.capacity = _capacity(method, params, cams[0], config.render, self.log)
        self.capacity.step_check = self._step_memory_check(len(used))
        self.capacity.step_check(self.capacity.bucket)  # before the step is compiled
        self.eval_capacity = _capacity(method, params, cams[1], config.render, self.log)
        self.ran: set = set()  # compiled steps and evaluations that ran: not compile failures
        self.order = ViewOrder(config.seed, len(train_views))
        self.history: list[dict] = []
        self.evals: list[dict] = []
        self.reports = StepReports(self.log, self.strategy, config.strategy, cams[0].model)
        self.elapsed_before = 0.0
        self.interrupted = False
        self.saved_step: int | None = None  # the step of the checkpoint in the run folder
        self.ahead: tuple | None = None  # (key, state, info) of a step queued, not yet read

    def _step_memory_check(self, capacity: int) -> Callable[[int], dict]:
        """entries -> the training step's memory estimate at that entry capacity; a TrainError
        with the numbers when it would not fit the device (`step_memory.check_step_memory`)."""
        cams = self.data["cameras"]
        size = (int(cams.width), int(cams.height))
        arrays = jax.tree_util.tree_leaves((self.data, self.test_data))
        image_bytes = sum(int(a.size) * a.dtype.itemsize for a in arrays)
        return lambda entries: check_step_memory(self.method, capacity, entries, size,
                                                 image_bytes)  # fmt: skip

    def _initial_state(self, params, used, n_views: int) -> dict:
        config = self.config
        params = {k: jnp.asarray(v) for k, v in params.items()}
        position = self.strategy.roles["position"]
        opt = optimizer(self.hyper["lrs"], {position: jnp.float32(1.0)})
        dist = self.data["cameras"].dist.shape[-1]
        cams = init_corrections(n_views, config.pose_opt, config.intrinsics_opt, dist)
        copt = corrections_optimizer(cams, 1.0, 1.0, 1.0)
        app = init_appearance(n_views, config.appearance)
        return {
            "params": params,
            "opt": opt.init(params),
            "step": jnp.asarray(0, jnp.int32),
            "key": jax.random.PRNGKey(config.seed),
            "used": jnp.asarray(used),
            "strategy": self.strategy.init_state(len(used)),
            "cams": cams,
            "cams_opt": copt.init(cams) if cams else {},
            "appearance": app,
            "appearance_opt": appearance_optimizer(app, 1.0).init(app) if app else {},
        }

    @property
    def ckpt_path(self) -> Path | None:
        return None if self.out is None else self.out / run_folder.CHECKPOINT

    @property
    def step(self) -> int:
        return int(self.state["step"])

    def step_key(self) -> StepKey:
        c = self.config
        return StepKey(
            self.method, self.capacity.config(), c.strategy, self.devices, c.pose_opt,
            c.intrinsics_opt, c.regulariser_form(self.method), bool(c.random_background),
            c.appearance,
        )  # fmt: skip

    def meta(self, elapsed: float) -> dict:
        return {
            "method": self.info.name,
            "spec_sha256": self.info.spec_sha256,
            "spec_path": self.info.recorded_spec_path,  # where `xprc render RUN` finds it
            "seed": self.config.seed,
            "strategy": self.config.strategy,
            "steps": self.config.steps,
            "elapsed": elapsed,
            "history": self.history,
            "evals": self.evals,
            "entry_capacity": self.capacity.bucket,
            "eval_entry_capacity": self.eval_capacity.bucket,
            "capacity_raises": self.capacity.raises + self.eval_capacity.raises,
            "densification": self.reports.events,
            "background": [float(c) for c in np.asarray(self.hyper["background"])],
            "config": self.config.trajectory(),
            "inputs": self.inputs,
        }

    def resume(self) -> None:
        path = self.ckpt_path
        if path is None:
            return
        stale = ckpt.remove_stale_tmp(path)
        if stale is not None:
            self.log(f"removed {stale} left by an interrupted checkpoint write")
        if not path.is_file():
            self.log(f"no checkpoint to resume in {path.parent}: a new run", always=True)
            return
        state, meta = ckpt.load(path, self.state)
        mine = (self.info.name, self.config.seed, self.config.strategy)
        theirs = (meta.get("method"), meta.get("seed"), meta.get("strategy"))
        if theirs != mine:
            raise TrainError(
                f"checkpoint is for method {theirs[0]!r} seed {theirs[1]} strategy "
                f"{theirs[2]!r}, this run is {mine[0]!r} seed {mine[1]} strategy {mine[2]!r}",
                path,
            )
        self._check_same_options(meta, path)
        self.state = state
        self.history = list(meta.get("history", []))
        self.evals = list(meta.get("evals", []))
        self.elapsed_before = float(meta.get("elapsed", 0.0))
        self.capacity.bucket = int(meta.get("entry_capacity", self.capacity.bucket))
        self.eval_capacity.bucket = int(meta.get("eval_entry_capacity", self.eval_capacity.bucket))
        self.reports.events.update(meta.get("densification", {}))
        self.saved_step = self.step
        self.log(
            f"resuming from {path} at step {self.step} (its parameters replace the "
            "initial ones above)",
            always=True,
        )

    def _check_same_options(self, meta: dict, path: Path) -> None:
        """A resumed run continues the checkpoint's exactly only with the same options and
        inputs (spec, constants, data, background; `ckpt.run_inputs`): any other difference is a
        located TrainError naming each with both values; a new `steps` is logged (the
        learning-rate and SH schedules then follow the new length)."""
        mine, theirs = self.config.trajectory(), meta.get("config")
        if theirs is None:  # written before checkpoints recorded their options
            self.log(f"{path} does not record its options: assuming this run's", always=True)
            theirs = mine
        theirs = {k: v for k, v in theirs.items() if k not in TRAINER_SET}
        if "inputs" in meta:
            mine, theirs = {**mine, **self.inputs}, {**theirs, **meta["inputs"]}
            from ..trained import earlier_version, legacy_sha  # (trained.py imports this)

            recorded = theirs.get("spec.sha256")
            legacy = recorded and recorded != mine.get("spec.sha256")
            if legacy and recorded == legacy_sha(self.info):
                self.log(f"{path} records the spec's own sha256 (written before xprc hashed the "
                         "base specs it extends): taken as this spec", always=True)  # fmt: skip
                theirs["spec.sha256"] = mine["spec.sha256"]
            elif legacy and (said := earlier_version(recorded, self.info)):
                self.log(f"{path} was trained with {said}: taken as this spec", always=True)
                theirs["spec.sha256"] = mine["spec.sha256"]
            if ckpt.IMAGES_KEY not in meta["inputs"] and ckpt.IMAGES_KEY in mine:
                self.log(f"{path} does not record a digest of its training images (written "
                         "before xprc did): not checked", always=True)  # fmt: skip
                theirs[ckpt.IMAGES_KEY] = mine[ckpt.IMAGES_KEY]
        else:  # written before checkpoints recorded their spec and data
            self.log(f"{path} does not record its spec and data: assuming this run's", always=True)
        if theirs.get("render.chunk") == XLA_CHUNK and mine.get("render.chunk") is None:
            self.log(f"{path} was written when render.chunk defaulted to {XLA_CHUNK}; this run "
                     f"takes the default (None: {XLA_CHUNK} on the XLA path, {KERNEL_CHUNK} in "
                     "the Pallas kernels): the same maths, summed in another order",
                     always=True)  # fmt: skip
            theirs["render.chunk"] = None
        changed = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        if changed:
            said = "; ".join(f"{k}: {theirs.get(k)!r} -> {mine.get(k)!r}" for k in changed)
            if changed == [ckpt.IMAGES_KEY]:
                said += (": the training images' pixels differ from the run's, in the same "
                         "folder with the same cameras (an image changed in place?)")  # fmt: skip
            same = [w for key, words in ckpt.RESUME_HINTS for w in words
                    if any(k.startswith(key) for k in changed)] + ["options"]  # fmt: skip
            same = ", ".join(same[:-1]) + " and " + same[-1] if len(same) > 1 else same[0]
            raise TrainError(
                f"checkpoint was written with other options ({said}); resume with the same "
                f"{same}, or start a new run folder",
                path,
            )
        if meta.get("steps") not in (None, self.config.steps):
            self.log(
                f"resuming a {meta['steps']}-step run as a {self.config.steps}-step run: the "
                "learning-rate and SH schedules follow the new length"
            )

    def replicate(self) -> None:
        """Place state, data and hyper-parameters on the device mesh (devices > 1)."""
        if self.devices > 1:
            from ..distributed import device_mesh, replicate

            mesh = device_mesh(self.devices)
            self.state, self.data, self.hyper = replicate((self.state, self.data, self.hyper), mesh)

    def _switch_to_xla(self, err: Exception, compiled: object) -> bool:
        """Whether `err`, raised by a step or an evaluation, is the Pallas kernels failing to
        compile for this chip under `compositor="auto"` (only the first call of a compiled
        function compiles it: `compiled` is its key): if so, steps and evaluations composite
        with XLA from then on (one warning)."""
        if compiled in self.ran:
            return False
        xla = xla_instead(self.info.name, self.capacity.base, err)
        if xla is None:
            return False
        self.capacity.base = xla
        self.eval_capacity.base = dataclasses.replace(self.eval_capacity.base, compositor="xla")
        return True

    def advance(self) -> dict:
        """One accepted optimisation step; a step whose render dropped entries is redone with
        a larger capacity. Returns the step's info as host numbers.

        The step after it is dispatched, from the state this step made, before this step's
        numbers are read: the device always has the next step queued and never waits for the
        host (no round trip per step). That next step is kept only when this one is accepted;
        after a redo, a divergence or a stop it is dropped, unread, so the run is the same as
        one read step by step (a test checks it), at the cost of one more state in memory."""
        while True:
            key = self.step_key()
            if self.ahead is None or self.ahead[0] != key:
                self.ahead = self._dispatch(key, self.state, self.step)
            key, state, info = self.ahead
            self.ahead = None
            if self.step + 1 < self.config.steps:  # queued now, read at the next call
                self.ahead = self._dispatch(key, state, self.step + 1)
            info = jax.device_get(info)
            if int(info["dropped"]) == 0:
                break
            self.ahead = None
            self.capacity.grow(int(info["entries_needed"]), self.step + 1, "train")
        if health.diverged(info):
            self.ahead = None
            raise health.divergence_error(self.step + 1, info, self.data["cameras"], self.names,
                                          self.points, self._kept(), self.out)  # fmt: skip
        self.state = state
        self.reports.step_done(self.step, info)
        return info

    def _dispatch(self, key: StepKey, state: dict, step: int) -> tuple[StepKey, dict, dict]:
        """Queue training step `step + 1` from `state`: (key, state, info) as device arrays,
        not waited for. The first call of a key compiles it; Pallas failing to compile for this
        chip switches to XLA compositing, and the key returned is the one that ran."""
        view = self.order.views(step, self.devices)
        while True:
            try:
                out = step_fn(key)(state, self.data, self.hyper, view)
            except jax.errors.JaxRuntimeError as err:
                if not self._switch_to_xla(err, key):
                    raise
                key = self.step_key()
                continue
            self.ran.add(key)
            return (key, *out)

    def evaluate(self, elapsed: float, keep_images: bool = False) -> tuple[dict, list]:
        rows, images = [], []
        st = self.state
        names = view_names(self.test_views)
        for i in range(self.test_data["images"].shape[0]):
            while True:
                key = (self.method, self.eval_capacity.config())
                fn = eval_fn(*key)
                try:
                    img, dropped, needed = fn(
                        st["params"], st["step"], self.hyper["sh_interval"],
                        self.hyper["background"], self.test_data["cameras"], np.int32(i),
                    )  # fmt: skip
                except jax.errors.JaxRuntimeError as err:
                    if not self._switch_to_xla(err, key):
                        raise
                    continue
                self.ran.add(key)
                if int(dropped) == 0:
                    break
                self.eval_capacity.grow(int(needed), self.step, "eval")
            p, s = eval_metrics(img, self.test_data["images"], np.int32(i))
            rows.append({"name": names[i], "psnr": float(p), "ssim": float(s)})
            if keep_images:
                images.append(np.asarray(img))
        act = self.method.activate(st["params"])
        live = int(self.strategy.live(act, st["used"], self.hyper))
        rec = {
            "step": self.step,
            "psnr": float(np.mean([r["psnr"] for r in rows])),
            "ssim": float(np.mean([r["ssim"] for r in rows])),
            "time": round(elapsed, 3),
            "primitives": live,
            "per_view": rows,
        }
        return rec, images

    def save(self, elapsed: float) -> None:
        if self.ckpt_path is not None:
            ckpt.save(self.ckpt_path, self.state, self.meta(elapsed))
            self.saved_step = self.step

    def _kept(self) -> str:
        """What the run folder keeps of this run (for an error that stops it)."""
        if self.out is None:
            return "no checkpoint is written"
        if self.saved_step is None:
            return "no checkpoint of this run was written"
        return f"{self.ckpt_path} keeps step {self.saved_step}"
