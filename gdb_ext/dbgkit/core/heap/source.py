"""What the heap walk reads: a stopped live process (ptrace-attached, /proc/PID/mem) or a core
file (its PT_LOAD segments, NT_FILE and NT_PRSTATUS notes), behind one interface.

Both give the mappings (procfs.Mapping, [heap] named for a live process only), the threads
(kernel id, general registers, fs_base: the thread pointer) and `read(addr, size)`, which raises
OSError where memory is absent: unmapped, or in a core, a segment the kernel or gcore did not dump
(file-backed read-only text has p_filesz 0 and reads as absent).
"""

from __future__ import annotations

import bisect
import ctypes
import errno
import os
import struct
from dataclasses import dataclass

from .. import ptrace
from ..procfs import Mapping, ProcessMemory, read_maps

__all__ = ["CoreFile", "HeapSourceError", "LiveProcess", "ThreadState", "thread_state"]

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_PT_LOAD, _PT_NOTE = 1, 4
_ET_CORE = 4
_NT_PRSTATUS, _NT_FILE = 1, 0x46494C45
#: struct elf_prstatus on x86-64: pr_pid at 32, pr_reg (user_regs_struct, 27 words) at 112
_PR_PID, _PR_REG = 32, 112
_PTRACE_DETACH, _PTRACE_SEIZE, _PTRACE_INTERRUPT = 17, 0x4206, 0x4207
_WALL = 0x40000000  # waitpid(2): any child thread


class HeapSourceError(Exception):
    """The process or core cannot be read (one line, for the user)."""


@dataclass(frozen=True, slots=True)
class ThreadState:
    """A thread: its kernel id, general registers (user_regs_struct order), sp and fs_base."""

    tid: int
    registers: tuple[int, ...]
    sp: int
    fs_base: int


_GENERAL = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
            "r12", "r13", "r14", "r15")
_REG_INDEX = {name: i for i, (name, _) in enumerate(ptrace.Regs._fields_)}


def thread_state(tid: int, words: tuple[int, ...]) -> ThreadState:
    """Thread TID's state from its user_regs_struct WORDS."""
    return ThreadState(tid, tuple(words[_REG_INDEX[n]] for n in _GENERAL),
                       words[_REG_INDEX["rsp"]], words[_REG_INDEX["fs_base"]])


class LiveProcess:
    """Process PID, every thread seized and interrupted with ptrace until close(): it stays
    stopped (a process in a group stop stays in it) and runs on as before once detached."""

    kind = "process"

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            os.listdir(f"/proc/{pid}/task")
        except OSError as exc:
            raise HeapSourceError(f"process {pid}: cannot read /proc/{pid}: "
                                  f"{exc.strerror or exc}") from None
        libc = ctypes.CDLL(None, use_errno=True)
        self._ptrace = libc.ptrace
        self._ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self._ptrace.restype = ctypes.c_long
        self._seized: list[int] = []
        self.threads: list[ThreadState] = []
        try:
            self._seize_all()
            # read once every thread stands still: no mapping comes or goes after this
            self.maps = read_maps(pid)
            for tid in self._seized:
                regs = ptrace.get_regs(tid)
                if regs is None:  # gone (killed) since it was seized
                    continue
                self.threads.append(thread_state(tid, tuple(getattr(regs, n)
                                                       for n, _ in ptrace.Regs._fields_)))
            self.memory = ProcessMemory(pid)
        except (HeapSourceError, OSError) as exc:
            self.close()
            if isinstance(exc, HeapSourceError):
                raise
            raise HeapSourceError(f"process {pid}: {exc.strerror or exc}") from None
        self.read = self.memory.read

    def _seize_all(self) -> None:
        """Seize and interrupt every thread, again until no new one appears (a thread may start
        one meanwhile); a thread that ends first is left out."""
        pid = self.pid
        seen: set[int] = set()
        while True:
            try:
                tids = sorted({int(t) for t in os.listdir(f"/proc/{pid}/task")} - seen)
            except OSError as exc:
                raise HeapSourceError(f"process {pid}: cannot read /proc/{pid}: "
                                      f"{exc.strerror or exc}") from None
            if not tids:
                return
            for tid in tids:
                seen.add(tid)
                if self._ptrace(_PTRACE_SEIZE, tid, None, None) != 0:
                    err = ctypes.get_errno()
                    if err == errno.ESRCH:
                        continue
                    raise HeapSourceError(f"process {pid}: cannot attach to thread {tid}: "
                                          f"{os.strerror(err)}")
                self._seized.append(tid)
                self._ptrace(_PTRACE_INTERRUPT, tid, None, None)
                try:
                    os.waitpid(tid, _WALL)
                except ChildProcessError:  # it ended and is gone already
                    pass

    def close(self) -> None:
        memory = getattr(self, "memory", None)
        if memory is not None:
            memory.close()
        for tid in self._seized:
            self._ptrace(_PTRACE_DETACH, tid, None, None)
        self._seized = []


