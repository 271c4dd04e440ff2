"""The one decoder of a dump's text lines (dumpdecode.py): what it yields for each record, with
short records expanded to their `e` records' fields and SEQ numbered, and the exact error of a
line it cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest
from memdump_analyzer import DumpError, DumpReader
from memdump_analyzer.dumpdecode import decode

_HEAD = "MEMDUMP 2.5\ni recorder in-process\ns 1 main\nf 1 0x401000 0 0x1000 1 0 0\nn 1 0 1\n"
_BODY = ("t 7\n+ 1 0x1000 16\n+c 1 0x2000 4 8\n- 1 0x1000\n-n 1 0x0\nc 5 4096\n"
         "e 5 9 malloc 1 0x3000 24\np 6 signal SIGTERM\nt 8\n+r 1 0x4000 0x2000 64\n"
         "end 8 killed SIGTERM\n")


def _dump(tmp_path: Path, body: str) -> str:
    path = tmp_path / "d.memdump"
    path.write_text(_HEAD + body)
    return str(path)


def test_decode_yields_events_as_e_records_numbered(tmp_path: Path) -> None:
    with DumpReader(_dump(tmp_path, _BODY)) as reader:
        got = [(seq, fl) for seq, fl, _ in decode(reader)]
        assert reader.tid == b"8"
        assert reader.clock == (5, 4096)  # the `c` record went to the reader
    assert got == [
        (1, [b"e", b"", b"7", b"malloc", b"1", b"0x1000", b"16"]),
        (2, [b"e", b"", b"7", b"calloc", b"1", b"0x2000", b"4", b"8"]),
        (3, [b"e", b"", b"7", b"free", b"1", b"-", b"0x1000"]),
        (4, [b"e", b"", b"7", b"delete", b"1", b"-", b"0x0"]),
        (5, [b"e", b"5", b"9", b"malloc", b"1", b"0x3000", b"24"]),
        (6, [b"p", b"6", b"signal", b"", b"SIGTERM"]),
        (7, [b"e", b"", b"8", b"realloc", b"1", b"0x4000", b"0x2000", b"64"]),
        (8, [b"end", b"8", b"killed", b"", b"SIGTERM"]),
    ]


def test_decode_with_state_yields_clock_samples(tmp_path: Path) -> None:
    with DumpReader(_dump(tmp_path, _BODY)) as reader:
        got = [(seq, fl[0]) for seq, fl, _ in decode(reader, state=True)]
    assert got[4] == (4, b"c")
    assert [tag for _, tag in got].count(b"e") == 6


def test_records_write_the_short_records_seq(tmp_path: Path) -> None:
    with DumpReader(_dump(tmp_path, _BODY)) as reader:
        seqs = [fl[1] for fl in reader.records()]
    assert seqs == [b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8"]


@pytest.mark.parametrize(("body", "message"), [
    ("+ 1 0x1000 16\n",
     ":6: '+' record before any 't' record (the thread of its event is unknown)"),
    ("t 7\n+ 1 0x1000\n", ":7: '+' record has 2 fields, expected 3 (STACK RESULT SIZE)"),
    ("t 7\n- 1 0x1000\ne 3 7 malloc 1 0x1 1\n", ":8: event 3 follows event 1 (events are missing)"),
    ("t 7\ne x 7 malloc 1 0x1 1\n", ":7: malformed SEQ 'x' (expected a number)"),
    ("t 7\n\n", ":7: empty line (expected a record)"),
])
def test_decode_errors_name_the_line(tmp_path: Path, body: str, message: str) -> None:
    path = _dump(tmp_path, body)
    with DumpReader(path) as reader, pytest.raises(DumpError) as e:
        list(decode(reader))
    assert str(e.value) == path + message
