"""A memdump recording: the state machine from `memdump` to the end of the run, the events GDB
sends it, the dump and the process it is written from, and the pointer scan at the end.

GDB glue only. What records the events is the recording's backend, behind `Backend`: the
in-process recorder (inprocess.py, the product) or GDB's own breakpoints (bpbackend.py, the
fallback and `memdump --breakpoints`). The `memdump` command chooses one when it makes the
recording, and the in-process backend swaps itself for the breakpoints when its recorder cannot
record an image (`use`); nothing asks which one a recording has. `memdump break` is the part
`Breaks` (breaks.py), handed the inferior; what /proc tells is core.procfs's, the scan scan.py's.
"""

from __future__ import annotations

import datetime
import errno
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol

import gdb

from .. import output, settings
from ..core import builtfiles, procfs
from ..core.breakcond import BreakCondition
from ..core.dumpnames import DumpPathError, create_dump, open_dump
from ..core.dumpwriter import DumpWriter, FrameInfo
from ..core.procmaps import ModuleMap
from ..core.reach import ScanResult
from ..core.runclock import RunClock
from . import compact, ends, symbols
from .breaks import Breaks
from .checks import CMD, cannot_record, guarded
from .signals import FATAL_SIGNALS, dies_of
from .status import State, status_of
from .stopcheck import StopCheck
from .tags import set_flags

__all__ = ["Backend", "Recording", "State"]

# Progress is reported each time the event count crosses a multiple of 65,536.
_PROGRESS_MASK = 0xFFFF


class Backend(Protocol):
    """What records a recording's events, as the recording sees it. A backend is made with the
    recording it records for, and `start`ed once the process and the dump exist."""

    #: the dump's `i recorder` (docs/recorder.md)
    mode: str
    #: the allocator calls GDB follows in progress (thread id -> call); window.py waits for them
    pending: dict

    def arm(self, arm: Callable[[], None], note: str | None) -> None:
        """Run ARM (the recording's arming) with what the run needs set up around it (NOTE: the
        line that says it is armed, when not the usual one)."""

    def start(self) -> None:
        """The process and the dump exist: set up what the backend works with."""

    def start_clock(self) -> None:
        """The dump's clock samples, when GDB writes them."""

    def install_hooks(self) -> None:
        """Hook the modules loaded so far (the objfile events call it again)."""

    def recording_something(self) -> bool:
        """On a live process just attached to: whether anything records its allocator."""

    def fatal_stop(self, signal: str) -> None:
        """The program stopped at SIGNAL, which ends it when it goes on: what the dump needs
        (calls cut short, the signal) before the last scan."""

    def signal_stop(self, event: gdb.SignalEvent) -> bool:
        """A signal stop the backend handles itself (a guard page's fault): True when it did and
        the program goes on, False to treat the stop as any other."""

    def exec(self) -> None:
        """The process executed a new image: the old one's state goes."""

    def exit_call(self) -> None:
        """_exit was called: what the backend reads before the scan."""

    def scan_now(self, at_function_entry: bool) -> tuple[str, ScanResult | None, int]:
        """The pointer scan of the stopped process's live blocks: (status, result, millis)."""

    def scan(self, at_function_entry: bool) -> None:
        """The scan at the end, its outcome kept for the dump."""

    def live_blocks(self) -> dict[int, int]:
        """The blocks a leak check looks at now (address -> size)."""

    def block_ages(self) -> dict[int, float]:
        """Seconds since each live block was allocated."""

    def recorder_memory(self) -> tuple[int, int] | None:
        """[start, end) of the recorder's own memory in the process, which is not a root."""

    def calls_in_progress(self) -> list[tuple[int, str]]:
        """(thread id, operation) of the allocator calls some thread is inside of."""

    def before_detach(self) -> None:
        """`detach` comes: the calls in progress finish first."""

    def sync_dump(self) -> None:
        """Complete the dump up to this stop (memdump leaks)."""

    def before_finish(self) -> None:
        """The recording ends: what the backend still has to write, before the end record."""

    def remove_breakpoints(self) -> None:
        """Delete every breakpoint the backend made."""

    def update_status(self, status: dict[str, object]) -> None:
        """`memdump status`'s fields, with what the backend counts itself."""


