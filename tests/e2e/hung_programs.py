"""Programs that hang on their locks deterministically, and GDB attached to them: start one and
wait for its "ready" line, run GDB commands on it, check that GDB left it as it was
(tests/e2e/test_deadlocks.py, test_contention_bad_input.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memdump_e2e import REPO, read_line, run_gdb

__all__ = ["DBGKIT", "gdb_on", "hung", "json_doc", "still_waiting", "syscalls"]

DBGKIT = REPO / "gdb_ext" / "dbgkit.py"
READY_TIMEOUT = 60.0
SETTLE = 10.0  # seconds for the threads to be asleep again after GDB detaches


@contextmanager
def hung(path: Path, *args: str, ready: str = "ready") -> Iterator[int]:
    """Start PATH ARGS in a process group of its own, wait for its READY line, yield its pid;
    kill the whole group afterwards (a case may fork a helper)."""
    proc = subprocess.Popen([str(path), *args], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        line = read_line(proc, READY_TIMEOUT)
        assert line.startswith(ready), line
        yield proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def gdb_on(pid: int, *commands: str, libc_debug: bool = True) -> str:
    """GDB attached to PID running COMMANDS; without LIBC_DEBUG it cannot find libc6-dbg's
    files (as on a system without the package: glibc's frames have no names)."""
    argv = ["gdb", "-nx", "-batch"]
    if not libc_debug:
        argv += ["-iex", "set debug-file-directory /nonexistent"]
    argv += ["-ex", f"source {DBGKIT}"]
    for command in commands:
        argv += ["-ex", command]
    run = run_gdb([*argv, "-p", str(pid)])
    return run.output


def json_doc(output: str) -> dict[str, Any]:
    """The one JSON document in GDB's output (it starts and ends at column 0)."""
    lines = output.splitlines()
    start = lines.index("{")
    end = lines.index("}", start)
    return json.loads("\n".join(lines[start:end + 1]))


def syscalls(pid: int) -> dict[str, str]:
    """Thread id -> the number of the system call it sleeps in (proc(5)), or "running"."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        out[tid] = Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()[0]
    return out


def still_waiting(pid: int) -> None:
    """Detach left the process as it was: every thread asleep again in futex(2) or pause(2), as
    the program put it (a thread restarts its call after the detach: polled for SETTLE s)."""
    deadline = time.monotonic() + SETTLE
    while True:
        now = syscalls(pid)
        if all(nr in ("202", "34") for nr in now.values()):  # futex, pause
            return
        assert time.monotonic() < deadline, f"threads not asleep again after detach: {now}"
        time.sleep(0.05)
