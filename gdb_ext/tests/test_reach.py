"""reach: valgrind's leak kinds on synthetic memory (chains, cycles, interior pointers, heuristics,
cliques, registers, stacks, and the mappings that are not roots)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "gdb_ext"))

from dbgkit.core.reach import (  # noqa: E402
    ARENA_ALIGN,
    Mapping,
    ScanTimeout,
    Thread,
    parse_maps,
    scan,
    select_roots,
)

HEAP = 0x5555_5555_9000
DATA = 0x5555_5555_8000
STACK = 0x7FFF_FFFD_0000
LIBC_DATA = 0x7FFF_F7F9_0000


class Memory:
    """A fake process: mappings with bytes, and glibc-like heap blocks with chunk headers."""

    def __init__(self) -> None:
        self.maps: list[Mapping] = []
        self.mem: dict[int, bytearray] = {}
        self.blocks: dict[int, int] = {}
        self.map(DATA, 0x1000, "rw-p", "/src/prog", inode=7)
        self.map(HEAP, 0x10000, "rw-p", "[heap]")
        self.map(STACK, 0x10000, "rw-p", "[stack]")
        self._next = HEAP + 0x10

    def map(self, start: int, size: int, perms: str = "rw-p", path: str = "",
            inode: int = 0) -> Mapping:
        m = Mapping(start, start + size, perms, 0, inode, path)
        self.maps.append(m)
        self.maps.sort(key=lambda x: x.start)
        self.mem[start] = bytearray(size)
        return m

    def alloc(self, size: int) -> int:
        """A block after the previous one, with glibc's size field just before it."""
        addr = self._next
        chunk = max(32, (size + 8 + 15) & ~15)
        self.put(addr - 8, chunk | 1)
        self.blocks[addr] = size
        self._next = addr + chunk
        return addr

    def put(self, addr: int, *words: int) -> None:
        for k, w in enumerate(words):
            self.write(addr + 8 * k, w.to_bytes(8, "little"))

    def write(self, addr: int, data: bytes) -> None:
        for start, buf in self.mem.items():
            if start <= addr and addr + len(data) <= start + len(buf):
                buf[addr - start: addr - start + len(data)] = data
                return
        raise AssertionError(f"{addr:#x} is not mapped")

    def read(self, addr: int, size: int) -> bytes:
        for start, buf in self.mem.items():
            if start <= addr < start + len(buf):
                return bytes(buf[addr - start: addr - start + size])
        raise OSError(5, "unmapped")

    def scan(self, threads: list[Thread] | None = None, **kw) -> dict[int, str]:  # noqa: ANN003
        if threads is None:
            threads = [Thread(1, STACK + 0x8000)]
        return scan(self.read, self.maps, self.blocks, threads, **kw).kinds


def test_a_block_held_by_a_global_is_reachable_and_a_lost_one_definite() -> None:
    m = Memory()
    kept, lost = m.alloc(40), m.alloc(40)
    m.put(DATA + 0x10, kept)
    assert m.scan() == {kept: "reachable", lost: "definite"}


def test_a_lost_list_is_one_definite_and_the_rest_indirect() -> None:
    m = Memory()
    nodes = [m.alloc(16) for _ in range(5)]
    for a, b in zip(nodes, nodes[1:], strict=False):
        m.put(a, b)
    kinds = m.scan()
    assert kinds[nodes[0]] == "definite"
    assert [kinds[n] for n in nodes[1:]] == ["indirect"] * 4


def test_a_list_held_by_a_global_is_reachable_throughout() -> None:
    m = Memory()
    nodes = [m.alloc(16) for _ in range(4)]
    for a, b in zip(nodes, nodes[1:], strict=False):
        m.put(a + 8, b)
    m.put(DATA, nodes[0])
    assert set(m.scan().values()) == {"reachable"}


def test_a_cycle_without_root_is_one_definite_one_indirect() -> None:
    m = Memory()
    a, b = m.alloc(24), m.alloc(24)
    m.put(a, b)
    m.put(b, a)
    assert m.scan() == {a: "definite", b: "indirect"}


def test_cliques_merge_whatever_the_address_order() -> None:
    # b (lower address) leads a clique {b, c} first; a, found later, absorbs it
    m = Memory()
    b, c, a = m.alloc(16), m.alloc(16), m.alloc(16)
    m.put(b, c)
    m.put(a, b)
    assert m.scan() == {a: "definite", b: "indirect", c: "indirect"}


