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

import struct
from dataclasses import dataclass, field

from .layout import GLIBC_236, Layout
from .libc import Libc, find_libc, other_allocator
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
    """The walk's answer. blocks: block address -> usable size (what the program holds);
    free: chunk address -> (size, where: tcache, fastbin, bin, top); internal: the blocks that
    are glibc's own (every thread's tcache_perthread_struct)."""

    blocks: dict[int, int] = field(default_factory=dict)
    free: dict[int, tuple[int, str]] = field(default_factory=dict)
    internal: dict[int, int] = field(default_factory=dict)
    arenas: list[Arena] = field(default_factory=list)
    mmapped: int = 0
    symbols: str = "table"
    problems: list[str] = field(default_factory=list)


class _Mem:
    def __init__(self, read) -> None:
        self.read = read

    def word(self, addr: int) -> int | None:
        try:
            return _U64.unpack(self.read(addr, 8))[0]
        except (OSError, struct.error):
            return None


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
        for (pos,) in ((p,) for p in range(top_off, len(data) - 8, 8)):
            value = _U64.unpack_from(data, pos)[0]
            if value and anon(value) and _plausible_arena(mem, m.start + pos - top_off, layout,
                                                          anon):
                return m.start + pos - top_off
    return None


def _walk_heap(mem: _Mem, arena: Arena, first: int, end: int, top: int | None,
               out: list[tuple[int, int, bool]], problems: list[str]) -> None:
    """Chunks from FIRST up to TOP (the arena's top chunk, when in this heap) or END (an older
    heap's end, marked by glibc's fencepost): (address, size, in use) appended to OUT."""
    try:
        data = mem.read(first, end - first)
    except OSError as exc:
        problems.append(f"arena {arena.address:#x}: heap {first:#x}-{end:#x} cannot be read "
                        f"({exc.strerror or exc})")
        return
    unpack = _U64.unpack_from
    limit = (top if top is not None else end) - first
    p = 0
    prev: tuple[int, int] | None = None
    while p < limit:
        size = unpack(data, p + 8)[0]
        csize = size & ~7
        if prev is not None:
            out.append((prev[0], prev[1], bool(size & _PREV_INUSE)))
            prev = None
        if csize == 16 and top is None:  # the fencepost at an older heap's end
            return
        if csize < _MINSIZE or csize % _ALIGN or p + csize > limit or size & _IS_MMAPPED:
            problems.append(f"arena {arena.address:#x}: chunk at {first + p:#x} has size word "
                            f"{size:#x}: expected a multiple of 16, at least 32, not mmapped, "
                            f"ending by {first + limit:#x}; rest of this heap not walked")
            return
        prev = (first + p, csize)
        p += csize
    if prev is not None:
        if top is not None and p == limit:
            size = unpack(data, p + 8)[0] if p + 16 <= len(data) else 0
            out.append((prev[0], prev[1], bool(size & _PREV_INUSE)))
        else:
            out.append((prev[0], prev[1], True))


