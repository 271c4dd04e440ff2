"""A live process's mappings, read from /proc/PID/maps (proc(5)), and its executable modules."""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from dataclasses import dataclass

from .elf import ElfError, ElfFile
from .procfs import ProcessMemory, read_maps

__all__ = ["Module", "ModuleMap"]


@dataclass
class Module:
    """One executable mapping of a file; bias = runtime address - link-time vaddr."""

    path: str
    start: int
    end: int
    bias: int
    elf: ElfFile | None


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
            mappings = read_maps(self.pid)
        except OSError:
            # The process is gone: keep what we had so that late lookups still resolve.
            return
        mods: list[Module] = []
        for mapping in mappings:
            if not mapping.executable:
                continue
            path, start, end, offset = mapping.path, mapping.start, mapping.end, mapping.offset
            if path == "[vdso]":
                elf = self._vdso(start, end)
            elif path.startswith("/"):
                elf = self._open_file(path, mapping.inode, start, end)
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
                memory = ProcessMemory(self.pid)
                try:
                    data = memory.read_some(start, end - start)
                finally:
                    memory.close()
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
