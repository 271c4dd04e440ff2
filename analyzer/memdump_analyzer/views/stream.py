"""The figures every view is made of (docs/views.md), computed inline by the one pass
(heappass.py): per allocating stack, per thread and per size, what the views need, in memory
bounded by the live blocks and the distinct stacks.

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

The pass is heappass.py's: its loop computes these figures inline (the views' accumulator,
`ProfileOutput`, registers the parts it wants and makes a `Profile` of the pass's `Figures`), with
the semantics of the replay that heappass.py states.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..dumpfile import DumpReader
from ..passapi import (
    ALLOC_BYTES,
    ALLOCS,
    CHANGED,
    CUR,
    CUR_N,
    FREED_BY,
    GONE,
    LIFE,
    LIFE_EXACT,
    LIFE_MS,
    NODE,
    PARTS,
    PEAK,
    PEAK_N,
    TEMP,
    TEMP_BYTES,
    Accumulator,
    Figures,
    bucket,
)
from ..tagphases import UNTAGGED
from .series import FragSamples, Timeline

__all__ = ["LIFE_EXACT", "PARTS", "Profile", "ProfileOutput", "StackStats", "TableStacks",
           "bucket"]


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


class ProfileOutput(Accumulator):
    """The views' accumulator: the pass's inline figures, the `compute` parts of `PARTS` (each
    adds 5 to 25% to the pass: a view asks only for its own), made a `Profile`; without
    `fragmentation`, the timeline's `frag` is empty (series.py's FragSamples not `wanted`)."""

    def __init__(self, compute: frozenset[str] = PARTS, points: int = 200,
                 fragmentation: bool = True) -> None:
        self.parts = frozenset(compute)
        self.stacks = True
        self.points = points
        if "timeline" in self.parts:
            self.series = (Timeline(points), FragSamples(points, fragmentation))
        self.profile = Profile(stacks={})

    def finish(self, figures: Figures) -> None:
        result = self.profile = Profile(stacks={}, last_seq=figures.last_seq,
                                        clocked=figures.clocked, last_ms=figures.last_ms,
                                        computed=self.parts)
        if getattr(figures.stacks, "table", False):  # the library's: read when needed
            result.stacks = TableStacks(figures.stacks, figures.peak_seq)  # type: ignore[assignment]
        else:
            _finish(result, figures.stacks, figures.peak_seq)
        if "timeline" in self.parts:
            tag_list = figures.tag_list
            result.frag = figures.frag.samples  # type: ignore[attr-defined]
            result.timeline, result.timeline_tags = figures.timeline.points(  # type: ignore[attr-defined]
                self.points, (figures.last_seq, figures.cur, figures.last_ms, figures.last_rss),
                tuple(r[0] for r in tag_list))
            names = {row[3]: ident for ident, row in figures.tag_rows.items()}
            result.tag_names = [_tag_name(figures.reader, names[i]) for i in range(len(tag_list))]
        peak_seq = figures.peak_seq
        result.peak_bytes = figures.peak
        result.peak_blocks = figures.peak_blocks
        result.peak_seq = peak_seq or None
        result.peak_ms = figures.peak_ms if peak_seq and figures.clocked else None
        result.live_bytes = figures.cur
        result.live_blocks = len(figures.live)
        if isinstance(result.stacks, TableStacks):
            result.allocations = sum(result.stacks.column("allocations"))
            result.allocated_bytes = sum(result.stacks.column("allocated_bytes"))
        else:
            result.allocations = sum(st.allocations for st in result.stacks.values())
            result.allocated_bytes = sum(st.allocated_bytes for st in result.stacks.values())
        result.temporary = figures.temporary
        result.temporary_bytes = figures.temporary_bytes
        result.sizes = figures.sizes
        result.peak_rss = figures.peak_rss
        result.peak_rss_ms = figures.peak_rss_ms


#: a stack's row (passapi) as `_finish` unpacks it: its fields in this order, from 0
ROW_ORDER = (CUR, CUR_N, CHANGED, PEAK, PEAK_N, ALLOCS, ALLOC_BYTES, TEMP, TEMP_BYTES, LIFE,
             LIFE_MS, FREED_BY, GONE, NODE)


def _finish(result: Profile, stats: dict[bytes, list],  # type: ignore[type-arg]
            peak_seq: int) -> None:
    """The stacks' figures at the end."""
    stacks = result.stacks
    for row in stats.values():
        stacks[row[13]] = _stats(row, peak_seq)


