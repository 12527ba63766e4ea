"""xprc: a compiler and renderer for point-based differentiable rendering.

Write a primitive as a declarative `.xpr` spec, compile it to a readable JAX module, and render,
differentiate and train it with one shared, statically shaped pipeline.

    import xprc
    method = xprc.load("specs/3dgs.xpr")
    out = xprc.render(method, params, xprc.Camera(viewmat=..., K=..., width=W, height=H))
"""

from .camera import Camera
from .errors import DataError, XprError
from .pipeline import RenderConfig, RenderOutput, render

__version__ = "0.1.0"

__all__ = [
    "Camera",
    "DataError",
    "RenderConfig",
    "RenderOutput",
    "XprError",
    "compile_file",
    "load",
    "render",
]


def compile_file(path, out=None, defines=None):
    """Compile the spec at `path` to a JAX module (see `xprc.compiler.driver.compile_file`)."""
    from .compiler.driver import compile_file as _compile_file

    return _compile_file(path, out=out, defines=defines)


def load(path, defines=None):
    """Compile the spec at `path` (cached by content and compiler version) and import it."""
    from .compiler.driver import load as _load

    return _load(path, defines=defines)
