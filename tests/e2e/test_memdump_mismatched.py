"""Mismatched deallocations (dump format 2.1): memdump reports what valgrind memcheck reports on
the same program ("Mismatched free() / delete / delete []"), error for error: the releasing
operation, the allocating one, the block's size, and both stacks' file:line, with either recorder.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from memdump_e2e import (
    GDB_TIMEOUT,
    POLL_DEADLINE,
    Site,
    analyze,
    analyze_raw,
    frame_site,
    gdb_argv,
    marker,
    program,
    read_dump,
    read_line,
    record,
    wait_for_output,
)

#: GDB's lines once an attached process records (either recorder)
STARTED = ("memdump: in-process recorder: loaded", "recording with breakpoints",
           "memdump: recording process")

SOURCE = "mismatched_free.cpp"
TIMEOUT = 120

if shutil.which("valgrind") is None:
    pytest.fail("valgrind is missing: scripts/setup.sh installs it", pytrace=False)

#: valgrind's name of the allocator function at the top of a stack -> the dump's operation
VALGRIND_OPS = {
    "malloc": "malloc",
    "free": "free",
    "realloc": "realloc",
    "operator new(unsigned long)": "new",
    "operator new[](unsigned long)": "new[]",
    "operator delete(void*)": "delete",
    "operator delete(void*, unsigned long)": "delete",
    "operator delete[](void*)": "delete[]",
    "operator delete[](void*, unsigned long)": "delete[]",
}

#: (releasing op, allocating op, bytes, marker name) of each mismatch, in program order
EXPECTED = [
    ("free", "new", 4, "free-of-new"),
    ("free", "new[]", 10, "free-of-new-array"),
    ("realloc", "new", 8, "realloc-of-new"),
    ("delete", "malloc", 12, "delete-of-malloc"),
    ("delete", "new[]", 14, "delete-of-new-array"),
    ("delete[]", "new", 8, "delete-array-of-new"),
    ("delete[]", "malloc", 20, "delete-array-of-malloc"),
]

Mismatch = tuple[str, str, int, tuple[Site, ...], tuple[Site, ...]]


def _sites(frames: list[tuple[str | None, int]]) -> tuple[Site, ...]:
    return tuple(Site(Path(f).name, line) for f, line in frames if f)


def _valgrind(tmp: Path) -> list[Mismatch]:
    """valgrind's mismatches: (releasing op, allocating op, bytes, the release's stack, the
    allocation's stack), stacks as the file:line of their frames with a source."""
    xml = tmp / "valgrind.xml"
    proc = subprocess.run(["valgrind", "-q", "--xml=yes", f"--xml-file={xml}",
                           str(program("mismatched_free"))], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr
    found = []
    for error in ET.parse(xml).getroot().iter("error"):
        assert error.findtext("kind") == "MismatchedFree", ET.tostring(error)
        assert error.findtext("what") == "Mismatched free() / delete / delete []"
        released, allocated = error.findall("stack")
        aux = error.findtext("auxwhat") or ""
        words = aux.split()
        # Address 0x4d6dc80 is 0 bytes inside a block of size 4 alloc'd
        assert words[2:11] == ["is", "0", "bytes", "inside", "a", "block", "of", "size",
                               words[10]] and words[11] == "alloc'd", aux
        stacks = [[(f.findtext("file"), int(f.findtext("line") or 0)) for f in s.iter("frame")]
                  for s in (released, allocated)]
        found.append((VALGRIND_OPS[released.find("frame").findtext("fn")],
                      VALGRIND_OPS[allocated.find("frame").findtext("fn")], int(words[10]),
                      _sites(stacks[0]), _sites(stacks[1])))
    return found


def _memdump(dump: Path) -> list[Mismatch]:
    record("mismatched_free", dump=dump)
    report = analyze(dump)
    assert report.leaked == (0, 0)
    found = []
    for e in report.errors():
        assert e["kind"] == "mismatched-free", e
        at = e["allocated_at"]
        found.append((e["op"], at["op"], at["bytes"],
                      _sites([(f["file"], f["line"]) for f in e["stack"]]),
                      _sites([(f["file"], f["line"]) for f in at["stack"]])))
    return found


def test_mismatches_are_valgrind_s(tmp_path: Path, dump: Path) -> None:
    outer = marker(SOURCE, "mismatches", "CALL")
    calls = {name: marker(SOURCE, name, "CALL") for _, _, _, name in EXPECTED}
    expected = [(op, alloc_op, size,
                 (marker(SOURCE, name, "MISMATCH"), calls[name], outer),
                 (marker(SOURCE, name, "ALLOC"), calls[name], outer))
                for op, alloc_op, size, name in EXPECTED]
    assert _valgrind(tmp_path) == expected
    assert _memdump(dump) == expected


def test_text_report(dump: Path) -> None:
    """The text report of one mismatch, as valgrind words it: both stacks, and the block."""
    record("mismatched_free", dump=dump)
    text = analyze_raw(dump).stdout
    assert text.count("ERROR ") == 7
    free, alloc = marker(SOURCE, "free-of-new", "MISMATCH"), marker(SOURCE, "free-of-new", "ALLOC")
    callers = [f"    by mismatches() ({marker(SOURCE, 'free-of-new', 'CALL')})",
               f"    by main(int, char**) ({marker(SOURCE, 'mismatches', 'CALL')})"]
    start = text.index("ERROR 1 of 7: mismatched free of 0x")
    lines = text[start:].splitlines()[:8]
    assert lines[0].endswith(": the block was allocated by new")
    assert lines[1:4] == [f"    at free_of_new() ({free})", *callers]
    assert lines[4].startswith("  Address 0x")
    assert lines[4].endswith(" is 0 bytes inside a block of size 4 alloc'd by new at event "
                             f"{int(lines[0].split('(event ')[1].split(',')[0]) - 1}:")
    assert lines[5:8] == [f"    at free_of_new() ({alloc})", *callers]
    assert ("\n    frees:           12 blocks (4 by free; 7 by delete and delete[]; "
            "1 by realloc)\n") in text
    assert ("\n    calls:           malloc 5, realloc 1, free 4, new 5, new[] 3, delete 4, "
            "delete[] 3\n") in text


def test_failing_new_is_recorded_and_recording_goes_on(dump: Path) -> None:
    """Each form of operator new that fails: the throwing forms (std::bad_alloc caught by the
    program) and a nothrow one (NULL) are written with RESULT 0x0 at their line; the exception
    objects' malloc and free are the program's outermost calls; the thread is recorded as before
    afterwards (the in-process recorder throws once its state is clear, docs/recorder.md)."""
    record("mismatched_free", "bad-alloc", dump=dump)
    facts = read_dump(dump)
    huge = str(1 << 62)
    events = [(e[3], e[5] if e[5] in ("-", "0x0") else "block", e[-1]) for e in facts.events]
    exception = [("malloc", "block", "136"), ("free", "-", "block")]
    stdout_buffer = ("malloc", "block", "4096")
    assert [(op, result, "block" if arg.startswith("0x") else arg)
            for op, result, arg in events] == [
        ("malloc", "block", "72704"),  # libstdc++'s emergency exception pool
        ("new[]", "0x0", huge), exception[0], stdout_buffer, exception[1],
        ("new", "0x0", huge), *exception,
        ("new", "0x0", huge), *exception,
        ("new[]", "0x0", huge),
        ("new", "block", "4"), ("delete", "-", "block"), ("new[]", "block", "24"),
    ]
    failed = [e for e in facts.events if e[5] == "0x0"]
    sites = [Site(f.file, f.line) for f in (facts.stack(int(e[4]))[0] for e in failed)]
    assert sites == [marker(SOURCE, name, "FAIL")
                     for name in ("new-array", "new", "aligned-new", "nothrow-new-array")]
    report = analyze(dump)
    assert report.errors() == []
    assert report.leak_sites() == {marker(SOURCE, "after-bad-alloc"): (24, 1)}
    assert report.summary["calls"]["new"] == 3 and report.summary["calls"]["new[]"] == 3


def test_attached_process(dump: Path) -> None:
    """A running process recorded from the attach (the in-process recorder redirects the C++
    operators' GOT entries too, got.c): the same seven mismatches."""
    proc = subprocess.Popen([str(program("mismatched_free")), "serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        assert read_line(proc, POLL_DEADLINE) == "ready"
        argv = gdb_argv([f"memdump -o {dump}", "continue", "detach"], attach=proc.pid)
        gdb = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        try:
            head = "".join(wait_for_output(gdb, STARTED))
            assert proc.stdin is not None
            proc.stdin.write(b"run\n")
            proc.stdin.flush()
            assert read_line(proc, POLL_DEADLINE) == "ok"
            os.kill(proc.pid, signal.SIGINT)
            out, _ = gdb.communicate(timeout=GDB_TIMEOUT)
        finally:
            if gdb.poll() is None:
                gdb.kill()
                gdb.wait()
        assert gdb.returncode == 0, head + out
        assert read_dump(dump).info["attached"] == "1"
        report = analyze(dump)
        found = [(e["op"], e["allocated_at"]["op"], e["allocated_at"]["bytes"],
                  frame_site(e["stack"][0]), frame_site(e["allocated_at"]["stack"][0]))
                 for e in report.errors()]
        assert found == [(op, alloc_op, size, marker(SOURCE, name, "MISMATCH"),
                          marker(SOURCE, name, "ALLOC")) for op, alloc_op, size, name in EXPECTED]
        proc.stdin.write(b"exit\n")
        proc.stdin.flush()
        assert proc.wait(timeout=GDB_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
