"""A memdump recording: breakpoints on the allocator's entry points and return sites -> the dump.

GDB glue only. Hot path budget: an empty Python breakpoint stop costs ~80 us on the reference
machine, touching a gdb.Frame adds ~27 us, so stop() reads registers with PTRACE_GETREGS (GDB's
Python runs in the tracer thread), memory with pread(2) on /proc/PID/mem and walks stacks with
dbgkit.core.unwind.
"""

from __future__ import annotations

import datetime
import enum
import errno
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import gdb

from . import output
from .batchmode import batch_mode
from .core import procfs, ptrace, reach
from .core.dumpwriter import OPERATIONS, DumpWriter, FrameInfo, InlinedInto, track
from .core.elf import ElfError, ElfFile
from .core.procmaps import ModuleMap
from .core.unwind import Unwinder
from .memdump_breakpoints import EntryBreakpoint, ExitBreakpoint, ReturnBreakpoint, ReturnSites

CMD = "memdump"

# Unwinder outcomes where GDB's own unwinder may know better (its DWARF reader, prologue analysis).
_ASK_GDB = frozenset({"unsupported", "bad-cfa", "no-elf"})

# Progress is reported each time the event count crosses a multiple of 65,536.
_PROGRESS_MASK = 0xFFFF

# Below this, a "program counter" is a null or small integer read from a corrupt or foreign frame.
_MIN_PC = 0x1000

# The process's last call: glibc's exit() runs the atexit handlers and static destructors, then
# _exit(); _Exit is the same function (an alias) in glibc 2.36, hooked too where it is not.
EXIT_FUNCTIONS = ("_exit", "_Exit")

# Signals after which the program cannot go on by itself; the dump notes them before the end record.
FATAL_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGSYS", "SIGTRAP"})


@dataclass
class Pending:
    """An allocator call of one thread between its entry and its return."""

    op: str
    sp: int
    ret: int
    stack: int
    args: tuple[int, ...]


class State(enum.Enum):
    """Where a recording is: armed (no process yet), recording, ended (for good)."""

    ARMED = "armed"
    RECORDING = "recording"
    ENDED = "ended"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


