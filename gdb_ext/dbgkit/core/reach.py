"""Which heap blocks are still pointed to at exit: valgrind memcheck's leak kinds, without GDB.

The method is memcheck's (mc_leakcheck.c, valgrind 3.19), re-implemented from its description:

1. Roots: the writable memory of the process that is not heap (`select_roots`), and every live
   thread's general registers. Every 8-byte aligned word is a candidate pointer.
2. Marking from the roots: a word equal to a block's start reaches it (`reachable` when the word
   was found in a root or a reachable block, else `possible`); a word inside a block reaches it
   as `possible`, unless one of the heuristics says it is how the program refers to such a block
   (then like a start pointer). A block whose state goes up is scanned (again). A word equal to
   the address of glibc's chunk header that follows a block (`next_header`) is the
   allocator's, not a pointer into that block: glibc's bins, its top and the fd/bk words left in
   recycled memory point there, at the next chunk, not at the block whose last bytes hold it.
3. Cliques: the blocks still unreached are taken in address order; each one is a clique leader,
   `definite`, and every unreached block found from it (through any word into it) is `indirect`,
   owned by that leader. A leader found from a later one joins that clique with all its blocks
   (valgrind adds its indirect bytes to the new leader's): `ScanResult.leaders` names, for each
   indirect block, the definite block that owns it in the end (valgrind's "N (D direct,
   I indirect) bytes" of a definitely lost block are its size and those of the blocks it owns).

The caller reads memory; this module only decides. Its cost is bounded by `deadline` (a
`time.monotonic()` value, `ScanTimeout` when passed) and its memory by the read windows
(1 MiB pieces, a 4 MiB cache of 64 KiB windows) and about 100 bytes per block (sorted
addresses, sizes, ends, a state byte). Only the memory reads (`read`) touch the process.
"""

from __future__ import annotations

import bisect
import time
from collections import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from memdump_analyzer.dumpformat import KINDS

from .heapparts import around_blocks, mmapped_holes
from .procfs import Mapping, parse_maps  # the scan's input, part of its API

__all__ = [
    "ARENA_ALIGN",
    "DEFAULT_HEURISTICS",
    "HEURISTICS",
    "KINDS",
    "RED_ZONE",
    "Excluded",
    "Mapping",
    "Root",
    "ScanResult",
    "ScanTimeout",
    "Thread",
    "next_header",
    "parse_maps",
    "scan",
    "select_roots",
]

#: interior-pointer heuristics, in the order they are tried (valgrind's order)
HEURISTICS: tuple[str, ...] = ("stdstring", "length64", "newarray", "multipleinheritance")
#: valgrind's default, --leak-check-heuristics=all
DEFAULT_HEURISTICS = frozenset(HEURISTICS)

#: bytes below a thread's stack pointer that the x86-64 psABI lets a function use (§3.2.2)
RED_ZONE = 128
#: glibc's non-main arenas are heaps of HEAP_MAX_SIZE (2 * DEFAULT_MMAP_THRESHOLD_MAX = 64 MiB on
#: 64-bit, malloc/arena.c), mapped at a multiple of their size; the part not in use yet is ---p
ARENA_ALIGN = 64 << 20
#: roots and big blocks are read in pieces of this size
WINDOW = 1 << 20
#: blocks are read through a cache of windows of 64 KiB, at most 64 of them (4 MiB)
_SMALL_BITS = 16
_SMALL = 1 << _SMALL_BITS
_SMALL_CACHED = 64
PAGE = 4096
#: vtable check: words looked at for two function pointers (mc_leakcheck.c)
_VTABLE_MAX_CHECK = 20
#: glibc's malloc (malloc/malloc.c): a chunk is 16-byte aligned, at least MINSIZE; its size word,
#: right before the block, has the flags PREV_INUSE (1), IS_MMAPPED (2), NON_MAIN_ARENA (4) in
#: its low bits; a chunk in use lends its next chunk's prev_size word (its header's first) to the
#: block: the block's usable size is the chunk's size less 8
_CHUNK_ALIGN = 16
_MINSIZE = 32
_IS_MMAPPED = 2
_SIZE_FLAGS = 7

