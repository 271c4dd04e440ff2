"""Red zones and the quarantine (`scripts/memdump.sh --redzones`, docs/heap-errors.md "Red
zones") on tests/programs/redzone_errors.c: each corruption is one `hc` record with its exact
kind, block size, offset and span, found at the marked free or realloc (or at exit, for a write
after free into a block still in the quarantine), reported with the block's allocation (and
free) lines, in the text and the JSON report, and memdump.sh exits with 99; the heavy correct
program (every allocator call, threads, a fork) has none and keeps its exit status.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import REPO, analyze_raw, gdb_argv, marker, program, run_gdb
from test_heap_error_programs import ROWS, Row

pytestmark = pytest.mark.one_recorder
SCRIPT = REPO / "scripts" / "memdump.sh"
SOURCE = "redzone_errors.c"
TIMEOUT = 300


def run(tmp_path: Path, mode: str, *options: str) -> tuple[subprocess.CompletedProcess[str],
                                                              list[str], dict]:
    dump = tmp_path / f"{mode}.memdump"
    report = tmp_path / f"{mode}.json"
    proc = subprocess.run([str(SCRIPT), *options, "--no-compact", "--report", "--json",
                           str(report), "-o", str(dump), str(program("redzone_errors")), mode],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert "Traceback" not in proc.stderr, proc.stderr
    records = [line.split(" ", 3)[3] for line in dump.read_text(errors="replace").splitlines()
               if line.startswith("hc ")]
    return proc, records, json.loads(report.read_text())


def first_line(stack: list[dict], source: str = SOURCE) -> int | None:
    return next((f["line"] for f in stack if f["file"] and f["file"].endswith(source)), None)


# mode: the record's KIND BLOCK SIZE OFFSET BYTES FOUND (BLOCK left out), the report's sentence,
# the JSON kind
CASES = [
    ("slack", "overrun 20 0 1 free",
     "heap block overrun: 1 byte after the 20-byte block", "heap-block-overrun"),
    ("memcpy", "overrun 24 0 8 free",
     "heap block overrun: 8 bytes after the 24-byte block", "heap-block-overrun"),
    ("realloc", "overrun 10 0 2 free",
     "heap block overrun: 2 bytes after the 10-byte block", "heap-block-overrun"),
    ("underrun", "underrun 16 0 1 free",
     "heap block underrun: 1 byte before the 16-byte block", "heap-block-underrun"),
    ("freed", "freed 32 8 4 exit",
     "write after free into the 32-byte block", "write-after-free"),
    ("evicted", "freed 32 8 4 quarantine",
     "write after free into the 32-byte block", "write-after-free"),
]


@pytest.mark.parametrize(("mode", "record", "sentence", "kind"), CASES,
                         ids=[c[0] for c in CASES])
def test_corruption_found(tmp_path: Path, mode: str, record: str, sentence: str,
                          kind: str) -> None:
    proc, records, report = run(tmp_path, mode, "--redzones")
    assert proc.returncode == 99, proc.stderr
    assert (f"memdump.sh: heap corruption found (red zones) in {tmp_path / mode}.memdump: exit "
            "status 99") in proc.stderr
    # one record, without the block's address: reported once (not again at exit)
    assert [" ".join(r.split(" ")[:1] + r.split(" ")[2:]) for r in records] == [record]
    (error,) = [e for e in report["errors"] if e["kind"] == kind]
    assert error["allocated_at"]["op"] == "malloc"
    block = "freed" if mode == "evicted" else mode
    assert first_line(error["allocated_at"]["stack"]) == marker(SOURCE, block, "ALLOC").line
    assert sentence in error["message"]
    headline = next(line for line in proc.stderr.splitlines()
                    if line.startswith("HEAP CORRUPTION 1 of 1"))
    assert sentence in headline
    if block == "freed":
        tid = headline.split(" in thread ")[1].split(",")[0]
        assert headline.endswith(f"(bytes 8 to 11 changed) in thread {tid}, " + (
            "found at exit" if mode == "freed" else
            f"found as it left the quarantine, after event {error['seq']}"))
        assert first_line(error["freed_at"]["stack"]) == marker(SOURCE, block, "FREE").line
        assert error["stack"] == []
    else:
        assert error["op"] == ("realloc" if mode == "realloc" else "free")
        assert first_line(error["stack"]) == marker(SOURCE, mode, "FOUND").line
        assert error["freed_at"] is None
        assert f"found at its {error['op']} at event 2:" in headline


def test_heavy_correct_program(tmp_path: Path) -> None:
    proc, records, report = run(tmp_path, "heavy", "--redzones")
    assert proc.returncode == 0, proc.stderr
    assert records == []
    assert not [e for e in report["errors"] if e["kind"] in ("heap-block-overrun",
                                                             "heap-block-underrun",
                                                             "write-after-free")]
    assert "heavy: usable 13" in proc.stdout  # malloc_usable_size: the user block's size


def test_without_redzones_nothing(tmp_path: Path) -> None:
    proc, records, _ = run(tmp_path, "slack")
    assert proc.returncode == 0, proc.stderr
    assert records == []


@pytest.mark.parametrize("value", ["0", "4097", "x", ""])
def test_bad_redzones(value: str) -> None:
    proc = subprocess.run([str(SCRIPT), f"--redzones={value}", "true"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == (f"memdump.sh: --redzones={value}: N is a number of bytes, 1 to "
                           "4096\n")


def test_check_heap_at_a_stop(tmp_path: Path) -> None:
    """GDB's `memdump check-heap` before the free: the overrun is found then, once (not again
    at the free), and the analyser says it was found by the check."""
    dump = tmp_path / "check.memdump"
    found = marker(SOURCE, "slack", "FOUND").line
    argv = gdb_argv(["set environment MEMDUMP_REDZONE 16", "set memdump check-at-stop off",
                     f"memdump -o {dump}", f"break {SOURCE}:{found}", "run",
                     "memdump check-heap", "continue"],
                    [program("redzone_errors"), "slack"])
    result = run_gdb(argv, dump)
    assert ("memdump check-heap: 1 zone(s) found changed (hc records in the dump; "
            "memdump-analyze reports them with their stacks)") in result.output
    assert ("  heap block overrun: 1 byte(s) changed, from 0 bytes after the end of the "
            "20-byte block at 0x") in result.output
    records = [line.split(" ")[3:] for line in dump.read_text(errors="replace").splitlines()
               if line.startswith("hc ")]
    assert records == [["overrun", records[0][1], "20", "0", "1", "check"]]
    text = analyze_raw(dump).stdout
    assert "heap block overrun: 1 byte after the 20-byte block at " in text
    assert "found by memdump check-heap, after event 1" in text


def test_check_heap_without_redzones(tmp_path: Path) -> None:
    dump = tmp_path / "off.memdump"
    found = marker(SOURCE, "slack", "FOUND").line
    argv = gdb_argv([f"memdump -o {dump}", f"break {SOURCE}:{found}", "run",
                     "memdump check-heap", "continue"], [program("redzone_errors"), "slack"])
    result = run_gdb(argv, dump)
    assert ("memdump: red zones are off (scripts/memdump.sh --redzones, "
            "MEMDUMP_REDZONE)") in result.output


#: the heap-error programs' modes red zones find (tests/fixtures/heap_errors.tsv): the record's
#: FOUND; the others are left to guard pages (a read changes nothing) or to the events (frees)
FOUND_BY_MODE = {
    ("heap_errors", "past-end-write"): "free", ("heap_errors", "memcpy-overflow"): "free",
    ("heap_errors", "slack-overflow"): "free", ("heap_errors", "uaf-write"): "exit",
    ("heap_errors", "uaf-thread"): "exit", ("heap_errors", "stale-reused"): "exit",
    ("heap_errors_cpp", "new-array-underflow"): "exit",
}
_VG_AUX = re.compile(r"(\d+) bytes (after|before|inside) a block of size (\d+) (alloc'd|free'd)")
KIND_OF = {"after": "overrun", "before": "underrun", "inside": "freed"}


@pytest.mark.parametrize("row", [r for r in ROWS if (r.program, r.mode) in FOUND_BY_MODE],
                         ids=lambda r: f"{r.program}-{r.mode}")
def test_heap_error_programs_against_valgrind(tmp_path: Path, row: Row) -> None:
    """valgrind's first error's block and offset, found after the fact with both stacks: the
    overflow's at the block's marked free, a write after free into a block the quarantine
    still holds (stale-reused's is no longer handed to the next module) at exit."""
    dump = tmp_path / "h.memdump"
    report = tmp_path / "h.json"
    proc = subprocess.run([str(SCRIPT), "--redzones", "--no-compact", "--json", str(report),
                           "-o", str(dump), str(program(row.program)), row.mode],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 99, proc.stderr
    vg = _VG_AUX.fullmatch(row.vg_aux)
    assert vg is not None
    offset, relation, size = int(vg.group(1)), vg.group(2), int(vg.group(3))
    (record,) = [line.split(" ")[3:] for line in dump.read_text(errors="replace").splitlines()
                 if line.startswith("hc ")]
    kind, _block, got_size, got_offset, got_bytes, found = record
    assert (kind, int(got_size), found) == (KIND_OF[relation], size, FOUND_BY_MODE[
        (row.program, row.mode)])
    # valgrind names the access's first byte: before the block, the farthest changed one
    assert (int(got_offset) + int(got_bytes) if kind == "underrun" else int(got_offset)) == offset
    (error,) = json.loads(report.read_text())["errors"][-1:]
    assert first_line(error["allocated_at"]["stack"], row.source) == row.site("ALLOC").line
    if kind == "freed":
        assert first_line(error["freed_at"]["stack"], row.source) == row.site("FREE").line
    elif found == "free":
        assert first_line(error["stack"], row.source) == marker(row.source, row.mode,
                                                                "FREE").line


@pytest.mark.parametrize("name", ["heap_errors", "heap_errors_cpp"])
@pytest.mark.parametrize("guard", [(), ("--guard", "5%")], ids=["redzones", "with-guard"])
def test_clean_programs_have_no_corruption(tmp_path: Path, name: str,
                                           guard: tuple[str, ...]) -> None:
    """The heavy correct programs (C++ containers, new and delete, threads) run to their end
    with red zones, and with sampled guard pages placing some of their blocks too."""
    dump = tmp_path / "c.memdump"
    proc = subprocess.run([str(SCRIPT), "--redzones", *guard, "--no-compact", "-o", str(dump),
                           str(program(name)), "clean"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    text = dump.read_text(errors="replace")
    assert not [line for line in text.splitlines() if line.startswith(("hc ", "ae "))]


def _leak_kinds(tmp_path: Path, *options: str, case: str) -> dict[str, tuple[int, int]]:
    report = tmp_path / "kinds.json"
    proc = subprocess.run([str(SCRIPT), *options, "--no-compact", "--json", str(report), "-o",
                           str(tmp_path / "kinds.memdump"), str(program("reach_kinds")), case],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    kinds = json.loads(report.read_text())["summary"]["leak_kinds"]
    return {k: (v["blocks"], v["bytes"]) for k, v in kinds.items() if v["blocks"]}


@pytest.mark.parametrize(("case", "expected"), [
    ("global", {"reachable": (1, 100)}),
    ("list", {"definite": (1, 48), "indirect": (4, 192)}),
    ("interior", {"possible": (1, 200)}),
])
def test_leak_kinds_see_the_program_s_blocks(tmp_path: Path, case: str,
                                             expected: dict[str, tuple[int, int]]) -> None:
    """The pointer scan and the leak report have the program's blocks, their addresses and
    sizes, not the padded ones: the same kinds, blocks and bytes with red zones as without (a
    pointer into a red-zoned block's middle is still `possible`)."""
    assert _leak_kinds(tmp_path, case=case) == expected
    assert _leak_kinds(tmp_path, "--redzones", case=case) == expected


@pytest.mark.parametrize(("options", "status"), [((), 99), (("--error-exitcode=7",), 7),
                                                 (("--error-exitcode=0",), 0)])
def test_exit_status_of_a_compacted_dump(tmp_path: Path, options: tuple[str, ...],
                                         status: int) -> None:
    """The exit status as valgrind's --error-exitcode (0: the program's), the dump compacted as
    memdump.sh leaves it."""
    dump = tmp_path / "x.memdump"
    proc = subprocess.run([str(SCRIPT), "--redzones", *options, "--report", "-o", str(dump),
                           str(program("redzone_errors")), "slack"],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "MEMDUMP_COMPACT": "1"})
    assert proc.returncode == status, proc.stderr
    said = f"memdump.sh: heap corruption found (red zones) in {dump}: exit status {status}"
    assert (said in proc.stderr) == (status != 0)
    assert not dump.read_bytes().startswith(b"MEMDUMP")  # compacted


def test_a_child_s_corruption(tmp_path: Path) -> None:
    """--children: the child inherits the red zones (MEMDUMP_REDZONE) and its own dump has the
    overrun, found at its free in the child; the run's exit status says it."""
    dump = tmp_path / "parent.memdump"
    proc = subprocess.run([str(SCRIPT), "--redzones", "--children", "--no-compact", "-o",
                           str(dump), str(program("redzone_errors")), "child"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 99, proc.stderr
    children = sorted(tmp_path.glob("parent.*.memdump"))
    assert len(children) == 1, proc.stderr
    assert (f"memdump.sh: heap corruption found (red zones) in {children[0]}: exit status 99"
            in proc.stderr)
    records = [line.split(" ")[3:] for line in children[0].read_text(errors="replace")
               .splitlines() if line.startswith("hc ")]
    assert [r[:1] + r[2:] for r in records] == [["overrun", "20", "0", "1", "free"]]
    assert "hc " not in dump.read_text(errors="replace")


def test_bad_environment_value_records_without_redzones(tmp_path: Path) -> None:
    dump = tmp_path / "bad.memdump"
    proc = subprocess.run([str(SCRIPT), "--no-compact", "-o", str(dump),
                           str(program("redzone_errors")), "slack"],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "MEMDUMP_REDZONE": "16,x"})
    assert proc.returncode == 0, proc.stderr
    assert ("memdump: MEMDUMP_REDZONE is N (1 to 4096 bytes) or N,QUARANTINE_BYTES; recording "
            "without red zones\n") in proc.stderr
    assert "hc " not in dump.read_text(errors="replace")
