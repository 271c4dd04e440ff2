"""The HTML report's heap map (docs/heapmap.md): each region of the heap as rows of cells, each
cell coloured by what takes most of its bytes: a tag (memdump_api.h) when the dump has tags, else
an allocation stack (the `STACK_COLOURS` stacks with the most bytes get a colour each, the others
grey), free memory white and hatched; a legend, and a `<title>` per cell with its addresses, its
used bytes and its blocks (address, size, tag or stack)."""

from __future__ import annotations

import ctypes
import itertools
import os
from array import array
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from html import escape
from operator import attrgetter, is_

from .. import native
from ..diff import frames_key
from ..dumpfile import Frame
from ..heapmap import Block, HeapMap, heap_map_text, percent
from ..leaktext import frame_key
from ..nativegroups import address, typed
from ..tagphases import UNTAGGED
from .charts import OTHER, TAG_COLOURS, human_bytes
from .flame import WIDTH

__all__ = ["CELL", "FREE", "PER_ROW", "Cell", "Colours", "cell_figures", "colours_of", "map_svg",
           "stack_keys", "stack_name", "tell_apart"]

#: cells per row, their size in pixels, and at most how many cells a region gets
PER_ROW = 100
CELL = WIDTH // PER_ROW
CELL_H = 16
MAX_CELLS = 400
#: at most how many regions are drawn (the largest; each block glibc mmapped is one)
MAX_REGIONS = 16
#: bytes a cell covers at least (glibc's chunks are 16-byte aligned)
GRAIN = 16
FREE = "#ffffff"
#: how many stacks get a colour of their own when the dump has no tags
STACK_COLOURS = 8
_HATCH = ('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse">'
          '<rect width="6" height="6" fill="#ffffff"/><path d="M0,6 L6,0" stroke="#c8c8c8" '
          'stroke-width="1"/></pattern></defs>')


@dataclass
class Colours:
    """What colours a block: by tag or by stack key, the colour of each, and what the legend
    says of each (a tag's name, a stack's innermost frame)."""

    by_tag: bool
    colour: dict[Hashable, str]
    label: dict[Hashable, str]
    #: stack node -> its key (frames_key), as found
    keys: dict[int, Hashable] = field(default_factory=dict)
    #: the keys by number (as first numbered), and each key's number
    numbered: list[Hashable] = field(default_factory=list)
    number: dict[Hashable, int] = field(default_factory=dict)
    #: id of a map -> (the map, `numbers_of` it)
    of_map: dict[int, tuple[HeapMap, list[int]]] = field(default_factory=dict)
    #: (the maps, `weights` of them)
    weighed: tuple[list[HeapMap], dict[Hashable, int]] | None = None

    def key(self, block: Block, stacks: dict[int, tuple[Frame, ...]]) -> Hashable:
        if self.by_tag:
            return tag_name(block.tag)
        key = self.keys.get(block.node)
        if key is None:
            key = self.keys[block.node] = frames_key(stacks.get(block.node, ()))
        return key

    def numbers_of(self, m: HeapMap) -> list[int]:
        """The number of `key` of each of `m`'s blocks, in their order (made once a map: the
        colours, the legend and the cells read them; a stack's key is a tuple of tuples, whose
        hash Python does not keep, the numbers are found by node)."""
        found = self.of_map.get(id(m))
        if found is not None and found[0] is m:
            return found[1]
        if self.by_tag:
            tags = [tag_name(b.tag) for b in m.blocks]
            for tag in dict.fromkeys(tags):
                self.number.setdefault(tag, len(self.numbered))
                if len(self.number) > len(self.numbered):
                    self.numbered.append(tag)
            numbers = list(map(self.number.__getitem__, tags))
        else:
            nodes = [b.node for b in m.blocks]
            distinct = list(dict.fromkeys(nodes))
            missing = [n for n in distinct if n not in self.keys]
            self.keys.update(zip(missing, stack_keys([m.stacks.get(n, ()) for n in missing]),
                                 strict=True))
            number_of = {}
            for node in distinct:
                key = self.keys[node]
                number = self.number.get(key)
                if number is None:
                    number = self.number[key] = len(self.numbered)
                    self.numbered.append(key)
                number_of[node] = number
            numbers = list(map(number_of.__getitem__, nodes))
        self.of_map[id(m)] = (m, numbers)
        return numbers

    def weights(self, maps: list[HeapMap]) -> dict[Hashable, int]:
        """The bytes of the blocks of each key in `maps`, the keys as first met (made once: the
        colours and the legend read them)."""
        if self.weighed is not None and len(self.weighed[0]) == len(maps) \
                and all(map(is_, self.weighed[0], maps)):
            return self.weighed[1]
        numbers = [self.numbers_of(m) for m in maps]
        weight = [0] * len(self.numbered)
        for m, of_blocks in zip(maps, numbers, strict=True):
            for k, size in zip(of_blocks, map(attrgetter("size"), m.blocks), strict=True):
                weight[k] += size
        met = dict.fromkeys(itertools.chain.from_iterable(numbers))
        self.weighed = (list(maps), {self.numbered[k]: weight[k] for k in met})
        return self.weighed[1]

    def of(self, key: Hashable) -> str:
        return self.colour.get(key, OTHER)


