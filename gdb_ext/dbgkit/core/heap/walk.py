"""Every chunk glibc's malloc holds, from its own state: the arenas (main_arena and the ring of
thread arenas through `next`), each heap (the main arena's from mp_.sbrk_base, a thread arena's
sub-heaps through heap_info.prev) walked chunk by chunk by their size words up to the top chunk,
the mmapped chunks (lists.mmapped_chunks), and the free lists (lists.py) that tell which chunks
the walk saw in use are in fact free (tcache, fastbins: their next chunk still says in use).

A chunk is in use when the next chunk's PREV_INUSE bit is set and it is on no tcache or fastbin
list; its block starts 16 bytes in and holds malloc_usable_size() bytes: its size less 8 (less
16 for an mmapped chunk). A chunk that breaks the walk (a size word that is no chunk size, or
runs past the heap) is a problem reported where it is; the walk goes on with the next heap and
the next arena.
"""

from __future__ import annotations

import bisect
import re
import struct
from array import array
from dataclasses import dataclass, field

from ..reach_fast import SortedBlocks
from .chunks import END_BAD, END_FULL, Chunks, heap_blocks, heap_chunks, sorted_addresses
from .layout import GLIBC_236, Layout
from .libc import Libc, find_libc, mapped_libc, other_allocator
from .lists import arena_bins, fastbin_chunks, mmapped_chunks, tcache_of

__all__ = ["Arena", "HeapWalk", "WalkError", "walk"]

_PREV_INUSE, _IS_MMAPPED, _NON_MAIN = 1, 2, 4
_MINSIZE, _ALIGN = 32, 16
_U64 = struct.Struct("<Q")


class WalkError(Exception):
    """The heap cannot be walked at all (one line, for the user)."""


@dataclass
class Arena:
    address: int
    main: bool
    top: int = 0
    system_mem: int = 0
    heaps: list[tuple[int, int]] = field(default_factory=list)
    live_blocks: int = 0
    live_bytes: int = 0
    free_chunks: int = 0
    free_bytes: int = 0


@dataclass
class HeapWalk:
    """The walk's answer. blocks: block address -> usable size (what the program holds, in
    address order: two arrays); free: chunk address -> (size, where: tcache, fastbin, bin, top);
    internal: the blocks that are glibc's own (every thread's tcache_perthread_struct)."""

    blocks: SortedBlocks = field(default_factory=lambda: SortedBlocks(array("Q"), array("Q")))
    free: dict[int, tuple[int, str]] = field(default_factory=dict)
    internal: dict[int, int] = field(default_factory=dict)
    arenas: list[Arena] = field(default_factory=list)
    mmapped: int = 0
    symbols: str = "table"
    problems: list[str] = field(default_factory=list)
    #: (address, bytes) of each heap as it was read: what blocktypes.py reads the blocks from
    heaps: list[tuple[int, bytes]] = field(default_factory=list)


@dataclass
class _Heap:
    """One walked part of a heap: its arena, first chunk, bytes and chunks."""

    arena: Arena
    base: int
    data: bytes
    chunks: Chunks


class _Mem:
    """Words of the process, from the heaps already read when they hold them."""

    def __init__(self, read) -> None:
        self.read = read
        self.heaps: list[_Heap] = []
        self._bases: list[int] = []

    def add(self, heap: _Heap) -> None:
        i = bisect.bisect(self._bases, heap.base)
        self._bases.insert(i, heap.base)
        self.heaps.insert(i, heap)

    def heap_of(self, addr: int) -> _Heap | None:
        i = bisect.bisect(self._bases, addr) - 1
        if i >= 0 and addr < self.heaps[i].base + len(self.heaps[i].data):
            return self.heaps[i]
        return None

    def word(self, addr: int) -> int | None:
        heap = self.heap_of(addr)
        if heap is not None and addr + 8 <= heap.base + len(heap.data):
            return _U64.unpack_from(heap.data, addr - heap.base)[0]
        try:
            return _U64.unpack(self.read(addr, 8))[0]
        except (OSError, struct.error):
            return None


class ChunkSizes:
    """chunk address -> size of every walked chunk (`get`, as a dictionary's), over the heaps'
    arrays."""

    def __init__(self, mem: _Mem) -> None:
        self.mem = mem

    def get(self, chunk: int, default: int | None = None) -> int | None:
        heap = self.mem.heap_of(chunk)
        if heap is None:
            return default
        addrs = heap.chunks.addrs
        i = bisect.bisect_left(addrs, chunk)
        return heap.chunks.sizes[i] if i < len(addrs) and addrs[i] == chunk else default

    __getitem__ = get


