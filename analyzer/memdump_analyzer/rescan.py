"""Second readings of a dump, for the few errors whose details the replay's one pass cannot keep.

The replay (replay.py) keeps per freed pointer only the stack that freed it; the SEQ of that free
is found here, for the errors that name it, by reading the file again; so are the OP and SEQ of
the allocation of a mismatched-free's block (format 2.1), and the line of a live block's malformed
RESULT. Both read short records (format 2.0) as the `e` records they stand for.
"""

from __future__ import annotations

from .dumpformat import NO_RESULT, OPERATIONS, SEQUENCED, SHORT_OPS
from .dumpio import clean_line
from .model import HeapError

__all__ = ["alloc_ops", "find_alloc_events", "find_freed_seqs", "result_line"]

_RELEASES = frozenset(op.encode() for op, args in OPERATIONS.items() if "PTR" in args)
#: the operations that only release a block
_RELEASES_ONLY = frozenset(op.encode() for op in NO_RESULT)
_SEQUENCED = frozenset(tag.encode() for tag in SEQUENCED)
_SHORT_OPS = {tag.encode(): op.encode() for tag, op in SHORT_OPS.items()}
#: the short records of an allocation (`+`, and 2.1's `+n`, `+a`)
_ALLOCS = frozenset(tag for tag in _SHORT_OPS if tag[0] == 43)


def find_freed_seqs(path: str, all_errors: list[HeapError], node_ids: dict[bytes, int]) -> None:
    """Set `freed_seq` of the errors with a "freed at": the SEQ of the release the replay saw.

    Mirrors the replay: a release is a `free`, `delete`, `delete[]`, `realloc` or `reallocarray`
    of the pointer that is
    not itself an error nor the C library's internal free (a marked STACK in `node_ids`); an
    `exec` forgets them all.
    """
    by_seq = {e.seq: e for e in all_errors if e.freed_node is not None}
    wanted = {b"%#x" % e.pointer for e in by_seq.values()}
    errors = {e.seq for e in all_errors}
    last: dict[bytes, int] = {}
    for seq, fl in _events(path):
        tag = fl[0]
        if tag[0] == 45 and len(fl) == 3:  # a free or delete, short (2.0, 2.1)
            op, node, ptr = _SHORT_OPS[tag], fl[1], fl[2]
        elif tag == b"e" and len(fl) >= 7:
            op, node, ptr = fl[3], fl[4], fl[6]
        else:
            if tag == b"p" and fl[2] == b"exec":
                last.clear()
            continue
        if ptr not in wanted:
            continue
        error = by_seq.get(seq)
        if error is not None:
            error.freed_seq = last.get(ptr)
            if len(by_seq) == 1:
                return
            del by_seq[seq]
        elif seq not in errors and op in _RELEASES and node_ids[node] >= 0:
            last[ptr] = seq


def _events(path: str):  # noqa: ANN202 - a generator of (SEQ, fields)
    """(SEQ, fields) of each sequenced record, short ones as they are."""
    seq = 0
    with open(path, "rb") as fh:
        fh.readline()
        for line in fh:
            if not line.endswith(b"\n"):
                break
            if b"\0" in line:
                line = clean_line(line)
            fl = line.split()
            if fl and fl[0] in _SEQUENCED:
                seq += 1
                yield seq, fl


def find_alloc_events(path: str, all_errors: list[HeapError]) -> None:
    """Set `alloc_op` and `alloc_seq` of the mismatched-free errors: the last event before the
    error whose RESULT is the block's pointer (the allocation that made it live)."""
    by_seq = {e.seq: e for e in all_errors if e.alloc_node is not None}
    wanted = {b"%#x" % e.pointer for e in by_seq.values()}
    last: dict[bytes, tuple[bytes, int]] = {}
    for seq, fl in _events(path):
        error = by_seq.get(seq)
        if error is not None:
            found = last.get(b"%#x" % error.pointer)
            if found is not None:
                error.alloc_op, error.alloc_seq = found[0].decode(), found[1]
            del by_seq[seq]
            if not by_seq:
                return
        if fl[0][0] == 43 and len(fl) == 4 and fl[2] in wanted:  # `+`, `+n`, `+a`
            last[fl[2]] = (_SHORT_OPS[fl[0]], seq)
        elif fl[0] == b"e" and len(fl) > 5 and fl[5] in wanted:
            last[fl[5]] = (fl[3], seq)


def alloc_ops(path: str, nodes: set[int]) -> dict[int, str]:
    """Stack node -> the operation of the first allocation made at it (`malloc`, `calloc`,
    `new`, `new[]`...), for the nodes of `nodes`: the function the program called, which a
    suppression's first frame names. A node is one call site, so one function."""
    wanted = {str(n).encode() for n in nodes}
    out: dict[int, str] = {}
    for _, fl in _events(path):
        if fl[0][0] == 43 and len(fl) == 4:  # `+`, `+n`, `+a`
            node, op = fl[1], _SHORT_OPS[fl[0]]
        elif fl[0] == b"e" and len(fl) > 5 and fl[3] not in _RELEASES_ONLY:
            node, op = fl[4], fl[3]
        else:
            continue
        if node in wanted:
            wanted.discard(node)
            out[int(node)] = op.decode()
            if not wanted:
                break
    return out


def result_line(path: str, token: bytes) -> int | None:
    """The line of the last event (`e` or `+`) whose RESULT is `token`."""
    found = None
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if b"\0" in line:
                line = clean_line(line)
            fl = line.split()
            if (len(fl) > 5 and fl[0] == b"e" and fl[5] == token) or (
                len(fl) > 2 and fl[0] in _ALLOCS and fl[2] == token
            ):
                found = n
    return found
