"""Whether a process's threads make progress, from /proc: each thread's CPU time
(/proc/PID/task/TID/stat, utime + stime) and the system call it is in (.../syscall).

Two snapshots that are equal mean no thread ran an instruction's worth of CPU time (clock ticks)
nor entered or left a system call in between: `deadlocks --watch` takes that, for long enough,
as a hang. A thread that spins in user space keeps changing its CPU time (a livelock is not
a hang here)."""

from __future__ import annotations

import os
import signal
import sys
import time

Snapshot = frozenset[tuple[int, int, str]]


def parse_stat_times(text: str) -> int:
    """utime + stime (fields 14 and 15 of proc(5)'s stat) from a stat line; the name in
    parentheses may hold spaces and parentheses, so fields are counted after the last ')'."""
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def snapshot(pid: int) -> Snapshot | None:
    """(tid, CPU ticks, syscall line) of every thread of PID; None when the process is gone."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out = set()
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="utf-8", errors="replace") as f:
                ticks = parse_stat_times(f.read())
            with open(f"/proc/{pid}/task/{tid}/syscall", encoding="ascii") as f:
                call = f.read().strip()
        except (OSError, ValueError, IndexError):
            continue  # the thread exited meanwhile
        out.add((int(tid), ticks, call))
    return frozenset(out)


def wait_for_hang(pid: int, quiet: float, poll: float = 0.25) -> bool:
    """Poll PID until its snapshot stays the same for QUIET seconds (True), or it is gone
    (False)."""
    last: Snapshot | None = None
    still = 0.0
    while True:
        now = snapshot(pid)
        if now is None:
            return False
        still = still + poll if now == last else 0.0
        last = now
        if still >= quiet:
            return True
        time.sleep(poll)


def main(argv: list[str]) -> int:
    """`progress.py PID QUIET`: wait for PID to hang, then send it SIGINT; exit 0 when it hung,
    1 when it went away. `deadlocks --watch` runs this in a process of its own while GDB
    continues the program (GDB's Python is blocked in `continue` meanwhile)."""
    pid, quiet = int(argv[0]), float(argv[1])
    if not wait_for_hang(pid, quiet):
        return 1
    try:
        os.kill(pid, signal.SIGINT)
    except OSError:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
