"""The series over time of the views' pass (stream.py): the live heap's highest value in each span
of events (with the RSS, and each tag's live bytes at that moment), and the fragmentation of the
live blocks, sampled.

The fragmentation is heapmap.py's, over the whole heap: the free runs are the gaps between the
glibc chunks of the live blocks in address order (a gap over `REGION_GAP` separates two regions
and is no free run), and the figure is 1 - the largest free run of any region / the free bytes of
all regions. One figure for all regions because a request can be served from any of them: the
largest run anywhere is the largest block that fits without the heap growing, and the free bytes
everywhere are what the heap holds unused. A region of one mmapped block has no free byte and
changes nothing.

A sample sorts the live blocks (O(L log L) for L live blocks, in C), so samples are taken every
`width` events (the width doubling whenever 2 x `points` samples were kept, every other one then
dropped) but, from `FEW` live blocks on, never more often than every `SPACING` x L events: the
sampling costs about a tenth of the pass whatever the number of live blocks (docs/views.md,
"timeline").
"""

from __future__ import annotations

from itertools import accumulate, repeat
from operator import add, itemgetter, sub

from ..heapmap import REGION_GAP, chunk_of

__all__ = ["FragSamples", "Timeline", "free_runs", "fragmentation"]


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


def free_runs(live: dict) -> tuple[int, int]:  # type: ignore[type-arg]
    """(free bytes, largest free run) of the live blocks `live` (pointer as written, hex ->
    a tuple whose first item is the size), over all regions."""
    if len(live) < 2:
        return 0, 0
    pairs = sorted(zip(map(int, live, repeat(16)), map(_SIZE, live.values()), strict=True))
    addrs, sizes = zip(*pairs, strict=True)
    ends = accumulate(map(add, addrs, map(_END.__getitem__, sizes)), max)
    gaps = [g for g in map(sub, addrs[1:], ends) if 0 < g <= REGION_GAP]
    return sum(gaps), max(gaps, default=0)


def fragmentation(free: int, largest: int) -> float:
    """1 - largest free run / free bytes; 0 without free bytes."""
    return 1 - largest / free if free else 0.0


class Timeline:
    """The live heap's highest value in each span of `width` events; spans double in width
    whenever there are 2 x `points` of them, so memory stays bounded. A span is [index, SEQ,
    bytes, ms, RSS, the tags' live bytes at SEQ]."""

    def __init__(self, points: int) -> None:
        self.limit = 2 * max(points, 1)
        self.width = 1
        self.spans: list[list] = []  # type: ignore[type-arg]

    def add(self, index: int, seq: int, nbytes: int, ms: int, rss: int,
            tags: tuple[int, ...] = ()) -> int:
        """Close a span; returns the SEQ at which the next one ends."""
        spans = self.spans
        spans.append([index, seq, nbytes, ms, rss, tags])
        if len(spans) >= self.limit:
            self.merge()
        return (seq // self.width + 1) * self.width

    def merge(self) -> None:
        self.width *= 2
        merged: list[list] = []  # type: ignore[type-arg]
        for span in self.spans:
            span[0] //= 2
            if merged and merged[-1][0] == span[0]:
                last = merged[-1]
                if span[2] > last[2]:
                    last[1:] = span[1:]
            else:
                merged.append(span)
        self.spans = merged

    def points(self, points: int, end: tuple[int, int, int, int], end_tags: tuple[int, ...],
               ) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, ...]]]:
        """At most `points` points, the last being `end` (SEQ, bytes, ms, RSS at the end) when
        the heap changed after the last span's highest point; and each point's tags' bytes
        (as many as `end_tags`, 0 for a tag not seen yet; before the first tag, all untagged)."""
        while len(self.spans) > points - 1:
            self.merge()
        out = [(s[1], s[2], s[3], s[4]) for s in self.spans]
        tags = [s[5] for s in self.spans]
        if not out or out[-1][0] < end[0]:
            out.append(end)
            tags.append(end_tags)
        width = len(end_tags)  # a point before the first tag: all its bytes are untagged
        return out, [(t or (pt[1],)) + (0,) * (width - len(t or (0,))) if width else ()
                     for pt, t in zip(out, tags, strict=True)]


class FragSamples:
    """The fragmentation samples: (SEQ, free bytes, largest free run) after event SEQ, every
    `width` events (`SPACING` x the live blocks at least, from `FEW` of them on); at most
    2 x `points` kept (the width doubles and every other sample goes)."""

    def __init__(self, points: int) -> None:
        self.limit = 2 * max(points, 1)
        self.width = 1
        self.samples: list[tuple[int, int, int]] = []

    def take(self, seq: int, live: dict) -> int:  # type: ignore[type-arg]
        """Sample the live blocks after event `seq`; returns the SEQ of the next sample."""
        samples = self.samples
        if samples and samples[-1][0] == seq:
            return seq + self.width
        free, largest = free_runs(live)
        samples.append((seq, free, largest))
        if len(samples) >= self.limit:
            self.width *= 2
            self.samples = samples[::2]
        n = len(live)
        return seq + (self.width if n < FEW else max(self.width, SPACING * n))
