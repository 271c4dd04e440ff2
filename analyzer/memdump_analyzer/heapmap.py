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

from dataclasses import dataclass, field

from .dumpfile import DumpReader, Frame
from .dumpformat import effect, unescape
from .rules import trim_stack
from .symbolize import symbolize as _symbolize
from .wording import plural

__all__ = ["Block", "HeapMap", "HeapMapError", "Region", "fragmentation", "heap_map", "heap_maps",
           "percent"]

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
    #: the live blocks by address, each with its stack and tag (for the HTML report's map)
    blocks: list[Block] = field(default_factory=list)
    #: stack node -> its frames, trimmed as the reports show them
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


_MAKE = frozenset((b"malloc", b"new", b"new[]"))
_FREE = frozenset((b"free", b"delete", b"delete[]"))


def _events(reader: DumpReader):  # noqa: ANN202 - (seq, record, release, new, size)
    for fl in reader.records():
        if fl[0] != b"e":
            yield int(fl[1]), fl, None, None, 0
            continue
        op = fl[3]  # malloc and free, most of a dump, without `effect`'s call
        if op in _MAKE and len(fl) == 7:
            new = int(fl[5], 16)
            yield int(fl[1]), fl, None, new or None, int(fl[6])
            continue
        if op in _FREE and len(fl) == 7:
            yield int(fl[1]), fl, int(fl[6], 16) or None, None, 0
            continue
        result = int(fl[5], 16) if fl[5] != b"-" else 0
        release, new, size = effect(fl[3].decode(), result, tuple(int(a, 0) for a in fl[6:]))
        yield int(fl[1]), fl, release, new if fl[3] != b"custom_alloc" else None, size


def peak_seq(path: str) -> int:
    """The event after which the live heap was largest (the first such), 0 for an empty one."""
    live: dict[int, int] = {}
    total = peak = at = 0
    with DumpReader(path) as reader:
        for seq, fl, release, new, size in _events(reader):
            if fl[0] == b"p" and fl[2] == b"exec":
                live.clear()
                total = 0
            if release is not None:
                total -= live.pop(release, 0)
            if new is not None:
                total += size - live.get(new, 0)
                live[new] = size
                if total > peak:
                    peak, at = total, seq
    return at


def heap_map(path: str, at: str = "end", *, symbols: bool = False) -> HeapMap:
    """The live blocks of the dump at PATH at moment AT: "end", "peak", a SEQ (after that
    event), or "phase:NAME" (as the phase began). HeapMapError when AT is not there.
    `symbols`: resolve the blocks' frames the dump has no symbols for (addr2line)."""
    return heap_maps(path, [at], symbols=symbols)[0]


def heap_maps(path: str, moments: list[str], *, symbols: bool = False) -> list[HeapMap]:
    """`heap_map` at each of `moments`, in one pass over the dump (and one more for "peak")."""
    peak = peak_seq(path) if "peak" in moments else 0
    stops: list[tuple[int, int]] = []  # (SEQ, index of the moment): after event SEQ
    phases: dict[str, list[int]] = {}  # phase name -> the moments' indexes
    for i, at in enumerate(moments):
        if at == "peak" or at.isdigit():
            stops.append((peak if at == "peak" else int(at), i))
        elif at.startswith("phase:"):
            phases.setdefault(at[6:], []).append(i)
        elif at != "end":
            raise HeapMapError(f"--at {at}: end, peak, an event number or phase:NAME")
    stops.sort(reverse=True)  # the next one last
    Live = dict[int, tuple[int, int, "str | None"]]
    found: dict[int, tuple[int, Live]] = {}
    live: Live = {}  # address -> (size, node, tag)
    seen: list[str] = []  # the phases, in order
    seq = 0
    with DumpReader(path) as reader:
        for event, fl, release, new, size in _events(reader):
            if fl[0] == b"p" and fl[2] == b"phase":
                seen.append(unescape(fl[4]))
                for i in phases.pop(seen[-1], ()):
                    found[i] = (seq, dict(live))
            while stops and event > stops[-1][0]:
                found[stops.pop()[1]] = (seq, dict(live))
            seq = event
            if fl[0] == b"p" and fl[2] == b"exec":
                live.clear()
            if release is not None:
                live.pop(release, None)
            if new is not None:
                live[new] = (size, abs(reader.node_ids[fl[4]]), reader.tag_of(int(fl[2])))
        for name in phases:
            known = ", ".join(f"'{n}'" for n in dict.fromkeys(seen)) or "none"
            raise HeapMapError(f"no phase '{name}' in {path} (its phases: {known})")
        for stop, i in stops:
            if stop > seq:
                raise HeapMapError(f"event {stop} is past the last of {path} ({seq})")
            found[i] = (seq, live)
        nodes = {node for _, blocks in found.values() for _, node, _ in blocks.values()}
        nodes.update(node for _, node, _ in live.values())
        if symbols:
            _symbolize(reader, nodes)
        stacks = {node: trim_stack(reader.stack(node)) for node in nodes}
        tagged = bool(reader.tags)
    out = []
    for i, at in enumerate(moments):
        when, blocks = found.get(i, (seq, live))
        out.append(HeapMap(at, when, _regions(blocks), [
            Block(a, size, node, tag) for a, (size, node, tag) in sorted(blocks.items())],
            {n: stacks[n] for _, n, _ in blocks.values()}, tagged))
    return out


def _regions(live: dict[int, tuple[int, int, str | None]]) -> list[Region]:
    chunks = sorted(chunk_of(a, s[0]) for a, s in live.items())
    regions: list[Region] = []
    group: list[tuple[int, int]] = []
    for chunk in chunks:
        if group and chunk[0] - group[-1][1] > REGION_GAP:
            regions.append(_region(group))
            group = []
        group.append(chunk)
    if group:
        regions.append(_region(group))
    return regions


def _region(chunks: list[tuple[int, int]]) -> Region:
    lo, hi = chunks[0][0], max(c[1] for c in chunks)
    used = runs = largest = 0
    end = lo
    for c_lo, c_hi in chunks:
        if c_lo > end:
            runs += 1
            largest = max(largest, c_lo - end)
        used += c_hi - c_lo
        end = max(end, c_hi)
    return Region(lo, hi, len(chunks), used, (hi - lo) - used, runs, largest,
                  _cells(chunks, lo, hi))


def _cells(chunks: list[tuple[int, int]], lo: int, hi: int) -> str:
    width = min(MAP_WIDTH, max(1, (hi - lo) // 16))
    used = [0] * width
    span = hi - lo
    for c_lo, c_hi in chunks:  # each chunk's bytes into the cells it covers
        first, last = (c_lo - lo) * width // span, (c_hi - 1 - lo) * width // span
        for cell in range(first, last + 1):
            cell_lo = lo + cell * span // width
            cell_hi = lo + (cell + 1) * span // width
            used[cell] += min(c_hi, cell_hi) - max(c_lo, cell_lo)
    out = []
    for cell in range(width):
        size = lo + (cell + 1) * span // width - (lo + cell * span // width)
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