class Session:
    """One recording, from `memdump` to the program's exit, `detach` or `memdump stop`."""

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
        #: the live blocks (address -> size) as the analyser's replay of the dump defines them
        self.live: dict[int, int] = {}
        self.scan_status: str | None = None
        self.scan_time_limit = scan_time_limit
        self._scanned: set[tuple[str, int]] = set()
        self.counts: Counter[str] = Counter()
        self.started = time.monotonic()
        # Time the program ran while recorded: GDB's cont events to its stop events (the time
        # it sits stopped at the prompt is not the program's). None while it is stopped.
        self.running_s = 0.0
        self._running_since: float | None = None
        self._watching_cont = False
        #: a path this recording continues the series of (`memdump -o FILE`, then FILE-2, ...)
        self.series: str | None = None
        #: the settings' current values (settings.get): read again when the recording starts
        self.settings: Callable[[str], object] | None = None
        #: called with this session when the program it recorded ended (not on `memdump stop`)
        self.on_program_end: Callable[[Session], None] | None = None
        #: armed by itself after the previous run ended, not by a `memdump` command
        self.again = False
        #: the recording of the previous run, when armed by itself
        self.previous: Session | None = None
        self.ended_reason = ""
        self._memory: procfs.ProcessMemory | None = None
        self._read: Callable[[int, int], bytes] | None = None
        self._read_some: Callable[[int, int], bytes] | None = None
        self._modules: ModuleMap | None = None
        self._unwinder: Unwinder | None = None
        self._failed = False
        self._connected = False
        self.attached = False
        #: set while a recording is wound up (scripts/memdump.sh -p): the return that completes
        #: the last allocator call in progress stops the program, so that no call is cut in half
        self.stop_when_idle = False

    # -- life cycle --------------------------------------------------------------------------
    def arm(self, again: bool = False) -> None:
        """Open the output (to fail early), hook the events, and start at once on a live process.
        AGAIN: armed for the next run after the previous one ended."""
        self.again = again
        if self.out_path is not None:
            self.fd = self._open(self.out_path, exclusive=False)
            self.path = self.out_path
        self._connect()
        # AGAIN is armed from the exited event, while the ended process still has its pid.
        if self.inferior.pid and not again:
            self.attached = True
            self._begin()
            self._install_hooks()
            if not self.hooks:
                self.finish("stop")
                raise gdb.GdbError(
                    f"{CMD}: process {self.pid} has no allocator to hook: no loaded module exports "
                    "malloc (statically linked?)"
                )
        elif again:
            output.info(CMD, "armed again: the next run is recorded into a new dump "
                             "(memdump stop disarms)")
        else:
            output.info(CMD, "armed: recording starts when the program runs")

    def _open(self, path: str, exclusive: bool) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
        try:
            return os.open(path, flags, 0o644)
        except OSError as exc:
            if exclusive and exc.errno == errno.EEXIST:
                raise
            raise gdb.GdbError(f"{CMD}: cannot write the dump to {path}: {exc.strerror}") from None

    def _default_path(self, program: str) -> str:
        base = f"{os.path.basename(program) or 'program'}.{self.pid}"
        ext = ".memdump"
        first = 1
        if self.series is not None:
            # `memdump -o DIR/NAME.memdump` recorded an earlier run: DIR/NAME-2.memdump, -3, ...
            base, ext = os.path.splitext(self.series) if self.series.endswith(".memdump") \
                else (self.series, "")
            first = 2
        for n in range(first, 1000):
            path = f"{base}{ext}" if n == 1 else f"{base}-{n}{ext}"
            try:
                self.fd = self._open(path, exclusive=True)
                return path
            except FileExistsError:
                continue
        raise gdb.GdbError(f"{CMD}: no free dump name {base}*{ext} in {os.getcwd()}")

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
            self.path = self._default_path(program)
        self._memory = procfs.ProcessMemory(self.pid)
        # bound once: the hot path calls them without another attribute lookup
        self._read = self._memory.read
        self._read_some = self._memory.read_some
        self._modules = ModuleMap(self.pid, self._read)
        self._unwinder = Unwinder(self._read, self._modules)
        self.writer = DumpWriter(self.fd, self._resolve)
        start = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for key, value in (
            ("program", program),
            ("pid", self.pid),
            ("arch", "x86_64"),
            ("depth", self.depth),
            ("attached", int(self.attached)),
            ("start", start),
            ("gdb", gdb.VERSION.split()[0]),
        ):
            self.writer.info(key, value)
        self.state = State.RECORDING
        self.started = time.monotonic()
        if self.attached:
            self._watch_cont()  # stopped at the prompt: it runs again at the next continue
        else:
            self._running_since = self.started  # GDB is starting it
        output.info(CMD, f"recording process {self.pid} to {self.path}")

    def finish(self, reason: str, detail: str = "-") -> None:
        """Write the end record, remove every breakpoint, close the dump."""
        if self.state == State.ENDED:
            return
        if self.writer is not None and not self._failed:
            try:
                self.writer.end(reason, detail)
            except OSError as exc:
                output.warn(CMD, f"could not finish {self.path}: {exc.strerror}")
        self._stopped()
        self._unwatch_cont()
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
                f"{self.writer.events:,} events recorded in {self.path} ({self.ended_reason}); "
                f"report: scripts/memdump-analyze {self.path}",
            )
        if recorded and reason not in ("stop", "gdb-exit") and self.on_program_end is not None:
            self.on_program_end(self)

    # -- running time ------------------------------------------------------------------------
    def running_time(self) -> float:
        """Seconds the program has run while recorded (not stopped at GDB's prompt)."""
        if self._running_since is None:
            return self.running_s
        return self.running_s + time.monotonic() - self._running_since

    def _stopped(self) -> None:
        if self._running_since is not None:
            self.running_s += time.monotonic() - self._running_since
            self._running_since = None

    def _on_cont(self, event: object) -> None:
        # Connected only while the program is stopped: never on the hot path, where each
        # breakpoint that does not stop resumes the program.
        if self._running_since is None:
            self._running_since = time.monotonic()
        self._unwatch_cont()

    def _watch_cont(self) -> None:
        if not self._watching_cont:
            gdb.events.cont.connect(self._on_cont)
            self._watching_cont = True

    def _unwatch_cont(self) -> None:
        if self._watching_cont:
            gdb.events.cont.disconnect(self._on_cont)
            self._watching_cont = False

    def _remove_breakpoints(self) -> None:
        for bp in (*self.hooks.values(), *self.exit_hooks.values()):
            if bp.is_valid():
                bp.delete()
        self.hooks.clear()
        self.exit_hooks.clear()
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
        """Run an event handler; an unexpected error becomes one warning instead of a traceback."""
        try:
            fn(*args)
        except gdb.GdbError as exc:
            output.warn(CMD, str(exc))
        except Exception as exc:  # noqa: BLE001 - never let a handler's bug reach GDB as a traceback
            self.counts["internal-errors"] += 1
            if self.counts["internal-errors"] == 1:
                output.warn(CMD, f"internal error in {what}: {exc!r} "
                                 "(set MEMDUMP_DEBUG=1 to raise)")
            if os.environ.get("MEMDUMP_DEBUG"):
                raise

    def _on_new_objfile(self, event: gdb.NewObjFileEvent) -> None:
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
        self._unwinder.clear_cache()
        self._install_hooks()

    def _on_clear_objfiles(self, event: gdb.ClearObjFilesEvent) -> None:
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
        self._memory.reopen()
        self._modules.invalidate()
        self._unwinder.clear_cache()

    def _on_exited(self, event: gdb.ExitedEvent) -> None:
        self._guard("exited", self._exited, event)

    def _exited(self, event: gdb.ExitedEvent) -> None:
        if self.state == State.ARMED:
            return
        code = getattr(event, "exit_code", None)
        if code is not None:
            self.finish("exit", str(code))
            return
        sig = gdb.convenience_variable("_exitsignal")
        if sig is not None:
            self.finish("killed", _signal_name(int(sig)))
        else:
            self.finish("detach")

    def _on_stop(self, event: gdb.StopEvent) -> None:
        self._guard("stop", self._stop_event, event)

    def _stop_event(self, event: gdb.StopEvent) -> None:
        if self.state == State.RECORDING:
            self._stopped()
            self._watch_cont()
        if self.state != State.RECORDING or not isinstance(event, gdb.SignalEvent):
            return
        if event.stop_signal in FATAL_SIGNALS:
            self._write_interrupted()
            self.writer.process("signal", event.stop_signal)
            # A signal the program does not catch ends it when it goes on: this stop is the last
            # moment its memory can be scanned (valgrind reports leak kinds for such deaths too).
            # One it catches may be survived, and the scan waits for _exit.
            if self.inferior.pid == self.pid and not procfs.caught(self.pid, event.stop_signal):
                self._scan_once(at_function_entry=False)

    def _write_interrupted(self) -> None:
        """Allocator calls a fatal signal caught inside (glibc aborts in realloc on a bad pointer)
        are written with RESULT 0x0: they never return, and the call is the evidence."""
        for tid, pend in sorted(self.pending.items()):
            self.sites.release(pend.ret)
            self.writer.event(tid, pend.op, pend.stack, 0, _format_args(pend.op, pend.args, 0))
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
        """Break on every allocator entry point exported by a module not scanned yet."""
        self._modules.refresh()
        for module in self._modules.modules():
            key = (module.path, module.start)
            if key in self._scanned or module.elf is None:
                continue
            self._scanned.add(key)
            try:
                symbols = module.elf.dynamic_symbols()
            except ElfError as exc:
                output.warn(CMD, f"cannot read the symbols of {module.path}: {exc}")
                continue
            for op in OPERATIONS:
                value = symbols.get(op)
                if not value:
                    continue
                address = module.bias + value
                if address not in self.hooks:
                    self.hooks[address] = EntryBreakpoint(self, address, op)
            for name in EXIT_FUNCTIONS:
                value = symbols.get(name)
                if value and module.bias + value not in self.exit_hooks:
                    address = module.bias + value
                    self.exit_hooks[address] = ExitBreakpoint(self, address)

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
            if pend is not None:
                if sp <= pend.sp:
                    # The allocator calling itself (one operation), by call (deeper stack) or by
                    # tail call at the same depth: glibc's realloc(NULL, n) jumps to malloc.
                    self.counts["nested"] += 1
                    return
                self.pending.pop(tid)  # stale: the earlier call never came back (longjmp)
                self.sites.release(pend.ret)
            op = bp.op
            stack = self._stack(bp.address, regs)
            if op == "free":
                self.live.pop(regs.rdi, None)
                self.writer.event(tid, "free", stack, None, (f"{regs.rdi:#x}",))
                if not self.writer.events & _PROGRESS_MASK:
                    self._progress()
                return
            ret = int.from_bytes(self._read(sp, 8), "little")
            self.pending[tid] = Pending(op, sp, ret, stack, (regs.rdi, regs.rsi, regs.rdx))
            self.sites.acquire(ret)
        except Exception as exc:  # noqa: BLE001
            self._hot_path_error(exc)

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
            op = pend.op
            result = regs.rax
            rc = 0
            if op == "posix_memalign":  # (void **memptr, size_t alignment, size_t size) -> int
                rc = result & 0xFFFFFFFF
                result = int.from_bytes(self._read(pend.args[0], 8), "little") if rc == 0 else 0
            track(self.live, op, pend.args, result, rc)
            self.writer.event(tid, op, pend.stack, result, _format_args(op, pend.args, rc))
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
            self._scan_once(at_function_entry=True)
        except Exception as exc:  # noqa: BLE001
            self._hot_path_error(exc)

    def _scan_once(self, at_function_entry: bool) -> None:
        """The pointer scan, unless it already ran, is turned off, or nothing is recorded."""
        if self.state != State.RECORDING or self.scan_status is not None or self.writer is None:
            return
        if self.scan_time_limit == 0:
            return
        self._scan(at_function_entry)

    def _scan(self, at_function_entry: bool) -> None:
        """AT_FUNCTION_ENTRY: the selected thread stands on a function's first instruction."""
        began = time.monotonic()
        threads: list[reach.Thread] = []
        unreadable = []
        # The thread that called _exit stands on its first instruction: below its stack pointer
        # lies only garbage of calls that have returned (exit's handlers), not a red zone.
        current = gdb.selected_thread()
        exiting = current.ptid[1] if current is not None and at_function_entry else 0
        for thread in self.inferior.threads():
            tid = thread.ptid[1]
            regs = ptrace.get_regs(tid)
            if regs is not None:
                threads.append(reach.Thread(tid, regs.rsp, tuple(
                    getattr(regs, name) for name in _GENERAL_REGISTERS),
                    red_zone=0 if tid == exiting else reach.RED_ZONE))
                continue
            # GDB runs a native target in non-stop mode under the hood: while a breakpoint's
            # stop() runs, the other threads are not stopped. One blocked in a system call
            # stays put; the kernel tells its stack pointer and argument registers.
            blocked = procfs.blocked_in_syscall(self.pid, tid)
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
            mappings = procfs.read_maps(self.pid)
            tty = os.isatty(2)

            def progress(nbytes: int, pending: int) -> None:
                if tty and time.monotonic() - began > 2:
                    output.progress(CMD, f"pointer scan: {nbytes / 2**20:,.0f} MiB scanned, "
                                         f"{pending:,} blocks to go")

            try:
                result = reach.scan(self._read_some, mappings, self.live, threads,
                                    deadline=began + self.scan_time_limit, progress=progress)
            except reach.ScanTimeout:
                status = "timeout"
                output.warn(CMD, f"pointer scan stopped after {self.scan_time_limit} s "
                                 "(set memdump scan-time-limit): leak kinds unknown")
        self.scan_status = status
        millis = int((time.monotonic() - began) * 1000)
        if result is None:
            self.writer.scan(status, 0, 0, millis)
            return
        self.writer.scan(status, result.root_bytes, result.block_bytes, millis, result.records())
        self.counts["scan-ms"] = millis

    def _progress(self) -> None:
        """Every 65,536 events, when someone watches a terminal: how far and how fast."""
        if not os.isatty(2):  # GDB's sys.stderr is its own object; the descriptor tells
            return
        elapsed = max(self.running_time(), 1e-3)
        events = self.writer.events
        output.progress(CMD, f"{events:,} events in {elapsed:.0f} s ({events / elapsed:,.0f}/s), "
                             f"dump {self.writer.bytes_written / 2**20:,.1f} MiB")

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
                             "(set MEMDUMP_DEBUG=1 to raise)")
        if os.environ.get("MEMDUMP_DEBUG"):
            raise exc

    def _stack(self, pc: int, regs: ptrace.Regs) -> int:
        depth = self.depth
        if depth == 0:
            return 0
        if self.unwinder_mode == "auto":
            pcs, complete = self._unwinder.backtrace(pc, regs.rsp, regs.rbp, depth)
            if complete or self._unwinder.last_status not in _ASK_GDB:
                # A walk that ran out of CFI (ld.so's hand-written _dl_start_user), memory or
                # mapped code is right as far as it goes; GDB's heuristics beyond it make up frames.
                if not complete:
                    self.counts["partial-stacks"] += 1
                return self.writer.stack(tuple(pcs))
            self.counts["gdb-unwinds"] += 1
        return self.writer.stack(_gdb_backtrace(depth))

    def _resolve(self, pc: int) -> FrameInfo:
        """Symbolise one program counter, once: it is a return address, so look up pc - 1.

        Code inlined there gives several frames, as GDB's `bt` and valgrind show them: the
        innermost function with the line of pc - 1, then each function it was inlined into with
        the line of the inlined call (GDB gives a DW_TAG_inlined_subroutine block's function
        symbol the call's DW_AT_call_file and DW_AT_call_line as its symtab and line).
        """
        module = self._modules.find(pc)
        path = module.path if module else None
        offset = pc - module.bias if module else pc
        look = pc - 1
        function = file = None
        line = 0
        try:
            sal = gdb.find_pc_line(look)
            if sal.symtab is not None and sal.line:
                file = sal.symtab.fullname()
                line = sal.line
        except (RuntimeError, gdb.error):
            pass
        symbols = []
        try:
            block = gdb.block_for_pc(look)
            while block is not None and not block.is_static:
                if block.function is not None:
                    symbols.append(block.function)
                block = block.superblock
        except (RuntimeError, gdb.error):
            pass
        inlined_into = []
        if symbols:
            function = symbols[0].print_name
            # the block of symbols[i] is the inlined call of it, inside symbols[i + 1]
            for inner, outer in zip(symbols, symbols[1:], strict=False):
                name = outer.print_name
                if name.startswith("__GI_"):
                    name = name[5:]
                inlined_into.append(InlinedInto(name, *_call_site(inner)))
        if function is None:
            function = _minimal_symbol(look)
            if function is not None and function.startswith("_Z"):
                function = _demangle(function)
        if function is not None and function.startswith("__GI_"):
            # glibc's hidden internal alias (include/libc-symbols.h): name the public function.
            function = function[5:]
        return FrameInfo(path, offset, function, file, line, tuple(inlined_into))

    # -- queries -----------------------------------------------------------------------------
    def status(self) -> dict[str, object]:
        elapsed = time.monotonic() - self.started
        running = self.running_time()
        events = self.writer.events if self.writer else 0
        return {
            "state": self.state.value,  # `memdump status --json` prints the name
            "path": self.path,
            "pid": self.pid,
            "events": events,
            "elapsed_s": round(elapsed, 3),
            "running_s": round(running, 3),
            "events_per_s": round(events / running, 1) if running > 0 else 0.0,
            "pending_calls": len(self.pending),
            "hooks": len(self.hooks),
            "live_blocks": len(self.live),
            "scan": self.scan_status,
            "return_sites": len(self.sites),
            "dump_bytes": self.writer.bytes_written if self.writer else 0,
            "interned": self.writer.counts if self.writer else {},
            "counts": dict(self.counts),
            "ended": self.ended_reason or None,
        }


