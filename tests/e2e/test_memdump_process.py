"""memdump end to end: how recordings end (crash, _exit, abort, SIGKILL, GDB killed), fork, exec,
attach."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest
from memdump_e2e import (
    GDB_TIMEOUT,
    POLL_DEADLINE,
    analyze,
    analyze_raw,
    expect_leaks,
    gdb_argv,
    kill_pid,
    marker,
    program,
    read_dump,
    record,
    wait_for_dump,
)


def test_sigsegv_stopped_when_gdb_exits(dump: Path) -> None:
    """`run` stops at the SIGSEGV; batch GDB then quits (killing the program): the dump notes the
    signal, ends with gdb-exit, and the leak is there."""
    record("crash_segv", dump=dump)
    facts = read_dump(dump)
    assert ("signal", "SIGSEGV") in facts.process
    assert facts.end == ("gdb-exit", "-")
    report = analyze(dump)
    expect_leaks(report, {marker("crash_segv.c", "before-crash"): (64, 1)})
    assert report.complete
    assert report.end["reason"] == "gdb-exit"


def test_sigsegv_delivered(dump: Path) -> None:
    """`continue` after the SIGSEGV stop delivers it: the program dies, the dump ends `killed`."""
    record("crash_segv", dump=dump, after=["continue"])
    facts = read_dump(dump)
    assert ("signal", "SIGSEGV") in facts.process
    assert facts.end == ("killed", "SIGSEGV")
    report = analyze(dump)
    expect_leaks(report, {marker("crash_segv.c", "before-crash"): (64, 1)})
    assert report.complete
    assert report.end["reason"] == "killed"
    assert report.end["detail"] == "SIGSEGV"


def test_abort(dump: Path) -> None:
    record("crash_abort", dump=dump, after=["continue"])
    facts = read_dump(dump)
    assert ("signal", "SIGABRT") in facts.process
    assert facts.end == ("killed", "SIGABRT")
    report = analyze(dump)
    expect_leaks(report, {marker("crash_abort.c", "before-abort"): (56, 1)})
    assert report.complete


def test_underscore_exit(dump: Path) -> None:
    record("leak_exit", dump=dump)
    assert read_dump(dump).end == ("exit", "5")
    report = analyze(dump)
    expect_leaks(report, {marker("leak_exit.c", "before-exit"): (48, 1)})
    assert report.complete
    assert report.end["reason"] == "exit"
    assert str(report.end["detail"]) == "5"


def test_sigkill(dump: Path) -> None:
    """SIGKILL cannot be intercepted: no signal record, but the end says how the program died."""
    record("leak_sigkill", dump=dump)
    facts = read_dump(dump)
    assert facts.end == ("killed", "SIGKILL")
    report = analyze(dump)
    expect_leaks(report, {marker("leak_sigkill.c", "before-kill"): (72, 1)})
    assert report.complete


def test_fork_records_the_parent_only(dump: Path) -> None:
    """GDB follows the parent and detaches the child without breakpoints: the child runs to its end
    (the parent exits 0 only when the child exited 0) and its blocks are not in the dump."""
    record("fork_leak", dump=dump)
    facts = read_dump(dump)
    assert facts.end == ("exit", "0"), "the child did not exit normally (left with breakpoints?)"
    assert 80 not in facts.sizes() and 90 not in facts.sizes()
    report = analyze(dump)
    expect_leaks(report, {marker("fork_leak.c", "parent"): (70, 1)})


def test_exec_drops_the_old_image(dump: Path) -> None:
    """exec_leak leaks 90 bytes, then execs leak_malloc: the dump notes the exec, the 90 bytes are
    gone with the old image (not a leak), and the new image's leak is found at its own line."""
    record("exec_leak", program("leak_malloc"), dump=dump)
    facts = read_dump(dump)
    execs = [detail for what, detail in facts.process if what == "exec"]
    assert len(execs) == 1 and os.path.basename(execs[0]) == "leak_malloc", facts.process
    assert facts.sizes()[0] == 90
    assert facts.end == ("exit", "0")
    report = analyze(dump)
    expect_leaks(report, {marker("leak_malloc.c", "block"): (24, 1)})


def _has_event_of_size(size: int):  # noqa: ANN202
    def ready(text: str) -> bool:
        return any(line.startswith(("e ", "+ ")) and line.endswith(f" {size}")
                   for line in text.split("\n")[:-1])
    return ready


def _kill_gdb_while_the_program_waits(dump: Path) -> tuple[str, int]:
    """Record leak_then_wait, SIGKILL GDB once the 123-byte malloc is in the dump: (the dump's text
    then, GDB's exit status)."""
    argv = gdb_argv([f"memdump -o {dump}", "run"], [program("leak_then_wait")])
    gdb = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    inferior = 0
    try:
        text = wait_for_dump(dump, _has_event_of_size(123), "the 123-byte malloc",
                             alive=lambda: gdb.poll() is None)
        inferior = int(read_dump(dump).info["pid"])
        gdb.kill()
        gdb.wait(timeout=GDB_TIMEOUT)
    finally:
        if gdb.poll() is None:
            gdb.kill()
            gdb.wait(timeout=GDB_TIMEOUT)
        if gdb.stdin is not None:
            gdb.stdin.close()
        if inferior:
            kill_pid(inferior)  # orphaned: blocked on read, with breakpoints left in its code
    return text, gdb.returncode


def test_gdb_killed_dump_still_readable(dump: Path) -> None:
    """GDB is SIGKILLed while the program waits on stdin: the dump has no end, the analyser says the
    recording stopped early and still reports the leak made before."""
    text, returncode = _kill_gdb_while_the_program_waits(dump)
    assert "\nend " not in text
    assert returncode == -signal.SIGKILL
    facts = read_dump(dump)
    assert facts.end is None
    report = analyze(dump)
    assert not report.complete
    assert report.end is None
    assert any("stopped early" in w for w in report.data["warnings"]), report.dumps()
    assert "stopped early" in report.stderr
    expect_leaks(report, {marker("leak_then_wait.c", "first"): (123, 1)})