_UNREACHED, _POSSIBLE, _REACHABLE, _INDIRECT = 0, 1, 2, 3
_KIND_OF_STATE = {_UNREACHED: "definite", _POSSIBLE: "possible", _REACHABLE: "reachable",
                  _INDIRECT: "indirect"}


class ScanTimeout(Exception):
    """The scan ran past its deadline; its partial result is meaningless."""


@dataclass(frozen=True, slots=True)
class Thread:
    """A live thread at the scan: its kernel id, stack pointer and general registers."""

    tid: int
    sp: int
    registers: tuple[int, ...] = ()
    #: bytes below `sp` that may still hold live data: RED_ZONE for a thread stopped anywhere;
    #: 0 for one stopped at a function's first instruction (the call that got there ended any use
    #: of its caller's red zone; what lies below is garbage of earlier calls)
    red_zone: int = RED_ZONE


@dataclass(frozen=True, slots=True)
class Root:
    """A range of memory scanned as a root."""

    start: int
    end: int
    what: str


@dataclass(frozen=True, slots=True)
class Excluded:
    """A writable mapping that is not a root, and why: heap, arena, stale-stack, device."""

    start: int
    end: int
    path: str
    reason: str


@dataclass
class ScanResult:
    """The kind of every block (by start address) and what the scan looked at."""

    kinds: abc.Mapping[int, str]  # address -> kind, ascending
    #: blocks found reachable only through a heuristic: address -> heuristic name
    heuristics: dict[int, str] = field(default_factory=dict)
    #: indirect block's address -> address of the definite block whose clique it belongs to
    leaders: dict[int, int] = field(default_factory=dict)
    roots: list[Root] = field(default_factory=list)
    excluded: list[Excluded] = field(default_factory=list)
    root_bytes: int = 0
    block_bytes: int = 0
    skipped_bytes: int = 0
    seconds: float = 0.0
    #: which implementation decided: "python" (this module) or "c" (libmemdump_scan, reach_fast)
    engine: str = "python"
    #: after a late attach, the blocks from before the recording scanned with its own, their kinds
    #: apart from `kinds`: (address, usable size, kind, how its type was found, type), in address
    #: order (core.heap.merge.attached_scan; the dump's `ob` records)
    older: tuple[tuple[int, int, str, str, str], ...] = ()

    def records(self) -> Iterable[tuple[int, str, str | None]]:
        """(address, kind, extra) per block, as the dump's `r` records have them: extra is the
        heuristic of a reachable block, the leader's address (hex) of an indirect one."""
        heuristics, leaders = self.heuristics, self.leaders
        for addr, kind in self.kinds.items():
            if kind == "indirect" and addr in leaders:
                yield addr, kind, f"{leaders[addr]:#x}"
            else:
                yield addr, kind, heuristics.get(addr)

    def totals(self, sizes: dict[int, int]) -> dict[str, tuple[int, int]]:
        """kind -> (bytes, blocks) over `sizes` (address -> size)."""
        out = {k: (0, 0) for k in KINDS}
        for addr, kind in self.kinds.items():
            nbytes, blocks = out[kind]
            out[kind] = (nbytes + sizes[addr], blocks + 1)
        return out


