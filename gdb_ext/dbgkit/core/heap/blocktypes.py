"""What each block the heap walk found is, as far as its bytes honestly tell (docs/heapwalk.md,
"What each block is"), in this order:

1. its first word is a vptr of the vtable table (vtables.py): the C++ class (`vtable`, or `rtti`
   when the typeinfo named it); only offset 0 counts, a secondary vptr further in (multiple
   inheritance) is a base part, not the block's type;
2. `pointer array`: every word but the last (the request's rounding may leave it unset) is 0 or
   points into a block of the walk (its end included: a vector's end pointer), the first is not 0,
   and at least two are not;
3. `char[]`: a NUL-terminated string of at least 4 printable bytes (ASCII 32-126, tab, newline,
   carriage return) that fills the block: strlen + 1 bytes would have been rounded up to this
   block's size (more than its usable size less 16, or any length in the smallest block);
4. `?`: anything else.

Pointers come before strings: a heap address's six low bytes are printable often enough (about 1
in 120 for a 24-byte block of two pointers under ASLR) to pass for a string, where the words of a
string are never the address of a block (eight printable bytes are no user-space address).

The loop runs in libmemdump_scan.so (mds_block_types, gdb_ext/scan/blocktypes.c) when it loads,
else here: the Python below is the reference the C is held to (gdb_ext/tests/
test_heapwalk_blocktypes.py, on random heaps)."""

from __future__ import annotations

import bisect
import ctypes
from array import array

from .. import reach_fast
from .chunks import addr

__all__ = ["CHAR_ARRAY", "LABEL_OFFSET", "POINTER_ARRAY", "UNKNOWN", "block_types", "classify"]

#: a block's type code when it is no class (a class's code is its index in the sorted vptrs)
UNKNOWN, CHAR_ARRAY, POINTER_ARRAY = -1, -2, -3
#: a type code's index in block_types' labels, less the code
LABEL_OFFSET = 3
_MIN_STRING = 4
_PRINTABLE = frozenset(range(32, 127)) | {9, 10, 13}


def _is_string(block: bytes, usable: int) -> bool:
    end = block.find(b"\0")
    if end < _MIN_STRING or end + 1 > usable:
        return False
    if end + 1 <= usable - 16 and usable != 24:
        return False
    return all(b in _PRINTABLE for b in block[:end])


def _py_classify(data: bytes, base: int, starts: array, sizes: array, vptrs: array,
                 all_starts: array, all_sizes: array) -> array:
    out = array("i", bytes(4 * len(starts)))

    def in_block(p: int) -> bool:
        i = bisect.bisect_right(all_starts, p) - 1
        return i >= 0 and p <= all_starts[i] + all_sizes[i]

    for k, (start, usable) in enumerate(zip(starts, sizes, strict=True)):
        off = start - base
        block = data[off:off + usable]
        words = memoryview(block)[:usable // 8 * 8].cast("Q")
        first = words[0] if len(words) else 0
        i = bisect.bisect_left(vptrs, first)
        if i < len(vptrs) and vptrs[i] == first:
            out[k] = i
        elif first and sum(1 for w in words[:-1] if w) >= 2 and \
                all(w == 0 or in_block(w) for w in words[:-1]):
            out[k] = POINTER_ARRAY
        elif _is_string(block, usable):
            out[k] = CHAR_ARRAY
        else:
            out[k] = UNKNOWN
    return out


def _lib():
    lib = reach_fast.library()
    if lib is None or not hasattr(lib, "mds_block_types"):
        return None
    if lib.mds_block_types.argtypes is None:
        u64, ptr = ctypes.c_uint64, ctypes.c_void_p
        lib.mds_block_types.argtypes = [ctypes.c_char_p, u64, u64, ptr, ptr, u64, ptr, u64, ptr,
                                        ptr, u64, ptr]
        lib.mds_block_types.restype = ctypes.c_int
    return lib


def classify(data: bytes, base: int, starts: array, sizes: array, vptrs: array,
             all_starts: array, all_sizes: array, *, python: bool = False) -> array:
    """The type code (array of int32) of each block STARTS, SIZES (ascending; all inside DATA,
    which holds memory from address BASE): its class's index in VPTRS (sorted) or POINTER_ARRAY,
    CHAR_ARRAY, UNKNOWN. ALL_STARTS, ALL_SIZES: every block of the walk, what a pointer
    must point into. PYTHON: the reference, even when the library loads."""
    lib = None if python else _lib()
    if lib is None:
        return _py_classify(data, base, starts, sizes, vptrs, all_starts, all_sizes)
    out = array("i", bytes(4 * len(starts)))
    if len(starts):
        lib.mds_block_types(data, len(data), base, addr(starts), addr(sizes), len(starts),
                            addr(vptrs), len(vptrs), addr(all_starts), addr(all_sizes),
                            len(all_starts), addr(out))
    return out


#: a mmapped block larger than this is typed by its first word only (not read whole)
_MMAPPED_READ_MAX = 16 << 20


def block_types(source, walked, table) -> tuple[list[tuple[str, str]], array]:
    """The types of WALKED's blocks in SOURCE: (labels, codes), block i's (type, how it was found:
    `vtable`, `rtti`, `string`, `pointers` or `unknown`) being labels[codes[i] + LABEL_OFFSET].
    TABLE: vtables.vtable_table's."""
    vptrs = array("Q", table.sorted_vptrs())
    labels = [("pointer array", "pointers"), ("char[]", "string"), ("?", "unknown")] + \
        [table.classes[v] for v in vptrs]
    starts, sizes = walked.blocks.starts, walked.blocks.sizes
    codes = array("i", [UNKNOWN]) * len(starts)
    spans = []
    for base, data in sorted(walked.heaps):
        lo = bisect.bisect_left(starts, base)
        hi = bisect.bisect_left(starts, base + len(data))
        if lo < hi:
            codes[lo:hi] = classify(data, base, starts[lo:hi], sizes[lo:hi], vptrs, starts, sizes)
            spans.append((lo, hi))
    outside, at = [], 0  # the mmapped blocks: in no heap, few
    for lo, hi in spans + [(len(starts), len(starts))]:
        outside.extend(range(at, lo))
        at = hi
    for i in outside:
        size = sizes[i]
        try:
            data = source.read(starts[i], size if size <= _MMAPPED_READ_MAX else 8)
        except OSError:
            continue
        if size > _MMAPPED_READ_MAX:
            first = int.from_bytes(data, "little")
            j = bisect.bisect_left(vptrs, first)
            codes[i] = j if j < len(vptrs) and vptrs[j] == first else UNKNOWN
        else:
            codes[i] = classify(data, starts[i], starts[i:i + 1], sizes[i:i + 1], vptrs,
                                starts, sizes)[0]
    return labels, codes
