"""What a live process's /proc tells, without GDB (proc(5)): its mappings, memory, signal
dispositions, and the registers of a thread blocked in a system call.

The one parser of /proc/PID/maps and the one reader of /proc/PID/mem: the module map
(procmaps), the pointer scan (reach) and the recorder all go through here.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

__all__ = [
    "Mapping",
    "ProcessMemory",
    "blocked_in_syscall",
    "caught",
    "exe_of",
    "parse_maps",
    "read_maps",
]


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
        # "start-end perms offset dev inode path"; the path may contain spaces.
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        lo, hi = parts[0].split("-")
        out.append(Mapping(int(lo, 16), int(hi, 16), parts[1], int(parts[2], 16), int(parts[4]),
                           parts[5].strip() if len(parts) > 5 else ""))
    out.sort(key=lambda m: m.start)
    return out


def read_maps(pid: int) -> list[Mapping]:
    """The mappings of process PID, in address order; OSError when it is gone."""
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="surrogateescape") as f:
        return parse_maps(f.read())


class ProcessMemory:
    """Process PID's memory through pread(2) on /proc/PID/mem.

    The descriptor stays open until close() (opening it costs more than a read); reopen() after
    an exec, whose new image the old descriptor no longer sees. `read` and `read_some` are
    meant to be taken as bound methods by callers on the hot path.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd: int | None = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        self._wfd: int | None = None

    def read(self, address: int, size: int) -> bytes:
        """Exactly SIZE bytes at ADDRESS; OSError when any of them is unmapped."""
        data = os.pread(self.fd, size, address)
        if len(data) != size:
            raise OSError(5, f"short read at {address:#x}")
        return data

    def read_some(self, address: int, size: int) -> bytes:
        """Up to SIZE bytes at ADDRESS (fewer at the end of a mapping); OSError if unmapped."""
        return os.pread(self.fd, size, address)

    def write(self, address: int, data: bytes) -> None:
        """Write DATA at ADDRESS (the process is stopped, or the words are its recorder's and
        written in the order it reads them); OSError when it cannot be written."""
        if self._wfd is None:
            self._wfd = os.open(f"/proc/{self.pid}/mem", os.O_RDWR | os.O_CLOEXEC)
        done = os.pwrite(self._wfd, data, address)
        if done != len(data):
            raise OSError(5, f"short write at {address:#x}")

    def reopen(self) -> None:
        self.close()
        self.fd = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self._wfd is not None:
            os.close(self._wfd)
            self._wfd = None


def caught(pid: int, signame: str) -> bool:
    """Whether process PID has a handler for SIGNAME, or ignores it (proc(5): SigCgt, SigIgn).

    True when it cannot be told (the process is gone): the caller then waits for a later
    moment rather than act on a guess. False for a name that is no signal."""
    number = getattr(signal, signame, None)
    if number is None:
        return False
    masks = 0
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(("SigCgt:", "SigIgn:")):
                    masks |= int(line.split()[1], 16)
    except (OSError, ValueError):
        return True
    return bool(masks >> (int(number) - 1) & 1)


def blocked_in_syscall(pid: int, tid: int) -> tuple[int, tuple[int, ...]] | None:
    """(stack pointer, argument registers) of a thread blocked in a system call, from
    /proc/PID/task/TID/syscall (proc(5): "NR ARG1 ... ARG6 SP PC"); None when it is running."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", encoding="ascii") as f:
            fields = f.read().split()
    except OSError:
        return None
    if len(fields) != 9 or fields[0].startswith("-"):
        return None
    try:
        values = [int(v, 16) for v in fields[1:]]
    except ValueError:
        return None
    return values[6], tuple(values[:6])


def resident_bytes(pid: int) -> int:
    """Process PID's resident set in bytes (/proc/PID/statm's second field), 0 when it cannot
    be read."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def exe_of(pid: int) -> str:
    """The path of process PID's executable, or "program" when it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return "program"
