"""Per-thread context switches and CPU time from /proc, without GDB, root or SystemTap.

proc(5): /proc/PID/task/TID/status has `voluntary_ctxt_switches` (the thread blocked: a futex,
a read, poll) and `nonvoluntary_ctxt_switches` (the scheduler preempted it); /proc/PID/task/TID/stat
fields 14 and 15 are its user and system CPU time in clock ticks (sysconf(_SC_CLK_TCK)).
A snapshot reads every thread once; a delta compares two snapshots of one process.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "FORMAT",
    "SORT_KEYS",
    "VERSION",
    "Delta",
    "ProcError",
    "Report",
    "Snapshot",
    "ThreadCounts",
    "deltas",
    "parse_stat",
    "parse_status",
    "render_json",
    "render_table",
    "snapshot",
    "sort_rows",
]

# `ctxswitches --json` (docs/ctxswitches.md): a new key is a minor version, a key removed or
# changed in meaning a major one.
FORMAT = "dbgkit-ctxswitches"
VERSION = "1.0"
SORT_KEYS = ("tid", "name", "voluntary", "involuntary", "switches", "cpu")


class ProcError(ValueError):
    """A /proc file that does not say what proc(5) says it does."""


@dataclass(frozen=True, slots=True)
class ThreadCounts:
    """One thread's counters at one moment."""

    tid: int
    name: str
    state: str          # proc(5)'s state, e.g. "S (sleeping)", "t (tracing stop)"
    voluntary: int
    involuntary: int
    utime: int          # clock ticks
    stime: int

    @property
    def cpu(self) -> int:
        return self.utime + self.stime


@dataclass(frozen=True)
class Snapshot:
    """Every thread of process PID at one moment, by tid."""

    pid: int
    threads: dict[int, ThreadCounts]


@dataclass(frozen=True, slots=True)
class Delta:
    """One row of a report: a thread now, and what changed since the baseline (None: no
    baseline; `new`: the thread started after it)."""

    now: ThreadCounts
    voluntary: int | None = None
    involuntary: int | None = None
    cpu: int | None = None
    new: bool = False

    @property
    def switches(self) -> int | None:
        if self.voluntary is None or self.involuntary is None:
            return None
        return self.voluntary + self.involuntary


@dataclass(frozen=True)
class Report:
    """Rows for the threads alive now, the threads gone since the baseline, and what the
    baseline was ("" for none, "previous call", "mark NAME")."""

    pid: int
    rows: list[Delta]
    gone: list[ThreadCounts] = field(default_factory=list)
    since: str = ""


def parse_status(text: str) -> tuple[str, str, int, int]:
    """(Name, State, voluntary, involuntary) of a /proc/PID/task/TID/status text."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key] = value.strip()
    try:
        return (values["Name"], values["State"], int(values["voluntary_ctxt_switches"]),
                int(values["nonvoluntary_ctxt_switches"]))
    except (KeyError, ValueError) as exc:
        raise ProcError(f"status has no valid {exc}") from None


def parse_stat(text: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks of a /proc/PID/task/TID/stat line.

    The name (field 2) is in parentheses and may hold spaces and parentheses itself, so the
    fields are counted from the last ')' (proc(5))."""
    rest = text[text.rfind(")") + 1:].split()
    try:
        # rest[0] is field 3 (state): utime is field 14, stime field 15.
        return int(rest[11]), int(rest[12])
    except (IndexError, ValueError):
        raise ProcError("stat has no utime/stime fields") from None


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def read_thread(pid: int, tid: int) -> ThreadCounts | None:
    """Thread TID of process PID now; None when it has exited meanwhile."""
    base = f"/proc/{pid}/task/{tid}"
    try:
        name, state, vol, invol = parse_status(_read(base + "/status"))
        utime, stime = parse_stat(_read(base + "/stat"))
    except FileNotFoundError:
        return None
    except ProcessLookupError:
        return None
    return ThreadCounts(tid, name, state, vol, invol, utime, stime)


def snapshot(pid: int) -> Snapshot:
    """Every thread of PID now; OSError (ENOENT) when the process is gone."""
    threads = {}
    for entry in os.listdir(f"/proc/{pid}/task"):
        if entry.isdigit():
            counts = read_thread(pid, int(entry))
            if counts is not None:
                threads[counts.tid] = counts
    return Snapshot(pid, threads)


