"""(2.3) The `lk` records: the in-process recorder's lock counts at the end of a dump
(docs/dump-format.md), read into DumpReader.locks; (2.4) the `lw` records, their waiting stacks,
into DumpReader.lock_waits; the reports' lock contention section (docs/report-format.md, whose
worked example is the fixture locks.memdump)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from analyzer_testlib import REPO, run_analyser_before, run_cli
from memdump_analyzer import DumpError, DumpReader, analyze
from memdump_analyzer.dumpfile import Frame, LockRecord
from memdump_analyzer.dumpformat import LockWait
from memdump_analyzer.locknames import lock_names

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LK = "lk 0x7fffffffe268 mutex 314383 0 26416 17542 0 37351829 7963354\n"
RW = "lk 0x55555555a0c0 rwlock 1274235 1233122 1 3137 0 313136000 160567739\n"


def _dump(tmp_path: Path, *records: str) -> Path:
    """example.memdump with RECORDS before its `end`."""
    lines = (FIXTURES / "example.memdump").read_text().splitlines(keepends=True)
    assert lines[0] == "MEMDUMP 2.7\n" and lines[-1].startswith("end ")
    path = tmp_path / "locks.memdump"
    path.write_text("".join(lines[:-1]) + "".join(records) + lines[-1])
    return path


def test_lk_records_are_read(tmp_path: Path) -> None:
    with DumpReader(str(_dump(tmp_path, LK, RW))) as reader:
        list(reader.records())
        assert reader.version == (2, 7)
        assert reader.locks == [
            LockRecord(0x7FFFFFFFE268, "mutex", 314383, 0, 26416, 17542, 0, 37351829, 7963354),
            LockRecord(0x55555555A0C0, "rwlock", 1274235, 1233122, 1, 3137, 0, 313136000,
                       160567739)]
        assert reader.unknown_tags == {}


def test_a_dump_with_lock_counts_reports_as_before(tmp_path: Path) -> None:
    plain = analyze(str(FIXTURES / "example.memdump"))
    counted = analyze(str(_dump(tmp_path, LK)))
    assert [(g.bytes, g.blocks) for g in counted.groups] == [(g.bytes, g.blocks)
                                                             for g in plain.groups]


@pytest.mark.parametrize(("record", "message"), [
    ("lk 0x10 mutex 1 2 3\n", "'lk' record has 5 fields, expected 9 (ADDR KIND LOCKED "
                               "READ_LOCKED CHANGED CONTENDED TRY_BUSY WAIT_NS MAX_WAIT_NS)"),
    ("lk 0x10 mutex 1 0 1 x 0 0 0\n", "malformed CONTENDED 'x' (expected a number)"),
    ("lk 16 mutex 1 0 1 0 0 0 0\n", "malformed ADDR '16' (expected a hex number like 0x1f)"),
    ("lw 0x10 5 1 2\n", "'lw' record has 4 fields, expected 5 (ADDR STACK CONTENDED WAIT_NS "
                        "MAX_WAIT_NS)"),
    ("lw 0x10 99 1 2 3\n", "stack 99 is used before it is defined"),
    ("lw 0x10 1 1 x 3\n", "malformed WAIT_NS 'x' (expected a number)"),
])
def test_bad_lock_records_name_the_line(tmp_path: Path, record: str, message: str) -> None:
    path = _dump(tmp_path, record)
    line = path.read_text().splitlines().index(record.rstrip("\n")) + 1
    with pytest.raises(DumpError) as info, DumpReader(str(path)) as reader:
        list(reader.records())
    assert f"locks.memdump:{line}:" in str(info.value) and message in str(info.value)


def test_lw_records_are_read_with_their_stacks() -> None:
    with DumpReader(str(FIXTURES / "locks.memdump")) as reader:
        list(reader.records())
        assert reader.version == (2, 4) and reader.unknown_tags == {}
        assert [c.address for c in reader.locks] == [0x555555558040, 0x5555555580A0]
        assert reader.lock_waits == [LockWait(0x555555558040, 5, 3, 179909, 87070),
                                     LockWait(0x555555558040, 6, 2, 164415, 97505)]
        assert [(f.function, f.line) for f in reader.stack(6)] == [
            ("wait_at_y", 18), ("waiter", 31), ("start_thread", 442)]


def _doc_block(marker: str, lang: str = "") -> str:
    section = (REPO / "docs" / "report-format.md").read_text().split(marker, 1)[1]
    m = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert m is not None
    return m.group(1)


def test_text_section_is_the_fixture_and_the_docs_example() -> None:
    fixture = (FIXTURES / "locks.report.txt").read_text()
    result = run_cli("locks.memdump", cwd=FIXTURES)
    assert (result.returncode, result.stderr, result.stdout) == (0, "", fixture)
    section = fixture[fixture.index("LOCK CONTENTION"):fixture.index("\nSUMMARY\n") + 1]
    assert _doc_block("`memdump-analyze locks.memdump`, its lock contention section:") == section
    assert section.splitlines()[:4] == [
        "LOCK CONTENTION: 2 locks, counted by the in-process recorder (set memdump locks on)",
        "lock kind          locked   changed  contended  try busy    total ms     avg us      "
        "max us  address            name",
        "   1 mutex             10        10          5         0       0.344     68.864      "
        "97.505  0x555555558040     -",
        "   2 rwlock         1,200         3          0         4       0.000      0.000       "
        "0.000  0x5555555580a0     -"]


def test_max_frames_cuts_the_waiting_stacks() -> None:
    out = run_cli("--max-frames", "1", "locks.memdump", cwd=FIXTURES).stdout
    assert ("lock 1, waiting stack 2 of 2: 2 contended, 0.164 ms waited, the longest 97.505 us\n"
            "    at wait_at_y (sites.c:18)\n    ... 2 more frames\n") in out


def test_json_locks_are_the_fixture_and_the_docs_example() -> None:
    fixture = (FIXTURES / "locks.report.json").read_text()
    result = run_cli("--format", "json", "locks.memdump", cwd=FIXTURES)
    assert (result.returncode, result.stderr, result.stdout) == (0, "", fixture)
    locks = json.loads(fixture)["locks"]
    assert _doc_block("its `locks`:", "json") == json.dumps(locks, indent=2, sort_keys=True) + "\n"
    assert [(lk["kind"], lk["locked"], lk["contended"], [s["contended"] for s in lk["stacks"]])
            for lk in locks] == [("mutex", 10, 5, [3, 2]), ("rwlock", 1200, 0, [])]
    cut = json.loads(run_cli("--format", "json", "--max-frames", "2", "locks.memdump",
                             cwd=FIXTURES).stdout)["locks"]
    assert [f["function"] for f in cut[0]["stacks"][0]["stack"]] == ["wait_at_x", "waiter"]


def test_a_dump_without_lock_records_has_no_section() -> None:
    assert "LOCK CONTENTION" not in run_cli("example.memdump", cwd=FIXTURES).stdout
    assert "locks" not in json.loads(run_cli("--format", "json", "example.memdump",
                                             cwd=FIXTURES).stdout)


def test_a_23_reader_skips_the_waiting_stacks_with_one_warning(tmp_path: Path) -> None:
    dump = FIXTURES / "locks.memdump"
    result = run_analyser_before((2, 4), dump, tmp_path, "lw",
                                 "lw 0x555555558040 5 3 179909 87070")
    # the rest is read as before: the report of the dump without its lw records
    plain = tmp_path / "plain.memdump"
    plain.write_text("".join(line for line in dump.read_text().splitlines(True)
                             if not line.startswith("lw ")))
    new = run_cli(str(plain), cwd=tmp_path)
    assert result.stdout.split("\nSUMMARY\n")[1] == new.stdout.split("\nSUMMARY\n")[1]


# Two waiting stacks of one std::mutex from one line of Queue::push, through a lock_guard and a
# unique_lock (innermost first: __gthread_mutex_lock, std::mutex::lock, then the guard's): the
# C++ library's inlined wrappers are trimmed (rule lock-wrapper-frame) and the two make one
# stack, their counts added; a third from another line stays apart.
WRAPPED = """\
s 20 /src/queue
s 21 /src/queue.cpp
s 22 /usr/include/c++/12/bits/std_mutex.h
s 23 Queue::push(int)
s 24 __gthread_mutex_lock
s 25 std::mutex::lock()
s 26 std::lock_guard<std::mutex>::lock_guard(std::mutex&)
s 27 std::unique_lock<std::mutex>::lock()
s 28 std::unique_lock<std::mutex>::unique_lock(std::mutex&)
s 29 main
f 20 0x555555556010 20 0x2010 29 21 40
n 20 0 20
f 21 0x555555556100 20 0x2100 23 21 12
n 21 20 21
f 22 0x555555556101 20 0x2101 26 22 229
n 22 21 22
f 23 0x555555556102 20 0x2102 25 22 100
n 23 22 23
f 24 0x555555556103 20 0x2103 24 22 749
n 24 23 24
lw 0x555555558040 24 4 4000 2000
f 25 0x555555556104 20 0x2104 28 22 69
n 25 21 25
f 26 0x555555556105 20 0x2105 27 22 139
n 26 25 26
f 27 0x555555556106 20 0x2106 25 22 100
n 27 26 27
f 28 0x555555556107 20 0x2107 24 22 749
n 28 27 28
lw 0x555555558040 28 1 3000 3000
f 29 0x555555556200 20 0x2200 23 21 15
n 29 20 29
f 30 0x555555556201 20 0x2201 26 22 229
n 30 29 30
lw 0x555555558040 30 2 500 400
"""


def test_lock_wrappers_are_trimmed_and_their_stacks_merged(tmp_path: Path) -> None:
    a = analyze(str(_dump(tmp_path, LK.replace("0x7fffffffe268", "0x555555558040"), WRAPPED)))
    (lock,) = a.locks
    got = [(s.contended, s.wait_ns, s.max_wait_ns,
            [(f.function, f.line) for f in s.stack]) for s in lock.stacks]
    assert got == [(5, 7000, 3000, [("Queue::push(int)", 12), ("main", 40)]),
                   (2, 500, 400, [("Queue::push(int)", 15), ("main", 40)])]


def test_locks_are_named_by_symbol_or_by_the_block_that_holds_them(tmp_path: Path) -> None:
    """A global (at its start or inside it) from the module's data symbols, found at the lock's
    address minus the module's load bias; else the live heap block holding the lock, with the
    frame that allocated it; else nothing."""
    module = tmp_path / "app"
    module.write_bytes(b"")
    symbols = {str(module): [(0x4040, 0x4068, "site_lock"), (0x4080, 0x4100, "table")]}
    base = 0x555555554000
    stack = [Frame(base + 0x1200, str(module), 0x1200, "make_account", "/src/bank.c", 12)]
    names = lock_names(
        [base + 0x4040, base + 0x40A8, 0x5555555592B0, 0x7FFFFFFFE000],
        {str(module): base, "/gone/libx.so": 0x7FFFF7000000},
        [(0x5555555592A0, 64, 7)], lambda node: stack if node == 7 else [],
        symbols=lambda m: symbols[m])
    assert names == {base + 0x4040: "site_lock", base + 0x40A8: "table+40",
                     0x5555555592B0: "+16 in the 64-byte block from make_account (bank.c:12)"}
