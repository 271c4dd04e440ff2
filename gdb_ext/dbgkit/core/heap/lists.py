"""glibc malloc's lists of free chunks (fastbins, tcache: safe-linked since 2.32; the unsorted,
small and large bins: doubly linked through their headers in the arena) and its mmapped chunks,
which no list holds: they are found in the process's anonymous mappings by their headers."""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from typing import Protocol

from ..procfs import Mapping
from .chunks import heap_list
from .layout import Layout

__all__ = ["arena_bins", "fastbin_chunks", "mmapped_chunks", "tcache_of"]

class SizeLookup(Protocol):
    """chunk address -> size of the walked chunks (walk.ChunkSizes), None for no chunk."""

    def get(self, chunk: int, default: int | None = None) -> int | None: ...


_PAGE = 4096
_LIMIT = 1 << 22  # entries followed in one list before it is called a loop
_TCACHE_CHUNK = 0x290  # request2size(sizeof(tcache_perthread_struct))


def _reveal(pos: int, ptr: int) -> int:
    """glibc's REVEAL_PTR: a tcache or fastbin `next` is stored as (its own address >> 12) ^ ptr."""
    return (pos >> 12) ^ ptr


def fastbin_chunks(mem, arena: int, layout: Layout, sizes: SizeLookup,
                   problems: list[str]) -> list[tuple[int, array]]:
    """(chunk size, chunks) of ARENA's fastbins, followed through the heaps the walk read
    (MEM.heap_of); a pointer to no walked chunk (or of another size) is reported and ends its
    list."""
    out: list[tuple[int, array]] = []
    total = 0
    base = arena + layout.off("malloc_state", "fastbinsY")
    for i in range(layout.fastbins):
        p = mem.word(base + 8 * i)
        csize = 32 + 16 * i
        while p:
            heap = mem.heap_of(p)
            taken, nxt = (heap_list(heap.data, heap.base, p, csize, heap.chunks, _LIMIT - total)
                          if heap is not None else (array("Q"), p))
            out.append((csize, taken))
            total += len(taken)
            if heap is not None and nxt and len(taken) == min(_LIMIT - total + len(taken),
                                                               len(heap.data) // 32 + 1):
                problems.append(f"arena {arena:#x}: fastbin {i} loops (more entries than its "
                                "heap has chunks)")
                break
            if not taken and nxt:
                problems.append(f"arena {arena:#x}: fastbin {i} holds {p:#x}: expected a chunk "
                                f"of {csize} bytes in the arena's heap")
                break
            p = nxt
    return out


def arena_bins(mem, arena: int, layout: Layout, free: dict[int, tuple[int, str]],
               problems: list[str]) -> None:
    """Check ARENA's unsorted, small and large bins against the walk: every chunk on them must be
    one the walk found free (its next chunk's PREV_INUSE clear); a pointer elsewhere is reported
    and ends that bin."""
    bins = arena + layout.off("malloc_state", "bins")
    for i in range(1, layout.bins // 2):
        header = bins + (i - 1) * 16 - 16
        p = mem.word(header + 16)
        n = 0
        while p is not None and p != header and n < _LIMIT:
            n += 1
            if free.get(p, (0, ""))[1] != "bin":
                problems.append(f"arena {arena:#x}: bin {i} holds {p:#x}: expected a free chunk "
                                "of the arena's heap")
                break
            p = mem.word(p + 16)


def _tcache_entries(mem, block: int, layout: Layout, sizes: SizeLookup,
                    problems: list[str] | None = None, tid: int = 0) -> list[int] | None:
    """The chunks on the tcache_perthread_struct at BLOCK. PROBLEMS None: None when it is not
    one (a count that does not match its list, an entry that is no chunk of its bin's size);
    else such a bin is reported there (as thread TID's) and the others are read on."""
    try:
        data = mem.read(block, layout.sizes["tcache_perthread_struct"])
    except OSError:
        return None
    counts = struct.unpack_from(f"<{layout.tcache_bins}H", data,
                                layout.off("tcache_perthread_struct", "counts"))
    heads = struct.unpack_from(f"<{layout.tcache_bins}Q", data,
                               layout.off("tcache_perthread_struct", "entries"))
    out = []
    for i, (count, e) in enumerate(zip(counts, heads, strict=True)):
        n = 0
        while e and n <= count:
            if sizes.get(e - 16) != 32 + 16 * i:
                if problems is None:
                    return None
                problems.append(f"thread {tid}: tcache bin {i} holds {e:#x}: expected a block "
                                f"of a {32 + 16 * i}-byte chunk in the arena's heap")
                break
            out.append(e - 16)
            n += 1
            nxt = mem.word(e)
            e = _reveal(e, nxt) if nxt is not None else 0
        else:
            if n != count:
                if problems is None:
                    return None
                problems.append(f"thread {tid}: tcache bin {i} counts {count} chunks, its list "
                                f"holds {n}")
    return out


def tcache_of(mem, thread, libc, layout: Layout, sizes: SizeLookup,
              problems: list[str]) -> tuple[int, list[int]] | None:
    """THREAD's tcache (the block of its tcache_perthread_struct, the chunks on it), None when
    the thread has none yet. Its address is the TLS variable `tcache`, at fs_base plus the value
    in the C library's GOT slot of its TPOFF64 relocation: the slot whose addend is tcache's TLS
    offset (libc6-dbg's symbol: a bad list is then reported, the others read), else each of the
    C library's slots in turn whose word points at a block of 0x290 bytes that holds a
    consistent tcache."""
    exact = libc.tcache_tls is not None
    slots = libc.tls_slots
    if exact:
        slots = {a: v for a, v in slots.items() if v == libc.tcache_tls}
    for slot in slots:
        tpoff = mem.word(slot)
        if tpoff is None:
            continue
        block = mem.word((thread.fs_base + tpoff) & 0xFFFFFFFFFFFFFFFF)
        if not block or sizes.get(block - 16) != _TCACHE_CHUNK:
            continue
        entries = _tcache_entries(mem, block, layout, sizes, problems if exact else None,
                                  thread.tid)
        if entries is not None:
            return block, entries
    return None


def mmapped_chunks(mem, maps: Sequence[Mapping], arena_heaps: Sequence[tuple[int, int]],
                   stacks: Sequence[int]) -> list[tuple[int, int]]:
    """(chunk address, size) of glibc's mmapped chunks. glibc lists them nowhere: each is the
    start of an anonymous private mapping (the kernel may merge it with its neighbours), its
    header an aligned prev_size (0 but for memalign) and a size with IS_MMAPPED set and
    NON_MAIN_ARENA clear whose chunk ends in the mapping on a page boundary. Looked for at each
    page of the anonymous writable mappings that are not [heap], a thread arena's heap or a
    thread's stack."""
    out = []
    for m in maps:
        if not (m.readable and m.writable) or m.file_backed or m.path.startswith("["):
            continue
        if any(lo < m.end and m.start < hi for lo, hi in arena_heaps) or \
                any(m.start <= sp < m.end for sp in stacks):
            continue
        at = m.start
        while at + 16 <= m.end:
            step = _PAGE
            try:
                prev_size, size = struct.unpack("<QQ", mem.read(at, 16))
            except OSError:
                at += step
                continue
            csize = size & ~7
            if size & 6 == 2 and csize >= _PAGE and prev_size % 16 == 0 and \
                    (prev_size + csize) % _PAGE == 0 and at + csize <= m.end and \
                    prev_size < _PAGE:
                out.append((at, csize))
                step = csize
            at += step
    return out
