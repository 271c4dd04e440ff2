"""The one pass over a dump's heap events (docs/architecture.md, "The one pass"): every output
beyond the leak report (the views, the exports, the heap map, --growth, --by-tag, --phases) is an
`Accumulator` registered for the pass, and any set of them reads the dump once.

The pass applies each heap event's effect once, with the replay's semantics (replay.py;
docs/dump-format.md, "Heap operations"): the C library's own frees (a stack of
`RUNTIME_FREE_FUNCTIONS`, marked by the reader) release nothing, a release of a pointer that is
not live does nothing (the leak report lists it as an error), an `exec` drops every live block,
custom blocks (`custom_alloc`) are not heap blocks and are left out, and a `realloc` that moves or
resizes a block is a release of the old block (by the `realloc`'s stack) and an allocation of the
new one, as heaptrack counts it.

What an accumulator can ask for, cheapest first:

- `parts`: the views' figures the pass always computes inline (per allocating stack: live, peak
  and allocated bytes and blocks; the peak; the live blocks) and those of `PARTS` it computes
  only when asked (`temporary`, `lifetimes`, `sizes`, `timeline`), read from the `Figures` the
  pass hands to `finish`. This costs no call per event: the views' `Profile` (views/stream.py)
  is made of these alone, and the loop computes them inline from the decoder's events
  (heapevents.py: lists for records, branches inlined: a call per event into each output would
  double the pass).
- moments: the live heap after chosen events (the exports' snapshots of the heap over time, the
  heap map's blocks at the peak and at the end), declared before the pass (`wanted_moments`, the
  SEQs known from the analysis) and handed to `take`: the library's pass takes them
  (analyzer/native/moments.c), this loop too (`MomentsReference`, one comparison per line).
  `first_moment` and `moment` choose them as the pass goes: this loop alone.
- `events`: `alloc` and `release` for each block made live or released, with its size, stack,
  event number and thread, and `record` for each `p` or `end` record (phases, `exec`): a call
  per event, for the outputs that keep per-block state of their own (the heap map, --growth,
  --by-tag and --phases). With `native` (--growth, --by-tag, --phases: the library does their
  work, analyzer/native/tagviews.c), no call: `finish` reads the library's tables
  (`Figures.views`), and this module's loop calls the events when the library is not used (the
  views' loop then, whatever the parts, the library's semantics).
"""

from __future__ import annotations

import gc

from . import nativepass
from .dumpfile import DumpError, DumpReader
from .heapevents import events
from .leanpass import run_lean
from .nativepass import NATIVE_PARTS
from .passapi import (
    _MASKED,
    LIFE,
    LIFE_MS,
    NO_LOW,
    PARTS,
    Accumulator,
    Figures,
    MomentsReference,
    NativeRequest,
    _count,
    bucket,
    hooks,
    lifetime_masks,
    plan,
)
from .replay import replay
from .rules import RUNTIME_FREE_FUNCTIONS

__all__ = ["PARTS", "Accumulator", "Figures", "bucket", "diagnose",
           "native_request", "run", "run_path"]

#: the operations whose allocation replaces the block they release (`Accumulator.alloc`)
_RESIZES = frozenset((b"realloc", b"reallocarray"))


def _stops(accumulators: list[Accumulator], frag: object, want_timeline: bool):  # noqa: ANN202
    """The moments' check: a function of the state after an event that takes the fragmentation
    sample and calls the accumulators whose moment it is, and gives the next event wanted; and
    the first one (0: none, and no function)."""
    due = [[acc.first_moment(), acc.moment, False] for acc in accumulators]
    due = [d for d in due if d[0] > 0]
    if want_timeline:  # the end's sample is the pass's own
        due.append([1, lambda seq, live, *_: frag.take(seq, live), True])  # type: ignore[attr-defined]
    if not due:
        return None, 0

    def stops(seq: int, live: dict, cur: int, allocated: int, dropped: int,  # type: ignore[type-arg]
              end: bool) -> int:
        nearest = 0
        for d in due:
            if 0 < d[0] <= seq and not (end and d[2]):
                d[0] = d[1](seq, live, cur, allocated, dropped)
            if d[0] > 0 and (nearest == 0 or d[0] < nearest):
                nearest = d[0]
        return nearest

    return stops, min(d[0] for d in due)


