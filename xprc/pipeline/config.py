"""Static render configuration: everything that sets a shape lives here, frozen and hashable."""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

MODES = ("RGB", "D", "ED", "RGB+D", "RGB+ED")
BACKWARDS = ("custom", "autodiff")
COMPOSITORS = ("auto", "xla", "pallas")

# Where the compositors clamp an alpha of 1 and above (`composite_scan.clamp_alpha`): 3DGS's
# cap, which the shipped specs use. alpha_min and t_min keep a primitive at the cap drawn.
ALPHA_CAP = 0.99


def _keeps_the_cap(t_min) -> bool:
    """The stop rule (stop before transmittance falls below t_min) keeps a lane at ALPHA_CAP on
    an empty pixel, in float32 as the compositors compute: 1 - ALPHA_CAP >= t_min."""
    return bool(np.float32(1) - np.float32(ALPHA_CAP) >= np.float32(t_min))


XLA_CHUNK = 32  # RenderConfig.chunk's default on the XLA path
KERNEL_CHUNK = 64  # and in the Pallas kernels, up to this many entries a view:
# the kernels' lanes are stored [C, chunk] a chunk, and a TPU pads 64 lanes to 128: the 3M
# training step (16,777,216 entries) took 14.25 GB by XLA's accounting at 64 against 13.59 at
# 32, of the v5e's 15.75 (compiled for it from the CPU; docs/dev/tpu-log.md)
KERNEL_CHUNK_MAX_ENTRIES = 2**23


