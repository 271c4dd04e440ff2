"""The dump's records as heap events with their effects: what the Python passes (heappass.py,
leanpass.py) read, from the one decoder (dumpdecode.py).

`events(reader)` reads `reader`'s lines once and yields one tuple per heap event and per record a
pass reacts to, `(SEQ, OP, TID, STACK, NODE, P, RELEASE, SIZE, REC)`:

- a heap event (an `e` record or any short record, expanded as the grammar says): OP is the
  operation (bytes), TID the thread as written, STACK the stack node as written and NODE its id
  (negative when marked: `DumpReader.node_ids`); what it does to the live blocks is RELEASE, the
  pointer it releases as written (None: none; `0x0` for a `free(NULL)`), and P, the block it makes
  live as written (None for a release; `0x0` for an allocation that failed or made no block) of
  SIZE bytes; REC is None;
- a process event (`p`, `end`: REC is `DumpReader.other`'s `[TAG, SEQ, WHAT, b"", DETAIL]`), a clock
  sample (`c`: REC is `(MILLIS, RSS)`) or a tag (`g`, after the reader took it): OP is the tag,
  STACK is None;
- a custom block's event (`custom_alloc`, `custom_free`: memdump_api.h), unless asked for as heap
  events: OP is the operation, STACK and REC are None.

The decoder splits the lines, reads a short record as its `e` record, numbers and checks SEQ, and
gives definitions and `t` records to the reader (`DumpReader.other`, `thread`); nothing here names
a tag but `e`, `c` and `g`. The checks here are those a pass needs to stay right (the field counts,
STACK, sizes); a malformed line raises the decoder's `DumpError`, or ValueError, IndexError,
KeyError or TypeError, and then the caller finds its exact `PATH:LINE: message` with the replay's
checks (heappass.diagnose). The replay (replay.py) reads the same decoder and checks every field.

The semantics are the format's (`dumpformat.effect`), with the passes' readings of two cases: a
`realloc` that failed keeps its block (RELEASE None, P `0x0`), and a `realloc` to size 0 releases
its block and makes none (P `0x0`).
"""

from __future__ import annotations

from collections.abc import Iterator

from .dumpdecode import decode
from .dumpfile import DumpReader
from .dumpformat import CUSTOM, NO_RESULT, OPERATIONS, effect

__all__ = ["HeapEvent", "events"]

#: (SEQ, OP, TID, STACK, NODE, P, RELEASE, SIZE, REC): see the module's docstring
HeapEvent = tuple

_OPS_B = {op.encode(): op for op in OPERATIONS}
#: the operations that make a block of their one argument's size, and those that release their
#: one argument: the frequent ones, decoded without `effect`
_MAKE = frozenset((b"malloc", b"new", b"new[]"))
_FREE = frozenset((b"free", b"delete", b"delete[]"))
_CUSTOM = frozenset(op.encode() for op in CUSTOM)


def events(reader: DumpReader, *, custom: bool = False) -> Iterator[HeapEvent]:
    """The heap events and process events of `reader`'s lines, in order (see the module's
    docstring). Custom blocks' events (memdump_api.h) are heap events only with `custom`; their
    STACK is checked all the same."""
    node_ids = reader.node_ids
    clock_sample = reader.clock_sample
    release: bytes | None
    p: bytes | None
    for seq, fl, _ in decode(reader, state=True):
        tag = fl[0]
        if tag == b"e":
            op = fl[3]
            tid = fl[2]
            if op in _MAKE:
                _, _, _, _, node, p, size = fl  # the unpacking checks the field count
                size = int(size)
                if size < 0:
                    raise ValueError(size)
                yield seq, op, tid, node, node_ids[node], p, None, size, None
                continue
            if op in _FREE:
                _, _, _, _, node, _, release = fl
                yield seq, op, tid, node, node_ids[node], None, release, 0, None
                continue
            node = fl[4]
            result = fl[5]
            args = fl[6:]
        elif tag == b"c":
            yield seq, b"c", None, None, 0, None, None, 0, clock_sample(fl, seq)
            continue
        else:  # a process event (its fields as `DumpReader.other` gives them), a `g` record
            yield seq, tag, None, None, 0, None, None, 0, fl
            continue
        # any other heap operation, in its `e` record's fields: what `effect` says it does
        nid = node_ids[node]
        if op in _CUSTOM and not custom:  # its SEQ only (a pass's moments count it)
            yield seq, op, None, None, 0, None, None, 0, None
            continue
        name = _OPS_B[op]
        if name == "calloc":
            nmemb, size = args  # the unpacking checks the field count
            p, release, size = result, None, int(nmemb) * int(size)
        else:
            numbers = tuple(int(a, 16) if a[:2] == b"0x" else int(a) for a in args)
            if len(numbers) != len(OPERATIONS[name]):
                raise ValueError(name)
            if name == "realloc":  # the passes' reading: a failed realloc keeps its block
                release, p, size = args[0], result, numbers[1]
                if release == b"0x0":
                    release = None
                elif p == b"0x0" and size:
                    release = None
            else:
                rel, new, size = effect(name, 0 if result == b"-" else int(result, 16), numbers)
                release = args[0] if rel is not None else None
                p = None if name in NO_RESULT else (result if new is not None else b"0x0")
        if size < 0:
            raise ValueError(size)
        yield seq, op, tid, node, nid, p, release, size, None