def _stats(row: list, peak_seq: int) -> StackStats:  # type: ignore[type-arg]
    """A stack's figures at the end, from its row (ROW_ORDER)."""
    (cur, cur_n, changed, peak, peak_n, allocs, allocated, temp, temp_bytes, life, life_ms,
     freed_by, gone, nid) = row
    at_peak = changed <= peak_seq
    return StackStats(
        nid, cur, cur_n, cur if at_peak else peak, cur_n if at_peak else peak_n, allocs,
        allocated, temp, temp_bytes, allocs - cur_n - gone, life, life_ms,
        # a marked node's id comes negated
        {abs(k): v for k, v in freed_by.items()} if any(k < 0 for k in freed_by)
        else freed_by)


#: StackStats' figures read from the columns of the library's table of stacks (struct
#: fig_stack's fields: 0 CUR, 1 CUR_N, 2 CHANGED, 3 PEAK, 4 PEAK_N, 5 ALLOCS, 6 ALLOC_BYTES,
#: 7 TEMP, 8 TEMP_BYTES, 9 GONE, 10 NODE)
_COLUMNS = {"node": 10, "live_bytes": 0, "live_blocks": 1, "allocations": 5,
            "allocated_bytes": 6, "temporary": 7, "temporary_bytes": 8}


class TableStacks(Mapping[int, StackStats]):
    """`Profile.stacks` on the library's table of stacks (nativepass.StackTable): a stack's
    `StackStats` made when read, a view reading its figures of every stack as columns
    (`column`) and making the stats of the stacks it shows alone (`stats_of`)."""

    def __init__(self, table: Any, peak_seq: int) -> None:  # noqa: ANN401 - a StackTable
        self.table = table
        self._peak_seq = peak_seq
        self._dict: dict[int, StackStats] | None = None

    def column(self, name: str) -> list[int]:
        """StackStats' field `name` of every stack, in order."""
        t, peak_seq = self.table, self._peak_seq
        if name in _COLUMNS:
            return t.column(_COLUMNS[name])
        if name == "frees":  # ALLOCS - CUR_N - GONE, as `_stats` makes it
            return list(map(operator.sub, map(operator.sub, t.column(5), t.column(1)),
                            t.column(9)))
        if name not in ("peak_bytes", "peak_blocks"):
            raise KeyError(name)
        now, peak = (0, 3) if name == "peak_bytes" else (1, 4)
        return [c if changed <= peak_seq else p for c, changed, p in
                zip(t.column(now), t.column(2), t.column(peak), strict=True)]

    def stats_of(self, stacks: list[int]) -> list[StackStats]:
        """The figures of the stacks at positions `stacks`."""
        if self._dict is not None:
            every = list(self._dict.values())
            return [every[i] for i in stacks]
        return [_stats(row, self._peak_seq) for row in self.table.rows_of(stacks)]

    def _made(self) -> dict[int, StackStats]:
        if self._dict is None:
            result = Profile(stacks={})
            _finish(result, self.table, self._peak_seq)
            self._dict = result.stacks
        return self._dict

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, node: int) -> StackStats:
        return self._made()[node]

    def __iter__(self) -> Iterator[int]:
        return iter(self._made())


def _tag_name(reader: DumpReader, ident: int) -> str:
    """A tag's name as `--by-tag` shows it (tagphases.py)."""
    if ident < 0:
        return UNTAGGED
    return reader.strings.get(ident, "") or '""'