@dataclasses.dataclass(frozen=True)
class RenderConfig:
    """Static options of the shared pipeline.

    tile_size:   side of a square tile in pixels.
    max_entries: capacity of (primitive, tile) pairs. None: `xprc.render` counts the entries the
                 scene needs (a cheap jitted pass) and picks the capacity bucket above it
                 (`entry_bucket`), so nothing is dropped; under a caller's own trace (jit, grad,
                 vmap) it cannot count, and falls back to `entry_capacity` with `on_overflow`.
    on_overflow: what a render that dropped entries does: "warn" (default: a warning with the
                 count), "raise" (an `XprError`; under a caller's jit a runtime error carrying
                 the same message), "defer" (eager: as "warn"; under a caller's jit no run-time
                 report, so the program holds no host callback and the persistent compilation
                 cache keeps it: the counts are in `stats`, and `xprc.warn_if_dropped(out)`
                 reports them where your code reads the results) or "ignore" (only `stats`
                 records it).
    memory_budget: bytes a render may plan for its entry buffers; None: `default_memory_budget()`
                 (half the machine's memory, at most 16 GiB; env XPRC_MEMORY_BUDGET overrides).
    chunk:       primitives a tile composites per step (the inner vector width). None: 32 on the
                 XLA path, 64 in the Pallas kernels up to 2^23 entries a view, 32 beyond (where
                 its padding costs memory: `chunk_for`): on a TPU v5e, garden frame,
                 3DGS fwd+bwd 20.7 ms at 64 against 23.5 at 32, 3DGUT 31.2 against 32.5
                 (docs/dev/tpu-log.md); the XLA path pads each tile's list to whole chunks.
    group:       chunks processed per sequential step; a step whose tiles are all saturated is
                 skipped.
    alpha_min:   alpha below this is no contribution (1/255, as the 3DGS rasterizer and gsplat);
                 at most ALPHA_CAP = 0.99, so that an opaque primitive (clamped there) draws.
    t_min:       stop before a primitive would bring transmittance below this (1e-4, as 3DGS);
                 below 1 - ALPHA_CAP = 0.01, so that an opaque primitive draws on an empty pixel.
    distortion:  also composite the 2DGS depth distortion sum_{i,j} w_i w_j |z_i - z_j| per pixel
                 (`RenderOutput.distortion`), in list order as 2 sum_k w_k (z_k W_{k-1} - Z_{k-1});
                 z is the response's per-pixel `depth` output when it emits one, else the sort
                 depth. Exact when z increases along the list (the sort depth; per-pixel depths
                 of crossing primitives need not). Differentiated by autodiff of the scan.
    pixel_outputs: composite the per-pixel outputs the response emits beside alpha
                 (`RenderOutput.extra`: 2DGS's depth, depth_sq and normal). False: alpha and the
                 features only, `extra` is None, and the response's maths for those outputs is
                 not computed: the cheaper render when nothing reads them (an RGB render, a
                 viewer, a loss without the 2DGS regularisers). A spec's emitted `depth` is
                 then not available to the D / ED modes or the distortion output: asking for
                 them with it off is an error, not a silent switch to the sort depth.
    backward:    how compositing is differentiated: "custom" (default: the analytic,
                 method-agnostic VJP of `composite_vjp.py`) or "autodiff" (JAX autodiff of the
                 rematerialised scan; always used for the distortion output).
    compositor:  which code composites: "xla" (a `lax.scan` over groups of chunks), "pallas"
                 (fused per-tile kernels, `composite_pallas.py`; interpreted on a CPU, for
                 tests) or "auto" (default: Pallas on a TPU, XLA elsewhere; a spec the kernels
                 cannot run, e.g. float64 or the distortion output, uses XLA with a warning on
                 a TPU; kernels that do not compile for the chip, e.g. too large for its VMEM,
                 fall back to XLA with a warning, in `render` and the trainer; a function
                 of your own under `jax.jit` gets the compile error). The backends agree to
                 float32 rounding; with "pallas", `backward` is always the custom VJP.
    """

    tile_size: int = 16
    max_entries: int | None = None
    on_overflow: str = "warn"
    memory_budget: int | None = None
    entries_per_primitive: float = 8.0
    chunk: int | None = None
    group: int = 8
    alpha_min: float = 1.0 / 255.0
    t_min: float = 1e-4
    distortion: bool = False
    pixel_outputs: bool = True
    backward: str = "custom"
    compositor: str = "auto"

    def __post_init__(self) -> None:
        from ..errors import XprError

        if self.backward not in BACKWARDS:
            raise XprError(
                f"RenderConfig.backward={self.backward!r}: expected one of {', '.join(BACKWARDS)}"
            )
        if self.compositor not in COMPOSITORS:
            raise XprError(
                f"RenderConfig.compositor={self.compositor!r}: expected one of "
                f"{', '.join(COMPOSITORS)}"
            )
        for name, ok, expected in self._checks():
            if not ok(getattr(self, name)):
                raise XprError(f"RenderConfig.{name}={getattr(self, name)!r}: expected {expected}")

    @staticmethod
    def _checks():
        """(field, test, what it expects): numbers that would divide by zero deep in the
        pipeline, or render black without a word (alpha_min 2, t_min 1; alpha_min above
        ALPHA_CAP or t_min from 1 - ALPHA_CAP on: an opaque primitive, clamped to ALPHA_CAP,
        drew nothing, and alphas the spec keeps in range were counted as out of it)."""
        count = _whole(lambda v: v >= 1)
        return (
            ("tile_size", count, "a whole number of pixels >= 1"),
            ("chunk", lambda v: v is None or count(v), "None or a whole number >= 1"),
            ("group", count, "a whole number >= 1"),
            ("max_entries", lambda v: v is None or count(v), "None or a whole number >= 1"),
            ("memory_budget", lambda v: v is None or count(v), "None or a number of bytes >= 1"),
            ("entries_per_primitive", _real(lambda v: v > 0), "a finite number > 0"),
            ("alpha_min", _real(lambda v: 0 <= v <= ALPHA_CAP), f"a number in [0, {ALPHA_CAP}] "
             f"(above {ALPHA_CAP}, where an alpha of 1 is clamped, opaque primitives would "
             "draw nothing)"),
            ("t_min", _real(lambda v: 0 <= v and _keeps_the_cap(v)), f"a number in [0, "
             f"{1 - ALPHA_CAP:.2g}) (from 1 - {ALPHA_CAP} on, the stop rule drops a primitive at "
             f"the alpha cap {ALPHA_CAP} even on an empty pixel: opaque primitives would draw "
             "nothing)"),
            ("distortion", lambda v: isinstance(v, (bool, np.bool_)), "True or False"),
            ("pixel_outputs", lambda v: isinstance(v, (bool, np.bool_)), "True or False"),
        )  # fmt: skip

    def chunk_for(self, kernels: bool, capacity: int = 0) -> int:
        """The chunk: `chunk`, or where it is None the default of the Pallas kernels
        (`kernels`; for a `capacity` of entries over KERNEL_CHUNK_MAX_ENTRIES, XLA_CHUNK) or of
        the XLA path."""
        if self.chunk is not None:
            return int(self.chunk)
        if kernels and capacity <= KERNEL_CHUNK_MAX_ENTRIES:
            return KERNEL_CHUNK
        return XLA_CHUNK

    def entry_capacity(self, num_primitives: int, num_tiles: int) -> int:
        """The static entry capacity: explicit, or derived from the scene size."""
        if self.max_entries is not None:
            return int(self.max_entries)
        derived = math.ceil(self.entries_per_primitive * num_primitives) + 4 * num_tiles
        return max(1024, derived)


def _whole(test):
    """A check for whole numbers (not bool, not float) that pass `test`."""
    return lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool) and test(v)


def _real(test):
    """A check for finite real numbers (not bool) that pass `test`."""
    return lambda v: (
        isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and test(v)
    )


def entry_bucket(needed: int, minimum: int = 1024) -> int:
    """The capacity bucket for `needed` entries: the smallest m * 2^e >= needed with m in 4..7.

    Four buckets per octave: at most 25% unused capacity, and a handful of compiled variants
    serve every scene size.
    """
    needed = max(int(needed), int(minimum), 4)
    e = max(needed.bit_length() - 3, 0)
    m = -(-needed // (1 << e))  # ceil; in 4..8
    return m << e
