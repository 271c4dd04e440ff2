"""`memdump heap` and `memdump leaks` without a recording: glibc's heap of the process GDB is
attached to (stopped), or of the core file GDB opened, walked by core.heap (docs/heapwalk.md):
the blocks by type and size class with each arena's free bytes and fragmentation; valgrind's leak
kinds for every block, grouped by type since no stack is known. After a late attach with a
recording, `memdump leaks` scans the recorded blocks together with the walked blocks the
recording does not know (allocated before it began), grouped by type (`BeforeRecording`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gdb

from .. import output
from ..core.heap import view
from ..core.heap.merge import attached_scan, unrecorded
from ..core.heap.source import CoreFile, HeapSourceError
from ..core.heap.survey import survey
from ..core.heap.walk import WalkError
from .checks import CMD
from .heapsource import GdbProcess
from .scan import pointer_scan

if TYPE_CHECKING:
    from memdump_analyzer.olderblocks import Heading

    from .recording import Recording

__all__ = ["BeforeRecording", "before_recording", "heap_command", "leaks_without_recording",
           "open_source"]

_CORE_FILE = re.compile(r"^\s*`(.*)', file type", re.MULTILINE)


def _core_path(inferior: gdb.Inferior) -> str | None:
    """The core file GDB has open for INFERIOR, None when its target is no core."""
    connection = getattr(inferior, "connection", None)
    if connection is None or connection.type != "core":
        return None
    found = _CORE_FILE.search(gdb.execute("info target", to_string=True))
    return found.group(1) if found else None


def walkable() -> bool:
    """Whether the selected inferior has a heap to walk: a live process or a core file."""
    inferior = gdb.selected_inferior()
    return bool(inferior.pid) or _core_path(inferior) is not None


def open_source(exclude: tuple[int, int] | None = None):
    """The heap walk's source for the selected inferior: its core file, or the live process."""
    inferior = gdb.selected_inferior()
    try:
        core = _core_path(inferior)
        if core is not None:
            return CoreFile(core)
        if not inferior.pid:
            raise gdb.GdbError(f"{CMD}: no process and no core file: run the program, attach "
                               "to one (gdb -p PID) or open a core (gdb PROGRAM CORE)")
        return GdbProcess(inferior, exclude)
    except HeapSourceError as exc:
        raise gdb.GdbError(f"{CMD}: {exc}") from None


def walked(kinds: bool, exclude: tuple[int, int] | None = None) -> dict:
    """The survey's document of the selected inferior's heap, with the types and, with KINDS,
    the leak kinds; a heap that cannot be walked is one line (gdb.GdbError)."""
    source = open_source(exclude)
    try:
        return survey(source, kinds=kinds, types=True)
    except WalkError as exc:
        raise gdb.GdbError(f"{CMD}: {exc}") from None
    finally:
        source.close()


