"""The pointer scan at exit through libmemdump_scan.so (gdb_ext/scan/), falling back to reach.py.

reach.py decides in Python at about 20 MB/s of heap; the C library does the same work (marking,
block scanning, heuristics, the glibc header exception, cliques and leaders) on a snapshot of the
blocks it copies first with process_vm_readv (or, over `snapshot_budget()`, reading the process
with pread on /proc/PID/mem as it goes), and gives the same ScanResult. Python still chooses the
roots (`reach.select_roots`) and builds the result from the arrays the library fills.

Where the library is: $MEMDUMP_SCAN_LIB, else the first of builtfiles.py's places that has it
($MEMDUMP_BUILD_DIR, the installed lib/dbgkit/, the checkout's build/). When none loads
(or the caller has no descriptor), `scan` runs reach.scan; ScanResult.engine says which one ran.
"""

from __future__ import annotations

import bisect
import ctypes
import os
import re
import time
from array import array
from collections import abc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from . import builtfiles, reach
from .reach import DEFAULT_HEURISTICS, HEURISTICS, Mapping, ScanResult, ScanTimeout, Thread

__all__ = ["FastScanResult", "SortedBlocks", "library", "library_path", "scan", "snapshot_budget",
           "sorted_pairs"]

_LIB_NAME = "libmemdump_scan.so"
_ABI_VERSION = 4
_KINDS = ("definite", "possible", "reachable", "indirect")  # the library's state codes
_NO_OWNER = 0xFFFFFFFF
_READS = ("pread", "snapshot", "snapshot (pread)")  # the library's SNAP_* codes
_TICK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64)


class _Args(ctypes.Structure):
    """struct mds_args (memdump_scan.c): every field 8 bytes."""

    _fields_ = [
        ("fd", ctypes.c_int64), ("pid", ctypes.c_int64), ("budget", ctypes.c_uint64),
        ("heuristics", ctypes.c_uint64),
        ("n_blocks", ctypes.c_uint64), ("starts", ctypes.c_void_p), ("sizes", ctypes.c_void_p),
        ("n_roots", ctypes.c_uint64), ("roots", ctypes.c_void_p),
        ("n_registers", ctypes.c_uint64), ("registers", ctypes.c_void_p),
        ("n_exec", ctypes.c_uint64), ("exec_maps", ctypes.c_void_p),
        ("n_file", ctypes.c_uint64), ("file_maps", ctypes.c_void_p),
        ("n_maps", ctypes.c_uint64), ("maps", ctypes.c_void_p),
        ("tick", _TICK),
        ("state", ctypes.c_void_p), ("heuristic", ctypes.c_void_p), ("leader", ctypes.c_void_p),
        ("root_bytes", ctypes.c_uint64), ("block_bytes", ctypes.c_uint64),
        ("skipped_bytes", ctypes.c_uint64), ("snapshot", ctypes.c_uint64),
        ("snapshot_bytes", ctypes.c_uint64), ("snapshot_calls", ctypes.c_uint64),
        ("snapshot_ns", ctypes.c_uint64), ("memo_cap", ctypes.c_uint64),
        ("replayed", ctypes.c_uint64), ("copy_split", ctypes.c_uint64),
    ]


@dataclass
class FastScanResult(ScanResult):
    """reach.ScanResult, and how the library read the blocks."""

    #: "snapshot": copied first with process_vm_readv; "snapshot (pread)": copied first with
    #: pread (no pid, or process_vm_readv refused); "pread": read block by block as needed
    #: (the snapshot would exceed the budget)
    reads: str = "pread"
    #: bytes of the process the snapshot held (blocks, their headers, the gaps between them)
    snapshot_bytes: int = 0
    #: system calls that filled it
    snapshot_calls: int = 0
    #: seconds the copy took (part of `seconds`)
    snapshot_seconds: float = 0.0
    #: blocks scanned as possibly lost and then as reachable whose second scan was replayed from
    #: what the first one kept (the others were read again)
    replayed: int = 0


