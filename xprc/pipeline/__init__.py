"""The shared, method-agnostic rendering pipeline: project -> bin -> sort -> composite."""

from .capacity import count_entries, default_memory_budget
from .config import MODES, RenderConfig, entry_bucket
from .render import RenderOutput, fit_config, render, sized_config, warn_if_dropped

__all__ = [
    "MODES",
    "RenderConfig",
    "RenderOutput",
    "count_entries",
    "default_memory_budget",
    "entry_bucket",
    "fit_config",
    "render",
    "sized_config",
    "warn_if_dropped",
]