def _result(m: Memory):  # noqa: ANN202
    return scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])


def test_each_indirect_block_names_its_clique_leader() -> None:
    """A lost list head owns its nodes; two lost lists, two leaders; a cycle's leader is its
    lowest block; what a reachable block points to has no leader."""
    m = Memory()
    head = m.alloc(24)
    nodes = [m.alloc(100 + k) for k in range(3)]
    m.put(head, nodes[0])
    m.put(nodes[0], nodes[1])
    m.put(nodes[0] + 8, nodes[2])
    other, child = m.alloc(16), m.alloc(8)
    m.put(other, child)
    a, b = m.alloc(24), m.alloc(24)
    m.put(a, b)
    m.put(b, a)
    kept, kept_child = m.alloc(16), m.alloc(16)
    m.put(DATA, kept)
    m.put(kept, kept_child)
    res = _result(m)
    assert res.leaders == {nodes[0]: head, nodes[1]: head, nodes[2]: head, child: other, b: a}
    assert sorted(r for r in res.records() if r[1] == "indirect") == sorted(
        [(nodes[0], "indirect", f"{head:#x}"), (nodes[1], "indirect", f"{head:#x}"),
         (nodes[2], "indirect", f"{head:#x}"), (child, "indirect", f"{other:#x}"),
         (b, "indirect", f"{a:#x}")])
    assert (head, "definite", None) in list(res.records())


def test_a_clique_absorbed_by_a_later_leader_follows_it() -> None:
    # b (lower address) leads {b, c} first; a, a later leader, reaches b: b, c belong to a
    m = Memory()
    b, c, d, a = m.alloc(16), m.alloc(16), m.alloc(16), m.alloc(16)
    m.put(b, c)
    m.put(c, d)
    m.put(a, b)
    res = _result(m)
    assert res.kinds == {a: "definite", b: "indirect", c: "indirect", d: "indirect"}
    assert res.leaders == {b: a, c: a, d: a}


def test_indirect_blocks_are_found_through_interior_pointers_too() -> None:
    m = Memory()
    a, b = m.alloc(16), m.alloc(64)
    m.put(a, b + 40)
    assert m.scan() == {a: "definite", b: "indirect"}


def test_an_interior_pointer_makes_a_block_possibly_lost() -> None:
    m = Memory()
    a = m.alloc(100)
    m.put(DATA, a + 40)
    assert m.scan() == {a: "possible"}


def test_what_a_possibly_lost_block_points_to_is_possibly_lost() -> None:
    m = Memory()
    a, b = m.alloc(64), m.alloc(16)
    m.put(DATA, a + 16)
    m.put(a, b)
    assert m.scan() == {a: "possible", b: "possible"}


def test_a_start_pointer_from_a_root_upgrades_a_possible_block() -> None:
    m = Memory()
    a, b = m.alloc(64), m.alloc(16)
    m.put(DATA, a + 16)  # possible ... then reachable through b
    m.put(a, b)
    m.put(DATA + 8, b)  # b reachable, and b points to a's start
    m.put(b, a)
    assert m.scan() == {a: "reachable", b: "reachable"}


def test_newarray_heuristic_and_without_it() -> None:
    m = Memory()
    arr = m.alloc(8 + 3 * 16)  # new T[3] of a 16-byte T with a destructor: count, elements
    m.put(arr, 3)
    m.put(DATA, arr + 8)
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.kinds == {arr: "reachable"}
    assert res.heuristics == {arr: "newarray"}
    assert m.scan(heuristics=frozenset()) == {arr: "possible"}


def test_newarray_needs_a_count_that_divides_the_rest() -> None:
    m = Memory()
    arr = m.alloc(8 + 50)
    m.put(arr, 3)
    m.put(DATA, arr + 8)
    assert m.scan() == {arr: "possible"}


def test_length64_heuristic() -> None:
    m = Memory()
    blk = m.alloc(8 + 37)  # sqlite style: the length of what follows, then the data
    m.put(blk, 37)
    m.put(DATA, blk + 8)
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.kinds == {blk: "reachable"}
    assert res.heuristics == {blk: "length64"}
    # newarray explains it too (valgrind: "a block matching length64 also matches newarray")
    assert m.scan(heuristics=frozenset({"newarray"})) == {blk: "reachable"}
    assert m.scan(heuristics=frozenset({"stdstring"})) == {blk: "possible"}


