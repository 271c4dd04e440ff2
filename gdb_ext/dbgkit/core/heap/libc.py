"""Where glibc's malloc keeps its state in a process: the C library's mapping and load bias, its
build-id, the static symbols main_arena and mp_ and the TLS variable tcache from libc6-dbg's
.symtab (/usr/lib/debug/.build-id/xx/yyyy.debug), and the initial-exec TLS slots of the C
library (its R_X86_64_TPOFF64 relocations), through which every thread's tcache is found."""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..elf import ElfError, ElfFile
from ..procfs import Mapping

__all__ = ["DEBUG_ROOT", "OTHER_ALLOCATORS", "Libc", "find_libc", "mapped_libc", "other_allocator"]

#: where libc6-dbg installs the C library's debug file, by build-id
DEBUG_ROOT = "/usr/lib/debug"
#: libraries that bring their own malloc: glibc's arenas then hold little or nothing
OTHER_ALLOCATORS = ("libjemalloc", "libtcmalloc", "libmimalloc", "libhoard", "libtbbmalloc")
_R_X86_64_TPOFF64 = 18
_STT_OBJECT, _STT_TLS = 1, 6
_NT_GNU_BUILD_ID = 3


@dataclass
class Libc:
    """The C library of the process: its path, load bias and what its symbols tell."""

    path: str
    bias: int
    elf: ElfFile
    build_id: str = ""
    debug_file: str | None = None
    #: runtime addresses of main_arena and mp_ (from the debug file), else None
    main_arena: int | None = None
    mp: int | None = None
    #: link-time TLS offset of `tcache` in the C library's TLS block (from the debug file)
    tcache_tls: int | None = None
    #: runtime address of each TPOFF64 GOT slot -> its addend (TLS offset in the block)
    tls_slots: dict[int, int] = field(default_factory=dict)
    #: the writable mappings of the C library (where main_arena lives)
    data: list[Mapping] = field(default_factory=list)


def _is_libc(path: str) -> bool:
    base = os.path.basename(path)
    return base == "libc.so.6" or (base.startswith("libc-") and base.endswith(".so"))


def other_allocator(maps: Sequence[Mapping]) -> str | None:
    """The path of a mapped library that replaces malloc, or None."""
    for m in maps:
        if os.path.basename(m.path).startswith(OTHER_ALLOCATORS):
            return m.path
    return None


def _build_id(elf: ElfFile, path: str) -> str:
    sec = elf.section(".note.gnu.build-id")
    if sec is None:
        return ""
    with open(path, "rb") as f:
        f.seek(sec.offset)
        data = f.read(sec.size)
    namesz, descsz, ntype = struct.unpack_from("<III", data, 0)
    if ntype != _NT_GNU_BUILD_ID:
        return ""
    start = 12 + ((namesz + 3) & ~3)
    return data[start:start + descsz].hex()


def _tls_slots(elf: ElfFile, path: str) -> dict[int, int]:
    """r_offset -> addend of the R_X86_64_TPOFF64 relocations against no symbol (the C library's
    own initial-exec TLS variables, such as tcache)."""
    out = {}
    for sec in elf.sections():
        if sec.type != 4 or sec.name != ".rela.dyn":  # SHT_RELA
            continue
        with open(path, "rb") as f:
            f.seek(sec.offset)
            data = f.read(sec.size)
        for r_offset, r_info, addend in struct.iter_unpack("<QQq", data[:len(data) // 24 * 24]):
            if r_info & 0xFFFFFFFF == _R_X86_64_TPOFF64 and r_info >> 32 == 0:
                out[r_offset] = addend
    return out


def mapped_libc(maps: Sequence[Mapping]) -> str | None:
    """The path of the C library MAPS map (at file offset 0), None when there is none."""
    return next((m.path for m in maps if m.path and _is_libc(m.path) and m.offset == 0), None)


def find_libc(maps: Sequence[Mapping], debug_root: str = DEBUG_ROOT) -> Libc | None:
    """The C library mapped in MAPS, with its symbols when DEBUG_ROOT holds its debug file; None
    when no glibc is mapped (a static program, or none at all)."""
    path = mapped_libc(maps)
    first = next((m for m in maps if m.path == path and m.offset == 0), None)
    if first is None:
        return None
    try:
        elf = ElfFile.open(first.path)
    except ElfError:
        return None
    link = elf.vaddr_for_offset(0)
    libc = Libc(first.path, first.start - (link or 0), elf)
    libc.data = [m for m in maps if m.path == first.path and m.writable]
    # the C library's bss (where main_arena is) is the anonymous mapping right after its data
    for m in maps:
        if libc.data and m.start == libc.data[-1].end and not m.path:
            libc.data.append(m)
            break
    try:
        libc.build_id = _build_id(elf, first.path)
        libc.tls_slots = {libc.bias + off: add for off, add in _tls_slots(elf, first.path).items()}
    except (OSError, struct.error):
        pass
    if libc.build_id:
        debug = os.path.join(debug_root, ".build-id", libc.build_id[:2],
                             libc.build_id[2:] + ".debug")
        try:
            dbg = ElfFile.open(debug)
            syms = dbg.symtab_functions(frozenset({"main_arena", "mp_"}), (_STT_OBJECT,))
            tls = dbg.symtab_functions(frozenset({"tcache"}), (_STT_TLS,))
        except ElfError:
            syms, tls = {}, {}
        if "main_arena" in syms:
            libc.debug_file = debug
            libc.main_arena = libc.bias + syms["main_arena"]
            libc.mp = libc.bias + syms["mp_"] if "mp_" in syms else None
            libc.tcache_tls = tls.get("tcache")
    return libc