def walk(source, *, layout: Layout = GLIBC_236, debug_root: str | None = None) -> HeapWalk:
    """Walk glibc's heap of SOURCE (source.LiveProcess or source.CoreFile)."""
    maps = source.maps
    other = other_allocator(maps)
    if other is not None:
        raise WalkError(f"{other} is mapped: another allocator replaces glibc's malloc; its heap "
                        "is not walked")
    libc = find_libc(maps, debug_root) if debug_root is not None else find_libc(maps)
    if libc is None:
        raise WalkError("no glibc C library (libc.so.6) is mapped: a static program or another "
                        "C library; its heap is not walked")
    mem = _Mem(source.read)
    anon_maps = [m for m in maps if m.writable and not m.file_backed]

    def anon(addr: int) -> bool:
        return any(m.start <= addr < m.end for m in anon_maps)

    result = HeapWalk(symbols="debug" if libc.main_arena is not None else "table")
    main = libc.main_arena
    if main is None:
        main = _find_main_arena(mem, libc, layout, anon)
        if main is None:
            raise WalkError(f"main_arena not found in {libc.path}'s data (no debug symbols: "
                            "install libc6-dbg)")
    sbrk_base = mem.word(libc.mp + layout.off("malloc_par", "sbrk_base")) if libc.mp else None
    chunks: list[tuple[int, int, bool]] = []
    arena_heaps: list[tuple[int, int]] = []
    addr, seen = main, set()
    while addr not in seen and len(seen) < 4096:
        seen.add(addr)
        arena = Arena(addr, addr == main)
        result.arenas.append(arena)
        top = mem.word(addr + layout.off("malloc_state", "top"))
        arena.top = top or 0
        arena.system_mem = mem.word(addr + layout.off("malloc_state", "system_mem")) or 0
        if top is None or not anon(top):
            result.problems.append(f"arena {addr:#x}: top {top or 0:#x} is not in the heap")
        elif arena.main:
            start = sbrk_base or next(m.start for m in anon_maps if m.start <= top < m.end)
            top_size = (mem.word(top + 8) or 0) & ~7
            arena.heaps.append((start, top + top_size))
            _walk_heap(mem, arena, start, top + 16, top, chunks, result.problems)
        else:
            _thread_heaps(mem, arena, top, layout, chunks, result.problems)
            arena_heaps.extend(arena.heaps)
        nxt = mem.word(addr + layout.off("malloc_state", "next"))
        if nxt is None:
            result.problems.append(f"arena {addr:#x}: next pointer cannot be read")
            break
        addr = nxt
    _classify(mem, source, libc, layout, result, chunks, arena_heaps)
    return result


def _thread_heaps(mem: _Mem, arena: Arena, top: int, layout: Layout,
                  chunks: list[tuple[int, int, bool]], problems: list[str]) -> None:
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
                   top if in_top else None, chunks, problems)
        heap = mem.word(heap + layout.off("_heap_info", "prev"))


def _classify(mem: _Mem, source, libc: Libc, layout: Layout, result: HeapWalk,
              chunks: list[tuple[int, int, bool]], arena_heaps: list[tuple[int, int]]) -> None:
    """Split the walked chunks into blocks in use, free chunks and glibc's own."""
    sizes = {c: s for c, s, _ in chunks}
    free: dict[int, tuple[int, str]] = {}
    for c, s, used in chunks:
        if not used:
            free[c] = (s, "bin")
    for arena in result.arenas:
        if arena.top:
            free[arena.top] = ((mem.word(arena.top + 8) or 0) & ~7, "top")
        for c in fastbin_chunks(mem, arena.address, layout, sizes, result.problems):
            free[c] = (sizes[c], "fastbin")
        arena_bins(mem, arena.address, layout, free, result.problems)
    for thread in source.threads:
        tcache = tcache_of(mem, thread, libc, layout, sizes, result.problems)
        if tcache is None:
            continue
        block, entries = tcache
        result.internal[block] = sizes[block - 16] - 8
        for c in entries:
            free[c] = (sizes[c], "tcache")
    for c, s, _ in chunks:
        if c in free or c + 16 in result.internal:
            continue
        result.blocks[c + 16] = s - 8
    result.free = free
    stacks = [t.sp for t in source.threads]
    mm = mmapped_chunks(mem, source.maps, arena_heaps, stacks)
    for c, s in mm:
        result.blocks[c + 16] = s - 16
    result.mmapped = len(mm)
    if libc.mp is not None:
        n = mem.word(libc.mp + layout.off("malloc_par", "n_mmaps"))
        if n is not None and n & 0xFFFFFFFF != len(mm):
            result.problems.append(f"mp_.n_mmaps says {n & 0xFFFFFFFF} mmapped chunks, "
                                   f"{len(mm)} found in the mappings")
    for arena in result.arenas:
        for c, s, _ in chunks:
            if any(lo <= c < hi for lo, hi in arena.heaps):
                if c + 16 in result.blocks:
                    arena.live_blocks += 1
                    arena.live_bytes += s - 8
                elif c in free:
                    arena.free_chunks += 1
                    arena.free_bytes += s
