"""Heap corruption (`hc` records, format 2.6): what the in-process recorder's red zones and
quarantine found changed (docs/heap-errors.md, "Red zones"), read from the dump, and the
report's text and JSON for it.

The recorder writes one record for each changed zone of a block: the bytes after its end
(`overrun`), before its start (`underrun`), or inside it while it was freed in the quarantine
(`freed`), with the event that found it (its free or realloc, SEQ) or the last event before
(as it left the quarantine, at exit, or at `memdump check-heap`). The block's allocation and
free stacks are its events': the last event up to SEQ that made a block at its address, and the
release after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .accesserrors import BlockEvent
from .dumpio import DumpError

DumpReader = Any
Frame = Any
StackText = Callable[..., list[str]]
StackJson = Callable[..., list[dict[str, Any]]]

__all__ = ["CorruptionRow", "HeapCorruption", "describe", "json_errors", "read_record", "rows",
           "text_section"]

KINDS = {"overrun": "heap block overrun", "underrun": "heap block underrun",
         "freed": "write after free"}
FOUND = ("free", "quarantine", "exit", "check")


@dataclass(frozen=True)
class HeapCorruption:
    """(2.6) An `hc` record."""

    seq: int
    tid: int
    kind: str        # "overrun", "underrun" or "freed"
    block: int
    size: int
    offset: int
    bytes: int
    found: str       # "free", "quarantine", "exit" or "check"


def read_record(reader: DumpReader, fl: list[bytes], seq: int) -> None:
    """An `hc` record, into `reader.heap_corruption` (DumpError when it is malformed, naming its
    line)."""
    reader.check_fields(fl, seq)
    at, tid, kind, block, size, offset, nbytes, found = reader.fields(fl, seq)
    words = (kind.decode("ascii", "replace"), found.decode("ascii", "replace"))
    if words[0] not in KINDS or words[1] not in FOUND:
        raise DumpError(reader.path, reader._here(seq),
                        f"'hc' record: bad KIND FOUND '{' '.join(words)}'")
    if nbytes == 0:
        raise DumpError(reader.path, reader._here(seq), "'hc' record: BYTES is 0")
    reader.heap_corruption.append(HeapCorruption(at, tid, words[0], block, size, offset, nbytes,
                                                 words[1]))


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def describe(e: HeapCorruption, at: str = "") -> str:
    """The error's sentence: "heap block overrun: 3 bytes after the 24-byte block", "write after
    free into the 32-byte block (bytes 8 to 11 changed)"; AT follows "block"."""
    if e.kind == "freed":
        return (f"write after free into the {e.size:,}-byte block{at} (bytes {e.offset:,} to "
                f"{e.offset + e.bytes - 1:,} changed)")
    side, edge = ("after", "end") if e.kind == "overrun" else ("before", "start")
    what = _plural(e.bytes, "byte")
    if e.offset:
        where = f"{what}, from {_plural(e.offset, 'byte')} {side} the {edge} of"
    else:
        where = f"{what} {side}"
    return f"{KINDS[e.kind]}: {where} the {e.size:,}-byte block{at}"


@dataclass(frozen=True)
class CorruptionRow:
    """A heap corruption with its events: the block's allocation and free, and the event that
    found it (its free or realloc; None when it was found otherwise)."""

    error: HeapCorruption
    alloc: BlockEvent | None
    free: BlockEvent | None
    found: BlockEvent | None


def _releases(fl: list[bytes]) -> bool:
    """The event (its fields) releases the block its PTR, fl[6], names."""
    return len(fl) > 6 and (fl[5] == b"-" or fl[3] in (b"realloc", b"reallocarray"))


