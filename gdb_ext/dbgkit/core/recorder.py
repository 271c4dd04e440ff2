"""The in-process recorder as GDB sees it (docs/recorder.md): its library, its control block, its
live-block table and in-flight slots in the process's memory, and the dump it appends to.

GDB-free: memory is read and written through callables, so that tests drive it with a buffer.
The layout mirrors gdb_ext/recorder/control.h: every field is 8 bytes, field N at offset 8 * N.
"""

from __future__ import annotations

import bisect
import errno
import os
import struct
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from memdump_analyzer.dumpformat import OPERATIONS, Numbering

from . import builtfiles
from .reach_fast import SortedBlocks, sorted_pairs

__all__ = [
    "CONTROL_FIELDS",
    "CONTROL_SIZE",
    "GUARD_FIELDS",
    "REDZONE_FIELDS",
    "REDZONE_OFFSET",
    "GUARD_MAX",
    "GUARD_OFFSET",
    "LIBRARY",
    "Control",
    "InFlight",
    "TailState",
    "data_end",
    "find_library",
    "live_blocks",
    "read_tail",
]

LIBRARY = "libmemdump_recorder.so"
MAGIC = b"MDREC001"
#: control.h's fields, in order (one 8-byte word each), then `path`
CONTROL_FIELDS = (
    "magic", "version", "size", "state", "lock", "depth", "end", "seq", "next_string",
    "next_frame", "next_node", "events", "live_count", "live_bytes", "unrecorded", "live_table",
    "live_capacity", "slots", "slot_count", "frame_pcs", "failure", "failure_errno", "inherit",
    "pid", "region", "region_size", "partial_stacks", "attach", "patched", "patched_modules",
    "clock_base", "clock_start",
)
PATH_OFFSET = 32 * 8
PATH_MAX = 4096
#: (guard pages, docs/heap-errors.md) the words after `path`, then the SPEC GDB may write
GUARD_FIELDS = ("guard_pool", "guard_pool_size", "guard_slots", "guard_slot_bytes",
                "guard_blocks", "guard_missed", "guard_errors")
GUARD_OFFSET = PATH_OFFSET + PATH_MAX + 8 * len(GUARD_FIELDS)
GUARD_MAX = 256
#: (guard pages) after the SPEC: GDB's 1 = the fault handler lets the access through once
LET_THROUGH_OFFSET = GUARD_OFFSET + GUARD_MAX
#: (red zones, docs/heap-errors.md "Red zones") the words after it
REDZONE_FIELDS = ("rz_tail", "rz_quarantine", "rz_errors")
REDZONE_OFFSET = LET_THROUGH_OFFSET + 8
#: the size the fields above need: a recorder's `size` is at least this
CONTROL_SIZE = LET_THROUGH_OFFSET + 8
_INDEX = {name: i for i, name in enumerate(CONTROL_FIELDS)}

UNCONFIGURED, RECORDING, DISABLED, DRAINING = 0, 1, 2, 3
#: why the recorder stopped by itself (control.h's enum mdr_failure)
FAILURES = {1: "GDB did not configure it", 2: "it could not open the dump",
            3: "the dump could not grow (disk full?)", 4: "it ran out of memory"}
#: enum mdr_op, in order: the format's order of the heap operations (control.h checks it against
#: memdump_format.h's, generated from the same table)
OPS = tuple(OPERATIONS)
#: control.h's MDR_CUSTOM_KEY: a custom block's entry in the live-block table has this bit set
CUSTOM_KEY = 1 << 63
_SLOT = struct.Struct("<8Q")


def find_library() -> str | None:
    """The built recorder: $MEMDUMP_RECORDER (a path), else where builtfiles.py looks (the
    build tree, the installed lib/dbgkit/)."""
    explicit = os.environ.get("MEMDUMP_RECORDER")
    if explicit:
        return explicit if os.path.isfile(explicit) else None
    for path in builtfiles.candidates("gdb_ext/recorder", LIBRARY):
        if os.path.isfile(path):
            return path
    return None


