"""The series over time of the views' pass (stream.py): the live heap's highest value in each span
of events (with the RSS, and each tag's live bytes at that moment), and the fragmentation of the
live blocks, sampled.

The fragmentation is heapmap.py's, over the whole heap: the free runs are the gaps between the
glibc chunks of the live blocks in address order (a gap over `REGION_GAP` separates two regions
and is no free run), and the figure is (the free bytes of all regions - the largest free run of
any region) / the bytes of all regions (chunks and free runs). One figure for all regions because
a request can be served from any of them: the largest run anywhere is the largest block that fits
without the heap growing; the free bytes outside it are the heap's crumbs, weighed against the
whole heap (a heap 99.96% used is at most 0.04% fragmented, whatever its crumbs' sizes).

A sample sorts the live blocks (O(L log L) for L live blocks, in C), so samples are taken every
`width` events (the width doubling whenever 2 x `points` samples were kept, every other one then
dropped) but, from `FEW` live blocks on, never more often than every `SPACING` x L events: the
sampling costs about a tenth of the pass whatever the number of live blocks (docs/views.md,
"timeline").
"""

from __future__ import annotations

from itertools import accumulate, repeat
from operator import add, itemgetter, sub

from ..heapmap import REGION_GAP, chunk_of, fragmentation
from ..passapi import NO_LOW

__all__ = ["NO_LOW", "FragSamples", "Timeline", "free_runs", "fragmentation"]


class _ChunkEnd(dict):  # type: ignore[type-arg]
    """size -> the bytes from a block's start to its chunk's end (heapmap.chunk_of), memoised:
    a run has few distinct sizes."""

    def __missing__(self, size: int) -> int:
        lo, hi = chunk_of(0, size)
        self[size] = end = hi - lo
        return end


_END = _ChunkEnd()
#: the fewest events between two samples, per live block: a sample costs about 0.25 us a live
#: block, so these cost at most about 0.03 us an event (0.08 us with the others, measured on
#: scripts/bench-analyzer.py's 1M-event dump: a tenth of the pass)
SPACING = 8
#: below this many live blocks a sample costs little (about 20 us): one every `width` events
FEW = 64
_SIZE = itemgetter(0)


def free_runs(live: dict) -> tuple[int, int, int]:  # type: ignore[type-arg]
    """(free bytes, largest free run, heap bytes: the chunks and the free runs) of the live
    blocks `live` (pointer as written, hex -> a tuple whose first item is the size), over all
    regions."""
    if not live:
        return 0, 0, 0
    pairs = sorted(zip(map(int, live, repeat(16)), map(_SIZE, live.values()), strict=True))
    addrs, sizes = zip(*pairs, strict=True)
    lengths = list(map(_END.__getitem__, sizes))
    ends = accumulate(map(add, addrs, lengths), max)
    gaps = [g for g in map(sub, addrs[1:], ends) if 0 < g <= REGION_GAP]
    free = sum(gaps)
    return free, max(gaps, default=0), sum(lengths) + free


#: one extreme of a span: (SEQ, live heap bytes, ms, RSS, the tags' live bytes at SEQ)
Extreme = tuple[int, int, int, int, tuple[int, ...]]


class Timeline:
    """The live heap's highest and lowest values in each span of `width` events, so that a
    line through the points rises to every peak and falls to every trough (a whole free phase
    is not one diagonal from its peak to the next allocation); spans double in width whenever
    there are 2 x `points` of them, so memory stays bounded. A span is [index, HIGH, LOW]
    (`Extreme`s)."""

    def __init__(self, points: int) -> None:
        self.limit = 2 * max(points, 1)
        self.width = 1
        self.spans: list[list] = []  # type: ignore[type-arg]

    def close(self, seq: int, high: tuple[int, int, int, int], low: tuple[int, int, int, int],
              rows: list[list[int]]) -> int:
        """Close the span whose highest and lowest points are `high` and `low` (SEQ, bytes, ms,
        RSS; no span when `high`'s bytes are -1), the tag rows `rows` giving their tags' bytes
        (stream.py's: live bytes, SEQ changed, bytes at the high, index, bytes at the low);
        returns the SEQ at which the span that event `seq` opens ends."""
        if high[1] >= 0:
            hi, lo = high[0], low[0]
            self.spans.append([
                hi // self.width,
                (*high, tuple([r[0] if r[1] <= hi else r[2] for r in rows])),
                (*low, tuple([r[0] if r[1] <= lo else r[4] for r in rows]))])
            if len(self.spans) >= self.limit:
                self.merge()
        return (seq // self.width + 1) * self.width

    def merge(self) -> None:
        self.width *= 2
        merged: list[list] = []  # type: ignore[type-arg]
        for span in self.spans:
            span[0] //= 2
            if merged and merged[-1][0] == span[0]:
                last = merged[-1]
                if span[1][1] > last[1][1]:
                    last[1] = span[1]
                if span[2][1] < last[2][1]:
                    last[2] = span[2]
            else:
                merged.append(span)
        self.spans = merged

    def points(self, points: int, end: tuple[int, int, int, int], end_tags: tuple[int, ...],
               ) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, ...]]]:
        """At most `points` points: each span's highest and lowest in order (the lowest left
        out when a single span is all `points` allows), the last being `end` (SEQ, bytes, ms,
        RSS at the end) when the heap changed after them; and each point's tags' bytes (as many
        as `end_tags`, 0 for a tag not seen yet; before the first tag, all untagged)."""
        while len(self.spans) > 1 and 2 * len(self.spans) + 1 > points:
            self.merge()
        lows = 2 * len(self.spans) + 1 <= points
        chosen: list[Extreme] = []
        for _, high, low in self.spans:
            pair = sorted((high, low) if lows and low[0] != high[0] else (high,))
            chosen += pair
        out = [pt[:4] for pt in chosen]
        tags = [pt[4] for pt in chosen]
        if not out or out[-1][0] < end[0]:
            out.append(end)
            tags.append(end_tags)
        width = len(end_tags)  # a point before the first tag: all its bytes are untagged
        return out, [(t or (pt[1],)) + (0,) * (width - len(t or (0,))) if width else ()
                     for pt, t in zip(out, tags, strict=True)]


class FragSamples:
    """The fragmentation samples: (SEQ, free bytes, largest free run, heap bytes) after event
    SEQ, every
    `width` events (`SPACING` x the live blocks at least, from `FEW` of them on); at most
    2 x `points` kept (the width doubles and every other sample goes). Not `wanted`: none is
    taken (a series read for its tags' bytes alone)."""

    def __init__(self, points: int, wanted: bool = True) -> None:
        self.limit = 2 * max(points, 1)
        self.width = 1
        self.wanted = wanted
        self.samples: list[tuple[int, int, int, int]] = []

    def take(self, seq: int, live: dict) -> int:  # type: ignore[type-arg]
        """Sample the live blocks after event `seq`; returns the SEQ of the next sample (0:
        none, when not `wanted`)."""
        if not self.wanted:
            return 0
        samples = self.samples
        if samples and samples[-1][0] == seq:
            return seq + self.width
        samples.append((seq, *free_runs(live)))
        if len(samples) >= self.limit:
            self.width *= 2
            self.samples = samples[::2]
        n = len(live)
        return seq + (self.width if n < FEW else max(self.width, SPACING * n))
