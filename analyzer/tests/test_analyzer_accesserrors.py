"""Heap access errors (`ae` records, format 2.6: docs/dump-format.md, "Heap access errors"): read
from the worked example's fixture (guard.memdump, heap_errors past-end-write recorded with
`--guard all`), its malformed forms named with their line, and the text report's section, as
valgrind words the error, with the access's and the allocation's stacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from analyzer_testlib import run_cli
from memdump_analyzer import DumpError, DumpReader
from memdump_analyzer.accesserrors import AccessError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GUARD = FIXTURES / "guard.memdump"


def test_the_worked_example_is_read() -> None:
    with DumpReader(str(GUARD)) as reader:
        list(reader.records())
    assert reader.access_errors == [AccessError(
        414, "write", 0x7efff5c0f000, 6, 0x7efff5c0efd8, 40, 0, "after", "allocated")]
    assert reader.unknown_tags == {}


@pytest.mark.parametrize(("record", "message"), [
    ("ae 1 write 0x10 6 0x8 8 0 after\n", "'ae' record has 8 fields, expected 9 (TID ACCESS "
                                          "ADDR STACK BLOCK SIZE OFFSET RELATION STATE)"),
    ("ae 1 poke 0x10 6 0x8 8 0 after allocated\n",
     "'ae' record: bad ACCESS RELATION STATE 'poke after allocated'"),
    ("ae 1 write 0x10 6 0x8 8 0 beside allocated\n",
     "'ae' record: bad ACCESS RELATION STATE 'write beside allocated'"),
    ("ae 1 write 0x10 99 0x8 8 0 after allocated\n", "stack 99 is used before it is defined"),
    ("ae 1 write 16 6 0x8 8 0 after allocated\n",
     "malformed ADDR '16' (expected a hex number like 0x1f)"),
])
def test_bad_records_name_the_line(tmp_path: Path, record: str, message: str) -> None:
    lines = GUARD.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("ae "))
    lines[at] = record
    path = tmp_path / "bad.memdump"
    path.write_text("".join(lines))
    with pytest.raises(DumpError) as info, DumpReader(str(path)) as reader:
        list(reader.records())
    assert f"bad.memdump:{at + 1}:" in str(info.value) and message in str(info.value)


def test_the_report_says_it_as_valgrind() -> None:
    proc = run_cli(str(GUARD))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = lines.index("HEAP ACCESS ERROR 1 of 1, caught by a guard page: Invalid write at "
                        "0x7efff5c0f000 in thread 414")
    assert lines[start + 1:start + 8] == [
        "    at past_end_write (heap_errors.c:41)",
        "    by main (heap_errors.c:264)",
        "    ... 3 frames of the C/C++ runtime (--show-runtime-frames)",
        "  Address 0x7efff5c0f000 is 0 bytes after a block of size 40 alloc'd by malloc at "
        "event 1:",
        "    at past_end_write (heap_errors.c:39)",
        "    by main (heap_errors.c:264)",
        "    ... 3 frames of the C/C++ runtime (--show-runtime-frames)",
    ]
    assert lines[start - 1] == "" and lines[start + 8] == ""
    assert "    access errors:   1 (caught by a guard page: the heap access errors above)" in lines