def stack_keys(stacks: list[tuple[Frame, ...]]) -> list[Hashable]:
    """`frames_key` of each stack, each frame's key made once (the stacks share the reader's
    frames: cppcheck's 2,600 stacks at its peak have 44k frames, 2,800 of them distinct)."""
    flat = list(itertools.chain.from_iterable(stacks))
    ids = list(map(id, flat))
    key_of = {i: frame_key(f) for i, f in dict(zip(ids, flat, strict=True)).items()}
    keys = list(map(key_of.__getitem__, ids))
    ends = list(itertools.accumulate(map(len, stacks)))
    return [tuple(keys[end - len(stack):end]) for stack, end in zip(stacks, ends, strict=True)]


def tag_name(tag: str | None) -> str:
    """A block's tag as `--by-tag` names it."""
    return UNTAGGED if tag is None else tag or '""'


def stack_name(frames: tuple[Frame, ...]) -> str:
    """A stack's name in a legend: its innermost frame, with its file:line."""
    if not frames:
        return "(no stack)"
    f = frames[0]
    name = f.function or (f"{os.path.basename(f.module)}+0x{f.offset:x}" if f.module else "??")
    return f"{name} ({os.path.basename(f.file)}:{f.line})" if f.file and f.line else name


def colours_of(maps: Iterable[HeapMap], tag_colour: dict[str, str]) -> Colours:
    """The colours of the maps' blocks: their tags' (`tag_colour`, the charts') when the dump has
    tags, else the `STACK_COLOURS` stacks with most bytes in the maps a colour each."""
    maps = list(maps)
    if any(m.tagged for m in maps):
        names = {tag_name(b.tag) for m in maps for b in m.blocks}
        colour = {n: tag_colour.get(n, OTHER) for n in names}
        return Colours(True, dict(colour), {n: n for n in names})
    label: dict[Hashable, str] = {}
    frames: dict[Hashable, tuple[Frame, ...]] = {}
    out = Colours(False, {}, label)
    weight = out.weights(maps)
    for m in maps:  # each key's first block names it
        first = dict(zip(reversed(out.numbers_of(m)), reversed(m.blocks), strict=True))
        for number, b in first.items():
            key = out.numbered[number]
            if key not in label:
                frames[key] = m.stacks.get(b.node, ())
                label[key] = stack_name(frames[key])
    ranked = sorted(weight, key=lambda k: (-weight[k], label[k]))[:STACK_COLOURS]
    out.colour.update((k, TAG_COLOURS[i]) for i, k in enumerate(ranked))
    tell_apart(ranked, frames, label)
    return out


def tell_apart(keys: list[Hashable], frames: dict[Hashable, tuple[Frame, ...]],
                label: dict[Hashable, str]) -> None:
    """Name the stacks of `keys` that share an innermost frame (a program's own `xmalloc`) by
    their first frame where they differ from the others too: `xmalloc (x.c:9) via parse
    (p.c:40)`, the frame being the deepest of the first differences from each of the others."""
    by_label: dict[str, list[Hashable]] = {}
    for k in keys:
        by_label.setdefault(label[k], []).append(k)
    for same in by_label.values():
        if len(same) < 2:
            continue
        names = {k: [stack_name(frames[k][i:i + 1]) for i in range(len(frames[k]))]
                 for k in same}
        for k in same:
            depth = max(_first_difference(names[k], names[o]) for o in same if o is not k)
            there = names[k][depth] if depth < len(names[k]) else "(the stack's end)"
            label[k] = f"{label[k]} via {there}"