def deltas(now: Snapshot, before: Snapshot | None, since: str = "") -> Report:
    """The report for NOW against BEFORE (None: totals only). A tid that exists in both is
    the same thread: Linux does not reuse a tid while its process holds the old one's
    counters, and a snapshot taken again after a reuse would show smaller counts, which the
    delta then reports as a new thread."""
    if before is None:
        return Report(now.pid, [Delta(t) for t in now.threads.values()], [], since)
    rows = []
    for tid, cur in now.threads.items():
        old = before.threads.get(tid)
        if old is None or old.voluntary > cur.voluntary or old.cpu > cur.cpu:
            rows.append(Delta(cur, cur.voluntary, cur.involuntary, cur.cpu, new=True))
        else:
            rows.append(Delta(cur, cur.voluntary - old.voluntary,
                              cur.involuntary - old.involuntary, cur.cpu - old.cpu))
    gone = [t for tid, t in sorted(before.threads.items()) if tid not in now.threads]
    return Report(now.pid, rows, gone, since)


def sort_rows(rows: Iterable[Delta], key: str) -> list[Delta]:
    """Rows by KEY: tid and name ascending; counts descending (the delta when there is one,
    else the total), ties by tid."""
    if key not in SORT_KEYS:
        raise ValueError(f"unknown sort key {key!r} (one of {', '.join(SORT_KEYS)})")
    rows = sorted(rows, key=lambda r: r.now.tid)
    if key == "tid":
        return rows
    if key == "name":
        return sorted(rows, key=lambda r: r.now.name)

    def value(r: Delta) -> int:
        delta = {"voluntary": r.voluntary, "involuntary": r.involuntary,
                 "switches": r.switches, "cpu": r.cpu}[key]
        if delta is not None:
            return delta
        total = {"voluntary": r.now.voluntary, "involuntary": r.now.involuntary,
                 "switches": r.now.voluntary + r.now.involuntary, "cpu": r.now.cpu}[key]
        return total

    return sorted(rows, key=value, reverse=True)


def _seconds(ticks: int, hz: int) -> str:
    return f"{ticks / hz:.2f}"


def render_table(report: Report, hz: int, gdb_ids: dict[int, int]) -> str:
    """The text table: one row per thread, the delta columns when there is a baseline."""
    has_delta = bool(report.since)
    head = (f"{'id':>4}  {'tid':>7}  {'name':<16} {'state':<17}"
            f" {'voluntary':>10} {'involuntary':>11} {'cpu s':>8}")
    if has_delta:
        head += f" {'+vol':>9} {'+invol':>8} {'+cpu s':>7}"
    title = f"context switches of process {report.pid}"
    title += f", delta since {report.since}" if has_delta else ""
    lines = [title + ":", head]
    tot = [0, 0, 0, 0, 0, 0]
    for r in report.rows:
        t = r.now
        gid = str(gdb_ids.get(t.tid, "-"))
        line = (f"{gid:>4}  {t.tid:>7}  {t.name:<16} {t.state:<17}"
                f" {t.voluntary:>10} {t.involuntary:>11} {_seconds(t.cpu, hz):>8}")
        tot[0] += t.voluntary
        tot[1] += t.involuntary
        tot[2] += t.cpu
        if has_delta:
            mark = "new " if r.new else ""
            line += (f" {mark + '+' + str(r.voluntary):>9} {'+' + str(r.involuntary):>8}"
                     f" {_seconds(r.cpu or 0, hz):>7}")
            tot[3] += r.voluntary or 0
            tot[4] += r.involuntary or 0
            tot[5] += r.cpu or 0
        lines.append(line)
    total = (f"{'':>4}  {'-':>7}  {'total (' + str(len(report.rows)) + ' threads)':<34}"
             f" {tot[0]:>10} {tot[1]:>11} {_seconds(tot[2], hz):>8}")
    if has_delta:
        total += f" {'+' + str(tot[3]):>9} {'+' + str(tot[4]):>8} {_seconds(tot[5], hz):>7}"
    lines.append(total)
    for t in report.gone:
        lines.append(f"exited since {report.since}: {t.name} (tid {t.tid})")
    return "\n".join(lines) + "\n"


def render_json(report: Report, hz: int, gdb_ids: dict[int, int]) -> dict[str, object]:
    """The `--json` document (docs/ctxswitches.md)."""
    threads = []
    for r in report.rows:
        t = r.now
        row: dict[str, object] = {
            "id": gdb_ids.get(t.tid), "tid": t.tid, "name": t.name, "state": t.state,
            "voluntary": t.voluntary, "involuntary": t.involuntary,
            "utime_ticks": t.utime, "stime_ticks": t.stime,
        }
        if report.since:
            row["delta"] = {"voluntary": r.voluntary, "involuntary": r.involuntary,
                            "cpu_ticks": r.cpu, "new": r.new}
        threads.append(row)
    return {
        "format": FORMAT, "version": VERSION, "pid": report.pid,
        "since": report.since or None, "clock_ticks_per_second": hz,
        "threads": threads,
        "exited": [{"tid": t.tid, "name": t.name} for t in report.gone],
    }