def snapshot_budget(meminfo: str = "/proc/meminfo") -> int:
    """The most bytes the scan's snapshot of the heap may take: half of MemAvailable (0, no
    snapshot, when it is not known). The copy doubles the live heap's resident size while the
    scan runs; half of what the system can still give leaves the other half to GDB, the scan's
    own arrays and everything else running."""
    try:
        with open(meminfo, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return 0


def library_path() -> str:
    """Where the library is looked for (the first rule that applies; it may not exist)."""
    explicit = os.environ.get("MEMDUMP_SCAN_LIB")
    if explicit:
        return explicit
    tried = builtfiles.candidates("gdb_ext/scan", _LIB_NAME)
    return next((path for path in tried if os.path.isfile(path)), tried[0])


_loaded: dict[str, ctypes.CDLL | None] = {}


def library() -> ctypes.CDLL | None:
    """The loaded library, or None when it is missing, fails to load or has another layout."""
    path = library_path()
    if path not in _loaded:
        lib = None
        try:
            candidate = ctypes.CDLL(path)
            candidate.mds_abi.restype = ctypes.c_uint64
            candidate.mds_scan.argtypes = [ctypes.POINTER(_Args)]
            candidate.mds_scan.restype = ctypes.c_int
            candidate.mds_sort.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
            candidate.mds_sort.restype = ctypes.c_int
            if candidate.mds_abi() == (_ABI_VERSION << 32 | ctypes.sizeof(_Args)):
                lib = candidate
        except (OSError, AttributeError):
            lib = None
        _loaded[path] = lib
    return _loaded[path]


def _address(buf: array) -> int:
    return buf.buffer_info()[0] if len(buf) else 0


def _pairs(ranges: Sequence[tuple[int, int]]) -> array:
    out = array("Q")
    for start, end in sorted(ranges):
        out.append(start)
        out.append(end)
    return out


class SortedBlocks(abc.Mapping):
    """address -> size over two arrays, addresses ascending: the live blocks as the scan takes
    them, without a dictionary (800,000 entries take 0.15 s to put in one)."""

    __slots__ = ("starts", "sizes")

    def __init__(self, starts: array, sizes: array) -> None:
        self.starts, self.sizes = starts, sizes

    def __getitem__(self, addr: int) -> int:
        i = bisect.bisect_left(self.starts, addr)
        if i == len(self.starts) or self.starts[i] != addr:
            raise KeyError(addr)
        return self.sizes[i]

    def __iter__(self) -> Iterator[int]:
        return iter(self.starts)

    def __len__(self) -> int:
        return len(self.starts)


class _Items(abc.ItemsView):
    def __iter__(self) -> Iterator[tuple[int, str]]:
        kinds = self._mapping
        return zip(kinds.starts, map(_KINDS.__getitem__, kinds.sizes), strict=True)


class _Kinds(SortedBlocks):
    """address -> leak kind, from the library's states (its `sizes`)."""

    __slots__ = ()

    def __getitem__(self, addr: int) -> str:  # type: ignore[override]
        return _KINDS[super().__getitem__(addr)]

    def items(self) -> _Items:  # type: ignore[override]
        return _Items(self)

    def __repr__(self) -> str:
        return f"{dict(self.items())!r}"


def sorted_pairs(keys: array, values: array) -> bool:
    """Sorts the pairs KEYS[k], VALUES[k] (arrays of "Q") by key, in place, with the library;
    False when it is not there (or out of memory), the arrays unchanged."""
    lib = library()
    return lib is not None and lib.mds_sort(_address(keys), _address(values), len(keys)) == 0


def _as_arrays(blocks: dict[int, int] | tuple[Sequence[int], Sequence[int]] | SortedBlocks,
               lib: ctypes.CDLL) -> tuple[array, array]:
    if isinstance(blocks, SortedBlocks):
        return blocks.starts, blocks.sizes
    if isinstance(blocks, dict):  # sorted by the library: 10x faster than sorted() here
        starts, sizes = array("Q", blocks.keys()), array("Q", blocks.values())
        if lib.mds_sort(_address(starts), _address(sizes), len(starts)) != 0:
            starts = array("Q", sorted(blocks))
            sizes = array("Q", map(blocks.__getitem__, starts))
        return starts, sizes
    starts, sizes = blocks
    return (starts if isinstance(starts, array) and starts.typecode == "Q" else array("Q", starts),
            sizes if isinstance(sizes, array) and sizes.typecode == "Q" else array("Q", sizes))


def scan(
    read: Callable[[int, int], bytes],
    mappings: Sequence[Mapping],
    blocks: dict[int, int] | tuple[Sequence[int], Sequence[int]],
    threads: Sequence[Thread],
    *,
    fd: int | None = None,
    pid: int | None = None,
    budget: int | None = None,
    heuristics: frozenset[str] = DEFAULT_HEURISTICS,
    deadline: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    attached: bool = False,
    memo_cap: int = 0,
    copy_split: int = 0,
) -> ScanResult:
    """reach.scan's answer, from the C library when it loads and FD (an open /proc/PID/mem, or
    any file where the offset is the address) is given. `blocks`: address -> size, or two
    parallel arrays (addresses sorted ascending, sizes). `read` serves the root selection (and
    the Python scan when the library is not there). PID: the process, whose blocks the library
    copies with process_vm_readv (without it, with pread on FD) before it scans, when the copy
    fits in BUDGET bytes (default `snapshot_budget()`; 0: never, read as needed). MEMO_CAP: most
    pointers kept for the replays (0: the library's default; tests make it small). COPY_SPLIT: a
    snapshot of at least this many bytes is copied by two threads (0: the library's 64 MiB)."""
    lib = library() if fd is not None else None
    if lib is None:
        if isinstance(blocks, SortedBlocks):
            blocks = dict(zip(blocks.starts, blocks.sizes, strict=True))
        elif not isinstance(blocks, dict):
            blocks = dict(zip(*blocks, strict=True))
        return reach.scan(read, mappings, blocks, threads, heuristics=heuristics,
                          deadline=deadline, progress=progress, attached=attached)
    began = time.monotonic()
    starts, sizes = _as_arrays(blocks, lib)
    roots, excluded = reach.select_roots(mappings, starts, threads, read,
                                         sizes if attached else None)
    n = len(starts)
    state, heur = bytearray(n), bytearray(n)
    leader = array("I", bytes(4 * n))
    root_pairs = array("Q")
    for r in roots:
        root_pairs.extend((r.start, r.end))
    registers = array("Q", (v for t in threads for v in t.registers))
    exec_maps = _pairs([(m.start, m.end) for m in mappings if m.executable and m.file_backed])
    file_maps = _pairs([(m.start, m.end) for m in mappings if m.readable and m.file_backed])
    all_maps = _pairs([(m.start, m.end) for m in mappings])

    def tick(nbytes: int, pending: int) -> int:
        if deadline is not None and time.monotonic() > deadline:
            return 1
        if progress is not None:
            progress(nbytes, pending)
        return 0

    callback = _TICK(tick)
    c_state = (ctypes.c_uint8 * n).from_buffer(state) if n else None
    c_heur = (ctypes.c_uint8 * n).from_buffer(heur) if n else None
    args = _Args(
        fd=fd, pid=pid or 0, budget=snapshot_budget() if budget is None else budget,
        heuristics=sum(1 << k for k, h in enumerate(HEURISTICS) if h in heuristics),
        n_blocks=n, starts=_address(starts), sizes=_address(sizes),
        n_roots=len(roots), roots=_address(root_pairs),
        n_registers=len(registers), registers=_address(registers),
        n_exec=len(exec_maps) // 2, exec_maps=_address(exec_maps),
        n_file=len(file_maps) // 2, file_maps=_address(file_maps),
        n_maps=len(all_maps) // 2, maps=_address(all_maps), tick=callback,
        state=ctypes.addressof(c_state) if n else None,
        heuristic=ctypes.addressof(c_heur) if n else None, leader=_address(leader),
        memo_cap=memo_cap, copy_split=copy_split)
    rc = lib.mds_scan(ctypes.byref(args)) if n else 0
    del c_state, c_heur  # release the exports of the bytearrays
    if rc == 1:
        raise ScanTimeout
    if rc != 0:
        raise MemoryError("libmemdump_scan: out of memory")
    kinds = _Kinds(starts, state)
    heuristic_names = {starts[m.start()]: HEURISTICS[heur[m.start()] - 1]
                       for m in re.finditer(rb"[^\x00]", heur)}
    leaders = {}
    for m in re.finditer(rb"\x03", state):
        i = m.start()
        if leader[i] != _NO_OWNER:
            leaders[starts[i]] = starts[leader[i]]
    return FastScanResult(
        kinds=kinds, heuristics=heuristic_names, leaders=leaders, roots=roots,
        excluded=excluded, root_bytes=args.root_bytes if n else 0,
        block_bytes=args.block_bytes, skipped_bytes=args.skipped_bytes,
        seconds=time.monotonic() - began, engine="c", reads=_READS[args.snapshot],
        snapshot_bytes=args.snapshot_bytes, snapshot_calls=args.snapshot_calls,
        snapshot_seconds=args.snapshot_ns / 1e9, replayed=args.replayed)
