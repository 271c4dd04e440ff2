"""Heap access errors (`ae` records, format 2.6): what the in-process recorder's guard pages
caught (docs/heap-errors.md), read from the dump, and the report's text for them, as valgrind
words its memory errors.

The recorder writes one record for the fault that kills the process: the access (read or write,
its address and stack), the block it hit (address, size, the offset and side) and whether the
block was live or freed. The block's allocation and free stacks are its events': the last event
before the record that made a block at its address, and the one that released it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .dumpio import DumpError

# dumpfile imports this module: its DumpReader and Frame are not imported here (no cycle)
DumpReader = Any
Frame = Any
StackText = Callable[..., list[str]]

__all__ = ["AccessError", "AccessRow", "BlockEvent", "describe", "json_rows", "read_record",
           "rows", "text_section"]


@dataclass(frozen=True)
class AccessError:
    """(2.6) An `ae` record."""

    tid: int
    access: str      # "read" or "write"
    address: int
    stack: int
    block: int
    size: int
    offset: int
    relation: str    # "after", "before" or "inside"
    state: str       # "allocated" or "freed"


def read_record(reader: DumpReader, fl: list[bytes], seq: int) -> None:
    """An `ae` record, into `reader.access_errors` (DumpError when it is malformed, naming its
    line)."""
    reader.check_fields(fl, seq)
    tid, access, address, stack, block, size, offset, relation, state = reader.fields(fl, seq)
    words = (access.decode("ascii", "replace"), relation.decode("ascii", "replace"),
             state.decode("ascii", "replace"))
    if (words[0] not in ("read", "write") or words[1] not in ("after", "before", "inside")
            or words[2] not in ("allocated", "freed")):
        raise DumpError(reader.path, reader._here(seq),
                        f"'ae' record: bad ACCESS RELATION STATE '{' '.join(words)}'")
    if stack != 0 and stack not in reader.nodes:
        raise DumpError(reader.path, reader._here(seq),
                        f"stack {stack} is used before it is defined")
    reader.access_errors.append(AccessError(tid, words[0], address, stack, block, size, offset,
                                            words[1], words[2]))


def describe(e: AccessError) -> tuple[str, str]:
    """valgrind's two sentences for `e`: "Invalid write" (the access's size is not known from
    the fault) and "0 bytes after a block of size 40 alloc'd"."""
    kind = f"Invalid {e.access} at 0x{e.address:x}"
    where = f"{e.offset} bytes {e.relation} a block of size {e.size}"
    return kind, where + (" free'd" if e.state == "freed" else " alloc'd")


@dataclass(frozen=True)
class BlockEvent:
    """The event that made or released an access error's block: its operation, SEQ, stack."""

    op: str
    seq: int
    stack: list[Frame]


@dataclass(frozen=True)
class AccessRow:
    """An access error with its stacks: the access's, the block's allocation and free."""

    error: AccessError
    stack: list[Frame]
    alloc: BlockEvent | None
    free: BlockEvent | None


def rows(reader: DumpReader, events: Callable[[], Any]) -> list[AccessRow]:
    """The access errors of `reader` (read to its end), with the events of their blocks from
    `events()` ((SEQ, fields) of each sequenced record, a second reading of the dump: only when
    there are errors): the last event that made a block at BLOCK, and the release after it."""
    if not reader.access_errors:
        return []
    wanted = {b"%#x" % e.block for e in reader.access_errors}
    made: dict[bytes, tuple[bytes, int, int]] = {}
    freed: dict[bytes, tuple[bytes, int, int]] = {}
    for seq, fl in events():
        if fl[0] != b"e" or len(fl) < 6:
            continue
        if fl[5] in wanted:
            made[fl[5]] = (fl[3], seq, int(fl[4]))
            freed.pop(fl[5], None)
        elif len(fl) > 6 and fl[6] in made and (fl[5] == b"-" or fl[3] in (b"realloc",
                                                                           b"reallocarray")):
            freed[fl[6]] = (fl[3], seq, int(fl[4]))

    def event(found: tuple[bytes, int, int] | None) -> BlockEvent | None:
        if found is None:
            return None
        return BlockEvent(found[0].decode("ascii", "replace"), found[1], reader.stack(found[2]))

    out = []
    for e in reader.access_errors:
        key = b"%#x" % e.block
        out.append(AccessRow(e, reader.stack(e.stack), event(made.get(key)),
                             event(freed.get(key)) if e.state == "freed" else None))
    return out


def text_section(access: Sequence[AccessRow], max_frames: int | None, fold: bool,
                 stack_text: StackText) -> list[str]:
    """valgrind's memory errors, one each: the access and its stack, the block (its free's
    stack for a freed one, then its allocation's); no lines without errors."""
    out: list[str] = []
    for n, row in enumerate(access, 1):
        e = row.error
        kind, where = describe(e)
        out += ["", f"HEAP ACCESS ERROR {n:,} of {len(access):,}, caught by a guard page: "
                    f"{kind} in thread {e.tid}"]
        out.extend(stack_text(row.stack, max_frames, fold))
        by = ""
        first, then = (row.free, row.alloc) if e.state == "freed" else (row.alloc, None)
        if first is not None:
            by = f" by {first.op} at event {first.seq:,}"
        out.append(f"  Address 0x{e.address:x} is {where}{by}:")
        if first is not None:
            out.extend(stack_text(first.stack, max_frames, fold))
        if then is not None:
            out.append(f"  Block was alloc'd by {then.op} at event {then.seq:,}:")
            out.extend(stack_text(then.stack, max_frames, fold))
    return out


def json_rows(access: Sequence[AccessRow], max_frames: int | None,
              stack_json: Callable[..., Any]) -> list[dict[str, Any]]:
    """(report 1.8) The JSON report's `errors` entries of the access errors, after the frees':
    `kind` "invalid-read" or "invalid-write", `stack` the faulting access's, `pointer` its
    address, `allocated_at` and `freed_at` the block's events, `block` what was hit."""
    def at(found: BlockEvent | None, size: int | None = None) -> dict[str, Any] | None:
        if found is None:
            return None
        return {"op": found.op, "seq": found.seq, **({"bytes": size} if size is not None else {}),
                "stack": stack_json(found.stack, max_frames)}

    return [{
        "kind": f"invalid-{row.error.access}",
        "op": None,
        "seq": None,
        "tid": row.error.tid,
        "pointer": f"0x{row.error.address:x}",
        "stack": stack_json(row.stack, max_frames),
        "block": {"address": f"0x{row.error.block:x}", "bytes": row.error.size,
                  "offset": row.error.offset, "relation": row.error.relation,
                  "state": row.error.state},
        "allocated_at": at(row.alloc, row.error.size),
        "freed_at": {k: v for k, v in (at(row.free) or {}).items() if k != "op"} or None,
    } for row in access]