def select_roots(
    mappings: Sequence[Mapping],
    blocks: dict[int, int] | Sequence[int],
    threads: Iterable[Thread],
    read: Callable[[int, int], bytes] | None = None,
    unknown_heap: Sequence[int] | None = None,
) -> tuple[list[Root], list[Excluded]]:
    """The root ranges among `mappings`, and the writable mappings left out with the reason.
    `blocks`: the live blocks (address -> size), or their addresses sorted (an array).

    Left out: `[heap]`; any mapping that holds a block of an arena (glibc's non-main arenas); a
    large block's own mmap (the kernel merges it with anonymous neighbours, such as the arenas of
    another allocator, which stay roots: the mapping is scanned around it; known only with READ,
    else the whole mapping is left out); glibc's non-main arenas without live blocks (anonymous,
    at a multiple of ARENA_ALIGN, followed by a `---p` reservation or ARENA_ALIGN long); stacks of
    threads that are gone (glibc caches them: anonymous, with a `---p` guard just below, holding
    no live thread's stack pointer; `[stack]` likewise); devices other than /dev/zero. A live
    thread's stack is scanned from its stack pointer minus its red zone up.

    `unknown_heap`: the sizes of `blocks` (in the order of their sorted addresses) when the
    recording began on a running process: blocks allocated before it are unknown, and their
    pointers to the known ones count, so the heap is a root too, but for the known blocks.
    """
    starts = sorted(blocks) if isinstance(blocks, dict) else blocks
    below = {t.sp: t.red_zone for t in threads}
    sps = sorted(below)
    roots: list[Root] = []
    excluded: list[Excluded] = []
    maps = list(mappings)
    for i, m in enumerate(maps):
        if not (m.readable and m.writable):
            continue
        prev = maps[i - 1] if i > 0 else None
        nxt = maps[i + 1] if i + 1 < len(maps) else None
        anonymous = m.inode == 0 and not m.path.startswith("/")
        k = bisect.bisect_left(sps, m.start)
        sp = sps[k] if k < len(sps) and sps[k] < m.end else None
        if sp is not None:
            roots.append(Root(max(m.start, sp - below[sp]), m.end, m.path or "[thread stack]"))
            continue
        j = bisect.bisect_left(starts, m.start)
        reason = None
        if m.path == "[heap]":
            reason = "heap"
        elif j < len(starts) and starts[j] < m.end:
            holes = mmapped_holes(read, starts, j, m) if read is not None else None
            if holes is None:
                reason = "heap"
            else:
                at = m.start
                for lo, hi in holes:
                    if at < lo:
                        roots.append(Root(at, lo, m.path or "[anon]"))
                    at = max(at, hi)
                if at < m.end:
                    roots.append(Root(at, m.end, m.path or "[anon]"))
                excluded.extend(Excluded(lo, hi, m.path, "mmapped-block") for lo, hi in holes)
                continue
        elif m.path.startswith("/dev/") and m.path != "/dev/zero":
            reason = "device"
        elif m.path == "[stack]":
            reason = "stale-stack"
        elif anonymous and m.start % ARENA_ALIGN == 0 and (
            m.end - m.start == ARENA_ALIGN
            or (nxt is not None and nxt.start == m.end and nxt.reserved)
        ):
            reason = "arena"
        elif anonymous and prev is not None and prev.end == m.start and prev.reserved:
            reason = "stale-stack"
        if reason in ("heap", "arena") and unknown_heap is not None:
            roots.extend(Root(lo, hi, m.path or "[anon]")
                         for lo, hi in around_blocks(m.start, m.end, starts, unknown_heap))
            continue
        if reason is not None:
            excluded.append(Excluded(m.start, m.end, m.path, reason))
            continue
        roots.append(Root(m.start, m.end, m.path or "[anon]"))
    return roots, excluded


def next_header(start: int, size: int, size_word: int) -> int | None:
    """The address of glibc's chunk header that follows the block of SIZE bytes at START, when
    it lies inside the block, else None. SIZE_WORD: the word before START, the chunk's size.

    The next chunk starts chunksize bytes after the block's own header, which is 16 bytes before
    the block: in its last 8 bytes when the block fills its chunk (24, 40, 56 ... bytes). Only
    glibc's metadata points there, at that next chunk: the bins and top of an arena, the fd/bk
    words of a free chunk, and what they leave behind in memory recycled into a new block. The
    size word must be glibc's: a chunk in use (not IS_MMAPPED, which has no next chunk), aligned,
    whose usable bytes (its size less 8) hold the block."""
    if size_word & _IS_MMAPPED:
        return None
    chunk = size_word & ~_SIZE_FLAGS
    off = chunk - 16
    if off < _MINSIZE - 16 or off % _CHUNK_ALIGN or not off < size <= chunk - 8:
        return None
    return start + off