def rows(reader: DumpReader, events: Callable[[], Any]) -> list[CorruptionRow]:
    """The heap corruption of `reader` (read to its end), with its blocks' events from
    `events()` ((SEQ, fields) of each sequenced record: only read when there is any)."""
    if not reader.heap_corruption:
        return []
    wanted = {b"%#x" % e.block for e in reader.heap_corruption}
    pending = sorted(range(len(reader.heap_corruption)),
                     key=lambda i: reader.heap_corruption[i].seq)
    made: dict[bytes, tuple[bytes, int, int]] = {}
    freed: dict[bytes, tuple[bytes, int, int]] = {}
    found: dict[int, tuple[bytes, int, int]] = {}
    resolved: dict[int, tuple[Any, Any]] = {}
    k = 0

    def settle(upto: int) -> None:
        nonlocal k
        while k < len(pending) and reader.heap_corruption[pending[k]].seq <= upto:
            key = b"%#x" % reader.heap_corruption[pending[k]].block
            resolved[pending[k]] = (made.get(key), freed.get(key))
            k += 1

    for seq, fl in events():
        if fl[0] != b"e" or len(fl) < 6:
            continue
        if _releases(fl) and fl[6] in wanted:
            freed[fl[6]] = (fl[3], seq, int(fl[4]))
            found[seq] = (fl[3], seq, int(fl[4]))
        if fl[5] in wanted:
            made[fl[5]] = (fl[3], seq, int(fl[4]))
            freed.pop(fl[5], None)
        settle(seq)
    settle(1 << 62)

    def event(hit: tuple[bytes, int, int] | None) -> BlockEvent | None:
        if hit is None:
            return None
        return BlockEvent(hit[0].decode("ascii", "replace"), hit[1], reader.stack(hit[2]))

    out = []
    for i, e in enumerate(reader.heap_corruption):
        alloc, free = resolved[i]
        finder = found.get(e.seq) if e.found == "free" else None
        if e.found == "free" and free is not None and finder is not None and free[1] == e.seq \
                and e.kind != "freed":
            free = None  # the free that found it is shown as the finder
        out.append(CorruptionRow(e, event(alloc), event(free), event(finder)))
    return out


def found_text(row: CorruptionRow) -> str:
    """Where the error was found: "found at its free (event 2)", "found at exit"."""
    e = row.error
    if e.found == "free":
        if row.found is not None:
            return f"found at its {row.found.op} at event {row.found.seq:,}"
        return "found at its free (not recorded)"
    if e.found == "quarantine":
        return f"found as it left the quarantine, after event {e.seq:,}"
    if e.found == "check":
        return f"found by memdump check-heap, after event {e.seq:,}"
    return "found at exit"


def text_section(corruption: Sequence[CorruptionRow], max_frames: int | None, fold: bool,
                 stack_text: StackText) -> list[str]:
    """One entry per heap corruption: the sentence and where it was found, the finding event's
    stack, the block's free (a write after free) and its allocation; no lines without any."""
    out: list[str] = []
    for n, row in enumerate(corruption, 1):
        e = row.error
        out += ["", f"HEAP CORRUPTION {n:,} of {len(corruption):,}, found by a red zone: "
                    f"{describe(e, f' at 0x{e.block:x}')} in thread {e.tid}, {found_text(row)}"
                    + (":" if row.found is not None else "")]
        if row.found is not None:
            out.extend(stack_text(row.found.stack, max_frames, fold))
        if row.free is not None:
            out.append(f"  Block was free'd by {row.free.op} at event {row.free.seq:,}:")
            out.extend(stack_text(row.free.stack, max_frames, fold))
        if row.alloc is not None:
            out.append(f"  Block was alloc'd by {row.alloc.op} at event {row.alloc.seq:,}:")
            out.extend(stack_text(row.alloc.stack, max_frames, fold))
    return out


def json_errors(corruption: Sequence[CorruptionRow], max_frames: int | None,
                stack_json: StackJson) -> list[dict[str, Any]]:
    """The JSON report's `errors` entries for them (docs/report-format.md)."""

    def at(ev: BlockEvent | None, **extra: Any) -> dict[str, Any] | None:
        if ev is None:
            return None
        return {"op": ev.op, "seq": ev.seq, **extra, "stack": stack_json(ev.stack, max_frames)}

    return [
        {
            "kind": KINDS[r.error.kind].replace(" ", "-"),  # as "invalid-free"
            "op": r.found.op if r.found is not None else None,
            "seq": r.error.seq,
            "tid": r.error.tid,
            "pointer": f"0x{r.error.block:x}",
            "stack": stack_json(r.found.stack, max_frames) if r.found is not None else [],
            "freed_at": at(r.free),
            "allocated_at": at(r.alloc, bytes=r.error.size),
            "offset": r.error.offset,
            "bytes": r.error.bytes,
            "found": r.error.found,
            "message": describe(r.error),
        }
        for r in corruption
    ]
