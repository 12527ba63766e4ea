"""This machine's memory and sizes in bytes as text: one definition each, for the messages and
checks of every layer (the data loaders, the trainer, the render's memory budget).

Nothing here imports xprc or JAX, so every layer may import it."""

from __future__ import annotations

import os


def physical_memory() -> int | None:
    """The machine's physical memory in bytes (None: os.sysconf cannot tell)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def size_text(n: int | float) -> str:
    """`n` bytes in GiB, MiB or KiB with one decimal (binary units), or in bytes below 1 KiB:
    '1.8 GiB', '576.0 MiB', '20 bytes'."""
    n = int(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} bytes"
