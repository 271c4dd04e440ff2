"""Lock contention from samples of every thread's stack, without GDB: which frames are glibc's
lock waits, the samples grouped by lock and by waiting stack, and the table and JSON of
`contention` (docs/contention.md).

A thread counts as waiting for a lock in a sample when its innermost frame is one of glibc's
futex waits (WAIT_FUNCTIONS) and, before the first frame outside libc, a lock entry point
(LOCK_FUNCTIONS) called it: a mutex (pthread_mutex_lock and its timed, clock and condvar
re-acquire forms) or a reader-writer lock (rdlock: read, wrlock: write). A thread in a condition
variable's or pthread_join's wait is not waiting for a lock; a thread spinning in user mode (an
adaptive mutex, a spin lock) is not either: it is running.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ..locktable import LockCounts, LockStack, LockTable

__all__ = [
    "FORMAT",
    "VERSION",
    "Frame",
    "LockReport",
    "Sample",
    "SampleRun",
    "WrapperTest",
    "aggregate",
    "lock_call",
    "normalise",
    "render_counts_json",
    "render_counts_table",
    "render_json",
    "render_table",
    "shown_stacks",
    "stack_frames",
    "trimmed",
]

# `contention --json` (docs/contention.md): a new key is a minor version, a key removed or
# changed in meaning a major one.
FORMAT = "dbgkit-contention"
VERSION = "1.1"   # 1.1: the recorder's waiting stacks, `stacks_dropped`

# glibc 2.36's names with their alias prefixes taken off (normalise): the functions a thread
# blocked in a futex for a lock sits in (nptl/lowlevellock.c, nptl/futex-internal.c,
# sysdeps/nptl/futex-internal.h; `futex_wait` is inlined and shows only with glibc's debug info).
WAIT_FUNCTIONS = frozenset({
    "lll_lock_wait", "lll_lock_wait_private", "futex_wait", "futex_abstimed_wait_common",
    "futex_abstimed_wait_common64", "futex_lock_pi64", "futex_lock_pi", "futex_syscall4",
    "lll_robust_lock", "futex_abstimed_wait64", "futex_abstimed_wait",
})
# Entry points by the lock kind and mode they take (nptl/pthread_mutex_lock.c,
# pthread_mutex_timedlock.c, pthread_rwlock_common.c, pthread_mutex_cond_lock.c).
LOCK_FUNCTIONS: dict[str, tuple[str, str]] = {
    "pthread_mutex_lock": ("mutex", ""),
    "pthread_mutex_lock_full": ("mutex", ""),
    "pthread_mutex_timedlock": ("mutex", ""),
    "pthread_mutex_clocklock": ("mutex", ""),
    "pthread_mutex_clocklock_common": ("mutex", ""),
    "pthread_mutex_cond_lock": ("mutex", ""),
    "pthread_mutex_cond_lock_full": ("mutex", ""),
    "pthread_rwlock_rdlock": ("rwlock", "read"),
    "pthread_rwlock_rdlock_full64": ("rwlock", "read"),
    "pthread_rwlock_timedrdlock": ("rwlock", "read"),
    "pthread_rwlock_timedrdlock64": ("rwlock", "read"),
    "pthread_rwlock_clockrdlock": ("rwlock", "read"),
    "pthread_rwlock_clockrdlock64": ("rwlock", "read"),
    "pthread_rwlock_wrlock": ("rwlock", "write"),
    "pthread_rwlock_wrlock_full64": ("rwlock", "write"),
    "pthread_rwlock_timedwrlock": ("rwlock", "write"),
    "pthread_rwlock_timedwrlock64": ("rwlock", "write"),
    "pthread_rwlock_clockwrlock": ("rwlock", "write"),
    "pthread_rwlock_clockwrlock64": ("rwlock", "write"),
}
# Calls that take or give back a lock without waiting for it (nptl/pthread_mutex_unlock.c,
# pthread_mutex_trylock.c, pthread_rwlock_unlock.c, pthread_rwlock_tryrdlock.c, ...).
CALL_FUNCTIONS: dict[str, tuple[str, str]] = {
    "pthread_mutex_unlock": ("mutex", ""),
    "pthread_mutex_unlock_usercnt": ("mutex", ""),
    "pthread_mutex_unlock_full": ("mutex", ""),
    "pthread_mutex_trylock": ("mutex", ""),
    "pthread_rwlock_unlock": ("rwlock", ""),
    "pthread_rwlock_tryrdlock": ("rwlock", "read"),
    "pthread_rwlock_trywrlock": ("rwlock", "write"),
}


def normalise(name: str | None) -> str:
    """A libc function name without its alias decoration: `__GI___lll_lock_wait` ->
    `lll_lock_wait`, `___pthread_mutex_lock` -> `pthread_mutex_lock`."""
    if not name:
        return ""
    name = name.split("(", 1)[0]
    if name.startswith("__GI_"):
        name = name[len("__GI_"):]
    return name.lstrip("_")


def lock_call(libc_frames: Sequence[str | None]) -> tuple[int, str, str, bool] | None:
    """For a thread's innermost frames that are in libc (innermost first): (index of the
    outermost lock function's frame, kind, mode, whether the thread is blocked waiting for the
    lock) when the thread is in a lock call at all, else None."""
    blocked = bool(libc_frames) and normalise(libc_frames[0]) in WAIT_FUNCTIONS
    found = None
    for i, name in enumerate(libc_frames):
        base = normalise(name)
        hit = LOCK_FUNCTIONS.get(base)
        if hit is not None:
            found = (i, *hit, blocked)
        elif base in CALL_FUNCTIONS:
            found = (i, *CALL_FUNCTIONS[base], False)
    return found


@dataclass(frozen=True, slots=True)
class Frame:
    """A frame of a waiting stack (the program's frames, outside libc's lock code)."""

    function: str
    file: str = ""
    line: int = 0

    def text(self) -> str:
        where = f" {self.file}:{self.line}" if self.file else ""
        return self.function + where


#: whether a frame's function is a lock wrapper, trimmed from a waiting stack: the analyser's
#: rule lock-wrapper-frame (`memdump_analyzer.rules.is_lock_wrapper`), which the GDB layer hands
#: in, so that the lock section of a dump's report and `contention` trim by one documented rule
#: and the core imports none of the analyser's rules
WrapperTest = Callable[[str | None], bool]


@dataclass(frozen=True)
class Sample:
    """One thread found waiting for a lock in one sample."""

    address: int | None        # the lock (None: not known, say for an rwlock without glibc's
    kind: str                  # debug info); "mutex" or "rwlock"
    mode: str                  # "", "read", "write"
    waiter: int                # tid
    stack: tuple[Frame, ...]
    owner: int = 0             # tid in the lock word (0: none or not known)
    blocked: bool = True       # False: in a lock call (taking, trying, releasing) on the CPU
    name: str = ""             # what the program calls the lock
    scope: str = ""            # the function NAME is valid in ("" for a global)


@dataclass
class LockReport:
    """One lock over a sampling run: how often threads were seen waiting, by stack."""

    address: int | None
    kind: str
    name: str
    scope: str
    waiting: int = 0                                   # waiting threads summed over samples
    in_call: int = 0                                   # threads in a lock call, not blocked
    samples: int = 0                                   # samples with at least one waiter
    waiters: set[int] = field(default_factory=set)
    owners: Counter[int] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    stacks: Counter[tuple[Frame, ...]] = field(default_factory=Counter)


@dataclass
class SampleRun:
    """A sampling run: how many samples over how long, how it ended, what each one saw."""

    samples: int
    seconds: float
    interval_ms: int
    ended: str = ""                       # why it stopped early ("" when it ran its time)
    found: list[list[Sample]] = field(default_factory=list)   # per sample


def aggregate(run: SampleRun, is_wrapper: WrapperTest) -> list[LockReport]:
    """Locks by waiting samples, most contended first (ties by address); each waiting stack
    `trimmed` of its lock wrappers."""
    locks: dict[object, LockReport] = {}
    for sample in run.found:
        seen: set[object] = set()
        for s in sample:
            if s.address is None and not s.blocked:
                continue  # a call on a lock it cannot tell: nothing to group it with
            key: object = s.address if s.address is not None else ("?", s.kind, s.stack)
            rep = locks.get(key)
            if rep is None:
                rep = locks[key] = LockReport(s.address, s.kind, s.name, s.scope)
            if not s.blocked:
                rep.in_call += 1
                continue
            if not rep.waiting and s.name:
                rep.name, rep.scope = s.name, s.scope   # as the waiters' frames name it
            rep.waiting += 1
            rep.waiters.add(s.waiter)
            if s.owner:
                rep.owners[s.owner] += 1
            rep.modes[s.mode] += 1
            rep.stacks[trimmed(s.stack, is_wrapper)] += 1
            if key not in seen:
                rep.samples += 1
                seen.add(key)
    return sorted(locks.values(), key=lambda r: (-r.waiting, -r.in_call, r.address or 0))


def _owner_text(tid: int, names: dict[int, str], states: dict[int, str]) -> str:
    if not tid:
        return "-"
    name = names.get(tid)
    if name:
        return f"{tid} ({name})"
    return f"{tid} (no such thread)" if states.get(tid) == "no such thread" \
        else f"{tid} (not in this process)"


def _lock_label(rep: LockReport) -> str:
    name = rep.name or "?"
    return f"{name} in {rep.scope}" if rep.scope else name


def render_table(run: SampleRun, locks: Iterable[LockReport], names: dict[int, str],
                 top_stacks: int = 3, states: dict[int, str] | None = None) -> str:
    """mutrace's shape: one row per lock, then each lock's waiting stacks. STATES: the owners
    that are no thread of this process, `another process` or `no such thread`."""
    locks = list(locks)
    out = [f"contention: {run.samples} samples over {run.seconds:.1f} s, one every "
           f"{run.interval_ms} ms, by stopping every thread from GDB (sampled; the in-process "
           "recorder was not loaded)"]
    if run.ended:
        out.append(f"contention: sampling stopped early: {run.ended}")
    if not locks:
        out.append("no thread was seen in a lock call")
        return "\n".join(out) + "\n"
    out.append(f"{len(locks)} lock(s) seen; waiting: threads blocked for the lock, summed over "
               "the samples; in call: threads in a lock call on the CPU")
    out.append(f"{'lock':>4} {'waiting':>8} {'in call':>8} {'samples':>8} {'threads':>8}  "
               f"{'kind':<13} {'address':<18} {'owner seen most':<24} name")
    for n, rep in enumerate(locks, 1):
        kind = rep.kind + ("(" + "/".join(sorted(m for m in rep.modes if m)) + ")"
                           if any(rep.modes) else "")
        owner = rep.owners.most_common(1)[0][0] if rep.owners else 0
        addr = f"{rep.address:#x}" if rep.address is not None else "?"
        out.append(f"{n:>4} {rep.waiting:>8} {rep.in_call:>8} {rep.samples:>8} "
                   f"{len(rep.waiters):>8}  "
                   f"{kind:<13} {addr:<18} {_owner_text(owner, names, states or {}):<24} "
                   f"{_lock_label(rep)}")
    for n, rep in enumerate(locks, 1):
        if not rep.stacks:
            continue
        out.append("")
        out.append(f"lock {n} ({_lock_label(rep)}): waiting stacks")
        for stack, count in rep.stacks.most_common(top_stacks):
            out.append(f"  {count} waiting:")
            out.extend(f"    {f.text()}" for f in stack)
        rest = len(rep.stacks) - top_stacks
        if rest > 0:
            out.append(f"  ... {rest} more stack(s) (--json lists them all)")
    return "\n".join(out) + "\n"


def _frame_json(f: Frame) -> dict[str, object]:
    return {"function": f.function, "file": f.file or None, "line": f.line or None}


def render_json(run: SampleRun, locks: Iterable[LockReport], names: dict[int, str],
                states: dict[int, str] | None = None) -> dict[str, object]:
    """The `--json` document (docs/contention.md)."""
    rows = []
    for rep in locks:
        rows.append({
            "address": rep.address, "kind": rep.kind, "name": rep.name or None,
            "scope": rep.scope or None,
            "waiting": rep.waiting, "in_call": rep.in_call, "samples": rep.samples,
            "threads": sorted(rep.waiters),
            "modes": {m or "exclusive": c for m, c in sorted(rep.modes.items())},
            "owners": [{"tid": t, "name": names.get(t),
                        "thread": "this process" if t in names else
                        (states or {}).get(t, "another process"), "samples": c}
                       for t, c in sorted(rep.owners.items(), key=lambda x: (-x[1], x[0]))],
            "stacks": [{"waiting": c, "frames": [_frame_json(f) for f in stack]}
                       for stack, c in rep.stacks.most_common()],
        })
    return {"format": FORMAT, "version": VERSION, "method": "sampling",
            "samples": run.samples, "seconds": round(run.seconds, 3),
            "interval_ms": run.interval_ms, "ended_early": run.ended or None, "locks": rows}


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"


def _us(ns: int) -> str:
    return f"{ns / 1e3:.3f}"


#: program counter -> its frames (more than one where code was inlined), as GDB resolved them
Resolved = dict[int, tuple[Frame, ...]]


def trimmed(frames: tuple[Frame, ...], is_wrapper: WrapperTest) -> tuple[Frame, ...]:
    """FRAMES without the lock wrappers they start with (`std::mutex::lock()`,
    `std::lock_guard<...>`, `__gthread_mutex_lock` inlined into the program), so that a stack
    starts at the call that asked for the lock; whole when every frame is one."""
    n = 0
    while n < len(frames) and is_wrapper(frames[n].function):
        n += 1
    return frames[n:] if n < len(frames) else frames


def stack_frames(stack: LockStack, resolved: Resolved) -> tuple[Frame, ...]:
    """A waiting stack's frames, innermost first (a pc GDB did not resolve: its address)."""
    return tuple(f for pc in stack.pcs for f in resolved.get(pc, (Frame(f"{pc:#x}"),)))


