"""The C++ classes a heap block can be told by: every vtable of the process's modules, as the
address its objects' first word holds (the vptr) -> the class's name.

On x86-64's Itanium C++ ABI a polymorphic object's first word points 16 bytes into its class's
primary vtable, past the offset-to-top (0) and the typeinfo pointer. Two sources, in order:

- the modules' symbol tables: each `_ZTV<type>` object symbol (`vtable for X`) of .symtab, else
  of .dynsym (a stripped program keeps only what it exports there: its own classes are usually not);
- the run-time type information, where no symbol names the vtable: each 8-byte aligned word pair
  (0, T) of a module's .data.rel.ro, T a typeinfo object (its first word one of libstdc++'s
  `__class_type_info`, `__si_class_type_info`, `__vmi_class_type_info` vtables + 16) whose name
  (its second word) is a mangled type the demangler reads. A program built with -fno-rtti has no
  typeinfo: its stripped classes stay unknown. A class with virtual bases has its vtable's address
  point past their offsets, not at + 16: found so, it is named `vtable` when a symbol names its
  vtable.

The names are demangled once per run: libstdc++'s own `__cxa_demangle` through ctypes when the
library loads, else one `c++filt` process for all of them."""

from __future__ import annotations

import bisect
import ctypes
import os
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterable

from ..elf import SHT_DYNSYM, SHT_SYMTAB, ElfError, ElfFile

__all__ = ["VtableTable", "demangle_types", "vtable_table"]

_SYM = struct.Struct("<IBBHQQ")
_STT_OBJECT = 1
_SHN_UNDEF = 0
#: libstdc++'s typeinfo classes: a typeinfo object's own vptr is one of their vtables + 16
_TYPEINFO_VTABLES = ("_ZTVN10__cxxabiv117__class_type_infoE",
                     "_ZTVN10__cxxabiv120__si_class_type_infoE",
                     "_ZTVN10__cxxabiv121__vmi_class_type_infoE")
_NAME_MAX = 1024


class VtableTable:
    """vptr -> (class name, how it was found: `vtable` from a symbol, `rtti` from the typeinfo)."""

    def __init__(self) -> None:
        self.classes: dict[int, tuple[str, str]] = {}

    def sorted_vptrs(self) -> list[int]:
        return sorted(self.classes)


