"""A recording that ends before the program does (`memdump stop`, `detach` of an attached process,
`memdump.sh -p`) scans the process first, as the exit does: its dump carries the leak kinds, and
`--fail-on-leak` counts only the lost blocks. Also how such an end is logged (`kill`), what `memdump
status` says after it, and the dump files' mode.

tests/programs/stop_kinds.c keeps blocks in a global array (still reachable) and drops others
(definitely lost), from its arguments or from commands on stdin. The detach of an attached process
and `memdump.sh -p` are tested beside the other attach tests (test_memdump_attach, test_memdump_sh).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memdump_e2e import (
    expect_stop_kinds,
    gdb_argv,
    marker,
    program,
    read_dump,
    record,
    run_gdb,
)

SRC = "stop_kinds.c"
DONE = marker(SRC, "done", "BREAK")


def test_memdump_stop_scans_first(dump: Path) -> None:
    """`memdump stop` at a breakpoint: the dump ends `stop`, its blocks scanned there; `memdump
    status` then still says how many blocks were live."""
    run = record("stop_kinds", "keep:40", "keep:24", "lose:48", dump=dump,
                 before=[f"break {DONE}"], after=["memdump stop", "memdump status", "continue"])
    assert read_dump(dump).end == ("stop", "-"), run.describe()
    assert "live blocks:  3\n" in run.stdout, run.describe()
    expect_stop_kinds(dump)


def test_detach_of_a_launched_program_scans_first(dump: Path) -> None:
    """`detach` from a program GDB started: the same scan (the in-process recorder's calls in
    progress drained first), then the program runs on by itself to its end."""
    run = record("stop_kinds", "keep:40", "keep:24", "lose:48", dump=dump,
                 before=[f"break {DONE}"], after=["detach"])
    assert read_dump(dump).end == ("detach", "-"), run.describe()
    expect_stop_kinds(dump)


def test_kill_is_no_detach(dump: Path) -> None:
    """`kill` in GDB: the process died of SIGKILL, and the dump says so (not `detach`)."""
    run = record("stop_kinds", "keep:40", dump=dump, before=[f"break {DONE}"], after=["kill"])
    assert read_dump(dump).end == ("killed", "SIGKILL"), run.describe()


def test_leaks_after_the_exit_lists_the_reports_kinds(dump: Path) -> None:
    """`memdump leaks` once the program exited lists the kinds memdump-analyze lists by default
    (definite, possible): --top 1 is the lost block, not the larger reachable group;
    --show-leak-kinds all lists both."""
    run = record("stop_kinds", "keep:40", "keep:24", "lose:48", dump=dump, after=[
        "memdump leaks --top 1", "echo ==all==\\n", "memdump leaks --show-leak-kinds all",
        "memdump leaks --show-leak-kinds lots"])
    default, every = run.stdout.split("==all==\n", 1)
    assert "LEAK 1 of 1: 48 bytes in 1 block, definitely lost\n" in default, run.describe()
    assert ("... and 1 leak group still reachable (64 bytes in 2 blocks) not shown "
            "(--show-leak-kinds all lists them)") in default, run.describe()
    assert "LEAK 1 of 2: 64 bytes in 2 blocks, still reachable\n" in every, run.describe()
    assert "LEAK 2 of 2: 48 bytes in 1 block, definitely lost\n" in every, run.describe()
    assert ("memdump: argument --show-leak-kinds: unknown leak kind 'lots' (definite, indirect, "
            "possible, reachable, comma-separated; or all, none)") in run.stderr


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_dumps_are_private(tmp_path: Path, dump: Path) -> None:
    """Every dump is created 0600, as a core file, whatever the umask lets: the one named with
    -o, the one memdump names, a child's (in-process recorder: children.c)."""
    old = os.umask(0o022)
    try:
        record("stop_kinds", "keep:40", dump=dump)
        run = run_gdb(gdb_argv(["memdump", "run"], [program("stop_kinds"), "lose:8"]),
                      cwd=tmp_path)
        named = sorted(tmp_path.glob("stop_kinds.*.memdump"))
        children = tmp_path / "children"
        children.mkdir()
        child_run = record("fork_leak", dump=children / "parent.memdump",
                           before=["set memdump children on"])
    finally:
        os.umask(old)
    assert _mode(dump) == 0o600
    assert len(named) == 1, run.describe()
    assert _mode(named[0]) == 0o600
    modes = {p.name: _mode(p) for p in children.iterdir()}
    expected = 2 if read_dump(children / "parent.memdump").info["recorder"] == "in-process" else 1
    assert len(modes) == expected, child_run.describe()
    assert set(modes.values()) == {0o600}, modes
