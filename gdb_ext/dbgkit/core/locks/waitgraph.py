"""The wait-for graph of a process's threads: who waits for which lock, who holds it, the cycles,
and the report (`deadlocks` text and its versioned JSON, docs/deadlocks.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .glibc import CondState, LockInfo, MutexState, RwlockState, SemState, rwlock_words

JSON_FORMAT = "dbgkit-deadlocks"
JSON_VERSION = "1.1"


@dataclass(frozen=True)
class Where:
    """A frame as the report shows it: function and file:line (either may be unknown)."""

    function: str
    file: str = ""
    line: int = 0

    def __str__(self) -> str:
        if self.file:
            return f"{self.function} ({self.file}:{self.line})"
        return self.function or "??"

    def site(self) -> str:
        return f"{self.file}:{self.line}" if self.file else ""


@dataclass(frozen=True)
class Hold:
    """A lock a thread holds: exactly (the lock's owner field) or inferred from its code."""

    lock: int
    mode: str
    inferred: bool


@dataclass
class ThreadState:
    """One thread: GDB's number, its LWP and name, what it waits for (a lock address, or the
    LWP of the thread it joins), where."""

    num: int
    tid: int
    name: str
    waits: int | None = None
    wait_mode: str = ""
    where: Where | None = None
    holds: list[Hold] = field(default_factory=list)
    note: str = ""
    joins: int | None = None


@dataclass(frozen=True)
class Edge:
    """Thread WAITER waits for LOCK, which thread HOLDER holds; INFERRED when it is a guess.
    LOCK None: WAITER joins HOLDER (waits for it to exit)."""

    waiter: int
    holder: int
    lock: int | None
    inferred: bool


@dataclass
class Report:
    """Everything `deadlocks` found in one stopped process."""

    pid: int
    layouts: str
    glibc: str
    threads: list[ThreadState]
    locks: dict[int, LockInfo]
    notes: list[str] = field(default_factory=list)

    def thread(self, num: int) -> ThreadState:
        return next(t for t in self.threads if t.num == num)

    def by_lwp(self, tid: int) -> ThreadState | None:
        return next((t for t in self.threads if t.tid == tid), None)

    def edges(self) -> list[Edge]:
        """Waiter -> holder for every waiting thread and every thread holding what it waits for
        (a reader does not wait for other readers); joiner -> the thread it joins."""
        out = []
        for waiter in self.threads:
            joined = self.by_lwp(waiter.joins) if waiter.joins is not None else None
            if joined is not None:
                out.append(Edge(waiter.num, joined.num, None, False))
            if waiter.waits is None:
                continue
            for holder in self.threads:
                if holder.num == waiter.num:
                    continue
                for hold in holder.holds:
                    if hold.lock != waiter.waits:
                        continue
                    if waiter.wait_mode == "read" and hold.mode == "read":
                        continue
                    out.append(Edge(waiter.num, holder.num, hold.lock, hold.inferred))
        return out

    def cycles(self) -> list[list[Edge]]:
        """Every elementary cycle of the graph, each starting at its lowest thread number, in
        order of that number and then of the following threads."""
        edges = self.edges()
        by_waiter: dict[int, list[Edge]] = {}
        for edge in edges:
            by_waiter.setdefault(edge.waiter, []).append(edge)
        found: list[list[Edge]] = []

        def walk(start: int, path: list[Edge], seen: set[int]) -> None:
            node = path[-1].holder if path else start
            for edge in by_waiter.get(node, []):
                if edge.holder == start:
                    found.append([*path, edge])
                elif edge.holder > start and edge.holder not in seen:
                    walk(start, [*path, edge], seen | {edge.holder})

        for start in sorted(by_waiter):
            walk(start, [], {start})
        return found


# -- text --------------------------------------------------------------------------------------


def lock_label(lock: LockInfo) -> str:
    """`mutex lock_a (0x...)`, `std::shared_mutex this->ledger_ (0x...)` or `sem_t 0x...`."""
    kind = lock.type_name or {"mutex": "mutex", "rwlock": "rwlock", "cond": "condition variable",
                              "sem": "semaphore", "futex": "futex"}[lock.kind]
    return f"{kind} {lock.name} ({lock.address:#x})" if lock.name else f"{kind} {lock.address:#x}"


def state_text(lock: LockInfo) -> str:
    """What the lock's own words say, for the thread list."""
    s = lock.state
    if isinstance(s, MutexState):
        owner = f"owner LWP {s.owner}" if s.locked else "unlocked"
        return f"{s.kind}, {owner}" + (", waiters" if s.waiters else "")
    if isinstance(s, RwlockState):
        return ", ".join(rwlock_words(s))
    if isinstance(s, SemState):
        return f"value {s.value}, {s.waiters} waiter{'s' if s.waiters != 1 else ''}"
    if isinstance(s, CondState):
        return f"{s.waiters} waiter{'s' if s.waiters != 1 else ''}"
    return "no state"


def _thread_label(t: ThreadState, lwp: bool = True) -> str:
    """`thread 2 "abba-1" (LWP 4243)`; without the name when there is none (a core dump)."""
    name = f' "{t.name}"' if t.name else ""
    return f"thread {t.num}{name}" + (f" (LWP {t.tid})" if lwp else "")


def _joined_label(report: Report, tid: int) -> str:
    joined = report.by_lwp(tid)
    return _thread_label(joined) if joined else f"LWP {tid}, none of the process's threads"


def readers_note(readers: int, candidates: list[int]) -> str:
    """What the lock says of its readers beside the threads whose code took it for reading
    (CANDIDATES, thread numbers): glibc counts the readers, it does not name them."""
    count = f"{readers} reader{'s' if readers != 1 else ''}"
    if len(candidates) == readers:
        return (f"{count} {'holds' if readers == 1 else 'hold'} it (glibc keeps their count, "
                "not who they are)")
    which = ""
    if candidates:
        nums = [str(n) for n in candidates]
        listed = nums[0] if len(nums) == 1 else ", ".join(nums[:-1]) + " and " + nums[-1]
        which = f" (thread{'s' if len(nums) > 1 else ''} {listed})"
    found = f"{len(candidates)} candidate{'s' if len(candidates) != 1 else ''}{which}"
    why = ("not every candidate holds it" if len(candidates) > readers
           else "some readers' code does not show it (taken in a function that has returned)")
    return f"{count}, {found}: glibc keeps the readers' count, not who they are; {why}"


def render_text(report: Report) -> str:
    """The report `deadlocks` prints: the threads, then each cycle (or that there is none)."""
    lines = [f"deadlocks: process {report.pid}, {len(report.threads)} threads, glibc "
             f"{report.glibc or '?'} lock layouts from {report.layouts}"]
    lines += [f"note: {n}" for n in report.notes]
    for t in report.threads:
        if t.joins is not None:
            lines.append(f"{_thread_label(t)}: joins {_joined_label(report, t.joins)}"
                         + (f" in {t.where}" if t.where else ""))
        elif t.waits is None:
            lines.append(f"{_thread_label(t)}: waits for no lock"
                         + (f" ({t.note})" if t.note else "")
                         + (f" in {t.where}" if t.where else ""))
        else:
            lock = report.locks[t.waits]
            mode = f" for {t.wait_mode}" if t.wait_mode else ""
            lines.append(f"{_thread_label(t)}: waits{mode} on {lock_label(lock)} "
                         f"[{state_text(lock)}] in {t.where}")
        for note in report.locks[t.waits].notes if t.waits is not None else []:
            lines.append(f"    {note}")
        for hold in t.holds:
            how = " (inferred)" if hold.inferred else ""
            mode = f" for {hold.mode}" if hold.mode else ""
            lines.append(f"    holds{mode} {lock_label(report.locks[hold.lock])}{how}")
    cycles = report.cycles()
    if not cycles:
        lines.append("No deadlock: the wait-for graph has no cycle.")
    for i, cycle in enumerate(cycles, 1):
        lines.append(f"Deadlock {i} of {len(cycles)}: {len(cycle)} threads")
        for edge in cycle:
            w, h = report.thread(edge.waiter), report.thread(edge.holder)
            site = w.where.site() if w.where else ""
            if edge.lock is None:
                lines.append(f"  {_thread_label(w)} at {site or w.where} joins "
                             f"{_thread_label(h, lwp=False)}")
                continue
            held = "held (inferred) by" if edge.inferred else "held by"
            lines.append(f"  {_thread_label(w)} at {site or w.where} waits for "
                         f"{lock_label(report.locks[edge.lock])}, {held} thread {h.num}")
    return "\n".join(lines) + "\n"


# -- JSON --------------------------------------------------------------------------------------


def _lock_json(lock: LockInfo) -> dict[str, Any]:
    s = lock.state
    state: dict[str, Any] = {}
    if isinstance(s, MutexState):
        state = {"kind": s.kind, "locked": s.locked, "owner": s.owner if s.locked else None,
                 "waiters": s.waiters, "count": s.count}
    elif isinstance(s, RwlockState):
        state = {"readers": s.readers, "waiting_readers": s.waiting_readers,
                 "write_locked": s.write_locked,
                 "writer": s.cur_writer or None, "preference": s.preference}
    elif isinstance(s, SemState):
        state = {"value": s.value, "waiters": s.waiters}
    elif isinstance(s, CondState):
        state = {"waiters": s.waiters}
    return {"address": f"{lock.address:#x}", "kind": lock.kind, "type": lock.type_name or None,
            "name": lock.name or None, "state": state, "notes": lock.notes}


def _where_json(where: Where | None) -> dict[str, Any] | None:
    if where is None:
        return None
    return {"function": where.function or None, "file": where.file or None,
            "line": where.line or None}


def _joined_num(report: Report, tid: int | None) -> int | None:
    joined = report.by_lwp(tid) if tid is not None else None
    return joined.num if joined else None


def render_json(report: Report) -> dict[str, Any]:
    """The `--json` document (docs/deadlocks.md, "JSON")."""
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "pid": report.pid,
        "glibc": report.glibc or None,
        "layouts": report.layouts,
        "notes": report.notes,
        "threads": [{"num": t.num, "lwp": t.tid, "name": t.name,
                     "waits": None if t.waits is None else f"{t.waits:#x}",
                     "mode": t.wait_mode or None, "where": _where_json(t.where),
                     "holds": [{"lock": f"{h.lock:#x}", "mode": h.mode or None,
                                "inferred": h.inferred} for h in t.holds],
                     "note": t.note or None, "joins": _joined_num(report, t.joins)}
                    for t in report.threads],
        "locks": [_lock_json(report.locks[a]) for a in sorted(report.locks)],
        "cycles": [[{"waiter": e.waiter, "lock": None if e.lock is None else f"{e.lock:#x}",
                     "holder": e.holder, "inferred": e.inferred, "join": e.lock is None}
                    for e in cycle] for cycle in report.cycles()],
    }
