"""memdump end to end: heap misuse the analyser reports, and the command's own one-line errors."""

from __future__ import annotations

from pathlib import Path

from memdump_e2e import (
    GdbRun,
    analyze,
    expect_leaks,
    frame_site,
    gdb_argv,
    marker,
    program,
    read_dump,
    record,
    run_gdb,
)

# -- heap misuse: glibc aborts the program, the dump still has the operation -----------------------


def test_double_free(dump: Path) -> None:
    record("bad_free", "double", dump=dump)
    facts = read_dump(dump)
    assert ("signal", "SIGABRT") in facts.process
    assert [e[3] for e in facts.events] == ["malloc", "free", "free"]
    report = analyze(dump)
    expect_leaks(report, {})
    errors = report.errors()
    assert [e["kind"] for e in errors] == ["double-free"], report.dumps()
    assert frame_site(errors[0]["stack"][0]) == marker("bad_free.c", "second", "DOUBLE-FREE")
    # ... with the stack of the free that released the block first.
    freed_at = errors[0]["freed_at"]
    assert freed_at is not None, report.dumps()
    assert frame_site(freed_at["stack"][0]) == marker("bad_free.c", "first", "FREE")


def test_invalid_free(dump: Path) -> None:
    record("bad_free", "invalid", dump=dump)
    assert ("signal", "SIGABRT") in read_dump(dump).process
    report = analyze(dump)
    # The block itself was never freed: free(block + 8) released nothing.
    expect_leaks(report, {marker("bad_free.c", "invalid-base"): (40, 1)})
    errors = report.errors()
    assert [e["kind"] for e in errors] == ["invalid-free"], report.dumps()
    assert frame_site(errors[0]["stack"][0]) == marker("bad_free.c", "middle", "INVALID-FREE")


def test_invalid_realloc_that_aborts_inside_realloc(dump: Path) -> None:
    """glibc aborts inside realloc, so the call never returns: memdump still writes it (RESULT
    0x0) when the fatal signal arrives, and the analyser reports the invalid realloc."""
    record("bad_free", "realloc", dump=dump)
    facts = read_dump(dump)
    assert [e[3] for e in facts.events] == ["malloc", "realloc"]
    assert facts.events[-1][5] == "0x0"
    assert ("signal", "SIGABRT") in facts.process
    report = analyze(dump)
    expect_leaks(report, {marker("bad_free.c", "realloc-base"): (24, 1)})
    errors = report.errors()
    assert [e["kind"] for e in errors] == ["invalid-realloc"], report.dumps()
    assert frame_site(errors[0]["stack"][0]) == marker("bad_free.c", "middle", "INVALID-REALLOC")
    assert errors[0]["freed_at"] is None


# -- the command's errors: one line starting with `memdump:`, no traceback -------------------------
# These run GDB in batch mode, where a memdump that cannot record also stops GDB with status 1
# before the program runs (test_memdump_batch.py covers that, and the interactive case).

BATCH_EXIT = "memdump: nothing is recorded: GDB exits with status 1 (batch mode)"


def _one_error(run: GdbRun, *words: str) -> str:
    """The single `memdump:` line containing every one of WORDS."""
    lines = [line for line in run.memdump_lines() if all(w in line for w in words)]
    assert len(lines) == 1, run.describe()
    return lines[0]


def _refused(run: GdbRun, message: str) -> None:
    """GDB said MESSAGE, then that it exits, exited with status 1 and never ran the program."""
    assert (run.returncode, run.stdout, run.stderr) == (1, "", f"{message}\n{BATCH_EXIT}\n"), \
        run.describe()


def test_no_program(dump: Path) -> None:
    run = run_gdb(gdb_argv([f"memdump -o {dump}", "run"]))
    _refused(run, "memdump: no program to record: start GDB with one (gdb ./app), use "
                  "'file ./app', or attach to a process (gdb -p PID)")
    assert not dump.exists()


def test_output_in_missing_directory(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "x.memdump"
    run = run_gdb(gdb_argv([f"memdump -o {target}", "run"], [program("leak_malloc")]))
    _refused(run, f"memdump: cannot write the dump to {target}: No such file or directory")


def test_output_is_a_directory(tmp_path: Path) -> None:
    run = run_gdb(gdb_argv([f"memdump -o {tmp_path}", "run"], [program("leak_malloc")]))
    _refused(run, f"memdump: cannot write the dump to {tmp_path}: it is a directory")


def test_static_program_refused(dump: Path) -> None:
    static = program("leak_malloc_static")
    run = run_gdb(gdb_argv([f"memdump -o {dump}", "run"], [static]))
    _refused(run, f"memdump: {static} is statically linked: its allocator has no dynamic symbols "
                  "to hook (link it dynamically to record it)")
    assert not dump.exists()


def test_second_memdump_while_recording(tmp_path: Path) -> None:
    first = tmp_path / "first.memdump"
    second = tmp_path / "second.memdump"
    brk = marker("live_blocks.c", "here", "BREAK")
    run = run_gdb(gdb_argv(
        [f"memdump -o {first}", f"break {brk}", "run", f"memdump -o {second}", "continue"],
        [program("live_blocks")],
    ))
    line = _one_error(run, "already recording", str(first))
    assert line == f"memdump: already recording to {first} (memdump stop ends it)"
    # Not a failure to record: GDB goes on, even in batch mode.
    assert BATCH_EXIT not in run.stderr and run.returncode == 0, run.describe()
    assert not second.exists()
    # The first recording goes on undisturbed.
    assert read_dump(first).end == ("exit", "0")
    expect_leaks(analyze(first), {
        marker("live_blocks.c", "leaked"): (33, 1),
        marker("live_blocks.c", "late"): (44, 1),
    })


def test_second_memdump_while_armed(tmp_path: Path) -> None:
    """Before the program runs, a second memdump finds the first armed, not recording."""
    first = tmp_path / "first.memdump"
    second = tmp_path / "second.memdump"
    run = run_gdb(gdb_argv([f"memdump -o {first}", f"memdump -o {second}", "memdump", "run"],
                           [program("leak_malloc")]))
    armed = (f"memdump: already armed: recording to {first} starts when the program runs "
             "(memdump stop disarms)")
    assert run.stdout.startswith("memdump: armed: recording starts when the program runs\n")
    assert run.stderr == f"{armed}\n{armed}\n", run.describe()
    assert run.returncode == 0, run.describe()
    assert not second.exists()
    assert read_dump(first).end == ("exit", "0")


def test_unknown_option(dump: Path) -> None:
    run = run_gdb(gdb_argv(["memdump --frobnicate", "run"], [program("leak_malloc")]))
    _refused(run, "memdump: unrecognized arguments: --frobnicate")


def test_queries_before_recording() -> None:
    run = run_gdb(gdb_argv(["memdump leaks", "memdump status", "memdump stop"],
                           [program("leak_malloc")]))
    lines = run.memdump_lines()
    assert lines == [
        "memdump: nothing recorded yet (start with: memdump, then run)",
        "memdump: nothing recorded yet (start with: memdump, then run)",
        "memdump: not recording",
    ], run.describe()
    # Queries are not recordings: GDB goes on (its status is the last command's, which failed).
    assert BATCH_EXIT not in run.stderr, run.describe()
