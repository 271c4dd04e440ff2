"""`memdump break`'s condition, GDB-free: which heap events stop the program (docs/memdump.md,
"Breaks on allocation events").

Both recorders test the same condition: the in-process recorder reads it from its
`memdump_recorder_break_at` (gdb_ext/recorder/control.h's struct mdr_break, which `words()`
fills), the breakpoint design calls `matches()` at its allocator stops.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from .recorder import OPS

#: --on's choices -> the operations they stop on
ON = {
    "alloc": ("malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
              "memalign", "valloc", "pvalloc", "new", "new[]", "custom_alloc"),
    "free": ("free", "delete", "delete[]", "custom_free"),
    "realloc": ("realloc", "reallocarray"),
}
RELEASES = frozenset(ON["free"])
#: control.h's MDR_BREAK_RANGES, MDR_BREAK_PCS, and the struct's 8-byte fields
RANGES = 8
PCS = 64
FIELDS = 93
NO_MAX = (1 << 64) - 1
#: the longest tag name the recorders keep (memdump_api.h)
TAG_MAX = 255


def tag_hash(name: str) -> int:
    """FNV-1a (64 bits) of the tag's name as the recorders keep it (UTF-8, at most 255 bytes)."""
    h = 0xCBF29CE484222325
    for byte in name.encode("utf-8", "surrogateescape")[:TAG_MAX]:
        h = ((h ^ byte) * 0x100000001B3) & NO_MAX
    return h


def allocated_size(op: str, args: Sequence[int]) -> int:
    """The bytes OP allocates, from its arguments (0 for the operations that release)."""
    if op in ("malloc", "valloc", "pvalloc", "new", "new[]", "custom_alloc"):
        return args[0]
    if op == "calloc":
        return args[0] * args[1]
    if op in ("realloc", "aligned_alloc", "memalign"):
        return args[1]
    if op == "reallocarray":
        return args[1] * args[2]
    if op == "posix_memalign":
        return args[2]
    return 0


@dataclass
class BreakCondition:
    """The events to stop at: all of the given tests hold."""

    ops: frozenset[str]
    size_min: int = 0
    size_max: int = NO_MAX
    seq: int = 0
    tag: str | None = None
    #: a frame of the event's stack is in this function (--function): in one of its code's
    #: [lo, hi) RANGES, which the session finds once the program is loaded (PIE moves it)
    function: str | None = None
    ranges: list[tuple[int, int]] = field(default_factory=list)
    #: the event's stack begins with these frames (--leak: module, offset), at these pcs in the
    #: running program (the session maps them once the modules are loaded); empty: any
    frames: tuple[tuple[str, int], ...] = ()
    pcs: tuple[int, ...] = ()
    #: stop at the COUNT-th match only; 0: at every one
    count: int = 0
    #: what the user asked, for `memdump break` to show
    text: str = ""
    hits: int = 0

    def matches(self, op: str, args: Sequence[int], seq: int, tag: str | None,
                pcs: Sequence[int]) -> bool:
        """Whether the event (its operation, arguments, SEQ, the thread's innermost tag, its
        stack innermost first) is one to stop at; counts the matches."""
        if op not in self.ops or (self.seq and self.seq != seq):
            return False
        size = allocated_size(op, args)
        if op not in RELEASES and not self.size_min <= size <= self.size_max:
            return False
        if self.tag is not None and (tag is None or tag_hash(tag) != tag_hash(self.tag)):
            return False
        if self.function is not None and not any(lo <= pc < hi for pc in pcs
                                                 for lo, hi in self.ranges):
            return False
        if self.frames and tuple(pcs[:len(self.frames)]) != self.pcs:
            return False
        self.hits += 1
        return not self.count or self.hits == self.count

    def words(self) -> bytes:
        """struct mdr_break as the recorder reads it (the hits and last event zero)."""
        if len(self.ranges) > RANGES:
            raise ValueError(f"at most {RANGES} code ranges")
        if len(self.frames) > PCS:
            raise ValueError(f"at most {PCS} frames")
        ranges = [v for r in self.ranges for v in r] + [0] * (2 * (RANGES - len(self.ranges)))
        pcs = list(self.pcs) + [0] * (PCS - len(self.pcs))
        mask = sum(1 << OPS.index(op) for op in self.ops)
        if self.frames and len(self.pcs) != len(self.frames):  # not mapped: nothing matches
            pcs = [1] * len(self.frames)
        n_ranges = len(self.ranges)
        if self.function is not None and not n_ranges:  # not found: nothing matches
            ranges[:2], n_ranges = [1, 1], 1
        values = [mask, self.size_min, self.size_max, self.seq,
                  tag_hash(self.tag) if self.tag is not None else 0, self.count, 0,
                  n_ranges, *ranges, len(self.frames), *pcs, 0, 0, 0, 0]
        return struct.pack(f"<{FIELDS}Q", *values)


def last_event(raw: bytes) -> tuple[int, str, int, int]:
    """(SEQ, operation, size, address) of the event the recorder last stopped at, from the
    struct's bytes."""
    seq, op, size, address = struct.unpack_from("<4Q", raw, 8 * (FIELDS - 4))
    return seq, OPS[op] if op < len(OPS) else "?", size, address


def map_frames(frames: Sequence[tuple[str, int]],
               biases: dict[str, int]) -> tuple[int, ...] | None:
    """The pcs of FRAMES (module path, offset) in a process whose modules have BIASES (path ->
    load bias; a module is also found by its file name); None when one is not loaded."""
    by_name = {path.rsplit("/", 1)[-1]: bias for path, bias in biases.items()}
    out = []
    for module, offset in frames:
        bias = biases.get(module, by_name.get(module.rsplit("/", 1)[-1]))
        if bias is None:
            return None
        out.append(bias + offset)
    return tuple(out)