class _Reader:
    """Reads memory for the scan: small reads through cached windows, big ones in pieces."""

    def __init__(self, read: Callable[[int, int], bytes]) -> None:
        self._read = read
        #: window number (address >> _SMALL_BITS) -> its bytes (short at a mapping's end)
        self._windows: dict[int, bytes] = {}
        self.skipped = 0

    def raw(self, addr: int, size: int) -> bytes | None:
        try:
            data = self._read(addr, size)
        except OSError:
            return None
        return data if len(data) == size else None

    def get(self, addr: int, size: int) -> bytes | None:
        """`size` bytes at `addr` or None when unreadable."""
        key = addr >> _SMALL_BITS
        if size <= _SMALL and (addr + size - 1) >> _SMALL_BITS == key:
            data = self._windows.get(key)
            if data is None:
                try:
                    data = self._read(key << _SMALL_BITS, _SMALL)
                except OSError:
                    data = b""  # the window starts before the mapping: read blocks directly
                if len(self._windows) >= _SMALL_CACHED:
                    del self._windows[next(iter(self._windows))]
                self._windows[key] = data
            off = addr - (key << _SMALL_BITS)
            if off + size <= len(data):
                return data[off: off + size]
        return self.raw(addr, size)

    def chunks(self, start: int, end: int) -> Iterable[tuple[int, bytes]]:
        """(address, bytes) covering [start, end) in WINDOW pieces; unreadable pages skipped."""
        addr = start
        while addr < end:
            n = min(WINDOW, end - addr)
            data = self.raw(addr, n)
            if data is not None:
                yield addr, data
            else:
                for page in range(addr, addr + n, PAGE):
                    size = min(PAGE - page % PAGE, addr + n - page)
                    part = self.raw(page, size)
                    if part is None:
                        self.skipped += size
                    else:
                        yield page, part
            addr += n


def _words(data: bytes) -> memoryview:
    return memoryview(data)[: len(data) & ~7].cast("Q")