def native_request(accumulators: list[Accumulator]) -> NativeRequest | None:
    """What the library's pass computes for `accumulators` (started), or None when one of them
    needs this module's loop (a part the library does not compute, events of its own, moments
    chosen as the pass goes)."""
    compute = frozenset().union(*(acc.parts for acc in accumulators))
    series = next((acc.series for acc in accumulators if acc.series is not None), None)
    if "timeline" in compute and series is None:
        raise ValueError("the timeline part without its series")
    if not compute <= NATIVE_PARTS or any(
            (acc.events and not acc.native)
            or (acc.wanted_moments() is None and acc.first_moment())
            for acc in accumulators):
        return None
    views = frozenset().union(*(acc.native for acc in accumulators))
    return NativeRequest(accumulators, compute, series, views, plan(accumulators))


def run(reader: DumpReader, accumulators: list[Accumulator]) -> Figures:
    """Read all of `reader`'s lines (its header checked) once, applying each heap event's
    effect and feeding `accumulators`; each one's `finish` is called at the end, in order.
    Raises `DumpError` (whose line may be wrong: the pass does not count the `t` records), or
    ValueError/IndexError/KeyError/TypeError for a malformed event: the caller finds the line
    with the replay's checks (`diagnose`)."""
    for acc in accumulators:
        acc.start(reader)
    request = native_request(accumulators)
    if request is not None:
        figures = nativepass.figures(reader, *request.args)
        if figures is not None:
            request.deliver(figures)
            return figures
    compute = frozenset().union(*(acc.parts for acc in accumulators))
    want_temporary = "temporary" in compute
    want_lifetimes = "lifetimes" in compute
    want_sizes = "sizes" in compute
    want_timeline = "timeline" in compute
    series = next((acc.series for acc in accumulators if acc.series is not None), None)
    views = frozenset().union(*(acc.native for acc in accumulators))
    wanted = plan(accumulators)
    if wanted:  # taken by this loop
        reference = MomentsReference(wanted)
        reference.start(reader)
        accumulators = [reference, *accumulators]
    if not compute and not views and not any(acc.stacks for acc in accumulators):
        return run_lean(reader, accumulators, *_stops(accumulators, None, False))
    on_alloc, on_release, on_record = hooks(accumulators)
    live: dict[bytes, tuple] = {}  # type: ignore[type-arg]  # ptr -> (size, stats, SEQ, ms)
    live_pop = live.pop
    live_setdefault = live.setdefault
    stats: dict[bytes, list] = {}  # type: ignore[type-arg]  # STACK as written -> its figures
    masks = lifetime_masks() if want_lifetimes else []
    stats_get = stats.get
    sizes: dict[int, int] = {}
    sizes_get = sizes.get
    last_alloc: dict[bytes, bytes | None] = {}  # thread -> its last operation's block, if alloc
    timeline, frag = series or (None, None)
    # the SEQ after which the next moment is due: a fragmentation sample, an accumulator's
    stops, next_stop = _stops(accumulators, frag, want_timeline)
    # the tags: string id (-1: untagged) -> [live bytes, SEQ changed, bytes at the span's
    # highest point (when changed after it), its index]; each live block's tag row
    tagging = False
    tag_rows: dict[int, list[int]] = {}
    tag_list: list[list[int]] = []
    block_tag: dict[bytes, list[int]] = {}
    block_tag_pop = block_tag.pop
    untagged: list[int] = []
    tid_stacks: dict[bytes, list[int]] = {}  # TID as written -> its stack of tags (reader.tags)
    reader_tags = reader.tags
    seq = 0
    ms = rss = peak_rss = 0
    peak_rss_ms = None
    clocked = False
    cur = peak = peak_seq = peak_blocks = peak_ms = 0
    allocated = dropped = 0
    span_end = 1
    span_max = -1  # the span's highest live heap (-1: none yet), and when
    span_seq = span_ms = span_rss = 0
    span_min = NO_LOW  # its lowest, and when
    low_seq = low_ms = low_rss = 0
    temps = temp_bytes = 0
    tid = b""  # the thread of `last`
    last: bytes | None = None  # its last operation's block when that was an allocation
    release: bytes | None
    p: bytes | None
    for event in events(reader):
        if seq >= next_stop > 0:
            next_stop = stops(seq, live, cur, allocated, dropped, False)
        seq, op, etid, node, nid, p, release, size, rec = event
        if node is not None:  # a heap event
            if etid != tid:  # another thread's: its last operation takes over
                if want_temporary:
                    last_alloc[tid] = last
                    last = last_alloc.get(etid)
                tid = etid
        elif op == b"c":
            ms, rss = rec
            clocked = True
            if rss > peak_rss:
                peak_rss = rss
                peak_rss_ms = ms
            continue
        elif op == b"g":
            if not tagging and want_timeline:  # the first tag: the blocks live so far are
                tagging = True  # untagged
                untagged = tag_rows[-1] = [cur, seq, span_max if span_max >= 0 else cur, 0,
                                           cur if span_min == NO_LOW else span_min]
                tag_list.append(untagged)
            continue
        else:  # a process event, or a custom block's (nothing but its SEQ)
            if rec is None:
                continue
            if op == b"p" and rec[2] == b"exec":  # the image is gone, and its blocks
                for st in stats.values():
                    if st[1]:
                        if st[2] <= peak_seq:
                            st[3] = st[0]
                            st[4] = st[1]
                        st[2] = seq
                        st[12] += st[1]
                        st[0] = st[1] = 0
                for _, ast, aseq, ams in live.values() if want_lifetimes else ():
                    _count(ast[9], bucket(seq - aseq))
                    if clocked:
                        _count(ast[10], bucket(ms - ams))
                live.clear()
                cur = 0
                for row in tag_list:
                    if row[1] <= span_seq:
                        row[2] = row[0]
                    if row[1] <= low_seq:
                        row[4] = row[0]
                    row[0], row[1] = 0, seq
                if want_timeline:
                    if seq >= span_end:
                        span_end = timeline.close(
                            seq, (span_seq, span_max, span_ms, span_rss),
                            (low_seq, span_min, low_ms, low_rss), tag_list)
                        span_max = -1
                    span_min, low_seq, low_ms, low_rss = 0, seq, ms, rss
                    if span_max < 0:
                        span_max, span_seq, span_ms, span_rss = 0, seq, ms, rss
                block_tag.clear()
                last = None
                last_alloc.clear()
            for hook in on_record:
                hook(seq, rec)
            continue
        if release is not None:
            if nid < 0 and op == b"free":  # the C library's own (tcache_thread_shutdown)
                last = None
                continue
            b = live_pop(release, None)
            if b is not None:
                bsize, st, aseq, ams = b
                if st[2] <= peak_seq:
                    st[3] = st[0]
                    st[4] = st[1]
                st[2] = seq
                st[0] -= bsize
                st[1] -= 1
                cur -= bsize
                if tagging:
                    row = block_tag_pop(release, untagged)
                    if row[1] <= span_seq:
                        row[2] = row[0]
                    if row[1] <= low_seq:
                        row[4] = row[0]
                    row[0] -= bsize
                    row[1] = seq
                if want_temporary and release == last:
                    st[7] += 1
                    st[8] += bsize
                    temps += 1
                    temp_bytes += bsize
                if want_lifetimes:
                    life = seq - aseq
                    if life < _MASKED:  # `bucket`, inlined: one look-up, no call
                        life &= masks[life >> 6]
                    else:
                        life = bucket(life)
                    hist = st[9]
                    hist[life] = hist.get(life, 0) + 1
                    if clocked:
                        hist = st[10]
                        life = bucket(ms - ams)
                        hist[life] = hist.get(life, 0) + 1
                    hist = st[11]
                    hist[nid] = hist.get(nid, 0) + 1
                if on_release:
                    made = None if p is None or p == b"0x0" else p
                    for hook in on_release:
                        hook(seq, tid, release, bsize, st[13], made, last)
            if p is None:
                last = None
                if want_timeline:  # a free: the heap's lowest point of its span, maybe
                    if seq >= span_end:
                        span_end = timeline.close(
                            seq, (span_seq, span_max, span_ms, span_rss),
                            (low_seq, span_min, low_ms, low_rss), tag_list)
                        span_max = -1
                        span_min = NO_LOW
                    if cur < span_min:
                        span_min, low_seq, low_ms, low_rss = cur, seq, ms, rss
                        if span_max < 0:
                            span_max, span_seq, span_ms, span_rss = cur, seq, ms, rss
                continue
        if p == b"0x0":  # a failed allocation: an operation that made no block
            last = None
            continue
        st = stats_get(node)  # by STACK as written
        if st is None:
            st = stats[node] = [0, 0, 0, 0, 0, 0, 0, 0, 0, {}, {}, {}, 0, abs(nid)]
        elif st[2] <= peak_seq:
            st[3] = st[0]
            st[4] = st[1]
        st[2] = seq
        b = (size, st, seq, ms)
        old = live_setdefault(p, b)
        if old is not b:  # its free was not recorded: the replay's reused_live
            live[p] = b
            cur -= old[0]
            ost = old[1]
            if ost[2] <= peak_seq:
                ost[3] = ost[0]
                ost[4] = ost[1]
            ost[2] = seq
            ost[0] -= old[0]
            ost[1] -= 1
            ost[12] += 1
            dropped += old[0]
            if want_lifetimes:
                _count(ost[9], bucket(seq - old[2]))
            if tagging:
                row = block_tag_pop(p, untagged)
                if row[1] <= span_seq:
                    row[2] = row[0]
                if row[1] <= low_seq:
                    row[4] = row[0]
                row[0] -= old[0]
                row[1] = seq
        last = p
        st[0] += size
        st[1] += 1
        st[5] += 1
        st[6] += size
        allocated += size
        if on_alloc:
            resize = op in _RESIZES
            for hook in on_alloc:
                hook(seq, tid, p, size, st[13], resize)
        if want_sizes:
            sizes[size] = sizes_get(size, 0) + 1
        cur += size
        if tagging:
            stack = tid_stacks.get(tid)
            if stack is None:
                stack = tid_stacks[tid] = reader_tags.setdefault(int(tid), [])
            row = tag_rows.get(stack[-1] if stack else -1)
            if row is None:
                row = tag_rows[stack[-1]] = [0, seq, 0, len(tag_list), 0]
                tag_list.append(row)
            else:
                if row[1] <= span_seq:
                    row[2] = row[0]
                if row[1] <= low_seq:
                    row[4] = row[0]
            row[0] += size
            row[1] = seq
            block_tag[p] = row
        if seq >= span_end and want_timeline:
            span_end = timeline.close(seq, (span_seq, span_max, span_ms, span_rss),
                                      (low_seq, span_min, low_ms, low_rss), tag_list)
            span_max = -1
            span_min = NO_LOW
        if cur < span_min:  # a realloc that shrank, or the span's first event
            span_min, low_seq, low_ms, low_rss = cur, seq, ms, rss
        if cur > span_max:
            span_max = cur
            span_seq = seq
            span_ms = ms
            span_rss = rss
            if cur > peak:
                peak = cur
                peak_seq = seq
                peak_blocks = len(live)
                peak_ms = ms
    if stops is not None and seq >= next_stop > 0:
        stops(seq, live, cur, allocated, dropped, True)
    if want_timeline:
        timeline.close(seq, (span_seq, span_max, span_ms, span_rss),
                       (low_seq, span_min, low_ms, low_rss), tag_list)
        frag.take(seq, live)
    if want_lifetimes:  # the never-freed blocks live to the last event
        for _, st, aseq, ams in live.values():
            _count(st[LIFE], bucket(seq - aseq))
            if clocked:
                _count(st[LIFE_MS], bucket(ms - ams))
    figures = Figures(
        reader, compute, stats, live, last_seq=seq, clocked=clocked, last_ms=ms, last_rss=rss,
        cur=cur, peak=peak, peak_seq=peak_seq, peak_blocks=peak_blocks, peak_ms=peak_ms,
        peak_rss=peak_rss, peak_rss_ms=peak_rss_ms, temporary=temps, temporary_bytes=temp_bytes,
        sizes=sizes, timeline=timeline if want_timeline else None, allocated=allocated,
        dropped=dropped,
        frag=frag if want_timeline else None, tag_rows=tag_rows, tag_list=tag_list)
    for acc in accumulators:
        acc.finish(figures)
    return figures


def run_path(path: str, accumulators: list[Accumulator]) -> Figures:
    """`run` on the dump at `path`, opened with the C library's own frees marked; a malformed
    dump raises the replay's `DumpError` (`diagnose`), as the leak report would."""
    collecting = gc.isenabled()
    gc.disable()  # no reference cycles are made; the collector would walk the live blocks
    try:
        with DumpReader(path, mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
            try:
                return run(reader, accumulators)
            except (ValueError, IndexError, KeyError, TypeError, DumpError):
                raise diagnose(path) from None
            except OSError as e:
                raise reader.read_error(e) from None
    finally:
        if collecting:
            gc.enable()


def diagnose(path: str) -> DumpError:
    """The exact `PATH:LINE: message` of a dump the pass failed on: the replay's checks."""
    with DumpReader(path, mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
        try:
            replay(reader)
        except DumpError as e:
            return e
    return DumpError(path, None, "a heap event the pass cannot read, which the leak report "
                     "reads: please report it")
