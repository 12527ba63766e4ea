"""The trainer: fits any method module (a compiled spec) to a multi-view dataset.

It knows no method by name: everything comes from the method's `PARAMS` table
(`ParamSpec(name, kind, shape, activation, degree, lr, init, role)`), and the roles a strategy
needs (`position`, `opacity`, `scale`) only from the spec's `role` annotations. See
docs/training.md.

Modules, one job each:
  config      TrainConfig, TrainResult, TrainError
  roles       roles and activations from the spec (located errors)
  init        initial parameters from the dataset's points
  data        stacked views, background, view order
  optim       Adam, learning rates, SH schedule
  strategies  densification: the interface (base), mcmc, adc; their names (STRATEGIES)
  camera_opt  pose and intrinsics refinement
  step        the jitted train step and evaluation
  checkpoint  save / load the train state (checked: a malformed one is a located error)
  health      divergence: a non-finite loss or parameter stops the run
  folder      the run folder: its layout (read by xprc.trained too), checked, locked,
              train.log, writes that fail cleanly
  outputs     the run folder's reports
  run         Run: one run's state between steps (steps queued, redone, evaluated, saved)
  loop        train()
  demo        demo()
"""

from .config import TrainConfig, TrainError, TrainResult
from .demo import default_spec_path, demo
from .init import SH_C0, init_params, nn_distance, scene_scale
from .loop import train
from .roles import param_roles
from .signals import StopSignal
from .step import TRACE_COUNT
from .strategies import STRATEGIES

__all__ = [
    "SH_C0",
    "STRATEGIES",
    "StopSignal",
    "TRACE_COUNT",
    "TrainConfig",
    "TrainError",
    "TrainResult",
    "default_spec_path",
    "demo",
    "init_params",
    "nn_distance",
    "param_roles",
    "scene_scale",
    "train",
]