class Control:
    """The control block at ADDRESS, read with READ(address, size) and written with WRITE."""

    def __init__(self, address: int, read: Callable[[int, int], bytes],
                 write: Callable[[int, bytes], None]) -> None:
        self.address = address
        self._read = read
        self._write = write
        self.words: tuple[int, ...] = ()

    def load(self) -> Control:
        raw = self._read(self.address, PATH_OFFSET)
        if raw[:8] != MAGIC:
            raise ValueError(f"no recorder control block at {self.address:#x}")
        self.words = struct.unpack_from(f"<{len(CONTROL_FIELDS)}Q", raw)
        return self

    def __getattr__(self, name: str) -> int:
        index = _INDEX.get(name)
        if index is None or not self.words:
            raise AttributeError(name)
        return self.words[index]

    def set(self, **fields: int) -> None:
        for name, value in fields.items():
            self._write(self.address + 8 * _INDEX[name], struct.pack("<Q", value))

    def set_path(self, path: str) -> None:
        data = os.fsencode(path)
        if len(data) >= PATH_MAX:
            raise ValueError(f"dump path longer than {PATH_MAX - 1} bytes")
        self._write(self.address + PATH_OFFSET, data + b"\0")

    def write_raw(self, offset: int, data: bytes) -> None:
        """DATA at byte OFFSET of the block (the guard SPEC after the path)."""
        self._write(self.address + offset, data)


def live_blocks(read: Callable[[int, int], bytes], table: int, capacity: int,
                custom: dict[int, int] | None = None,
                times: dict[int, int] | None = None) -> dict[int, int]:
    """The live malloc'd blocks (address -> size) of the recorder's table: {address, size,
    stack} entries, address 0 empty and 1 deleted. The custom blocks (memdump_api.h: address
    with CUSTOM_KEY set) go to CUSTOM, when given; TIMES, when given, gets each malloc'd block's
    allocation time (the stack word's bits 32 to 62: seconds after the control block's
    `clock_base`)."""
    if not table or not capacity:
        return {}
    words = _table_words(read, table, capacity)
    addrs = words[0::3]
    sizes = words[1::3]
    live = {}
    for a, s in zip(addrs, sizes, strict=False):
        if a > 1:
            if a < CUSTOM_KEY:
                live[a] = s
            elif custom is not None:
                custom[a - CUSTOM_KEY] = s
    if times is not None:
        for a, stack in zip(addrs, words[2::3], strict=False):
            if 1 < a < CUSTOM_KEY:
                times[a] = stack >> 32 & 0x7FFFFFFF
    return live


def _table_words(read: Callable[[int, int], bytes], table: int, capacity: int) -> array:
    words = array("Q")
    step = 1 << 16  # entries per read
    for first in range(0, capacity, step):
        count = min(step, capacity - first)
        words.frombytes(read(table + 24 * first, 24 * count))
    return words


def live_arrays(read: Callable[[int, int], bytes], table: int,
                capacity: int) -> tuple[SortedBlocks, dict[int, int]] | None:
    """live_blocks' answer without a dictionary of the malloc'd blocks: (those blocks sorted,
    the custom blocks), the entries sorted by the scan's library (a Python loop over a table of
    2M entries takes 0.3 s); None when the library is not there."""
    if not table or not capacity:
        return SortedBlocks(array("Q"), array("Q")), {}
    words = _table_words(read, table, capacity)
    addrs, sizes = words[0::3], words[1::3]
    if not sorted_pairs(addrs, sizes):
        return None
    lo = bisect.bisect_right(addrs, 1)  # 0 empty, 1 deleted
    hi = bisect.bisect_left(addrs, CUSTOM_KEY, lo)
    custom = {a - CUSTOM_KEY: s for a, s in zip(addrs[hi:], sizes[hi:], strict=True)}
    return SortedBlocks(addrs[lo:hi], sizes[lo:hi]), custom


