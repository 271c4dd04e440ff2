"""The one pass's lean loop (heappass.py): for the accumulators that read none of the views'
figures (no `parts`, no `stacks`: the exports' figures, the heap map, --phases), only the live
blocks, their total and peak, and each stack's allocations, with the moments and the per-event
calls they ask for. The views' loop computes far more per event (each stack's live and peak
figures, the threads' last operations...): on cppcheck's recording the exports' pass took a third
longer in it.

The semantics are the pass's (heappass.py) as the exports have always applied them: a `free` from a
marked stack (the C library's own) releases nothing, a release of a pointer not live does nothing,
custom blocks are apart, an `exec` drops every live block, a `realloc` releases and allocates.
"""

from __future__ import annotations

from collections.abc import Callable

from .dumpfile import DumpReader
from .dumpformat import CUSTOM, OPERATIONS, SHORT_WITH_ARGS, effect
from .passapi import ALLOC_BYTES, ALLOCS, NODE, Accumulator, Figures, hooks

assert (ALLOCS, ALLOC_BYTES) == (5, 6)  # the loop's literals

__all__ = ["run_lean"]

_OPS_B = {op.encode(): op for op in OPERATIONS}
_MAKE = frozenset((b"malloc", b"new", b"new[]"))
_FREE = frozenset((b"free", b"delete", b"delete[]"))
_RESIZES = frozenset((b"realloc", b"reallocarray"))
_SHORT_MAKE = frozenset((b"+", b"+n", b"+a"))
_SHORT_FREE = frozenset((b"-", b"-n", b"-a"))
_WITH_ARGS = frozenset(tag.encode() for tag in SHORT_WITH_ARGS)  # (2.5) `+c`, `+r`


def run_lean(reader: DumpReader, accumulators: list[Accumulator],
             stops: Callable[..., int] | None, next_stop: int) -> Figures:
    """`heappass.run` for accumulators without parts or stacks; `stops` and `next_stop`:
    heappass's moments' check (None: no moment)."""
    on_alloc, on_release, on_record = hooks(accumulators)
    node_ids, other, thread = reader.node_ids, reader.other, reader.thread
    live: dict[bytes, tuple] = {}  # type: ignore[type-arg]  # ptr -> (size, its stack's figures)
    live_pop = live.pop
    live_get = live.get
    stats: dict[bytes, list] = {}  # type: ignore[type-arg]  # STACK as written -> its figures
    stats_get = stats.get
    seq = cur = allocated = dropped = peak = peak_seq = peak_blocks = 0
    short_tid = tid = b""
    release: bytes | None
    p: bytes | None
    for line in reader.lines():
        if seq >= next_stop > 0:
            next_stop = stops(seq, live, cur, allocated, dropped, False)  # type: ignore[misc]
        fl = line.split()
        tag = fl[0]
        if tag in _WITH_ARGS:  # (2.5) calloc's and realloc's short records: their `e` records
            fl = reader.expand(fl, seq + 1, b"%d" % (seq + 1))
            tag = b"e"
        if tag in _SHORT_MAKE:  # STACK RESULT SIZE
            seq += 1
            _, node, p, size = fl
            release = None
            tid = short_tid
        elif tag in _SHORT_FREE:  # STACK PTR
            seq += 1
            _, node, release = fl
            p = None
            tid = short_tid
            if tag == b"-" and node_ids[node] < 0:
                continue  # the C library's own bookkeeping (tcache_thread_shutdown)
        elif tag == b"e":
            seq += 1
            if int(fl[1]) != seq:
                raise reader.seq_error(fl[1], seq)
            op, tid, node = fl[3], fl[2], fl[4]
            if op in _MAKE:
                _, _, _, _, _, p, size = fl
                release = None
            elif op in _FREE:
                _, _, _, _, _, _, release = fl
                p = None
                if op == b"free" and node_ids[node] < 0:
                    continue
            else:
                name = _OPS_B[op]
                if name in CUSTOM:
                    node_ids[node]
                    continue
                args = tuple(int(a, 16) if a[:2] == b"0x" else int(a) for a in fl[6:])
                rel, new, size = effect(name, 0 if fl[5] == b"-" else int(fl[5], 16), args)
                release = fl[6] if rel is not None else None
                p = fl[5] if new is not None else None
        elif tag == b"t":
            short_tid = thread(fl, seq)
            continue
        else:
            rec = other(line, fl, seq)
            if rec is None:
                continue
            seq += 1
            if rec[0] == b"p" and rec[2] == b"exec":  # the image is gone, and its blocks
                cur = 0
                live.clear()
            for hook in on_record:
                hook(seq, rec)
            continue
        if release is not None:
            b = live_pop(release, None)
            if b is not None:
                cur -= b[0]
                if on_release:
                    made = None if p is None or p == b"0x0" else p
                    for hook in on_release:
                        hook(seq, tid, release, b[0], b[1][NODE], made, None)
        if p is None or p == b"0x0":
            continue
        size = int(size)
        if size < 0:
            raise ValueError(size)
        st = stats_get(node)  # by STACK as written: no look-up of its id
        if st is None:
            st = stats[node] = [0] * NODE + [abs(node_ids[node])]
        old = live_get(p)
        if old is not None:  # its free was not recorded
            cur -= old[0]
            dropped += old[0]
        live[p] = (size, st)
        cur += size
        allocated += size
        st[5] += 1  # ALLOCS, ALLOC_BYTES (a literal is faster than a global)
        st[6] += size
        if on_alloc:
            resize = tag == b"e" and fl[3] in _RESIZES
            for hook in on_alloc:
                hook(seq, tid, p, size, st[NODE], resize)
        if cur > peak:
            peak, peak_seq, peak_blocks = cur, seq, len(live)
    if stops is not None and seq >= next_stop > 0:
        stops(seq, live, cur, allocated, dropped, True)
    figures = Figures(reader, frozenset(), stats, live, last_seq=seq, cur=cur, peak=peak,
                      peak_seq=peak_seq, peak_blocks=peak_blocks)
    for acc in accumulators:
        acc.finish(figures)
    return figures