def _first_difference(a: list[str], b: list[str]) -> int:
    """The index of the first frame where the stacks `a` and `b` differ."""
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    return i


def _cells(lo: int, hi: int, blocks: list[Block],
           keys: list[Hashable]) -> list[tuple[int, int, dict[Hashable, int], list[Block]]]:
    """The region [lo, hi) in cells: each (start, end, bytes by colour key, its blocks), the
    blocks' keys `keys`."""
    n = max(1, min(MAX_CELLS, (hi - lo) // GRAIN))
    span = hi - lo
    bounds = [lo + i * span // n for i in range(n + 1)]
    cells: list[tuple[int, int, dict[Hashable, int], list[Block]]] = [
        (bounds[i], bounds[i + 1], {}, []) for i in range(n)]
    for b, key in zip(blocks, keys, strict=True):
        c_lo = b.addr - 16  # chunk_of's, inline
        c_hi = c_lo + (n_c if (n_c := (b.size + 23) & ~15) > 32 else 32)
        # a chunk is drawn where it meets the region (one the region's bounds do not hold, as a
        # block of the generated dumps' odd sizes, is clipped to them, never an error)
        first = (c_lo - lo) * n // span
        last = (c_hi - 1 - lo) * n // span
        for i in range(first if first > 0 else 0, (last if last < n else n - 1) + 1):
            start, end, used, members = cells[i]
            used[key] = used.get(key, 0) + (c_hi if c_hi < end else end) \
                - (c_lo if c_lo > start else start)
            members.append(b)
    return cells


#: a cell: its start and end, its used bytes, the number of the key with most of them (None:
#: no block), its blocks and the first four of them
Cell = tuple[int, int, int, int | None, int, list[Block]]


def cell_figures(lo: int, hi: int, blocks: list[Block], numbers: list[int],
                 n_numbers: int) -> list[Cell]:
    """The cells of region [lo, hi) whose blocks are `blocks`, coloured by key `numbers` (each
    < `n_numbers`): from the library (`mdc_map_cells`, analyzer/native/pagedata.c) when it is
    there, else from `_cells`, the reference."""
    lib = _library() if native.enabled() else None
    found = _native_cells(lib, lo, hi, blocks, numbers, n_numbers) if lib is not None else None
    if found is not None:
        return found
    return [(start, end, sum(used.values()), max(used, key=used.__getitem__) if used else None,
             len(members), members[:4]) for start, end, used, members in
            _cells(lo, hi, blocks, numbers)]


_MAP_CELLS = {"mdc_map_cells": (ctypes.c_int, [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 5
                                + [ctypes.c_void_p] * 4)}


#: the library's largest address, size and region bound (pagedata.c's MAP_LIMIT)
_LIMIT = 1 << 52


def _library() -> ctypes.CDLL | None:
    lib = native.library()
    return typed(lib, _MAP_CELLS) if lib is not None else None


def _native_cells(lib: ctypes.CDLL, lo: int, hi: int, blocks: list[Block], numbers: list[int],
                  n_numbers: int) -> list[Cell] | None:
    n = max(1, min(MAX_CELLS, (hi - lo) // GRAIN))
    if not 0 <= lo < hi <= _LIMIT:  # the library's bounds (addresses and sizes it checks)
        return None
    try:
        addrs = array("q", map(attrgetter("addr"), blocks)) or array("q", [0])
        sizes = array("q", map(attrgetter("size"), blocks)) or array("q", [0])
        keys = array("i", numbers) or array("i", [0])
    except OverflowError:
        return None
    total, count = array("q", bytes(8 * n)), array("q", bytes(8 * n))
    best, first4 = array("i", bytes(4 * n)), array("q", bytes(32 * n))
    if lib.mdc_map_cells(address(addrs), address(sizes), address(keys), len(blocks), n_numbers,
                         lo, hi, n, address(total), address(best), address(count),
                         address(first4)) != 0:
        return None
    span = hi - lo
    bounds = [lo + i * span // n for i in range(n + 1)]
    members = first4.tolist()
    return [(bounds[i], bounds[i + 1], t, b if b >= 0 else None, c,
             [blocks[j] for j in members[4 * i:4 * i + 4] if j >= 0])
            for i, (t, b, c) in enumerate(zip(total, best, count, strict=True))]


def _cell_title(start: int, end: int, total: int, count: int, members: list[Block],
                m: HeapMap, colours: Colours) -> str:
    lines = [f"0x{start:x}-0x{end:x}: {total:,} of {end - start:,} bytes used"]
    for b in members:
        what = colours.label.get(colours.key(b, m.stacks)) if colours.by_tag else \
            stack_name(m.stacks.get(b.node, ()))
        lines.append(f"0x{b.addr:x}, {b.size:,} bytes, {what}")
    if count > 4:
        lines.append(f"and {count - 4:,} more blocks")
    return "\n".join(lines)


def map_svg(m: HeapMap, colours: Colours, path: str) -> str:
    """One moment's map: the text summary (heapmap.py's) and an SVG of its regions' cells."""
    text = heap_map_text(m, path)
    if not m.blocks:
        return f'<pre class="map">{escape(text)}</pre>'
    rows: list[str] = []
    y = 0
    at = 0
    numbers = colours.numbers_of(m)
    drawn = set(sorted(range(len(m.regions)), key=lambda i: -(m.regions[i].hi - m.regions[i].lo))
                [:MAX_REGIONS])
    for i, region in enumerate(m.regions):
        first = at
        while at < len(m.blocks) and m.blocks[at].addr - 16 < region.hi:
            at += 1
        if i not in drawn:
            continue
        rows.append(f'<text x="0" y="{y + 12}">0x{region.lo:x}-0x{region.hi:x} '
                    f'({human_bytes(region.hi - region.lo)}): {region.blocks:,} blocks, '
                    f'fragmentation {percent(region.fragmentation)}</text>')
        y += 16
        cells = cell_figures(region.lo, region.hi, m.blocks[first:at], numbers[first:at],
                             len(colours.numbered))
        for i, (start, end, total, best, count, members) in enumerate(cells):
            if 2 * total <= end - start or best is None:
                fill = "url(#hatch)"
            else:
                fill = colours.of(colours.numbered[best])
            x, row = (i % PER_ROW) * CELL, i // PER_ROW
            title = _cell_title(start, end, total, count, members, m, colours)
            rows.append(f'<rect class="cell" x="{x}" y="{y + row * CELL_H}" width="{CELL - 1}" '
                        f'height="{CELL_H - 1}" fill="{fill}" data-lo="0x{start:x}">'
                        f"<title>{escape(title)}</title></rect>")
        y += ((len(cells) - 1) // PER_ROW + 1) * CELL_H + 10
    svg = (f'<svg class="heapmap" viewBox="0 0 {WIDTH} {y}" width="{WIDTH}" height="{y}">'
           + _HATCH + "\n".join(rows) + "</svg>")
    if len(m.regions) > len(drawn):
        svg += (f'\n<p class="note">{len(m.regions) - len(drawn):,} smaller regions are not '
                "drawn: the summary below lists them.</p>")
    return svg + f'\n<pre class="map">{escape(text)}</pre>'


def legend(colours: Colours, maps: list[HeapMap]) -> str:
    """The colours' meanings, the largest first, and the free runs' hatching."""
    weight = colours.weights(maps)
    keys = sorted(colours.colour, key=lambda k: (-weight.get(k, 0), colours.label[k]))
    items = [(colours.colour[k], colours.label[k]) for k in keys]
    if not colours.by_tag and len(weight) > len(colours.colour):
        others = len(weight) - len(colours.colour)
        items.append((OTHER, f"{others:,} other stack{'s' if others != 1 else ''}"))
    items.append((FREE, "free (between live blocks)"))
    what = "tag" if colours.by_tag else ("allocation stack (its innermost frame; stacks that share "
                                         "it, by their first frame that differs)")
    return (f'<p class="note">Each cell is coloured by the {what} with most bytes in it; '
            "hatched: mostly free. Hover a cell for its blocks.</p><div class=\"legend\">"
            + "".join(f'<span class="key"><span class="sw" style="background:{c}"></span>'
                      f"{escape(label)}</span>" for c, label in items) + "</div>")
