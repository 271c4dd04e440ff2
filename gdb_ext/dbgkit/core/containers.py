"""The checks behind the pretty printers of the targets' types, without GDB.

A printer reads raw fields (indices, counters, bitmaps) out of a process that may be in the middle
of constructing the object or may have overwritten it; these functions turn the fields into what is
printed, and name the first inconsistency in words (`head 9 > capacity 8`) instead of guessing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

#: more slots than this is taken for garbage (an unconstructed std::vector), not a ring
MAX_SLOTS = 1 << 32


@dataclass(frozen=True)
class RingState:
    """One SPSC ring of `slots` slots (capacity slots - 1): head is written next, tail read next."""

    head: int
    tail: int
    slots: int
    problem: str | None

    @property
    def capacity(self) -> int:
        return max(self.slots - 1, 0)

    @property
    def size(self) -> int:
        """Values in the ring, tail up to head (0 when the state is inconsistent)."""
        if self.problem is not None:
            return 0
        return (self.head - self.tail) % self.slots

    def indices(self) -> Iterator[int]:
        """The slots holding values, oldest first."""
        for i in range(self.size):
            yield (self.tail + i) % self.slots


def ring_state(head: int, tail: int, slots: int) -> RingState:
    """The ring's state from its raw indices and slot count (targets/spsc_ring keeps one slot
    empty, so a valid index is 0..capacity)."""
    capacity = slots - 1
    problem = None
    if slots <= 0:
        problem = "no slots (not constructed)"
    elif slots > MAX_SLOTS:
        problem = f"{slots} slots"
    elif head > capacity or head < 0:
        problem = f"head {head} > capacity {capacity}"
    elif tail > capacity or tail < 0:
        problem = f"tail {tail} > capacity {capacity}"
    return RingState(head, tail, slots, problem)


def deque_size(buffer_elements: int, start_node: int, finish_node: int, start_offset: int,
               finish_offset: int, map_nodes: int) -> int:
    """Elements of a libstdc++ std::deque from its two iterators: their node indices (pointers
    divided by the pointer size), MAP_NODES the map's nodes from start's to the map's end, and
    each iterator's offset of _M_cur in its buffer (stl_deque.h: deque::size() is the difference
    of the two iterators). ValueError names the first field a real deque cannot have: each
    offset is below the buffer size (finish moves on when its buffer fills), both nodes are in
    the map."""
    if buffer_elements <= 0:
        raise ValueError(f"buffer of {buffer_elements} elements")
    nodes = finish_node - start_node
    if nodes < 0:
        raise ValueError(f"finish node {nodes} nodes before start")
    if nodes >= map_nodes:
        raise ValueError(f"{nodes + 1} nodes past the map's end ({map_nodes} left)")
    for name, offset in (("start", start_offset), ("finish", finish_offset)):
        if not 0 <= offset < buffer_elements:
            raise ValueError(f"{name} at {offset} in a buffer of {buffer_elements}")
    return buffer_elements * (nodes - 1) + finish_offset + (buffer_elements - start_offset)


def c_string(raw: bytes) -> str:
    """A char array's text up to its first NUL, quoted as C would write it: printable ASCII as is,
    every other byte as \\xNN (a garbage name must not put control characters on the screen)."""
    text = raw.split(b"\0", 1)[0]
    out = []
    for byte in text:
        char = chr(byte)
        out.append("\\" + char if char in '"\\' else char if 32 <= byte < 127 else f"\\x{byte:02x}")
    return '"' + "".join(out) + '"'


def bitmap_free(bits: int, width: int = 64) -> int:
    """Free blocks of one object_pool segment: bits set in its `free_` bitmap."""
    return bin(bits & ((1 << width) - 1)).count("1")


#: shmemq's header (docs/shmemq-format.md): its magic text, version and lock kinds
SHMEMQ_MAGIC = b"DBGSHMQ\0"
SHMEMQ_VERSION = 1
SHMEMQ_LOCK_KINDS = {0: "normal", 1: "adaptive", 2: "lockfree"}
SHMEMQ_FLAG_ROBUST = 1


def shmemq_magic_problem(magic: int, creator_pid: int) -> str | None:
    """Why the header at hand is not a ready shmemq segment, or None. The creator stores its pid
    first and the magic last, so pid set and magic 0 is a segment being initialised."""
    if magic == int.from_bytes(SHMEMQ_MAGIC, "little"):
        return None
    if magic == 0 and creator_pid != 0:
        return f"being initialised by pid {creator_pid}"
    return f"bad magic {magic:#x}"


def shmemq_count_problem(write_count: int, read_count: int, max_count: int) -> str | None:
    """Why the message counters are inconsistent (more read than written, more queued than the
    queue holds), or None."""
    if read_count > write_count:
        return f"read_count {read_count} > write_count {write_count}"
    if write_count - read_count > max_count:
        return f"{write_count - read_count} queued > max_count {max_count}"
    return None


#: glibc's robust-futex bits in a mutex's lock word (linux/futex.h)
FUTEX_WAITERS = 0x80000000
FUTEX_OWNER_DIED = 0x40000000


def mutex_state(lock: int, owner: int) -> str:
    """A glibc mutex's state in words from `__data.__lock` and `__data.__owner` (nptl: a normal
    mutex's lock word is 0 free, 1 locked, 2 locked with waiters; a robust one's holds the owner's
    TID and the FUTEX_* bits)."""
    lock &= 0xFFFFFFFF
    if lock == 0:
        return "unlocked"
    words = [f"locked by LWP {owner}" if owner else "locked (no owner recorded)"]
    if lock & FUTEX_OWNER_DIED:
        words.append("owner died")
    if lock & FUTEX_WAITERS or lock == 2:
        words.append("waiters")
    return ", ".join(words)
