"""The shared, method-agnostic rendering pipeline: project -> bin -> sort -> composite."""

from .config import MODES, RenderConfig, entry_bucket
from .render import RenderOutput, render, warn_if_dropped

__all__ = ["MODES", "RenderConfig", "entry_bucket", "RenderOutput", "render", "warn_if_dropped"]
