"""The heap walk's loops in C (gdb_ext/scan/heapwalk.c) give what their Python reference
(dbgkit.core.heap.chunks) gives, on random heaps: chunks of random sizes and in-use bits, an
older heap's fencepost, corrupt size words (too small, misaligned, mmapped, past the end), too
few slots, and safe-linked lists that leave the heap, hit no chunk or a chunk of another size."""

from __future__ import annotations

import random
import struct
from array import array

import pytest
from dbgkit.core import reach_fast
from dbgkit.core.heap import chunks as ch

BASE = 0x5555_0000_0000


@pytest.fixture(autouse=True)
def _library_built() -> None:
    lib = reach_fast.library()
    assert lib is not None and hasattr(lib, "mds_heap_chunks"), (
        f"{reach_fast.library_path()} missing or without mds_heap_chunks: run `make build`")


def _heap(rng: random.Random) -> tuple[bytearray, int, bool]:
    """A heap's bytes, its limit (the top chunk's offset or the end) and whether it ends at a
    fencepost; sometimes with one size word spoilt."""
    data = bytearray()
    for _ in range(rng.randrange(0, 200)):
        size = 16 * rng.randrange(2, 40)
        chunk = bytearray(size)
        struct.pack_into("<QQ", chunk, 0, rng.getrandbits(64), size | rng.getrandbits(1))
        struct.pack_into("<Q", chunk, 16, rng.getrandbits(64))
        data += chunk
    fencepost = rng.random() < 0.3
    limit = len(data)
    if fencepost:
        data += struct.pack("<QQ", 0, 16 | 1) + struct.pack("<QQ", 0, 1)
        limit = len(data)
    else:
        data += struct.pack("<QQ", 0, 0x21000 | rng.getrandbits(1))  # the top chunk's header
    if data and rng.random() < 0.4:
        at = 16 * rng.randrange(0, max(1, limit // 16))
        bad = rng.choice([0, 8, 24, 0x1002, 1 << 40, 0x38, 0x33 | 2])
        struct.pack_into("<Q", data, at + 8, bad)
    return data, limit, fencepost


@pytest.mark.parametrize("seed", range(120))
def test_chunks_and_blocks_are_the_references(seed: int) -> None:
    rng = random.Random(seed)
    data, limit, fencepost = _heap(rng)
    cap = rng.choice([None, None, rng.randrange(0, 50)])
    data = bytes(data)
    fast = ch.heap_chunks(data, BASE, limit, fencepost, cap)
    ref = ch.heap_chunks(data, BASE, limit, fencepost, cap, python=True)
    assert (fast.addrs, fast.sizes, fast.used, fast.end, fast.at) == \
        (ref.addrs, ref.sizes, bytearray(ref.used), ref.end, ref.at)
    skip = array("Q", sorted(rng.sample(list(ref.addrs), k=min(len(ref.addrs), 5))
                             + [BASE - 16, BASE + (1 << 30)]))
    assert ch.heap_blocks(fast, skip) == ch.heap_blocks(ref, skip, python=True)


@pytest.mark.parametrize("seed", range(60))
def test_lists_are_the_references(seed: int) -> None:
    """A fastbin of 48-byte chunks linked at random through a heap of 48- and 64-byte chunks,
    ending at NULL, at an address outside, inside a chunk, at a chunk of 64 bytes or in a loop."""
    rng = random.Random(seed)
    n = rng.randrange(1, 300)
    sizes = array("Q", (rng.choice([48, 64]) for _ in range(n)))
    addrs = array("Q")
    at = BASE
    for s in sizes:
        addrs.append(at)
        at += s
    data = bytearray(at - BASE + 16)
    small = [a for a, s in zip(addrs, sizes, strict=True) if s == 48]
    order = rng.sample(small, k=rng.randrange(0, len(small) + 1))
    ends = [0, BASE - 4096, BASE + 8, rng.choice(addrs), order[0] if order else 0]
    last = rng.choice(ends)
    for a, b in zip(order, (order + [last])[1:], strict=True):
        struct.pack_into("<Q", data, a - BASE + 16, ((a + 16) >> 12) ^ b)
    head = order[0] if order else rng.choice(ends)
    chunks = ch.Chunks(addrs, sizes, bytearray(b"\x01" * n), ch.END_LIMIT, 0)
    cap = rng.choice([1 << 22, rng.randrange(0, 10)])
    assert ch.heap_list(bytes(data), BASE, head, 48, chunks, cap) == \
        ch.heap_list(bytes(data), BASE, head, 48, chunks, cap, python=True)
