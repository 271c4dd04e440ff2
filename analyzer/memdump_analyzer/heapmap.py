"""The heap map: `memdump-analyze --heap-map [--at end|peak|SEQ|phase:NAME]` (docs/heapmap.md).

At a chosen moment, the live blocks laid out by address: the heap's regions (blocks less than
REGION_GAP apart share one: glibc's main heap, a thread arena's heaps, each block it mmapped), in
each the chunks the blocks take (glibc's geometry: the block and its 8-byte size field, rounded
up to 16 bytes, 32 at least) and the free runs between them. The fragmentation is the share of
the heap's bytes that are free outside the largest free run: (free - largest free run) / (used +
free), weighted by the heap so that crumbs of a heap that is almost all used count for little
(0: no free byte, or one run; 0.5: half the heap is free runs smaller than the largest). The
map line draws each region in MAP_WIDTH cells: `#` a
cell all used, `.` all free, `:` both. Free runs are what lies between live blocks as the dump
knows them: the allocator's own bookkeeping and top chunk beyond the last block are not seen.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import accumulate, compress, count, repeat
from operator import gt, sub

from . import heappass, native
from .dumpfile import DumpReader, Frame
from .dumpformat import unescape
from .heappass import Accumulator, Figures
from .passapi import AT_PEAK, END, MOMENT_BLOCKS, Moment
from .rules import trim_stack
from .symbolize import symbolize as _symbolize
from .wording import plural

__all__ = ["Block", "HeapMap", "HeapMapError", "HeapMapOutput", "Region", "fragmentation",
           "heap_map", "heap_maps", "percent"]

REGION_GAP = 1 << 20
MAP_WIDTH = 64
FORMAT = "memdump-heapmap"
VERSION = 2


class HeapMapError(Exception):
    """The moment asked for is not in the dump."""


def chunk_of(start: int, size: int) -> tuple[int, int]:
    """[lo, hi) of the glibc chunk holding the block at START of SIZE bytes."""
    length = max(32, (size + 8 + 15) & ~15)
    return start - 16, start - 16 + length


@dataclass
class Region:
    lo: int
    hi: int
    blocks: int
    used: int
    free: int
    free_runs: int
    largest_free: int
    cells: str

    @property
    def fragmentation(self) -> float:
        """(free bytes - the largest free run) / the region's bytes."""
        return fragmentation(self.free, self.largest_free, self.used + self.free)


def fragmentation(free: int, largest: int, heap: int) -> float:
    """The share of `heap` bytes that are free outside the largest free run: (free - largest) /
    heap; 0 for an empty heap (docs/heapmap.md)."""
    return (free - largest) / heap if heap else 0.0


@dataclass
class Block:
    """A live block: where, how large, its allocation stack's node and its tag (memdump_api.h;
    None: untagged)."""

    addr: int
    size: int
    node: int
    tag: str | None


@dataclass
class HeapMap:
    at: str
    seq: int
    regions: list[Region]
    #: the live blocks by address, each with its stack and tag (for the HTML report's map;
    #: empty when not asked for: `heap_map`'s `blocks`)
    blocks: list[Block] = field(default_factory=list)
    #: stack node -> its frames, trimmed as the reports show them (of `blocks`)
    stacks: dict[int, tuple[Frame, ...]] = field(default_factory=dict)
    #: the dump has tags
    tagged: bool = False

    @property
    def free(self) -> int:
        """The free bytes of all regions."""
        return sum(r.free for r in self.regions)

    @property
    def largest_free(self) -> int:
        """The largest free run of any region."""
        return max((r.largest_free for r in self.regions), default=0)

    @property
    def used(self) -> int:
        """The bytes of the live blocks' chunks in all regions."""
        return sum(r.used for r in self.regions)

    @property
    def fragmentation(self) -> float:
        """Over the whole heap: (all regions' free bytes - the largest free run of any region)
        / all regions' bytes (as the timeline's, docs/views.md)."""
        return fragmentation(self.free, self.largest_free, self.used + self.free)