def _read_file(path: str, offset: int, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(size)


def _vtable_symbols(elf: ElfFile, path: str) -> dict[str, int]:
    """`_ZTV...` -> link-time address of the defined vtable objects of .symtab, else .dynsym."""
    secs = elf.sections()
    for wanted in (SHT_SYMTAB, SHT_DYNSYM):
        out: dict[str, int] = {}
        for sec in secs:
            if sec.type != wanted or sec.link >= len(secs):
                continue
            strs = _read_file(path, secs[sec.link].offset, secs[sec.link].size)
            if b"_ZTV" not in strs:
                continue
            table = _read_file(path, sec.offset, sec.size)
            for pos in range(_SYM.size, len(table) - _SYM.size + 1, _SYM.size):
                st_name, st_info, _, st_shndx, st_value, _ = _SYM.unpack_from(table, pos)
                if st_shndx == _SHN_UNDEF or st_info & 0xF != _STT_OBJECT or \
                        strs[st_name:st_name + 4] != b"_ZTV":
                    continue
                end = strs.find(b"\0", st_name)
                out[strs[st_name:end].decode("ascii", "replace").split("@", 1)[0]] = st_value
        if out:
            return out
    return {}


def _modules(maps) -> list[tuple[str, int]]:
    """(path, load bias) of every ELF file mapped at file offset 0."""
    out, seen = [], set()
    for m in maps:
        if m.offset != 0 or not m.path.startswith("/") or m.path in seen:
            continue
        seen.add(m.path)
        out.append((m.path, m.start))
    return out


def _in_modules(maps) -> Callable[[int], bool]:
    """Whether an address lies in a mapping of a file (where typeinfo objects and names are)."""
    spans = sorted((m.start, m.end) for m in maps if m.path.startswith("/") and m.readable)
    starts = [s for s, _ in spans]

    def inside(addr: int) -> bool:
        i = bisect.bisect_right(starts, addr) - 1
        return i >= 0 and addr + 16 <= spans[i][1]
    return inside


def _rtti_names(read, elf: ElfFile, bias: int, typeinfo_vptrs: set[int],
                named: dict[int, tuple[str, str]], inside) -> dict[int, str]:
    """vptr -> mangled type of the primary vtables in the module's .data.rel.ro that no symbol
    named, found by their typeinfo (see the module's docstring)."""
    out: dict[int, str] = {}
    for sec in elf.sections():
        if sec.name != ".data.rel.ro" or not sec.addr:
            continue
        try:
            data = read(bias + sec.addr, sec.size)
        except OSError:
            continue
        words = memoryview(data)[:len(data) // 8 * 8].cast("Q")
        typeinfos: dict[int, str | None] = {}
        for i in range(len(words) - 2):
            if words[i] != 0 or not words[i + 1] or words[i + 2] == 0:
                continue
            vptr = bias + sec.addr + 8 * i + 16
            if vptr in named:
                continue
            ti = words[i + 1]
            if ti not in typeinfos:
                typeinfos[ti] = _typeinfo_name(read, ti, typeinfo_vptrs, inside) \
                    if inside(ti) else None
            if typeinfos[ti] is not None:
                out[vptr] = typeinfos[ti]  # type: ignore[assignment]
    return out


def _typeinfo_name(read, ti: int, typeinfo_vptrs: set[int], inside) -> str | None:
    try:
        own, name = struct.unpack("<QQ", read(ti, 16))
    except OSError:
        return None
    if own not in typeinfo_vptrs or not inside(name):
        return None
    raw = b""
    for length in (_NAME_MAX, 64):  # a name near the end of its mapping: a shorter read
        try:
            raw = read(name, length)
            break
        except OSError:
            continue
    end = raw.find(b"\0")
    if end <= 0 or raw[0] == ord("*"):
        return None  # a type local to its unit is "*N..."; the demangler reads the rest
    text = raw[:end].decode("latin-1")
    return text if text.isascii() and text.isprintable() else None


def _with_files(read, maps) -> Callable[[int, int], bytes]:
    """READ, and where it finds nothing (a core leaves out read-only file mappings: .rodata, where
    the typeinfo names are), the mapped file's bytes."""
    files = sorted((m.start, m.end, m.offset, m.path) for m in maps if m.path.startswith("/"))
    starts = [f[0] for f in files]

    def read_any(addr: int, size: int) -> bytes:
        try:
            return read(addr, size)
        except OSError:
            i = bisect.bisect_right(starts, addr) - 1
            if i < 0 or addr + size > files[i][1]:
                raise
            data = _read_file(files[i][3], files[i][2] + addr - files[i][0], size)
            if len(data) != size:
                raise
            return data
    return read_any


def vtable_table(read, maps, *, demangle: Callable[[Iterable[str]], dict[str, str]]
                 | None = None) -> VtableTable:
    """The vtables of the modules mapped in MAPS (READ: the process's memory)."""
    demangle = demangle or demangle_types
    mangled: dict[int, tuple[str, str]] = {}
    elves: list[tuple[ElfFile, int]] = []
    for path, start in _modules(maps):
        try:
            elf = ElfFile.open(path)
        except (ElfError, OSError):
            continue
        bias = start - (elf.vaddr_for_offset(0) or 0)
        elves.append((elf, bias))
        try:
            syms = _vtable_symbols(elf, path)
        except OSError:
            continue
        for name, value in syms.items():
            mangled[bias + value + 16] = (name[4:], "vtable")
    typeinfo_vptrs = {vptr for vptr, (name, _) in mangled.items()
                      if "_ZTV" + name in _TYPEINFO_VTABLES}
    inside = _in_modules(maps)
    read = _with_files(read, maps)
    by_symbol = {name for name, _ in mangled.values()}
    for elf, bias in elves:
        for vptr, name in _rtti_names(read, elf, bias, typeinfo_vptrs, mangled, inside).items():
            # a class with virtual bases: its vtable's address point is further than + 16
            mangled[vptr] = (name, "vtable" if name in by_symbol else "rtti")
    names = demangle({name for name, _ in mangled.values()})
    table = VtableTable()
    for vptr, (name, how) in mangled.items():
        if name in names:
            table.classes[vptr] = (names[name], how)
    return table


class _Cxa:
    fn = None
    free = None
    tried = False


def _cxa_demangle():
    if not _Cxa.tried:
        _Cxa.tried = True
        try:
            lib = ctypes.CDLL("libstdc++.so.6")
            fn = lib.__cxa_demangle
            fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.POINTER(ctypes.c_int)]
            fn.restype = ctypes.c_void_p
            libc = ctypes.CDLL(None)
            libc.free.argtypes = [ctypes.c_void_p]
            _Cxa.fn, _Cxa.free = fn, libc.free
        except (OSError, AttributeError):
            pass
    return _Cxa.fn


def demangle_types(types: Iterable[str], *, use_cxa: bool = True) -> dict[str, str]:
    """Mangled type encodings (`10Connection`, `N2ns4NodeE`) -> their C++ names; those neither
    demangler reads are left out."""
    types = sorted(set(types))
    fn = _cxa_demangle() if use_cxa else None
    out: dict[str, str] = {}
    if fn is not None:
        status = ctypes.c_int()
        for t in types:
            ptr = fn(("_ZTV" + t).encode(), None, None, ctypes.byref(status))
            if ptr and status.value == 0:
                text = ctypes.string_at(ptr).decode("utf-8", "replace")
                _Cxa.free(ptr)
                if text.startswith("vtable for "):
                    out[t] = text[len("vtable for "):]
        return out
    program = shutil.which("c++filt")
    if program is None or not types:
        return out
    try:
        done = subprocess.run([program], input="".join(f"_ZTV{t}\n" for t in types),
                              capture_output=True, text=True, check=True, timeout=60,
                              env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return out
    for t, line in zip(types, done.stdout.splitlines(), strict=False):
        if line.startswith("vtable for "):
            out[t] = line[len("vtable for "):]
    return out
