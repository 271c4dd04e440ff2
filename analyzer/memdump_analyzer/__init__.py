"""memdump-analyze: the offline analyser of memdump dumps (docs/dump-format.md).

Public API, also used by GDB's `memdump leaks` to report on a dump that is still being written::

    analysis = analyze(path)                      # raises DumpError
    text = render_text(analysis, live=True, title="live blocks")
    report = render_json(analysis)                # a dict; dumps_json(report) is its text
"""

from __future__ import annotations

import gc

from .aggregation import build_analysis
from .dumpfile import DumpError, DumpReader, Frame
from .model import Analysis, ErrorReport, Group
from .replay import replay as _replay
from .report import dumps_json, render_json, render_text
from .rules import RULES
from .rules import RUNTIME_FREE_FUNCTIONS as _RUNTIME_FREE_FUNCTIONS

__all__ = [
    "RULES",
    "Analysis",
    "DumpError",
    "DumpReader",
    "ErrorReport",
    "Frame",
    "Group",
    "__version__",
    "analyze",
    "dumps_json",
    "render_json",
    "render_text",
]

__version__ = "1.0.0"


def analyze(path: str) -> Analysis:
    """Read and replay the dump at `path` in one pass; group and classify its live blocks.

    Raises `DumpError` (str: `PATH:LINE: message`) when the dump cannot be read.
    """
    # The replay makes a few short-lived lists and tuples per event and no reference cycles;
    # CPython's cyclic collector would still walk the live-block table thousands of times (~6%).
    collecting = gc.isenabled()
    gc.disable()
    try:
        with DumpReader(path, mark_functions=_RUNTIME_FREE_FUNCTIONS) as reader:
            result = _replay(reader)
            return build_analysis(reader, result)
    finally:
        if collecting:
            gc.enable()
