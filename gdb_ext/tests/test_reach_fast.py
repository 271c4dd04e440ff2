"""reach_fast: libmemdump_scan.so gives the ScanResult reach.py gives, on every case of
test_reach.py and on random graphs (interior pointers, cycles, cliques joining, heuristics),
with its snapshot of the blocks and without (over its budget: pread as it goes).

The library reads memory with pread on a descriptor whose offsets are addresses: the fake memory
of test_reach.Memory is written at its addresses into a memfd (sparse); without a pid it fills
its snapshot with pread too. process_vm_readv is tested on a live process (scan_bench)."""

from __future__ import annotations

import os
import random
import subprocess
import time
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import test_reach
from dbgkit.core import procfs, reach, reach_fast
from dbgkit.core.reach import Mapping, ScanResult, ScanTimeout, Thread
from test_reach import DATA, HEAP, LIBC_DATA, STACK, Memory


@pytest.fixture(autouse=True)
def _library_built() -> None:
    """A build without the library must fail here, not fall back to Python silently."""
    assert reach_fast.library() is not None, (
        f"{reach_fast.library_path()} missing or not loadable: run `make build` "
        "(and set MEMDUMP_BUILD_DIR for another build directory)")


@contextmanager
def memfd(m: Memory) -> Iterator[int]:
    fd = os.memfd_create("reach-fast-test", os.MFD_CLOEXEC)
    try:
        for start, buf in m.mem.items():
            os.pwrite(fd, bytes(buf), start)
        yield fd
    finally:
        os.close(fd)


def _fields(r: ScanResult) -> dict:
    return {"kinds": r.kinds, "heuristics": r.heuristics, "leaders": r.leaders,
            "roots": r.roots, "excluded": r.excluded, "root_bytes": r.root_bytes,
            "block_bytes": r.block_bytes, "skipped_bytes": r.skipped_bytes}


def both(read, maps, blocks, threads, **kw) -> ScanResult:  # noqa: ANN001, ANN003
    """reach.scan's result, after checking that the library gives the same one."""
    m = read.__self__
    try:
        py = reach.scan(read, maps, blocks, threads, **kw)
    except ScanTimeout:
        with memfd(m) as fd, pytest.raises(ScanTimeout):
            reach_fast.scan(read, maps, blocks, threads, fd=fd, **kw)
        raise
    with memfd(m) as fd:
        c = reach_fast.scan(read, maps, blocks, threads, fd=fd, **kw)
        starts = array("Q", sorted(blocks))
        c2 = reach_fast.scan(read, maps, (starts, array("Q", (blocks[a] for a in starts))),
                             threads, fd=fd, **kw)
        c3 = reach_fast.scan(read, maps, blocks, threads, fd=fd, budget=0, **kw)  # no snapshot
        # a memo of one pointer: nearly every block scanned twice is read twice, as reach.py does
        c4 = reach_fast.scan(read, maps, blocks, threads, fd=fd, memo_cap=1, **kw)
        c5 = reach_fast.scan(read, maps, blocks, threads, fd=fd, copy_split=1, **kw)  # 2 threads
    assert (py.engine, c.engine, c2.engine, c3.engine) == ("python", "c", "c", "c")
    assert _fields(c4) == _fields(py)
    assert _fields(c5) == _fields(py) and c5.snapshot_bytes == c.snapshot_bytes
    assert c4.replayed <= c.replayed
    assert c.reads == ("snapshot (pread)" if blocks else "pread") and c3.reads == "pread"
    assert _fields(c) == _fields(py)
    assert _fields(c2) == _fields(py)
    assert _fields(c3) == _fields(py)
    assert list(c.kinds) == list(py.kinds)  # same order: records() writes them so
    return py


# test_reach's cases whose memory has a mapping that cannot be read (a memfd reads it as zeros):
# test_an_unreadable_root_is_skipped below does it with memory past the end of the file.
_UNREADABLE = {"test_devices_are_not_scanned_and_unreadable_pages_are_skipped"}
_CASES = sorted(n for n in dir(test_reach) if n.startswith("test_") and n not in _UNREADABLE)


