"""The camera models: model name -> the module that implements it (see lens.py)."""

from __future__ import annotations

from ..conventions import CAMERA_MODELS
from . import fisheye, opencv, ortho, pinhole

LENSES = {"pinhole": pinhole, "opencv": opencv, "fisheye": fisheye, "ortho": ortho}
MODELS = CAMERA_MODELS
if tuple(LENSES) != MODELS:  # the vocabulary lists the models; this table implements them
    raise ImportError(f"camera models {tuple(LENSES)} differ from the vocabulary's {MODELS}")
