"""The pointer scan at the end of a recording: every thread's registers and stack, the process's
mappings, then dbgkit.core.reach decides each live block's leak kind.

GDB glue only (it asks GDB for the threads); the deciding is reach's (through reach_fast: the C
library libmemdump_scan.so when it is built, which copies the blocks with process_vm_readv, GDB
being the process's tracer, or reads the /proc/PID/mem descriptor opened here), the reading
procfs's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

import gdb

from .. import output
from ..core import procfs, ptrace, reach, reach_fast
from ..core.heap.merge import attached_scan
from .checks import CMD

__all__ = ["pointer_scan"]

# user_regs_struct fields valgrind scans as general registers (VG_(apply_to_GP_regs), amd64)
_GENERAL_REGISTERS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10",
                      "r11", "r12", "r13", "r14", "r15")


#: exit's path to _exit: glibc's exit() (and quick_exit()) run the atexit handlers and the static
#: destructors in __run_exit_handlers, then call _exit. exit and quick_exit are exported, so
#: their frames are named without the C library's debug information.
_EXIT_PATH = frozenset({"exit", "__GI_exit", "quick_exit", "__GI_quick_exit",
                        "__run_exit_handlers"})
#: the registers a caller keeps across a call (System V x86-64): its live values
_CALLEE_SAVED = ("rbx", "rbp", "r12", "r13", "r14", "r15")
#: at _exit's first instruction, the registers it overwrites before its exit_group system call
#: (glibc 2.36: the two system call numbers in rsi and rdx, errno's offset in r8, the number in
#: rax; the syscall instruction itself writes rcx and r11): what they hold then is no value the
#: process still has when it ends, where valgrind looks
_EXIT_OVERWRITES = frozenset({"rax", "rcx", "rdx", "rsi", "r8", "r11"})


def _exit_caller() -> tuple[int, tuple[int, ...]] | None:
    """At _exit, when the selected thread came through exit(): the stack pointer of the frame
    that called exit() (main's return to __libc_start_call_main, or a function calling exit)
    and that frame's callee-saved registers, as GDB unwinds them. None when the program called
    _exit itself, or the stack cannot be walked.

    valgrind scans only the stack words a program wrote: exit's path grows the stack again over
    the frames of calls that returned, and leaves most of their words as they were, stale
    pointers included, which valgrind's V bits mark undefined. Its own live values are the
    runtime's (the exit handlers' list, in the C library's data) and, in the registers it saved,
    its caller's: so the exiting thread is scanned from its caller's frame up, with those
    registers and its registers at _exit."""
    try:
        frame = gdb.selected_frame()
        found = None
        for _ in range(64):
            if frame is None:
                return None
            if frame.name() in _EXIT_PATH:
                found = frame
            elif found is not None:
                return int(frame.read_register("rsp")), tuple(
                    int(frame.read_register(name)) & 0xFFFFFFFFFFFFFFFF for name in _CALLEE_SAVED)
            frame = frame.older()
    except gdb.error:
        return None
    return None


def pointer_scan(inferior: gdb.Inferior, pid: int, read_some: Callable[[int, int], bytes],
                 live: dict[int, int], time_limit: int, at_function_entry: bool,
                 exclude: tuple[int, int] | None = None, attached: bool = False,
                 began: float | None = None, at_load: Iterable[int] | None = None,
                 ) -> tuple[str, reach.ScanResult | None, int]:
    """Scan process PID (INFERIOR's) for pointers to the LIVE blocks, within TIME_LIMIT seconds:
    (status, result, milliseconds). Status `ok` with a result; `threads` (a thread is running:
    its stack would pass for a dead thread's) or `timeout` without. AT_FUNCTION_ENTRY: the
    selected thread stands on a function's first instruction (_exit). EXCLUDE: the range of
    the in-process recorder's own memory (its tables point at every block: not a root).
    ATTACHED: the recording began on a running process: the blocks from before, walked in
    glibc's heap (heapsource.older_blocks), are scanned with LIVE and returned apart, with
    their types (the result's `older`, merge.attached_scan: the dump's `ob` records; at _exit,
    or when the heap cannot be walked, they are unknown: the heap around the known blocks is
    then a root, their pointers count). BEGAN: when the caller began to gather the blocks
    (time.monotonic()), where the milliseconds count from. AT_LOAD:
    the heap's blocks in use when the in-process recorder was loaded (heapsource.in_use); the
    walked blocks not among them, allocated since and not recorded, are in neither set."""
    began = time.monotonic() if began is None else began
    threads: list[reach.Thread] = []
    unreadable = []
    # The thread that called _exit stands on its first instruction: below its stack pointer
    # lies only garbage of calls that have returned (exit's handlers), not a red zone.
    current = gdb.selected_thread()
    exiting = current.ptid[1] if current is not None and at_function_entry else 0
    caller = _exit_caller() if exiting else None
    for thread in inferior.threads():
        tid = thread.ptid[1]
        regs = ptrace.get_regs(tid)
        if regs is not None:
            values = tuple(getattr(regs, name) for name in _GENERAL_REGISTERS
                           if tid != exiting or name not in _EXIT_OVERWRITES)
            if tid == exiting and caller is not None:
                threads.append(reach.Thread(tid, caller[0], values + caller[1], red_zone=0))
            else:
                threads.append(reach.Thread(tid, regs.rsp, values,
                                            red_zone=0 if tid == exiting else reach.RED_ZONE))
            continue
        # GDB runs a native target in non-stop mode under the hood: while a breakpoint's
        # stop() runs, the other threads are not stopped. One blocked in a system call
        # stays put; the kernel tells its stack pointer and argument registers.
        blocked = procfs.blocked_in_syscall(pid, tid)
        if blocked is None:
            unreadable.append(tid)
        else:
            threads.append(reach.Thread(tid, blocked[0], blocked[1]))
    status = "ok"
    result = None
    if unreadable:
        # its stack would pass for a dead thread's: better no split than a wrong one
        status = "threads"
        output.warn(CMD, f"pointer scan skipped: thread(s) {', '.join(map(str, unreadable))} "
                         "still running at exit (neither stopped nor in a system call)")
    else:
        mappings = procfs.read_maps(pid)
        if exclude is not None:
            lo, hi = exclude
            mappings = [m for m in mappings if m.end <= lo or m.start >= hi]
        tty = os.isatty(2)

        def progress(nbytes: int, pending: int) -> None:
            if tty and time.monotonic() - began > 2:
                output.progress(CMD, f"pointer scan: {nbytes / 2**20:,.0f} MiB scanned, "
                                     f"{pending:,} blocks to go")

        older, label_of = None, {}
        if attached and not exiting:
            # glibc's heap walker, only for a recording that began with an attach (not imported
            # by every recording: 10 ms)
            from .heapsource import older_blocks  # noqa: PLC0415

            walked = older_blocks(inferior, live, exclude, at_load)
            if walked is not None:
                older, label_of = walked
        try:  # the C scan's own descriptor; without one, reach_fast scans in Python
            memory: procfs.ProcessMemory | None = procfs.ProcessMemory(pid)
        except OSError:
            memory = None
        try:
            result = reach_fast.scan(read_some, mappings, live if older is None
                                     else {**live, **older}, threads,
                                     fd=memory.fd if memory is not None else None, pid=pid,
                                     deadline=began + time_limit, progress=progress,
                                     attached=attached and older is None)
            if older:
                result = attached_scan(result, older, label_of)
        except reach.ScanTimeout:
            status = "timeout"
            output.warn(CMD, f"pointer scan stopped after {time_limit} s "
                             "(set memdump scan-time-limit): leak kinds unknown")
        finally:
            if memory is not None:
                memory.close()
    if result is not None and result.engine != "c" and not _told_python:
        _told_python.append(True)
        output.info(CMD, f"pointer scan in Python ({reach_fast.library_path()} not loaded: "
                         "make build makes it, 20x faster)")
    millis = int((time.monotonic() - began) * 1000)
    return status, result, millis


#: memdump says once per GDB session that the scan ran without its C library
_told_python: list[bool] = []
