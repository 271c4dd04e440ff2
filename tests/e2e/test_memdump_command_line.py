"""The documented one-liner: gdb -batch -ex 'source gdb_ext/memdump.py' -ex memdump -ex r ./app."""

from __future__ import annotations

import re
import select
import subprocess
from pathlib import Path

from memdump_e2e import (
    REPO,
    analyze,
    base_name,
    expect_leaks,
    gdb_argv,
    marker,
    program,
    wait_for_dump,
)


def test_documented_command_from_the_repository_root() -> None:
    app = program("leak_malloc")
    proc = subprocess.run(
        ["gdb", "-nx", "-batch", "-ex", "source gdb_ext/memdump.py", "-ex", "memdump", "-ex", "r",
         str(app)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    found = re.findall(r"memdump: recording process (\d+) to (\S+)", proc.stdout)
    assert len(found) == 1, proc.stdout + proc.stderr
    pid, printed = found[0]
    dump = REPO / printed
    try:
        # Named after the program and its pid, in the current directory.
        assert printed == f"leak_malloc.{pid}.memdump"
        assert dump.is_file()
        assert "Traceback" not in proc.stdout + proc.stderr
        report = analyze(dump)
        site = marker("leak_malloc.c", "block")
        expect_leaks(report, {site: (24, 1)})
        assert base_name(report.group_at(site)["stack"][0]["function"]) == "main"
        assert f"events recorded in {printed} (exit 0)" in proc.stdout
    finally:
        dump.unlink(missing_ok=True)


def test_existing_dump_is_never_overwritten(tmp_path: Path) -> None:
    """A default name already taken (a pid reused) gets a -2 suffix instead."""
    target = subprocess.Popen([str(program("leak_then_wait"))], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    gdb = None
    try:
        ready, _, _ = select.select([target.stdout], [], [], 60)
        assert ready and target.stdout.readline() == b"ready\n"
        taken = tmp_path / f"leak_then_wait.{target.pid}.memdump"
        taken.write_text("mine")
        second = tmp_path / f"leak_then_wait.{target.pid}-2.memdump"
        gdb = subprocess.Popen(gdb_argv(["memdump", "continue"], attach=target.pid),
                               cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        wait_for_dump(second, lambda text: "\ni gdb " in text, "the dump header",
                      alive=lambda: gdb.poll() is None)
        target.stdin.write(b"go\n")  # the program leaks its second block, then exits
        target.stdin.close()
        out, err = gdb.communicate(timeout=120)
        assert target.wait(timeout=60) == 0
    finally:
        for proc in (gdb, target):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert taken.read_text() == "mine"
    assert f"to {second.name}" in out, out + err
    expect_leaks(analyze(second), {marker("leak_then_wait.c", "second"): (321, 1)})


#: what `source gdb_ext/memdump.py` and a whole recording must not load: the other commands, the
#: printers, the analyser's report and views (`memdump leaks` loads those when asked). (The
#: analyser's symbolize is loaded by the recording's end, which has memdump-symbolize read the
#: debug files GDB left unread (lazydebug.py), and not by the `source`.)
NOT_FOR_A_RECORDING = (
    "dbgkit.commands.contention", "dbgkit.commands.ctxswitches", "dbgkit.commands.deadlocks",
    "dbgkit.core.locks", "dbgkit.locks", "dbgkit.memdump.live", "dbgkit.printers",
    # glibc's heap walker: for a recording that begins with an attach only
    "dbgkit.memdump.heapsource", "dbgkit.core.heap.walk", "dbgkit.core.heap.vtables",
    "memdump_analyzer.aggregation", "memdump_analyzer.cli", "memdump_analyzer.exports",
    "memdump_analyzer.leaksite", "memdump_analyzer.leaktext", "memdump_analyzer.replay",
    "memdump_analyzer.report", "memdump_analyzer.rules",
    "memdump_analyzer.suppressions", "memdump_analyzer.views",
)

_LOADED = ("python import sys; from dbgkit.commands import base; "
           "print('loaded', *sorted(m for m in sys.modules if m.startswith(('dbgkit', "
           "'memdump_analyzer')))); print('commands', *sorted(base._installed))")


def test_memdump_py_loads_the_memdump_command_alone(tmp_path: Path) -> None:
    dump = tmp_path / "churn.memdump"
    proc = subprocess.run(
        gdb_argv([_LOADED, f"memdump -o {dump}", "r", _LOADED, "memdump leaks",
                  "help contention"], [program("churn_leak"), "300"]),
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout
    sourced, recorded = (line.split()[1:] for line in out.splitlines()
                         if line.startswith("loaded "))
    assert [line for line in out.splitlines() if line.startswith("commands ")] == \
        ["commands memdump"] * 2
    # the command's module is imported at its first use, not by the `source`
    assert "dbgkit.commands.memdump" not in sourced and "dbgkit.commands.memdump" in recorded
    for loaded in (sourced, recorded):
        assert [m for m in loaded if m.startswith(NOT_FOR_A_RECORDING)] == [], out
    assert "memdump_analyzer.symbolize" not in sourced
    assert 'Undefined command: "contention"' in proc.stderr
    # `memdump leaks` loads the report when asked: the program's one leak, after the run
    assert "LEAK 1 of 1: 77 bytes in 1 block, definitely lost" in out, out + proc.stderr
    expect_leaks(analyze(dump), {marker("churn_leak.c", "after-exec"): (77, 1)})


def test_one_event_is_said_in_the_singular(tmp_path: Path) -> None:
    """churn_leak without arguments makes its one 77-byte leak and nothing else."""
    proc = subprocess.run(gdb_argv(["memdump", "run"], [program("churn_leak")]), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    found = re.findall(r"memdump: (\S+ events?) recorded in churn_leak\.\d+\.memdump \(exit 0\)",
                       proc.stdout)
    assert found == ["1 event"], proc.stdout + proc.stderr
