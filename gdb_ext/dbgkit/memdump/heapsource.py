"""The process GDB is attached to as the heap walk's source (core.heap.source's interface, GDB
being its tracer already), and the blocks of its heap that a recording begun with an attach does
not know: allocated before it (docs/heapwalk.md, "After a late attach"), and the blocks in use
before the in-process recorder is loaded (`in_use`)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable

import gdb

from .. import output
from ..core import procfs, ptrace
from ..core.heap.blocktypes import LABEL_OFFSET, block_types
from ..core.heap.merge import unrecorded
from ..core.heap.source import HeapSourceError, ThreadState, thread_state
from ..core.heap.vtables import vtable_table
from ..core.heap.walk import HeapWalk, WalkError, walk
from .checks import CMD

__all__ = ["GdbProcess", "in_use", "older_blocks"]


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


def _walk(inferior: gdb.Inferior, exclude: tuple[int, int] | None) -> HeapWalk:
    """INFERIOR's heap walked (HeapSourceError, WalkError)."""
    source = GdbProcess(inferior, exclude)
    try:
        return walk(source)
    finally:
        source.close()


def in_use(inferior: gdb.Inferior) -> array | None:
    """The addresses of the blocks in use in INFERIOR's heap (every thread stopped, none inside
    the allocator): taken right before the in-process recorder is loaded. None when the heap
    cannot be walked (the walks of the recording's end say why)."""
    try:
        return _walk(inferior, None).blocks.starts
    except (HeapSourceError, WalkError, OSError):
        return None


def older_blocks(inferior: gdb.Inferior, recorded: dict[int, int],
                 exclude: tuple[int, int] | None,
                 at_load: Iterable[int] | None = None,
                 ) -> tuple[dict[int, int], dict[int, tuple[str, str]]] | None:
    """The blocks of INFERIOR's heap (every thread stopped) that hold none of RECORDED, the
    blocks a recording that began with an attach knows, and were in use at AT_LOAD (`in_use`,
    when the recorder was loaded): (address -> usable size, address -> (type, how)), for the
    scan of the recording's end (scan.pointer_scan), which writes them in the dump. None when
    the heap cannot be walked (memdump says why): the scan then takes the heap around the
    recorded blocks for a root, as before."""
    try:
        source = GdbProcess(inferior, exclude)
        try:
            result = walk(source)
            older = unrecorded(zip(result.blocks.starts, result.blocks.sizes, strict=True),
                               recorded, at_load)
            labels, codes = block_types(source, result, vtable_table(source.read, source.maps))
        finally:
            source.close()
    except (HeapSourceError, WalkError) as exc:
        output.warn(CMD, f"blocks allocated before the recording not walked: {exc}")
        return None
    label_of = {a: labels[c + LABEL_OFFSET] for a, c in zip(result.blocks.starts, codes,
                                                             strict=True) if a in older}
    return older, label_of
