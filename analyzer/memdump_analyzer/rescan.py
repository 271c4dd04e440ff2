"""Second readings of a dump, for the few errors whose details the replay's one pass cannot keep.

The OP and SEQ of the allocation of a mismatched-free's block (format 2.1) are found here, by
reading the file again, and the line of a live block's malformed RESULT. They read the dump with
the reader (`DumpReader.records()`), which gives the short records (format 2.0) as the `e` records
they stand for. (A double free's "freed at" SEQ is the replay's own: it keeps it per freed
pointer.)
"""

from __future__ import annotations

from collections.abc import Iterator

from .dumpfile import DumpReader
from .dumpformat import NO_RESULT
from .model import HeapError

__all__ = ["alloc_ops", "find_alloc_events", "heap_records", "result_line"]

#: the operations that only release a block
_RELEASES_ONLY = frozenset(op.encode() for op in NO_RESULT)


def heap_records(path: str) -> Iterator[tuple[int, list[bytes]]]:
    """(SEQ, fields) of each sequenced record, as the reader gives them (a short record as the
    `e` record it stands for)."""
    with DumpReader(path) as reader:
        yield from enumerate(reader.records(), 1)


def find_alloc_events(path: str, all_errors: list[HeapError]) -> None:
    """Set `alloc_op` and `alloc_seq` of the mismatched-free errors: the last event before the
    error whose RESULT is the block's pointer (the allocation that made it live)."""
    by_seq = {e.seq: e for e in all_errors if e.alloc_node is not None}
    wanted = {b"%#x" % e.pointer for e in by_seq.values()}
    last: dict[bytes, tuple[bytes, int]] = {}
    for seq, fl in heap_records(path):
        error = by_seq.get(seq)
        if error is not None:
            found = last.get(b"%#x" % error.pointer)
            if found is not None:
                error.alloc_op, error.alloc_seq = found[0].decode(), found[1]
            del by_seq[seq]
            if not by_seq:
                return
        if fl[0] == b"e" and len(fl) > 5 and fl[5] in wanted:
            last[fl[5]] = (fl[3], seq)


def alloc_ops(path: str, nodes: set[int]) -> dict[int, str]:
    """Stack node -> the operation of the first allocation made at it (`malloc`, `calloc`,
    `new`, `new[]`...), for the nodes of `nodes`: the function the program called, which a
    suppression's first frame names. A node is one call site, so one function."""
    wanted = {str(n).encode() for n in nodes}
    out: dict[int, str] = {}
    for _, fl in heap_records(path):
        if fl[0] != b"e" or fl[3] in _RELEASES_ONLY:
            continue
        node, op = fl[4], fl[3]
        if node in wanted:
            wanted.discard(node)
            out[int(node)] = op.decode()
            if not wanted:
                break
    return out


def result_line(path: str, token: bytes) -> int | None:
    """The line of the last event (`e` or `+`) whose RESULT is `token`."""
    found = None
    with DumpReader(path) as reader:
        for seq, fl in enumerate(reader.records(), 1):
            if fl[0] == b"e" and len(fl) > 5 and fl[5] == token:
                found = reader.line_of(seq)
    return found