def test_stdstring_heuristic() -> None:
    m = Memory()
    rep = m.alloc(24 + 15 + 1)  # pre-C++11 std::string rep: length, capacity, refcount, chars
    m.put(rep, 11, 15, 0)
    m.put(DATA, rep + 24)
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.heuristics == {rep: "stdstring"}
    assert m.scan(heuristics=frozenset({"newarray"})) == {rep: "possible"}


def test_multipleinheritance_heuristic() -> None:
    m = Memory()
    text = m.map(0x4000_0000, 0x1000, "r-xp", "/src/prog", inode=7)
    rodata = m.map(0x4000_2000, 0x1000, "r--p", "/src/prog", inode=7)
    vt_a, vt_b = rodata.start + 0x10, rodata.start + 0x100
    m.mem[rodata.start][0x10:0x20] = (text.start + 0x40).to_bytes(8, "little") * 2
    m.mem[rodata.start][0x100:0x110] = (text.start + 0x80).to_bytes(8, "little") * 2
    obj = m.alloc(32)  # struct C : A, B: A's vtable pointer, then B's at offset 16
    m.put(obj, vt_a, 0, vt_b)
    m.put(DATA, obj + 16)
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.heuristics == {obj: "multipleinheritance"}
    # a "vtable" whose entries point at data is not one
    m.put(obj, DATA + 8)
    assert m.scan() == {obj: "possible"}


def test_a_register_is_a_root() -> None:
    m = Memory()
    a = m.alloc(16)
    assert m.scan([Thread(1, STACK + 0x8000, (0, 5, a))]) == {a: "reachable"}
    assert m.scan([Thread(1, STACK + 0x8000, (0, a + 4))]) == {a: "possible"}


def test_a_stack_is_scanned_from_its_pointer_minus_the_red_zone() -> None:
    m = Memory()
    above, red, below = m.alloc(16), m.alloc(16), m.alloc(16)
    sp = STACK + 0x8000
    m.put(sp + 0x100, above)
    m.put(sp - 64, red)
    m.put(sp - 256, below)
    assert m.scan([Thread(1, sp)]) == {above: "reachable", red: "reachable", below: "definite"}


def test_the_exiting_threads_stack_has_no_red_zone() -> None:
    # stopped on _exit's first instruction: below the stack pointer is garbage of returned calls
    m = Memory()
    above, red = m.alloc(16), m.alloc(16)
    sp = STACK + 0x8000
    m.put(sp, above)
    m.put(sp - 8, red)
    assert m.scan([Thread(1, sp, red_zone=0)]) == {above: "reachable", red: "definite"}


def test_a_live_threads_stack_is_a_root_and_a_stale_one_is_not() -> None:
    m = Memory()
    guard1 = 0x7FFF_F000_0000
    m.map(guard1, 0x1000, "---p")
    m.map(guard1 + 0x1000, 0x20000, "rw-p")
    guard2 = 0x7FFF_F100_0000
    m.map(guard2, 0x1000, "---p")
    m.map(guard2 + 0x1000, 0x20000, "rw-p")
    live, stale = m.alloc(16), m.alloc(16)
    sp = guard1 + 0x10000
    m.put(sp + 8, live)
    m.put(guard2 + 0x18000, stale)  # a thread that exited left this; glibc keeps its stack
    threads = [Thread(1, STACK + 0x8000), Thread(2, sp)]
    res = scan(m.read, m.maps, m.blocks, threads)
    assert res.kinds == {live: "reachable", stale: "definite"}
    assert [(e.start, e.reason) for e in res.excluded] == [(HEAP, "heap"),
                                                           (guard2 + 0x1000, "stale-stack")]


def test_stack_without_a_live_thread_is_not_a_root() -> None:
    m = Memory()
    a = m.alloc(16)
    m.put(STACK + 0x9000, a)
    assert m.scan([]) == {a: "definite"}