# user_regs_struct fields valgrind scans as general registers (VG_(apply_to_GP_regs), amd64)
_GENERAL_REGISTERS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10",
                      "r11", "r12", "r13", "r14", "r15")


def _format_args(op: str, args: tuple[int, ...], rc: int) -> tuple[str, ...]:
    """An event's ARGS as docs/dump-format.md lists them for OP (pointers hex, sizes decimal)."""
    a0, a1, a2 = args
    if op == "malloc" or op == "valloc" or op == "pvalloc":
        return (str(a0),)
    if op == "calloc" or op == "aligned_alloc" or op == "memalign":
        return (str(a0), str(a1))
    if op == "realloc":
        return (f"{a0:#x}", str(a1))
    if op == "reallocarray":
        return (f"{a0:#x}", str(a1), str(a2))
    return (str(a1), str(a2), str(rc))  # posix_memalign: ALIGN SIZE RC


def _gdb_backtrace(depth: int) -> tuple[int, ...]:
    """Return addresses of the current function's callers from GDB's own unwinder (slow, exact)."""
    pcs: list[int] = []
    frame = gdb.newest_frame().older()
    while frame is not None and len(pcs) < depth:
        if frame.type() != gdb.INLINE_FRAME:
            pc = frame.pc()
            if pc < _MIN_PC:
                break
            pcs.append(pc)
        frame = frame.older()
    return tuple(pcs)


