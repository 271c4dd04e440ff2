"""(2.3) The `lk` records: the in-process recorder's lock counts at the end of a dump
(docs/dump-format.md), read into DumpReader.locks; the report reads such a dump as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from memdump_analyzer import DumpError, DumpReader, analyze
from memdump_analyzer.dumpfile import LockRecord

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LK = "lk 0x7fffffffe268 mutex 314383 0 26416 17542 0 37351829 7963354\n"
RW = "lk 0x55555555a0c0 rwlock 1274235 1233122 1 3137 0 313136000 160567739\n"


def _dump(tmp_path: Path, *records: str) -> Path:
    """example.memdump with RECORDS before its `end`."""
    lines = (FIXTURES / "example.memdump").read_text().splitlines(keepends=True)
    assert lines[0] == "MEMDUMP 2.4\n" and lines[-1].startswith("end ")
    path = tmp_path / "locks.memdump"
    path.write_text("".join(lines[:-1]) + "".join(records) + lines[-1])
    return path


def test_lk_records_are_read(tmp_path: Path) -> None:
    with DumpReader(str(_dump(tmp_path, LK, RW))) as reader:
        list(reader.records())
        assert reader.version == (2, 4)
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
])
def test_bad_lk_records_name_the_line(tmp_path: Path, record: str, message: str) -> None:
    path = _dump(tmp_path, record)
    line = path.read_text().splitlines().index(record.rstrip("\n")) + 1
    with pytest.raises(DumpError) as info, DumpReader(str(path)) as reader:
        list(reader.records())
    assert f"locks.memdump:{line}:" in str(info.value) and message in str(info.value)