class _Scanner:
    def __init__(
        self,
        read: Callable[[int, int], bytes],
        blocks: dict[int, int],
        mappings: Sequence[Mapping],
        heuristics: frozenset[str],
        deadline: float | None,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self.reader = _Reader(read)
        self.starts = sorted(blocks)
        self.sizes = [blocks[a] for a in self.starts]
        # a block of 0 bytes is found by a pointer to its start (mc_leakcheck.c)
        self.ends = [a + (s or 1) for a, s in zip(self.starts, self.sizes, strict=True)]
        n = len(self.starts)
        self.lo = self.starts[0] if n else 0
        self.hi = max(self.ends) if n else 0
        self.state = bytearray(n)
        self.pending = bytearray(n)
        self.heuristic: dict[int, str] = {}
        #: indirect block -> the leader of the clique it joined (itself maybe absorbed later)
        self.owner: dict[int, int] = {}
        self.stack: list[int] = []
        self.heuristics = heuristics
        self.deadline = deadline
        self.progress = progress
        self.exec_maps = [(m.start, m.end) for m in mappings if m.executable and m.file_backed]
        self.file_maps = sorted(
            (m.start, m.end) for m in mappings if m.readable and m.file_backed
        )
        self._file_starts = [s for s, _ in self.file_maps]
        self._exec_starts = sorted(s for s, _ in self.exec_maps)
        self.exec_maps.sort()
        self._vtables: dict[int, bool] = {}
        self.block_bytes = 0
        self.root_bytes = 0
        self._scanned = 0
        self._next_check = 0

    # -- lookup ----------------------------------------------------------------------------
    def find(self, ptr: int) -> int:
        i = bisect.bisect_right(self.starts, ptr) - 1
        if i >= 0 and ptr < self.ends[i]:
            return i
        return -1

    def candidates(self, data: bytes) -> list[int]:
        """The words of DATA that may point to a block, once each, in memory order (the order
        decides which heuristic a block is credited with; libmemdump_scan keeps the same)."""
        lo, hi = self.lo, self.hi
        return [w for w in dict.fromkeys(_words(data)) if lo <= w < hi]

    def _tick(self, nbytes: int) -> None:
        self._scanned += nbytes
        if self._scanned >= self._next_check:
            self._next_check = self._scanned + WINDOW * 8
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise ScanTimeout
            if self.progress is not None:
                self.progress(self._scanned, len(self.stack))

    # -- heuristics (mc_leakcheck.c heuristic_reachedness) ---------------------------------
    def _word(self, addr: int) -> int | None:
        data = self.reader.get(addr, 8)
        return None if data is None else int.from_bytes(data, "little")

    def _in(self, maps_starts: list[int], maps: list[tuple[int, int]], addr: int) -> int:
        k = bisect.bisect_right(maps_starts, addr) - 1
        return k if k >= 0 and addr < maps[k][1] else -1

    def _is_vtable(self, addr: int) -> bool:
        """A table in a readable file mapping whose first non-null words (two at least, among
        the first 20) all point into executable file mappings."""
        known = self._vtables.get(addr)
        if known is not None:
            return known
        result = False
        k = self._in(self._file_starts, self.file_maps, addr)
        if k >= 0:
            last = min(addr + _VTABLE_MAX_CHECK * 8, self.file_maps[k][1] - 8)
            data = self.reader.get(addr, last - addr + 8) if last >= addr else None
            found = 0
            for fn in _words(data) if data is not None else ():
                if fn == 0:
                    continue
                if self._in(self._exec_starts, self.exec_maps, fn) < 0:
                    break
                found += 1
                if found == 2:
                    result = True
                    break
        self._vtables[addr] = result
        return result

    def heuristic_for(self, ptr: int, i: int) -> str | None:
        start, size = self.starts[i], self.sizes[i]
        h = self.heuristics
        if "stdstring" in h and ptr == start + 24 and size >= 16:
            capacity = self._word(start + 8)
            if capacity is not None and 24 + capacity + 1 == size:
                length = self._word(start)
                if length is not None and length <= capacity:
                    return "stdstring"
        if ("length64" in h or "newarray" in h) and ptr == start + 8:
            first = self._word(start)
            if first:
                if "length64" in h and size - 8 == first:
                    return "length64"
                if "newarray" in h and (size - 8) % first == 0:
                    return "newarray"
        if "multipleinheritance" in h and ptr % 8 == 0 and ptr + 8 <= start + size and size >= 8:
            inner = self._word(ptr)
            if inner is not None and inner % 8 == 0 and inner >= PAGE:
                first = self._word(start)
                if (first is not None and first % 8 == 0 and first >= PAGE
                        and self._is_vtable(inner) and self._is_vtable(first)):
                    return "multipleinheritance"
        return None

    # -- marking ---------------------------------------------------------------------------
    def push(self, i: int) -> None:
        if not self.pending[i]:
            self.pending[i] = 1
            self.stack.append(i)

    def is_next_header(self, ptr: int, i: int) -> bool:
        """True when PTR, inside block i, is the address of glibc's chunk header after it."""
        start, size = self.starts[i], self.sizes[i]
        off = ptr - start
        if off < _MINSIZE - 16 or off % _CHUNK_ALIGN or size - off > 8:
            return False  # not where a next header can be: no need to read the size word
        size_word = self._word(start - 8)
        return size_word is not None and next_header(start, size, size_word) == ptr

    def mark(self, ptr: int, prior_definite: bool) -> None:
        """A word found from the roots or a marked block (mc_leakcheck.c, without clique)."""
        i = self.find(ptr)
        if i < 0:
            return
        state = self.state[i]
        start = self.starts[i]
        if state == _REACHABLE:
            if ptr == start:
                self.heuristic.pop(i, None)
            return
        if ptr == start:
            via_start = True
        else:
            if self.is_next_header(ptr, i):
                return
            name = self.heuristic_for(ptr, i) if self.heuristics else None
            via_start = name is not None
            if name is not None and prior_definite:
                self.heuristic[i] = name
        if via_start and prior_definite:
            self.state[i] = _REACHABLE
            self.push(i)
        elif state == _UNREACHED:
            self.state[i] = _POSSIBLE
            self.push(i)

    def block_words(self, i: int) -> list[int]:
        start, size = self.starts[i], self.sizes[i]
        first = (start + 7) & ~7
        end = (start + size) & ~7
        if end <= first:
            return []
        out: list[int] = []
        if end - first <= _SMALL:
            out.extend(self.candidates(self.reader.get(first, end - first) or b""))
        else:
            for _, data in self.reader.chunks(first, end):
                out.extend(self.candidates(data))
        self.block_bytes += end - first
        self._tick(end - first)
        return out

    def process(self, clique: int) -> None:
        stack, state, pending = self.stack, self.state, self.pending
        while stack:
            top = stack.pop()
            pending[top] = 0
            if clique < 0:
                definite = state[top] != _POSSIBLE
                for w in self.block_words(top):
                    self.mark(w, definite)
            else:
                for w in self.block_words(top):
                    j = self.find(w)
                    if (j >= 0 and j != clique and state[j] == _UNREACHED
                            and not self.is_next_header(w, j)):
                        state[j] = _INDIRECT
                        self.owner[j] = clique
                        self.push(j)

    def run(self, roots: Sequence[Root], threads: Iterable[Thread]) -> None:
        for root in roots:
            first = (root.start + 7) & ~7
            for _, data in self.reader.chunks(first, root.end & ~7):
                self.root_bytes += len(data)
                self._tick(len(data))
                for w in self.candidates(data):
                    self.mark(w, True)
        for thread in threads:
            for value in thread.registers:
                if self.lo <= value < self.hi:
                    self.mark(value, True)
        self.process(-1)
        for i in range(len(self.starts)):
            if self.state[i] == _UNREACHED:
                self.push(i)
                self.process(i)

    def leaders(self) -> dict[int, int]:
        """Each indirect block's final leader: its owner, or the owner's, until a definite one
        (an absorbed leader's blocks follow it into the clique that absorbed it)."""
        owner, state = self.owner, self.state
        final: dict[int, int] = {}
        for i in owner:
            path = []
            j = i
            while state[j] == _INDIRECT and j not in final:
                path.append(j)
                j = owner[j]
            leader = final.get(j, j)
            for k in path:
                final[k] = leader
        return final


def scan(
    read: Callable[[int, int], bytes],
    mappings: Sequence[Mapping],
    blocks: dict[int, int],
    threads: Sequence[Thread],
    *,
    heuristics: frozenset[str] = DEFAULT_HEURISTICS,
    deadline: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    attached: bool = False,
) -> ScanResult:
    """Classify every live block (`blocks`: address -> size) like valgrind memcheck.
    `attached`: blocks from before the recording exist, unknown (`select_roots`).

    `read(addr, size)` returns process memory (raising OSError, or short, where unreadable);
    `mappings` are the process's /proc/PID/maps; `threads` the live threads. Raises
    ScanTimeout once `deadline` (time.monotonic()) has passed. `progress(bytes, pending)` is
    called every 8 MiB scanned.
    """
    began = time.monotonic()
    known = [blocks[a] for a in sorted(blocks)] if attached else None
    roots, excluded = select_roots(mappings, blocks, threads, read, known)
    s = _Scanner(read, blocks, mappings, heuristics, deadline, progress)
    if blocks:
        s.run(roots, threads)
    kinds = {a: _KIND_OF_STATE[s.state[i]] for i, a in enumerate(s.starts)}
    return ScanResult(
        kinds=kinds,
        heuristics={s.starts[i]: h for i, h in s.heuristic.items()
                    if s.state[i] == _REACHABLE},
        leaders={s.starts[i]: s.starts[j] for i, j in s.leaders().items()},
        roots=roots,
        excluded=excluded,
        root_bytes=s.root_bytes,
        block_bytes=s.block_bytes,
        skipped_bytes=s.reader.skipped,
        seconds=time.monotonic() - began,
    )