def heap_map(path: str, at: str = "end", *, symbols: bool = False,
             blocks: bool = True) -> HeapMap:
    """The live blocks of the dump at PATH at moment AT: "end", "peak", a SEQ (after that
    event), or "phase:NAME" (as the phase began). HeapMapError when AT is not there.
    `symbols`: resolve the blocks' frames the dump has no symbols for (addr2line). Without
    `blocks`, the map's regions alone (its `blocks` and `stacks` empty: the text and JSON show
    neither; cppcheck's peak has 92,908 blocks of 2,548 stacks)."""
    return heap_maps(path, [at], symbols=symbols, blocks=blocks)[0]


def heap_maps(path: str, moments: list[str], *, symbols: bool = False,
              blocks: bool = True) -> list[HeapMap]:
    """`heap_map` at each of `moments`, in one pass over the dump (heappass.py); in two when
    a phase is among them and the library (analyzer/native/) reads the dump: the first finds
    when they are, and the second takes every moment in the library's pass. The peak is a
    moment of the pass (`passapi.AT_PEAK`): the library keeps the blocks released since the
    latest peak, at most those live at it."""
    out = HeapMapOutput(moments, symbols=symbols, blocks=blocks)
    if not out.declared and not out.phases and native.enabled() \
            and native.library() is not None:
        out = HeapMapOutput(moments, symbols=symbols, blocks=blocks,
                            when={i: AT_PEAK for i, at in enumerate(moments) if at == "peak"})
    elif not out.declared and native.enabled() and native.library() is not None:
        when = _When()
        heappass.run_path(path, [when])
        seqs = when.seqs(moments)
        if seqs is not None:
            out = HeapMapOutput(moments, symbols=symbols, blocks=blocks, when=seqs)
        # else a phase the dump does not have: the one pass says so, or what is wrong before it
    heappass.run_path(path, [out])
    return out.maps


class _When(Accumulator):
    """The first pass of `heap_maps`: the SEQ of the peak (the pass's own) and of each phase's
    `p phase` record (its first)."""

    records = True

    def __init__(self) -> None:
        self.phases: dict[str, int] = {}
        self.peak_seq = 0

    def record(self, seq: int, rec: list[bytes]) -> None:
        if rec[0] == b"p" and rec[2] == b"phase":
            self.phases.setdefault(unescape(rec[4]), seq)

    def finish(self, figures: Figures) -> None:
        self.peak_seq = figures.peak_seq

    def seqs(self, moments: list[str]) -> dict[int, int] | None:
        """Moment index -> the SEQ after which it is, for the peak and the phases: the heap
        after the peak's event, or as the phase began (after the record before its own); None
        when a phase is not in the dump."""
        out = {}
        for i, at in enumerate(moments):
            if at == "peak":
                out[i] = self.peak_seq
            elif at.startswith("phase:"):
                seq = self.phases.get(at[6:])
                if seq is None:
                    return None
                out[i] = seq - 1
        return out


_Live = dict[int, tuple[int, int, "str | None"]]  # address -> (size, node, tag)


