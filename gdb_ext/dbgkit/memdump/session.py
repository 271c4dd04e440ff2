"""A memdump recording: the state machine from `memdump` to the end of the run, the events GDB
sends it, and the hot path from a breakpoint's stop to the dump.

GDB glue only. Hot path budget: an empty Python breakpoint stop costs ~80 us on the reference
machine, touching a gdb.Frame adds ~27 us, so stop() reads registers with PTRACE_GETREGS (GDB's
Python runs in the tracer thread), memory with pread(2) on /proc/PID/mem and walks stacks with
dbgkit.core.unwind (stacks.py). The breakpoints are breakpoints.py's, the pointer scan scan.py's,
GDB's symbol lookups symbols.py's, what /proc tells core.procfs's; memdump_api.h's tags are
tags.py's part (ApiTags), `memdump break` breaks.py's (Breaks), each handed what it works with.
"""

from __future__ import annotations

import datetime
import enum
import errno
import os
import time
from collections import Counter
from collections.abc import Callable

import gdb
from memdump_analyzer.dumpformat import (
    NO_RESULT,
    apply,
    checked_blocks,
    event_args,
)

from .. import output, settings
from ..core import builtfiles, procfs, ptrace
from ..core.breakcond import BreakCondition
from ..core.dumpnames import DumpPathError, create_dump, open_dump
from ..core.dumpwriter import DumpWriter, FrameInfo
from ..core.procmaps import ModuleMap
from ..core.reach import ScanResult
from ..core.runclock import RunClock
from . import compact, ends
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
from .breaks import Breaks
from .checks import CMD, cannot_record, guarded
from .scan import pointer_scan
from .signals import FATAL_SIGNALS, dies_of
from .stacks import StackWalker
from .status import status_of
from .symbols import resolve
from .tags import ApiTags, MarkBreakpoint, set_flags

# Progress is reported each time the event count crosses a multiple of 65,536.
_PROGRESS_MASK = 0xFFFF


class State(enum.Enum):
    """Where a recording is: armed (no process yet), recording, ended (for good)."""

    ARMED = "armed"
    RECORDING = "recording"
    ENDED = "ended"