@pytest.mark.parametrize("name", _CASES)
def test_the_library_agrees_with_python_on(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(test_reach, "scan", both)
    getattr(test_reach, name)()


def test_an_unreadable_root_is_skipped() -> None:
    m = Memory()
    a = m.alloc(16)
    m.put(DATA, a)
    top = max(start + len(buf) for start, buf in m.mem.items())
    hole = Mapping(top + 0x10000, top + 0x13000, "rw-p")  # past the end of the memfd: short reads
    with memfd(m) as fd:
        c = reach_fast.scan(m.read, [*m.maps, hole], m.blocks, [Thread(1, STACK + 0x8000)], fd=fd)
    py = reach.scan(m.read, [*m.maps, hole], m.blocks, [Thread(1, STACK + 0x8000)])
    assert c.skipped_bytes == py.skipped_bytes == 0x3000
    assert _fields(c) == _fields(py)


class ShortMemory(Memory):
    """Memory that cannot be read from `end` up, as a memfd truncated there reads."""

    def __init__(self) -> None:
        super().__init__()
        self.end = 0

    def read(self, addr: int, size: int) -> bytes:
        if addr >= self.end:
            raise OSError(5, "unreadable")
        return super().read(addr, min(size, self.end - addr))


@pytest.mark.parametrize("budget", [None, 0, 1 << 14])
def test_unreadable_blocks_read_the_same_with_or_without_the_snapshot(budget: int | None) -> None:
    """Blocks (small and big) wholly, partly and not readable, pointing at each other: the
    snapshot leaves out the pages it cannot copy and those are read as without it. A budget
    smaller than the copy means no snapshot."""
    m = ShortMemory()
    m.map(BIG_MAP, 0x40000, "rw-p")
    m.map(BIG_MAP + 0x40000, 0x8000, "rw-p")  # adjacent, unreadable from its second page
    big = BIG_MAP + 16  # its mapping's own block, read in pieces, readable
    m.put(BIG_MAP, 0, 0x40000 | 2)
    m.blocks[big] = 0x40000 - 16
    tail = BIG_MAP + 0x40000 + 0x10  # small blocks across the edge of readable memory
    blocks = []
    for k in range(12):
        addr = tail + k * 0x400
        m.put(addr - 8, 0x401)
        m.blocks[addr] = 0x3F0
        blocks.append(addr)
    m.end = BIG_MAP + 0x40000 + 0x1000
    kept = m.alloc(64)
    m.put(DATA, kept, big + 0x100)
    m.put(kept, *blocks[:6])  # readable, crossing the edge, unreadable
    m.put(big + 0x3F000, blocks[1] + 8, kept + 8)
    m.put(blocks[0], blocks[2])
    threads = [Thread(1, STACK + 0x8000)]
    py = reach.scan(m.read, m.maps, m.blocks, threads)
    with memfd(m) as fd:
        os.ftruncate(fd, m.end)
        c = reach_fast.scan(m.read, m.maps, m.blocks, threads, fd=fd, budget=budget)
    assert c.reads == ("pread" if budget is not None else "snapshot (pread)")
    assert _fields(c) == _fields(py)
    if budget is None:  # the pages past the end stay out of the snapshot
        assert 0 < c.snapshot_bytes < sum(m.blocks.values())
    assert py.kinds[blocks[0]] == "reachable" and py.kinds[blocks[5]] == "reachable"


@pytest.mark.parametrize("count", [0, 1, 2, 1000])
def test_the_library_sorts_the_blocks_as_python_does(count: int) -> None:
    rng = random.Random(count)
    starts = rng.sample(range(0, 1 << 64, 16), count) + ([0x7FFF_0000_0010, 0x10] if count else [])
    blocks = {a: rng.randrange(1 << 40) for a in starts}
    lib = reach_fast.library()
    got = reach_fast._as_arrays(blocks, lib)
    assert list(got[0]) == sorted(blocks) and list(got[1]) == [blocks[a] for a in sorted(blocks)]


def test_the_budget_is_half_of_the_available_memory(tmp_path: Path) -> None:
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       16000000 kB\nMemAvailable:    4000000 kB\n")
    assert reach_fast.snapshot_budget(str(info)) == 4000000 * 1024 // 2
    info.write_text("MemTotal:       16000000 kB\n")
    assert reach_fast.snapshot_budget(str(info)) == 0
    assert reach_fast.snapshot_budget(str(tmp_path / "none")) == 0


def test_without_a_descriptor_or_library_python_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    m = Memory()
    a = m.alloc(16)
    m.put(DATA, a)
    threads = [Thread(1, STACK + 0x8000)]
    assert reach_fast.scan(m.read, m.maps, m.blocks, threads).engine == "python"
    monkeypatch.setenv("MEMDUMP_SCAN_LIB", "/nonexistent/libmemdump_scan.so")
    with memfd(m) as fd:
        res = reach_fast.scan(m.read, m.maps, m.blocks, threads, fd=fd)
    assert res.engine == "python" and res.kinds == {a: "reachable"}


def test_the_library_is_found_where_the_build_puts_it(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.delenv("MEMDUMP_SCAN_LIB", raising=False)
    built = tmp_path / "gdb_ext/scan/libmemdump_scan.so"
    built.parent.mkdir(parents=True)
    built.write_bytes(b"")
    monkeypatch.setenv("MEMDUMP_BUILD_DIR", str(tmp_path))
    assert reach_fast.library_path() == str(built)
    monkeypatch.delenv("MEMDUMP_BUILD_DIR")
    repo = Path(reach_fast.__file__).resolve().parents[3]
    assert reach_fast.library_path() == str(repo / "build/gdb_ext/scan/libmemdump_scan.so")


def test_progress_is_reported_and_the_deadline_stops_the_library() -> None:
    m = _random_memory(random.Random(5), 300)
    seen: list[tuple[int, int]] = []
    with memfd(m) as fd:
        res = reach_fast.scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)], fd=fd,
                              progress=lambda nbytes, pending: seen.append((nbytes, pending)))
        assert res.engine == "c" and seen and seen[0][0] > 0
        with pytest.raises(ScanTimeout):
            reach_fast.scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)], fd=fd,
                            deadline=0.0)