def _notes(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """(type, name, desc) of an ELF note segment."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        pos += 12
        name = data[pos:pos + namesz].rstrip(b"\0")
        pos += (namesz + 3) & ~3
        out.append((ntype, name, data[pos:pos + descsz]))
        pos += (descsz + 3) & ~3
    return out


def _file_table(desc: bytes) -> list[tuple[int, int, int, str]]:
    """NT_FILE: (start, end, file offset, path) per file-backed mapping (core(5))."""
    count, page = struct.unpack_from("<QQ", desc, 0)
    names = desc[16 + 24 * count:].split(b"\0")
    return [(*struct.unpack_from("<QQQ", desc, 16 + 24 * i)[:2],
             struct.unpack_from("<Q", desc, 16 + 24 * i + 16)[0] * page,
             names[i].decode("utf-8", "surrogateescape")) for i in range(count)]


class CoreFile:
    """A core file's memory, mappings and threads. A PT_LOAD segment's bytes past its p_filesz
    were not dumped: they read as absent (OSError), not as zeros."""

    kind = "core"

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            head = os.pread(self.fd, _EHDR.size, 0)
        except OSError as exc:
            raise HeapSourceError(f"{path}: cannot open: {exc.strerror}") from None
        if len(head) < _EHDR.size or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            os.close(self.fd)
            raise HeapSourceError(f"{path}: not a 64-bit little-endian ELF core file")
        fields = _EHDR.unpack_from(head)
        if fields[1] != _ET_CORE:
            os.close(self.fd)
            raise HeapSourceError(f"{path}: an ELF file but not a core (e_type {fields[1]})")
        phoff, phentsize, phnum = fields[5], fields[9], fields[10]
        table = os.pread(self.fd, phentsize * phnum, phoff)
        #: (vaddr, memsz, filesz, file offset, flags), by address
        self.segments: list[tuple[int, int, int, int, int]] = []
        files: list[tuple[int, int, int, str]] = []
        self.threads: list[ThreadState] = []
        for i in range(phnum):
            ptype, flags, off, vaddr, _, filesz, memsz, _ = _PHDR.unpack_from(table, i * phentsize)
            if ptype == _PT_LOAD:
                self.segments.append((vaddr, memsz, filesz, off, flags))
            elif ptype == _PT_NOTE:
                for ntype, name, desc in _notes(os.pread(self.fd, filesz, off)):
                    if name != b"CORE":
                        continue
                    if ntype == _NT_FILE:
                        files = _file_table(desc)
                    elif ntype == _NT_PRSTATUS and len(desc) >= _PR_REG + 27 * 8:
                        tid = struct.unpack_from("<i", desc, _PR_PID)[0]
                        self.threads.append(thread_state(tid, struct.unpack_from("<27Q", desc,
                                                                            _PR_REG)))
        self.segments.sort()
        self._starts = [s[0] for s in self.segments]
        self.maps = self._mappings(files)

    def _mappings(self, files: list[tuple[int, int, int, str]]) -> list[Mapping]:
        """The dumped segments, named from NT_FILE, and the file mappings NT_FILE lists that were
        not dumped (GDB leaves out read-only file mappings: their permissions are not in the
        core, r--p is said)."""
        named = {start: (off, path) for start, _, off, path in files}
        out = []
        for vaddr, memsz, _, _, flags in self.segments:
            perms = ("r" if flags & 4 else "-") + ("w" if flags & 2 else "-") + \
                ("x" if flags & 1 else "-") + "p"
            off, path = named.pop(vaddr, (0, ""))
            out.append(Mapping(vaddr, vaddr + memsz, perms, off, 1 if path else 0, path))
        out.extend(Mapping(start, end, "r--p", off, 1, path)
                   for start, end, off, path in files if start in named)
        out.sort(key=lambda m: m.start)
        return out

    def read(self, address: int, size: int) -> bytes:
        """SIZE bytes at ADDRESS; OSError when any is outside the dumped segments."""
        out = bytearray()
        at, end = address, address + size
        while at < end:
            i = bisect.bisect_right(self._starts, at) - 1
            if i < 0:
                raise OSError(5, f"{at:#x} is not in the core")
            vaddr, memsz, filesz, off, _ = self.segments[i]
            if at >= vaddr + min(memsz, filesz):
                raise OSError(5, f"{at:#x} is not in the core"
                              + (" (not dumped)" if at < vaddr + memsz else ""))
            n = min(end, vaddr + filesz) - at
            data = os.pread(self.fd, n, off + at - vaddr)
            if len(data) != n:
                raise OSError(5, f"{at:#x}: the core is truncated")
            out += data
            at += n
        return bytes(out)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
