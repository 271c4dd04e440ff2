"""Heap access errors (`ae` records, format 2.6): what the in-process recorder's guard pages
caught (docs/heap-errors.md), read from the dump, and the report's text for them, as valgrind
words its memory errors.

The recorder writes one record for the fault that kills the process: the access (read or write,
its address and stack), the block it hit (address, size, the offset and side) and whether the
block was live or freed. The block's allocation and free stacks are its events': the last event
before the record that made a block at its address, and the one that released it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dumpio import DumpError

# dumpfile imports this module: its DumpReader is not imported here (no cycle)
DumpReader = Any

__all__ = ["AccessError", "describe", "read_record"]


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
