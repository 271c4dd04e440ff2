"""The heap walk stops with one line where glibc's heap is not the program's: another allocator
mapped, or no glibc C library at all (a static program); before the first malloc there is no heap
to walk, and nothing to say."""

from __future__ import annotations

import pytest
from dbgkit.core.heap import layout, walk
from dbgkit.core.procfs import parse_maps

_EXE = "555555554000-555555555000 r--p 00000000 08:01 100 /usr/bin/server\n"
_LIBC = "7ffff7dd0000-7ffff7df6000 r--p 00000000 08:01 200 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
_JEMALLOC = "7ffff7a00000-7ffff7a10000 r--p 00000000 08:01 300 /usr/lib/libjemalloc.so.2\n"


class _Source:
    def __init__(self, maps: str) -> None:
        self.maps = parse_maps(maps)
        self.threads = []

    def read(self, address: int, size: int) -> bytes:
        raise OSError(5, "no memory")


@pytest.mark.parametrize("maps,message", [
    (_EXE + _JEMALLOC + _LIBC, "/usr/lib/libjemalloc.so.2 is mapped: another allocator replaces "
                               "glibc's malloc; its heap is not walked"),
    (_EXE, "no glibc C library (libc.so.6) is mapped: a static program or another C library; "
           "its heap is not walked"),
])
def test_refused_with_one_line(maps: str, message: str) -> None:
    with pytest.raises(walk.WalkError) as err:
        walk.walk(_Source(maps))
    assert str(err.value) == message


def test_a_core_whose_c_library_is_not_on_disk() -> None:
    """A core names its C library by path (NT_FILE); moved to a machine without that file, the
    walk says so rather than taking the program for a static one."""
    gone = "/nonexistent/lib/x86_64-linux-gnu/libc.so.6"
    source = _Source(_EXE + f"7ffff7dd0000-7ffff7df6000 r--p 00000000 08:01 200 {gone}\n")
    source.kind = "core"
    with pytest.raises(walk.WalkError) as err:
        walk.walk(source)
    assert str(err.value) == (f"{gone}, the C library the core names, cannot be read: the walk "
                              "needs the very file the process ran (copy it there with the core)")


def test_a_process_before_its_first_malloc_has_no_heap() -> None:
    """main_arena as glibc initialises it statically (zeros, `next` naming itself: no malloc
    yet): one arena without heaps, no block, no problem."""
    from dbgkit.core.heap import libc

    path = "/lib/x86_64-linux-gnu/libc.so.6"
    found = libc.find_libc(parse_maps(f"7f0000000000-7f0000026000 r--p 00000000 08:01 2 {path}\n"))
    if found is None or found.debug_file is None:
        pytest.skip("libc6-dbg is not installed")
    maps = (_EXE + f"7f0000000000-7f0000026000 r--p 00000000 08:01 2 {path}\n"
            f"7f00001d0000-7f00001d6000 rw-p 001d0000 08:01 2 {path}\n")

    next_field = found.main_arena + layout.GLIBC_236.off("malloc_state", "next")

    class Zeros(_Source):
        def read(self, address: int, size: int) -> bytes:
            data = bytearray(size)
            if address <= next_field < address + size:
                at = next_field - address
                data[at:at + 8] = found.main_arena.to_bytes(8, "little")[:size - at]
            return bytes(data)

    result = walk.walk(Zeros(maps))
    assert [(a.main, a.heaps, a.top) for a in result.arenas] == [(True, [], 0)]
    assert (len(result.blocks), result.free, result.problems) == (0, {}, [])
