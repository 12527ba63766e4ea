"""Cameras: the `Camera` pytree (camera.py) and one module per lens model (pinhole.py, opencv.py,
fisheye.py, ortho.py; models.py maps each model name to its module, lens.py says what a model
module provides)."""

from .camera import Camera, CameraError, look_at
from .models import MODELS

__all__ = ["Camera", "CameraError", "MODELS", "look_at"]
