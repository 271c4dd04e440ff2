"""The heap walk stops with one line where glibc's heap is not the program's: another allocator
mapped, or no glibc C library at all (a static program)."""

from __future__ import annotations

import pytest
from dbgkit.core.heap import walk
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
