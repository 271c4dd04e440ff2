"""Printers of targets/shmemq: the segment's header (geometry, counters, lock owner) and the
process's handle (docs/shmemq-format.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gdb

from ..core.containers import (
    SHMEMQ_FLAG_ROBUST,
    SHMEMQ_LOCK_KINDS,
    SHMEMQ_VERSION,
    c_string,
    shmemq_count_problem,
    shmemq_magic_problem,
)
from .base import Corrupt, Printer, read_bytes, std_mutex_state


def _lock(kind: int, robust: bool) -> str:
    name = SHMEMQ_LOCK_KINDS.get(kind, f"kind {kind}")
    return f"{name} robust" if robust and kind != 2 else name


class HeaderPrinter(Printer):
    """struct shmemq_header: the segment's geometry, message counters and lock."""

    def summary(self) -> str:
        h = self.val
        problem = shmemq_magic_problem(int(h["magic"]), int(h["creator_pid"]))
        if problem is not None:
            raise Corrupt(problem)
        if int(h["version"]) != SHMEMQ_VERSION:
            raise Corrupt(f"version {int(h['version'])}, this printer reads {SHMEMQ_VERSION}")
        kind = int(h["lock_kind"])
        lock = _lock(kind, bool(int(h["flags"]) & SHMEMQ_FLAG_ROBUST))
        if kind != 2:
            lock += f" lock {std_mutex_state(h['mutex'])}"
        if kind == 1:
            lock += f", spin estimate {int(h['spins'])}"
        written, read, slots = int(h["write_count"]), int(h["read_count"]), int(h["max_count"])
        counts = f"written {written}, read {read}"
        problem = shmemq_count_problem(written, read, slots)
        queued = f"<corrupt: {problem}>" if problem else f"{written - read} queued"
        attached = h["attached"]
        low, high = attached.type.range()
        pids = [str(int(attached[i])) for i in range(low, high + 1) if int(attached[i])]
        return (f"shmemq v{SHMEMQ_VERSION}: {slots} slots of {int(h['element_size'])} bytes "
                f"(slot {int(h['slot_size'])}, segment {int(h['segment_size'])} bytes), {lock}, "
                f"{queued} ({counts}), creator {int(h['creator_pid'])}, attached "
                f"[{' '.join(pids)}], recoveries {int(h['recoveries'])}, repairs "
                f"{int(h['repairs'])}")


class HandlePrinter(Printer):
    """shmemq_t (struct _shmemq): a process's handle on a queue, and the header it maps."""

    def summary(self) -> str:
        q = self.val
        name = c_string(read_bytes(q["name"]))
        return (f"shmemq_t {name}, {_lock(int(q['kind']), bool(int(q['robust'])))}, "
                f"mapped at {int(q['hdr']):#x} ({int(q['size'])} bytes), attached as "
                f"#{int(q['attach_index'])} (pid {int(q['attach_pid'])})")

    def items(self) -> Iterator[tuple[str, Any]]:
        hdr = self.val["hdr"]
        try:
            header = hdr.dereference()
            header.fetch_lazy()
        except gdb.MemoryError:
            header = hdr  # unmapped (a detached handle, or garbage): the pointer says where
        yield "hdr", header


def add_printers(collection: Any) -> None:
    collection.add_printer("shmemq_header", "^shmemq_header$", HeaderPrinter)
    # shmemq.c and its users name the handle only as shmemq_t (and typedefs of it)
    collection.add_printer("shmemq_t", "^shmemq_t$", HandlePrinter)