def test_glibc_arena_and_mmapped_blocks_are_not_roots() -> None:
    m = Memory()
    arena = 0x7FFF_EC00_0000
    assert arena % ARENA_ALIGN == 0
    m.map(arena, 0x21000, "rw-p")
    m.map(arena + 0x21000, 0x3FDF000, "---p")
    big_map = m.map(0x7FFF_F200_0000, 0x40000, "rw-p")
    a = m.alloc(16)
    big = big_map.start + 16
    m.blocks[big] = 0x30000
    m.put(big_map.start, 0, 0x40000 | 2)  # glibc's header: prev_size 0, size | IS_MMAPPED
    m.put(arena + 0x800, a)  # a freed chunk of the arena still holds a
    m.put(big_map.start + 0x38000, a)  # in the mmapped chunk, past the block: not a root either
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.kinds == {a: "definite", big: "definite"}
    assert {(e.start, e.reason) for e in res.excluded} == {
        (arena, "arena"), (big_map.start, "mmapped-block"), (HEAP, "heap")}
    # the mmapped block holds a: a is indirect once big is found from a global
    m.put(big + 8, a)
    m.put(DATA, big)
    assert m.scan() == {a: "reachable", big: "reachable"}


def test_pointers_left_in_the_heap_are_not_roots() -> None:
    m = Memory()
    a = m.alloc(16)
    m.put(HEAP + 0x8000, a)  # a freed chunk's stale contents
    assert m.scan() == {a: "definite"}


def test_the_chunk_header_after_a_block_is_glibcs_wherever_the_word_is() -> None:
    """A 56-byte block fills a 64-byte chunk: the next chunk's header starts 48 bytes into it.
    glibc points there (main_arena's bins and top, a free chunk's fd/bk, and what these leave
    in memory recycled into a new block, in registers and on the stack of malloc's callers):
    none of it is the program's pointer into the block, which stays definitely lost."""
    m = Memory()
    m.map(LIBC_DATA, 0x1000, "rw-p", "/lib/x86_64-linux-gnu/libc.so.6", inode=9)
    lost = m.alloc(56)
    after = m.alloc(40)  # the chunk whose header that is: live, held by the program
    buffer = m.alloc(4096)  # stdio's buffer, carved from recycled chunks
    assert lost + 48 == after - 16
    m.put(DATA, after, buffer)
    m.put(LIBC_DATA + 0x100, lost + 48)  # main_arena.top, a bin
    m.put(buffer + 64, lost + 48)  # fd left in recycled memory
    m.put(buffer + 128, lost + 48)  # bk
    m.put(STACK + 0x8000, lost + 48)
    kinds = m.scan([Thread(1, STACK + 0x8000, (lost + 48,))])
    assert kinds == {lost: "definite", after: "reachable", buffer: "reachable"}
    # the rule is about that one word: 8 bytes lower is the program's interior pointer
    m.put(DATA + 16, lost + 40)
    assert m.scan()[lost] == "possible"


def test_a_next_header_word_leads_no_clique() -> None:
    """A lost block made of recycled chunks holds glibc's old fd pointing at the chunk header
    after another lost block: two cliques of one block each, as valgrind (to which that word is
    undefined) says, not one block indirectly lost through the other."""
    m = Memory()
    lost = m.alloc(24)
    buffer = m.alloc(1000)
    m.put(buffer + 32, lost + 16)
    assert m.scan() == {lost: "definite", buffer: "definite"}
    m.put(buffer + 40, lost + 8)
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.kinds == {lost: "indirect", buffer: "definite"}
    assert res.leaders == {lost: buffer}


def test_the_next_header_rule_needs_glibcs_size_word() -> None:
    """The rule reads the block's size word: a chunk in use, not IS_MMAPPED (an mmapped
    chunk has no next chunk), large enough to hold the block, whose next header is the word."""
    cases = [  # block size, its size word, the offset pointed at, the block's kind
        (40, 48 | 1, 32, "definite"),  # a 40-byte block: the next header 32 bytes in
        (40, 48 | 1 | 4, 32, "definite"),  # a thread arena's chunk (NON_MAIN_ARENA)
        (40, 48 | 2, 32, "possible"),  # IS_MMAPPED
        (40, 32 | 1, 16, "possible"),  # a chunk too small to hold the block: not glibc's
        (40, 0, 32, "possible"),  # no size word
        (56, 64 | 1, 40, "possible"),  # not the next header: 8 bytes lower
    ]
    for size, size_word, offset, kind in cases:
        m = Memory()
        block = m.alloc(size)
        m.put(block - 8, size_word)
        m.put(DATA, block + offset)
        assert m.scan() == {block: kind}, (size, size_word, offset)


