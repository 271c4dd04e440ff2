"""The in-process backend of a recording (docs/recorder.md): GDB preloads libmemdump_recorder.so
into the program, configures it at its first call, reads its state at stops, scans at exit, and
appends what only GDB knows (symbols, the scan, the end) when the recorder is quiet. An image the
recorder cannot be loaded into (attach refused, an exec'd image without it: a static program, a
raw execve system call) is recorded by the breakpoint backend, which it hands the recording to.

GDB glue only: the control block, the live-block table, the dump's tail are core.recorder's."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import gdb
from memdump_analyzer.dumpformat import NO_RESULT, checked_blocks

from .. import lock_counts, output
from ..core import procfs, ptrace
from ..core.elf import STT_OBJECT
from ..core.locktable import LockCounts
from ..core.reach import ScanResult
from ..core.recorder import (
    DISABLED,
    LIBRARY,
    Control,
    InFlight,
    TailState,
    data_end,
    frame_pcs,
    in_flight,
    live_arrays,
    live_blocks,
    read_tail,
)
from . import accessfault, attach
from .bpbackend import BreakpointBackend
from .breakpoints import EntryBreakpoint, ExitBreakpoint, format_call_args, install_hooks
from .breaks import BREAK_AT, BREAK_FUNCTION, BreakBreakpoint
from .checks import CMD
from .lazydebug import DebugDeferral
from .preload import Preload
from .scan import pointer_scan
from .status import State
from .symbols import from_debug_files

if TYPE_CHECKING:
    from .recording import Recording


class ConfigureBreakpoint(gdb.Breakpoint):
    """Internal breakpoint on memdump_recorder_configure: the recorder asks for its settings."""

    def __init__(self, backend: InProcessBackend, address: int) -> None:
        super().__init__(f"*{address:#x}", gdb.BP_BREAKPOINT, internal=True)
        self.backend = backend

    def stop(self) -> bool:
        self.backend.on_configure()
        return False


class UnloadingBreakpoint(gdb.Breakpoint):
    """Internal breakpoint on memdump_recorder_unloading: a module is about to be unloaded."""

    def __init__(self, backend: InProcessBackend, address: int) -> None:
        super().__init__(f"*{address:#x}", gdb.BP_BREAKPOINT, internal=True)
        self.backend = backend

    def stop(self) -> bool:
        self.backend.on_unloading()
        return False




class InProcessBackend:
    """The in-process recorder records RECORDING's events; LIBRARY is its build."""

    mode = "in-process"

    def __init__(self, recording: Recording, library: str) -> None:
        self.rec = recording
        self.library = library
        recording.breaks.library = library  # its break stops in the recorder's library
        #: none: the recorder follows the calls in progress itself
        self.pending: dict = {}
        self.control: Control | None = None
        self._preload = Preload(library)
        self._debug = DebugDeferral()
        self._hooks: dict[int, EntryBreakpoint] = {}  # none: the recorder hooks the allocator
        self._exit_hooks: dict[int, ExitBreakpoint] = {}
        self._configure_hooks: dict[int, gdb.Breakpoint] = {}
        #: frame id -> pc of the recorder's frames, and their symbols once resolved
        self._frames: dict[int, int] = {}
        self._symbols: dict[int, object] = {}
        self._written_symbols: set[int] = set()
        #: what GDB writes once the recorder is quiet
        self._interrupted: list[InFlight] = []
        self._signal: str | None = None
        self._scan_record: tuple | None = None
        self._clock_start = 0  # the recorder's (control.h), CLOCK_MONOTONIC milliseconds
        self._exit_clock: tuple[int, int] | None = None
        self._lock_counts: list[LockCounts] = []   # (2.3) `set memdump locks on`'s, at _exit
        self._tail = TailState()
        self._known_end = 0
        self._attach_tried = False
        self._live_count: int | None = None
        #: exec'd images so far; the recorder of the newest is not known yet (docs/recorder.md)
        self._execs = 0
        self._awaiting_recorder = False
        #: frame ids below this one were read from the recorder's frame table
        self._frames_read = 1

    # -- launch ------------------------------------------------------------------------------
    def arm(self, arm: Callable[[], None], note: str | None) -> None:
        """The recorder goes into LD_PRELOAD while the recording arms (a run GDB starts)."""
        rec = self.rec
        self._preload.set()
        try:
            arm()
        except gdb.GdbError:
            self._preload.restore()
            raise
        if rec.state == State.ARMED and not rec.again and not rec.attached:
            self._debug.start(rec.guard)
        if rec.state == State.ARMED and not rec.again and not rec.attached and note is None:
            output.info(CMD, f"in-process recorder: {self.library} is preloaded into the program "
                             "(memdump --breakpoints records without loading anything)")

    def start(self) -> None:
        self._preload.restore()
        self._known_end = self.rec.writer.bytes_written
        self._tail = TailState(seq=self.rec.writer.seq)

    def start_clock(self) -> None:
        """The recorder writes the samples; GDB adds one at exit."""

    def install_hooks(self) -> None:
        rec = self.rec
        install_hooks(self, rec.modules, rec.scanned, self._hooks, self._exit_hooks, ops=(),
                      api=False, flags=rec.api_flags)
        if rec.state == State.RECORDING:
            rec.api_flags_on()
        for module in rec.modules.modules():
            if os.path.basename(module.path) != LIBRARY or module.elf is None:
                continue
            symbols = module.elf.dynamic_symbols()
            for name, kind, target in (("memdump_recorder_configure", ConfigureBreakpoint, self),
                                       ("memdump_recorder_unloading", UnloadingBreakpoint, self),
                                       (BREAK_FUNCTION, BreakBreakpoint, rec.breaks)):
                value = symbols.get(name)
                if value and module.bias + value not in self._configure_hooks:
                    address = module.bias + value
                    self._configure_hooks[address] = kind(target, address)
            if not rec.breaks.recorder_at:
                found = module.elf.symtab_functions(frozenset({BREAK_AT}), (STT_OBJECT,))
                at = found.get(BREAK_AT)
                rec.breaks.recorder_at = module.bias + at if at else 0
        if self._awaiting_recorder and self._image_without_recorder():
            return
        wanted = rec.breaks.condition
        if self.control is not None and wanted is not None and wanted.frames and \
                len(wanted.pcs) != len(wanted.frames):  # --leak: a module its stack needs came
            rec.breaks.write(rec.modules)
        if rec.attached and not self._attach_tried:
            self._attach_tried = True
            self._attach()

    def recording_something(self) -> bool:
        return self.control is not None

    def _image_without_recorder(self) -> bool:
        """An exec'd image whose C library came without the recorder (a static program has no C
        library: nothing to record): record it with breakpoints. True when it did."""
        rec = self.rec
        names = {os.path.basename(m.path) for m in rec.modules.modules()}
        if LIBRARY in names:
            return False
        if not any(m.elf is not None and m.elf.dynamic_symbols().get("malloc")
                   for m in rec.modules.modules()):
            return False  # the loader has not mapped the libraries yet
        self._awaiting_recorder = False
        output.info(CMD, f"{rec.inferior.progspace.filename or '?'} was executed without the "
                         "in-process recorder (a raw execve system call?): recording it with "
                         "breakpoints")
        self.control = None
        rec.live = {}  # a dictionary again, which the breakpoints keep
        rec.use(BreakpointBackend(rec))  # said in the dump (`i recorder`)
        rec.writer.info("recorder", rec.mode)
        # GDB's clock samples go on from the recorder's start (both CLOCK_MONOTONIC)
        rec.writer.sample_clock(self._clock_start / 1000 if self._clock_start else rec.started,
                                lambda: procfs.resident_bytes(rec.pid))
        rec.scanned.clear()
        rec.backend.install_hooks()
        return True

    def _attach(self) -> None:
        """A running process: load the recorder into it, or say why not and use breakpoints."""
        rec = self.rec
        process = attach.Process(rec.inferior, rec.modules, rec.memory.read,
                                 lambda: self.control)
        try:
            slots, modules = attach.load(process, self.library)
        except attach.AttachError as exc:
            self._fall_back(str(exc))
            return
        finally:
            rec.heap_at_load = process.heap_at_load
        what = ("allocator and lock" if rec.settings is not None and rec.settings("locks")
                else "allocator")
        output.info(CMD, f"in-process recorder: loaded into process {rec.pid}, {slots} "
                         f"{what} call sites redirected in {modules} modules (memdump "
                         "--breakpoints records without loading anything)")

    def _fall_back(self, reason: str) -> None:
        """Record with breakpoints: the dump starts again, its header saying so."""
        rec = self.rec
        output.info(CMD, f"{reason}: recording with breakpoints")
        if self.control is not None:
            try:
                self.control.set(state=DISABLED)
            except OSError:
                pass
        self.control = None
        rec.use(BreakpointBackend(rec))
        rec.scanned.clear()
        rec.restart()

    def remove_breakpoints(self) -> None:
        for bp in (*self._configure_hooks.values(), *self._exit_hooks.values()):
            if bp.is_valid():
                bp.delete()
        self._configure_hooks.clear()
        self._exit_hooks.clear()

    def on_configure(self) -> None:
        """The recorder's first call: tell it where to write and how."""
        rec = self.rec
        try:
            if rec.state != State.RECORDING or rec.inferior.pid != rec.pid:
                return  # a child that inherited the recorder: it stays unconfigured
            regs = ptrace.get_regs(gdb.selected_thread().ptid[1])
            if regs is None or self.control is not None:
                return
            control = Control(regs.rdi, rec.read, rec.memory.write).load()
            w = rec.writer
            if self._awaiting_recorder:  # an exec'd image: its events are the recorder's again
                self._awaiting_recorder = False
                w.info("recorder", self.mode)
            w.flush()
            # the dump's end: the header, or (after an exec) the earlier images' records
            end = os.lseek(rec.fd, 0, os.SEEK_CUR)
            self._known_end = end
            control.set(depth=rec.depth, end=end, seq=w.seq,
                        next_string=w.next_string, next_frame=w.next_frame,
                        next_node=w.next_node, inherit=int(rec.children and not rec.attached),
                        attach=int(rec.attached and not self._execs),
                        # an exec'd image's samples go on from the recording's start
                        clock_start=(self._clock_start or int(rec.started * 1000))
                        if self._execs else 0)
            control.set_path(os.path.abspath(rec.path))
            accessfault.write_spec(control, rec.guard)
            lock_counts.configure(rec.settings is not None and bool(rec.settings("locks")),
                                  rec.memory.write)
            self.control = control
            rec.breaks.write(rec.modules)
        except Exception as exc:  # noqa: BLE001
            rec.hot_path_error(exc)

    def on_unloading(self) -> None:
        """dlclose: symbolise the frames recorded so far while the module's symbols are there."""
        try:
            if self.rec.state == State.RECORDING and self._load() is not None:
                self._resolve_frames()
        except Exception as exc:  # noqa: BLE001
            self.rec.hot_path_error(exc)

    # -- the recorder's state ----------------------------------------------------------------
    def _load(self) -> Control | None:
        """The control block now, when the process is there to read it."""
        rec = self.rec
        if self.control is None or not rec.inferior.pid or rec.inferior.pid != rec.pid:
            return None
        try:
            control = self.control.load()
        except (OSError, ValueError):
            return None
        self._known_end = max(self._known_end, control.end)
        self._live_count = control.live_count  # what `memdump status` says once it ended
        self._clock_start = control.clock_start or self._clock_start
        t = self._tail
        t.seq = max(t.seq, control.seq)
        t.events = max(t.events, control.events)
        t.next_string = max(t.next_string, control.next_string)
        t.next_frame = max(t.next_frame, control.next_frame)
        t.next_node = max(t.next_node, control.next_node)
        try:
            pcs = frame_pcs(rec.read, control.frame_pcs, control.next_frame)
        except OSError:
            pcs = [0]
        for fid in range(self._frames_read, len(pcs)):
            if pcs[fid]:  # 0: a frame of an earlier image, or one GDB's writer defined
                self._frames[fid] = pcs[fid]
        self._frames_read = max(self._frames_read, len(pcs))
        for key, value in (("nested", control.unrecorded),
                           ("partial-stacks", control.partial_stacks)):
            if value:
                rec.counts[key] = value
        return control

    def _resolve_frames(self) -> None:
        """Symbols of every frame known so far, while GDB still has the process's modules."""
        new = {}
        for fid, pc in self._frames.items():
            if fid not in self._symbols:
                try:
                    new[fid] = self.rec.resolve(pc)
                except Exception:  # noqa: BLE001 - a frame GDB cannot resolve stays raw
                    self._symbols[fid] = None
        self._symbols.update(from_debug_files(new))

    def update_status(self, status: dict[str, object]) -> None:
        rec = self.rec
        control = self._load() if rec.state == State.RECORDING else None
        if control is not None:
            events = control.events + rec.writer.events  # those of the images before an exec
            status.update(events=events, live_blocks=control.live_count, dump_bytes=control.end)
            running = rec.running_time()
            status["events_per_s"] = round(events / running, 1) if running > 0 else 0.0
            if control.failure:
                status["counts"]["recorder-failure"] = control.failure
        elif self._live_count is not None:  # ended: the blocks live when it was last read
            status["live_blocks"] = self._live_count
        status["pending_calls"] = 0

    def before_detach(self) -> None:
        """`detach` comes: the allocator calls in progress finish and are recorded first."""
        rec = self.rec
        attach.drain(attach.Process(rec.inferior, rec.modules, rec.memory.read,
                                    lambda: self.control))

    def sync_dump(self) -> None:
        """At a stop, before the dump is read (memdump leaks): write the symbols of the frames
        the recorder defined, when no thread is in the middle of a record."""
        if self.rec.state != State.RECORDING:
            return
        control = self._load()
        if control is None or control.lock:
            return
        self._resolve_frames()
        self._append_at(control.end, control, frames_only=True)

    # -- events ------------------------------------------------------------------------------
    def fatal_stop(self, signal: str) -> None:
        """The calls in progress, the signal and the frames' symbols, for the end of the dump."""
        rec = self.rec
        if rec.inferior.pid != rec.pid:
            return
        control = self._load()
        if control is not None:
            try:
                self._interrupted = in_flight(rec.read, control.slots, control.slot_count)
            except OSError:
                self._interrupted = []
        self._signal = signal
        self._resolve_frames()

    def signal_stop(self, event: gdb.SignalEvent) -> bool:
        """A guard page's fault: reported (accessfault.py); True when the program goes on (batch:
        the access let through once), False when the stop is left to the fatal signal's path."""
        return accessfault.at_fault(self, event)

    def on_exit_call(self) -> None:
        self.rec.on_exit_call()

    def exit_call(self) -> None:
        """The recorder's last counts, before the scan."""
        if self.control is not None:
            self._load()
            self._lock_counts = lock_counts.at_end()
        else:
            output.warn(CMD, "the in-process recorder was not loaded into the program (it ignored "
                             "LD_PRELOAD, e.g. set-user-ID, or cleared its environment): nothing "
                             "was recorded; use memdump --breakpoints")

    def scan_now(self, at_function_entry: bool) -> tuple[str, ScanResult | None, int]:
        rec = self.rec
        control = self._load()
        if control is None:
            return "threads", None, 0
        began = time.monotonic()  # reading the recorder's live blocks is part of the scan
        fast = live_arrays(rec.read, control.live_table, control.live_capacity)
        if fast is not None and not fast[1]:
            rec.live, rec.custom = fast  # type: ignore[assignment] - read only until an exec
        else:
            rec.custom = {}
            rec.live = live_blocks(rec.read, control.live_table, control.live_capacity,
                                   rec.custom)
        return pointer_scan(
            rec.inferior, rec.pid, rec.read_some, checked_blocks(rec.live, rec.custom),
            rec.scan_time_limit,
            at_function_entry, exclude=(control.region, control.region + control.region_size),
            attached=rec.attached, began=began, at_load=rec.heap_at_load)

    def live_blocks(self) -> dict[int, int]:
        rec = self.rec
        control = self._load()
        if control is None:
            return checked_blocks(rec.live, rec.custom)
        rec.custom = {}
        rec.live = live_blocks(rec.read, control.live_table, control.live_capacity, rec.custom)
        return checked_blocks(rec.live, rec.custom)

    def block_ages(self) -> dict[int, float]:
        control = self._load()
        if control is None:
            return {addr: 0.0 for addr in self.rec.live}
        times: dict[int, int] = {}
        live_blocks(self.rec.read, control.live_table, control.live_capacity, None, times)
        now = time.time()
        return {addr: now - (control.clock_base + seconds) for addr, seconds in times.items()}

    def recorder_memory(self) -> tuple[int, int] | None:
        control = self._load()
        return None if control is None else (control.region, control.region + control.region_size)

    def calls_in_progress(self) -> list[tuple[int, str]]:
        control = self._load()
        if control is None:
            return []
        calls = [(c.tid, c.op) for c in in_flight(self.rec.read, control.slots,
                                                  control.slot_count)]
        if control.lock and all(tid != control.lock for tid, _ in calls):
            calls.append((control.lock, "the recorder"))
        return sorted(calls)

    def scan(self, at_function_entry: bool) -> None:
        rec = self.rec
        if self._load() is None:
            return
        self._resolve_frames()
        if self._clock_start:  # the recorder's clock, and the resident set at the end
            self._exit_clock = (max(0, int(time.monotonic() * 1000) - self._clock_start),
                                procfs.resident_bytes(rec.pid))
        status, result, millis = self.scan_now(at_function_entry)
        rec.scan_status = status
        self._scan_record = rec.final_scan = (status, result, millis)
        rec.counts["scan-ms"] = millis

    def exec(self) -> None:
        # An exec: the recorder went with the old image. The exec hooks (recorder/exec.c) put it
        # in the new image's LD_PRELOAD, and GDB configures it there as at the start, writing
        # after the old image's records; an image without it is recorded with breakpoints.
        rec = self.rec
        self._append_tail(frames_only=True)
        for fid in self._frames:  # symbolised at the exec hook's stop, or by the analyser from
            self._symbols.setdefault(fid, None)  # their modules: never with the new image's
        rec.writer.events += self._tail.events
        self._tail.events = 0
        self.control = None
        rec.breaks.recorder_at = 0
        self._execs += 1
        self._awaiting_recorder = True
        rec.live = {}
        rec.heap_at_load = ()  # the new image's blocks: none from before the recording
        rec.writer.forget_stacks()

    def before_finish(self) -> None:
        rec = self.rec
        self._preload.restore()
        if rec.state == State.ARMED:  # disarmed before the program ran
            self._debug.finish(read=True)
        if rec.writer is None or rec.failed:
            return
        if self.control is None and rec.state == State.RECORDING and self._awaiting_recorder:
            output.warn(CMD, f"{rec.inferior.progspace.filename or 'the executed program'} "
                             "exports no allocator to hook (statically linked?): its events "
                             "are not recorded")
        elif self.control is None and rec.state == State.RECORDING:
            output.warn(CMD, "the in-process recorder never started in the program: the dump "
                             "holds no events (use memdump --breakpoints)")
        if not self._lock_counts and self.control is not None and rec.inferior.pid:
            self._lock_counts = lock_counts.at_end()  # detach, memdump stop: counts so far
        try:
            self._append_tail(frames_only=False)
        except OSError as exc:
            output.warn(CMD, f"could not finish {rec.path}: {exc.strerror}")
        rec.writer.events += self._tail.events  # the recorder's, for the closing line

    # -- appending after the recorder --------------------------------------------------------
    def _append_tail(self, frames_only: bool) -> None:
        """Write GDB's records after the recorder's: at the end of its data when the process is
        gone, at its control block's end (and disabled) when the process is stopped."""
        control = self._load() if self.control is not None else None
        if control is not None and not control.lock:
            self._resolve_frames()
            if not frames_only:
                self.control.set(state=DISABLED)
            self._append_at(control.end, control, frames_only)
            if not frames_only:  # disabled, nothing more to come: the recorder's NULs go
                os.ftruncate(self.rec.fd, self._known_end)
            return
        # The process is gone (or a thread of it is inside the recorder): find the end on disk.
        rfd = os.open(self.rec.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            end = data_end(rfd)
            read_tail(rfd, self._known_end, end, self._tail)
        finally:
            os.close(rfd)
        for fid, pc in (self._tail.frames or {}).items():
            self._frames.setdefault(fid, pc)
        if control is not None:  # stopped inside a record: leave room for it, NULs between
            if not frames_only:
                self.control.set(state=DISABLED)
            end = max(end, control.end) + (1 << 20)
        else:
            os.ftruncate(self.rec.fd, end)
        self._append_at(end, None, frames_only)

    def _append_at(self, end: int, control: Control | None, frames_only: bool) -> None:
        w = self.rec.writer
        t = self._tail
        if control is not None:
            t.seq = control.seq
        w.seq = max(w.seq, t.seq)
        w.next_string = max(w.next_string, t.next_string)
        w.next_frame = max(w.next_frame, t.next_frame)
        w.next_node = max(w.next_node, t.next_node)
        w.forget_stacks()
        os.lseek(self.rec.fd, end, os.SEEK_SET)
        before = w.bytes_written
        if not frames_only:
            for call in self._interrupted:
                stack = w.stack(call.pcs)
                # free (custom_free) is an event at its entry in both designs; others never returned
                result = None if call.op in NO_RESULT else 0
                w.event(call.tid, call.op, stack, result, format_call_args(call.op, call.args, 0))
            self._interrupted = []
            if self._signal is not None:
                w.process("signal", self._signal)
                self._signal = None
            if self._exit_clock is not None:
                w.clock_record(*self._exit_clock)
                self._exit_clock = None
            if self._lock_counts:
                w.lock_counts(self._lock_counts)
                self._lock_counts = []
            if self._scan_record is not None:
                w.scan_outcome(*self._scan_record)
                self._scan_record = None
        for fid in sorted(self._frames):
            info = self._symbols.get(fid)
            # a frame GDB knows nothing of gets no record: the analyser then asks the module
            if info is None or (info.function is None and info.file is None):
                continue
            if fid not in self._written_symbols:
                w.frame_symbols(fid, info)
                self._written_symbols.add(fid)
        w.flush()
        new_end = end + (w.bytes_written - before)
        self._known_end = new_end
        t.seq = w.seq
        t.next_string, t.next_frame, t.next_node = w.next_string, w.next_frame, w.next_node
        if control is not None:
            self.control.set(end=new_end, seq=w.seq, next_string=w.next_string,
                             next_frame=w.next_frame, next_node=w.next_node)