@dataclass
class ShownStack:
    """A lock's waiting stack as shown: its lock wrappers trimmed, and the recorder's stacks
    that are the same once trimmed (a lock_guard and a unique_lock on one line) added up."""

    contended: int
    wait_ns: int
    max_wait_ns: int
    partial: bool
    frames: tuple[Frame, ...]


def shown_stacks(counts: LockCounts, resolved: Resolved, is_wrapper: WrapperTest
                 ) -> list[ShownStack]:
    """COUNTS' waiting stacks as shown, the most contended first."""
    merged: dict[tuple[tuple[Frame, ...], bool], ShownStack] = {}
    for s in counts.stacks:
        frames = trimmed(stack_frames(s, resolved), is_wrapper)
        shown = merged.get((frames, s.partial))
        if shown is None:
            shown = merged[frames, s.partial] = ShownStack(0, 0, 0, s.partial, frames)
        shown.contended += s.contended
        shown.wait_ns += s.wait_ns
        shown.max_wait_ns = max(shown.max_wait_ns, s.max_wait_ns)
    return sorted(merged.values(), key=lambda m: (-m.contended, -m.wait_ns))


def _counts_label(c: LockCounts, names: dict[int, str]) -> str:
    return names.get(c.address) or f"{c.address:#x}"


def render_counts_table(table: LockTable, names: dict[int, str], resolved: Resolved | None = None,
                        top_stacks: int = 3, *, is_wrapper: WrapperTest) -> str:
    """mutrace's table from the in-process recorder's counts: one row per lock, the most
    contended first; then each lock's waiting stacks, the most contended first."""
    out = [f"contention: counted by the in-process recorder (every pthread mutex and rwlock "
           f"call while it records); {len(table.locks)} lock(s)"]
    if not table.enabled:
        out.append("contention: lock counting is off in the recorder")
    if table.dropped:
        out.append(f"contention: {table.dropped} acquisitions not counted: the table is full")
    if table.stacks_dropped:
        out.append(f"contention: {table.stacks_dropped} contended acquisitions not counted by "
                   "stack: the stack table is full")
    if not table.locks:
        out.append("no lock was taken")
        return "\n".join(out) + "\n"
    out.append(f"{'lock':>4} {'kind':<7} {'locked':>10} {'changed':>9} {'contended':>10} "
               f"{'try busy':>9} {'total ms':>10} {'avg us':>9} {'max us':>10}  "
               f"{'address':<18} name")
    for n, c in enumerate(table.locks, 1):
        out.append(f"{n:>4} {c.kind:<7} {c.locked:>10} {c.owner_changes:>9} {c.contended:>10} "
                   f"{c.try_busy:>9} {_ms(c.wait_ns):>10} {_us(c.avg_wait_ns):>9} "
                   f"{_us(c.max_wait_ns):>10}  {c.address:#018x} {names.get(c.address, '-')}")
    for n, c in enumerate(table.locks, 1):
        stacks = shown_stacks(c, resolved or {}, is_wrapper)
        if not stacks:
            continue
        out.append("")
        out.append(f"lock {n} ({_counts_label(c, names)}): waiting stacks")
        for s in stacks[:top_stacks]:
            out.append(f"  {s.contended} contended, {_ms(s.wait_ns)} ms waited, the longest "
                       f"{_us(s.max_wait_ns)} us:")
            out.extend(f"    {f.text()}" for f in s.frames)
            if s.partial:
                out.append("    ... (the walk stopped here)")
        rest = len(stacks) - top_stacks
        if rest > 0:
            out.append(f"  ... {rest} more stack(s) (--json lists them all)")
    return "\n".join(out) + "\n"


def render_counts_json(table: LockTable, names: dict[int, str], resolved: Resolved | None = None,
                       *, is_wrapper: WrapperTest) -> dict[str, object]:
    """The `--json` document of the recorder's counts (docs/contention.md)."""
    return {"format": FORMAT, "version": VERSION, "method": "recorder",
            "enabled": table.enabled, "dropped": table.dropped,
            "stacks_dropped": table.stacks_dropped,
            "locks": [{"address": c.address, "kind": c.kind, "name": names.get(c.address),
                       "locked": c.locked, "read_locked": c.read_locked,
                       "owner_changes": c.owner_changes, "contended": c.contended,
                       "try_busy": c.try_busy, "wait_ns": c.wait_ns,
                       "max_wait_ns": c.max_wait_ns, "last_owner": c.last_owner,
                       "stacks": [{"contended": s.contended, "wait_ns": s.wait_ns,
                                   "max_wait_ns": s.max_wait_ns, "partial": s.partial,
                                   "frames": [_frame_json(f) for f in s.frames]}
                                  for s in shown_stacks(c, resolved or {}, is_wrapper)]}
                      for c in table.locks]}
