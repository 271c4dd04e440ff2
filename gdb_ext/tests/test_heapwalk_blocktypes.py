"""The block typing's loop in C (mds_block_types, gdb_ext/scan/blocktypes.c) gives what its
Python reference (dbgkit.core.heap.blocktypes.classify) gives, on random heaps: blocks starting
with a vptr, strings that fill their block or not (too short, unprintable, unterminated),
pointer arrays (into blocks, one past a block's end, outside, with a last word of slack)."""

from __future__ import annotations

import random
import struct
from array import array

import pytest
from dbgkit.core import reach_fast
from dbgkit.core.heap import blocktypes as bt

BASE = 0x5555_0000_0000
VPTRS = array("Q", [0x5555_4000_0a10, 0x7F00_0000_1010, 0x7F00_0000_2010])  # sorted


@pytest.fixture(autouse=True)
def _library_built() -> None:
    lib = reach_fast.library()
    assert lib is not None and hasattr(lib, "mds_block_types"), (
        f"{reach_fast.library_path()} missing or without mds_block_types: run `make build`")


def _heap(rng: random.Random) -> tuple[bytearray, array, array]:
    """A heap's bytes with blocks of random usable sizes and contents."""
    data = bytearray()
    starts, sizes = array("Q"), array("Q")
    for _ in range(rng.randrange(0, 150)):
        usable = 16 * rng.randrange(2, 12) - 8
        starts.append(BASE + len(data) + 16)
        sizes.append(usable)
        data += bytes(16 + usable)
    for start, usable in zip(starts, sizes, strict=True):
        off = start - BASE
        shape = rng.randrange(6)
        if shape == 0:
            struct.pack_into("<Q", data, off, rng.choice(VPTRS) + rng.choice([0, 0, 8]))
        elif shape == 1:
            length = rng.randrange(0, usable + 1)
            text = bytes(rng.choice(b"abc /\t\n\x01\x7f") for _ in range(length))
            data[off:off + length] = text
            if length < usable and rng.random() < 0.2:
                data[off + length] = 0x41
        elif shape in (2, 3):
            for w in range(usable // 8):
                if rng.random() < 0.7 and starts:
                    i = rng.randrange(len(starts))
                    p = starts[i] + rng.choice([0, 8, sizes[i], sizes[i] + 8])
                else:
                    p = rng.choice([0, 0, rng.getrandbits(64)])
                struct.pack_into("<Q", data, off + 8 * w, p)
        elif shape == 4:
            data[off:off + usable] = rng.randbytes(usable)
    return data, starts, sizes


@pytest.mark.parametrize("seed", range(150))
def test_block_types_are_the_references(seed: int) -> None:
    rng = random.Random(seed)
    data, starts, sizes = _heap(rng)
    lo = rng.randrange(0, len(starts) + 1)
    hi = rng.randrange(lo, len(starts) + 1)
    part_starts, part_sizes = starts[lo:hi], sizes[lo:hi]
    data = bytes(data)
    fast = bt.classify(data, BASE, part_starts, part_sizes, VPTRS, starts, sizes)
    ref = bt.classify(data, BASE, part_starts, part_sizes, VPTRS, starts, sizes, python=True)
    assert fast == ref


def test_the_rules_on_chosen_blocks() -> None:
    """One block of each rule's edge: a string one byte short of filling its block, one filling
    it, three letters, a pointer array whose last (slack) word is garbage, one pointer only."""
    blocks = [b"x" * 23 + b"\0", b"y" * 15 + b"\0" + bytes(24),  # 40-byte block: 16 <= 40 - 16
              b"z" * 25 + b"\0" + bytes(14), b"abc\0" + bytes(20)]
    data = bytearray()
    starts, sizes = array("Q"), array("Q")
    for b in blocks + [bytes(40), bytes(24)]:
        starts.append(BASE + len(data) + 16)
        sizes.append(len(b))
        data += bytes(16) + b
    struct.pack_into("<QQQQQ", data, starts[4] - BASE, starts[0], 0, starts[1] + 40, 0,
                     0xDEADBEEF)
    struct.pack_into("<QQQ", data, starts[5] - BASE, starts[0], 0, 7)
    for python in (False, True):
        got = bt.classify(bytes(data), BASE, starts, sizes, VPTRS, starts, sizes, python=python)
        assert list(got) == [bt.CHAR_ARRAY, bt.UNKNOWN, bt.CHAR_ARRAY, bt.UNKNOWN,
                             bt.POINTER_ARRAY, bt.UNKNOWN]


def test_pointers_whose_bytes_are_printable_are_pointers() -> None:
    """A heap whose addresses' six low bytes are printable ("0DCBAU" for 0x5541_4243_4430): a
    24-byte block of two pointers into it is a pointer array, not the string those bytes spell
    (it was named `char[]` when strings came first: about 1 in 120 such blocks under ASLR), and a
    24-byte block holding that text is still a string."""
    base = 0x5541_4243_4420
    data = bytearray(16 + 40 + 16 + 24 + 16 + 24)
    starts = array("Q", [base + 16, base + 16 + 40 + 16, base + 16 + 40 + 16 + 24 + 16])
    sizes = array("Q", [40, 24, 24])
    assert struct.pack("<Q", starts[0])[:6] == b"0DCBAU"
    struct.pack_into("<QQQ", data, starts[1] - base, starts[0], starts[0] + 8, 0)
    data[starts[2] - base:starts[2] - base + 7] = b"0DCBAU\0"
    for python in (False, True):
        got = bt.classify(bytes(data), base, starts, sizes, VPTRS, starts, sizes, python=python)
        assert list(got) == [bt.UNKNOWN, bt.POINTER_ARRAY, bt.CHAR_ARRAY]
