"""Dump format 2.0: the short event records `t`, `+` and `-` (malloc and free, SEQ implicit);
2.5: `+c` and `+r` (calloc and realloc).

A dump written with them is read as the same dump written with `e` records: the same report, the
same records, the same errors at the lines of the short records.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from analyzer_testlib import Dump, F, analyser_before, main_at
from memdump_analyzer import DumpError, DumpReader, analyze, dumps_json, render_json, render_text
from memdump_analyzer import native as core


def _program(d: Dump) -> Dump:
    """Two threads interleaved, every kind of event: malloc/free (short when `d.short`), calloc,
    realloc, a failed malloc, free(NULL), a double free, a process event; leaks from both."""
    a, b = main_at(10), [F("worker", "/src/app.c", 30), *main_at(40)]
    d.malloc("0x1000", 16, stack=a)
    d.malloc("0x2000", 32, stack=b, tid=101)
    d.malloc("0x3000", 48, stack=a)
    d.e("calloc", "0x4000", 4, 8, stack=b, tid=101)
    d.free("0x1000", stack=a)
    d.malloc("0x0", 1 << 40, stack=b, tid=101)
    d.e("realloc", "0x5000", "0x3000", 64, stack=a)
    d.free("0x0", stack=b, tid=101)
    d.free("0x2000", stack=b, tid=101)
    d.free("0x2000", stack=a)  # double free: its "freed at" is the short free before
    d.p("signal", "SIGTERM")
    d.malloc("0x6000", 8, stack=a, tid=102)
    d.end("killed", "SIGTERM")
    return d


def _reports(path: str) -> tuple[str, str]:
    a = analyze(path, symbolize=False)
    return render_text(a).replace(path, "DUMP"), dumps_json(render_json(a)).replace(path, "DUMP")


def _error_of(path: str) -> str:
    with pytest.raises(DumpError) as info:
        analyze(path, symbolize=False)
    return str(info.value)


def test_short_records_read_as_the_e_records_they_stand_for(tmp_path: Path) -> None:
    long_path = _program(Dump(header="MEMDUMP 2.0")).write(tmp_path, "long.memdump")
    short = _program(Dump(header="MEMDUMP 2.0", short=True))
    short_path = short.write(tmp_path, "short.memdump")
    text = short.text()
    # the short dump does use them: a `t` record per change of thread, 7 `+` and 4 `-` records
    events = [tag for tag in (line.split()[0] for line in text.splitlines())
              if tag in ("t", "+", "-", "e")]
    assert events == ["t", "+", "t", "+", "t", "+", "e", "-", "t", "+", "e", "-", "-",
                      "t", "-", "t", "+"]
    with DumpReader(long_path) as r1, DumpReader(short_path) as r2:
        assert list(r2.records()) == list(r1.records())
    assert _reports(short_path) == _reports(long_path)


def test_the_report_of_the_short_dump(tmp_path: Path) -> None:
    path = _program(Dump(header="MEMDUMP 2.0", short=True)).write(tmp_path)
    a = analyze(path, symbolize=False)
    assert (a.events, a.calls["malloc"], a.calls["free"], a.calls["calloc"]) == (11, 5, 4, 1)
    assert (a.leaked_bytes, a.leaked_blocks, a.last_seq) == (32 + 64 + 8, 3, 13)
    [error] = a.errors
    assert (error.kind, error.seq, error.tid, error.pointer, error.freed_seq) == (
        "double-free", 10, 100, 0x2000, 9)
    assert a.signals == [(11, "SIGTERM")]


def test_a_short_record_before_any_t_record(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 2.0")
    line = d.raw("+ 0 0x10 8")
    path = d.write(tmp_path)
    assert _error_of(path) == (
        f"{path}:{line}: '+' record before any 't' record (the thread of its event is unknown)"
    )


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ("+ 0 0x10", "'+' record has 2 fields, expected 3 (STACK RESULT SIZE)"),
        ("- 0 - 0x10", "'-' record has 3 fields, expected 2 (STACK PTR)"),
        ("+ 9 0x10 8", "stack 9 is used before it is defined"),
        ("- x 0x10", "malformed STACK 'x' (expected a number)"),
        ("+ 0 0x10 -8", "malformed SIZE '-8' (expected a number)"),
        ("- 0 16", "malformed PTR '16' (expected a hex number like 0x1f)"),
        # (2.5) calloc's and realloc's
        ("+c 0 0x10 8", "'+c' record has 3 fields, expected 4 (STACK RESULT NMEMB SIZE)"),
        ("+r 0 0x10 0x20", "'+r' record has 3 fields, expected 4 (STACK RESULT PTR SIZE)"),
        ("+r 0 0x10 16 8", "malformed PTR '16' (expected a hex number like 0x1f)"),
        ("+c 0 0x10 x 8", "malformed NMEMB 'x' (expected a number)"),
        ("+r 9 0x10 0x0 8", "stack 9 is used before it is defined"),
        ("+p 0 0x10 64 8", "'+p' record has 4 fields, expected 5 (STACK RESULT ALIGN SIZE RC)"),
        ("+m 0 0x10 64 x", "malformed SIZE 'x' (expected a number)"),
    ],
)
def test_a_malformed_short_record_is_named_at_its_line(
    tmp_path: Path, record: str, message: str
) -> None:
    d = Dump(header="MEMDUMP 2.0", short=True)
    d.malloc("0x20", 4)  # `t 100` then `+ 0 0x20 4`
    line = d.raw(record)
    path = d.write(tmp_path)
    assert _error_of(path) == f"{path}:{line}: {message}"


@pytest.mark.parametrize(
    ("record", "message"),
    [("t", "'t' record has 0 fields, expected 1 (TID)"),
     ("t 1 2", "'t' record has 2 fields, expected 1 (TID)"),
     ("t x", "malformed TID 'x' (expected a number)")],
)
def test_a_malformed_t_record(tmp_path: Path, record: str, message: str) -> None:
    d = Dump(header="MEMDUMP 2.0")
    line = d.raw(record)
    path = d.write(tmp_path)
    assert _error_of(path) == f"{path}:{line}: {message}"


def test_sequenced_records_after_short_ones_count_them(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 2.0", short=True)
    d.malloc("0x10", 8)
    d.free("0x10")
    line = d.raw("e 4 100 malloc 0 0x20 8")  # SEQ 3 expected: the short records were 1 and 2
    path = d.write(tmp_path)
    assert _error_of(path) == f"{path}:{line}: event 4 follows event 2 (events are missing)"


def test_the_thread_of_short_records_survives_other_records(tmp_path: Path) -> None:
    """`e`, `p` and `end` records of another thread leave the thread of short records."""
    d = Dump(header="MEMDUMP 2.0", short=True)
    d.malloc("0x10", 8, tid=7)
    d.e("calloc", "0x20", 1, 8, tid=9)
    d.p("signal", "SIGINT")
    d.raw("- 0 0x10")
    d.seq += 1
    path = d.write(tmp_path)
    with DumpReader(path) as reader:
        assert [fl[:4] for fl in reader.records()] == [
            [b"e", b"1", b"7", b"malloc"],
            [b"e", b"2", b"9", b"calloc"],
            [b"p", b"3", b"signal", b""],
            [b"e", b"4", b"7", b"free"],
        ]


def _resizes(d: Dump) -> Dump:
    """(2.5) calloc and realloc in every case the replay tells apart: calloc of 0 and failed,
    realloc(NULL, n), grown in place and moved, realloc(p, 0), a failed realloc, one of a freed
    block; the aligned allocations, a posix_memalign failed; from two threads, between malloc and
    free records."""
    a, b = main_at(10), [F("grow", "/src/app.c", 20), *main_at(40)]
    d.e("calloc", "0x1000", 4, 8, stack=a)
    d.e("calloc", "0x0", 1 << 40, 8, stack=b, tid=101)
    d.e("calloc", "0x1100", 0, 8, stack=b, tid=101)
    d.e("realloc", "0x2000", "0x0", 24, stack=b, tid=101)
    d.e("realloc", "0x2000", "0x2000", 48, stack=b, tid=101)
    d.malloc("0x3000", 16, stack=a)
    d.e("realloc", "0x4000", "0x2000", 4000, stack=b)
    d.e("realloc", "0x0", "0x1000", 1 << 40, stack=a)  # failed: 0x1000 stays live
    d.e("realloc", "0x0", "0x3000", 0, stack=a)  # realloc(p, 0): freed
    d.free("0x1100", stack=b, tid=101)
    d.e("realloc", "0x5000", "0x3000", 8, stack=a)  # of a freed block: an error
    d.e("posix_memalign", "0x6000", 64, 100, 0, stack=b, tid=101)
    d.e("posix_memalign", "0x0", 3, 100, 22, stack=b, tid=101)  # EINVAL
    d.e("aligned_alloc", "0x7000", 64, 128, stack=a)
    d.e("memalign", "0x8000", 4096, 10, stack=a)
    d.free("0x7000", stack=a)
    d.end("exit", "0")
    return d


def test_calloc_and_realloc_short_records_read_as_their_e_records(tmp_path: Path) -> None:
    long_path = _resizes(Dump(header="MEMDUMP 2.5")).write(tmp_path, "long.memdump")
    short = _resizes(Dump(header="MEMDUMP 2.5", short=True))
    short_path = short.write(tmp_path, "short.memdump")
    tags = [line.split()[0] for line in short.text().splitlines()
            if line.split()[0] in ("t", "+", "-", "+c", "+r", "+p", "+l", "+m", "e")]
    assert tags == ["t", "+c", "t", "+c", "+c", "+r", "+r", "t", "+", "+r", "+r", "+r", "t", "-",
                    "t", "+r", "t", "+p", "+p", "t", "+l", "+m", "-"]
    assert {"+p 4 0x0 3 100 22", "+l 2 0x7000 64 128"} <= set(short.text().splitlines())
    assert "+r 4 0x2000 0x0 24" in short.text().splitlines()
    with DumpReader(long_path) as r1, DumpReader(short_path) as r2:
        assert list(r2.records()) == list(r1.records())
    assert _reports(short_path) == _reports(long_path)
    a = analyze(short_path, symbolize=False)
    assert (a.events, a.calls["calloc"], a.calls["realloc"], a.calls["posix_memalign"],
            a.calls["aligned_alloc"], a.calls["memalign"]) == (16, 3, 6, 2, 1, 1)
    assert (a.leaked_bytes, a.leaked_blocks) == (32 + 4000 + 8 + 100 + 10, 5)
    [error] = a.errors
    assert (error.kind, error.seq, error.tid, error.pointer) == ("invalid-realloc", 11, 100, 0x3000)


def test_calloc_and_realloc_short_records_in_python_as_in_c(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _resizes(Dump(header="MEMDUMP 2.5", short=True)).write(tmp_path)
    native = _reports(path)
    assert core.last_fallback is None  # the C library read every record
    monkeypatch.setenv("MEMDUMP_NATIVE", "0")
    assert _reports(path) == native



def test_a_24_reader_stops_at_the_first_calloc_or_realloc_short_record(tmp_path: Path) -> None:
    """docs/dump-format.md, version 2.5: the line and the message a 2.4 analyser gives."""
    old = analyser_before((2, 5), tmp_path)
    assert "VERSION: tuple[int, int] = (2, 4)" in (
        old / "memdump_analyzer" / "dumpformat.py").read_text()
    d = _resizes(Dump(header="MEMDUMP 2.5", short=True))
    path = d.write(tmp_path)
    first = next(i for i, line in enumerate(d.text().splitlines(), 1) if line.startswith("+c"))
    result = subprocess.run([sys.executable, "-m", "memdump_analyzer", path], cwd=tmp_path,
                            env={"PYTHONPATH": str(old)}, capture_output=True, text=True,
                            check=False)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"memdump-analyze: {path}:{first}: malformed record (tag '+c')\n"
    # a 2.5 dump without calloc or realloc events it reads as this analyser does
    plain = Dump(header="MEMDUMP 2.5", short=True)
    plain.malloc("0x10", 8, stack=main_at(3))
    plain.end("exit", "0")
    path = plain.write(tmp_path, "plain.memdump")
    result = subprocess.run([sys.executable, "-m", "memdump_analyzer", path], cwd=tmp_path,
                            env={"PYTHONPATH": str(old)}, capture_output=True, text=True,
                            check=False)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == render_text(analyze(path, symbolize=False))
