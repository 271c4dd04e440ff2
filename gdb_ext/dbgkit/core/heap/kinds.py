"""valgrind's leak kinds for every block the heap walk found, in a process nobody recorded: the
pointer scan of the recording (core.reach_fast over the C library libmemdump_scan, or
core.reach in Python), with the same roots (reach.select_roots: every thread's registers and
stack from its stack pointer less the red zone, the modules' writable data, the TLS blocks and
other anonymous memory; not glibc's heaps, which hold the blocks)."""

from __future__ import annotations

from .. import reach, reach_fast
from .walk import HeapWalk

__all__ = ["leak_kinds", "scan_walk"]


def scan_walk(source, walked: HeapWalk) -> reach.ScanResult:
    """The pointer scan over WALKED's blocks in SOURCE (a live process: the C library reads it
    through /proc/PID/mem; a core: the Python scan reads its segments)."""
    threads = [reach.Thread(t.tid, t.sp, t.registers) for t in source.threads]
    memory = getattr(source, "memory", None)
    return reach_fast.scan(source.read, source.maps, walked.blocks, threads,
                           fd=memory.fd if memory is not None else None,
                           pid=source.pid if memory is not None else None)


def leak_kinds(source, walked: HeapWalk) -> dict:
    """{"totals": {kind: [bytes, blocks]}, "blocks": [[address, size, kind, extra], ...],
    "engine": "c" or "python"} (extra: an indirect block's leader, a heuristic's name)."""
    result = scan_walk(source, walked)
    totals = {k: [0, 0] for k in reach.KINDS}
    blocks = []
    # both in address order: the scan's records and the walk's sizes
    for (addr, kind, extra), size in zip(result.records(), walked.blocks.sizes, strict=True):
        totals[kind][0] += size
        totals[kind][1] += 1
        blocks.append([addr, size, kind, extra])
    return {"engine": result.engine, "totals": totals, "blocks": blocks}
