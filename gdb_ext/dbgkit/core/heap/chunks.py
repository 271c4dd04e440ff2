"""The walk's two loops over every chunk: a heap's chunks by their size words (`heap_chunks`) and
the blocks in use among them (`heap_blocks`). They run in libmemdump_scan.so (gdb_ext/scan/
heapwalk.c) when it loads, else here: the Python below is the reference the C is tested against
(gdb_ext/tests/test_heapwalk_chunks.py, on random and corrupt heaps)."""

from __future__ import annotations

import bisect
import ctypes
import struct
from array import array
from typing import NamedTuple

from .. import reach_fast

__all__ = ["END_BAD", "END_FENCEPOST", "END_FULL", "END_LIMIT", "Chunks", "addr", "heap_blocks",
           "heap_chunks", "heap_list", "sorted_addresses"]

END_LIMIT, END_FENCEPOST, END_BAD, END_FULL = 0, 1, 2, 3
_PREV_INUSE, _IS_MMAPPED, _MINSIZE, _ALIGN = 1, 2, 32, 16
_U64 = struct.Struct("<Q")


class Chunks(NamedTuple):
    """One heap's chunks: addresses and sizes (ascending), in use (1) or not, how the walk ended
    (END_*) and the offset of a bad size word (END_BAD, END_FULL)."""

    addrs: array
    sizes: array
    used: bytearray
    end: int
    at: int


def _py_heap_chunks(data: bytes, base: int, limit: int, fencepost: bool, cap: int) -> Chunks:
    unpack = _U64.unpack_from
    addrs, sizes, used = array("Q"), array("Q"), bytearray()
    p, is_open = 0, False
    while p < limit:
        if p + 16 > len(data):
            return Chunks(addrs, sizes, used, END_BAD, p)
        size = unpack(data, p + 8)[0]
        csize = size & ~7
        if is_open:
            used[-1] = size & _PREV_INUSE
            is_open = False
        if csize == 16 and fencepost:
            return Chunks(addrs, sizes, used, END_FENCEPOST, 0)
        if csize < _MINSIZE or csize % _ALIGN or p + csize > limit or size & _IS_MMAPPED:
            return Chunks(addrs, sizes, used, END_BAD, p)
        if len(addrs) == cap:
            return Chunks(addrs, sizes, used, END_FULL, p)
        addrs.append(base + p)
        sizes.append(csize)
        used.append(1)
        is_open = True
        p += csize
    if is_open and not fencepost and p == limit and p + 16 <= len(data):
        used[-1] = unpack(data, p + 8)[0] & _PREV_INUSE
    return Chunks(addrs, sizes, used, END_LIMIT, 0)


def _lib():
    lib = reach_fast.library()
    if lib is None or not hasattr(lib, "mds_heap_chunks"):
        return None
    if lib.mds_heap_chunks.restype is not ctypes.c_uint64:
        u64, ptr = ctypes.c_uint64, ctypes.c_void_p
        lib.mds_heap_chunks.argtypes = [ctypes.c_char_p, u64, u64, u64, ctypes.c_int, ptr, ptr,
                                        ptr, u64, ctypes.POINTER(ctypes.c_int),
                                        ctypes.POINTER(u64)]
        lib.mds_heap_chunks.restype = u64
        lib.mds_heap_blocks.argtypes = [ptr, ptr, ptr, u64, ptr, u64, ptr, ptr]
        lib.mds_heap_blocks.restype = u64
        lib.mds_heap_list.argtypes = [ctypes.c_char_p, u64, u64, u64, u64, ptr, ptr, u64, ptr,
                                      u64, ctypes.POINTER(u64)]
        lib.mds_heap_list.restype = u64
    return lib


def addr(buf) -> int:
    """The address of the first byte of BUF (an array or a bytearray; 0 when it is empty), as
    the library's functions take their arrays."""
    if isinstance(buf, array):
        return buf.buffer_info()[0] if len(buf) else 0
    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf)) if len(buf) else 0


