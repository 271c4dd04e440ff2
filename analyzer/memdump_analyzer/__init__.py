"""memdump-analyze: the offline analyser of memdump dumps (docs/dump-format.md).

Public API, also used by GDB's `memdump leaks` to report on a dump that is still being written::

    analysis = analyze(path)                      # raises DumpError
    text = render_text(analysis, live=True, title="live blocks")
    report = render_json(analysis)                # a dict; dumps_json(report) is its text
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

from .aggregation import build_analysis
from .dumpfile import DumpError, DumpReader, Frame
from .model import Analysis, ErrorReport, Group
from .replay import Replay
from .replay import replay as _replay
from .report import dumps_json, render_json, render_text
from .rules import RULES
from .rules import RUNTIME_FREE_FUNCTIONS as _RUNTIME_FREE_FUNCTIONS
from .symbolize import symbolize as _symbolize

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


def _printed_nodes(result: Replay) -> Iterator[int]:
    """The stack nodes a report may print: the live blocks', the errors' and the peak's."""
    for _, node in result.live.values():
        yield node
    for e in result.errors:
        yield e.node
        if e.freed_node is not None:
            yield e.freed_node
        if e.alloc_node is not None:
            yield e.alloc_node
    if result.peak_node is not None:
        yield result.peak_node


def analyze(path: str, *, symbolize: bool = True) -> Analysis:
    """Read and replay the dump at `path` in one pass; group and classify its live blocks.

    `symbolize`: the frames the report uses that the dump left without symbols (no `fs` record:
    the recording did not finish) are resolved from their modules with addr2line.
    Raises `DumpError` (str: `PATH:LINE: message`) when the dump cannot be read.
    """
    # The replay makes a few short-lived lists and tuples per event and no reference cycles;
    # CPython's cyclic collector would still walk the live-block table thousands of times (~6%).
    collecting = gc.isenabled()
    gc.disable()
    try:
        with DumpReader(path, mark_functions=_RUNTIME_FREE_FUNCTIONS) as reader:
            result = _replay(reader)
            symbols = None
            if symbolize:
                symbols = _symbolize(reader, _printed_nodes(result))
            analysis = build_analysis(reader, result)
            analysis.partial_records = reader.partial_records
            if reader.partial_records:
                analysis.partial_line = reader.partial_line()
            if symbols is not None:
                analysis.symbolized_frames = symbols.frames
                analysis.symbol_notes = symbols.notes()
                analysis.symbol_warnings = symbols.problems()
            return analysis
    finally:
        if collecting:
            gc.enable()