def _plausible_arena(mem: _Mem, addr: int, layout: Layout, anon) -> bool:
    """Whether ADDR holds a malloc_state: a small mutex and flags, the top in anonymous memory,
    every bin empty (pointing at its own header) or pointing into anonymous memory, one empty."""
    try:
        data = mem.read(addr, layout.sizes["malloc_state"])
    except OSError:
        return False
    mutex, flags, fast = struct.unpack_from("<iii", data, 0)
    top = _U64.unpack_from(data, layout.off("malloc_state", "top"))[0]
    if mutex not in (0, 1, 2) or not 0 <= flags < 16 or fast not in (0, 1) or not anon(top):
        return False
    bins = layout.off("malloc_state", "bins")
    empty = 0
    for i in range(1, layout.bins // 2):
        header = addr + bins + (i - 1) * 16 - 16
        fd, bk = struct.unpack_from("<QQ", data, bins + (i - 1) * 16)
        if fd == header and bk == header:
            empty += 1
        elif not (anon(fd) and anon(bk)):
            return False
    return empty > 0


def _find_main_arena(mem: _Mem, libc: Libc, layout: Layout, anon) -> int | None:
    """Without symbols: the malloc_state in the C library's data (main_arena is its only one)."""
    top_off = layout.off("malloc_state", "top")
    for m in libc.data:
        try:
            data = mem.read(m.start, m.end - m.start)
        except OSError:
            continue
        for pos in range(top_off, len(data) - 8, 8):
            value = _U64.unpack_from(data, pos)[0]
            if value and anon(value) and _plausible_arena(mem, m.start + pos - top_off, layout,
                                                          anon):
                return m.start + pos - top_off
    return None


def _walk_heap(mem: _Mem, arena: Arena, first: int, end: int, top: int | None,
               problems: list[str]) -> None:
    """Chunks from FIRST up to TOP (the arena's top chunk, when in this heap) or END (an older
    heap's end, marked by glibc's fencepost), added to MEM's heaps."""
    try:
        data = mem.read(first, end - first)
    except OSError as exc:
        problems.append(f"arena {arena.address:#x}: heap {first:#x}-{end:#x} cannot be read "
                        f"({exc.strerror or exc})")
        return
    limit = (top if top is not None else end) - first
    chunks = heap_chunks(data, first, limit, top is None)
    if chunks.end in (END_BAD, END_FULL):
        size = _U64.unpack_from(data, chunks.at + 8)[0] if chunks.at + 16 <= len(data) else 0
        problems.append(f"arena {arena.address:#x}: chunk at {first + chunks.at:#x} has size "
                        f"word {size:#x}: expected a multiple of 16, at least 32, not mmapped, "
                        f"ending by {first + limit:#x}; rest of this heap not walked")
    mem.add(_Heap(arena, first, data, chunks))


def walk(source, *, layout: Layout = GLIBC_236, debug_root: str | None = None) -> HeapWalk:
    """Walk glibc's heap of SOURCE (source.LiveProcess or source.CoreFile)."""
    maps = source.maps
    other = other_allocator(maps)
    if other is not None:
        raise WalkError(f"{other} is mapped: another allocator replaces glibc's malloc; its heap "
                        "is not walked")
    libc = find_libc(maps, debug_root) if debug_root is not None else find_libc(maps)
    if libc is None and mapped_libc(maps) is not None:
        raise WalkError(f"{mapped_libc(maps)}, the C library the {source.kind} names, cannot be "
                        "read: the walk needs the very file the process ran (copy it there with "
                        "the core)")
    if libc is None:
        raise WalkError("no glibc C library (libc.so.6) is mapped: a static program or another "
                        "C library; its heap is not walked")
    mem = _Mem(source.read)
    anon_maps = [m for m in maps if m.writable and not m.file_backed]
    anon_starts = [m.start for m in anon_maps]

    def anon(addr: int) -> bool:
        i = bisect.bisect(anon_starts, addr) - 1
        return i >= 0 and addr < anon_maps[i].end

    result = HeapWalk(symbols="debug" if libc.main_arena is not None else "table")
    main = libc.main_arena
    if main is None:
        main = _find_main_arena(mem, libc, layout, anon)
        if main is None:
            raise WalkError(f"main_arena not found in {libc.path}'s data (no debug symbols: "
                            "install libc6-dbg)")
    sbrk_base = mem.word(libc.mp + layout.off("malloc_par", "sbrk_base")) if libc.mp else None
    addr, seen = main, set()
    while addr not in seen and len(seen) < 4096:
        seen.add(addr)
        arena = Arena(addr, addr == main)
        result.arenas.append(arena)
        top = mem.word(addr + layout.off("malloc_state", "top"))
        arena.top = top or 0
        arena.system_mem = mem.word(addr + layout.off("malloc_state", "system_mem")) or 0
        if arena.main and (top == 0 or addr <= (top or 0) < addr + layout.sizes["malloc_state"]):
            # no heap yet: before the first malloc main_arena is zeros, then its top is the
            # arena's own unsorted bin header (initial_top) until the heap is made
            arena.top = 0
        elif top is None or not anon(top):
            result.problems.append(f"arena {addr:#x}: top {top or 0:#x} is not in the heap")
        elif arena.main:
            start = sbrk_base or next(m.start for m in anon_maps if m.start <= top < m.end)
            top_size = (mem.word(top + 8) or 0) & ~7
            arena.heaps.append((start, top + top_size))
            _walk_heap(mem, arena, start, top + 16, top, result.problems)
        else:
            _thread_heaps(mem, arena, top, layout, result.problems)
        nxt = mem.word(addr + layout.off("malloc_state", "next"))
        if not nxt:
            result.problems.append(f"arena {addr:#x}: next pointer "
                                   f"{'is NULL' if nxt == 0 else 'cannot be read'}")
            break
        addr = nxt
    _classify(mem, source, libc, layout, result)
    result.heaps = [(h.base, h.data) for h in mem.heaps]
    return result


def _thread_heaps(mem: _Mem, arena: Arena, top: int, layout: Layout,
                  problems: list[str]) -> None:
    """A thread arena's heaps, from the one holding its top back through heap_info.prev."""
    heap: int | None = top & ~(layout.heap_max - 1)
    info = layout.sizes["_heap_info"]
    state = layout.sizes["malloc_state"]
    count = 0
    while heap and count < 1024:
        count += 1
        ar_ptr = mem.word(heap + layout.off("_heap_info", "ar_ptr"))
        size = mem.word(heap + layout.off("_heap_info", "size"))
        if ar_ptr != arena.address or size is None or size > layout.heap_max:
            problems.append(f"arena {arena.address:#x}: heap_info at {heap:#x} names arena "
                            f"{ar_ptr or 0:#x} (size {size or 0:#x}): expected this arena; "
                            "its older heaps are not walked")
            return
        first = heap + info
        if heap <= arena.address < heap + size:
            first = arena.address + state
            first += -(first + 16) % _ALIGN
        arena.heaps.append((heap, heap + size))
        in_top = heap <= top < heap + size
        _walk_heap(mem, arena, first, top + 16 if in_top else heap + size,
                   top if in_top else None, problems)
        heap = mem.word(heap + layout.off("_heap_info", "prev"))


def _count_free(arena: Arena, chunks: int, nbytes: int) -> None:
    arena.free_chunks += chunks
    arena.free_bytes += nbytes


def _classify(mem: _Mem, source, libc: Libc, layout: Layout, result: HeapWalk) -> None:
    """Split the walked chunks into blocks in use, free chunks and glibc's own."""
    sizes = ChunkSizes(mem)
    free: dict[int, tuple[int, str]] = {}
    for heap in mem.heaps:
        c = heap.chunks
        for i in (m.start() for m in _FREE.finditer(c.used)):
            free[c.addrs[i]] = (c.sizes[i], "bin")
            _count_free(heap.arena, 1, c.sizes[i])
    skip = array("Q")  # chunks in use that are no block: on a list, glibc's own
    for arena in result.arenas:
        if not arena.heaps:  # no heap yet (its bins not even set up), or none could be walked
            continue
        if arena.top:
            top_size = (mem.word(arena.top + 8) or 0) & ~7
            free[arena.top] = (top_size, "top")
            _count_free(arena, 1, top_size)
        for csize, fast in fastbin_chunks(mem, arena.address, layout, sizes, result.problems):
            free.update(dict.fromkeys(fast, (csize, "fastbin")))
            skip.extend(fast)
            _count_free(arena, len(fast), csize * len(fast))
        arena_bins(mem, arena.address, layout, free, result.problems)
    for thread in source.threads:
        tcache = tcache_of(mem, thread, libc, layout, sizes, result.problems)
        if tcache is None:
            continue
        block, entries = tcache
        result.internal[block] = sizes[block - 16] - 8
        skip.append(block - 16)
        for c in entries:
            free[c] = (sizes[c], "tcache")
            skip.append(c)
            _count_free(mem.heap_of(c).arena, 1, sizes[c])
    result.free = free
    skipped = sorted_addresses(skip)
    segments = []
    for heap in mem.heaps:
        starts, bsizes = heap_blocks(heap.chunks, skipped)
        heap.arena.live_blocks += len(starts)
        heap.arena.live_bytes += sum(bsizes)
        segments.append((heap.base, starts, bsizes))
    stacks = [t.sp for t in source.threads]
    mm = mmapped_chunks(mem, source.maps, [h for a in result.arenas for h in a.heaps], stacks)
    segments.extend((c, array("Q", [c + 16]), array("Q", [s - 16])) for c, s in mm)
    result.mmapped = len(mm)
    if libc.mp is not None:
        n = mem.word(libc.mp + layout.off("malloc_par", "n_mmaps"))
        if n is not None and n & 0xFFFFFFFF != len(mm):
            result.problems.append(f"mp_.n_mmaps says {n & 0xFFFFFFFF} mmapped chunks, "
                                   f"{len(mm)} found in the mappings")
    segments.sort(key=lambda seg: seg[0])
    all_starts, all_sizes = array("Q"), array("Q")
    for _, starts, bsizes in segments:
        all_starts.extend(starts)
        all_sizes.extend(bsizes)
    result.blocks = SortedBlocks(all_starts, all_sizes)


#: a chunk the walk found free (its next chunk's PREV_INUSE clear)
_FREE = re.compile(b"\x00")
