"""ElfFile, ModuleMap and ptrace helpers under plain Python."""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from dbgkit.core import ptrace
from dbgkit.core.elf import PT_GNU_EH_FRAME, ElfError, ElfFile, got_slot
from dbgkit.core.procmaps import ModuleMap

if TYPE_CHECKING:
    from conftest import Programs

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


@pytest.fixture(scope="module")
def libc() -> ElfFile:
    if not Path(LIBC).exists():
        pytest.skip(f"{LIBC} is not installed")
    return ElfFile.open(LIBC)


def test_libc_headers(libc: ElfFile) -> None:
    assert libc.machine == "x86_64"
    assert libc.is_dynamic
    assert any(seg.flags & 1 for seg in libc.load_segments)  # an executable PT_LOAD
    offset, vaddr, filesz, memsz, flags = libc.load_segments[0]  # tuple form works too
    assert memsz >= filesz and flags


def test_glibc_aliases(libc: ElfFile) -> None:
    syms = libc.dynamic_symbols()
    assert syms["malloc"] == syms["__libc_malloc"]
    assert syms["aligned_alloc"] == syms["memalign"]
    assert syms["free"] == syms["__libc_free"]
    assert not any("@" in name for name in syms)
    assert "stdout" not in syms  # an object, not a function


def test_instances_are_cached(libc: ElfFile) -> None:
    assert ElfFile.open(LIBC) is libc


def test_vaddr_for_offset(libc: ElfFile) -> None:
    for seg in libc.load_segments:
        assert libc.vaddr_for_offset(seg.offset) == seg.vaddr
        assert libc.vaddr_for_offset(seg.offset & ~0xFFF) == seg.vaddr - (seg.offset & 0xFFF)
    assert libc.vaddr_for_offset(1 << 40) is None


def test_eh_frame_lookup(libc: ElfFile) -> None:
    malloc = libc.dynamic_symbols()["malloc"]
    fde = libc.eh_frame_lookup(malloc + 5)
    assert fde is not None and fde.pc_begin == malloc and fde.pc_end > malloc + 5
    assert libc.eh_frame_lookup(0) is None
    assert libc.eh_frame_lookup(1 << 40) is None


def test_test_program_is_dynamic(programs: Programs) -> None:
    elf = ElfFile.open(str(programs.get("chain_O2")))
    assert elf.is_dynamic and elf.machine == "x86_64"
    assert {"recurse", "main", "c0"} <= set(elf.dynamic_symbols())  # built with -rdynamic


def test_static_program_is_not_dynamic(programs: Programs) -> None:
    elf = ElfFile.open(str(programs.get("chain_static")))
    assert not elf.is_dynamic
    assert elf.has_cfi


