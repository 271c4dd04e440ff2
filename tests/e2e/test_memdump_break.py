"""`memdump break` in both recorders: the program stops at the matching heap event, in its own
frame (frame 0 the allocator's caller, `frame 1` its caller), on the same events."""

from __future__ import annotations

import re
from pathlib import Path

from memdump_e2e import gdb_argv, marker, program, record, run_gdb

PROGRAM = "tags_phases"


def _site(name: str) -> str:
    site = marker("tags_phases.cpp", name, "BREAK")
    return f"{site.file}:{site.line}"


def _frames(output: str) -> list[str]:
    """`#N ... at FILE:LINE` of each backtrace line printed, as 'N FUNCTION FILE:LINE'."""
    out = []
    for m in re.finditer(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(.+?) \(.*\) at .*?([\w.]+:\d+)$",
                         output, re.M):
        out.append(f"{m.group(1)} {m.group(2)} {m.group(3)}")
    return out


def _breaks(output: str) -> list[str]:
    return re.findall(r"^memdump: (break at event .*?) = 0x[0-9a-f]+ in thread \d+$|"
                      r"^memdump: (break at event .*free\(0x[0-9a-f]+\)) in thread \d+$",
                      output, re.M)


def test_a_size_stops_in_the_callers_frame(dump: Path) -> None:
    run = record(PROGRAM, dump=dump, before=["memdump break --size 1002"],
                 after=["bt 2", "frame 1", "memdump break", "memdump break --delete", "continue"])
    assert "memdump: break: --on alloc --size 1002" in run.stdout
    assert [b[0] for b in _breaks(run.stdout)] == ["break at event 6: malloc(1002)"]
    assert _frames(run.stdout)[-3:] == [
        f"0 (anonymous namespace)::Blocks::take {_site('take')}",
        f"1 main {_site('collision')}",
        f"1 main {_site('collision')}",
    ]
    assert "memdump: break deleted: --on alloc --size 1002" in run.stdout
    assert "exited normally" in run.stdout


def test_a_tag_and_a_count_stop_in_the_thread_that_has_the_tag(dump: Path) -> None:
    run = record(PROGRAM, dump=dump, before=["memdump break --tag audio --count 2"],
                 after=["bt 2", "continue", "memdump break --delete", "memdump break --delete"])
    assert [b[0] for b in _breaks(run.stdout)] == ["break at event 11: malloc(2001)"]
    # the break that fired is still the break (the next run stops again) until deleted
    assert run.memdump_lines()[-2:] == ["memdump: break deleted: --on alloc --tag audio --count 2",
                                        "memdump: no break to delete"], run.describe()
    frames = _frames(run.stdout)
    assert frames[-2:] == [f"0 (anonymous namespace)::Blocks::take {_site('take')}",
                           f"1 operator() {_site('audio2')}"]
    assert 'Thread 2 "tags_phases" hit' in run.stdout


def test_a_release_stops_in_the_function_that_frees(dump: Path) -> None:
    run = record(PROGRAM, dump=dump, before=["memdump break --on free --function main "
                                             "--count 1"], after=["continue"])
    [hit] = _breaks(run.stdout)
    assert re.fullmatch(r"break at event \d+: free\(0x[0-9a-f]+\)", hit[1])
    # stopped as free returned: frame 0 is the function that called it, at the loop's test
    assert re.search(rf"\(anonymous namespace\)::Blocks::release \(this=0x[0-9a-f]+\) at "
                     rf".*{_site('loop')}$", run.stdout, re.M), run.stdout


def test_an_event_number_from_an_earlier_dump(dump: Path, tmp_path: Path) -> None:
    """--seq N: the event numbered N in the dump: the run before's 3001-byte allocation."""
    record(PROGRAM, dump=tmp_path / "first.memdump")
    seq = 0
    for line in (tmp_path / "first.memdump").read_text(errors="replace").splitlines():
        f = line.split(" ")
        if f[0] in ("e", "+", "-", "+n", "+a", "-n", "-a", "p", "end"):
            seq = int(f[1]) if f[0] in ("e", "p", "end") else seq + 1
            if (f[0] == "+" and f[3] == "3001") or (f[0] == "e" and f[6:7] == ["3001"]):
                break
    run = record(PROGRAM, dump=dump, before=[f"memdump break --seq {seq}"], after=["continue"])
    assert [b[0] for b in _breaks(run.stdout)] == [f"break at event {seq}: malloc(3001)"]


