"""memdump on a running multi-threaded process (gdb -p PID, memdump.sh -p PID): the in-process
recorder is loaded into it (docs/recorder.md); every event between the attach and the detach is in
the dump, and the process runs on unharmed, recorded again and again."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from memdump_e2e import (
    GDB_TIMEOUT,
    REPO,
    Commanded,
    analyze,
    expect_stop_kinds,
    frame_site,
    gdb_argv,
    marker,
    program,
    read_dump,
    wait_for_output,
)

SRC = "alloc_threads.c"
WORKERS = 4
OLD_BLOCKS = 5
SCRIPT = REPO / "scripts" / "memdump.sh"


class Service(Commanded):
    """tests/programs/alloc_threads: allocates in several threads forever, and a known set of
    blocks on each command (or another program that answers commands)."""

    def __init__(self, name: str = "alloc_threads") -> None:
        super().__init__(name)

    def exit(self) -> int:
        out, _ = self.proc.communicate(b"exit\n", timeout=GDB_TIMEOUT)
        assert out == b""
        return self.proc.returncode


@pytest.fixture
def service() -> Iterator[Service]:
    s = Service()
    try:
        yield s
    finally:
        s.kill()


#: GDB's line once the process records (and runs at the next continue)
STARTED = ("memdump: in-process recorder: loaded", "recording with breakpoints")


def _started(mode: str) -> tuple[str, ...]:
    return STARTED if mode == "in-process" else ("memdump: recording process",)


def record_commands(service: Service, dump: Path, commands: list[str], mode: str,
                    env: dict[str, str] | None = None, stop: str | None = None) -> str:
    """gdb -p: memdump, continue; COMMANDS answered while recorded; SIGINT stops it, detach.
    STOP: a breakpoint that stops it instead (the last command is answered after the detach)."""
    before = [f"memdump -o {dump}"] + ([f"break {stop}"] if stop else [])
    argv = gdb_argv([*before, "continue", "detach"], attach=service.proc.pid)
    gdb = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env)
    try:
        head = wait_for_output(gdb, _started(mode))
        for command in commands[:-1] if stop else commands:
            assert service.ask(command) == "ok"
        if stop:
            assert service.ask(commands[-1]) == "ok"  # once GDB has detached
        else:
            os.kill(service.proc.pid, signal.SIGINT)  # GDB stops it there (keeps the signal)
        rest, _ = gdb.communicate(timeout=GDB_TIMEOUT)
    finally:
        if gdb.poll() is None:
            gdb.kill()
            gdb.wait()
    assert gdb.returncode == 0, "".join(head) + rest
    assert "Traceback" not in rest
    return "".join(head) + rest


def expect_rounds(dump: Path, rounds: list[int], old_freed: int = 0) -> None:
    """The dump holds exactly the blocks of ROUNDS (k blocks per worker each, freed, and one
    kept), OLD_FREED frees of blocks from before the attach, and its end."""
    facts = read_dump(dump)
    assert facts.end == ("detach", "-")
    assert facts.info["attached"] == "1"
    sizes = Counter(facts.sizes())
    k = sum(rounds)
    for w in range(WORKERS):
        assert sizes[1000 + w] == k, (w, sizes)
        assert sizes[2000 + w] == len(rounds), (w, sizes)
    assert sizes[4242] == 0
    freed = {e[-1] for e in facts.events if e[3] == "free"}
    malloced = {e[5] for e in facts.events if e[3] == "malloc" and 1000 <= int(e[-1]) < 1004}
    assert malloced <= freed
    report = analyze(dump)
    assert report.complete
    assert report.errors() == []
    assert report.summary["untracked_frees"] >= old_freed
    # scanned at the detach, a site's blocks are in one group per kind (the last round's kept
    # blocks still on the workers' stacks, the earlier ones lost); when the SIGINT stopped a
    # worker inside malloc (breakpoints: between its entry and its return) there is no scan
    site = marker(SRC, "kept")
    kept = [g for g in report.groups() if frame_site(g["stack"][0]) == site]
    kinds = ("definite", "reachable") if report.summary["scan"] is not None else (None,)
    assert all(g["leak_kind"] in kinds for g in kept), report.dumps()
    assert (sum(g["bytes"] for g in kept), sum(g["blocks"] for g in kept)) == (
        sum(2000 + w for w in range(WORKERS)) * len(rounds), WORKERS * len(rounds)), kept


def test_attach_record_detach(service: Service, dump: Path, memdump_mode: str) -> None:
    """Every event of two commands between the attach and the detach; the blocks allocated
    before the attach, freed then, are counted (untracked frees), no error; then the process
    runs on by itself, untraced, and exits normally."""
    out = record_commands(service, dump, ["round 7", "free-old", "round 5"], memdump_mode)
    if memdump_mode == "in-process":
        assert f"memdump: in-process recorder: loaded into process {service.proc.pid}" in out, out
    assert read_dump(dump).info["recorder"] == memdump_mode
    expect_rounds(dump, [7, 5], old_freed=OLD_BLOCKS)
    assert not service.traced()
    assert service.ask("round 3") == "ok"
    assert service.exit() == 0


def test_detach_inside_an_allocator_call(service: Service, dump: Path,
                                         memdump_mode: str) -> None:
    """Detached while a thread is inside the recorder's malloc (stopped in the C library's): the
    call finishes, recorded, before GDB lets go; then the recorder records nothing more."""
    if memdump_mode == "breakpoints":
        pytest.skip("the breakpoint recorder's calls in progress are memdump.sh -p's (its window)")
    out = record_commands(service, dump, ["round 2", "one 3001"], memdump_mode,
                          stop="__libc_malloc if $rdi == 3001")
    # this call, and maybe one of the thread allocating forever
    assert re.search(r"^memdump: letting the [12] allocator calls? in progress finish before the "
                     r"detach$", out, re.M), out
    assert "hit Breakpoint -" not in out
    facts = read_dump(dump)
    assert facts.end == ("detach", "-")
    assert facts.sizes().count(3001) == 1
    expect_rounds(dump, [2])
    assert service.ask("one 3001") == "ok"
    assert read_dump(dump).sizes().count(3001) == 1
    assert service.exit() == 0


def test_module_loaded_after_the_attach(service: Service, dump: Path, memdump_mode: str) -> None:
    """A library the process dlopens while recorded is recorded too (its GOT redirected by the
    recorder's dlopen)."""
    plugin = program("alloc_threads").parent / "libmemdump_plugin.so"
    record_commands(service, dump, ["round 1", f"plugin {plugin}", "round 1"], memdump_mode)
    expect_rounds(dump, [1, 1])
    group = analyze(dump).group_at(marker("plugin.c", "plugin"))  # the kept ones: two kinds
    assert (group["bytes"], group["blocks"]) == (33, 1)
    assert service.exit() == 0


def test_twenty_cycles(tmp_path: Path, service: Service, memdump_mode: str) -> None:
    """20 attach/record/detach cycles on one process (the recorder loaded once, configured again
    each time): no crash, each dump complete with exactly its own events."""
    cycles = 20 if memdump_mode == "in-process" else 4
    for i in range(cycles):
        dump = tmp_path / f"cycle{i}.memdump"
        out = record_commands(service, dump, [f"round {i + 1}"], memdump_mode)
        assert "recording with breakpoints" not in out or memdump_mode == "breakpoints", out
        expect_rounds(dump, [i + 1])
        assert service.proc.poll() is None
        assert service.ask("round 2") == "ok"  # unrecorded, between two recordings
    assert service.exit() == 0


def test_memdump_sh_attach(tmp_path: Path, dump: Path, service: Service,
                           memdump_mode: str) -> None:
    """memdump.sh -p: the window, stopped by SIGINT; the process goes on."""
    mode = ["--breakpoints"] if memdump_mode == "breakpoints" else []
    script = subprocess.Popen([str(SCRIPT), *mode, "-o", str(dump), "-p", str(service.proc.pid)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert script.stderr is not None
        line = script.stderr.readline()
        assert line.startswith(f"memdump.sh: recording process {service.proc.pid}"), line
        assert service.ask("round 9") == "ok"
        script.send_signal(signal.SIGINT)
        out, err = script.communicate(timeout=GDB_TIMEOUT)
    finally:
        if script.poll() is None:
            script.kill()
            script.wait()
    assert script.returncode == 0, err
    assert "Traceback" not in err
    assert read_dump(dump).info["recorder"] == memdump_mode
    expect_rounds(dump, [9])
    assert not service.traced()
    assert service.ask("round 1") == "ok"
    assert service.exit() == 0


def test_recorder_that_cannot_load(tmp_path: Path, dump: Path, service: Service,
                                   memdump_mode: str) -> None:
    """A recorder dlopen refuses: one line says so, and memdump records with breakpoints."""
    if memdump_mode == "breakpoints":
        pytest.skip("nothing is loaded with breakpoints")
    bad = tmp_path / "libmemdump_recorder.so"
    bad.write_text("not a shared object\n" * 200)
    env = {**os.environ, "MEMDUMP_RECORDER": str(bad)}
    out = record_commands(service, dump, ["round 4"], memdump_mode, env=env)
    lines = [line for line in out.splitlines() if "recording with breakpoints" in line]
    assert lines == [f"memdump: cannot load the in-process recorder into the process: {bad}: "
                     "invalid ELF header: recording with breakpoints"], out
    assert read_dump(dump).info["recorder"] == "breakpoints"
    expect_rounds(dump, [4])
    assert service.ask("round 1") == "ok"
    assert service.exit() == 0


def test_stop_and_record_again_in_one_gdb(tmp_path: Path, service: Service,
                                          memdump_mode: str) -> None:
    """`memdump stop` disables the recorder (the process stopped at the prompt); a second
    `memdump` in the same GDB records into a new dump (the recorder configured again)."""
    first, second = tmp_path / "first.memdump", tmp_path / "second.memdump"
    argv = gdb_argv([f"memdump -o {first}", "continue", "memdump stop", f"memdump -o {second}",
                     "continue", "detach"], attach=service.proc.pid)
    gdb = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        head = wait_for_output(gdb, _started(memdump_mode))
        assert service.ask("round 3") == "ok"
        os.kill(service.proc.pid, signal.SIGINT)
        head += wait_for_output(gdb, _started(memdump_mode))
        assert service.ask("round 4") == "ok"
        os.kill(service.proc.pid, signal.SIGINT)
        rest, _ = gdb.communicate(timeout=GDB_TIMEOUT)
    finally:
        if gdb.poll() is None:
            gdb.kill()
            gdb.wait()
    out = "".join(head) + rest
    assert gdb.returncode == 0, out
    assert read_dump(first).end == ("stop", "-")
    facts = read_dump(second)
    assert facts.end == ("detach", "-")
    assert Counter(facts.sizes())[1000] == 4
    assert Counter(read_dump(first).sizes())[1000] == 3
    assert service.ask("round 1") == "ok"
    assert service.exit() == 0


def test_detach_scans_first(dump: Path, memdump_mode: str) -> None:
    """gdb -p, memdump, three commands of stop_kinds, Ctrl-C, detach: the dump ends `detach`,
    its blocks scanned before the process was let go (the kept ones reachable, not leaked); the
    process runs on."""
    target = Service("stop_kinds")
    try:
        record_commands(target, dump, ["keep 40", "keep 24", "lose 48"], memdump_mode)
        assert read_dump(dump).end == ("detach", "-")
        expect_stop_kinds(dump)
        assert target.ask("keep 8") == "ok"
        assert target.exit() == 0
    finally:
        target.kill()
