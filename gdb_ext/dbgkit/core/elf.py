"""Minimal lazy ELF64 reader: program headers, dynamic symbols and the .eh_frame lookup tables.

Reference: System V gABI "ELF Object Files" (4.x) and LSB 5.0 Core §10.6 (.eh_frame_hdr).
Only 64-bit little-endian files are supported, which covers x86-64 and AArch64 Linux.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from . import cfi
    from .cfi import FdeInfo

__all__ = ["ElfError", "ElfFile", "LoadSegment", "Section", "got_slot"]

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_DYN = struct.Struct("<qQ")
_RELA = struct.Struct("<QQq")
_U32 = struct.Struct("<I")

PT_LOAD = 1
PT_DYNAMIC = 2
PT_INTERP = 3
PT_GNU_EH_FRAME = 0x6474E550
SHT_SYMTAB = 2
SHT_RELA = 4
SHT_DYNSYM = 11
SHT_GNU_VERSYM = 0x6FFFFFFF
SHN_UNDEF = 0
SHN_XINDEX = 0xFFFF
STT_OBJECT = 1
STT_FUNC = 2
STT_GNU_IFUNC = 10
DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ = 0, 4, 5, 6, 10
DT_GNU_HASH = 0x6FFFFEF5
DT_VERSYM = 0x6FFFFFF0
#: the relocations that fill a GOT slot with a symbol's address (x86-64 psABI; AArch64's)
_GOT_RELOCATIONS = frozenset({6, 7, 1025, 1026})  # R_X86_64_GLOB_DAT, _JUMP_SLOT, R_AARCH64_*

_MACHINES = {3: "i386", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390", 40: "arm",
             62: "x86_64", 183: "aarch64", 243: "riscv", 258: "loongarch"}


class ElfError(Exception):
    """The file is not a readable ELF file of a kind this reader supports."""


class LoadSegment(NamedTuple):
    """A PT_LOAD program header (gABI "Program Header")."""

    offset: int
    vaddr: int
    filesz: int
    memsz: int
    flags: int


class Section(NamedTuple):
    """A section header, with its name resolved."""

    name: str
    type: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


_cache: dict[tuple[str, int, int, int], ElfFile] = {}


class ElfFile:
    """A parsed ELF64 file; header and program headers eagerly, everything else on first use."""

    def __init__(self, path: str, read: Callable[[int, int], bytes], size: int) -> None:
        """Parse the headers via read(offset, length) of a size-byte image.

        Use open() or from_bytes(). Only the file prefix that holds the PT_LOAD segments is
        kept (that is where .dynsym, .eh_frame_hdr and .eh_frame live); debug sections beyond it
        are never read. The image is copied, not mmapped: a file truncated while mapped would
        make a later access raise SIGBUS and kill GDB.
        """
        self.path = path
        self._read = read
        self._size = size
        head = read(0, min(size, _EHDR.size))
        if len(head) < 4 or head[:4] != b"\x7fELF":
            raise ElfError(f"{path}: not an ELF file (no \\x7fELF magic)")
        if len(head) < 16:
            raise ElfError(f"{path}: truncated ELF file ({size} bytes, shorter than e_ident)")
        if head[4] == 1:
            raise ElfError(f"{path}: 32-bit ELF files are not supported (only ELF64)")
        if head[4] != 2:
            raise ElfError(f"{path}: invalid ELF class {head[4]}")
        if head[5] != 1:
            raise ElfError(f"{path}: big-endian ELF files are not supported")
        if len(head) < _EHDR.size:
            raise ElfError(f"{path}: truncated ELF file ({size} bytes, the ELF header needs 64)")
        (_, self.elf_type, e_machine, _, self.entry, phoff, shoff, _, _, phentsize, phnum,
         shentsize, shnum, shstrndx) = _EHDR.unpack_from(head, 0)
        self.machine: str = _MACHINES.get(e_machine, f"machine-{e_machine}")
        if phnum and phentsize < _PHDR.size:
            raise ElfError(f"{path}: program header entries of {phentsize} bytes are too small")
        if phoff + phnum * phentsize > size:
            raise ElfError(f"{path}: truncated ELF file (program headers end at "
                           f"{phoff + phnum * phentsize}, file has {size} bytes)")
        phdrs = read(phoff, phnum * phentsize)
        self.load_segments: list[LoadSegment] = []
        self._eh_frame_hdr: tuple[int, int] | None = None  # (offset, vaddr)
        self.is_dynamic = False
        self._dynamic: tuple[int, int] | None = None  # (offset, size)
        image_end = _EHDR.size
        for i in range(phnum):
            p_type, p_flags, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = _PHDR.unpack_from(
                phdrs, i * phentsize)
            if p_type == PT_LOAD:
                self.load_segments.append(LoadSegment(p_offset, p_vaddr, p_filesz, p_memsz,
                                                      p_flags))
                image_end = max(image_end, p_offset + p_filesz)
            elif p_type in (PT_INTERP, PT_DYNAMIC):
                self.is_dynamic = True
                if p_type == PT_DYNAMIC:
                    self._dynamic = (p_offset, p_filesz)
            elif p_type == PT_GNU_EH_FRAME:
                self._eh_frame_hdr = (p_offset, p_vaddr)
        if image_end > size:
            raise ElfError(f"{path}: truncated ELF file (PT_LOAD segments end at {image_end}, "
                           f"file has {size} bytes)")
        self._shoff = shoff
        self._shnum = shnum
        self._shentsize = shentsize
        self._shstrndx = shstrndx
        if shoff and shnum and shoff + shnum * shentsize > size:
            raise ElfError(f"{path}: truncated ELF file (section headers end at "
                           f"{shoff + shnum * shentsize}, file has {size} bytes)")
        self._data = read(0, image_end)
        if len(self._data) < image_end:
            raise ElfError(f"{path}: truncated ELF file (short read of the loaded segments)")
        self._sections: list[Section] | None = None
        self._dynsyms: dict[str, int] | None = None
        self._got: dict[int, str] | None = None
        self._cfi_ready = False
        self._has_cfi = False
        self._hdr_locs: array[int] | None = None  # eh_frame_hdr table, relative to hdr vaddr
        self._hdr_fdes: array[int] | None = None
        self._hdr_vaddr = 0
        self._scan: list[tuple[int, int, int]] | None = None
        self._scan_begins: list[int] = []
        self._eh_delta = 0  # vaddr - file offset of .eh_frame
        self._cie_cache: dict[int, cfi.Cie] = {}
        self._fde_cache: dict[int, FdeInfo] = {}

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str) -> ElfFile:
        """Open and parse path, reusing an instance while the file is unchanged."""
        try:
            st = os.stat(path)
        except OSError as exc:
            raise ElfError(f"{path}: cannot open: {exc.strerror}") from exc
        key = (path, st.st_dev, st.st_ino, st.st_mtime_ns)
        elf = _cache.get(key)
        if elf is not None:
            return elf
        if st.st_size == 0:
            raise ElfError(f"{path}: not an ELF file (the file is empty)")

        def read(offset: int, length: int) -> bytes:
            try:
                with open(path, "rb", buffering=0) as fh:
                    return os.pread(fh.fileno(), length, offset)
            except OSError as exc:
                raise ElfError(f"{path}: cannot read: {exc.strerror or exc}") from exc

        elf = cls(path, read, st.st_size)
        _cache[key] = elf
        return elf

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> ElfFile:
        """Parse an ELF image held in memory (e.g. the [vdso] read from the process)."""
        image = bytes(data)
        return cls(name, lambda offset, length: image[offset:offset + length], len(image))

    def __repr__(self) -> str:
        return f"ElfFile({self.path!r}, machine={self.machine!r}, dynamic={self.is_dynamic})"

    # -- addresses ------------------------------------------------------------------------------

    def vaddr_for_offset(self, file_offset: int) -> int | None:
        """Map a file offset (e.g. of a mapping in /proc/PID/maps) to its link-time vaddr."""
        for seg in self.load_segments:
            # Mappings start on a page boundary below p_offset (gABI: p_vaddr == p_offset mod
            # p_align), so accept offsets from the page that holds the segment's first byte.
            start = seg.offset & ~0xFFF
            if start <= file_offset < seg.offset + max(seg.filesz, 1):
                return file_offset - seg.offset + seg.vaddr
        return None

    def offset_for_vaddr(self, vaddr: int) -> int | None:
        """Map a link-time vaddr to a file offset, if it lies in the file part of a PT_LOAD."""
        for seg in self.load_segments:
            if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                return vaddr - seg.vaddr + seg.offset
        return None

    # -- sections and symbols -------------------------------------------------------------------

    def sections(self) -> list[Section]:
        """The section headers (empty when the file has none, e.g. fully stripped)."""
        if self._sections is None:
            self._sections = self._read_sections()
        return self._sections

    def _read_sections(self) -> list[Section]:
        # The section header table and .shstrtab usually lie past the loaded image: read them.
        if not self._shoff:
            return []
        if self._shentsize < _SHDR.size:
            raise ElfError(f"{self.path}: section header entries of {self._shentsize} bytes "
                           "are too small")
        shnum, shstrndx = self._shnum, self._shstrndx
        if shnum == 0 or shstrndx == SHN_XINDEX:
            # gABI "Extended Section Indexes": the real values live in section header 0.
            first = _SHDR.unpack_from(self._read(self._shoff, _SHDR.size), 0)
            shnum = shnum or first[5]
            if shstrndx == SHN_XINDEX:
                shstrndx = first[6]
        table = self._read(self._shoff, shnum * self._shentsize)
        if self._shoff + shnum * self._shentsize > self._size or \
                len(table) < shnum * self._shentsize:
            raise ElfError(f"{self.path}: truncated ELF file (section headers past the end)")
        raw = [_SHDR.unpack_from(table, i * self._shentsize) for i in range(shnum)]
        names = b""
        if shstrndx < len(raw):
            _, _, _, _, off, sz, _, _, _, _ = raw[shstrndx]
            names = self._read(off, sz)
        out = []
        for sh_name, sh_type, _, sh_addr, sh_off, sh_size, sh_link, _, _, sh_entsize in raw:
            end = names.find(b"\0", sh_name)
            name = names[sh_name:end if end >= 0 else None].decode("utf-8", "replace")
            out.append(Section(name, sh_type, sh_addr, sh_off, sh_size, sh_link, sh_entsize))
        return out

    def section(self, name: str) -> Section | None:
        """The first section with this name, or None."""
        for sec in self.sections():
            if sec.name == name:
                return sec
        return None

    def dynamic_symbols(self) -> dict[str, int]:
        """Defined FUNC/IFUNC symbols of .dynsym: name (without @version) -> st_value.

        Aliases (several names for one address) are all present. When one name has several
        versions, the default version (no hidden bit in .gnu.version) wins.
        """
        if self._dynsyms is None:
            self._dynsyms = self._read_dynsyms()
        return self._dynsyms

    def _read_dynsyms(self) -> dict[str, int]:
        data = self._data
        symtab = strtab = versym = None  # (offset, size) pairs
        count = 0
        secs = self.sections()
        for sec in secs:
            if sec.type == SHT_DYNSYM and sec.link < len(secs):
                s = secs[sec.link]
                symtab, strtab = (sec.offset, sec.size), (s.offset, s.size)
                count = sec.size // _SYM.size
            elif sec.type == SHT_GNU_VERSYM:
                versym = (sec.offset, sec.size)
        if symtab is None:
            found = self._dynsyms_from_dynamic()
            if found is None:
                return {}
            symtab, strtab, versym, count = found
        if symtab[0] + count * _SYM.size > len(data) or strtab[0] + strtab[1] > len(data):
            raise ElfError(f"{self.path}: .dynsym lies outside the loaded segments")
        strs = bytes(data[strtab[0]:strtab[0] + strtab[1]])
        out: dict[str, int] = {}
        hidden_names: set[str] = set()
        for i in range(1, count):
            st_name, st_info, _, st_shndx, st_value, _ = _SYM.unpack_from(
                data, symtab[0] + i * _SYM.size)
            if st_shndx == SHN_UNDEF or (st_info & 0xF) not in (STT_FUNC, STT_GNU_IFUNC):
                continue
            end = strs.find(b"\0", st_name)
            name = strs[st_name:end if end >= 0 else None].decode("utf-8", "replace")
            name = name.split("@", 1)[0]
            hidden = False
            if versym is not None and 2 * i + 2 <= versym[1]:
                hidden = bool(struct.unpack_from("<H", data, versym[0] + 2 * i)[0] & 0x8000)
            if name in out and (hidden or name not in hidden_names):
                continue  # keep the default version (or the first one seen)
            out[name] = st_value
            if hidden:
                hidden_names.add(name)
            else:
                hidden_names.discard(name)
        return out

    def got_symbols(self) -> dict[int, str]:
        """The GOT slots of the dynamic relocations: slot vaddr -> the symbol whose address the
        loader puts there (GLOB_DAT, JUMP_SLOT), without @version. What a call through a PLT
        stub or `call *slot(%rip)` calls by name, where two names are one function."""
        if self._got is None:
            self._got = self._read_got()
        return self._got

    def _read_got(self) -> dict[int, str]:
        out: dict[int, str] = {}
        secs = self.sections()
        for sec in secs:
            if sec.type != SHT_RELA or not sec.link or sec.link >= len(secs):
                continue
            symtab = secs[sec.link]
            if symtab.type != SHT_DYNSYM or symtab.link >= len(secs):
                continue
            strtab = secs[symtab.link]
            table = self._read(sec.offset, sec.size)
            syms = self._read(symtab.offset, symtab.size)
            strs = self._read(strtab.offset, strtab.size)
            for pos in range(0, len(table) - _RELA.size + 1, _RELA.size):
                r_offset, r_info, _ = _RELA.unpack_from(table, pos)
                index = r_info >> 32
                if (r_info & 0xFFFFFFFF) not in _GOT_RELOCATIONS or \
                        (index + 1) * _SYM.size > len(syms):
                    continue
                st_name = _SYM.unpack_from(syms, index * _SYM.size)[0]
                end = strs.find(b"\0", st_name)
                out[r_offset] = strs[st_name:end if end >= 0 else None].decode(
                    "utf-8", "replace").split("@", 1)[0]
        return out

    def symtab_functions(self, names: frozenset[str],
                         types: tuple[int, ...] = (STT_FUNC,)) -> dict[str, int]:
        """The defined functions (or symbols of TYPES: STT_OBJECT for variables) of .symtab
        (the static symbol table, read from the file: an executable linked without -rdynamic
        exports nothing) among NAMES: name -> st_value. Cheap when none is there: the string
        table is searched first."""
        secs = self.sections()
        for sec in secs:
            if sec.type != SHT_SYMTAB or sec.link >= len(secs):
                continue
            strs = self._read(secs[sec.link].offset, secs[sec.link].size)
            wanted = {name.encode() for name in names if b"\0" + name.encode() + b"\0" in strs}
            if not wanted:
                return {}
            table = self._read(sec.offset, sec.size)
            out: dict[str, int] = {}
            for pos in range(_SYM.size, len(table) - _SYM.size + 1, _SYM.size):
                st_name, st_info, _, st_shndx, st_value, _ = _SYM.unpack_from(table, pos)
                if st_shndx == SHN_UNDEF or (st_info & 0xF) not in types:
                    continue
                end = strs.find(b"\0", st_name)
                name = strs[st_name:end]
                if name in wanted:
                    out[name.decode()] = st_value
            return out
        return {}

    def _dynsyms_from_dynamic(self
                              ) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int] | None,
                                         int] | None:
        """Locate .dynsym through PT_DYNAMIC when there are no section headers."""
        if self._dynamic is None:
            return None
        data = self._data
        off, size = self._dynamic
        tags: dict[int, int] = {}
        for pos in range(off, min(off + size, len(data) - 15), _DYN.size):
            tag, val = _DYN.unpack_from(data, pos)
            if tag == DT_NULL:
                break
            tags.setdefault(tag, val)
        need = [tags.get(DT_SYMTAB), tags.get(DT_STRTAB)]
        if None in need:
            return None
        sym_off = self.offset_for_vaddr(need[0])  # type: ignore[arg-type]
        str_off = self.offset_for_vaddr(need[1])  # type: ignore[arg-type]
        if sym_off is None or str_off is None:
            return None
        count = 0
        if DT_HASH in tags and (h := self.offset_for_vaddr(tags[DT_HASH])) is not None:
            count = _U32.unpack_from(data, h + 4)[0]  # nchain == number of symbols
        elif DT_GNU_HASH in tags and (h := self.offset_for_vaddr(tags[DT_GNU_HASH])) is not None:
            count = self._gnu_hash_count(h)
        ver = None
        if DT_VERSYM in tags and (v := self.offset_for_vaddr(tags[DT_VERSYM])) is not None:
            ver = (v, 2 * count)
        return (sym_off, count * _SYM.size), (str_off, tags.get(DT_STRSZ, 0)), ver, count

    def _gnu_hash_count(self, off: int) -> int:
        """Number of .dynsym entries implied by a DT_GNU_HASH table (highest chain end + 1)."""
        data = self._data
        nbuckets, symoffset, bloom_size, _ = struct.unpack_from("<IIII", data, off)
        buckets_off = off + 16 + 8 * bloom_size
        buckets = struct.unpack_from(f"<{nbuckets}I", data, buckets_off)
        last = max(buckets, default=0)
        if last < symoffset:
            return symoffset
        chain_off = buckets_off + 4 * nbuckets
        while not _U32.unpack_from(data, chain_off + 4 * (last - symoffset))[0] & 1:
            last += 1
        return last + 1

    # -- call frame information -----------------------------------------------------------------

    @property
    def has_cfi(self) -> bool:
        """True when the file has .eh_frame unwind information."""
        self._load_cfi()
        return self._has_cfi

    def _load_cfi(self) -> None:
        from . import cfi  # noqa: PLC0415 - .eh_frame is read for the breakpoint design alone

        if self._cfi_ready:
            return
        self._cfi_ready = True
        data = self._data
        if self._eh_frame_hdr is not None:
            try:
                self._load_hdr(*self._eh_frame_hdr)
                return
            except (cfi.CfiError, struct.error, IndexError):
                self._hdr_locs = self._hdr_fdes = None
        sec = self.section(".eh_frame")
        if sec is None or sec.size == 0 or sec.type == 8:  # SHT_NOBITS: stripped debug file
            return
        if sec.offset + sec.size > len(data):
            raise ElfError(f"{self.path}: .eh_frame lies outside the loaded segments")
        self._eh_delta = sec.addr - sec.offset
        try:
            # No binary search table: scan .eh_frame once and sort (LSB §10.6.2 is optional).
            self._scan = cfi.scan_fdes(data, sec.offset, sec.offset + sec.size, self._eh_delta,
                                       self._cie_cache)
        except (cfi.CfiError, struct.error, IndexError) as exc:
            raise ElfError(f"{self.path}: malformed .eh_frame: {exc}") from exc
        self._scan_begins = [entry[0] for entry in self._scan]
        self._has_cfi = bool(self._scan)

    def _load_hdr(self, off: int, vaddr: int) -> None:
        """Read the .eh_frame_hdr binary search table (LSB 5.0 Core §10.6.2)."""
        from . import cfi  # noqa: PLC0415 - .eh_frame is read for the breakpoint design alone

        data = self._data
        version, ptr_enc, count_enc, table_enc = data[off], data[off + 1], data[off + 2], \
            data[off + 3]
        if version != 1:
            raise cfi.CfiError(f".eh_frame_hdr version {version}")
        delta = vaddr - off
        eh_frame_vaddr, pos = cfi.read_encoded(data, off + 4, ptr_enc, delta, datarel=vaddr)
        eh_off = self.offset_for_vaddr(eh_frame_vaddr)
        if eh_off is None:
            raise cfi.CfiError(".eh_frame_ptr outside the file")
        self._eh_delta = eh_frame_vaddr - eh_off
        if count_enc == cfi.DW_EH_PE_omit or table_enc != (cfi.DW_EH_PE_datarel |
                                                             cfi.DW_EH_PE_sdata4):
            # No usable table: fall back to scanning from eh_frame_ptr up to the terminator.
            self._scan = cfi.scan_fdes(data, eh_off, len(data), self._eh_delta, self._cie_cache)
            self._scan_begins = [entry[0] for entry in self._scan]
            self._has_cfi = bool(self._scan)
            return
        count, pos = cfi.read_encoded(data, pos, count_enc, delta, datarel=vaddr)
        if pos + 8 * count > len(data):
            raise cfi.CfiError(".eh_frame_hdr table runs past the end of the file")
        table = array("i")
        if table.itemsize != 4:
            raise cfi.CfiError("platform int is not 32 bits")
        table.frombytes(bytes(data[pos:pos + 8 * count]))
        self._hdr_locs = table[0::2]
        self._hdr_fdes = table[1::2]
        self._hdr_vaddr = vaddr
        self._has_cfi = count > 0

    def _fde_at(self, off: int) -> FdeInfo:
        fde = self._fde_cache.get(off)
        if fde is None:
            from . import cfi  # noqa: PLC0415 - read for the breakpoint design alone

            fde = cfi.parse_fde(self._data, off, self._eh_delta, self._cie_cache)
            self._fde_cache[off] = fde
        return fde

    def eh_frame_lookup(self, vaddr: int) -> FdeInfo | None:
        """The FDE covering link-time address vaddr, or None (raises cfi.CfiError if malformed)."""
        self._load_cfi()
        if self._hdr_locs is not None and self._hdr_fdes is not None:
            i = bisect.bisect_right(self._hdr_locs, vaddr - self._hdr_vaddr) - 1
            if i < 0:
                return None
            fde_vaddr = self._hdr_vaddr + self._hdr_fdes[i]
            off = fde_vaddr - self._eh_delta
            if not 0 <= off < len(self._data):
                from . import cfi  # noqa: PLC0415 - read for the breakpoint design alone

                raise cfi.CfiError(f"{self.path}: .eh_frame_hdr entry points outside the file")
            fde = self._fde_at(off)
        elif self._scan:
            i = bisect.bisect_right(self._scan_begins, vaddr) - 1
            if i < 0:
                return None
            fde = self._fde_at(self._scan[i][2])
        else:
            return None
        if fde.pc_begin <= vaddr < fde.pc_end:
            return fde
        return None


#: a PLT stub's jump through its GOT slot, `jmp *disp32(%rip)`, after an `endbr64` (IBT's
#: .plt.sec) and with a `bnd` prefix (MPX's) or without: (prefix, where the next instruction is)
_PLT_JUMPS = ((b"\xff\x25", 6), (b"\xf2\xff\x25", 7), (b"\xf3\x0f\x1e\xfa\xff\x25", 10),
              (b"\xf3\x0f\x1e\xfa\xf2\xff\x25", 11))


def got_slot(read: Callable[[int, int], bytes], ret: int) -> int:
    """The GOT slot (its address) the x86-64 call returning to RET went through, reading the code
    with READ(address, length), or 0 when it went through none (a direct call, a function
    pointer) or the code cannot be read."""
    try:
        code = read(ret - 6, 6)
        if code[:2] == b"\xff\x15":  # call *disp32(%rip)
            return ret + int.from_bytes(code[2:], "little", signed=True)
        if code[1:2] != b"\xe8":  # call rel32: to a PLT stub?
            return 0
        stub = (ret + int.from_bytes(code[2:], "little", signed=True)) & 0xFFFFFFFFFFFFFFFF
        head = read(stub, 15)
    except OSError:
        return 0
    for prefix, length in _PLT_JUMPS:
        if head.startswith(prefix):
            disp = int.from_bytes(head[length - 4:length], "little", signed=True)
            return stub + length + disp
    return 0
