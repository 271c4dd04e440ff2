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
  is made of these alone, and the hot loop stays the hand-tuned one (lists for records, branches
  inlined: a call per event into each output would double the pass).
- moments: `first_moment` and `moment` take the live blocks after chosen events (the exports'
  snapshots of the heap over time): one comparison per line.
- `events`: `alloc` and `release` for each block made live or released, with its size, stack,
  event number and thread, and `record` for each `p` or `end` record (phases, `exec`): a call
  per event, for the outputs that keep per-block state of their own (the heap map, --growth,
  --by-tag and --phases).
"""

from __future__ import annotations

import gc

from . import nativepass
from .dumpfile import DumpError, DumpReader
from .dumpformat import CUSTOM, OPERATIONS, SHORT_WITH_ARGS, effect
from .families import SHORT_CXX
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
    _count,
    bucket,
    hooks,
    lifetime_masks,
)
from .replay import replay
from .rules import RUNTIME_FREE_FUNCTIONS

#: (2.5) `+c`, `+r`: read as the `e` records they stand for
_WITH_ARGS = frozenset(tag.encode() for tag in SHORT_WITH_ARGS)

__all__ = ["PARTS", "Accumulator", "Figures", "bucket", "diagnose", "run", "run_path"]

_OPS_B = {op.encode(): op for op in OPERATIONS}
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


def run(reader: DumpReader, accumulators: list[Accumulator]) -> Figures:
    """Read all of `reader`'s lines (its header checked) once, applying each heap event's
    effect and feeding `accumulators`; each one's `finish` is called at the end, in order.
    Raises `DumpError` (whose line may be wrong: the pass does not count the `t` records), or
    ValueError/IndexError/KeyError/TypeError for a malformed event: the caller finds the line
    with the replay's checks (`diagnose`)."""
    compute = frozenset().union(*(acc.parts for acc in accumulators))
    want_temporary = "temporary" in compute
    want_lifetimes = "lifetimes" in compute
    want_sizes = "sizes" in compute
    want_timeline = "timeline" in compute
    for acc in accumulators:
        acc.start(reader)
    if not compute and not any(acc.stacks for acc in accumulators):
        return run_lean(reader, accumulators, *_stops(accumulators, None, False))
    series = next((acc.series for acc in accumulators if acc.series is not None), None)
    if want_timeline and series is None:
        raise ValueError("the timeline part without its series")
    if compute <= NATIVE_PARTS and not any(acc.events or acc.first_moment()
                                           for acc in accumulators):
        figures = nativepass.figures(reader, compute, series)  # None: this loop's
        if figures is not None:
            for acc in accumulators:
                acc.finish(figures)
            return figures
    on_alloc, on_release, on_record = hooks(accumulators)
    node_ids = reader.node_ids
    other = reader.other
    thread = reader.thread
    clock_sample = reader.clock_sample
    short_cxx = SHORT_CXX
    expand = reader.expand
    with_args = _WITH_ARGS
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
    seq = threads = 0
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
    short_tid: bytes | None = None
    tid = b""  # the thread of `last`
    last: bytes | None = None  # its last operation's block when that was an allocation
    release: bytes | None
    p: bytes | None
    for line in reader.lines():
        if seq >= next_stop > 0:
            next_stop = stops(seq, live, cur, allocated, dropped, False)
        fl = line.split()
        tag = fl[0]
        if tag == b"t":  # `DumpReader.thread`, inlined: a third of the lines of a threaded dump
            if len(fl) != 2 or not fl[1].isdigit():
                thread(fl, seq)  # raises the error
            short_tid = fl[1]
            threads += 1  # counted in the reader's lines before its next definition
            continue
        if tag in with_args:  # (2.5) calloc's and realloc's short records: their `e` records
            fl = expand(fl, seq + 1, b"%d" % (seq + 1), short_tid)
            tag = b"e"
        if tag == b"+" or tag == b"-":
            seq += 1
            if tag == b"+":
                _, node, p, size = fl
                release = None
            else:
                _, node, release = fl
                p = None
            if short_tid != tid:  # the short records' thread (the last `t` record) takes over
                if short_tid is None:
                    raise ValueError(tag)  # before any `t` record
                if want_temporary:
                    last_alloc[tid] = last
                    last = last_alloc.get(short_tid)
                tid = short_tid
        elif tag == b"e":
            seq += 1
            if int(fl[1]) != seq:
                raise reader.seq_error(fl[1], seq)
            if fl[2] != tid:
                if want_temporary:
                    last_alloc[tid] = last
                    last = last_alloc.get(fl[2])
                tid = fl[2]
            op = fl[3]
            if op == b"malloc" or op == b"new" or op == b"new[]":
                _, _, _, _, node, p, size = fl  # the unpacking checks the field count
                release = None
            elif op == b"free" or op == b"delete" or op == b"delete[]":
                _, _, _, _, node, _, release = fl
                p = None
            elif op == b"realloc":  # as `effect` says, without its call
                _, _, _, _, node, p, release, size = fl
                if release == b"0x0":
                    release = None  # realloc(NULL, n): a malloc
                elif p == b"0x0" and int(size):
                    release = None  # failed: the block stays live
            elif op == b"calloc":
                _, _, _, _, node, p, nmemb, size = fl
                size = int(nmemb) * int(size)
                release = None
            else:
                node = fl[4]
                name = _OPS_B[op]
                if name in CUSTOM:
                    node_ids[node]
                    continue
                args = tuple(int(a, 16) if a[:2] == b"0x" else int(a) for a in fl[6:])
                if len(args) != len(OPERATIONS[name]):
                    raise ValueError(name)
                rel, new, size = effect(name, 0 if fl[5] == b"-" else int(fl[5], 16), args)
                release = fl[6] if rel is not None else None
                p = fl[5] if new is not None else b"0x0"
        elif tag in short_cxx:
            seq += 1
            if tag[0] == 43:  # `+n`, `+a`
                _, node, p, size = fl
                release = None
            else:
                _, node, release = fl
                p = None
            if short_tid != tid:
                if short_tid is None:
                    raise ValueError(tag)  # before any `t` record
                if want_temporary:
                    last_alloc[tid] = last
                    last = last_alloc.get(short_tid)
                tid = short_tid
        elif tag == b"c":
            reader._other += 1  # a line, as `DumpReader.other` counts it
            ms, rss = clock_sample(fl, seq)
            clocked = True
            if rss > peak_rss:
                peak_rss = rss
                peak_rss_ms = ms
            continue
        else:
            reader._other += threads  # its line number (an unknown tag's) counts them
            threads = 0
            rec = other(line, fl, seq)
            if tag == b"g" and not tagging and want_timeline:  # the first tag: the blocks
                tagging = True  # live so far are untagged
                untagged = tag_rows[-1] = [cur, seq, span_max if span_max >= 0 else cur, 0,
                                           cur if span_min == NO_LOW else span_min]
                tag_list.append(untagged)
            if rec is not None:
                seq += 1
                if rec[0] == b"p" and rec[2] == b"exec":  # the image is gone, and its blocks
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
            nid = node_ids[node]
            if nid < 0:  # the C library's own bookkeeping (tcache_thread_shutdown)
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
        size = int(size)
        if size < 0:
            raise ValueError(size)
        st = stats_get(node)  # by STACK as written: no look-up of its id
        if st is None:
            st = stats[node] = [0, 0, 0, 0, 0, 0, 0, 0, 0, {}, {}, {}, 0, abs(node_ids[node])]
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
            resize = tag == b"e" and fl[3] in _RESIZES
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
    reader._other += threads
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
        sizes=sizes, timeline=timeline if want_timeline else None,
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