class HeapMapOutput(Accumulator):
    """The heap map's accumulator: the live blocks with their tags at each moment asked for.
    The end and events known before the pass are the pass's moments (passapi's `wanted_moments`: in
    the library's pass, analyzer/native/moments.c); with "peak" or a phase among them, which are
    known only as the pass goes, it keeps the live blocks itself from the pass's events, in
    heappass.py's loop: "peak" is known only at the end, so the changes since the latest peak are
    kept (an undo log, cleared at each new peak) and undone from the end's blocks."""

    def __init__(self, moments: list[str], *, symbols: bool = False, blocks: bool = True,
                 when: dict[int, int] | None = None) -> None:
        self.moments_at = moments
        self.symbols = symbols
        self.blocks = blocks
        #: moment index -> its SEQ, for the peak and the phases when a first pass found them
        self.when = when or {}
        self.stops: list[tuple[int, int]] = []  # (SEQ, index of the moment): after event SEQ
        self.phases: dict[str, list[int]] = {}  # phase name -> the moments' indexes
        self.peaks = [i for i, at in enumerate(moments) if at == "peak" and i not in self.when]
        for i, at in enumerate(moments):
            if i in self.when:
                continue
            if at.isdigit():
                self.stops.append((int(at), i))
            elif at.startswith("phase:"):
                self.phases.setdefault(at[6:], []).append(i)
            elif at not in ("end", "peak"):
                raise HeapMapError(f"--at {at}: end, peak, an event number or phase:NAME")
        self.stops.sort(reverse=True)  # the next one last
        #: the moments are known before the pass: the pass takes them (`take`)
        self.declared = not self.peaks and not self.phases
        self.events = not self.declared
        self.found: dict[int, tuple[int, list[tuple[int, int, int, str | None]]]] = {}
        self.live: _Live = {}
        self.seen: list[str] = []  # the phases, in order
        self.cur = self.peak = self.peak_seq = 0
        #: (address, its entry before the change or None) since the latest peak
        self.undo: list[tuple[int, tuple[int, int, str | None] | None]] | None = \
            [] if self.peaks else None
        self.reader: DumpReader | None = None
        self.maps: list[HeapMap] = []

    def start(self, reader: DumpReader) -> None:
        self.reader = reader

    def wanted_moments(self) -> list[tuple[int, int]] | None:
        if not self.declared:
            return None
        return [(self._seq(i), MOMENT_BLOCKS) for i in range(len(self.moments_at))]

    def _seq(self, index: int) -> int:
        """Moment `index`'s SEQ when known before the pass, else END."""
        at = self.moments_at[index]
        return self.when.get(index, int(at) if at.isdigit() else END)

    def take(self, index: int, moment: Moment) -> None:
        seq = self._seq(index)
        self.found[index] = (seq if seq >= 0 else moment.seq, moment.blocks or [])

    def _due(self, seq: int) -> None:
        stops = self.stops
        while stops and seq > stops[-1][0]:
            stop, i = stops.pop()
            self.found[i] = (stop, _sorted(self.live))

    def alloc(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
              resize: bool) -> None:
        if self.stops:
            self._due(seq)
        addr = int(ptr, 16)
        old = self.live.get(addr)
        if self.undo is not None:
            self.undo.append((addr, old))
        self.cur += size - (old[0] if old is not None else 0)
        self.live[addr] = (size, node, self.reader.tag_of(int(tid)))  # type: ignore[union-attr]
        if self.cur > self.peak:
            self.peak, self.peak_seq = self.cur, seq
            if self.undo is not None:
                self.undo.clear()

    def release(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
                made: bytes | None, last: bytes | None) -> None:
        if self.stops:
            self._due(seq)
        addr = int(ptr, 16)
        old = self.live.pop(addr, None)
        if old is not None:
            self.cur -= old[0]
            if self.undo is not None:
                self.undo.append((addr, old))

    def record(self, seq: int, rec: list[bytes]) -> None:
        if self.stops:
            self._due(seq)
        if rec[0] != b"p":
            return
        if rec[2] == b"phase":
            self.seen.append(unescape(rec[4]))
            for i in self.phases.pop(self.seen[-1], ()):
                self.found[i] = (seq - 1, _sorted(self.live))
        elif rec[2] == b"exec":
            if self.undo is not None:
                self.undo.extend(self.live.items())
            self.live.clear()
            self.cur = 0

    def _at_peak(self) -> _Live:
        blocks = dict(self.live)
        for addr, old in reversed(self.undo or ()):
            if old is None:
                del blocks[addr]
            else:
                blocks[addr] = old
        return blocks

    def finish(self, figures: Figures) -> None:
        reader, seq = figures.reader, figures.last_seq
        for name in self.phases:
            known = ", ".join(f"'{n}'" for n in dict.fromkeys(self.seen)) or "none"
            raise HeapMapError(f"no phase '{name}' in {reader.path} (its phases: {known})")
        past = [int(at) for at in self.moments_at if at.isdigit() and int(at) > seq]
        if past:
            raise HeapMapError(f"event {max(past)} is past the last of {reader.path} ({seq})")
        if not self.declared:
            live = _sorted(self.live)
            for stop, i in self.stops:
                self.found[i] = (stop, live)
            for i, at in enumerate(self.moments_at):
                if at == "end":
                    self.found[i] = (seq, live)
            if self.peaks:
                at_peak = _sorted(self._at_peak())
                for i in self.peaks:
                    self.found[i] = (self.peak_seq, at_peak)
        stacks = self._stacks(reader) if self.blocks else {}
        tagged = bool(reader.tags)
        for i, at in enumerate(self.moments_at):
            when, blocks = self.found[i]
            self.maps.append(HeapMap(at, when, _regions(blocks), [
                Block(*block) for block in blocks] if self.blocks else [],
                {n: stacks[n] for _, _, n, _ in blocks} if self.blocks else {}, tagged))

    def _stacks(self, reader: DumpReader) -> dict[int, tuple[Frame, ...]]:
        """The stacks of the blocks found, trimmed (and symbolised when asked for)."""
        nodes = {node for _, blocks in self.found.values() for _, _, node, _ in blocks}
        if self.symbols:
            _symbolize(reader, nodes)
        return {node: trim_stack(reader.stack(node)) for node in nodes}


