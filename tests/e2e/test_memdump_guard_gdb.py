"""Guard pages from GDB (docs/heap-errors.md): `memdump --guard SPEC` and `set memdump guard
SPEC` write the SPEC into the in-process recorder's control block; the faulting access stops GDB
at the instruction (the frame's file:line is the marked one). A bad SPEC is one line.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from memdump_analyzer.dumpfile import DumpReader
from memdump_e2e import REPO, gdb_argv, marker, program, run_gdb

pytestmark = pytest.mark.one_recorder
SOURCE = "guard_faults.c"
SOURCE_DIR = REPO / "tests" / "programs"


@pytest.mark.parametrize("how", ["option", "setting"])
def test_the_overflow_stops_gdb_at_its_line(tmp_path: Path, how: str) -> None:
    dump = tmp_path / "g.memdump"
    commands = (["set memdump guard all", f"memdump -o {dump}"] if how == "setting"
                else [f"memdump --guard all -o {dump}"])
    run = run_gdb(gdb_argv([*commands, "run", "frame"], [program("guard_faults"), "past-end"]),
                  dump)
    site = marker(SOURCE, "past-end", "ERROR")
    assert "Program received signal SIGSEGV" in run.output, run.describe()
    assert run.stdout.count(f"past_end () at {SOURCE_DIR / site.file}:{site.line}\n") == 2, \
        run.describe()


@pytest.mark.parametrize(("spec", "message"), [
    ("all,bogus", "memdump: --guard all,bogus: 'bogus' is not all, N%, MIN-MAX, under, over, "
                  "align16, tag:NAME or fn:NAME"),
    ("fn:a,fn:b", "memdump: --guard fn:a,fn:b: 'fn:b': a second function"),
    ("fn:", "memdump: --guard fn:: 'fn:': fn:NAME needs a function's name"),
    ("5%,all", "memdump: --guard 5%,all: 'all': a second share (all or N%)"),
    ("all,,under", "memdump: --guard all,,under: an empty term"),
    ("0%", "memdump: --guard 0%: '0%': a share is 0.0001% to 100%, at most 4 decimals"),
    ("0.00001%", "memdump: --guard 0.00001%: '0.00001%': a share is 0.0001% to 100%, at most 4 "
                 "decimals"),
    ("100.01%", "memdump: --guard 100.01%: '100.01%': a share is 0.0001% to 100%, at most 4 "
                "decimals"),
    ("9-3", "memdump: --guard 9-3: '9-3': MIN is larger than MAX"),
])
def test_a_bad_spec_is_one_line(tmp_path: Path, spec: str, message: str) -> None:
    run = run_gdb(gdb_argv([f"memdump --guard {spec} -o {tmp_path / 'g.memdump'}"],
                           [program("guard_faults")]))
    assert run.returncode == 1
    assert run.stderr.splitlines()[0] == message, run.describe()
    assert not (tmp_path / "g.memdump").exists()


def _report(tmp_path: Path, mode: str, name: str = "guard_faults", spec: str = "all",
            ) -> list[str]:
    dump = tmp_path / "g.memdump"
    run = run_gdb(gdb_argv([f"memdump --guard {spec} -o {dump}", "run"],
                           [program(name), mode]), dump)
    return [re.sub(r"thread \d+", "thread T", re.sub(r"0x[0-9a-f]+", "0x?", line))
            for line in run.memdump_lines()
            if line.startswith(("memdump: Inv", "memdump:  ", "memdump:    "))
            and not re.search(r"libc|clone3|pthread_create|\?\?\?", line)]


def _at(kind: str, mode: str) -> str:
    site = marker(SOURCE, mode, kind)
    return f"{Path(site.file).name}:{site.line}"


def test_an_overflow_is_reported_as_valgrind_does(tmp_path: Path) -> None:
    assert _report(tmp_path, "past-end")[:6] == [
        "memdump: Invalid write of size 4 at 0x? in thread T",
        f"memdump:    at 0x?: past_end ({_at('ERROR', 'past-end')})",
        f"memdump:    by 0x?: main ({_at('CALL', 'past-end')})",
        "memdump:  Address 0x? is 0 bytes after a block of size 40 alloc'd",
        f"memdump:    at 0x?: past_end ({_at('ALLOC', 'past-end')})",
        f"memdump:    by 0x?: main ({_at('CALL', 'past-end')})",
    ]


def test_an_underflow_before_a_new_array(tmp_path: Path) -> None:
    site = {kind: marker("heap_errors_cpp.cpp", "new-array-underflow", kind).line
            for kind in ("ERROR", "ALLOC")}
    fn = "(anonymous namespace)::new_array_underflow()"
    assert _report(tmp_path, "new-array-underflow", "heap_errors_cpp", "all,under")[:5] == [
        "memdump: Invalid write of size 4 at 0x? in thread T",
        f"memdump:    at 0x?: {fn} (heap_errors_cpp.cpp:{site['ERROR']})",
        "memdump:    by 0x?: main(int, char**) (heap_errors_cpp.cpp:108)",
        "memdump:  Address 0x? is 4 bytes before a block of size 32 alloc'd",
        f"memdump:    at 0x?: {fn} (heap_errors_cpp.cpp:{site['ALLOC']})",
    ]


def test_a_read_past_the_end_in_a_loop(tmp_path: Path) -> None:
    assert _report(tmp_path, "read-loop")[:6] == [
        "memdump: Invalid read of size 1 at 0x? in thread T",
        f"memdump:    at 0x?: read_loop ({_at('ERROR', 'read-loop')})",
        f"memdump:    by 0x?: main ({_at('CALL', 'read-loop')})",
        "memdump:  Address 0x? is 0 bytes after a block of size 24 alloc'd",
        f"memdump:    at 0x?: read_loop ({_at('ALLOC', 'read-loop')})",
        f"memdump:    by 0x?: main ({_at('CALL', 'read-loop')})",
    ]


def test_a_use_after_free_in_a_second_thread(tmp_path: Path) -> None:
    assert _report(tmp_path, "uaf-thread") == [
        "memdump: Invalid read of size 4 at 0x? in thread T",
        f"memdump:    at 0x?: late_reader ({_at('ERROR', 'uaf-thread')})",
        "memdump:  Address 0x? is 12 bytes inside a block of size 32 free'd",
        f"memdump:    at 0x?: use_after_free_in_thread ({_at('FREE', 'uaf-thread')})",
        f"memdump:    by 0x?: main ({_at('CALL', 'uaf-thread')})",
        "memdump:  Block was alloc'd",
        f"memdump:    at 0x?: use_after_free_in_thread ({_at('ALLOC', 'uaf-thread')})",
        f"memdump:    by 0x?: main ({_at('CALL', 'uaf-thread')})",
    ]


def test_in_batch_every_error_is_reported_once_and_the_program_runs_on(tmp_path: Path) -> None:
    """scripts/memdump.sh (gdb -batch): each faulting access reported and let through once, the
    program to its end, an `ae` record for each in the dump."""
    dump = tmp_path / "all.memdump"
    report = tmp_path / "r.json"
    proc = subprocess.run([str(REPO / "scripts" / "memdump.sh"), "--guard", "all", "--no-compact",
                           "-o", str(dump), "--json", str(report), str(program("guard_faults")),
                           "all"], capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout) == (0, "done\n"), proc.stderr
    with DumpReader(str(dump)) as reader:
        list(reader.records())
        errors = [(e.access, e.offset, e.relation, e.size, e.state) for e in reader.access_errors]
    assert errors == [("write", 0, "after", 40, "allocated"), ("read", 0, "after", 24, "allocated"),
                      ("read", 1, "after", 24, "allocated"), ("read", 12, "inside", 32, "freed")]
    # the JSON report's errors: the access's line, the block's allocation and free lines
    rows = [(e["kind"], e["block"]["bytes"], e["block"]["offset"], e["block"]["relation"],
             _line(e["stack"]), _line(e["allocated_at"]["stack"]),
             e["freed_at"] and _line(e["freed_at"]["stack"]))
            for e in json.loads(report.read_text())["errors"]]
    assert rows == [
        ("invalid-write", 40, 0, "after", _at("ERROR", "past-end"), _at("ALLOC", "past-end"), None),
        ("invalid-read", 24, 0, "after", _at("ERROR", "read-loop"), _at("ALLOC", "read-loop"),
         None),
        ("invalid-read", 24, 1, "after", _at("ERROR", "read-loop"), _at("ALLOC", "read-loop"),
         None),
        ("invalid-read", 32, 12, "inside", _at("ERROR", "uaf-thread"), _at("ALLOC", "uaf-thread"),
         _at("FREE", "uaf-thread")),
    ]


def _line(stack: list[dict]) -> str:
    return f"{Path(stack[0]['file']).name}:{stack[0]['line']}"


def test_error_exitcode_counts_the_access_errors(tmp_path: Path) -> None:
    """valgrind's --error-exitcode: the four access errors make the status; without them
    (past-end guarded out by its size) the program's own."""
    def status(spec: str) -> int:
        return subprocess.run([str(REPO / "scripts" / "memdump.sh"), "--guard", spec,
                               "--error-exitcode=7", "-o", str(tmp_path / f"{spec}.memdump"),
                               str(program("guard_faults")), "uaf-thread"],
                              capture_output=True, text=True, timeout=300).returncode
    assert (status("all"), status("1000-2000")) == (7, 0)


