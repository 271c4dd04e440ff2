"""The heap's own mappings, for the pointer scan's roots (reach.select_roots): the mmap glibc
makes for a large block alone, and the parts of a heap mapping around the known blocks.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = ["PAGE", "around_blocks", "mmapped_holes", "mmapped_region"]

PAGE = 4096


class MappingLike(Protocol):
    start: int
    end: int


def mmapped_region(read: Callable[[int, int], bytes], block: int) -> tuple[int, int] | None:
    """[start, end) of the mmap glibc made for BLOCK alone (a large block), from its chunk header;
    None when the block lives in an arena. glibc (malloc/malloc.c): the chunk is 16 bytes before
    the block, its size word has IS_MMAPPED (2) set, and its prev_size word is the chunk's offset
    in the mapping (for aligned allocations); munmap_chunk unmaps [chunk - prev_size, chunk + size).
    """
    try:
        header = read(block - 16, 16)
    except OSError:
        return None
    if len(header) != 16:
        return None
    prev_size = int.from_bytes(header[:8], "little")
    size_word = int.from_bytes(header[8:], "little")
    if not size_word & 2:
        return None
    chunk = block - 16
    start, end = chunk - prev_size, chunk + (size_word & ~7)
    if start % PAGE or (end - start) % PAGE or end <= block:
        return None
    return start, end


def mmapped_holes(
    read: Callable[[int, int], bytes], starts: Sequence[int], j: int, m: MappingLike
) -> list[tuple[int, int]] | None:
    """The mmapped regions of the live blocks in M (from starts[j] on), in order; None when one of
    them lives in an arena (M is then an arena heap) or its region leaves M."""
    holes = []
    while j < len(starts) and starts[j] < m.end:
        region = mmapped_region(read, starts[j])
        if region is None or region[0] < m.start or region[1] > m.end:
            return None
        holes.append(region)
        j += 1
    return holes


def around_blocks(start: int, end: int, starts: Sequence[int], sizes: Sequence[int],
                  ) -> list[tuple[int, int]]:
    """The parts of [START, END), a heap mapping, that hold no known block (of STARTS and SIZES,
    sorted): the blocks allocated before an attach, the allocator's own memory."""
    parts = []
    at = start
    for j in range(bisect.bisect_left(starts, start), len(starts)):
        if starts[j] >= end:
            break
        if at < starts[j]:
            parts.append((at, starts[j]))
        at = max(at, starts[j] + max(sizes[j], 1))
    if at < end:
        parts.append((at, end))
    return parts