def _sorted(live: _Live) -> list[tuple[int, int, int, str | None]]:
    """The live blocks (address -> (size, node, tag)) by address: (address, size, node, tag)."""
    return [(a, size, node, tag) for a, (size, node, tag) in sorted(live.items())]


def _regions(blocks: list[tuple[int, int, int, str | None]]) -> list[Region]:
    """The regions of the live blocks. Each step runs over the chunks in C (map, accumulate):
    a dump's live blocks are tens of thousands (cppcheck's at its peak: 92,908)."""
    if not blocks:
        return []
    # chunk_of's, inline
    chunks = sorted([(a - 16, a - 16 + (n if (n := (size + 23) & ~15) > 32 else 32))
                     for a, size, _, _ in blocks])
    los, his = (list(column) for column in zip(*chunks, strict=True))
    # a region ends where the next chunk starts more than REGION_GAP after the chunk before it
    starts = [0, *compress(count(1), map(gt, map(sub, los[1:], his), repeat(REGION_GAP))),
              len(los)]
    return [_region(los[a:b], his[a:b]) for a, b in zip(starts, starts[1:], strict=False)]


def _region(los: list[int], his: list[int]) -> Region:
    """The region of the chunks [los[i], his[i]) (sorted)."""
    lo, hi = los[0], max(his)
    # each chunk's start less the end of the chunks before it: a free run when above 0
    after = list(map(sub, los, accumulate(his, max, initial=lo)))
    runs = list(filter((0).__lt__, after))
    used = sum(his) - sum(los)
    cells = _cells(los, his, lo, hi) if min(after) >= 0 else _cells_by_chunk(los, his, lo, hi)
    return Region(lo, hi, len(los), used, (hi - lo) - used, len(runs), max(runs, default=0),
                  cells)


