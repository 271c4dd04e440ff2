"""Read a stopped tracee's registers with ptrace(PTRACE_GETREGS) through ctypes (x86-64 Linux only).

Much cheaper than asking GDB for register values; it works only from the tracer thread (GDB's
main thread, where its Python code runs) while the thread is stopped.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["Regs", "available", "get_regs"]

PTRACE_GETREGS = 12


class Regs(ctypes.Structure):
    """struct user_regs_struct from <sys/user.h> on x86-64, in kernel order."""

    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx",
        "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds",
        "es", "fs", "gs")]

    # Attribute annotations for type checkers (ctypes creates the descriptors).
    r15: int
    r14: int
    r13: int
    r12: int
    rbp: int
    rbx: int
    r11: int
    r10: int
    r9: int
    r8: int
    rax: int
    rcx: int
    rdx: int
    rsi: int
    rdi: int
    orig_rax: int
    rip: int
    rsp: int
    eflags: int
    fs_base: int

    def dwarf(self) -> dict[int, int]:
        """The registers by x86-64 DWARF number (psABI §3.6.2, Figure 3.36); 16 is rip."""
        return {0: self.rax, 1: self.rdx, 2: self.rcx, 3: self.rbx, 4: self.rsi, 5: self.rdi,
                6: self.rbp, 7: self.rsp, 8: self.r8, 9: self.r9, 10: self.r10, 11: self.r11,
                12: self.r12, 13: self.r13, 14: self.r14, 15: self.r15, 16: self.rip}


_ptrace = None
_loaded = False


def _load() -> None:
    """Bind ptrace(2) from the C library once; leave it None where this module cannot work."""
    global _ptrace, _loaded
    if _loaded:
        return
    _loaded = True
    if not sys.platform.startswith("linux") or os.uname().machine != "x86_64":
        return
    try:
        # the C library this process runs on (GDB's): ctypes.util.find_library would run
        # ldconfig -p, a fork of GDB and ~10 ms, at the first stop of every recording
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.ptrace
    except (OSError, AttributeError):
        return
    fn.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_long
    _ptrace = fn


def available() -> bool:
    """True on x86-64 Linux when ptrace(2) could be bound."""
    _load()
    return _ptrace is not None


def get_regs(tid: int) -> Regs | None:
    """The registers of stopped tracee thread tid, or None (not traced, not stopped, ...)."""
    _load()
    fn = _ptrace
    if fn is None:
        return None
    regs = Regs()
    try:
        if fn(PTRACE_GETREGS, tid, None, ctypes.addressof(regs)) != 0:
            return None
    except (ctypes.ArgumentError, OverflowError, TypeError):
        return None
    return regs


def last_errno() -> int:
    """errno of the last failed get_regs() call in this thread (for diagnostics)."""
    return ctypes.get_errno()