# -- random graphs ----------------------------------------------------------------------------

TEXT, RODATA = 0x4000_0000, 0x4000_2000
BIG_MAP = 0x7FFF_F200_0000


def _random_memory(rng: random.Random, count: int) -> Memory:
    """COUNT blocks in a 1 MiB heap and two large mmapped ones, pointing at each other through
    start and interior pointers, some laid out for each heuristic, a few held by globals, the
    stack, libc's data and registers; glibc's words pointing at the chunk header after a block
    in libc's data, in blocks (recycled memory) and in registers."""
    m = Memory()
    m.maps = [x for x in m.maps if x.start != HEAP]
    del m.mem[HEAP]
    m.map(HEAP, 0x100000, "rw-p", "[heap]")
    m.map(LIBC_DATA, 0x1000, "rw-p", "/lib/x86_64-linux-gnu/libc.so.6", inode=9)
    m.map(TEXT, 0x1000, "r-xp", "/src/prog", inode=7)
    m.map(RODATA, 0x1000, "r--p", "/src/prog", inode=7)
    vtables = [RODATA + 0x10 + 0x40 * k for k in range(4)]
    for k, vt in enumerate(vtables):
        m.put(vt, TEXT + 0x40 + k * 8, TEXT + 0x80)
    for k in range(2):  # large blocks in their own mmap, read in pieces
        chunk = BIG_MAP + k * 0x100000
        m.map(chunk, 0x60000, "rw-p")
        m.put(chunk, 0, 0x60000 | 2)
        m.blocks[chunk + 16] = 0x50000 + 8 * k
    for _ in range(count):
        m.alloc(rng.choice((0, 8, 16, 24, 40, 64, 100, 256, 1000)))
    blocks = sorted(m.blocks)
    density = rng.choice((0.01, 0.03, 0.1, 0.3))  # of words that point to a block
    laid_out: dict[int, int] = {}  # block laid out for a heuristic -> the offset it explains

    def pointer_into(b: int) -> int:
        size = m.blocks[b]
        r = rng.random()
        if b in laid_out and r < 0.6:
            return b + laid_out[b]
        if r < 0.5 or size < 9:
            return b
        return b + rng.choice((8, 16, 24, rng.randrange(1, size)))

    for b in blocks:
        size = m.blocks[b]
        kind = rng.random()
        if size >= 16 and kind < 0.05:
            m.put(b, rng.choice((1, 2, 4, (size - 8) or 1)))  # newarray / length64 count
            laid_out[b] = 8
        elif size >= 40 and kind < 0.08:
            m.put(b, 3, size - 25, 0)  # std::string rep
            laid_out[b] = 24
        elif size >= 24 and kind < 0.12:
            m.put(b, rng.choice(vtables), 0, rng.choice(vtables))  # two vtable pointers
            laid_out[b] = 16
    for b in blocks:
        for off in range(0, m.blocks[b] - 7, 8):
            if b not in laid_out or off >= 24:
                if rng.random() < density:
                    m.put(b + off, pointer_into(rng.choice(blocks)))
    for slot in range(rng.randrange(0, 12)):
        m.put(DATA + 8 * slot, pointer_into(rng.choice(blocks)))
    for slot in range(rng.randrange(0, 6)):
        m.put(STACK + 0x8000 + 8 * slot, pointer_into(rng.choice(blocks)))
    for slot in range(rng.randrange(0, 4)):  # libc's pointers to the chunk header after a block
        m.put(LIBC_DATA + 8 * slot, next_header(m, rng.choice(blocks[2:])))
    for _ in range(rng.randrange(0, count // 4 + 2)):  # and the fd/bk words left in blocks
        b = rng.choice(blocks)
        if m.blocks[b] >= 8:
            m.put(b + rng.randrange(0, m.blocks[b] - 7, 8), next_header(m, rng.choice(blocks)))
    return m


def next_header(m: Memory, b: int) -> int:
    """The address of the chunk header after block B (Memory.alloc's glibc layout)."""
    return b - 16 + max(32, (m.blocks[b] + 8 + 15) & ~15)


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs(seed: int) -> None:
    rng = random.Random(seed)
    m = _random_memory(rng, rng.choice((20, 200, 2000)))
    regs = tuple(rng.choice(sorted(m.blocks)) + rng.choice((0, 8)) for _ in range(3))
    regs += tuple(next_header(m, rng.choice(sorted(m.blocks))) for _ in range(2))
    heuristics = rng.choice((reach.DEFAULT_HEURISTICS, frozenset(),
                             frozenset({"newarray", "multipleinheritance"})))
    res = both(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000, regs)],
               heuristics=heuristics)
    assert len(res.kinds) == len(m.blocks)