def _bounds(lo: int, hi: int) -> list[int]:
    """Where the map's cells of region [lo, hi) begin (cell i: [i], [i + 1]), and its end."""
    width = min(MAP_WIDTH, max(1, (hi - lo) // 16))
    return [lo + cell * (hi - lo) // width for cell in range(width + 1)]


def _cells(los: list[int], his: list[int], lo: int, hi: int) -> str:
    """The map line of disjoint chunks [los[i], his[i]) (sorted) of region [lo, hi): each
    cell's used bytes from the chunks' bytes below its two bounds (their running sum, bisected),
    the figures of `_cells_by_chunk`, whose reading of the bounds leaves out the last byte of a
    chunk that ends one byte into a cell its arithmetic puts after the chunk (kept: the maps stay
    what they were)."""
    bounds = _bounds(lo, hi)
    width, span = len(bounds) - 1, hi - lo
    below = [0, *accumulate(map(sub, his, los))]  # the bytes of the first i chunks

    def used_below(x: int) -> int:
        i = bisect_left(los, x)  # the chunks starting below x: all but the last end below it
        return below[i - 1] + min(x, his[i - 1]) - los[i - 1] if i else 0

    at = list(map(used_below, bounds))
    used = list(map(sub, at[1:], at))
    for cell in range(1, width):
        b = bounds[cell]
        if (b - lo) * width // span == cell - 1:  # a chunk ending at b + 1 loses byte b
            i = bisect_left(his, b + 1)
            if i < len(his) and his[i] == b + 1:
                used[cell] -= 1
    return _line(used, bounds)


def _cells_by_chunk(los: list[int], his: list[int], lo: int, hi: int) -> str:
    """The map line of chunks [los[i], his[i]) (sorted, some overlapping) of region [lo, hi):
    each chunk's bytes into the cells it covers."""
    bounds = _bounds(lo, hi)
    width, span = len(bounds) - 1, hi - lo
    used = [0] * width
    for c_lo, c_hi in zip(los, his, strict=True):
        first, last = (c_lo - lo) * width // span, (c_hi - 1 - lo) * width // span
        for cell in range(first, last + 1):
            cell_lo, cell_hi = bounds[cell], bounds[cell + 1]
            used[cell] += (c_hi if c_hi < cell_hi else cell_hi) \
                - (c_lo if c_lo > cell_lo else cell_lo)
    return _line(used, bounds)


def _line(used: list[int], bounds: list[int]) -> str:
    """Each cell's character: `#` all used, `.` all free, `:` both."""
    width = len(used)
    out = []
    for cell in range(width):
        size = bounds[cell + 1] - bounds[cell]
        out.append("#" if used[cell] >= size else "." if used[cell] == 0 else ":")
    return "".join(out)


def percent(share: float) -> str:
    """A fragmentation in percent, to a hundredth: `0.04%`, `50.00%`."""
    return f"{100 * share:.2f}%"


def _kib(n: int) -> str:
    return f"{n:,} B" if n < 10240 else f"{n / 1024:,.1f} KiB"


def heap_map_text(result: HeapMap, path: str) -> str:
    out = [f"memdump heap map of {path} at {result.at} (event {result.seq:,})"]
    if not result.regions:
        out.append("no live block")
    for r in result.regions:
        out.append("")
        out.append(f"0x{r.lo:x}-0x{r.hi:x} ({_kib(r.hi - r.lo)}): {plural(r.blocks, 'block')}, "
                   f"used {_kib(r.used)}, free {_kib(r.free)} in {plural(r.free_runs, 'run')}, "
                   f"largest {_kib(r.largest_free)}, fragmentation {percent(r.fragmentation)}")
        out.append(f"  [{r.cells}]")
    return "\n".join(out) + "\n"


def heap_map_json(result: HeapMap, path: str) -> dict[str, object]:
    return {"format": FORMAT, "version": VERSION, "view": "heap-map", "dump": path,
            "at": result.at, "seq": result.seq, "free_bytes": result.free,
            "largest_free_bytes": result.largest_free,
            "fragmentation": round(result.fragmentation, 6),
            "regions": [{"lo": f"0x{r.lo:x}", "hi": f"0x{r.hi:x}", "blocks": r.blocks,
                         "used_bytes": r.used, "free_bytes": r.free, "free_runs": r.free_runs,
                         "largest_free_bytes": r.largest_free,
                         "fragmentation": round(r.fragmentation, 6), "map": r.cells}
                        for r in result.regions]}
