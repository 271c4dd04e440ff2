"""memdump-analyze: the offline analyser of memdump dumps (docs/dump-format.md).

Public API, also used by GDB's `memdump leaks` to report on a dump that is still being written::

    analysis = analyze(path)                      # raises DumpError
    text = render_text(analysis, live=True, title="live blocks")
    report = render_json(analysis)                # a dict; dumps_json(report) is its text
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dumpfile import DumpReader
    from .model import Analysis
    from .progress import Progress
    from .replay import Replay

__all__ = [
    "RULES",
    "Analysis",
    "DumpError",
    "DumpReader",
    "ErrorReport",
    "Frame",
    "Group",
    "LiveScan",
    "__version__",
    "analyze",
    "dumps_json",
    "render_json",
    "render_text",
]

__version__ = "1.0.0"

#: the public names that live in a module of the package, imported when first asked for: a
#: program that reads one module (GDB's `memdump` reads dumpformat) does not load the analyser
_LAZY = {
    "RULES": "rules",
    "Analysis": "model",
    "DumpError": "dumpfile",
    "DumpReader": "dumpfile",
    "ErrorReport": "model",
    "Frame": "dumpfile",
    "Group": "model",
    "dumps_json": "report",
    "render_json": "report",
    "render_text": "report",
}


def __getattr__(name: str) -> Any:
    """`memdump_analyzer.NAME` of a lazily imported public name (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


@dataclass
class LiveScan:
    """A pointer scan of a live process: its status (`ok`, `timeout`, `threads`, or why it
    could not run), what it read, and (address, kind, heuristic or leader) per block, as the
    dump's `scan` and `r` records give them."""

    status: str
    root_bytes: int = 0
    block_bytes: int = 0
    millis: int = 0
    records: list[tuple[int, str, str | None]] = field(default_factory=list)

    def apply(self, reader: DumpReader, after: int) -> None:
        """Put this scan in the reader's tables, as if the dump's last `scan` record (line 0:
        made now, not read from the dump)."""
        from .dumpfile import ScanRecord

        reader.scan = ScanRecord(after, self.status, self.root_bytes, self.block_bytes,
                                 self.millis, 0)
        reader.kinds = {}
        reader.leaders = {}
        reader.older = []  # the blocks from before the recording are the caller's to scan
        for addr, kind, extra in self.records:
            key = b"%#x" % addr
            if kind == "indirect" and extra is not None:
                reader.leaders[key] = extra.encode()
                reader.kinds[key] = (kind, None)
            else:
                reader.kinds[key] = (kind, extra)


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


def _name_locks(analysis: Analysis, reader: DumpReader, result: Replay) -> None:
    """Each lock's name, from the modules' symbols or the live block that holds it."""
    from .locknames import lock_names, module_bases
    from .rules import trim_stack

    live = [(int(ptr, 16), size, abs(node)) for ptr, (size, node) in result.live.items()]
    names = lock_names([row.counts.address for row in analysis.locks],
                       module_bases(reader.frames.values()), live,
                       lambda node: trim_stack(reader.stack(node)))
    for row in analysis.locks:
        row.name = names.get(row.counts.address)


def analyze(path: str, *, symbolize: bool = True, scan: LiveScan | None = None,
            addresses: bool = False, progress: Progress | None = None,
            allocations: bool = False,
            snapshots: tuple[list[int], list[int]] | None = None,
            also: list[Any] | None = None) -> Analysis:
    """Read and replay the dump at `path` in one pass; group and classify its live blocks.

    `symbolize`: the frames the report uses that the dump left without symbols (no `fs` record:
    the recording did not finish) are resolved from their modules with addr2line.
    `scan`: a pointer scan made now on the process being recorded (GDB's `memdump leaks`): its
    kinds replace those of the dump's last `scan` record, if any. `addresses`: each group keeps
    its blocks' addresses and sizes (`Group.addresses`). `progress`: a progress bar to draw
    while the dump is read. `allocations`: the analysis keeps the library's allocations by stack
    node and the reader (`Analysis.node_allocs`), for the exports that need no other figure;
    `snapshots`: with it, the live heap at these SEQs, each of its kind (massif's snapshots:
    `Analysis.node_snapshots`). `also`: accumulators of the one pass (heappass.py) whose
    figures the library computes in the replay's run when it can (`Analysis.pass_figures`: the
    caller hands them over; else it runs the pass).
    Raises `DumpError` (str: `PATH:LINE: message`) when the dump cannot be read.
    """
    from .accesserrors import rows as access_rows
    from .aggregation import build_analysis
    from .dumpfile import DumpReader
    from .heapcorruption import rows as corruption_rows
    from .locks import rows as lock_rows
    from .replay import replay
    from .rescan import heap_records as rescan_events
    from .rules import RUNTIME_FREE_FUNCTIONS, trim_lock_stack
    from .symbolize import symbolize as symbolize_frames

    # The replay makes a few short-lived lists and tuples per event and no reference cycles;
    # CPython's cyclic collector would still walk the live-block table thousands of times (~6%).
    collecting = gc.isenabled()
    gc.disable()
    try:
        with DumpReader(path, mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
            if progress is not None and progress.enabled:
                progress.total = reader.on_read(progress.on_read)
            request = None
            if also:
                from .heappass import native_request

                for acc in also:
                    acc.start(reader)
                request = native_request(also)
            result = replay(reader, allocations=allocations, snapshots=snapshots,
                            request=request)
            if scan is not None:
                scan.apply(reader, result.last_seq)
            symbols = None
            if symbolize:
                symbols = symbolize_frames(reader, _printed_nodes(result))
            analysis = build_analysis(reader, result, addresses)
            if allocations and result.node_allocs is not None:
                analysis.node_allocs = (reader, result.node_allocs, result.node_peak)
                analysis.node_snapshots = result.node_snapshots
            if result.pass_figures is not None:
                analysis.pass_figures = (request, result.pass_figures)
            analysis.locks = lock_rows(reader, trim_lock_stack)
            analysis.access_errors = access_rows(reader, lambda: rescan_events(path))
            analysis.heap_corruption = corruption_rows(reader, lambda: rescan_events(path))
            if analysis.locks:
                _name_locks(analysis, reader, result)
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