def _call_site(inlined: gdb.Symbol) -> tuple[str | None, int]:
    """(file, line) of the call an inlined function's block stands for (its DW_AT_call_file and
    DW_AT_call_line, which GDB gives the block's function symbol); (None, 0) when unknown."""
    try:
        symtab = inlined.symtab
        line = inlined.line
        if symtab is None or not line:
            return None, 0
        return symtab.fullname(), line
    except (RuntimeError, gdb.error):
        return None, 0


def _minimal_symbol(pc: int) -> str | None:
    """Name from the ELF symbol tables (`0x... <name+off>`), for code without debug information."""
    try:
        text = gdb.format_address(pc)
    except (RuntimeError, gdb.error):
        return None
    start = text.find(" <")
    if start < 0 or not text.endswith(">"):
        return None
    name = text[start + 2 : -1]
    plus = name.rfind("+")
    if plus > 0 and name[plus + 1 :].isdigit():
        name = name[:plus]
    return name or None


def _demangle(name: str) -> str:
    """A C++ symbol's name as GDB prints it for code with debug information; NAME if GDB cannot.
    (Minimal symbols come mangled: `print asm-demangle` is off by default, and it is the user's.)"""
    try:
        text = gdb.execute(f"demangle -l c++ -- {name}", to_string=True).strip()
    except gdb.error:
        return name
    return text if text and "\n" not in text else name