@pytest.mark.parametrize(("spec", "errors"), [
    ("fn:read_loop", [("read", 0), ("read", 1)]),   # a static function: GDB finds its code
    ("fn:past_end", []),                            # not on the stack: read_loop's not guarded
    ("fn:read_loop,1000-2000", []),                 # its 24 bytes out of the size range
])
def test_fn_guards_the_blocks_allocated_under_a_function(
        tmp_path: Path, spec: str, errors: list[tuple[str, int]]) -> None:
    dump = tmp_path / "fn.memdump"
    proc = subprocess.run([str(REPO / "scripts" / "memdump.sh"), "--guard", spec, "--no-compact",
                           "-o", str(dump), str(program("guard_faults")), "read-loop"],
                          capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout) == (0, "done\n"), proc.stderr
    with DumpReader(str(dump)) as reader:
        list(reader.records())
        assert [(e.access, e.offset) for e in reader.access_errors] == errors


def test_fn_names_a_function_that_exists(tmp_path: Path) -> None:
    dump = tmp_path / "fn.memdump"
    proc = subprocess.run([str(REPO / "scripts" / "memdump.sh"), "--guard", "fn:no_such_fn",
                           "-o", str(dump), str(program("guard_faults")), "read-loop"],
                          capture_output=True, text=True, timeout=300)
    assert "memdump: guard pages: fn:no_such_fn: no such function (without GDB, only an " \
           "exported one is found); recording without guard pages" in proc.stderr.splitlines()
