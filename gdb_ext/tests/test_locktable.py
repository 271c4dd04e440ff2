"""The in-process recorder's lock table read without GDB (core/locktable.py), and the
`contention` table and JSON made from it (docs/contention.md's worked example is the fixture)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from dbgkit.core import contention, locktable
from doc_examples import doc_block

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HEADER, TABLE, CAPACITY = 0x1000, 0x10000, 8


def _memory(entries: dict[int, list[int]], magic: bytes = b"MDLOCK01", version: int = 1,
            words: int = 16, used: int = 2, dropped: int = 0) -> dict[int, bytes]:
    header = struct.pack("<8s7Q", magic, version, CAPACITY, words, 1, used, dropped, TABLE)
    table = bytearray(CAPACITY * words * 8)
    for slot, values in entries.items():
        struct.pack_into(f"<{len(values)}Q", table, slot * words * 8, *values)
    return {HEADER: header, TABLE: bytes(table)}


def _reader(memory: dict[int, bytes]):  # type: ignore[no-untyped-def]
    def read(address: int, size: int) -> bytes:
        data = memory[address]
        assert len(data) == size
        return data
    return read


# key, kind, locked, read_locked, owner_changes, contended, wait_ns, max_wait_ns, try_busy, owner
GLOBAL = [0x4040A0, 1, 628705, 0, 11, 6, 11_795_000, 7_753_000, 0, 8690]
RW = [0x7FFFF7F94080, 2, 1000, 900, 40, 30, 3_000_000, 400_000, 5, 8691]
UNUSED = [0x4040E0, 1, 0, 0, 0, 0, 0, 0, 0, 0]   # a slot taken, nothing counted yet


def test_read_table_orders_most_contended_first() -> None:
    table = locktable.read_table(_reader(_memory({3: GLOBAL, 6: RW, 1: UNUSED})), HEADER)
    assert (table.enabled, table.used, table.dropped) == (True, 2, 0)
    assert [c.address for c in table.locks] == [RW[0], GLOBAL[0]]
    rw = table.locks[0]
    assert (rw.kind, rw.read_locked, rw.contended, rw.avg_wait_ns) == ("rwlock", 900, 30, 100_000)
    assert table.locks[1].last_owner == 8690


def test_refusals_are_one_sentence() -> None:
    with pytest.raises(locktable.LockTableError, match=r"no lock table at 0x1000 \(magic b'XXXX"):
        locktable.read_table(_reader(_memory({}, magic=b"XXXXXXXX")), HEADER)
    with pytest.raises(locktable.LockTableError,
                       match="lock table version 2 .16 words per entry, capacity 8. is not one "
                             "this dbgkit reads .version 1."):
        locktable.read_table(_reader(_memory({}, version=2)), HEADER)


def test_no_table_yet_is_no_lock() -> None:
    header = struct.pack("<8s7Q", b"MDLOCK01", 1, CAPACITY, 16, 1, 0, 0, 0)
    assert locktable.read_table(_reader({HEADER: header}), HEADER).locks == []


def _example() -> tuple[locktable.LockTable, dict[int, str]]:
    table = locktable.read_table(_reader(_memory({3: GLOBAL, 6: RW}, dropped=3)), HEADER)
    return table, {GLOBAL[0]: "counter_lock"}


def test_counts_json_is_the_fixture_and_the_docs_example() -> None:
    text = json.dumps(contention.render_counts_json(*_example()), indent=2) + "\n"
    assert text == (FIXTURES / "contention-recorder.json").read_text()
    assert doc_block("contention.md", "### Recorder JSON worked example", "json") == text


def test_counts_table_is_the_docs_example() -> None:
    text = contention.render_counts_table(*_example())
    assert "   2 mutex       628705        11          6         0     11.795  1965.833   " \
           "7753.000  0x00000000004040a0 counter_lock" in text
    assert "contention: 3 acquisitions not counted: the table is full" in text
    assert doc_block("contention.md", "### Recorder table worked example") == text
