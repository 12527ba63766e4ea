"""Static render configuration: everything that sets a shape lives here, frozen and hashable."""

from __future__ import annotations

import dataclasses
import math

MODES = ("RGB", "D", "ED", "RGB+D", "RGB+ED")


@dataclasses.dataclass(frozen=True)
class RenderConfig:
    """Static options of the shared pipeline.

    tile_size:   side of a square tile in pixels.
    max_entries: capacity of (primitive, tile) pairs; None derives it from the primitive count
                 and image size (see `entry_capacity`). Entries past it are dropped, counted and
                 reported in `RenderOutput.stats`.
    chunk:       primitives a tile composites per step (the inner vector width).
    group:       chunks processed per sequential step; a step whose tiles are all saturated is
                 skipped.
    alpha_min:   alpha below this is no contribution (REFERENCE.md: 1/255).
    t_min:       stop before a primitive would bring transmittance below this (REFERENCE.md: 1e-4).
    """

    tile_size: int = 16
    max_entries: int | None = None
    entries_per_primitive: float = 8.0
    chunk: int = 32
    group: int = 8
    alpha_min: float = 1.0 / 255.0
    t_min: float = 1e-4

    def entry_capacity(self, num_primitives: int, num_tiles: int) -> int:
        """The static entry capacity: explicit, or derived from the scene size."""
        if self.max_entries is not None:
            return int(self.max_entries)
        derived = math.ceil(self.entries_per_primitive * num_primitives) + 4 * num_tiles
        return max(1024, derived)
