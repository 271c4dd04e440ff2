"""memdump end to end: a program started through an exec (a wrapper script's `exec ./prog`, env,
nice, `sh -c`, a #! script executed by another) is recorded by the recorder of the run, the
in-process one loaded into each new image and configured again by GDB; the dump and the report
say which image each event belongs to (docs/recorder.md, "exec")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import memdump_e2e
import pytest
from memdump_e2e import (
    GDB_TIMEOUT,
    DumpFrame,
    analyze,
    analyze_raw,
    expect_leaks,
    gdb_argv,
    marker,
    program,
    read_dump,
    record,
    run_gdb,
)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "memdump.sh"
ITERATIONS = 1000
LEAK = marker("churn_leak.c", "after-exec")


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _wrapper(tmp_path: Path) -> Path:
    """wrap.sh: `exec PROG "$@"`, the issue's wrapper."""
    return _script(tmp_path / "wrap.sh", f'exec {program("churn_leak")} "$@"')


def _chain(tmp_path: Path) -> Path:
    """wrap.sh executes env, which executes nice, which executes inner.sh (a #! script), whose
    shell executes `sh -c`, whose shell executes the program: six images."""
    churn = program("churn_leak")
    _script(tmp_path / "inner.sh", f"exec sh -c 'exec \"$0\" \"$@\"' {churn} \"$@\"")
    return _script(tmp_path / "wrap.sh",
                   f'exec env MEMDUMP_TEST=1 nice -n 0 {tmp_path}/inner.sh "$@"')


