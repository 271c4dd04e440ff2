"""The red zones checked at every stop GDB shows (`set memdump check-at-stop`, docs/heap-errors.md
"Red zones") on tests/programs/redzone_stops.c: an overrun made before a breakpoint is said at
that stop, in memdump check-heap's words, once (the next stop is silent, and the block's free
finds nothing more); one the block's free found before the stop is said at it, once; with the
setting off no stop says anything and the free finds it; a stop inside a signal handler or the
recorder is skipped, said once, and the next stop finds it; a recording without red zones says
nothing at its stops.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memdump_e2e import GdbRun, gdb_argv, marker, program, run_gdb

pytestmark = pytest.mark.one_recorder
SOURCE = "redzone_stops.c"
HEADER = ("memdump check-heap: 1 zone(s) found changed (hc records in the dump; memdump-analyze "
          "reports them with their stacks)")
SKIPPED = ("memdump: heap not checked at this stop: thread 1 stopped in a signal handler (said "
           "once; memdump check-heap asks again)")


def stops(tmp_path: Path, mode: str, breaks: list[str], *before: str,
          redzones: bool = True) -> tuple[GdbRun, list[list[str]]]:
    """Run MODE with a breakpoint on each BREAK marker of BREAKS and go on to its exit: GDB's
    run and the dump's hc records (their fields after the sequence number)."""
    dump = tmp_path / f"{mode}.memdump"
    commands = [*(["set environment MEMDUMP_REDZONE 16"] if redzones else []), *before,
                f"memdump -o {dump}"]
    commands += [f"break {marker(SOURCE, name, 'BREAK')}" for name in breaks]
    commands += ["run"] + ["continue"] * len(breaks)
    result = run_gdb(gdb_argv(commands, [program("redzone_stops"), mode]), dump)
    assert "exited normally" in result.output, result.describe()
    records = [line.split(" ")[2:] for line in dump.read_text(errors="replace").splitlines()
               if line.startswith("hc ")]
    return result, records


def finding(record: list[str]) -> str:
    tid, _kind, block = record[:3]
    return (f"  heap block overrun: 1 byte(s) changed, from 0 bytes after the end of the 20-byte "
            f"block at {block} (thread {tid})")


def between(output: str, start: str, end: str) -> str:
    """OUTPUT from the line that has START to the next line that has END."""
    head = output.index(start)
    return output[head:output.index(end, head + len(start))]


def test_the_overrun_is_said_at_the_next_stop_once(tmp_path: Path) -> None:
    result, records = stops(tmp_path, "overrun", ["first", "second"])
    assert records == [[records[0][0], "overrun", records[0][2], "20", "0", "1", "check"]]
    first = between(result.output, "Breakpoint 1, first ()", "Breakpoint 2, second ()")
    assert first.splitlines()[2:] == [HEADER, finding(records[0]), ""]
    assert result.output.count("memdump check-heap") == 1
    assert result.output.count("heap block overrun") == 1


def test_what_a_free_found_is_said_at_the_next_stop_once(tmp_path: Path) -> None:
    """The overrun found by the recorder at the block's free, before any stop: said at the next
    stop, with where it was found; the stop after it silent."""
    result, records = stops(tmp_path, "freed", ["first", "second"])
    assert records == [[records[0][0], "overrun", records[0][2], "20", "0", "1", "free"]]
    first = between(result.output, "Breakpoint 1, first ()", "Breakpoint 2, second ()")
    assert first.splitlines()[2:] == [
        "memdump: 1 zone(s) found changed since the last stop (hc records in the dump; "
        "memdump-analyze reports them with their stacks)",
        finding(records[0]) + ", found at its free", ""]
    assert result.output.count("heap block overrun") == 1
    assert "memdump check-heap" not in result.output


def test_the_setting_off_leaves_it_to_the_free(tmp_path: Path) -> None:
    result, records = stops(tmp_path, "overrun", ["first", "second"],
                            "set memdump check-at-stop off")
    assert records == [[records[0][0], "overrun", records[0][2], "20", "0", "1", "free"]]
    assert "memdump check-heap" not in result.output
    assert "heap not checked" not in result.output


def test_a_stop_in_a_signal_handler_is_skipped_and_said_once(tmp_path: Path) -> None:
    result, records = stops(tmp_path, "handler", ["handler", "second"],
                            "handle SIGUSR1 nostop noprint pass")
    assert records == [[records[0][0], "overrun", records[0][2], "20", "0", "1", "check"]]
    handler = between(result.output, "Breakpoint 1, on_usr1 (", "Breakpoint 2, second ()")
    assert handler.splitlines()[2:] == [SKIPPED, ""]
    second = between(result.output, "Breakpoint 2, second ()", "exited normally")
    assert second.splitlines()[2:4] == [HEADER, finding(records[0])]
    assert result.output.count("heap not checked") == 1


def test_without_redzones_the_stops_say_nothing(tmp_path: Path) -> None:
    result, records = stops(tmp_path, "overrun", ["first", "second"], redzones=False)
    assert records == []
    assert "memdump check-heap" not in result.output
    assert "heap not checked" not in result.output


def test_a_stop_inside_the_recorder_is_skipped_and_said_once(tmp_path: Path) -> None:
    """`break` on the recorder's own allocation (a user stepping into malloc would stop there):
    each stop inside it is skipped, said at the first; the breakpoint gone, the next stop
    finds the overrun."""
    dump = tmp_path / "inside.memdump"
    commands = ["set environment MEMDUMP_REDZONE 16", "set breakpoint pending on",
                f"memdump -o {dump}", "break rz_malloc",
                f"break {marker(SOURCE, 'first', 'BREAK')}", "run", "continue", "delete 1",
                "continue", "continue"]
    result = run_gdb(gdb_argv(commands, [program("redzone_stops"), "overrun"]), dump)
    assert "exited normally" in result.output, result.describe()
    inside = between(result.output, "rz_malloc (", "Breakpoint 2, first ()")
    assert inside.count("rz_malloc (") == 2, inside
    assert result.output.count("memdump: heap not checked at this stop: ") == 1
    assert ("memdump: heap not checked at this stop: thread 1 stopped inside the recorder (an "
            "allocator call) (said once; memdump check-heap asks again)") in inside
    first = between(result.output, "Breakpoint 2, first ()", "exited normally")
    assert first.splitlines()[2] == HEADER
    assert result.output.count("heap block overrun") == 1