def cannot_record(message: str, raised: bool = False) -> None:
    """MESSAGE says why memdump cannot record; RAISED: a command raises it next (GDB prints it).

    In batch mode (gdb -batch) GDB then exits with status 1 before the program runs (a process
    GDB attached to is detached, one it started is killed): going on would run the program
    unrecorded and exit 0, which a script or a CI job takes for success. Interactively it stays
    an error message and GDB goes on."""
    if not batch_mode():
        if not raised:
            gdb.write(f"{message}\n", gdb.STDERR)
        return
    gdb.write(f"{message}\n", gdb.STDERR)
    gdb.write(f"{CMD}: nothing is recorded: GDB exits with status 1 (batch mode)\n", gdb.STDERR)
    gdb.flush()
    gdb.execute("set confirm off")  # no "A debugging session is active" when a process is there
    gdb.execute("quit 1")


def check_program(path: str) -> None:
    """Refuse, before running it, a program whose allocator cannot be hooked."""
    try:
        elf = ElfFile.open(path)
    except ElfError as exc:
        raise gdb.GdbError(f"{CMD}: {path}: {exc}") from None
    except OSError as exc:
        raise gdb.GdbError(f"{CMD}: cannot read {path}: {exc.strerror}") from None
    if not elf.is_dynamic:
        raise gdb.GdbError(
            f"{CMD}: {path} is statically linked: its allocator has no dynamic symbols to hook "
            "(link it dynamically to record it)"
        )
    if elf.machine != "x86_64":
        raise gdb.GdbError(f"{CMD}: {path} is {elf.machine}; memdump records x86-64 programs only")
