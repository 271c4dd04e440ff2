"""What the one pass (heappass.py) and its accumulators share: the `Accumulator` interface, the
`Figures` the pass hands them at the end, the layout of a stack's figures while the pass runs, and
the lifetimes' histogram keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .dumpfile import DumpReader

__all__ = ["AT_PEAK", "END", "LIFE_EXACT", "MOMENT_BLOCKS", "MOMENT_BY_NODE", "MOMENT_TOTALS",
           "NO_LOW", "PARTS", "Accumulator", "Figures", "Moment", "MomentsReference",
           "NativeRequest", "bucket", "hooks", "plan"]

#: what the pass can compute besides the peak, the allocations and the live blocks
PARTS = frozenset(("temporary", "lifetimes", "sizes", "timeline"))

#: what a moment holds besides its totals (`Accumulator.wanted_moments`; moments.h's MOM_
#: kinds): the live bytes and blocks by stack node, or the live blocks
MOMENT_TOTALS, MOMENT_BY_NODE, MOMENT_BLOCKS = range(3)
#: a moment's SEQ for the end of the dump, whatever its last event
END = -1
#: a moment's SEQ for the peak of the live heap, whenever it is (`Figures.peak_seq`): known at the
#: end, from the blocks live then and those the pass kept since the latest peak
AT_PEAK = -2

#: lifetimes below this are kept exactly; above it, to 6 significant bits (within 1/32)
LIFE_EXACT = 64
#: a span's lowest live heap before it has one
NO_LOW = 1 << 62

# the fields of a stack's list while the pass runs (a list: ~2x faster than attributes; the loop
# writes them as literals, a constant being faster than a global)
CUR, CUR_N, CHANGED, PEAK, PEAK_N, ALLOCS, ALLOC_BYTES, TEMP, TEMP_BYTES = range(9)
LIFE, LIFE_MS, FREED_BY, GONE, NODE = range(9, 14)
# GONE: blocks whose end is not a recorded release (dropped at an `exec`, or a block returned
# again while live): the frees are the allocations less them and the blocks live at the end.
# NODE: the stack node's id (the list is found by STACK as written, and from a live block)


#: the lifetimes `bucket` finds with one look-up in `lifetime_masks()`: those below 64 << 16
_MASKED = LIFE_EXACT << 16


def lifetime_masks() -> list[int]:
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


class Accumulator:
    """One output's share of the pass: what it needs (`parts`, `events`, moments) and what it
    does with it. It renders nothing; its module renders what it accumulated."""

    #: the parts of `PARTS` whose figures it reads in `finish`
    parts: frozenset[str] = frozenset()
    #: whether it reads the views' figures of each stack beyond its allocations (its live and
    #: peak figures, `Figures.peak...`): the views' loop; without parts nor these, the lean one
    stacks: bool = False
    #: whether the pass calls `alloc`, `release` and `record`
    events: bool = False
    #: without `events`: whether the pass calls `record` (the `p` and `end` records alone); the
    #: library's pass then calls it after its run, in the records' order, before `finish`
    records: bool = False
    #: with `events`: the accumulators of the library's (nativepass.NATIVE_VIEWS) that do their
    #: work, whose tables `finish` then reads in `Figures.views` (the pass calls no `alloc`,
    #: `release` nor `record`); the Python pass calls them when it runs
    native: frozenset[str] = frozenset()
    #: with the "timeline" part: the series the pass fills (views/series.py's `Timeline` and
    #: `FragSamples`), the first accumulator's that has them
    series: tuple[Any, Any] | None = None

    def start(self, reader: DumpReader) -> None:
        """The pass begins on `reader` (its definitions are read as the pass goes)."""

    def alloc(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
              resize: bool) -> None:
        """Event `seq` of thread `tid` made block `ptr` (as written) of `size` bytes live,
        allocated at stack `node`; `resize`: by a realloc, after the `release` of its old block.
        A `ptr` still live is a block whose release the dump does not have: it is replaced."""

    def release(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
                made: bytes | None, last: bytes | None) -> None:
        """Event `seq` released live block `ptr` of `size` bytes allocated at stack `node`;
        `made`: the block the same call makes live next (a realloc), or None; `last` (with the
        `temporary` part): the block the thread's previous heap operation made, None when that
        one made none."""

    def record(self, seq: int, rec: list[bytes]) -> None:
        """A `p` or `end` record (`DumpReader.other`), after its effect (an `exec` drops every
        live block: the accumulator drops its own)."""

    def wanted_moments(self) -> list[tuple[int, int]] | None:
        """The moments it wants, known before the pass: (SEQ, a `MOMENT_` kind) each, the live
        heap after event SEQ (0: before the first; `END`: after the last; `AT_PEAK`: after the
        peak's event, `Figures.peak_seq`), handed to `take` before `finish` (a SEQ past the
        last event is never taken). None: none, or chosen as the pass goes (`first_moment`,
        `moment`: heappass.py's loop only)."""
        return None

    def take(self, index: int, moment: Moment) -> None:
        """Its moment `index` (of `wanted_moments`), taken."""

    def first_moment(self) -> int:
        """The event after which `moment` is first wanted (0: never)."""
        return 0

    def moment(self, seq: int, live: dict, cur: int, allocated: int,  # type: ignore[type-arg]
               dropped: int) -> int:
        """The live blocks after event `seq` (pointer as written -> (size, the stack's figures,
        SEQ allocated, ms), the figures' `NODE` being the stack node), `cur` bytes in all,
        `allocated` bytes allocated so far, `dropped` of them dropped while live (returned
        again without a release); returns the next event wanted (0: none). Called at the end
        too when the last event is wanted."""
        return 0

    def finish(self, figures: Figures) -> None:
        """The pass is over (the reader still open: symbolise here)."""


@dataclass
class Moment:
    """The live heap after event `seq`: `cur` bytes, `allocated` bytes allocated so far,
    `dropped` of them dropped while live (returned again without a release); with
    `MOMENT_BY_NODE`, (stack node, live blocks, live bytes) each, the nodes in the order of their
    first live block by SEQ allocated; with `MOMENT_BLOCKS`, (address, size, stack node, its
    thread's innermost tag when allocated, None: untagged) each, by address."""

    seq: int
    cur: int
    allocated: int
    dropped: int
    by_node: list[tuple[int, int, int]] | None = None
    blocks: list[tuple[int, int, int, str | None]] | None = None


@dataclass
class Figures:
    """What the pass computed inline: the views' figures (views/stream.py makes them a
    `Profile`), for the accumulators' `finish`."""

    reader: DumpReader
    computed: frozenset[str]
    #: STACK as written -> its figures (a list: `CUR`, `PEAK`, ... `NODE`)
    stacks: dict[bytes, list]  # type: ignore[type-arg]
    #: pointer as written -> (size, its stack's figures, SEQ allocated, ms)
    live: dict[bytes, tuple]  # type: ignore[type-arg]
    last_seq: int = 0
    clocked: bool = False
    last_ms: int = 0
    last_rss: int = 0
    cur: int = 0
    peak: int = 0
    peak_seq: int = 0
    peak_blocks: int = 0
    peak_ms: int = 0
    peak_rss: int = 0
    peak_rss_ms: int | None = None
    temporary: int = 0
    temporary_bytes: int = 0
    sizes: dict[int, int] = field(default_factory=dict)
    #: the timeline's series (views/series.py) and each tag's row, when computed
    timeline: object = None
    frag: object = None
    tag_rows: dict[int, list[int]] = field(default_factory=dict)
    tag_list: list[list[int]] = field(default_factory=list)
    #: the library's tables of `Accumulator.native` (nativepass.py's `_tables`), or None when the
    #: accumulators' events were called
    views: dict[str, Any] | None = None
    #: the moments of `plan` taken, each with its index there, in its order (the library's pass;
    #: heappass.py's loop hands them to `take` as it goes)
    taken: list[tuple[int, Moment]] = field(default_factory=list)
    #: bytes allocated, and dropped while live (as `Moment`'s), by heappass.py's loop
    allocated: int = 0
    dropped: int = 0
    #: the `p` and `end` records (SEQ, fields), when the library's pass read the dump and an
    #: accumulator takes `records` (heappass.py's loops call `record` as they go)
    records: list[tuple[int, list[bytes]]] = field(default_factory=list)


def hooks(accumulators: list[Accumulator]) -> tuple[list, list, list]:  # type: ignore[type-arg]
    """The `alloc`, `release` and `record` methods of the accumulators that take `events` (and
    the `record` of those that take `records`)."""
    hooked = [acc for acc in accumulators if acc.events]
    return ([acc.alloc for acc in hooked], [acc.release for acc in hooked],
            [acc.record for acc in accumulators if acc.events or acc.records])


def plan(accumulators: list[Accumulator]) -> list[tuple[int, int, Accumulator, int]]:
    """The moments the accumulators declared (`wanted_moments`), in the order the pass takes
    them: by SEQ, then as declared (the end's last): (SEQ, kind, the accumulator, its index)
    each."""
    wanted = []
    for acc in accumulators:
        for i, (seq, kind) in enumerate(acc.wanted_moments() or ()):
            wanted.append((seq, kind, acc, i))
    wanted.sort(key=lambda w: (w[0] < 0, max(w[0], 0)))  # END and AT_PEAK at the end
    return wanted


class MomentsReference(Accumulator):
    """The moments of `plan` in heappass.py's loop (the reference for the library's, moments.c):
    taken from the loop's live blocks (pointer as written -> (size, its stack's figures, SEQ
    allocated, ...)), with each block's tag kept by `alloc` when a moment wants the blocks; at
    `AT_PEAK`, from its own live blocks and those released since the latest peak, which it keeps."""

    def __init__(self, wanted: list[tuple[int, int, Accumulator, int]]) -> None:
        self.wanted = wanted
        self.at = 0
        self.peak = any(seq == AT_PEAK for seq, _, _, _ in wanted)
        self.events = self.peak or any(kind == MOMENT_BLOCKS for _, kind, _, _ in wanted)
        self.tags: dict[bytes, str | None] = {}
        self.reader: DumpReader | None = None
        #: with a moment at the peak: pointer -> (size, stack node, SEQ allocated, tag), the
        #: bytes live, allocated and dropped, the totals after the latest peak's event, the
        #: blocks live then and released since
        self.live: dict[bytes, tuple[int, int, int, str | None]] = {}
        self.cur = self.top = self.allocated = self.dropped = 0
        self.at_peak = Moment(0, 0, 0, 0)
        self.gone: list[tuple[bytes, tuple[int, int, int, str | None]]] = []

    def start(self, reader: DumpReader) -> None:
        self.reader = reader

    def alloc(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
              resize: bool) -> None:
        tag = self.tags[ptr] = self.reader.tag_of(int(tid))  # type: ignore[union-attr]
        if self.peak:
            old = self.live.get(ptr)
            if old is not None:  # returned again while live
                self._gone(ptr, old)
                self.cur -= old[0]
                self.dropped += old[0]
            self.live[ptr] = (size, node, seq, tag)
            self.cur += size
            self.allocated += size
            if self.cur > self.top:
                self.top = self.cur
                self.at_peak = Moment(seq, self.cur, self.allocated, self.dropped)
                self.gone.clear()

    def _gone(self, ptr: bytes, block: tuple[int, int, int, str | None]) -> None:
        if self.top and block[2] <= self.at_peak.seq:
            self.gone.append((ptr, block))

    def release(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
                made: bytes | None, last: bytes | None) -> None:
        self.tags.pop(ptr, None)
        old = self.live.pop(ptr, None) if self.peak else None
        if old is not None:
            self._gone(ptr, old)
            self.cur -= old[0]

    def record(self, seq: int, rec: list[bytes]) -> None:
        if rec[0] == b"p" and rec[2] == b"exec":
            self.tags.clear()
            for ptr, block in self.live.items():
                self._gone(ptr, block)
            self.live.clear()
            self.cur = 0

    def first_moment(self) -> int:
        return self.moment(0, {}, 0, 0, 0) if self.wanted else 0

    def finish(self, figures: Figures) -> None:  # the end's (this one's `finish` comes first)
        seq = figures.last_seq
        self.moment(seq, figures.live, figures.cur, figures.allocated, figures.dropped)
        while self.at < len(self.wanted) and self.wanted[self.at][0] >= 0:
            self.at += 1  # past the last event: never taken
        self.moment(seq, figures.live, figures.cur, figures.allocated, figures.dropped, True)

    def moment(self, seq: int, live: dict, cur: int, allocated: int,  # type: ignore[type-arg]
               dropped: int, end: bool = False) -> int:
        wanted = self.wanted
        while self.at < len(wanted) and (0 <= wanted[self.at][0] <= seq
                                         or end and wanted[self.at][0] < 0):
            at, kind, acc, index = wanted[self.at]
            self.at += 1
            if at == AT_PEAK:
                m = Moment(self.at_peak.seq, self.at_peak.cur, self.at_peak.allocated,
                           self.at_peak.dropped)
                blocks = [(p, b) for p, b in self.live.items()
                          if self.top and b[2] <= m.seq] + self.gone
            else:
                m = Moment(seq, cur, allocated, dropped)
                tags = self.tags
                blocks = [(p, (b[0], b[1][NODE], b[2], tags.get(p))) for p, b in live.items()]
            if kind == MOMENT_BY_NODE:
                rows: dict[int, list[int]] = {}
                for _, block in sorted(blocks, key=lambda pb: pb[1][2]):
                    row = rows.setdefault(block[1], [0, 0])
                    row[0] += 1
                    row[1] += block[0]
                m.by_node = [(node, n, nbytes) for node, (n, nbytes) in rows.items()]
            elif kind == MOMENT_BLOCKS:
                m.blocks = sorted((int(p, 16), b[0], b[1], b[3]) for p, b in blocks)
            acc.take(index, m)
        return wanted[self.at][0] if self.at < len(wanted) and wanted[self.at][0] >= 0 else 0


class NativeRequest:
    """What the library's pass is asked for by a set of accumulators (`native_request`): its
    `args` after the reader (nativepass.figures'), and the delivery of its figures to them."""

    def __init__(self, accumulators: list[Accumulator], compute: frozenset[str],
                 series: tuple[Any, Any] | None, views: frozenset[str],
                 wanted: list[tuple[int, int, Accumulator, int]]) -> None:
        self.accumulators = accumulators
        # the native accumulators' `p` and `end` records (their events are the library's)
        self.recorders = [acc.record for acc in accumulators if acc.records and not acc.events]
        self.wanted = wanted
        self.args = (compute, series, views, wanted, bool(self.recorders))

    def deliver(self, figures: Figures) -> None:
        """The records, the moments taken and the figures handed to the accumulators."""
        for seq, rec in figures.records:
            for hook in self.recorders:
                hook(seq, rec)
        for i, moment in figures.taken:
            acc, index = self.wanted[i][2:]
            acc.take(index, moment)
        for acc in self.accumulators:
            acc.finish(figures)
