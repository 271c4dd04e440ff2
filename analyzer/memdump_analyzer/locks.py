"""The lock counts of a dump (`lk` records, format 2.3, and their waiting stacks, `lw`, 2.4):
read from the dump, and the report's "lock contention" section, text and JSON
(docs/report-format.md). A dump without lock records has no section.

The in-process recorder counts every pthread mutex and rwlock call with `set memdump locks on`
(docs/contention.md); GDB writes the counts into the dump's tail at the program's `_exit`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .dumpformat import LockRecord, LockWait
from .dumpio import DumpError
from .wording import plural

# dumpfile imports this module: its DumpReader and Frame are not imported here (no cycle)
DumpReader = Any
Frame = Any

__all__ = ["LockRow", "WaitingStack", "json_section", "read_record", "rows", "text_section"]


def read_record(reader: DumpReader, fl: list[bytes], seq: int) -> None:
    """An `lk` or `lw` record, into `reader.locks` or `reader.lock_waits` (DumpError when it
    is malformed, naming its line)."""
    reader.check_fields(fl, seq)
    address, *values = reader.fields(fl, seq)
    if fl[0] == b"lk":
        kind = values[0].decode("ascii", "replace")
        reader.locks.append(LockRecord(address, kind, *values[1:]))
        return
    if values[0] not in reader.nodes:
        raise DumpError(reader.path, reader._here(seq),
                        f"stack {values[0]} is used before it is defined")
    reader.lock_waits.append(LockWait(address, *values))


@dataclass
class WaitingStack:
    """The contended acquisitions of a lock from one call stack."""

    contended: int
    wait_ns: int
    max_wait_ns: int
    stack: Sequence[Frame]


@dataclass
class LockRow:
    """One lock: its counts and its waiting stacks, the most contended first."""

    counts: LockRecord
    stacks: list[WaitingStack] = field(default_factory=list)
    #: what holds the lock, as locknames.lock_names found it; None when nothing names it
    name: str | None = None


def rows(reader: DumpReader, trim: Callable[[Sequence[Frame]], tuple[Frame, ...]] = tuple
         ) -> list[LockRow]:
    """The dump's locks, most contended first (then most locked, then by address); each
    waiting stack as `trim` gives it (rules.trim_lock_stack: the report's), stacks that are
    the same once trimmed made one."""
    by_address = {c.address: LockRow(c) for c in reader.locks}
    merged: dict[tuple[int, tuple[Frame, ...]], WaitingStack] = {}
    for w in reader.lock_waits:
        row = by_address.get(w.address)
        if row is None:
            continue
        # two stacks that differ in the C++ library's lock wrappers only (rule
        # lock-wrapper-frame: a lock_guard and a unique_lock on one line) are one
        stack = trim(reader.stack(w.stack))
        same = merged.get((w.address, stack))
        if same is None:
            merged[w.address, stack] = same = WaitingStack(0, 0, 0, stack)
            row.stacks.append(same)
        same.contended += w.contended
        same.wait_ns += w.wait_ns
        same.max_wait_ns = max(same.max_wait_ns, w.max_wait_ns)
    for row in by_address.values():
        row.stacks.sort(key=lambda s: (-s.contended, -s.wait_ns))
    return sorted(by_address.values(),
                  key=lambda r: (-r.counts.contended, -r.counts.locked, r.counts.address))


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.3f}"


def _us(ns: int) -> str:
    return f"{ns / 1e3:,.3f}"


StackText = Callable[..., list[str]]


def text_section(locks: Sequence[LockRow], max_frames: int | None,
                 stack_text: StackText) -> list[str]:
    """mutrace's table, then each lock's waiting stacks (`stack_text(frames, max_frames,
    indent=...)` writes one); no lines without locks."""
    if not locks:
        return []
    out = ["", f"LOCK CONTENTION: {plural(len(locks), 'lock')}, counted by the in-process recorder "
               "(set memdump locks on)",
           f"{'lock':>4} {'kind':<7} {'locked':>12} {'changed':>9} {'contended':>10} "
           f"{'try busy':>9} {'total ms':>11} {'avg us':>10} {'max us':>11}  "
           f"{'address':<18} name"]
    for n, row in enumerate(locks, 1):
        c = row.counts
        out.append(f"{n:>4} {c.kind:<7} {c.locked:>12,} {c.owner_changes:>9,} "
                   f"{c.contended:>10,} {c.try_busy:>9,} {_ms(c.wait_ns):>11} "
                   f"{_us(c.avg_wait_ns):>10} {_us(c.max_wait_ns):>11}  "
                   f"{f'0x{c.address:x}':<18} {row.name or '-'}")
    for n, row in enumerate(locks, 1):
        for i, s in enumerate(row.stacks, 1):
            out.append("")
            named = f" ({row.name})" if row.name else ""
            out.append(f"lock {n}{named}, waiting stack {i} of {len(row.stacks)}: "
                       f"{s.contended:,} contended, {_ms(s.wait_ns)} ms waited, the longest "
                       f"{_us(s.max_wait_ns)} us")
            out.extend(stack_text(s.stack, max_frames, indent="    "))
    return out


def json_section(locks: Sequence[LockRow], max_frames: int | None,
                 stack_json: Callable[[Sequence[Frame], int | None], list[dict[str, Any]]]
                 ) -> dict[str, Any]:
    """`{"locks": [...]}` for the JSON report, or `{}` without locks."""
    if not locks:
        return {}
    return {"locks": [
        {"address": f"0x{r.counts.address:x}", "name": r.name, "kind": r.counts.kind,
         "locked": r.counts.locked, "read_locked": r.counts.read_locked,
         "owner_changes": r.counts.owner_changes, "contended": r.counts.contended,
         "try_busy": r.counts.try_busy, "wait_ns": r.counts.wait_ns,
         "max_wait_ns": r.counts.max_wait_ns,
         "stacks": [{"contended": s.contended, "wait_ns": s.wait_ns,
                     "max_wait_ns": s.max_wait_ns, "stack": stack_json(s.stack, max_frames)}
                    for s in r.stacks]}
        for r in locks]}
