"""The in-process recorder's lock table (gdb_ext/recorder/locks.c), read from the process's
memory without GDB: per lock, mutrace's counts (locked, owner changes, contended, wait times).

Every field is 8 bytes little-endian, field N at offset 8 * N: the header `memdump_recorder_locks`
(magic, version, capacity, words per entry, enabled, used, dropped, table address; version 2:
stack table address, its capacity, words per stack entry, stack entries used, contended
acquisitions not counted by stack) and `capacity` entries (key = the lock's address, 0 free;
kind; locked; read_locked; owner_changes; contended; wait_ns; max_wait_ns; try_busy; last_owner;
reserved). Version 2's stack entries: key (0 free), the lock's address, the number of return
addresses, contended, wait_ns, max_wait_ns, partial, reserved, the return addresses.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from memdump_analyzer.dumpformat import LockRecord

__all__ = ["HEADER_SIZE", "LockCounts", "LockStack", "LockTable", "LockTableError",
           "read_table"]

MAGIC = b"MDLOCK01"
VERSION = 2
HEADER_SIZE = 64
_HEADER = struct.Struct("<8s7Q")
_STACK_HEADER = struct.Struct("<5Q")     # version 2: fields 8 to 12
_STACK_FIELDS = 8                        # words before the return addresses
_KINDS = {1: "mutex", 2: "rwlock"}
_FIELDS = 10


class LockTableError(ValueError):
    """The memory at the header's address is not a lock table this reader understands."""


@dataclass(frozen=True)
class LockStack:
    """The contended acquisitions of one lock from one call stack (return addresses, innermost
    first: the first is in the function that called the lock function)."""

    address: int
    pcs: tuple[int, ...]
    contended: int
    wait_ns: int
    max_wait_ns: int
    partial: bool = False


@dataclass(frozen=True)
class LockCounts(LockRecord):
    """One lock's counters: what its `lk` record says, the last exclusive owner, and the
    stacks it was waited for from (most contended first)."""

    last_owner: int = 0
    stacks: tuple[LockStack, ...] = ()


@dataclass(frozen=True)
class LockTable:
    """The header's state and the locks counted so far (most contended first)."""

    enabled: bool
    used: int
    dropped: int
    locks: list[LockCounts]
    stacks_dropped: int = 0     # contended acquisitions not counted by stack: no room


def _read_stacks(read: Callable[[int, int], bytes],
                 header: int) -> tuple[dict[int, list[LockStack]], int]:
    """Version 2's stack table: lock address -> its waiting stacks, and the drops."""
    table, capacity, words, _used, dropped = _STACK_HEADER.unpack(
        read(header + HEADER_SIZE, _STACK_HEADER.size))
    stacks: dict[int, list[LockStack]] = {}
    if not table or not capacity or words <= _STACK_FIELDS or capacity & (capacity - 1):
        return stacks, dropped
    raw = read(table, capacity * words * 8)
    entry = struct.Struct(f"<{words}Q")
    for i in range(capacity):
        w = entry.unpack_from(raw, i * words * 8)
        n = min(w[2], words - _STACK_FIELDS)
        if w[0] and n and w[3]:   # claimed, its frames written, counted
            stacks.setdefault(w[1], []).append(LockStack(
                w[1], w[_STACK_FIELDS:_STACK_FIELDS + n], w[3], w[4], w[5], bool(w[6])))
    for found in stacks.values():
        found.sort(key=lambda s: (-s.contended, -s.wait_ns, s.pcs))
    return stacks, dropped


def read_table(read: Callable[[int, int], bytes], header: int) -> LockTable:
    """The table whose header is at HEADER, read through READ(address, size)."""
    magic, version, capacity, words, enabled, used, dropped, table = _HEADER.unpack(
        read(header, HEADER_SIZE))
    if magic != MAGIC:
        raise LockTableError(f"no lock table at {header:#x} (magic {magic!r})")
    if version > VERSION or words < _FIELDS or capacity & (capacity - 1):
        raise LockTableError(f"lock table version {version} ({words} words per entry, capacity "
                             f"{capacity}) is not one this dbgkit reads (version {VERSION})")
    stacks, stacks_dropped = _read_stacks(read, header) if version >= 2 else ({}, 0)
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
                    try_busy=w[8], last_owner=w[9], stacks=tuple(stacks.get(w[0], ()))))
    locks.sort(key=lambda c: (-c.contended, -c.wait_ns, -c.locked, c.address))
    return LockTable(bool(enabled), used, dropped, locks, stacks_dropped)
