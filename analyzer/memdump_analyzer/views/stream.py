"""The one streaming pass behind every view (docs/views.md): per allocating stack, per thread and
per size, what the views need, in memory bounded by the live blocks and the distinct stacks.

What is kept:

- per allocating stack (`StackStats`): its live bytes and blocks now and at the peak (a lazy
  snapshot: a stack's figures are copied when it changes for the first time after a new peak, so
  that a peak costs nothing however many stacks there are), its allocations and their bytes, its
  temporary allocations (heaptrack's definition: freed with no other heap operation of the same
  thread between the allocation and the free), and its blocks' lifetimes, in events and, when the
  dump has clock samples (`c` records, format 2.2), in milliseconds, with the stacks that freed
  them;
- per size, how many blocks were allocated;
- the live heap over time, as at most 2 x `points` buckets of equal spans of events, each holding
  its highest live heap (so the peak is exact) and its lowest (so a free phase falls), with the
  time and the RSS of the last clock sample
  before it, and, when the dump has tags (`g` records), each tag's live bytes at that moment (a
  lazy snapshot, as the stacks' peak figures: a tag's bytes are copied when it changes for the
  first time after the span's highest point);
- the fragmentation of the live blocks, sampled (series.py).

The peak, each stack's live, peak and allocated figures are always computed; the threads' last
operations (`temporary`), the lifetimes, the sizes and the timeline's spans only when asked for
(`PARTS`: a view asks for what it shows), each adding 5 to 25% to the pass.

The semantics are the replay's (replay.py): the C library's own frees (a stack of
`RUNTIME_FREE_FUNCTIONS`) release nothing, a release of a pointer that is not live does nothing
(the leak report lists it as an error), an `exec` drops every live block, custom blocks
(`custom_alloc`) are not heap blocks and are left out. A `realloc` that moves or resizes a block
is a release of the old block (by the `realloc`'s stack) and an allocation of the new one, as
heaptrack counts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..dumpfile import DumpReader
from ..dumpformat import CUSTOM, OPERATIONS, effect
from ..families import SHORT_CXX
from ..tagphases import UNTAGGED
from .series import NO_LOW, FragSamples, Timeline

__all__ = ["LIFE_EXACT", "PARTS", "Profile", "StackStats", "bucket", "profile"]

#: what the pass can compute besides the peak, the allocations and the live blocks
PARTS = frozenset(("temporary", "lifetimes", "sizes", "timeline"))

#: lifetimes below this are kept exactly; above it, to 6 significant bits (within 1/32)
LIFE_EXACT = 64
_OPS_B = {op.encode(): op for op in OPERATIONS}

# the fields of a stack's list while the pass runs (a list: ~2x faster than attributes; the loop
# writes them as literals, a constant being faster than a global)
_CUR, _CUR_N, _CHANGED, _PEAK, _PEAK_N, _ALLOCS, _ALLOC_BYTES, _TEMP, _TEMP_BYTES = range(9)
_LIFE, _LIFE_MS, _FREED_BY, _GONE, _NODE = range(9, 14)
# _GONE: blocks whose end is not a recorded release (dropped at an `exec`, or a block returned
# again while live): the frees are the allocations less them and the blocks live at the end.
# _NODE: the stack node's id (the list is found by STACK as written, and from a live block)


#: the lifetimes `bucket` finds with one look-up in `_masks()`: those below 64 << 16
_MASKED = LIFE_EXACT << 16


def _masks() -> list[int]:
    """value >> 6 -> the mask that keeps 6 significant bits of a value below `_MASKED` (all of
    a value below `LIFE_EXACT`): `bucket` without its call, for the pass."""
    return [~((1 << v.bit_length()) - 1) for v in range(1 << 16)]


def _count(hist: dict[int, int], key: int) -> None:
    hist[key] = hist.get(key, 0) + 1


def bucket(value: int) -> int:
    """The histogram key of a lifetime: itself below `LIFE_EXACT`, else rounded down to 6
    significant bits (so a stack's histogram has at most 32 keys per power of two)."""
    if value < LIFE_EXACT:
        return value
    shift = value.bit_length() - 6
    return (value >> shift) << shift


@dataclass
class StackStats:
    """What one allocating stack did over the whole dump."""

    node: int
    live_bytes: int
    live_blocks: int
    peak_bytes: int
    peak_blocks: int
    allocations: int
    allocated_bytes: int
    temporary: int
    temporary_bytes: int
    #: blocks released; blocks never released are in the lifetimes, living to the end
    frees: int
    #: lifetime in events -> blocks (`bucket`), the never-freed blocks included
    lifetimes: dict[int, int]
    #: lifetime in milliseconds -> blocks; empty without clock samples
    lifetimes_ms: dict[int, int]
    #: stack node of the release -> blocks it released
    freed_by: dict[int, int]


@dataclass
class Profile:
    """What the pass left: the figures every view is made of."""

    stacks: dict[int, StackStats]
    last_seq: int = 0
    #: the dump has clock samples (`c` records): times are in milliseconds too
    clocked: bool = False
    last_ms: int = 0
    peak_bytes: int = 0
    peak_blocks: int = 0
    peak_seq: int | None = None
    peak_ms: int | None = None
    live_bytes: int = 0
    live_blocks: int = 0
    allocations: int = 0
    allocated_bytes: int = 0
    temporary: int = 0
    temporary_bytes: int = 0
    #: requested size -> blocks allocated
    sizes: dict[int, int] = field(default_factory=dict)
    #: the parts of `PARTS` computed: the others' figures are empty or 0
    computed: frozenset[str] = frozenset()
    #: [SEQ, live heap bytes, ms, RSS bytes] at the highest and the lowest live heap of each
    #: span of events, in order
    timeline: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: the tags (memdump_api.h) in the order they were first used, "(untagged)" first; empty
    #: when the dump has none
    tag_names: list[str] = field(default_factory=list)
    #: each timeline point's live bytes per tag (in `tag_names`' order)
    timeline_tags: list[tuple[int, ...]] = field(default_factory=list)
    #: (SEQ, free bytes, largest free run) of the live blocks, sampled (series.py), the end's last
    frag: list[tuple[int, int, int, int]] = field(default_factory=list)
    peak_rss: int = 0
    peak_rss_ms: int | None = None


def profile(reader: DumpReader, *, points: int = 200,
            compute: frozenset[str] = PARTS) -> Profile:
    """Read all of `reader`'s lines (its header checked) and compute the views' figures: the
    peak, allocations and live figures always, and the `compute` parts of `PARTS` (each adds
    5 to 25% to the pass: a view asks only for its own).
    Raises `DumpError` (whose line may be wrong: the pass does not count the `t` records), or
    ValueError/IndexError/KeyError for a malformed event: the caller finds the line with the
    replay's checks (`views.load`)."""
    want_temporary = "temporary" in compute
    want_lifetimes = "lifetimes" in compute
    want_sizes = "sizes" in compute
    want_timeline = "timeline" in compute
    node_ids = reader.node_ids
    other = reader.other
    thread = reader.thread
    clock_sample = reader.clock_sample
    short_cxx = SHORT_CXX
    live: dict[bytes, tuple] = {}  # type: ignore[type-arg]  # ptr -> (size, stats, SEQ, ms)
    live_pop = live.pop
    live_setdefault = live.setdefault
    stats: dict[bytes, list] = {}  # type: ignore[type-arg]  # STACK as written -> its figures
    masks = _masks() if want_lifetimes else []
    stats_get = stats.get
    sizes: dict[int, int] = {}
    sizes_get = sizes.get
    last_alloc: dict[bytes, bytes | None] = {}  # thread -> its last operation's block, if alloc
    timeline = Timeline(points)
    frag = FragSamples(points)
    frag_next = 1 if want_timeline else -1  # the SEQ of the next fragmentation sample
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
        if seq >= frag_next > 0:
            frag_next = frag.take(seq, live)
        fl = line.split()
        tag = fl[0]
        if tag == b"t":  # `DumpReader.thread`, inlined: a third of the lines of a threaded dump
            if len(fl) != 2 or not fl[1].isdigit():
                thread(fl, seq)  # raises the error
            short_tid = fl[1]
            continue
        if tag == b"+":
            seq += 1
            _, node, p, size = fl
            release = None
            if short_tid != tid:
                if short_tid is None:
                    raise ValueError(tag)  # before any `t` record
                if want_temporary:
                    last_alloc[tid] = last
                    last = last_alloc.get(short_tid)
                tid = short_tid
        elif tag == b"-":
            seq += 1
            _, node, release = fl
            p = None
            if short_tid != tid:
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
            ms, rss = clock_sample(fl, seq)
            clocked = True
            if rss > peak_rss:
                peak_rss = rss
                peak_rss_ms = ms
            continue
        else:
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
    timeline.close(seq, (span_seq, span_max, span_ms, span_rss),
                   (low_seq, span_min, low_ms, low_rss), tag_list)
    result = Profile(stacks={}, last_seq=seq, clocked=clocked, last_ms=ms,
                     computed=frozenset(compute))
    _finish(result, stats, live, peak_seq)
    if want_timeline:
        frag.take(seq, live)
        result.frag = frag.samples
        result.timeline, result.timeline_tags = timeline.points(
            points, (seq, cur, ms, rss), tuple(r[0] for r in tag_list))
        names = {row[3]: ident for ident, row in tag_rows.items()}
        result.tag_names = [_tag_name(reader, names[i]) for i in range(len(tag_list))]
    result.peak_bytes = peak
    result.peak_blocks = peak_blocks
    result.peak_seq = peak_seq or None
    result.peak_ms = peak_ms if peak_seq and clocked else None
    result.live_bytes = cur
    result.live_blocks = len(live)
    result.allocations = sum(st.allocations for st in result.stacks.values())
    result.allocated_bytes = sum(st.allocated_bytes for st in result.stacks.values())
    result.temporary = temps
    result.temporary_bytes = temp_bytes
    result.sizes = sizes
    result.peak_rss = peak_rss
    result.peak_rss_ms = peak_rss_ms
    return result


def _finish(result: Profile, stats: dict[bytes, list], live: dict,  # type: ignore[type-arg]
            peak_seq: int) -> None:
    """The stacks' figures at the end: the never-freed blocks live to the last event."""
    seq, ms, clocked = result.last_seq, result.last_ms, result.clocked
    for _, st, aseq, ams in live.values() if result.computed >= {"lifetimes"} else ():
        _count(st[_LIFE], bucket(seq - aseq))
        if clocked:
            _count(st[_LIFE_MS], bucket(ms - ams))
    for st in stats.values():
        nid = st[_NODE]
        at_peak = st[_CHANGED] <= peak_seq
        result.stacks[nid] = StackStats(
            node=nid,
            live_bytes=st[_CUR],
            live_blocks=st[_CUR_N],
            peak_bytes=st[_CUR] if at_peak else st[_PEAK],
            peak_blocks=st[_CUR_N] if at_peak else st[_PEAK_N],
            allocations=st[_ALLOCS],
            allocated_bytes=st[_ALLOC_BYTES],
            temporary=st[_TEMP],
            temporary_bytes=st[_TEMP_BYTES],
            frees=st[_ALLOCS] - st[_CUR_N] - st[_GONE],
            lifetimes=st[_LIFE],
            lifetimes_ms=st[_LIFE_MS],
            freed_by={abs(k): v for k, v in st[_FREED_BY].items()},
        )


def _tag_name(reader: DumpReader, ident: int) -> str:
    """A tag's name as `--by-tag` shows it (tagphases.py)."""
    if ident < 0:
        return UNTAGGED
    return reader.strings.get(ident, "") or '""'

