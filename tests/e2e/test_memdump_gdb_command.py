"""The GDB command itself: settings (`show memdump`, `help`), `memdump status`, and a second run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import memdump_e2e
import pytest
from memdump_e2e import GdbRun, gdb_argv, marker, program, read_dump, record, run_gdb

# What the settings table (gdb_ext/dbgkit/settings.py) generates, setting by setting:
# (name, syntax, default, subject, doc).
SETTINGS = [
    ("recorder", "in-process|breakpoints", "in-process",
     "way memdump records heap operations",
     "in-process: load libmemdump_recorder.so into the program, which records each call itself "
     "(native speed); breakpoints: stop the program at every allocator call and return, loading "
     "nothing (memdump --breakpoints for one recording)."),
    ("depth", "N", "32", "number of frames memdump records per call stack",
     "Each heap operation's call stack is recorded up to this many frames; 0 records none."),
    ("unwinder", "auto|gdb", "auto", "unwinder memdump walks call stacks with",
     "auto: memdump's own DWARF CFI unwinder, GDB's for a frame it cannot walk; gdb: always GDB's "
     "(exact, several times slower)."),
    ("return-sites", "N", "64", "number of return-address breakpoints memdump keeps inserted",
     "They catch the allocators' results; each breakpoint slows every stop a little, and one "
     "evicted is created again when needed."),
    ("children", "on|off", "off", "recording of the processes the program starts",
     "on: each process the program forks, and each program those execute, is recorded too, by "
     "the in-process recorder alone, into its own dump STEM.PID.memdump beside the program's "
     "(valgrind's --trace-children=yes; without GDB there: no pointer scan, and the analyser "
     "reads the symbols from the modules); off: only the process GDB follows (memdump "
     "--children for one recording)."),
    ("locks", "on|off", "off",
     "counting of pthread mutex and rwlock calls by the in-process recorder",
     "on: the recorder counts each lock's acquisitions, owner changes, contended acquisitions and "
     "wait times (read with contention; docs/contention.md); it adds about 15 to 25 ns to every "
     "acquisition, a 3 to 4 times slower uncontended lock; off: the lock calls pass straight "
     "through."),
    ("guard", "SPEC", "none", "SPEC of the in-process recorder's guard pages",
     "Blocks placed against an inaccessible page, freed ones kept inaccessible "
     "(docs/heap-errors.md): all, N% (a sampled share of the blocks, 0.0001% to 100% with "
     "at most 4 decimals: 5%, 0.02%), MIN-MAX, under, over, align16, tag:NAME, fn:NAME, "
     "comma-separated; a faulting access stops GDB at the instruction and memdump reports it "
     "(memdump --guard SPEC for one recording); empty: none."),
    ("check-at-stop", "on|off", "on", "check of the red zones at every stop",
     "on: with red zones (MEMDUMP_REDZONE, memdump.sh --redzones), each stop GDB shows runs "
     "memdump check-heap's check in the stopped thread alone and says what it found before the "
     "prompt (docs/heap-errors.md); off: only memdump check-heap checks."),
    ("scan-time-limit", "N", "120",
     "time limit in seconds of the pointer scan at the program's exit",
     "Past it the dump says timeout and the leak kinds are unknown; 0 turns the scan off."),
    ("compact", "on|off", "on", "compaction of the dump when its recording ends",
     "on: when the program exits, is killed or detached, or at memdump stop, the text dump is "
     "left to its first report, which rewrites it in the compact encoding (docs/dump-format.md: "
     "about 2% of the text's size) while it reads the text (docs/memdump.md, Compaction), or "
     "compacted at once where the file system keeps no extended attributes; off: the dump stays "
     "text."),
]


def _gdb(*commands: str) -> GdbRun:
    run = run_gdb(gdb_argv(commands))
    assert run.returncode == 0 and run.stderr == "", run.describe()
    return run


@pytest.mark.one_recorder
def test_the_table_is_what_gdb_has() -> None:
    """Every setting GDB knows under `set memdump` is one this file checks, in table order."""
    run = _gdb("python from dbgkit import settings; "
               "print(' '.join(s.name for s in settings.SETTINGS))")
    assert run.stdout.split() == [name for name, *_ in SETTINGS]


@pytest.mark.one_recorder
def test_show_memdump_lists_every_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memdump_e2e, "COMPACT", True)  # every setting as GDB starts
    run = _gdb("show memdump", "set memdump depth 8", "set memdump unwinder gdb", "show memdump")
    shown = [f"memdump {name}:  The {subject} is {default}." for name, _, default, subject, _
             in SETTINGS]
    changed = [line.replace(" is 32.", " is 8.").replace(" is auto.", " is gdb.")
               for line in shown]
    assert run.stdout == "\n".join(shown + changed) + "\n"


@pytest.mark.one_recorder
def test_help_memdump_lists_every_setting() -> None:
    run = _gdb("help memdump")
    width = max(len(f"{name} {syntax}") for name, syntax, *_ in SETTINGS)
    block = "settings (set memdump NAME VALUE; show memdump lists them):\n" + "".join(
        f"  {name + ' ' + syntax:<{width}}  {subject} (default {default})\n"
        for name, syntax, default, subject, _ in SETTINGS)
    assert run.stdout.endswith("\n" + block), run.stdout
    assert re.search(r"\n  scan-time-limit N +time limit in seconds", run.stdout), run.stdout


@pytest.mark.one_recorder
def test_help_of_each_setting_reads_as_sentences(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memdump_e2e, "COMPACT", True)  # every setting as GDB starts
    commands = []
    expected = []
    for name, _, default, subject, doc in SETTINGS:
        commands += [f"help set memdump {name}", f"help show memdump {name}",
                     f"show memdump {name}"]
        expected += [f"Set the {subject}.", f"{doc} Default: {default}.",
                     f"Show the {subject}.", f"{doc} Default: {default}.",
                     f"The {subject} is {default}."]
    run = _gdb(*commands)
    assert run.stdout.splitlines() == expected
    assert "Set the how" not in run.stdout


@pytest.mark.one_recorder
def test_set_memdump_alone_lists_the_settings() -> None:
    run = run_gdb(gdb_argv(["set memdump", "set memdump frames 3"]))
    width = max(len(f"{name} {syntax}") for name, syntax, *_ in SETTINGS)
    assert run.stdout == '"set memdump" must be followed by the name of a setting:\n' + "".join(
        f"  {name + ' ' + syntax:<{width}}  {subject} (default {default})\n"
        for name, syntax, default, subject, _ in SETTINGS)
    assert run.stderr == 'Undefined set memdump command: "frames 3".  Try "help set memdump".\n'


# -- memdump status --------------------------------------------------------------------------------


def _json_blocks(text: str) -> list[dict]:
    return [json.loads(m.group(0)) for m in re.finditer(r"(?ms)^\{$.*?^\}$", text)]


def test_status_rate_is_over_the_time_the_program_ran(dump: Path) -> None:
    """Two seconds at the GDB prompt (a breakpoint) count in elapsed_s, not in running_s, and the
    rate is events over running_s."""
    brk = marker("live_blocks.c", "here", "BREAK")
    run = record("live_blocks", dump=dump, before=[f"break {brk}"], after=[
        "python import time; time.sleep(2)",
        "memdump status --json",
        "continue",
        "python import time; time.sleep(1)",
        "memdump status --json",
        "memdump status",
    ])
    at_break, at_end = _json_blocks(run.stdout)
    for status, stopped in ((at_break, 2.0), (at_end, 3.0)):
        assert status["elapsed_s"] - status["running_s"] >= stopped - 0.002, status
        assert status["running_s"] > 0
        assert abs(status["events_per_s"] - status["events"] / status["running_s"]) < 1, status
    assert at_break["state"] == "recording" and at_end["state"] == "ended"
    assert at_end["running_s"] >= at_break["running_s"]
    assert at_end["events"] == len(read_dump(dump).events) == 6
    text = run.stdout[run.stdout.rindex("state:"):]
    line = re.search(r"^events:       6 in (\d+\.\d) s of running \(([\d,]+)/s; time stopped "
                     r"in GDB not counted\)$", text, re.M)
    assert line is not None, text
    running = at_end["running_s"]  # rounded to the ms: the text's figures within rounding of it
    assert abs(float(line.group(1)) - running) <= 0.051, text
    assert abs(int(line.group(2).replace(",", "")) - 6 / running) <= 1, text


LEGEND = {
    "nested": "allocator calls made by the allocator itself (realloc(NULL, n) calling malloc): "
              "part of the outer operation, not recorded again",
    "partial-stacks": "call stacks memdump's unwinder could walk only part of (no unwind "
                      "information, unreadable memory): recorded as far as they go",
    "scan-ms": "milliseconds the pointer scan at the end (exit, memdump stop, detach) took",
}


def _counters(text: str) -> dict[str, tuple[int, str]]:
    """The `counters:` block of a text status: name -> (value, legend)."""
    block = text[text.index("counters:\n") + len("counters:\n"):]
    found = {}
    for line in block.splitlines():
        match = re.fullmatch(r"  (\S+) ([\d,]+) +(.+)", line)
        if match is None:
            break
        found[match.group(1)] = (int(match.group(2).replace(",", "")), match.group(3))
    return found


def test_status_explains_each_counter(tmp_path: Path) -> None:
    """realloc(NULL, n) calls malloc inside (nested); a C++ program allocates from ld.so's
    initialisers, whose stacks end in hand-written code without CFI (partial-stacks)."""
    realloc = record("leak_realloc", dump=tmp_path / "realloc.memdump",
                     after=["memdump status", "memdump status --json"])
    cpp = record("no_leak_cpp", dump=tmp_path / "cpp.memdump",
                 after=["memdump status", "memdump status --json"])
    # in-process, glibc's realloc reaches malloc by a direct call: nothing nested to see
    checks = [(cpp, "partial-stacks")]
    if memdump_e2e.MODE == "breakpoints":
        checks.append((realloc, "nested"))
    for run, key in checks:
        counters = _counters(run.stdout)
        status = _json_blocks(run.stdout)[0]
        assert key in counters, run.stdout
        assert {k: v for k, (v, _) in counters.items()} == status["counts"]
        for name, (_, legend) in counters.items():
            assert legend == LEGEND[name], (name, legend)


# -- a second run in the same GDB session ----------------------------------------------------------


def test_second_run_records_into_a_new_dump(tmp_path: Path) -> None:
    """Without -o: each run gets PROGRAM.PID.memdump with its own pid; settings changed between
    runs apply to the next recording; `memdump stop` disarms, and a third run is not recorded."""
    run = run_gdb(gdb_argv(["memdump", "run", "set memdump depth 1", "run", "memdump status",
                            "memdump stop", "run"], [program("leak_malloc")]), cwd=tmp_path)
    assert run.returncode == 0 and run.stderr == "", run.describe()
    started = re.findall(r"^memdump: recording process (\d+) to (\S+)$", run.stdout, re.M)
    assert len(started) == 2, run.describe()
    (pid1, first), (pid2, second) = started
    assert pid1 != pid2
    assert (first, second) == (f"leak_malloc.{pid1}.memdump", f"leak_malloc.{pid2}.memdump")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first, second])
    for name, pid, depth in ((first, pid1, "32"), (second, pid2, "1")):
        facts = read_dump(tmp_path / name)
        assert (facts.info["pid"], facts.info["depth"], facts.end) == (pid, depth, ("exit", "0"))
        assert facts.sizes() == [100, 24]  # the same program, recorded twice
    again = "memdump: armed again: the next run is recorded into a new dump (memdump stop disarms)"
    assert run.memdump_lines().count(again) == 2
    # After the second run, status is about its recording, and says the next run is armed.
    assert re.search(rf"^dump:         {re.escape(second)}\n", run.stdout, re.M)
    assert "next run:     recorded into a new dump (memdump stop disarms)\n" in run.stdout
    assert "memdump: disarmed: the program's next run is not recorded\n" in run.stdout
    assert run.stdout.count("[Inferior 1 (process") == 3


def test_second_run_after_output_option(tmp_path: Path) -> None:
    """After `memdump -o DIR/NAME.memdump` the next runs go to DIR/NAME-2.memdump, -3, ..."""
    dump = tmp_path / "app.memdump"
    run = run_gdb(gdb_argv([f"memdump -o {dump}", "run", "run", "run"],
                           [program("leak_malloc")]), cwd=tmp_path)
    assert run.returncode == 0 and run.stderr == "", run.describe()
    names = ["app.memdump", "app-2.memdump", "app-3.memdump"]
    started = re.findall(r"^memdump: recording process \d+ to (\S+)$", run.stdout, re.M)
    assert started == [str(tmp_path / n) for n in names]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    pids = {read_dump(tmp_path / n).info["pid"] for n in names}
    assert len(pids) == 3


def test_memdump_after_a_run_replaces_the_automatic_arming(tmp_path: Path) -> None:
    """`memdump -o FILE` after a run names the next dump (the old way still works)."""
    first = tmp_path / "first.memdump"
    second = tmp_path / "second.memdump"
    run = run_gdb(gdb_argv([f"memdump -o {first}", "run", f"memdump -o {second}", "run"],
                           [program("leak_malloc")]))
    assert run.returncode == 0 and run.stderr == "", run.describe()
    assert read_dump(first).end == read_dump(second).end == ("exit", "0")
    assert not (tmp_path / "first-2.memdump").exists()


def test_run_again_while_stopped(tmp_path: Path) -> None:
    """`run` at a breakpoint restarts the program: the first dump ends there, the new run is
    recorded into a new dump from its start."""
    brk = marker("live_blocks.c", "here", "BREAK")
    run = run_gdb(gdb_argv(["memdump", f"break {brk}", "run", "run", "continue"],
                           [program("live_blocks")]), cwd=tmp_path)
    assert run.returncode == 0 and run.stderr == "", run.describe()
    started = re.findall(r"^memdump: recording process (\d+) to (\S+)$", run.stdout, re.M)
    assert [name for _, name in started] == [f"live_blocks.{pid}.memdump" for pid, _ in started]
    assert len(started) == 2, run.describe()
    first, second = (read_dump(tmp_path / name) for _, name in started)
    assert first.sizes() == [11, 22, 33] and first.end is not None and first.end[0] != "exit"
    assert second.sizes() == [11, 22, 33, 44] and second.end == ("exit", "0")