def test_not_elf(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is text\n")
    with pytest.raises(ElfError, match="not an ELF file"):
        ElfFile.open(str(path))
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(ElfError, match="empty"):
        ElfFile.open(str(empty))
    with pytest.raises(ElfError, match="cannot open"):
        ElfFile.open(str(tmp_path / "missing"))


def test_truncated(tmp_path: Path, libc: ElfFile) -> None:
    data = Path(LIBC).read_bytes()
    for size, what in ((10, "truncated"), (40, "truncated"), (100, "program headers")):
        path = tmp_path / f"libc.{size}"
        path.write_bytes(data[:size])
        with pytest.raises(ElfError, match=what):
            ElfFile.open(str(path))
    path = tmp_path / "libc.half"
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(ElfError, match="truncated ELF file"):
        ElfFile.open(str(path))
    # Loaded segments intact but the section header table (at the end of the file) cut off.
    path = tmp_path / "libc.tail"
    path.write_bytes(data[:-100])
    with pytest.raises(ElfError, match="section headers"):
        ElfFile.open(str(path))


def test_32bit_rejected(tmp_path: Path) -> None:
    path = tmp_path / "elf32"
    path.write_bytes(b"\x7fELF\x01\x01\x01" + bytes(45))
    with pytest.raises(ElfError, match="32-bit"):
        ElfFile.open(str(path))


def test_dynsym_without_section_headers(tmp_path: Path, libc: ElfFile) -> None:
    """With e_shoff/e_shnum zeroed, .dynsym is found through PT_DYNAMIC and DT_GNU_HASH."""
    data = bytearray(Path(LIBC).read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff
    struct.pack_into("<H", data, 0x3C, 0)  # e_shnum
    elf = ElfFile.from_bytes(bytes(data), "libc-no-sections")
    assert elf.sections() == []
    assert elf.dynamic_symbols() == libc.dynamic_symbols()
    malloc = libc.dynamic_symbols()["malloc"]
    fde = elf.eh_frame_lookup(malloc)  # PT_GNU_EH_FRAME still works without sections
    assert fde is not None and fde.pc_begin == malloc


def test_eh_frame_scan_without_hdr(tmp_path: Path, libc: ElfFile) -> None:
    """Without PT_GNU_EH_FRAME the .eh_frame section is scanned once; lookups agree."""
    data = bytearray(Path(LIBC).read_bytes())
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phnum = struct.unpack_from("<H", data, 0x38)[0]
    for i in range(phnum):
        if struct.unpack_from("<I", data, phoff + 56 * i)[0] == PT_GNU_EH_FRAME:
            struct.pack_into("<I", data, phoff + 56 * i, 0)  # PT_NULL
    elf = ElfFile.from_bytes(bytes(data), "libc-no-hdr")
    syms = libc.dynamic_symbols()
    for name in ("malloc", "free", "printf", "memcpy", "qsort", "pthread_create"):
        ours, ref = elf.eh_frame_lookup(syms[name] + 1), libc.eh_frame_lookup(syms[name] + 1)
        assert ref is not None and ours is not None
        assert (ours.pc_begin, ours.pc_end, ours.instructions) == \
            (ref.pc_begin, ref.pc_end, ref.instructions)


def test_module_map_of_this_process() -> None:
    mods = ModuleMap(os.getpid())
    malloc = ctypes.cast(ctypes.CDLL("libc.so.6").malloc, ctypes.c_void_p).value or 0
    mod = mods.find(malloc)
    assert mod is not None and mod.elf is not None and "libc.so" in mod.path
    assert mod.bias + mod.elf.dynamic_symbols()["malloc"] == malloc
    assert mods.find(8) is None
    vdso = [m for m in mods.modules() if m.path == "[vdso]"]
    if vdso:
        assert vdso[0].elf is not None and vdso[0].elf.has_cfi
    starts = [m.start for m in mods.modules()]
    assert starts == sorted(starts)


def test_module_map_refreshes_once_per_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    mods = ModuleMap(os.getpid())
    mods.modules()
    calls = []
    real = mods.refresh
    monkeypatch.setattr(mods, "refresh", lambda: (calls.append(1), real())[1])
    assert mods.find(8) is None and mods.find(16) is None
    assert calls == []  # the initial load used this generation's refresh
    mods.invalidate()
    version = mods.version
    assert mods.find(8) is None and mods.find(16) is None
    assert calls == [1]
    assert mods.version == version  # nothing was mapped or unmapped meanwhile


def test_ptrace_without_tracee() -> None:
    """get_regs never raises: on a thread we do not trace it returns None."""
    assert ptrace.available() == (os.uname().machine == "x86_64")
    assert ptrace.get_regs(os.getpid()) is None
    regs = ptrace.Regs(rip=1, rsp=2, rbp=3)
    assert regs.dwarf()[16] == 1 and regs.dwarf()[7] == 2 and regs.dwarf()[6] == 3


def test_got_symbols_name_each_alias(tmp_path: Path) -> None:
    """A program's GOT slots for aligned_alloc and memalign (one function in glibc 2.36) name
    each, called through the PLT (JUMP_SLOT) or, with -fno-plt, straight through the GOT
    (GLOB_DAT)."""
    source = tmp_path / "aliases.c"
    source.write_text("#include <malloc.h>\n#include <stdlib.h>\n"
                      "int main(void) { return !aligned_alloc(16, 32) || !memalign(16, 48); }\n")
    for flags in ([], ["-fno-plt"]):
        exe = tmp_path / f"aliases{''.join(flags)}"
        subprocess.run(["gcc", "-O0", "-fno-builtin", *flags, str(source), "-o", str(exe)],
                       check=True, timeout=300)
        names = set(ElfFile.open(str(exe)).got_symbols().values())
        assert {"aligned_alloc", "memalign"} <= names, (flags, names)


def _memory(blocks: dict[int, bytes]) -> Callable[[int, int], bytes]:
    def read(address: int, length: int) -> bytes:
        for start, data in blocks.items():
            if start <= address and address + length <= start + len(data):
                return data[address - start:address - start + length]
        raise OSError(f"{address:#x} is not mapped")
    return read


@pytest.mark.parametrize("stub, length", [
    (b"\xff\x25", 6),                          # .plt: jmp *disp(%rip)
    (b"\xf2\xff\x25", 7),                      # bnd jmp
    (b"\xf3\x0f\x1e\xfa\xf2\xff\x25", 11),     # .plt.sec: endbr64; bnd jmp
    (b"\xf3\x0f\x1e\xfa\xff\x25", 10),         # endbr64; jmp
])
def test_got_slot_through_a_plt_stub(stub: bytes, length: int) -> None:
    ret, plt = 0x1105, 0x1020
    call = b"\x90" + b"\xe8" + struct.pack("<i", plt - ret)  # nop; call plt
    jump = stub + struct.pack("<i", 0x4018 - (plt + length)) + b"\x90" * 16
    assert got_slot(_memory({ret - 6: call, plt: jump}), ret) == 0x4018


def test_got_slot_of_a_call_through_the_got_and_of_others() -> None:
    ret = 0x1106
    no_plt = b"\xff\x15" + struct.pack("<i", 0x3ff0 - ret)  # call *disp(%rip)
    assert got_slot(_memory({ret - 6: no_plt}), ret) == 0x3ff0
    register = b"\x90\x90\x90\x90\xff\xd0"  # call *%rax: a function pointer
    assert got_slot(_memory({ret - 6: register}), ret) == 0
    direct = b"\x90\xe8" + struct.pack("<i", 0x1000 - ret)  # a call to a function, no stub
    assert got_slot(_memory({ret - 6: direct, 0x1000: b"\x55\x48\x89\xe5" + b"\x90" * 11}),
                    ret) == 0
    assert got_slot(_memory({}), ret) == 0  # unreadable