class Session:
    """One recording, from `memdump` to the program's exit, `detach` or `memdump stop`."""

    #: the dump's `i recorder` (docs/recorder.md): GDB stops at every allocator call
    mode = "breakpoints"

    def __init__(self, out_path: str | None, depth: int, unwinder: str, return_sites: int,
                 scan_time_limit: int = 120) -> None:
        self.inferior = gdb.selected_inferior()
        self.out_path = out_path
        self.depth = depth
        self.unwinder_mode = unwinder
        self.state = State.ARMED
        self.path: str | None = None
        self.fd: int | None = None
        self.pid = 0
        self.writer: DumpWriter | None = None
        self.pending: dict[int, Pending] = {}
        self.sites = ReturnSites(self, return_sites)
        self.hooks: dict[int, EntryBreakpoint] = {}
        self.exit_hooks: dict[int, ExitBreakpoint] = {}
        self.marks: dict[int, MarkBreakpoint] = {}  # memdump_api.h's tags and phases
        self.api_flags: set[int] = set()
        #: the breakpoint design's tags (memdump_api.h), once the dump is open
        self.tags: ApiTags | None = None
        #: `memdump break`: the condition and the stops it makes
        self.breaks = Breaks(self.inferior)
        self._internal: dict[int, bool] = {}  # return address -> a call inside the allocator
        self._called: dict[int, str] = {}  # return address -> the name it called (called_op)
        #: the live blocks (address -> size) as the analyser's replay of the dump defines them
        self.live: dict[int, int] = {}
        #: the scan at exit or at a fatal signal, once made: (status, result, millis)
        self.final_scan: tuple[str, ScanResult | None, int] | None = None
        #: when each live block was allocated (time.time(); blocks freed may stay)
        self.born: dict[int, float] = {}
        #: the live custom blocks (memdump_api.h), apart from the malloc'd ones
        self.custom: dict[int, int] = {}
        self.scan_status: str | None = None
        self.scan_time_limit = scan_time_limit
        self._scanned: set[tuple[str, int]] = set()
        self.counts: Counter[str] = Counter()
        self.started = time.monotonic()
        # time the program ran while recorded, not stopped at GDB's prompt
        self._clock = RunClock(gdb.events.cont)
        #: a path this recording continues the series of (`memdump -o FILE`, then FILE-2, ...)
        self.series: str | None = None
        #: record the processes the program starts too (in-process recorder: children.c)
        self.children = False
        #: the settings' current values (settings.get): read again when the recording starts
        self.settings: Callable[[str], object] | None = None
        #: called with this session when the program it recorded ended (not on `memdump stop`)
        self.on_program_end: Callable[[Session], None] | None = None
        #: called with this session when its dump opened (the run or the attach it records)
        self.on_start: Callable[[Session], None] | None = None
        #: armed by itself after the previous run ended, not by a `memdump` command
        self.again = False
        #: the recording of the previous run, when armed by itself
        self.previous: Session | None = None
        self.ended_reason = ""
        self._memory: procfs.ProcessMemory | None = None
        self._read: Callable[[int, int], bytes] | None = None
        self._read_some: Callable[[int, int], bytes] | None = None
        self._modules: ModuleMap | None = None
        self._stacks: StackWalker | None = None  # the breakpoint design's, once begun
        self._failed = False
        self._connected = False
        self.attached = False
        #: set while a recording is wound up (scripts/memdump.sh -p): the return that completes
        #: the last allocator call in progress stops the program, so that no call is cut in half
        self.stop_when_idle = False

    # -- life cycle --------------------------------------------------------------------------
    def arm(self, again: bool = False, note: str | None = None) -> None:
        """Open the output (to fail early), hook the events, and start at once on a live process.
        AGAIN: armed for the next run after the previous one ended. NOTE: the line that says it
        is armed, when not the usual one."""
        self.again = again
        if self.out_path is not None:
            try:
                self.fd = open_dump(self.out_path)
            except DumpPathError as exc:
                raise gdb.GdbError(f"{CMD}: {exc}") from None
            self.path = self.out_path
        self._connect()
        ends.define_detach_hook(self)  # `detach` ends this recording, scanned
        # AGAIN is armed from the exited event, while the ended process still has its pid.
        if self.inferior.pid and not again:
            self.attached = True
            self._begin()
            self._install_hooks()
            if not self._recording_something():
                self.finish("stop")
                raise gdb.GdbError(
                    f"{CMD}: process {self.pid} has no allocator to hook: no loaded module exports "
                    "malloc (statically linked?)"
                )
        elif again:
            output.info(CMD, "armed again: the next run is recorded into a new dump "
                             "(memdump stop disarms)")
        else:
            output.info(CMD, note or "armed: recording starts when the program runs")

    def _recording_something(self) -> bool:
        """Hooks are in place on the live process just attached to."""
        return bool(self.hooks)

    def _begin(self) -> None:
        """The process exists: open the dump, write its header, set up memory and unwinding."""
        self.pid = self.inferior.pid
        if self.settings is not None:
            self.depth = int(self.settings("depth"))
            self.unwinder_mode = str(self.settings("unwinder"))
            self.sites.capacity = max(int(self.settings("return-sites")), 1)
            self.scan_time_limit = int(self.settings("scan-time-limit"))
        program = self.inferior.progspace.filename or procfs.exe_of(self.pid)
        if self.fd is None:
            try:
                self.fd, self.path = create_dump(program, self.pid, self.series)
            except DumpPathError as exc:
                raise gdb.GdbError(f"{CMD}: {exc}") from None
        self._memory = procfs.ProcessMemory(self.pid)
        # bound once: the hot path calls them without another attribute lookup
        self._read = self._memory.read
        self._read_some = self._memory.read_some
        self._modules = ModuleMap(self.pid, self._read)
        self.writer = DumpWriter(self.fd, self._resolve)
        self.tags = ApiTags(self.writer, self._read, self._hot_path_error)
        self._stacks = StackWalker(self.writer, self._read, self._modules, self.depth,
                                   self.unwinder_mode, self.counts)
        start = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for key, value in (
            ("program", program),
            ("pid", self.pid),
            ("arch", "x86_64"),
            ("depth", self.depth),
            ("attached", int(self.attached)),
            ("start", start),
            ("gdb", gdb.VERSION.split()[0]),
            ("recorder", self.mode),
        ):
            self.writer.info(key, value)
        self.state = State.RECORDING
        self.started = time.monotonic()
        self._start_clock()
        if self.attached:
            self._clock.stopped()  # stopped at the prompt: it runs again at the next continue
        else:
            self._clock.running(self.started)  # GDB is starting it
        output.info(CMD, f"recording process {self.pid} to {self.path}")
        if self.on_start is not None:
            self.on_start(self)
        self._api_flags_on()

    def _start_clock(self) -> None:
        """The dump's clock samples (`c` records): GDB's writer takes them after events."""
        self.writer.sample_clock(self.started, lambda: procfs.resident_bytes(self.pid))

    def finish(self, reason: str, detail: str = "-") -> None:
        """Write the end record, remove every breakpoint, close the dump."""
        if self.state == State.ENDED:
            return
        if self.writer is not None and not self._failed:
            try:
                self.writer.end(reason, detail)
            except OSError as exc:
                output.warn(CMD, f"could not finish {self.path}: {exc.strerror}")
        self._clock.close()
        self._api_flags_on(False)
        recorded = self.writer is not None
        self.state = State.ENDED
        self.ended_reason = reason if detail == "-" else f"{reason} {detail}"
        self._disconnect()
        self._remove_breakpoints()
        if self.fd is not None:
            os.close(self.fd)
        self.fd = None
        if self._memory is not None:
            self._memory.close()
        if self.writer is not None:
            output.info(
                CMD,
                f"{self.writer.events:,} event{'s' if self.writer.events != 1 else ''} "
                f"recorded in {self.path} ({self.ended_reason}); "
                f"report: {builtfiles.ANALYZE} {self.path}",
            )
        if recorded and reason != "gdb-exit" and (self.settings or settings.get)("compact"):
            compact.defer(self.path)  # not at GDB's exit: the program may write on
        if recorded and reason not in ("stop", "gdb-exit") and self.on_program_end is not None:
            self.on_program_end(self)

    def before_detach(self) -> None:
        """`detach` comes (ends.py): the calls in progress are this design's own stops."""

    def sync_dump(self) -> None:
        """Complete the dump up to this stop (memdump leaks): this design's records are already."""

    def running_time(self) -> float:
        """Seconds the program has run while recorded (not stopped at GDB's prompt)."""
        return self._clock.seconds()

    def _remove_breakpoints(self) -> None:
        for bp in (*self.hooks.values(), *self.exit_hooks.values(), *self.marks.values()):
            if bp.is_valid():
                bp.delete()
        for table in (self.hooks, self.exit_hooks, self.marks):
            table.clear()
        self.sites.clear()
        self.pending.clear()

    # -- GDB events --------------------------------------------------------------------------
    def _handlers(self) -> tuple[tuple[object, object], ...]:
        """The GDB event registries this session listens to, with its handler for each."""
        ev = gdb.events
        return (
            (ev.new_objfile, self._on_new_objfile),
            (ev.clear_objfiles, self._on_clear_objfiles),
            (ev.exited, self._on_exited),
            (ev.stop, self._on_stop),
            (ev.gdb_exiting, self._on_gdb_exiting),
        )

    def _connect(self) -> None:
        for registry, handler in self._handlers():
            registry.connect(handler)
        self._connected = True

    def _disconnect(self) -> None:
        if not self._connected:
            return
        for registry, handler in self._handlers():
            registry.disconnect(handler)
        self._connected = False

    def _guard(self, what: str, fn, *args) -> None:  # noqa: ANN001
        guarded(self.counts, what, fn, *args)

    def _on_new_objfile(self, event: gdb.NewObjFileEvent) -> None:
        if event.new_objfile.progspace == self.inferior.progspace:  # not another inferior's
            self._guard("new_objfile", self._new_objfile)

    def _new_objfile(self) -> None:
        if self.state == State.ENDED or not self.inferior.pid:
            return
        if self.inferior.pid != self.pid and self.state == State.RECORDING:
            return  # another process of this inferior (a followed fork child): not ours
        if self.state == State.ARMED:
            try:
                self._begin()
            except gdb.GdbError as exc:
                self.finish("stop")
                cannot_record(str(exc))
                return
        self._modules.invalidate()
        self._stacks.forget()  # type: ignore[union-attr] - begun: recording
        self._install_hooks()

    def _on_clear_objfiles(self, event: gdb.ClearObjFilesEvent) -> None:
        if event.progspace == self.inferior.progspace:
            self._guard("clear_objfiles", self._clear_objfiles)

    def _clear_objfiles(self) -> None:
        # With the process alive this is an exec: the image is replaced, every block with it. The
        # address breakpoints would be re-inserted into the new image at meaningless places: drop
        # them now; the new C library's objfile event hooks it again.
        if self.state != State.RECORDING or not self.inferior.pid:
            return
        self._remove_breakpoints()
        self._scanned.clear()
        self.live.clear()
        self.writer.process("exec", self.inferior.progspace.filename or "?")
        if self.mode == "breakpoints":  # the new image's recorder (in-process: once configured)
            self.writer.info("recorder", self.mode)
        self._memory.reopen()
        self._modules.invalidate()
        self._stacks.forget()  # type: ignore[union-attr] - begun: recording

    def _on_exited(self, event: gdb.ExitedEvent) -> None:
        if event.inferior.num == self.inferior.num:
            self._guard("exited", self._exited, event)

    def _exited(self, event: gdb.ExitedEvent) -> None:
        if self.state != State.ARMED:
            self.finish(*ends.end_reason(event, self.pid))

    def _on_stop(self, event: gdb.StopEvent) -> None:
        self._guard("stop", self._stop_event, event)
        self._guard("break", self.breaks.announce)

    def _stop_event(self, event: gdb.StopEvent) -> None:
        if self.state == State.RECORDING:
            self._clock.stopped()
        if self.state != State.RECORDING or not isinstance(event, gdb.SignalEvent):
            return
        if event.stop_signal in FATAL_SIGNALS or (
                self.inferior.pid == self.pid and dies_of(self.pid, event.stop_signal)):
            self._write_interrupted()
            self.writer.process("signal", event.stop_signal)
            # A signal the program does not catch ends it when it goes on: this stop is the last
            # moment its memory can be scanned (valgrind reports leak kinds for such deaths too).
            # One it catches may be survived, and the scan waits for _exit.
            if self.inferior.pid == self.pid and not procfs.caught(self.pid, event.stop_signal):
                self.scan_once(at_function_entry=False)

    def _write_interrupted(self) -> None:
        """Allocator calls a fatal signal caught inside (glibc aborts in realloc on a bad pointer)
        are written with RESULT 0x0: they never return, and the call is the evidence."""
        for tid, pend in sorted(self.pending.items()):
            self.sites.release(pend.ret)
            if pend.written:
                continue
            self.writer.event(tid, pend.op, pend.stack, 0, format_call_args(pend.op, pend.args, 0))
        self.pending.clear()

    def _on_gdb_exiting(self, event: object) -> None:
        self._guard("gdb_exiting", self._gdb_exiting)

    def _gdb_exiting(self) -> None:
        if self.state == State.RECORDING:
            self.finish("gdb-exit")
        elif self.state == State.ARMED:
            self.finish("stop")

    # -- hooks -------------------------------------------------------------------------------
    def _install_hooks(self) -> None:
        install_hooks(self, self._modules, self._scanned, self.hooks, self.exit_hooks,
                      marks=self.marks, marker=self.tags, flags=self.api_flags)
        if self.state == State.RECORDING:
            self._api_flags_on()

    # -- hot path ----------------------------------------------------------------------------
    def on_entry(self, bp: EntryBreakpoint) -> None:
        try:
            tid = gdb.selected_thread().ptid[1]
            regs = ptrace.get_regs(tid)
            if regs is None:
                self.counts["unreadable-registers"] += 1
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
                    self.counts["nested"] += 1
                    return
                self.pending.pop(tid)  # stale: the earlier call never came back (longjmp)
                self.sites.release(pend.ret)
            op = bp.op
            ret = int.from_bytes(self._read(sp, 8), "little")
            if op != "custom_alloc" and op != "custom_free" and internal_call(
                    self._read, self._modules, self._internal, ret, bp.address):
                self.counts["allocator-internal"] += 1  # as unseen by the in-process recorder
                return
            if bp.aliases:  # one function, two names (memalign): the one the caller called
                op = called_op(self._read, self._modules, self._called, ret, bp)
            stack = self._stacks.walk(bp.address, regs)
            if op in NO_RESULT:  # free, delete, delete[] (2.1), custom_free
                (self.custom if op == "custom_free" else self.live).pop(regs.rdi, None)
                self.writer.event(tid, op, stack, None, (f"{regs.rdi:#x}",))
                self._check_break((tid, op, (regs.rdi,), stack, None))
                if not self.writer.events & _PROGRESS_MASK:
                    self._progress()
                if op != "custom_free":
                    self.pending[tid] = Pending(op, sp, ret, stack, (regs.rdi,), written=True)
                    self.sites.acquire(ret)
                return
            if op == "custom_alloc":  # (void *ptr, size_t size): the object is the argument
                if regs.rdi:
                    self.custom[regs.rdi] = regs.rsi
                self.writer.event(tid, op, stack, regs.rdi, (str(regs.rsi),))
                self._check_break((tid, op, (regs.rsi,), stack, regs.rdi))
                if not self.writer.events & _PROGRESS_MASK:
                    self._progress()
                return
            self.pending[tid] = Pending(op, sp, ret, stack, (regs.rdi, regs.rsi, regs.rdx),
                                        throws=bp.throws)
            self.sites.acquire(ret)
        except Exception as exc:  # noqa: BLE001
            self._hot_path_error(exc)

    def _failed_new(self, tid: int, pend: Pending) -> None:
        """A throwing operator new failed: it allocates std::bad_alloc, throws it and never
        returns. Its event is written now, RESULT 0x0, and the thread's next call is an
        outermost one (the exception object's malloc), as in the in-process recorder."""
        del self.pending[tid]
        self.sites.release(pend.ret)
        self.writer.event(tid, pend.op, pend.stack, 0, format_call_args(pend.op, pend.args, 0))

    def on_return(self, bp: ReturnBreakpoint) -> None:
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
                self.breaks.release_returned(tid)
                return
            op = pend.op
            result = regs.rax
            rc = 0
            if op == "posix_memalign":  # (void **memptr, size_t alignment, size_t size) -> int
                rc = result & 0xFFFFFFFF
                result = int.from_bytes(self._read(pend.args[0], 8), "little") if rc == 0 else 0
            apply(self.live, op, result, event_args(op, pend.args, rc))
            if result in self.live:
                self.born[result] = time.time()
            self.writer.event(tid, op, pend.stack, result, format_call_args(op, pend.args, rc))
            self._check_break((tid, op, pend.args, pend.stack, result))
            if not self.writer.events & _PROGRESS_MASK:
                self._progress()
        except Exception as exc:  # noqa: BLE001
            self._hot_path_error(exc)

    # -- the pointer scan at exit ------------------------------------------------------------
    def on_exit_call(self) -> None:
        """_exit was called: atexit handlers and destructors have run, memory is intact. Scan
        it for pointers to the live blocks (once) and write the kind of each block."""
        try:
            if gdb.selected_inferior().pid != self.pid:
                return  # a followed child, not the process being recorded
            self.scan_once(at_function_entry=True)
        except Exception as exc:  # noqa: BLE001
            self._hot_path_error(exc)

    def scan_once(self, at_function_entry: bool) -> None:
        """The pointer scan, unless it already ran, is turned off, or nothing is recorded; its
        kinds go into the dump (ends.py: at `memdump stop` and `detach` too)."""
        if self.state != State.RECORDING or self.scan_status is not None or self.writer is None:
            return
        if self.scan_time_limit == 0:
            return
        self._scan(at_function_entry)

    def scan_now(self, at_function_entry: bool) -> tuple[str, ScanResult | None, int]:
        """The pointer scan of the stopped process's live blocks: (status, result, millis).
        AT_FUNCTION_ENTRY: the selected thread stands on a function's first instruction."""
        return pointer_scan(self.inferior, self.pid, self._read_some,
                            checked_blocks(self.live, self.custom), self.scan_time_limit,
                            at_function_entry, attached=self.attached)

    def live_blocks(self) -> dict[int, int]:
        """The blocks a leak check looks at now (address -> size)."""
        return checked_blocks(self.live, self.custom)

    def block_ages(self) -> dict[int, float]:
        """Seconds since each live block was allocated."""
        now = time.time()
        return {addr: now - self.born.get(addr, now) for addr in self.live}

    def recorder_memory(self) -> tuple[int, int] | None:
        """[start, end) of the in-process recorder's own memory, which is not a root."""
        return None

    def calls_in_progress(self) -> list[tuple[int, str]]:
        """(thread id, operation) of the allocator calls some thread is inside of."""
        return sorted((tid, pend.op) for tid, pend in self.pending.items() if not pend.written)

    def _scan(self, at_function_entry: bool) -> None:
        status, result, millis = self.scan_now(at_function_entry)
        self.scan_status = status
        self.final_scan = (status, result, millis)
        self.writer.clock()  # the resident set at the end, the process still there
        self.writer.scan_outcome(status, result, millis)
        if result is not None:
            self.counts["scan-ms"] = millis

    def _progress(self) -> None:
        """Every 65,536 events, when someone watches a terminal: how far and how fast."""
        if not os.isatty(2):  # GDB's sys.stderr is its own object; the descriptor tells
            return
        elapsed = max(self.running_time(), 1e-3)
        events = self.writer.events
        output.progress(CMD, f"{events:,} events in {elapsed:.0f} s ({events / elapsed:,.0f}/s), "
                             f"dump {self.writer.bytes_written / 2**20:,.1f} MiB")

    def _check_break(self, event: tuple[int, str, tuple[int, ...], int, int | None]) -> None:
        """EVENT (thread, op, arguments, stack, address) written: a break if it matches."""
        if self.breaks.condition is not None and self.tags is not None:
            self.breaks.check(event, self.writer, self._modules, self.tags.innermost(event[0]))

    def take_break(self) -> bool:
        """Whether the stop being decided is a break (breakpoints.Recorder's)."""
        return self.breaks.take()

    def set_break(self, condition: BreakCondition | None) -> None:
        """Stop at the events of CONDITION from now on (None: no more)."""
        self.breaks.condition = condition
        self.breaks.write(self._modules)

    def _api_flags_on(self, on: bool = True) -> None:
        """Every module's memdump_api_enabled to 1 (ON) or 0, in a live process."""
        if self.api_flags and self.inferior.pid:
            set_flags(self.inferior.write_memory, self.api_flags, on)

    def _hot_path_error(self, exc: Exception) -> None:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) \
                and self.writer is not None:
            self._failed = True
            output.warn(CMD, f"writing {self.path} failed ({exc.strerror}): recording stopped; "
                             "the dump holds everything up to here")
            self.finish("stop")
            return
        self.counts["internal-errors"] += 1
        if self.counts["internal-errors"] == 1:
            output.warn(CMD, f"internal error while recording: {exc!r} "
                             "(set dbgkit debug on to raise it)")
        if settings.debug_enabled():
            raise exc

    def _resolve(self, pc: int) -> FrameInfo:
        """Symbolise one program counter, once: DumpWriter interns frames."""
        return resolve(pc, self._modules)

    # -- queries -----------------------------------------------------------------------------
    def status(self) -> dict[str, object]:
        return status_of(self)