def _emit(text: str, path: str | None, summary: str) -> None:
    if path is None:
        output.block(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise gdb.GdbError(f"{CMD}: cannot write {path}: {exc.strerror}") from None
    output.info(CMD, f"{summary}; report in {path}")


def heap_command(args) -> None:
    """`memdump heap [--json] [-o FILE]`."""
    result = view.heap_json(walked(kinds=False))
    text = json.dumps(result, indent=2) if args.json else view.heap_text(result)
    _emit(text, args.report, f"{result['bytes']:,} bytes in {result['blocks']:,} blocks in use")


#: memdump leaks' options that need a recording's stacks or times
_RECORDED_ONLY = (("older_than", "--older-than"), ("increased", "--increased"),
                  ("changed", "--changed"), ("show_runtime", "--show-runtime"),
                  ("show_runtime_frames", "--show-runtime-frames"))


def leaks_without_recording(args) -> None:
    """`memdump leaks` with nothing recorded: every block of the heap with its leak kind,
    the leaks grouped by type ("of unknown origin": no stack is known)."""
    for attr, flag in _RECORDED_ONLY:
        if getattr(args, attr):
            raise gdb.GdbError(f"{CMD}: leaks {flag} needs a recording (memdump, then run); "
                               "without one the heap walk knows no stacks or times")
    doc = walked(kinds=True)
    if args.json:
        text = json.dumps(view.leaks_json(doc, args.show_leak_kinds, args.top), indent=2)
    else:
        text = view.leaks_text(doc, args.show_leak_kinds, args.top,
                               title="memdump leaks: the heap walked (nothing recorded: "
                                     "blocks of unknown origin, grouped by type)")
    totals = doc["kinds"]["totals"]
    lost = sum(totals[k][0] for k in ("definite", "indirect", "possible"))
    blocks = sum(totals[k][1] for k in ("definite", "indirect", "possible"))
    _emit(text, args.report, f"{lost:,} bytes in {blocks:,} blocks lost")


@dataclass(frozen=True)
class BeforeRecording:
    """`memdump leaks` at a stop of a recording that began with an attach: SCAN, the pointer
    scan's records of the recorded blocks (a memdump_analyzer.LiveScan, the recording's report
    takes it as its own scan), OLDER the blocks it does not know, with their kinds and types
    (memdump_analyzer.dumpdefs.OlderBlock, as the dump's `ob` records have them), and WALK the
    survey's `source`, `symbols`, `problems` and the scan's `engine`; None when the scan gave no
    kinds. The recording's report shows them (its `older`), headed by `heading()`, as the
    offline report shows the dump's."""

    scan: object
    older: list | None
    walk: dict | None = None

    def heading(self) -> Heading | None:
        """How the recording's report introduces OLDER (memdump_analyzer.olderblocks.Heading):
        this walk's title, figures, problems and JSON keys; None without a walk."""
        if self.older is None or self.walk is None:
            return None
        from memdump_analyzer.olderblocks import Heading

        head = view.walk_head(self.walk, len(self.older), sum(b.size for b in self.older))
        return Heading(TITLE, tuple(head), self.walk)


#: the title of the blocks of unknown origin after the recording's report, at a stop
TITLE = ("allocated before the recording began (the heap walked: blocks of unknown origin, "
         "grouped by type)")


def before_recording(session: Recording) -> BeforeRecording | None:
    """At a stop of SESSION, a recording that began on a running process: the heap walked, every
    block in use that the recording does not know taken as allocated before it (size from its
    chunk, type from its contents), and one pointer scan over both sets. None where the
    recording's own scan stands: not attached, after the exit's scan, the scan turned off, a
    thread inside an allocator call (the heap is being changed), or a heap that cannot be
    walked (the recording's scan says so)."""
    if not session.attached or session.final_scan is not None or session.scan_time_limit == 0 \
            or not session.inferior.pid or session.calls_in_progress():
        return None
    from memdump_analyzer import LiveScan
    from memdump_analyzer.dumpdefs import OlderBlock

    exclude = session.recorder_memory()
    try:
        walk_doc = walked(kinds=False, exclude=exclude)
    except gdb.GdbError:  # the recording's own scan tries the walk again, and says why
        return None
    recorded = session.live_blocks()
    unknown = unrecorded(walk_doc["blocks"], recorded, session.heap_at_load)
    labels, codes = walk_doc["types"]["labels"], walk_doc["types"]["codes"]
    label_of = {a: tuple(labels[c]) for (a, _), c in zip(walk_doc["blocks"], codes, strict=True)
                if a in unknown}
    status, result, millis = pointer_scan(session.inferior, session.pid, session.read_some,
                                          {**recorded, **unknown}, session.scan_time_limit,
                                          False, exclude=exclude)
    if result is None:
        return BeforeRecording(LiveScan(status, millis=millis), None)
    result = attached_scan(result, unknown, label_of)
    walk = {key: walk_doc[key] for key in ("source", "symbols", "problems")}
    walk["engine"] = result.engine
    return BeforeRecording(
        LiveScan(status, result.root_bytes, result.block_bytes, millis, list(result.records())),
        [OlderBlock(*b) for b in result.older], walk)
