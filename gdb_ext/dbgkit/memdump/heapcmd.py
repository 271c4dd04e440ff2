"""`memdump heap` and `memdump leaks` without a recording: glibc's heap of the process GDB is
attached to (stopped), or of the core file GDB opened, walked by core.heap (docs/heapwalk.md):
the blocks by type and size class with each arena's free bytes and fragmentation; valgrind's leak
kinds for every block, grouped by type since no stack is known."""

from __future__ import annotations

import json
import re

import gdb

from .. import output
from ..core import procfs, ptrace
from ..core.heap import view
from ..core.heap.source import CoreFile, HeapSourceError, ThreadState, thread_state
from ..core.heap.survey import survey
from ..core.heap.walk import WalkError
from .checks import CMD

__all__ = ["GdbProcess", "heap_command", "leaks_without_recording", "open_source"]

_CORE_FILE = re.compile(r"^\s*`(.*)', file type", re.MULTILINE)


class GdbProcess:
    """The process GDB has attached or started, stopped: GDB is its tracer, so its threads'
    registers are read with PTRACE_GETREGS and its memory through /proc/PID/mem (the heap walk's
    interface: source.LiveProcess's, without attaching again). EXCLUDE: (start, end) of memory
    that is not the program's (the in-process recorder's) and holds no root."""

    kind = "process"

    def __init__(self, inferior: gdb.Inferior, exclude: tuple[int, int] | None = None) -> None:
        self.pid = inferior.pid
        if any(t.is_running() for t in inferior.threads()):
            raise HeapSourceError(f"process {self.pid} is running: interrupt it first (Ctrl-C)")
        maps = procfs.read_maps(self.pid)
        if exclude is not None:
            maps = [m for m in maps if m.end <= exclude[0] or m.start >= exclude[1]]
        self.maps = maps
        self.threads: list[ThreadState] = []
        for thread in inferior.threads():
            regs = ptrace.get_regs(thread.ptid[1])
            if regs is not None:
                self.threads.append(thread_state(thread.ptid[1], tuple(
                    getattr(regs, n) for n, _ in ptrace.Regs._fields_)))
        try:
            self.memory = procfs.ProcessMemory(self.pid)
        except OSError as exc:
            raise HeapSourceError(f"process {self.pid}: {exc.strerror or exc}") from None
        self.read = self.memory.read

    def close(self) -> None:
        self.memory.close()


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
