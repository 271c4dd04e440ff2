"""A live process's mappings, read from /proc/PID/maps (proc(5)), and its executable modules."""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from dataclasses import dataclass

from .elf import ElfError, ElfFile

__all__ = ["Mapping", "Module", "ModuleMap", "make_mem_reader", "parse_maps"]


@dataclass(frozen=True, slots=True)
class Mapping:
    """One line of /proc/PID/maps (proc(5))."""

    start: int
    end: int
    perms: str
    offset: int = 0
    inode: int = 0
    path: str = ""

    @property
    def readable(self) -> bool:
        return self.perms[0] == "r"

    @property
    def writable(self) -> bool:
        return self.perms[1] == "w"

    @property
    def executable(self) -> bool:
        return self.perms[2] == "x"

    @property
    def reserved(self) -> bool:
        """A PROT_NONE mapping: a guard page or reserved address space."""
        return self.perms.startswith("---")

    @property
    def file_backed(self) -> bool:
        return self.inode != 0 and self.path.startswith("/")


def parse_maps(text: str) -> list[Mapping]:
    """The mappings of a /proc/PID/maps text, in address order."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        lo, hi = parts[0].split("-")
        out.append(Mapping(int(lo, 16), int(hi, 16), parts[1], int(parts[2], 16), int(parts[4]),
                           parts[5].strip() if len(parts) > 5 else ""))
    out.sort(key=lambda m: m.start)
    return out


@dataclass
class Module:
    """One executable mapping of a file; bias = runtime address - link-time vaddr."""

    path: str
    start: int
    end: int
    bias: int
    elf: ElfFile | None


def make_mem_reader(pid: int) -> Callable[[int, int], bytes]:
    """A read_memory(addr, size) callable backed by os.pread on /proc/PID/mem.

    The descriptor stays open for the life of the callable (opening it costs more than a read).
    A read across the end of a mapping returns the bytes before it; an unmapped start raises
    OSError (EIO), as the Unwinder expects.
    """
    fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    pread = os.pread

    def read_memory(addr: int, size: int) -> bytes:
        return pread(fd, size, addr)

    read_memory.fd = fd  # type: ignore[attr-defined]  # lets a caller close it explicitly
    return read_memory


class ModuleMap:
    """Executable file mappings (and [vdso]) of process pid, sorted for address lookup."""

    def __init__(self, pid: int, read_memory: Callable[[int, int], bytes] | None = None) -> None:
        """read_memory is used only to read the [vdso] image (default: /proc/PID/mem)."""
        self.pid = pid
        self._read_memory = read_memory
        self._modules: list[Module] = []
        self._starts: list[int] = []
        self._loaded = False
        self._refreshed_this_generation = False
        # Bumped whenever a refresh changes the module list, so that users of cached per-pc
        # data (the Unwinder's rows) know a pc may now belong to different code.
        self.version = 0
        self._vdso_cache: dict[bytes, ElfFile] = {}

    def invalidate(self) -> None:
        """Start a new generation: the next miss in find() may re-read the maps once more."""
        self._refreshed_this_generation = False

    def modules(self) -> list[Module]:
        """All modules, sorted by start address (reads the maps on first use)."""
        if not self._loaded:
            self.refresh()
        return list(self._modules)

    def find(self, pc: int) -> Module | None:
        """The module whose executable mapping holds pc, or None (after at most one refresh)."""
        if not self._loaded:
            self.refresh()
        mod = self._lookup(pc)
        if mod is None and not self._refreshed_this_generation:
            self.refresh()
            mod = self._lookup(pc)
        return mod

    def _lookup(self, pc: int) -> Module | None:
        i = bisect.bisect_right(self._starts, pc) - 1
        if i >= 0:
            mod = self._modules[i]
            if pc < mod.end:
                return mod
        return None

    def refresh(self) -> None:
        """Re-read /proc/PID/maps; uses up this generation's refresh (see invalidate())."""
        self._loaded = True
        self._refreshed_this_generation = True
        try:
            with open(f"/proc/{self.pid}/maps", encoding="utf-8", errors="surrogateescape") as fh:
                lines = fh.read().splitlines()
        except OSError:
            # The process is gone: keep what we had so that late lookups still resolve.
            return
        mods: list[Module] = []
        for line in lines:
            # "start-end perms offset dev inode path", proc(5); the path may contain spaces.
            parts = line.split(None, 5)
            if len(parts) < 6 or parts[1][2] != "x":
                continue
            path = parts[5]
            lo, hi = parts[0].split("-")
            start, end = int(lo, 16), int(hi, 16)
            offset = int(parts[2], 16)
            if path == "[vdso]":
                elf = self._vdso(start, end)
            elif path.startswith("/"):
                elf = self._open_file(path, int(parts[4]), start, end)
            else:
                continue
            link = elf.vaddr_for_offset(offset) if elf is not None else None
            bias = start - (link if link is not None else offset)
            mods.append(Module(path, start, end, bias, elf))
        mods.sort(key=lambda m: m.start)
        if [(m.path, m.start, m.end, m.bias) for m in mods] != \
                [(m.path, m.start, m.end, m.bias) for m in self._modules]:
            self.version += 1
        self._modules = mods
        self._starts = [m.start for m in mods]

    def _open_file(self, path: str, inode: int, start: int, end: int) -> ElfFile | None:
        """Open the mapped file, via /proc/PID/map_files when the path no longer names it."""
        map_file = f"/proc/{self.pid}/map_files/{start:x}-{end:x}"
        if not path.endswith(" (deleted)") and _same_file(path, inode):
            candidates = [path, map_file]
        else:
            # Deleted or replaced on disk since it was mapped: only the kernel still has it (and
            # map_files needs privileges). A replaced path is not tried: its CFI would be wrong.
            candidates = [map_file]
        for cand in candidates:
            try:
                return ElfFile.open(cand)
            except ElfError:
                continue
        return None

    def _vdso(self, start: int, end: int) -> ElfFile | None:
        """Parse the [vdso] image from process memory (it is a complete ELF file)."""
        try:
            read = self._read_memory
            if read is None:
                with open(f"/proc/{self.pid}/mem", "rb", buffering=0) as fh:
                    data = os.pread(fh.fileno(), end - start, start)
            else:
                data = read(start, end - start)
        except OSError:
            return None
        elf = self._vdso_cache.get(data)
        if elf is None:
            try:
                elf = ElfFile.from_bytes(data, "[vdso]")
            except ElfError:
                return None
            self._vdso_cache[data] = elf
        return elf


def _same_file(path: str, inode: int) -> bool:
    """True when path still names the inode that /proc/PID/maps lists for the mapping.

    Only the inode is compared: on overlay file systems maps may show another device number.
    """
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False
