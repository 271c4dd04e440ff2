"""Guard pages (`scripts/memdump.sh --guard SPEC`, docs/heap-errors.md) on the heap-error programs:
the recorder's fault handler writes an `ae` record for each overflow, underflow or use after free
of a guarded block, GDB (batch) lets the access through once and the program runs to its end;
the first error is held to valgrind's
first error in tests/fixtures/heap_errors.tsv (the access, the side, the offset and the block's
size, the faulting line, the lines that allocated and freed the block) but for the access's size,
which a fault does not tell. The slack overflow is caught with the exact placement (`all`) and
missed with `align16`, whose 16-aligned 20-byte block ends 12 bytes before its guard page; the
heavy correct programs run to the end with every block guarded.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from memdump_analyzer.accesserrors import AccessError
from memdump_analyzer.dumpfile import DumpReader
from memdump_e2e import REPO, DumpFacts, Site, analyze_raw, marker, program, read_dump
from test_heap_error_programs import ROWS, SOURCES, Row

# guard pages are the in-process recorder's: one run each
pytestmark = pytest.mark.one_recorder
SCRIPT = REPO / "scripts" / "memdump.sh"
TIMEOUT = 300
BY_MODE = {(row.program, row.mode): row for row in ROWS}
#: valgrind's auxwhat: "0 bytes after a block of size 40 alloc'd"
_AUX = re.compile(r"(\d+) bytes (after|before|inside) a block of size (\d+) (alloc'd|free'd)")


def guarded(tmp_path: Path, spec: str, name: str, mode: str,
            ) -> tuple[subprocess.CompletedProcess[str], DumpFacts, list[AccessError]]:
    dump = tmp_path / f"{mode}.memdump"
    proc = subprocess.run([str(SCRIPT), "--guard", spec, "--no-compact", "-o", str(dump),
                           str(program(name)), mode],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert "Traceback" not in proc.stderr, proc.stderr
    with DumpReader(str(dump)) as reader:
        list(reader.records())
        errors = list(reader.access_errors)
    return proc, read_dump(dump), errors


def first_in(facts: DumpFacts, node: int, source: str) -> Site | None:
    return next((Site(f.file, f.line) for f in facts.stack(node) if f.file == source), None)


def block_events(facts: DumpFacts, block: int) -> tuple[list[str] | None, list[str] | None]:
    """The last event that made a block at BLOCK, and the release after it (its `e` fields)."""
    made = freed = None
    for e in facts.events:
        if e[5] != "-" and int(e[5], 16) == block:
            made, freed = e, None
        elif e[5] == "-" and made is not None and int(e[6], 16) == block:
            freed = e
    return made, freed


#: the errors a run finds, each access let through once after its report (valgrind's too): the
#: slack overflow's strlen reads the terminator written past the end; the stale pointer writes
#: twice into the freed block
EXPECTED_ERRORS = {"slack-overflow": 2, "stale-reused": 2}
CAUGHT = [("heap_errors", "past-end-write", "all"), ("heap_errors", "read-loop", "all"),
          ("heap_errors", "memcpy-overflow", "all"), ("heap_errors", "slack-overflow", "all"),
          ("heap_errors", "uaf-read", "all"), ("heap_errors", "uaf-write", "all"),
          ("heap_errors", "uaf-thread", "all"), ("heap_errors", "stale-reused", "all"),
          ("heap_errors_cpp", "new-array-underflow", "all,under")]


@pytest.mark.parametrize(("name", "mode", "spec"), CAUGHT, ids=[f"{n}:{m}" for n, m, _ in CAUGHT])
def test_the_first_error_is_valgrind_s(tmp_path: Path, name: str, mode: str, spec: str) -> None:
    row: Row = BY_MODE[(name, mode)]
    proc, facts, errors = guarded(tmp_path, spec, name, mode)
    # GDB in batch lets each faulting access through once: the program runs to its end
    assert (proc.returncode, facts.process) == (0, []), proc.stderr
    assert len(errors) == EXPECTED_ERRORS.get(mode, 1), errors
    e = errors[0]
    offset, relation, size, state = _AUX.fullmatch(row.vg_aux).groups()
    assert (e.access, e.offset, e.relation, e.size, e.state) == (
        "write" if row.vg_kind == "InvalidWrite" else "read", int(offset), relation, int(size),
        "freed" if state == "free'd" else "allocated")
    source = SOURCES[name]
    assert first_in(facts, e.stack, source) == row.site("ERROR")
    made, freed = block_events(facts, e.block)
    assert made is not None and first_in(facts, int(made[4]), source) == row.site("ALLOC")
    if e.state == "freed":
        assert freed is not None and first_in(facts, int(freed[4]), source) == row.site("FREE")
    # the faulting thread: the main one (the process's id), or the second (uaf-thread)
    main_tid = int(facts.info["pid"])
    assert (e.tid == main_tid) == (row.vg_tid == "1")
    # the address is the block's end, start or inside it, as the record says
    where = {"after": e.block + e.size + e.offset, "before": e.block - e.offset,
             "inside": e.block + e.offset}[e.relation]
    assert e.address == where


def test_align16_misses_the_slack_overflow(tmp_path: Path) -> None:
    proc, facts, errors = guarded(tmp_path, "all,align16", "heap_errors", "slack-overflow")
    assert (proc.returncode, errors, facts.process) == (0, [], [])
    made, _ = block_events(facts, int(facts.events[0][5], 16))
    assert made is not None and made[-1] == "20"
    # the block starts 16-aligned, 32 bytes before the page's end: byte 21 is in the slack
    assert (int(made[5], 16) % 16, (int(made[5], 16) + 32) % 4096) == (0, 0)


@pytest.mark.parametrize("name", ["heap_errors", "heap_errors_cpp"])
@pytest.mark.parametrize("spec", ["all", "all,under", "5%", "0.02%"])
def test_the_clean_programs_run_guarded(tmp_path: Path, name: str, spec: str) -> None:
    proc, facts, errors = guarded(tmp_path, spec, name, "clean")
    assert (proc.returncode, errors, facts.process) == (0, [], []), proc.stderr
    assert facts.end == ("exit", "0")


def test_a_bad_spec_is_refused_before_the_run(tmp_path: Path) -> None:
    proc = subprocess.run([str(SCRIPT), "--guard", "all,7", "-o", str(tmp_path / "d.memdump"),
                           str(program("heap_errors")), "clean"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert (proc.returncode, proc.stderr) == (
        2, "memdump.sh: --guard all,7: '7' is not all, N%, MIN-MAX, under, over, align16, "
           "tag:NAME or fn:NAME\n")
    assert not (tmp_path / "d.memdump").exists()


def test_a_bad_environment_spec_is_said_and_the_recording_goes_on(tmp_path: Path) -> None:
    dump = tmp_path / "d.memdump"
    env = {"PATH": "/usr/bin:/bin", "MEMDUMP_GUARD": "most"}
    proc = subprocess.run([str(SCRIPT), "--no-compact", "-o", str(dump),
                           str(program("heap_errors")), "past-end-write"],
                          capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert proc.returncode == 0
    assert ("memdump: bad guard SPEC term 'most': not all, N%, MIN-MAX, under, over, align16, "
            "tag:NAME or fn:NAME; recording without guard pages\n" in proc.stderr)
    assert read_dump(dump).end == ("exit", "0")


def test_the_report_gives_the_three_stacks_of_a_use_after_free(tmp_path: Path) -> None:
    _, facts, (e,) = guarded(tmp_path, "all", "heap_errors", "uaf-read")
    proc = analyze_raw(tmp_path / "uaf-read.memdump")
    lines = proc.stdout.splitlines()
    start = lines.index(f"HEAP ACCESS ERROR 1 of 1, caught by a guard page: Invalid read at "
                        f"0x{e.address:x} in thread {facts.info['pid']}")
    error, alloc, free = (marker("heap_errors.c", "uaf-read", "ERROR").line,
                          marker("heap_errors.c", "uaf", "ALLOC").line,
                          marker("heap_errors.c", "uaf", "FREE").line)
    section = lines[start + 1:lines.index("SUMMARY")]
    assert [line for line in section if "heap_errors.c" in line or "Address" in line
            or "Block" in line] == [
        f"    at uaf_read (heap_errors.c:{error})",
        "    by main (heap_errors.c:264)",
        f"  Address 0x{e.address:x} is 8 bytes inside a block of size 32 free'd by free at "
        "event 2:",
        f"    at freed_ints (heap_errors.c:{free})",
        "    by uaf_read (heap_errors.c:101)",
        "    by main (heap_errors.c:264)",
        "  Block was alloc'd by calloc at event 1:",
        f"    at freed_ints (heap_errors.c:{alloc})",
        "    by uaf_read (heap_errors.c:101)",
        "    by main (heap_errors.c:264)",
    ]


@pytest.mark.parametrize("spec", ["all", "all,under", "all,align16"])
def test_every_call_works_on_guarded_blocks(tmp_path: Path, spec: str) -> None:
    """guard_calls checks malloc_usable_size, calloc's zeroes, realloc's contents, the aligned
    allocations and 5,000 live blocks (more than the pool's 4,096 slots: the pool full, said
    once)."""
    dump = tmp_path / "calls.memdump"
    proc = subprocess.run([str(SCRIPT), "--guard", spec, "--no-compact", "-o", str(dump),
                           str(program("guard_calls"))],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert (proc.returncode, proc.stdout) == (0, "ok\n"), proc.stdout + proc.stderr
    full = [line for line in proc.stderr.splitlines() if "guard pool full" in line]
    assert full == ["memdump: guard pool full (every slot holds a live block, or "
                    "vm.max_map_count is reached): the blocks that find no free slot are not "
                    "guarded"]
    assert read_dump(dump).end == ("exit", "0")


def test_a_tag_chooses_the_blocks(tmp_path: Path) -> None:
    """tags_phases allocates 1001-byte blocks under the tag physics, 1002 under collision (nested
    in physics), 2001 under audio in another thread, 11, 12 and 3001 untagged: with tag:physics
    only the 1001-byte blocks are guarded, their ends on a page's end (glibc's 16-aligned blocks
    of these sizes never end there)."""
    proc, facts, errors = guarded(tmp_path, "tag:physics", "tags_phases", "")
    assert (proc.returncode, errors) == (0, []), proc.stderr
    ends: dict[int, set[bool]] = {}
    for e in facts.events:
        if e[5] != "-" and e[3] in ("malloc", "new", "new[]") and int(e[-1]) in (
                11, 12, 1001, 1002, 2001, 3001):
            ends.setdefault(int(e[-1]), set()).add((int(e[5], 16) + int(e[-1])) % 4096 == 0)
    assert ends == {11: {False}, 12: {False}, 1001: {True}, 1002: {False}, 2001: {False},
                    3001: {False}}


@pytest.mark.parametrize(("spec", "accepted"), [
    ("0.02%", True), ("0.0001%", True), ("100.0%", True), ("0.00001%", False), ("100.01%", False),
    ("5.%", False), (".5%", False), ("1.2.3%", False),
])
def test_a_share_takes_four_decimals(tmp_path: Path, spec: str, accepted: bool) -> None:
    """memdump.sh's check says what guard.c's parser says (test_guard.c: the same terms)."""
    proc = subprocess.run([str(SCRIPT), "--guard", spec, "-o", str(tmp_path / "d.memdump"),
                           str(program("heap_errors")), "clean"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    if accepted:
        assert proc.returncode == 0 and "bad guard SPEC" not in proc.stderr, proc.stderr
    else:
        assert (proc.returncode, proc.stderr) == (
            2, f"memdump.sh: --guard {spec}: '{spec}': a share is 0.0001% to 100%, at most 4 "
               "decimals\n")


@pytest.mark.parametrize(("options", "message"), [
    (["-p", "1"], "--guard needs a program to run (a running process's blocks are placed "
                  "already)"),
    (["--breakpoints", "true"], "--guard needs the in-process recorder (not --breakpoints)"),
    (["true"], "--guard 5%,tag:a,tag:b: 'tag:b': a second tag"),
])
def test_guard_is_refused_where_it_cannot_work(options: list[str], message: str) -> None:
    spec = "5%,tag:a,tag:b" if "tag" in message else "all"
    proc = subprocess.run([str(SCRIPT), "--guard", spec, *options], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert (proc.returncode, proc.stderr) == (2, f"memdump.sh: {message}\n")