def test_bad_breaks_say_why_in_one_line(dump: Path) -> None:
    run = record(PROGRAM, dump=dump, before=["memdump break --on free --size 8",
                                             "memdump break --function no_such_function",
                                             "memdump break --size -1"], run=None)
    errors = [line for line in run.stderr.splitlines() if "memdump" in line]
    assert errors[:3] == [
        "memdump break: --size and --size-min are for allocations (--on alloc or realloc)",
        "memdump break: no function 'no_such_function' in the debug information (build the "
        "program with -g)",
        "memdump: argument --size: must not be negative, not -1",
    ], run.stderr
    assert "Traceback" not in run.output


def test_a_leak_of_an_earlier_run_stops_at_the_call_that_leaked(dump: Path,
                                                                  tmp_path: Path) -> None:
    """LEAK 1 of the first run is the third of five blocks from one call site: the second run
    stops at that call (i == 2), not at the first from the same stack."""
    first = tmp_path / "first.memdump"
    record("leak_nth", dump=first)
    run = record("leak_nth", dump=dump, before=[f"memdump break --leak 1 --from {first}"],
                 after=["print i", "frame 1", "print i", "continue"])
    assert (f"memdump: break: --leak 1 --from {first} (LEAK 1: 42 bytes in 1 blocks; the "
            "allocation of 42 bytes, call 3 from its stack)") in run.stdout
    assert [b[0] for b in _breaks(run.stdout)] == ["break at event 3: malloc(42)"]
    assert re.findall(r"^\$\d+ = (\d+)$", run.stdout, re.M) == ["2", "2"]
    site = marker("leak_nth.c", "call", "BREAK")
    assert re.search(rf"^#1 .* main \(\) at .*{site.file}:{site.line}$", run.stdout, re.M)


def test_a_break_before_run_arms_memdump(tmp_path: Path) -> None:
    """docs/memdump.md's sequence without `memdump`: `memdump break --leak 1 --from DUMP`, then
    `run`: memdump arms itself for that run, says so in one line, and the break stops."""
    first = tmp_path / "first.memdump"
    record("leak_nth", dump=first)
    run = run_gdb(gdb_argv([f"memdump break --leak 1 --from {first}", "run", "print i",
                            "continue"], [program("leak_nth")]), cwd=tmp_path)
    lines = run.memdump_lines()
    assert lines[1] == ("memdump: armed: the next run is recorded, so that the break can stop it "
                        "(memdump stop disarms)"), run.describe()
    assert lines[2].startswith("memdump: recording process "), run.describe()
    assert [b[0] for b in _breaks(run.stdout)] == ["break at event 3: malloc(42)"], run.describe()
    assert re.findall(r"^\$\d+ = (\d+)$", run.stdout, re.M) == ["2"]
    assert len(list(tmp_path.glob("leak_nth.*.memdump"))) == 1


def test_a_break_while_the_program_runs_unrecorded_says_so(tmp_path: Path) -> None:
    """Given while the program runs and nothing records it, the break cannot stop: it says so,
    and arms nothing."""
    run = run_gdb(gdb_argv(["break main", "run", "memdump break --size 42", "memdump status"],
                           [program("leak_nth")]), cwd=tmp_path)
    assert run.memdump_lines() == [
        "memdump: break: --on alloc --size 42",
        "memdump: warning: break: the program is running unrecorded: the break stops nothing "
        "until memdump records it (memdump)",
        "memdump: nothing recorded yet (start with: memdump, then run)"], run.describe()


def test_a_leak_group_that_is_not_there(dump: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.memdump"
    record("leak_nth", dump=first)
    run = record("leak_nth", dump=dump, before=[f"memdump break --leak 2 --from {first}",
                                                 "memdump break --leak 1",
                                                 f"memdump break --leak 1 --from {tmp_path}/no"],
                 run=None)
    errors = [line for line in run.stderr.splitlines() if line.startswith("memdump")]
    assert errors == [
        f"memdump break: {first} has 1 leak group (memdump-analyze {first} lists them), not 2",
        "memdump break: --leak N and --from DUMP go together",
        f"memdump break: {tmp_path}/no: no such file",
    ], run.stderr