def _read_line(stream, deadline: float) -> bytes:  # noqa: ANN001
    """One line from a pipe, giving up at DEADLINE (monotonic)."""
    data = b""
    fd = stream.fileno()
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            pytest.fail(f"no line from the program within the deadline (got {data!r})")
        chunk = os.read(fd, 1)
        if not chunk:
            pytest.fail(f"the program closed its stdout (got {data!r})")
        data += chunk
    return data


def test_attach_records_what_happens_after(dump: Path) -> None:
    """`gdb -p PID` then `memdump`: the block allocated before attaching is unknown; the one
    allocated after is recorded, and the dump says it was attached."""
    target = subprocess.Popen([str(program("leak_then_wait"))], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    gdb = None
    try:
        assert _read_line(target.stdout, time.monotonic() + POLL_DEADLINE) == b"ready\n"
        argv = gdb_argv([f"memdump -o {dump}", "continue"], attach=target.pid)
        gdb = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, errors="replace")
        # Recording has begun once the header is out; the program is stopped until `continue`.
        wait_for_dump(dump, lambda text: "\ni gdb " in text, "the dump header",
                      alive=lambda: gdb.poll() is None)
        target.stdin.write(b"go\n")
        target.stdin.close()
        out, err = gdb.communicate(timeout=GDB_TIMEOUT)
        assert target.wait(timeout=GDB_TIMEOUT) == 0
    finally:
        if gdb is not None and gdb.poll() is None:
            gdb.kill()
            gdb.wait()
        if target.poll() is None:
            target.kill()
            target.wait()
    assert "Traceback" not in out + err, out + err
    facts = read_dump(dump)
    assert facts.info["attached"] == "1"
    assert facts.info["pid"] == str(target.pid)
    assert facts.end == ("exit", "0")
    assert 123 not in facts.sizes()
    report = analyze(dump)
    expect_leaks(report, {marker("leak_then_wait.c", "second"): (321, 1)})
    assert report.errors() == []


def test_32_threads_at_once_lose_nothing(dump: Path, memdump_mode: str) -> None:
    """32 threads released by one barrier allocate at the same time: every call is in the dump,
    in one sequence, and each thread's leaked block is found at its line."""
    rounds = 2000 if memdump_mode == "in-process" else 15
    record("threads_stress", str(rounds), dump=dump)
    facts = read_dump(dump)
    assert facts.end == ("exit", "0")
    assert [int(e[1]) for e in facts.events] == list(range(1, len(facts.events) + 1))
    site = marker("threads_stress.c", "round", "FREE")
    per_thread: dict[str, int] = {}
    for e in facts.events:
        top = facts.stack(int(e[4]))
        if e[3] == "malloc" and top and (top[0].file, top[0].line) == (site.file, site.line):
            per_thread[e[2]] = per_thread.get(e[2], 0) + 1
    assert sorted(per_thread.values()) == [rounds] * 32
    frees = sum(1 for e in facts.events if e[3] == "free" and e[2] in per_thread)
    assert frees >= 32 * rounds
    report = analyze(dump)
    expect_leaks(report, {marker("threads_stress.c", "per_thread"): (48 * 32, 32)})


def test_gdb_killed_frames_are_symbolised_from_the_modules(dump: Path, memdump_mode: str) -> None:
    """In-process: GDB is SIGKILLed (the kernel then kills the program it started: ptrace's
    EXITKILL); GDB never wrote the frames' symbols, the analyser takes them from the modules."""
    if memdump_mode != "in-process":
        pytest.skip("the breakpoint recorder writes each frame's symbols as it meets it")
    _kill_gdb_while_the_program_waits(dump)
    assert "\nfs " not in dump.read_text(errors="replace")
    report = analyze(dump)
    assert not report.complete
    assert report.data["symbolized_frames"] > 0, report.dumps()
    assert "symbolised from the modules with addr2line" in analyze_raw(dump).stdout
    expect_leaks(report, {marker("leak_then_wait.c", "first"): (123, 1)})


def test_signal_handler_allocating_inside_an_allocation(dump: Path, memdump_mode: str) -> None:
    """A timer's handler mallocs and frees while main mallocs and frees: no call is recorded
    twice or lost (nothing leaks, no error), nothing deadlocks, the program exits 0."""
    # GDB intercepts every signal (about 100 us each): a timer faster than that would leave the
    # program no time between two of them on a loaded machine. The breakpoint recorder gets a
    # slower timer and fewer rounds.
    args = ("1000000", "1000") if memdump_mode == "in-process" else ("100", "3000")
    record("signal_alloc", *args, dump=dump)
    facts = read_dump(dump)
    assert facts.end == ("exit", "0")
    sizes = facts.sizes()
    assert sum(1 for s in sizes if s != 40) == int(args[0])
    report = analyze(dump)
    assert report.summary["errors"] == 0 and report.leaked == (0, 0), report.dumps()
    assert report.summary["calls"]["free"] == report.summary["calls"]["malloc"]


def test_fork_while_threads_allocate_never_hangs(dump: Path) -> None:
    """Twenty forks while four threads allocate: every child (not recorded) exits 0, none hangs on
    a lock it inherited held, and the parent's dump is complete."""
    record("fork_threads", dump=dump)
    facts = read_dump(dump)
    assert facts.end == ("exit", "0")
    assert 64 not in facts.sizes()
    report = analyze(dump)
    assert report.summary["errors"] == 0 and report.leaked == (0, 0), report.dumps()