def test_a_block_reached_as_possibly_lost_then_as_reachable_is_read_once() -> None:
    """valgrind's order scans such a block twice; the library replays the second scan from the
    pointers the first one kept that can change anything (a start pointer, the offsets the
    heuristics look at), and reads it again only when its memo is full."""
    m = Memory()
    a, b, c, d, e = (m.alloc(64) for _ in range(5))
    m.put(DATA, a, b)     # both reachable; b is pushed last and scanned first
    m.put(b, c + 8)       # c possibly lost, scanned as such
    m.put(c + 16, d, b)   # c's scan keeps two start pointers: d becomes possibly lost
    m.put(a, c, e + 8)    # a's scan: c reachable (its second scan), e possibly lost
    threads = [Thread(1, STACK + 0x8000, ())]
    res = both(m.read, m.maps, m.blocks, threads)
    assert [res.kinds[x] for x in (a, b, c, d, e)] == [
        "reachable", "reachable", "reachable", "reachable", "possible"]
    with memfd(m) as fd:
        # c's second scan and d's (its first kept nothing) are replayed...
        assert reach_fast.scan(m.read, m.maps, m.blocks, threads, fd=fd).replayed == 2
        # ...but a memo of one pointer cannot hold c's two: c is read again
        assert reach_fast.scan(m.read, m.maps, m.blocks, threads, fd=fd,
                               memo_cap=1).replayed == 1


