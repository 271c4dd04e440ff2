"""The in-process recorder's lock table read without GDB (core/locktable.py), and the
`contention` table and JSON made from it (docs/contention.md's worked example is the fixture)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from dbgkit.core import locktable
from dbgkit.core.locks import contention
from doc_examples import doc_block
from memdump_analyzer.rules import is_lock_wrapper

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HEADER, TABLE, STACKS, CAPACITY = 0x1000, 0x10000, 0x20000, 8


def _memory(entries: dict[int, list[int]], magic: bytes = b"MDLOCK01", version: int = 2,
            words: int = 16, used: int = 2, dropped: int = 0,
            stacks: dict[int, list[int]] | None = None,
            stacks_dropped: int = 0) -> dict[int, bytes]:
    header = struct.pack("<8s7Q", magic, version, CAPACITY, words, 1, used, dropped, TABLE)
    table = bytearray(CAPACITY * words * 8)
    for slot, values in entries.items():
        struct.pack_into(f"<{len(values)}Q", table, slot * words * 8, *values)
    memory = {HEADER: header, TABLE: bytes(table)}
    if version >= 2:
        memory[HEADER + 64] = struct.pack("<5Q", STACKS if stacks else 0, CAPACITY, 24,
                                          len(stacks or {}), stacks_dropped)
        raw = bytearray(CAPACITY * 24 * 8)
        for slot, values in (stacks or {}).items():
            struct.pack_into(f"<{len(values)}Q", raw, slot * 24 * 8, *values)
        memory[STACKS] = bytes(raw)
    return memory


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
# key, lock, npcs, contended, wait_ns, max_wait_ns, partial, reserved, pcs...
AT_ADD = [0x51, 0x4040A0, 3, 4, 9_000_000, 7_753_000, 0, 0, 0x401236, 0x4012A0, 0x7FFFF7DF018A]
AT_SUB = [0x73, 0x4040A0, 2, 2, 2_795_000, 2_000_000, 1, 0, 0x401256, 0x4012B4]
BEING_WRITTEN = [0x99, 0x4040A0, 0, 1, 10, 10, 0, 0]   # claimed, its frames not written yet
RESOLVED = {
    0x401236: (contention.Frame("add", "/src/pi.c", 21),),
    0x4012A0: (contention.Frame("worker", "/src/pi.c", 40),),
    0x401256: (contention.Frame("lock_counter", "/src/pi.c", 12),
               contention.Frame("sub", "/src/pi.c", 30)),
    0x4012B4: (contention.Frame("worker", "/src/pi.c", 44),),
}


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
                       match="lock table version 3 .16 words per entry, capacity 8. is not one "
                             "this dbgkit reads .version 2."):
        locktable.read_table(_reader(_memory({}, version=3)), HEADER)


def test_no_table_yet_is_no_lock() -> None:
    header = struct.pack("<8s7Q", b"MDLOCK01", 1, CAPACITY, 16, 1, 0, 0, 0)
    assert locktable.read_table(_reader({HEADER: header}), HEADER).locks == []


def test_a_version_1_table_has_no_stacks() -> None:
    table = locktable.read_table(_reader(_memory({3: GLOBAL}, version=1)), HEADER)
    assert [(c.address, c.stacks) for c in table.locks] == [(GLOBAL[0], ())]


def test_waiting_stacks_by_lock_most_contended_first() -> None:
    memory = _memory({3: GLOBAL, 6: RW}, stacks={2: AT_SUB, 5: AT_ADD, 7: BEING_WRITTEN},
                     stacks_dropped=1)
    table = locktable.read_table(_reader(memory), HEADER)
    assert table.stacks_dropped == 1
    rw, counter = table.locks
    assert rw.stacks == ()
    assert counter.stacks == (
        locktable.LockStack(0x4040A0, (0x401236, 0x4012A0, 0x7FFFF7DF018A), 4, 9_000_000,
                            7_753_000, False),
        locktable.LockStack(0x4040A0, (0x401256, 0x4012B4), 2, 2_795_000, 2_000_000, True))
    assert [f.text() for f in contention.stack_frames(counter.stacks[1], RESOLVED)] == [
        "lock_counter /src/pi.c:12", "sub /src/pi.c:30", "worker /src/pi.c:44"]
    assert contention.stack_frames(counter.stacks[0], RESOLVED)[-1].text() == "0x7ffff7df018a"


def _example() -> tuple[locktable.LockTable, dict[int, str], contention.Resolved]:
    memory = _memory({3: GLOBAL, 6: RW}, dropped=3, stacks={2: AT_SUB, 5: AT_ADD})
    table = locktable.read_table(_reader(memory), HEADER)
    return table, {GLOBAL[0]: "counter_lock"}, RESOLVED


def test_counts_json_is_the_fixture_and_the_docs_example() -> None:
    doc = contention.render_counts_json(*_example(), is_wrapper=is_lock_wrapper)
    text = json.dumps(doc, indent=2) + "\n"
    assert text == (FIXTURES / "contention-recorder.json").read_text()
    assert doc_block("contention.md", "### Recorder JSON worked example", "json") == text


def test_counts_table_is_the_docs_example() -> None:
    text = contention.render_counts_table(*_example(), is_wrapper=is_lock_wrapper)
    assert text.endswith("""
lock 2 (counter_lock): waiting stacks
  4 contended, 9.000 ms waited, the longest 7753.000 us:
    add /src/pi.c:21
    worker /src/pi.c:40
    0x7ffff7df018a
  2 contended, 2.795 ms waited, the longest 2000.000 us:
    lock_counter /src/pi.c:12
    sub /src/pi.c:30
    worker /src/pi.c:44
    ... (the walk stopped here)
""")
    assert contention.render_counts_table(*_example(), top_stacks=1,
                                          is_wrapper=is_lock_wrapper).endswith(
        "    0x7ffff7df018a\n  ... 1 more stack(s) (--json lists them all)\n")
    assert "   2 mutex       628705        11          6         0     11.795  1965.833   " \
           "7753.000  0x00000000004040a0 counter_lock" in text
    assert "contention: 3 acquisitions not counted: the table is full" in text
    assert doc_block("contention.md", "### Recorder table worked example") == text
