"""dbgkit.core.recorder: the in-process recorder's control block, tables and dump tail, read from
buffers laid out as gdb_ext/recorder/control.h lays them out."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest
from dbgkit.core import recorder
from dbgkit.core.recorder import (
    CONTROL_FIELDS,
    CONTROL_SIZE,
    GUARD_FIELDS,
    GUARD_OFFSET,
    LET_THROUGH_OFFSET,
    REDZONE_FIELDS,
    REDZONE_OFFSET,
    Control,
    TailState,
    data_end,
    frame_pcs,
    in_flight,
    live_arrays,
    live_blocks,
    read_tail,
)

REPO = Path(__file__).resolve().parents[2]


class Memory:
    """A sparse fake of a process's memory: address -> bytes."""

    def __init__(self) -> None:
        self.bytes = bytearray(1 << 16)
        self.base = 0x10000

    def read(self, address: int, size: int) -> bytes:
        off = address - self.base
        if off < 0 or off + size > len(self.bytes):
            raise OSError(5, "unmapped")
        return bytes(self.bytes[off:off + size])

    def write(self, address: int, data: bytes) -> None:
        off = address - self.base
        self.bytes[off:off + len(data)] = data


def test_field_list_matches_control_h() -> None:
    """Every field of control.h's struct, in order, at 8 * its index (the header's comments)."""
    text = (REPO / "gdb_ext" / "recorder" / "control.h").read_text()
    start = text.index("struct mdr_control {")
    body = re.sub(r"/\*.*?\*/", "", text[start:text.index("};", start)], flags=re.S)
    names = []
    for line in body.splitlines()[1:]:
        line = line.strip().rstrip(";")
        if line:
            names.append(line.split()[-1].split("[")[0])
    assert names[:len(CONTROL_FIELDS)] == list(CONTROL_FIELDS)
    assert names[len(CONTROL_FIELDS):] == ["path", *GUARD_FIELDS, "guard", "guard_let_through",
                                           *REDZONE_FIELDS]
    assert (GUARD_OFFSET, LET_THROUGH_OFFSET, CONTROL_SIZE, REDZONE_OFFSET) == (
        32 * 8 + 4096 + 7 * 8, 32 * 8 + 4096 + 7 * 8 + 256, 32 * 8 + 4096 + 7 * 8 + 256 + 8,
        32 * 8 + 4096 + 7 * 8 + 256 + 8)


def test_control_reads_and_writes_fields() -> None:
    mem = Memory()
    addr = 0x10100
    mem.write(addr, b"MDREC001" + struct.pack("<Q", 1))
    mem.write(addr + 8 * CONTROL_FIELDS.index("events"), struct.pack("<Q", 12345))
    control = Control(addr, mem.read, mem.write).load()
    assert (control.version, control.events, control.seq) == (1, 12345, 0)
    control.set(seq=7, end=4096)
    control.set_path("/tmp/x.memdump")
    control.load()
    assert (control.seq, control.end) == (7, 4096)
    assert mem.read(addr + 256, 15) == b"/tmp/x.memdump\0"


def test_control_refuses_what_is_no_control_block() -> None:
    mem = Memory()
    with pytest.raises(ValueError, match="no recorder control block at 0x10100"):
        Control(0x10100, mem.read, mem.write).load()


def test_live_blocks_skip_empty_and_deleted_entries() -> None:
    mem = Memory()
    table = 0x11000
    entries = [(0, 0, 0), (0x5000, 24, 3), (1, 99, 0), (0x6000, 0, 4)]
    for i, entry in enumerate(entries):
        mem.write(table + 24 * i, struct.pack("<3Q", *entry))
    assert live_blocks(mem.read, table, len(entries)) == {0x5000: 24, 0x6000: 0}
    assert live_blocks(mem.read, 0, 0) == {}


