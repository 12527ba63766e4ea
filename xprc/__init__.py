"""xprc: a compiler and renderer for point-based differentiable rendering.

Write a primitive as a declarative `.xpr` spec, compile it to a readable JAX module, and render,
differentiate and train it with one shared, statically shaped pipeline.

    import xprc
    from xprc.data import load_ply, load_scene

    method = xprc.load("3dgs")                      # a shipped spec by name, or a .xpr path
    params = load_ply("scene.ply")                  # raw 3DGS parameters {name: [N, ...]}
    train, test = load_scene("path/to/dataset")     # Blender or COLMAP
    out = xprc.render(method, params, test[0].camera())
    out.image                                       # [H, W, 3]

Public names: `load`, `compile_file`, `render`, `Camera`, `RenderConfig`, `RenderOutput`,
`fit_config` and `count_entries` (capacity under your own `jax.jit`), `XprError` (every error
xprc raises for a user's mistake) and `DataError` (a malformed file). The README walks through
them; docs/ has the details.
"""

from ._version import __version__ as __version__
from .camera import Camera
from .errors import DataError, XprError
from .pipeline import (
    RenderConfig,
    RenderOutput,
    count_entries,
    fit_config,
    render,
    warn_if_dropped,
)

__all__ = [
    "Camera",
    "DataError",
    "RenderConfig",
    "RenderOutput",
    "XprError",
    "compile_file",
    "count_entries",
    "fit_config",
    "load",
    "render",
    "warn_if_dropped",
]


def load(path, defines=None):
    """Compile a spec (cached) and import it; returns the generated method module.

    path:    a `.xpr` file, or the name of a shipped spec (`"3dgs"`, `"3dgut"`,
             `"linprim_octahedron"`, ...; with or without `.xpr`). A path that exists wins.
    defines: optional {constant: number} overriding the spec's `const` values (as `-D` does on
             the command line).

    The module is what `xprc.render` and the trainer take: its `PARAMS` table names the raw
    parameters a scene needs. It is compiled once per spec text, defines and compiler version
    (cached in $XPRC_CACHE_DIR, default ~/.cache/xprc) and imported once per process. A spec
    mistake raises an `XprError` whose message points at the spec's line and column.
    """
    from .compiler.driver import load as _load

    return _load(path, defines=defines)


def compile_file(path, out=None, defines=None):
    """Compile a spec to a readable Python (JAX) module file and return the file's path.

    path and defines as in `xprc.load`; out: where to write the module (default: the cache).
    `xprc compile SPEC -o FILE` on the command line does the same.
    """
    from .compiler.driver import compile_file as _compile_file

    return _compile_file(path, out=out, defines=defines)