def test_a_zero_byte_block_is_found_by_its_start() -> None:
    m = Memory()
    z = m.alloc(0)
    m.put(DATA, z)
    assert m.scan() == {z: "reachable"}


def test_devices_are_not_scanned_and_unreadable_pages_are_skipped() -> None:
    m = Memory()
    dev = m.map(0x7FFF_F300_0000, 0x1000, "rw-s", "/dev/dri/card0", inode=3)
    a = m.alloc(16)
    m.put(dev.start, a)
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.kinds == {a: "definite"}
    assert (dev.start, "device") in {(e.start, e.reason) for e in res.excluded}
    hole = Mapping(0x7FFF_F400_0000, 0x7FFF_F400_2000, "rw-p")  # listed, but reads fail
    res = scan(m.read, [*m.maps, hole], m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.skipped_bytes == 0x2000


def test_the_deadline_bounds_the_scan() -> None:
    m = Memory()
    m.alloc(16)
    with pytest.raises(ScanTimeout):
        m.scan(deadline=time.monotonic() - 1)


def test_totals_and_counts() -> None:
    m = Memory()
    kept, _lost = m.alloc(40), m.alloc(24)
    m.put(DATA, kept)
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.totals(m.blocks) == {"definite": (24, 1), "indirect": (0, 0),
                                    "possible": (0, 0), "reachable": (40, 1)}
    assert res.root_bytes == 0x1000 + (0x10000 - 0x8000 + 128)
    assert res.block_bytes == 40 + 24  # the lost block is scanned as a clique leader


def test_parse_maps_and_select_roots() -> None:
    text = (
        "555555554000-555555555000 r--p 00000000 08:01 42 /src/prog\n"
        "555555558000-555555559000 rw-p 00003000 08:01 42 /src/prog\n"
        "555555559000-55555557a000 rw-p 00000000 00:00 0 [heap]\n"
        "7ffff7f90000-7ffff7f92000 rw-p 001d4000 08:01 9 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7ffff7f92000-7ffff7f9f000 rw-p 00000000 00:00 0 \n"
        "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]\n"
    )
    maps = parse_maps(text)
    assert maps[0] == Mapping(0x555555554000, 0x555555555000, "r--p", 0, 42, "/src/prog")
    assert maps[4].path == ""
    roots, excluded = select_roots(maps, {0x555555559010: 16}, [Thread(1, 0x7FFFFFFFE000)])
    assert [r.start for r in roots] == [0x555555558000, 0x7FFFF7F90000, 0x7FFFF7F92000,
                                        0x7FFFFFFFE000 - 128]
    assert [e.reason for e in excluded] == ["heap"]


def test_memory_merged_with_a_large_blocks_mmap_is_still_a_root() -> None:
    """The kernel merges a large block's mmap with anonymous neighbours (another allocator's
    arenas: CPython's pymalloc): the mapping is scanned, all but the block's own region."""
    m = Memory()
    merged = m.map(0x7FFF_F200_0000, 0x100000, "rw-p")
    chunk = merged.start + 0x40000  # the large block's mmap, page-aligned inside the mapping
    big = chunk + 16
    m.blocks[big] = 0x1F000
    m.put(chunk, 0, 0x20000 | 2)
    a, b = m.alloc(16), m.alloc(16)
    m.put(merged.start + 0x100, a)  # pymalloc's object before the big block holds a
    m.put(chunk + 0x1F018, b)  # in the chunk, past the block's bytes: not a root
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.kinds == {a: "reachable", b: "definite", big: "definite"}
    assert [(r.start, r.end) for r in res.roots if r.start >= merged.start
            and r.end <= merged.end] == [(merged.start, chunk), (chunk + 0x20000, merged.end)]


def test_a_mapping_with_an_arena_block_is_left_out_whole() -> None:
    """A block without IS_MMAPPED lives in an arena: the mapping is heap, freed chunks and all."""
    m = Memory()
    odd = m.map(0x7FFF_F300_0000, 0x20000, "rw-p")
    blk = odd.start + 0x1010
    m.blocks[blk] = 32
    m.put(blk - 8, 48 | 1)
    a = m.alloc(16)
    m.put(odd.start + 0x8000, a)
    res = scan(m.read, m.maps, m.blocks, [Thread(1, STACK + 0x8000)])
    assert res.kinds[a] == "definite"
    assert (odd.start, "heap") in {(e.start, e.reason) for e in res.excluded}
