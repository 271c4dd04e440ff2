"""The one pass's lean loop (heappass.py): for the accumulators that read none of the views'
figures (no `parts`, no `stacks`: the exports' figures, the heap map), only the live
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
from .heapevents import events
from .passapi import ALLOC_BYTES, ALLOCS, NODE, Accumulator, Figures, hooks

assert (ALLOCS, ALLOC_BYTES) == (5, 6)  # the loop's literals

__all__ = ["run_lean"]

_RESIZES = frozenset((b"realloc", b"reallocarray"))


def run_lean(reader: DumpReader, accumulators: list[Accumulator],
             stops: Callable[..., int] | None, next_stop: int) -> Figures:
    """`heappass.run` for accumulators without parts or stacks; `stops` and `next_stop`:
    heappass's moments' check (None: no moment)."""
    on_alloc, on_release, on_record = hooks(accumulators)
    live: dict[bytes, tuple] = {}  # type: ignore[type-arg]  # ptr -> (size, its stack's figures, SEQ)
    live_pop = live.pop
    live_get = live.get
    stats: dict[bytes, list] = {}  # type: ignore[type-arg]  # STACK as written -> its figures
    stats_get = stats.get
    seq = cur = allocated = dropped = peak = peak_seq = peak_blocks = 0
    for event in events(reader):
        if seq >= next_stop > 0:
            next_stop = stops(seq, live, cur, allocated, dropped, False)  # type: ignore[misc]
        seq, op, tid, node, nid, p, release, size, rec = event
        if node is None:  # a process event, a clock sample, a tag, a custom block's event
            if rec is not None and op != b"c" and op != b"g":
                if op == b"p" and rec[2] == b"exec":  # the image is gone, and its blocks
                    cur = 0
                    live.clear()
                for hook in on_record:
                    hook(seq, rec)
            continue
        if nid < 0 and op == b"free":
            continue  # the C library's own bookkeeping (tcache_thread_shutdown)
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
        st = stats_get(node)  # by STACK as written
        if st is None:
            st = stats[node] = [0] * NODE + [abs(nid)]
        old = live_get(p)
        if old is not None:  # its free was not recorded
            cur -= old[0]
            dropped += old[0]
        live[p] = (size, st, seq)
        cur += size
        allocated += size
        st[5] += 1  # ALLOCS, ALLOC_BYTES (a literal is faster than a global)
        st[6] += size
        if on_alloc:
            resize = op in _RESIZES
            for hook in on_alloc:
                hook(seq, tid, p, size, st[NODE], resize)
        if cur > peak:
            peak, peak_seq, peak_blocks = cur, seq, len(live)
    if stops is not None and seq >= next_stop > 0:
        stops(seq, live, cur, allocated, dropped, True)
    figures = Figures(reader, frozenset(), stats, live, last_seq=seq, cur=cur, peak=peak,
                      peak_seq=peak_seq, peak_blocks=peak_blocks, allocated=allocated,
                      dropped=dropped)
    for acc in accumulators:
        acc.finish(figures)
    return figures
