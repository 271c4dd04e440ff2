"""The breakpoint backend of a recording (`memdump --breakpoints`, and the in-process recorder's
fallback): GDB stops at every allocator call, and the hot path from a breakpoint's stop to the
dump.

GDB glue only. Hot path budget: an empty Python breakpoint stop costs ~80 us on the reference
machine, touching a gdb.Frame adds ~27 us, so a stop reads registers with PTRACE_GETREGS (GDB's
Python runs in the tracer thread), memory with pread(2) on /proc/PID/mem and walks stacks with
dbgkit.core.unwind (stacks.py). The breakpoints are breakpoints.py's, memdump_api.h's tags
tags.py's part (ApiTags), handed the dump's writer and the memory reader.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import gdb
from memdump_analyzer.dumpformat import NO_RESULT, apply, checked_blocks, event_args

from ..core import procfs, ptrace
from ..core.reach import ScanResult
from .breakpoints import (
    BAD_ALLOC,
    EntryBreakpoint,
    ExitBreakpoint,
    Pending,
    ReturnBreakpoint,
    ReturnSites,
    called_op,
    format_call_args,
    install_hooks,
    internal_call,
)
from .scan import pointer_scan
from .stacks import StackWalker
from .status import State
from .tags import ApiTags, MarkBreakpoint

if TYPE_CHECKING:
    from .recording import Recording


class BreakpointBackend:
    """GDB's breakpoints record RECORDING's events: entry and return breakpoints on the
    allocator, memdump_api.h's functions, and _exit for the scan."""

    #: the dump's `i recorder` (docs/recorder.md): GDB stops at every allocator call
    mode = "breakpoints"

    def __init__(self, recording: Recording) -> None:
        self.rec = recording
        self.pending: dict[int, Pending] = {}
        self.sites = ReturnSites(self, recording.return_sites)
        self.hooks: dict[int, EntryBreakpoint] = {}
        self.exit_hooks: dict[int, ExitBreakpoint] = {}
        self.marks: dict[int, MarkBreakpoint] = {}  # memdump_api.h's tags and phases
        #: memdump_api.h's tags, once the dump is open
        self.tags: ApiTags | None = None
        #: when each live block was allocated (time.time(); blocks freed may stay)
        self.born: dict[int, float] = {}
        self._internal: dict[int, bool] = {}  # return address -> a call inside the allocator
        self._called: dict[int, str] = {}  # return address -> the name it called (called_op)
        self._stacks: StackWalker | None = None
        # bound once the dump is open: the hot path calls them without another attribute lookup
        self._read: Callable[[int, int], bytes] = _unset
        self._event = _unset

    def arm(self, arm: Callable[[], None], note: str | None) -> None:
        arm()

    def start(self) -> None:
        rec = self.rec
        self.sites.capacity = max(rec.return_sites, 1)
        self.tags = ApiTags(rec.writer, rec.read, rec.hot_path_error)
        self._stacks = StackWalker(rec.writer, rec.read, rec.modules, rec.depth,
                                   rec.unwinder_mode, rec.counts)
        self._read = rec.read
        self._event = rec.writer.event

    def start_clock(self) -> None:
        """GDB's writer takes the dump's clock samples (`c` records) after events."""
        rec = self.rec
        rec.writer.sample_clock(rec.started, lambda: procfs.resident_bytes(rec.pid))

    def install_hooks(self) -> None:
        rec = self.rec
        if self._stacks is not None:
            self._stacks.forget()  # the modules changed
        install_hooks(self, rec.modules, rec.scanned, self.hooks, self.exit_hooks,
                      marks=self.marks, marker=self.tags, flags=rec.api_flags)
        if rec.state == State.RECORDING:
            rec.api_flags_on()

    def recording_something(self) -> bool:
        return bool(self.hooks)

    def remove_breakpoints(self) -> None:
        for bp in (*self.hooks.values(), *self.exit_hooks.values(), *self.marks.values()):
            if bp.is_valid():
                bp.delete()
        for table in (self.hooks, self.exit_hooks, self.marks):
            table.clear()
        self.sites.clear()
        self.pending.clear()

    def exec(self) -> None:
        if self._stacks is not None:
            self._stacks.forget()

    def signal_stop(self, event: gdb.SignalEvent) -> bool:
        """No stop of its own: guard pages need the in-process recorder."""
        return False

    def fatal_stop(self, signal: str) -> None:
        """Allocator calls a fatal signal caught inside (glibc aborts in realloc on a bad pointer)
        are written with RESULT 0x0: they never return, and the call is the evidence."""
        writer = self.rec.writer
        for tid, pend in sorted(self.pending.items()):
            self.sites.release(pend.ret)
            if pend.written:
                continue
            writer.event(tid, pend.op, pend.stack, 0, format_call_args(pend.op, pend.args, 0))
        self.pending.clear()
        writer.process("signal", signal)

    def before_detach(self) -> None:
        """The calls in progress are this backend's own stops: nothing to wait for."""

    def sync_dump(self) -> None:
        """This backend's records are complete at every stop."""

    def before_finish(self) -> None:
        """Every record is written as it happens."""

    def exit_call(self) -> None:
        """Everything is in GDB already."""

    def update_status(self, status: dict[str, object]) -> None:
        status.update(hooks=len(self.hooks), return_sites=len(self.sites))

    # -- what the breakpoints call -----------------------------------------------------------
    @property
    def stop_when_idle(self) -> bool:
        return self.rec.stop_when_idle

    def take_break(self) -> bool:
        """Whether the stop being decided is a break (memdump break)."""
        return self.rec.breaks.take()

    def on_exit_call(self) -> None:
        self.rec.on_exit_call()

    def on_entry(self, bp: EntryBreakpoint) -> None:
        rec = self.rec
        try:
            tid = gdb.selected_thread().ptid[1]
            regs = ptrace.get_regs(tid)
            if regs is None:
                rec.counts["unreadable-registers"] += 1
                return
            sp = regs.rsp
            pend = self.pending.get(tid)
            if bp.op == BAD_ALLOC:
                if pend is not None and pend.throws:
                    self._failed_new(tid, pend)
                return
            if pend is not None:
                if sp <= pend.sp:
                    # The allocator calling itself (one operation), by call (deeper stack) or by
                    # tail call at the same depth: glibc's realloc(NULL, n) jumps to malloc.
                    rec.counts["nested"] += 1
                    return
                self.pending.pop(tid)  # stale: the earlier call never came back (longjmp)
                self.sites.release(pend.ret)
            op = bp.op
            ret = int.from_bytes(self._read(sp, 8), "little")
            if op != "custom_alloc" and op != "custom_free" and internal_call(
                    self._read, rec.modules, self._internal, ret, bp.address):
                rec.counts["allocator-internal"] += 1  # as unseen by the in-process recorder
                return
            if bp.aliases:  # one function, two names (memalign): the one the caller called
                op = called_op(self._read, rec.modules, self._called, ret, bp)
            stack = self._stacks.walk(bp.address, regs)
            if op in NO_RESULT:  # free, delete, delete[] (2.1), custom_free
                (rec.custom if op == "custom_free" else rec.live).pop(regs.rdi, None)
                self._event(tid, op, stack, None, (f"{regs.rdi:#x}",))
                self._check_break((tid, op, (regs.rdi,), stack, None))
                rec.progress()
                if op != "custom_free":
                    self.pending[tid] = Pending(op, sp, ret, stack, (regs.rdi,), written=True)
                    self.sites.acquire(ret)
                return
            if op == "custom_alloc":  # (void *ptr, size_t size): the object is the argument
                if regs.rdi:
                    rec.custom[regs.rdi] = regs.rsi
                self._event(tid, op, stack, regs.rdi, (str(regs.rsi),))
                self._check_break((tid, op, (regs.rsi,), stack, regs.rdi))
                rec.progress()
                return
            self.pending[tid] = Pending(op, sp, ret, stack, (regs.rdi, regs.rsi, regs.rdx),
                                        throws=bp.throws)
            self.sites.acquire(ret)
        except Exception as exc:  # noqa: BLE001
            rec.hot_path_error(exc)

    def _failed_new(self, tid: int, pend: Pending) -> None:
        """A throwing operator new failed: it allocates std::bad_alloc, throws it and never
        returns. Its event is written now, RESULT 0x0, and the thread's next call is an
        outermost one (the exception object's malloc), as in the in-process recorder."""
        del self.pending[tid]
        self.sites.release(pend.ret)
        self._event(tid, pend.op, pend.stack, 0, format_call_args(pend.op, pend.args, 0))

    def on_return(self, bp: ReturnBreakpoint) -> None:
        rec = self.rec
        try:
            tid = gdb.selected_thread().ptid[1]
            pend = self.pending.get(tid)
            if pend is None or pend.ret != bp.address:
                return
            regs = ptrace.get_regs(tid)
            if regs is None or regs.rsp != pend.sp + 8:
                return  # another activation of the same call site (recursion), not ours
            del self.pending[tid]
            self.sites.release(pend.ret)
            if pend.written:  # free: written at its entry
                rec.breaks.release_returned(tid)
                return
            op = pend.op
            result = regs.rax
            rc = 0
            if op == "posix_memalign":  # (void **memptr, size_t alignment, size_t size) -> int
                rc = result & 0xFFFFFFFF
                result = int.from_bytes(self._read(pend.args[0], 8), "little") if rc == 0 else 0
            apply(rec.live, op, result, event_args(op, pend.args, rc))
            if result in rec.live:
                self.born[result] = time.time()
            self._event(tid, op, pend.stack, result, format_call_args(op, pend.args, rc))
            self._check_break((tid, op, pend.args, pend.stack, result))
            rec.progress()
        except Exception as exc:  # noqa: BLE001
            rec.hot_path_error(exc)

    def _check_break(self, event: tuple[int, str, tuple[int, ...], int, int | None]) -> None:
        """EVENT (thread, op, arguments, stack, address) written: a break if it matches."""
        breaks = self.rec.breaks
        if breaks.condition is not None and self.tags is not None:
            breaks.check(event, self.rec.writer, self.rec.modules, self.tags.innermost(event[0]))

    # -- the live blocks and the scan --------------------------------------------------------
    def scan_now(self, at_function_entry: bool) -> tuple[str, ScanResult | None, int]:
        rec = self.rec
        return pointer_scan(rec.inferior, rec.pid, rec.read_some,
                            checked_blocks(rec.live, rec.custom), rec.scan_time_limit,
                            at_function_entry, attached=rec.attached)

    def scan(self, at_function_entry: bool) -> None:
        rec = self.rec
        status, result, millis = self.scan_now(at_function_entry)
        rec.scan_status = status
        rec.final_scan = (status, result, millis)
        rec.writer.clock()  # the resident set at the end, the process still there
        rec.writer.scan_outcome(status, result, millis)
        if result is not None:
            rec.counts["scan-ms"] = millis

    def live_blocks(self) -> dict[int, int]:
        return checked_blocks(self.rec.live, self.rec.custom)

    def block_ages(self) -> dict[int, float]:
        now = time.time()
        return {addr: now - self.born.get(addr, now) for addr in self.rec.live}

    def recorder_memory(self) -> tuple[int, int] | None:
        """No recorder in the process: all its memory is the program's."""
        return None

    def calls_in_progress(self) -> list[tuple[int, str]]:
        return sorted((tid, pend.op) for tid, pend in self.pending.items() if not pend.written)


def _unset(*args: object) -> bytes:
    raise RuntimeError("the breakpoint backend has not started")
