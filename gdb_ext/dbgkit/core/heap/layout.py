"""glibc malloc's structures on x86-64 (glibc 2.26-2.38 share them; the table is 2.36's, Debian
12), as offsets: malloc_state (the arena), malloc_chunk, heap_info, tcache_perthread_struct and
malloc_par (mp_). tests/test_heapwalk.py checks every offset against `ptype/o` with libc6-dbg's
debug information, as deadlocks' table (core/locks/glibc.py) is checked."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GLIBC_236", "Layout"]


@dataclass(frozen=True)
class Layout:
    """Offsets and sizes of malloc's structures: struct -> field -> byte offset."""

    offsets: dict[str, dict[str, int]]
    sizes: dict[str, int]
    #: tcache bins (TCACHE_MAX_BINS) and fastbins (NFASTBINS), the arena's bins[] words
    tcache_bins: int = 64
    fastbins: int = 10
    bins: int = 254
    #: HEAP_MAX_SIZE: a thread arena's heaps are mapped at a multiple of it
    heap_max: int = 64 << 20

    def off(self, struct: str, field: str) -> int:
        return self.offsets[struct][field]


GLIBC_236 = Layout(
    offsets={
        "malloc_state": {"mutex": 0, "flags": 4, "have_fastchunks": 8, "fastbinsY": 16,
                         "top": 96, "last_remainder": 104, "bins": 112, "binmap": 2144,
                         "next": 2160, "next_free": 2168, "attached_threads": 2176,
                         "system_mem": 2184, "max_system_mem": 2192},
        "malloc_chunk": {"mchunk_prev_size": 0, "mchunk_size": 8, "fd": 16, "bk": 24,
                         "fd_nextsize": 32, "bk_nextsize": 40},
        "_heap_info": {"ar_ptr": 0, "prev": 8, "size": 16, "mprotect_size": 24, "pagesize": 32},
        "tcache_perthread_struct": {"counts": 0, "entries": 128},
        "malloc_par": {"mmap_threshold": 16, "n_mmaps": 60, "mmapped_mem": 80,
                       "sbrk_base": 96, "tcache_bins": 104, "tcache_count": 120},
    },
    sizes={"malloc_state": 2200, "malloc_chunk": 48, "_heap_info": 48,
           "tcache_perthread_struct": 640, "malloc_par": 136},
)
