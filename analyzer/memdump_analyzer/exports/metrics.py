"""`--metric`'s choices for `--format collapsed`: the figure of a stack each counts. A module of
its own, which the command line imports for its choices without loading the renderers nor the
profile's pass (collapsed.py and the HTML page's flame graphs use the same table)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .profile import StackFigures

__all__ = ["METRICS"]

#: --metric -> the figure of a stack it counts (the first is the default)
METRICS: dict[str, Callable[[StackFigures], int]] = {
    "leaked-bytes": lambda s: s.leaked_bytes,
    "leaked-blocks": lambda s: s.leaked_blocks,
    "alloc-bytes": lambda s: s.alloc_bytes,
    "alloc-count": lambda s: s.alloc_blocks,
    "peak-bytes": lambda s: s.peak_bytes,
}