@dataclass(frozen=True)
class InFlight:
    """An allocator call some thread is inside of (its slot)."""

    tid: int
    op: str
    args: tuple[int, int, int]
    pcs: tuple[int, ...]


def in_flight(read: Callable[[int, int], bytes], slots: int, count: int) -> list[InFlight]:
    """The calls in progress, by thread id."""
    if not slots or not count:
        return []
    raw = read(slots, _SLOT.size * count)
    calls = []
    for i in range(count):
        tid, op, a0, a1, a2, npcs, pcs, _ = _SLOT.unpack_from(raw, i * _SLOT.size)
        if tid and op and op <= len(OPS):
            stack = array("Q", read(pcs, 8 * npcs)) if npcs else array("Q")
            calls.append(InFlight(tid, OPS[op - 1], (a0, a1, a2), tuple(stack)))
    return sorted(calls, key=lambda c: c.tid)


def frame_pcs(read: Callable[[int, int], bytes], table: int, next_frame: int) -> list[int]:
    """pc of frame id I at index I (index 0 unused)."""
    if not table or next_frame <= 1:
        return [0]
    return list(array("Q", read(table, 8 * next_frame)))


def _written_end(fd: int, size: int) -> int:
    """The end of the last part of the file that holds data, SIZE where the file system does
    not tell: the pages of the recorder's window it never wrote are a hole, which the search
    for the last record then need not read (2 MiB of NUL bytes, 5 ms, at every recording's end)."""
    end = pos = 0
    try:
        while pos < size:
            pos = os.lseek(fd, pos, os.SEEK_DATA)
            end = pos = os.lseek(fd, pos, os.SEEK_HOLE)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data after POS
            return size
    return min(end, size)


def data_end(fd: int) -> int:
    """The offset after the dump's last complete record: the recorder leaves the unused part of
    its last window as NUL bytes, and a record cut by a kill has no newline."""
    end = _written_end(fd, os.fstat(fd).st_size)
    chunk = 1 << 16
    while end > 0:
        start = max(0, end - chunk)
        data = os.pread(fd, end - start, start).rstrip(b"\0")
        if data:
            nl = data.rfind(b"\n")
            if nl >= 0:
                return start + nl + 1
            end = start  # a cut record: look before it
            continue
        end = start
    return 0


@dataclass
class TailState:
    """What a writer appending after the recorder needs: the last SEQ, the next free ids, and
    the frames defined (id -> pc)."""

    seq: int = 0
    events: int = 0
    next_string: int = 1
    next_frame: int = 1
    next_node: int = 1
    frames: dict[int, int] | None = None


def _lines(fd: int, start: int, end: int) -> Iterator[bytes]:
    rest = b""
    pos = start
    while pos < end:
        data = os.pread(fd, min(1 << 20, end - pos), pos)
        if not data:
            break
        pos += len(data)
        parts = (rest + data).split(b"\n")
        rest = parts.pop()
        yield from parts
    if rest:
        yield rest


def read_tail(fd: int, start: int, end: int, state: TailState) -> TailState:
    """Update STATE with the records in [START, END) of the dump (decoded by dumpformat's
    `Numbering`: the SEQ and events counted, the definitions' ids and the frames' pcs read)."""
    frames = state.frames if state.frames is not None else {}
    numbering = Numbering(state.seq, state.events)
    for fl in numbering.records(_lines(fd, start, end), ("s", "f", "n")):
        if fl[0] == b"s":
            state.next_string = max(state.next_string, int(fl[1]) + 1)
        elif fl[0] == b"f":
            frames[int(fl[1])] = int(fl[2], 16)
            state.next_frame = max(state.next_frame, int(fl[1]) + 1)
        else:  # `n`
            state.next_node = max(state.next_node, int(fl[1]) + 1)
    state.seq, state.events = numbering.seq, numbering.events
    state.frames = frames
    return state