class Recording:
    """One recording, from `memdump` to the program's exit, `detach` or `memdump stop`, its
    events recorded by the BACKEND made for it."""

    def __init__(self, out_path: str | None, depth: int, unwinder: str, return_sites: int,
                 backend: Callable[[Recording], Backend], scan_time_limit: int = 120) -> None:
        self.inferior = gdb.selected_inferior()
        self.out_path = out_path
        self.depth = depth
        self.unwinder_mode = unwinder
        self.return_sites = return_sites
        self.state = State.ARMED
        self.path: str | None = None
        self.fd: int | None = None
        self.pid = 0
        self.writer: DumpWriter | None = None
        #: the address of each module's memdump_api_enabled (tags.py)
        self.api_flags: set[int] = set()
        #: the modules hooked so far, by path and start
        self.scanned: set[tuple[str, int]] = set()
        #: `memdump break`: the condition and the stops it makes
        self.breaks = Breaks(self.inferior)
        #: the live blocks (address -> size) as the analyser's replay of the dump defines them
        self.live: dict[int, int] = {}
        #: the live custom blocks (memdump_api.h), apart from the malloc'd ones
        self.custom: dict[int, int] = {}
        #: the heap's blocks in use when the in-process recorder was loaded (attach.py)
        self.heap_at_load: Iterable[int] | None = None
        #: the scan at exit or at a fatal signal, once made: (status, result, millis)
        self.final_scan: tuple[str, ScanResult | None, int] | None = None
        self.scan_status: str | None = None
        self.scan_time_limit = scan_time_limit
        self.counts: Counter[str] = Counter()
        self.started = time.monotonic()
        # time the program ran while recorded, not stopped at GDB's prompt
        self.clock = RunClock(gdb.events.cont)
        #: a path this recording continues the series of (`memdump -o FILE`, then FILE-2, ...)
        self.series: str | None = None
        #: record the processes the program starts too (in-process recorder: children.c)
        self.children = False
        #: the settings' current values (settings.get): read again when the recording starts
        self.settings: Callable[[str], object] | None = None
        #: called with this recording when the program it recorded ended (not on `memdump stop`)
        self.on_program_end: Callable[[Recording], None] | None = None
        #: called with this recording when its dump opened (the run or the attach it records)
        self.on_start: Callable[[Recording], None] | None = None
        #: armed by itself after the previous run ended, not by a `memdump` command
        self.again = False
        #: the recording of the previous run, when armed by itself
        self.previous: Recording | None = None
        self.ended_reason = ""
        self.memory: procfs.ProcessMemory | None = None
        self.read: Callable[[int, int], bytes] | None = None
        self.read_some: Callable[[int, int], bytes] | None = None
        self.modules: ModuleMap | None = None
        #: writing the dump failed (the disk is full): no end record
        self.failed = False
        self._connected = False
        self.attached = False
        #: set while a recording is wound up (scripts/memdump.sh -p): the return that completes
        #: the last allocator call in progress stops the program, so that no call is cut in half
        self.stop_when_idle = False
        #: `memdump --guard`'s SPEC, which the in-process backend hands its recorder at start
        self.guard = ""
        #: the red zones checked at the stops GDB shows (`set memdump check-at-stop`)
        self.stop_check = StopCheck()
        self.backend: Backend = backend(self)
        #: the backend made for it, whatever it fell back to: the next run's (`mode`)
        self.chosen = self.backend.mode

    @property
    def mode(self) -> str:
        """The dump's `i recorder`: what records the events now."""
        return self.backend.mode

    @property
    def pending(self) -> dict:
        """The allocator calls GDB follows in progress (thread id -> call)."""
        return self.backend.pending

    def use(self, backend: Backend) -> None:
        """Record with BACKEND from now on (the in-process recorder's fallback): the old one's
        breakpoints go."""
        self.backend.remove_breakpoints()
        self.backend = backend
        self.backend.start()

    # -- life cycle --------------------------------------------------------------------------
    def arm(self, again: bool = False, note: str | None = None) -> None:
        """Open the output (to fail early), hook the events, and start at once on a live process.
        AGAIN: armed for the next run after the previous one ended. NOTE: the line that says it
        is armed, when not the usual one."""
        self.backend.arm(lambda: self._arm(again, note), note)

    def _arm(self, again: bool, note: str | None) -> None:
        self.again = again
        if self.out_path is not None:
            try:
                self.fd = open_dump(self.out_path)
            except DumpPathError as exc:
                raise gdb.GdbError(f"{CMD}: {exc}") from None
            self.path = self.out_path
        self._connect()
        ends.define_detach_hook()  # `detach` ends the recording, scanned
        # AGAIN is armed from the exited event, while the ended process still has its pid.
        if self.inferior.pid and not again:
            self.attached = True
            self.begin()
            self.backend.install_hooks()
            if not self.backend.recording_something():
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

    def begin(self) -> None:
        """The process exists: open the dump, write its header, set up memory and the backend."""
        self.pid = self.inferior.pid
        if self.settings is not None:
            self.depth = int(self.settings("depth"))
            self.unwinder_mode = str(self.settings("unwinder"))
            self.return_sites = int(self.settings("return-sites"))
            self.scan_time_limit = int(self.settings("scan-time-limit"))
        program = self.inferior.progspace.filename or procfs.exe_of(self.pid)
        if self.fd is None:
            try:
                self.fd, self.path = create_dump(program, self.pid, self.series)
            except DumpPathError as exc:
                raise gdb.GdbError(f"{CMD}: {exc}") from None
        self.memory = procfs.ProcessMemory(self.pid)
        self.read = self.memory.read
        self.read_some = self.memory.read_some
        self.modules = ModuleMap(self.pid, self.read)
        self.writer = DumpWriter(self.fd, self.resolve)
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
        self.backend.start_clock()
        if self.attached:
            self.clock.stopped()  # stopped at the prompt: it runs again at the next continue
        else:
            self.clock.running(self.started)  # GDB is starting it
        output.info(CMD, f"recording process {self.pid} to {self.path}")
        if self.on_start is not None:
            self.on_start(self)
        self.api_flags_on()
        self.backend.start()

    def restart(self) -> None:
        """The dump starts again, empty (the in-process recorder's fallback on attach)."""
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        self.memory.close()
        self.begin()
        self.backend.install_hooks()

    def finish(self, reason: str, detail: str = "-") -> None:
        """Write the end record, remove every breakpoint, close the dump."""
        if self.state == State.ENDED:
            return
        self.backend.before_finish()
        if self.writer is not None and not self.failed:
            try:
                self.writer.end(reason, detail)
            except OSError as exc:
                output.warn(CMD, f"could not finish {self.path}: {exc.strerror}")
        self.clock.close()
        self.api_flags_on(False)
        recorded = self.writer is not None
        self.state = State.ENDED
        self.ended_reason = reason if detail == "-" else f"{reason} {detail}"
        self._disconnect()
        self.backend.remove_breakpoints()
        if self.fd is not None:
            os.close(self.fd)
        self.fd = None
        if self.memory is not None:
            self.memory.close()
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
        """`detach` comes (ends.py): the calls in progress finish first."""
        self.backend.before_detach()

    def sync_dump(self) -> None:
        """Complete the dump up to this stop (memdump leaks)."""
        self.backend.sync_dump()

    def running_time(self) -> float:
        """Seconds the program has run while recorded (not stopped at GDB's prompt)."""
        return self.clock.seconds()

    # -- GDB events --------------------------------------------------------------------------
    def _handlers(self) -> tuple[tuple[object, object], ...]:
        """The GDB event registries this recording listens to, with its handler for each."""
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
                self.begin()
            except gdb.GdbError as exc:
                self.finish("stop")
                cannot_record(str(exc))
                return
        self.modules.invalidate()
        self.backend.install_hooks()

    def _on_clear_objfiles(self, event: gdb.ClearObjFilesEvent) -> None:
        if event.progspace == self.inferior.progspace:
            self._guard("clear_objfiles", self._clear_objfiles)

    def _clear_objfiles(self) -> None:
        # With the process alive this is an exec: the image is replaced, every block with it. The
        # address breakpoints would be re-inserted into the new image at meaningless places: drop
        # them now; the new C library's objfile event hooks it again.
        if self.state != State.RECORDING or not self.inferior.pid:
            return
        self.backend.exec()
        self.backend.remove_breakpoints()
        self.scanned.clear()
        self.live.clear()
        self.writer.process("exec", self.inferior.progspace.filename or "?")
        if self.mode == "breakpoints":  # the new image's recorder (in-process: once configured)
            self.writer.info("recorder", self.mode)
        self.memory.reopen()
        self.modules.invalidate()

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
            self.clock.stopped()
        if self.state != State.RECORDING:
            return
        ours = self.inferior.pid == self.pid
        if ours and isinstance(event, gdb.SignalEvent) and self.backend.signal_stop(event):
            return  # the backend's own stop: a guard page's fault, reported, the program goes on
        if (ours and not self.stop_when_idle
                and gdb.selected_inferior().num == self.inferior.num):
            self.stop_check.at_stop()  # a stop the user sees: the red zones checked
        if not isinstance(event, gdb.SignalEvent):
            return
        if event.stop_signal in FATAL_SIGNALS or (ours and dies_of(self.pid, event.stop_signal)):
            self.backend.fatal_stop(event.stop_signal)
            # A signal the program does not catch ends it when it goes on: this stop is the last
            # moment its memory can be scanned (valgrind reports leak kinds for such deaths too).
            # One it catches may be survived, and the scan waits for _exit.
            if ours and not procfs.caught(self.pid, event.stop_signal):
                self.scan_once(at_function_entry=False)

    def _on_gdb_exiting(self, event: object) -> None:
        self._guard("gdb_exiting", self._gdb_exiting)

    def _gdb_exiting(self) -> None:
        if self.state == State.RECORDING:
            self.finish("gdb-exit")
        elif self.state == State.ARMED:
            self.finish("stop")

    # -- the pointer scan at exit ------------------------------------------------------------
    def on_exit_call(self) -> None:
        """_exit was called: atexit handlers and destructors have run, memory is intact. Scan
        it for pointers to the live blocks (once) and write the kind of each block."""
        try:
            self.backend.exit_call()
            if gdb.selected_inferior().pid != self.pid:
                return  # a followed child, not the process being recorded
            self.scan_once(at_function_entry=True)
        except Exception as exc:  # noqa: BLE001
            self.hot_path_error(exc)

    def scan_once(self, at_function_entry: bool) -> None:
        """The pointer scan, unless it already ran, is turned off, or nothing is recorded; its
        kinds go into the dump (ends.py: at `memdump stop` and `detach` too)."""
        if self.state != State.RECORDING or self.scan_status is not None or self.writer is None:
            return
        if self.scan_time_limit == 0:
            return
        self.backend.scan(at_function_entry)

    def scan_now(self, at_function_entry: bool) -> tuple[str, ScanResult | None, int]:
        """The pointer scan of the stopped process's live blocks: (status, result, millis).
        AT_FUNCTION_ENTRY: the selected thread stands on a function's first instruction."""
        return self.backend.scan_now(at_function_entry)

    def live_blocks(self) -> dict[int, int]:
        """The blocks a leak check looks at now (address -> size)."""
        return self.backend.live_blocks()

    def block_ages(self) -> dict[int, float]:
        """Seconds since each live block was allocated."""
        return self.backend.block_ages()

    def recorder_memory(self) -> tuple[int, int] | None:
        """[start, end) of the in-process recorder's own memory, which is not a root."""
        return self.backend.recorder_memory()

    def calls_in_progress(self) -> list[tuple[int, str]]:
        """(thread id, operation) of the allocator calls some thread is inside of."""
        return self.backend.calls_in_progress()

    def progress(self) -> None:
        """Every 65,536 events, when someone watches a terminal: how far and how fast."""
        if self.writer.events & _PROGRESS_MASK or not os.isatty(2):  # GDB's sys.stderr is its
            return                                                   # own; the descriptor tells
        elapsed = max(self.running_time(), 1e-3)
        events = self.writer.events
        output.progress(CMD, f"{events:,} events in {elapsed:.0f} s ({events / elapsed:,.0f}/s), "
                             f"dump {self.writer.bytes_written / 2**20:,.1f} MiB")

    def set_break(self, condition: BreakCondition | None) -> None:
        """Stop at the events of CONDITION from now on (None: no more)."""
        self.breaks.condition = condition
        self.breaks.write(self.modules)

    def api_flags_on(self, on: bool = True) -> None:
        """Every module's memdump_api_enabled to 1 (ON) or 0, in a live process."""
        if self.api_flags and self.inferior.pid:
            set_flags(self.inferior.write_memory, self.api_flags, on)

    def hot_path_error(self, exc: Exception) -> None:
        """An error while the program is stopped for the recording: a full disk stops it."""
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) \
                and self.writer is not None:
            self.failed = True
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

    def resolve(self, pc: int) -> FrameInfo:
        """Symbolise one program counter, once: DumpWriter interns frames."""
        return symbols.resolve(pc, self.modules)

    # -- queries -----------------------------------------------------------------------------
    def status(self) -> dict[str, object]:
        status = status_of(self)
        self.backend.update_status(status)
        return status
