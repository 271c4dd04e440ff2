"""valgrind's leak kinds for every block the heap walk found, in a process nobody recorded: the
pointer scan of the recording (core.reach_fast over the C library libmemdump_scan, or
core.reach in Python), with the same roots (reach.select_roots: every thread's registers and
stack from its stack pointer less the red zone, the modules' writable data, the TLS blocks and
other anonymous memory; not glibc's heaps, which hold the blocks)."""

from __future__ import annotations

import os

from .. import reach, reach_fast
from .walk import HeapWalk

__all__ = ["leak_kinds", "scan_walk"]


def _core_image(source) -> int | None:
    """A sparse memfd holding a core's dumped segments at their addresses (file offset =
    address), for the C scan, which reads memory with pread; None when the library is not built,
    the segments would take more than the scan's snapshot budget, or it cannot be made."""
    dumped = sum(filesz for _, _, filesz, _, _ in source.segments)
    if reach_fast.library() is None or dumped > reach_fast.snapshot_budget():
        return None
    fd = os.memfd_create("heapwalk-core", os.MFD_CLOEXEC)
    try:
        for vaddr, _, filesz, offset, _ in source.segments:
            if vaddr + filesz >= 1 << 63:
                continue  # [vsyscall], past any file offset: no root and no block is there
            done = 0
            while done < filesz:
                os.lseek(fd, vaddr + done, os.SEEK_SET)
                n = os.sendfile(fd, source.fd, offset + done, filesz - done)
                if n <= 0:
                    raise OSError(5, "short copy of a core segment")
                done += n
    except OSError:
        os.close(fd)
        return None
    return fd


def scan_walk(source, walked: HeapWalk) -> reach.ScanResult:
    """The pointer scan over WALKED's blocks in SOURCE: a live process is read by the C library
    through /proc/PID/mem (its blocks copied first with process_vm_readv); a core's dumped
    segments are laid out at their addresses in a memfd the C library reads, or when that cannot
    be, the Python scan reads the core."""
    threads = [reach.Thread(t.tid, t.sp, t.registers) for t in source.threads]
    memory = getattr(source, "memory", None)
    if memory is not None:
        return reach_fast.scan(source.read, source.maps, walked.blocks, threads, fd=memory.fd,
                               pid=source.pid)
    image = _core_image(source)
    try:
        return reach_fast.scan(source.read, source.maps, walked.blocks, threads, fd=image)
    finally:
        if image is not None:
            os.close(image)


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
