"""The in-process recorder's lock table (gdb_ext/recorder/locks.c), read from the process's
memory without GDB: per lock, mutrace's counts (locked, owner changes, contended, wait times).

Every field is 8 bytes little-endian, field N at offset 8 * N: the header `memdump_recorder_locks`
(magic, version, capacity, words per entry, enabled, used, dropped, table address) and
`capacity` entries (key = the lock's address, 0 free; kind; locked; read_locked; owner_changes;
contended; wait_ns; max_wait_ns; try_busy; last_owner; reserved).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from memdump_analyzer.dumpformat import LockRecord

__all__ = ["HEADER_SIZE", "LockCounts", "LockTable", "LockTableError", "read_table"]

MAGIC = b"MDLOCK01"
VERSION = 1
HEADER_SIZE = 64
_HEADER = struct.Struct("<8s7Q")
_KINDS = {1: "mutex", 2: "rwlock"}
_FIELDS = 10


class LockTableError(ValueError):
    """The memory at the header's address is not a lock table this reader understands."""


@dataclass(frozen=True)
class LockCounts(LockRecord):
    """One lock's counters: what its `lk` record says, and the last exclusive owner."""

    last_owner: int = 0


@dataclass(frozen=True)
class LockTable:
    """The header's state and the locks counted so far (most contended first)."""

    enabled: bool
    used: int
    dropped: int
    locks: list[LockCounts]


def read_table(read: Callable[[int, int], bytes], header: int) -> LockTable:
    """The table whose header is at HEADER, read through READ(address, size)."""
    magic, version, capacity, words, enabled, used, dropped, table = _HEADER.unpack(
        read(header, HEADER_SIZE))
    if magic != MAGIC:
        raise LockTableError(f"no lock table at {header:#x} (magic {magic!r})")
    if version > VERSION or words < _FIELDS or capacity & (capacity - 1):
        raise LockTableError(f"lock table version {version} ({words} words per entry, capacity "
                             f"{capacity}) is not one this dbgkit reads (version {VERSION})")
    locks = []
    if table:
        raw = read(table, capacity * words * 8)
        entry = struct.Struct(f"<{words}Q")
        for i in range(capacity):
            w = entry.unpack_from(raw, i * words * 8)
            if w[0] and w[2] + w[8]:
                locks.append(LockCounts(
                    address=w[0], kind=_KINDS.get(w[1], "?"), locked=w[2], read_locked=w[3],
                    owner_changes=w[4], contended=w[5], wait_ns=w[6], max_wait_ns=w[7],
                    try_busy=w[8], last_owner=w[9]))
    locks.sort(key=lambda c: (-c.contended, -c.wait_ns, -c.locked, c.address))
    return LockTable(bool(enabled), used, dropped, locks)
