"""The program's children, recorded when asked (`memdump --children`, `set memdump children on`).

GDB follows the program; each process it forks, and each program those execute, is recorded by
the in-process recorder alone into STEM.PID.memdump beside the program's dump (docs/recorder.md,
"Children"). Without the setting, nothing but the program's dump is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from memdump_analyzer.dumpformat import FORMAT_LINE
from memdump_e2e import (
    analyze,
    expect_leaks,
    gdb_argv,
    marker,
    program,
    read_dump,
    record,
    run_gdb,
)

pytestmark = pytest.mark.one_recorder


def _children(dump: Path) -> dict[str, Path]:
    """The other dumps beside DUMP, by name."""
    return {p.name: p for p in dump.parent.iterdir() if p != dump and p.suffix == ".memdump"}


def test_a_forked_child_gets_its_own_dump(dump: Path) -> None:
    """fork_leak: the parent leaks 70 bytes, the child 80 (and frees 90): one dump each."""
    run = record("fork_leak", dump=dump, before=["set memdump children on"])
    parent = read_dump(dump)
    assert parent.end == ("exit", "0"), run.describe()
    expect_leaks(analyze(dump), {marker("fork_leak.c", "parent"): (70, 1)})
    [(name, path)] = _children(dump).items()
    child = read_dump(path)
    # the recorder writes a child's dump from its first line (children.c, memdump_format.h)
    assert path.read_bytes().split(b"\n", 1)[0] + b"\n" == FORMAT_LINE.encode()
    pid = child.info["pid"]
    assert name == f"{dump.stem}.{pid}.memdump"
    assert (child.info["parent"], child.info["attached"], child.info["recorder"]) == (
        parent.info["pid"], "1", "in-process")
    assert "gdb" not in child.info
    assert [(e[3], e[-1]) for e in child.events] == [
        ("malloc", "80"), ("malloc", "90"), ("free", child.events[1][5])]
    assert {e[2] for e in child.events} == {pid}  # the child's thread, not its parent's
    assert child.end == ("exit", "0")
    report = analyze(path)
    expect_leaks(report, {marker("fork_leak.c", "child"): (80, 1)})
    assert report.data["summary"]["leak_kinds"] is None  # no GDB there: no pointer scan


def test_executed_and_spawned_programs_get_their_own_dumps(dump: Path) -> None:
    """spawn_leak starts leak_malloc by fork+execv (the child allocated and freed 40 bytes
    before its exec) and by posix_spawn: the forked child's dump ends at its exec, the programs'
    dumps each find leak_malloc's 24 bytes."""
    run = run_gdb(gdb_argv([f"memdump --children -o {dump}", "run"],
                           [program("spawn_leak"), program("leak_malloc")]), dump)
    assert read_dump(dump).end == ("exit", "0"), run.describe()
    expect_leaks(analyze(dump), {marker("spawn_leak.c", "parent"): (70, 1)})
    facts = {name: read_dump(path) for name, path in _children(dump).items()}
    programs = sorted((os.path.basename(f.info["program"]), name) for name, f in facts.items())
    assert [p for p, _ in programs] == ["leak_malloc", "leak_malloc", "spawn_leak"], programs
    forked = next(f for f in facts.values() if f.info["program"].endswith("spawn_leak"))
    pid = forked.info["pid"]
    assert [(e[3], e[-1]) for e in forked.events][:1] == [("malloc", "40")]
    assert forked.end is None  # its exec ended it
    # the program the forked child executed: same pid, the next name
    assert f"{dump.stem}.{pid}-2.memdump" in facts
    for name, f in facts.items():
        if f.info["program"].endswith("leak_malloc"):
            assert (f.info["attached"], f.end) == ("0", ("exit", "0")), name
            expect_leaks(analyze(dump.parent / name), {marker("leak_malloc.c", "block"): (24, 1)})


def test_without_the_setting_children_are_not_recorded(dump: Path) -> None:
    record("spawn_leak", program("leak_malloc"), dump=dump)
    assert _children(dump) == {}
    expect_leaks(analyze(dump), {marker("spawn_leak.c", "parent"): (70, 1)})


def test_an_exec_of_the_program_itself_stays_in_its_dump(dump: Path) -> None:
    """exec_leak executes leak_malloc in the process GDB follows: GDB records the new image (its
    recorder configured by GDB again) into the program's dump, and writes no dump of its own."""
    record("exec_leak", program("leak_malloc"), dump=dump, before=["set memdump children on"])
    facts = read_dump(dump)
    assert [what for what, _ in facts.process] == ["exec"]
    images = analyze(dump).data["images"]
    assert [(os.path.basename(i["program"]), i["recorder"]) for i in images] == [
        ("exec_leak", "in-process"), ("leak_malloc", "in-process")]
    expect_leaks(analyze(dump), {marker("leak_malloc.c", "block"): (24, 1)})
    assert _children(dump) == {}


def test_breakpoints_say_they_record_the_program_alone(dump: Path) -> None:
    run = record("fork_leak", dump=dump,
                 before=["set memdump recorder breakpoints", "set memdump children on"])
    assert ("memdump: warning: children are recorded by the in-process recorder only: this "
            "recording follows the program alone") in run.output
    assert _children(dump) == {}
