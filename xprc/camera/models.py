"""The camera models: model name -> the module that implements it (see lens.py)."""

from __future__ import annotations

from . import fisheye, opencv, ortho, pinhole

LENSES = {"pinhole": pinhole, "opencv": opencv, "fisheye": fisheye, "ortho": ortho}
MODELS = tuple(LENSES)
