"""memdump end to end: heap misuse the analyser reports, and the command's own one-line errors."""

from __future__ import annotations

import re
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


def _one_error(run: GdbRun, *words: str) -> str:
    """The single `memdump:` line containing every one of WORDS."""
    lines = [line for line in run.memdump_lines() if all(w in line for w in words)]
    assert len(lines) == 1, run.describe()
    return lines[0]


def test_no_program(dump: Path) -> None:
    run = run_gdb(gdb_argv([f"memdump -o {dump}"]))
    line = _one_error(run, "no program to record")
    assert run.memdump_lines() == [line]
    assert not dump.exists()


def test_output_in_missing_directory(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "x.memdump"
    run = run_gdb(gdb_argv([f"memdump -o {target}"], [program("leak_malloc")]))
    line = _one_error(run, "cannot write the dump", str(target))
    assert "No such file or directory" in line
    assert run.memdump_lines() == [line]


def test_output_is_a_directory(tmp_path: Path) -> None:
    run = run_gdb(gdb_argv([f"memdump -o {tmp_path}"], [program("leak_malloc")]))
    line = _one_error(run, "cannot write the dump", str(tmp_path), "directory")
    assert run.memdump_lines() == [line]


def test_static_program_refused(dump: Path) -> None:
    run = run_gdb(gdb_argv([f"memdump -o {dump}"], [program("leak_malloc_static")]))
    line = _one_error(run, "leak_malloc_static", "statically linked")
    assert run.memdump_lines() == [line]
    assert not dump.exists()


def test_second_memdump_while_recording(tmp_path: Path) -> None:
    first = tmp_path / "first.memdump"
    second = tmp_path / "second.memdump"
    brk = marker("live_blocks.c", "here", "BREAK")
    run = run_gdb(gdb_argv(
        [f"memdump -o {first}", f"break {brk}", "run", f"memdump -o {second}", "continue"],
        [program("live_blocks")],
    ))
    _one_error(run, "already recording", str(first))
    assert not second.exists()
    # The first recording goes on undisturbed.
    assert read_dump(first).end == ("exit", "0")
    expect_leaks(analyze(first), {
        marker("live_blocks.c", "leaked"): (33, 1),
        marker("live_blocks.c", "late"): (44, 1),
    })


def test_unknown_option(dump: Path) -> None:
    run = run_gdb(gdb_argv(["memdump --frobnicate"], [program("leak_malloc")]))
    line = _one_error(run, "--frobnicate")
    assert run.memdump_lines() == [line]


def test_queries_before_recording() -> None:
    run = run_gdb(gdb_argv(["memdump leaks", "memdump status", "memdump stop"],
                           [program("leak_malloc")]))
    lines = run.memdump_lines()
    assert len(lines) == 3, run.describe()
    assert re.search(r"nothing recorded|not recording", lines[0]), lines
    assert re.search(r"nothing recorded|not recording", lines[1]), lines
    assert "not recording" in lines[2], lines