# -- a real process ----------------------------------------------------------------------------


@contextmanager
def scan_bench(tmp_path: Path, *args: str) -> Iterator[tuple[int, dict[int, int], list[Thread]]]:
    """A waiting scan_bench process: (pid, its blocks, its thread)."""
    build = Path(os.environ.get("MEMDUMP_BUILD_DIR") or Path(__file__).parents[2] / "build")
    program = build / "tests" / "programs" / "scan_bench"
    assert program.exists(), f"{program}: run make build"
    listing = tmp_path / "blocks"
    proc = subprocess.Popen([str(program), *args, str(listing)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        pairs = array("Q", listing.read_bytes())
        blocks = dict(zip(pairs[::2], pairs[1::2], strict=True))
        blocked = None
        for _ in range(500):  # "ready" is printed just before pause()
            blocked = procfs.blocked_in_syscall(proc.pid, proc.pid)
            if blocked is not None:
                break
            time.sleep(0.01)
        assert blocked is not None
        yield proc.pid, blocks, [Thread(proc.pid, blocked[0], blocked[1])]
    finally:
        proc.kill()
        proc.wait()


def test_the_library_agrees_with_python_on_a_live_process(tmp_path: Path) -> None:
    """scan_bench's heap (glibc's arena, libc's pointers to chunk headers, a thread in pause()),
    read through /proc/PID/mem and process_vm_readv: the same result both ways."""
    with scan_bench(tmp_path, "2", "16", "2") as (pid, blocks, threads):
        memory = procfs.ProcessMemory(pid)
        try:
            maps = procfs.read_maps(pid)
            py = reach.scan(memory.read_some, maps, blocks, threads)
            c = reach_fast.scan(memory.read_some, maps, blocks, threads, fd=memory.fd, pid=pid)
            slow = reach_fast.scan(memory.read_some, maps, blocks, threads, fd=memory.fd,
                                   pid=pid, budget=0)
        finally:
            memory.close()
    assert (c.engine, c.reads, slow.reads) == ("c", "snapshot", "pread")
    assert c.snapshot_bytes >= sum(blocks.values()) and c.snapshot_calls >= 1
    assert _fields(c) == _fields(py) == _fields(slow)
    assert set(c.kinds.values()) == {"reachable"} and c.block_bytes >= sum(blocks.values())


@pytest.mark.parametrize("split", [0, 1])
@pytest.mark.parametrize("pid", ["own", "refused"])
def test_unreadable_blocks_of_a_live_process(tmp_path: Path, pid: str, split: int) -> None:
    """Blocks process_vm_readv cannot copy: in a PROT_NONE page (which /proc/PID/mem reads: one
    points to a block after it, indirect then), across the end of the heap, in no mapping. And
    process_vm_readv refused (a pid that is not the process's): the snapshot is read with pread.
    SPLIT 1: the snapshot copied by two threads, the holes of both kept."""
    with scan_bench(tmp_path, "1", "16", "2") as (own, blocks, threads):
        memory = procfs.ProcessMemory(own)
        try:
            maps = procfs.read_maps(own)
            guard = next(m for m in maps if m.reserved and m.end - m.start == 0x1000)
            heap = next(m for m in maps if m.path == "[heap]")
            nowhere = heap.end + 0x2000
            assert not any(m.start < nowhere + 0x100 and nowhere < m.end for m in maps)
            fake = {guard.start: 0x1000, guard.end: 0x40, heap.end - 0x40: 0x1000,
                    nowhere: 0x100, guard.start - 0x100: 0x200}
            blocks = {**blocks, **fake}
            py = reach.scan(memory.read_some, maps, blocks, threads)
            c = reach_fast.scan(memory.read_some, maps, blocks, threads, fd=memory.fd,
                                pid=own if pid == "own" else 0x7FFFFFFF, copy_split=split)
        finally:
            memory.close()
    assert c.reads == ("snapshot" if pid == "own" else "snapshot (pread)")
    assert _fields(c) == _fields(py)
    assert py.kinds[guard.start] == "definite" and py.kinds[guard.end] == "indirect"