def _memdump_sh(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    mode = ["--breakpoints"] if memdump_e2e.MODE == "breakpoints" else []
    proc = subprocess.run([str(SCRIPT), *mode, *(str(a) for a in args)], capture_output=True,
                          text=True, timeout=GDB_TIMEOUT, cwd=cwd, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _after_exec(dump: Path) -> list[str]:
    """The dump's lines after its last `p exec` record."""
    lines = dump.read_bytes().rstrip(b"\0").decode().splitlines()
    last = max(i for i, line in enumerate(lines) if line.split(" ")[:1] == ["p"]
               and line.split(" ")[2] == "exec")
    return lines[last + 1:]


def _check(dump: Path, mode: str, programs: list[str]) -> None:
    """The leak of churn_leak after the exec(s), found at its line, in the last image; each image
    named with its recorder, in the dump and in both reports."""
    facts = read_dump(dump)
    execs = [os.path.basename(detail) for what, detail in facts.process if what == "exec"]
    assert execs == programs[1:]
    assert facts.end == ("exit", "0")
    after = _after_exec(dump)
    assert after[0] == f"i recorder {mode}"  # the new image's recorder, named at once
    # the in-process recorder's own records (short events) after the exec, GDB's `e` otherwise
    assert any(line.startswith("+ ") for line in after) == (mode == "in-process")
    report = analyze(dump)
    expect_leaks(report, {LEAK: (77, 1)})
    images = report.data["images"]
    assert [os.path.basename(i["program"]) for i in images] == programs
    assert {i["recorder"] for i in images} == {mode}
    last = images[-1]
    assert (last["image"], last["last_seq"] - last["first_seq"] + 1) == (len(programs),
                                                                         2 * ITERATIONS + 1)
    assert [g["image"] for g in report.groups()] == [len(programs)]
    text = analyze_raw(dump).stdout
    assert text.splitlines()[0].endswith(f", which executed {program('churn_leak')}")
    assert (f"LEAK 1 of 1: 77 bytes in 1 block, definitely lost, in image {len(programs)} "
            f"(churn_leak)") in text
    row = next(line for line in text.splitlines() if line.strip().startswith("images:"))
    assert f"{len(programs)}. {program('churn_leak')} (events {last['first_seq']:,} to " \
           f"{last['last_seq']:,}, {mode} recorder)" in row


def test_memdump_sh_wrapper_exec(tmp_path: Path, dump: Path, memdump_mode: str) -> None:
    """`memdump.sh -- ./wrap.sh N`: the program the wrapper executes is recorded by the run's
    recorder (the in-process one again, not breakpoints)."""
    _wrapper(tmp_path)
    proc = _memdump_sh("-o", dump, "--", "./wrap.sh", ITERATIONS, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _check(dump, memdump_mode, ["dash", "churn_leak"])


def test_gdb_command_wrapper_exec(tmp_path: Path, dump: Path, memdump_mode: str) -> None:
    """`memdump` then `run` in GDB on `sh wrap.sh N`: the same, GDB configuring the recorder it
    finds in the new image."""
    wrap = _wrapper(tmp_path)
    run = run_gdb(gdb_argv([f"memdump -o {dump}", "run"], ["/bin/sh", wrap, str(ITERATIONS)]),
                  dump)
    assert "exited normally" in run.output, run.describe()
    assert not any("recording it with breakpoints" in line for line in run.memdump_lines())
    _check(dump, memdump_mode, ["dash", "churn_leak"])


def test_exec_chain(tmp_path: Path, dump: Path, memdump_mode: str) -> None:
    """env, nice, a #! script and `sh -c` each execute the next: six images, one recorder."""
    _chain(tmp_path)
    proc = _memdump_sh("-o", dump, "--", "./wrap.sh", ITERATIONS, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _check(dump, memdump_mode, ["dash", "env", "nice", "dash", "dash", "churn_leak"])


@pytest.mark.one_recorder
def test_raw_execve_falls_back_to_breakpoints(dump: Path) -> None:
    """An exec no hook sees (a raw system call): the new image has no recorder, and is recorded
    with breakpoints, said in the dump and the report."""
    run = record("exec_raw", program("churn_leak"), str(ITERATIONS), dump=dump)
    assert any("churn_leak was executed without the in-process recorder" in line
               for line in run.memdump_lines()), run.describe()
    _after = _after_exec(dump)
    assert _after[0] == "i recorder breakpoints"
    report = analyze(dump)
    expect_leaks(report, {LEAK: (77, 1)})
    assert [(os.path.basename(i["program"]), i["recorder"]) for i in report.data["images"]] == \
        [("exec_raw", "in-process"), ("churn_leak", "breakpoints")]


@pytest.mark.one_recorder
def test_exec_of_a_static_program_is_said(dump: Path) -> None:
    """exec_leak (90 bytes, gone with its image) executes a statically linked program, which no
    recorder can hook: memdump says so, and the dump ends with the images it had."""
    run = record("exec_leak", program("leak_malloc_static"), dump=dump)
    assert (f"memdump: warning: {program('leak_malloc_static')} exports no allocator to hook "
            "(statically linked?): its events are not recorded") in run.memdump_lines()
    report = analyze(dump)
    assert report.leaked == (0, 0)
    assert [(os.path.basename(i["program"]), i["recorder"], i["first_seq"], i["last_seq"])
            for i in report.data["images"]] == [("exec_leak", "in-process", 1, 1),
                                               ("leak_malloc_static", None, 3, 2)]


@pytest.mark.one_recorder
def test_the_clock_goes_on_across_an_exec(tmp_path: Path, dump: Path) -> None:
    """churn_leak makes 200,000 events (clock samples), leaks 77 bytes, then executes churn_leak
    again: the new image's samples go on from the recording's start (the analyser refuses a clock
    that goes back), and only the second image's block is a leak."""
    churn = program("churn_leak")
    proc = _memdump_sh("-o", dump, "--", churn, 100000, churn, ITERATIONS, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = dump.read_bytes().rstrip(b"\0").decode().splitlines()
    samples = [int(line.split(" ")[1]) for line in lines if line.startswith("c ")]
    after = len(_after_exec(dump))
    before = sum(1 for line in lines[:len(lines) - after] if line.startswith("c "))
    assert 0 < before < len(samples)  # samples in both images
    assert samples == sorted(samples)
    report = analyze(dump)
    expect_leaks(report, {LEAK: (77, 1)})
    assert [(i["first_seq"], i["last_seq"]) for i in report.data["images"]] == [
        (1, 200001), (200003, 200003 + 2 * ITERATIONS)]


@pytest.mark.one_recorder
@pytest.mark.parametrize("form", ["v", "ve", "vp", "vpe", "l", "le", "lp", "f"])
def test_every_exec_function_keeps_the_recorder(dump: Path, form: str) -> None:
    """execv, execve, execvp, execvpe, execl, execle, execlp, fexecve: after one that failed (errno
    kept), one that succeeds gives the recorder to the new image."""
    run = record("exec_forms", form, program("churn_leak"), str(ITERATIONS), dump=dump)
    assert "exited normally" in run.output, run.describe()
    assert _after_exec(dump)[0] == "i recorder in-process"
    # GDB symbolised the old image's frames at the exec hook's stop, while it had its symbols
    facts = read_dump(dump)
    malloc = next(e for e in facts.events if e[3] == "malloc" and e[-1] == "60")  # image 1
    assert facts.stack(int(malloc[4]))[0] == DumpFrame("main", "exec_forms.c",
                                                       marker("exec_forms.c", "before-exec",
                                                              "FREE").line)
    report = analyze(dump)
    expect_leaks(report, {LEAK: (77, 1)})
    assert [(os.path.basename(i["program"]), i["recorder"]) for i in report.data["images"]] == [
        ("exec_forms", "in-process"), ("churn_leak", "in-process")]