def heap_chunks(data: bytes, base: int, limit: int, fencepost: bool, cap: int | None = None,
                *, python: bool = False) -> Chunks:
    """The chunks of the heap DATA holds from address BASE up to offset LIMIT (the top chunk's,
    DATA holding its header; or, FENCEPOST, the end of an older heap, where glibc's 16-byte
    fencepost chunk ends the walk). CAP: most chunks (default: as many as fit). PYTHON: the
    reference, even when the library loads."""
    cap = limit // _MINSIZE + 1 if cap is None else cap
    lib = None if python else _lib()
    if lib is None:
        return _py_heap_chunks(data, base, limit, fencepost, cap)
    n_max = min(cap, limit // _MINSIZE + 1)
    addrs, sizes = array("Q", bytes(8 * n_max)), array("Q", bytes(8 * n_max))
    used = bytearray(n_max)
    end, at = ctypes.c_int(), ctypes.c_uint64()
    n = lib.mds_heap_chunks(data, len(data), base, limit, int(fencepost), addr(addrs),
                            addr(sizes), addr(used), cap, ctypes.byref(end), ctypes.byref(at))
    del addrs[n:], sizes[n:], used[n:]
    return Chunks(addrs, sizes, used, end.value, at.value)


def heap_blocks(chunks: Chunks, skip: array, *, python: bool = False) -> tuple[array, array]:
    """(block addresses, usable sizes) of the chunks in use that SKIP (sorted chunk addresses:
    free on a list, glibc's own) does not name: chunk + 16, size - 8."""
    lib = None if python else _lib()
    if lib is None:
        gone = set(skip)
        starts, sizes = array("Q"), array("Q")
        for a, s, u in zip(chunks.addrs, chunks.sizes, chunks.used, strict=True):
            if u and a not in gone:
                starts.append(a + 16)
                sizes.append(s - 8)
        return starts, sizes
    n = len(chunks.addrs)
    starts, sizes = array("Q", bytes(8 * n)), array("Q", bytes(8 * n))
    used = chunks.used if isinstance(chunks.used, bytearray) else bytearray(chunks.used)
    out = lib.mds_heap_blocks(addr(chunks.addrs), addr(chunks.sizes), addr(used), n,
                              addr(skip), len(skip), addr(starts), addr(sizes))
    del starts[out:], sizes[out:]
    return starts, sizes


def heap_list(data: bytes, base: int, head: int, csize: int, chunks: Chunks, cap: int, *,
              python: bool = False) -> tuple[array, int]:
    """The chunks of a safe-linked list (a fastbin: each `fd` stored as (its address >> 12) ^
    next) from HEAD while they are chunks of CSIZE bytes of this heap (DATA from BASE, CHUNKS),
    CAP at most; and where it stopped: 0 at the list's end, else the chunk not taken."""
    lib = None if python else _lib()
    if lib is None:
        out = array("Q")
        p = head
        addrs, sizes = chunks.addrs, chunks.sizes
        while p:
            if p < base or p - base + 24 > len(data) or len(out) == cap:
                break
            i = bisect.bisect_left(addrs, p)
            if i == len(addrs) or addrs[i] != p or sizes[i] != csize:
                break
            out.append(p)
            p = ((p + 16) >> 12) ^ _U64.unpack_from(data, p - base + 16)[0]
        return out, p
    n = len(chunks.addrs)
    out = array("Q", bytes(8 * cap))
    nxt = ctypes.c_uint64()
    count = lib.mds_heap_list(data, len(data), base, head, csize, addr(chunks.addrs),
                              addr(chunks.sizes), n, addr(out), cap,
                              ctypes.byref(nxt))
    del out[count:]
    return out, nxt.value


def sorted_addresses(addrs: array) -> array:
    """ADDRS sorted (by the library's radix sort, mds_sort, when it loads); a repeat (a corrupt
    heap's chunk on two lists) stays: heap_blocks skips it all the same."""
    lib = reach_fast.library()
    out = array("Q", addrs)
    ballast = array("Q", bytes(8 * len(out)))  # mds_sort moves a size with each address
    if lib is None or lib.mds_sort(addr(out), addr(ballast), len(out)) != 0:
        out = array("Q", sorted(out))
    return out