def test_live_arrays_are_live_blocks_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan's way to the table: the entries sorted by the library, the empty and deleted
    ones and the custom blocks (bit 63) cut off the ends; the same blocks as live_blocks."""
    monkeypatch.setenv("MEMDUMP_BUILD_DIR", os.environ.get("MEMDUMP_BUILD_DIR",
                                                           str(REPO / "build")))
    mem = Memory()
    table = 0x11000
    entries = [(0, 0, 0), (0x7000, 24, 3), (1, 99, 0), (0x5000, 0, 4),
               (recorder.CUSTOM_KEY | 0x5010, 16, 5), (0x6000, 8, 4), (0, 0, 0), (1, 1, 1)]
    for i, entry in enumerate(entries):
        mem.write(table + 24 * i, struct.pack("<3Q", *entry))
    blocks, custom = live_arrays(mem.read, table, len(entries))
    custom_too: dict[int, int] = {}
    assert dict(blocks) == live_blocks(mem.read, table, len(entries), custom_too)
    assert list(blocks.items()) == [(0x5000, 0), (0x6000, 8), (0x7000, 24)]
    assert custom == custom_too == {0x5010: 16}
    assert blocks[0x6000] == 8 and 0x6008 not in blocks
    empty, none = live_arrays(mem.read, 0, 0)
    assert (len(empty), none) == (0, {})


def test_in_flight_calls_by_thread() -> None:
    mem = Memory()
    slots, pcs = 0x12000, 0x13000
    mem.write(pcs, struct.pack("<2Q", 0x401000, 0x402000))
    mem.write(slots, struct.pack("<8Q", 77, 0, 0, 0, 0, 0, 0, 0))  # idle
    mem.write(slots + 64, struct.pack("<8Q", 42, 1 + recorder.OPS.index("realloc"), 0x5000, 64, 0,
                                      2, pcs, 0))
    [call] = in_flight(mem.read, slots, 2)
    assert (call.tid, call.op, call.args, call.pcs) == (42, "realloc", (0x5000, 64, 0),
                                                         (0x401000, 0x402000))


def test_frame_pcs_by_id() -> None:
    mem = Memory()
    mem.write(0x14000, struct.pack("<3Q", 0, 0x401000, 0x402000))
    assert frame_pcs(mem.read, 0x14000, 3) == [0, 0x401000, 0x402000]


def test_data_end_skips_the_unwritten_window_and_a_cut_record(tmp_path: Path) -> None:
    path = tmp_path / "d.memdump"
    path.write_bytes(b"MEMDUMP 1.3\ne 1 5 malloc 0 0x10 8\ne 2 5 fr" + b"\0" * 70000)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert data_end(fd) == len(b"MEMDUMP 1.3\ne 1 5 malloc 0 0x10 8\n")
    finally:
        os.close(fd)


def test_data_end_over_holes(tmp_path: Path) -> None:
    """The recorder's unwritten window is a hole in the file (pages never written): the last
    record is found before it, and after an earlier hole (a page a killed thread reserved and
    never wrote) as well."""
    path = tmp_path / "d.memdump"
    head = b"MEMDUMP 2.5\n+ 4 0x10 8\n"
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(8 << 20)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert data_end(fd) == len(head)
    finally:
        os.close(fd)
    with open(path, "r+b") as fh:
        fh.seek(4 << 20)
        fh.write(b"- 5 0x10\n+ 4 0x20 8")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert data_end(fd) == (4 << 20) + len(b"- 5 0x10\n")
    finally:
        os.close(fd)


def test_read_tail_takes_the_last_seq_ids_and_frames(tmp_path: Path) -> None:
    path = tmp_path / "d.memdump"
    text = (b"MEMDUMP 1.3\ns 4 /lib/x.so\nf 9 0x401000 4 0x1000 0 0 0\nn 12 0 9\n"
            b"e 30 5 malloc 12 0x10 8\n\0\0\0p 31 exec /bin/true\n")
    path.write_bytes(text)
    fd = os.open(path, os.O_RDONLY)
    try:
        state = read_tail(fd, 0, len(text), TailState())
    finally:
        os.close(fd)
    assert (state.seq, state.events, state.next_string, state.next_frame, state.next_node) == \
        (31, 1, 5, 10, 13)
    assert state.frames == {9: 0x401000}


def test_read_tail_counts_short_records(tmp_path: Path) -> None:
    """`+` and `-` (format 2.0) have no SEQ of their own: each is the next one."""
    path = tmp_path / "d.memdump"
    text = (b"MEMDUMP 2.0\nn 1 0 0\ne 7 5 calloc 1 0x10 1 8\nt 5\n+ 1 0x20 8\n- 1 0x20\n"
            b"t 6\n\0\0+ 1 0x30 8\ne 11 6 realloc 1 0x40 0x30 16\n- 1 0x40\n")
    path.write_bytes(text)
    fd = os.open(path, os.O_RDONLY)
    try:
        state = read_tail(fd, 0, len(text), TailState())
        assert (state.seq, state.events) == (12, 6)
        state = read_tail(fd, text.index(b"t 6"), len(text), TailState(seq=9))
        assert (state.seq, state.events) == (12, 3)
    finally:
        os.close(fd)
