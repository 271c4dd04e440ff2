"""What `deadlocks` reads from GDB: each thread's frames, the lock it waits on, the locks it
holds, the locks' words and names. The decisions are in core.locks (glibc, callscan and waitgraph);
this module only asks GDB."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import gdb

from ..core.locks import glibc as gl
from ..core.locks.callscan import CALLEE_SAVED, Insn, LockEvent, lock_events, still_held, trace
from ..core.locks.waitgraph import Hold, Report, ThreadState, Where, readers_note
from .names import name_locks, unnamed_frame

MAX_FRAMES = 64
MAX_FUNCTION_BYTES = 64 * 1024  # past this a function is not read for the locks it took
CALL_MAX_BYTES = 7  # the longest x86-64 call: `call *disp32(%rip)` (ff 15 + 4) or with a prefix
AFTER_BYTES = 4096  # code read past a frame's pc for the out-of-line blocks of its branches
FUTEX_SYSCALL = 202  # x86-64 futex(2)
# linux/futex.h: the operation without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256);
# the operations that sleep: WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2
FUTEX_CMD_MASK = 0x7F
FUTEX_WAIT_OPS = (0, 6, 9, 11, 13)


class ProbeError(Exception):
    """The process cannot be inspected: one line saying why."""


def _read(address: int, size: int) -> bytes | None:
    try:
        return bytes(gdb.selected_inferior().read_memory(address, size))
    except (gdb.MemoryError, gdb.error, OverflowError, ValueError):
        return None


def _read_word(address: int) -> int | None:
    data = _read(address, 8)
    return None if data is None else int.from_bytes(data, "little")


def libc_path() -> str | None:
    """glibc's file in the process: libc.so.6, or the program itself when linked statically."""
    for objfile in gdb.objfiles():
        name = os.path.basename(objfile.filename or "")
        if name == "libc.so.6" or re.fullmatch(r"libc-\d+\.\d+\.so", name):
            return objfile.filename
    return gdb.current_progspace().filename


def has_threads_library() -> bool:
    """Whether the process has glibc's lock functions (libc.so.6, or linked in statically)."""
    try:
        gdb.execute("info address pthread_mutex_lock", to_string=True)
    except gdb.error:
        return False
    return True


def _debug_layout() -> gl.Layout | None:
    """The lock layouts from debug information, or None when some structure is not described."""
    offsets: dict[str, dict[str, int]] = {}
    sizes: dict[str, int] = {}
    for kind, typename in (("mutex", "pthread_mutex_t"), ("rwlock", "pthread_rwlock_t"),
                           ("cond", "pthread_cond_t"), ("sem", "struct new_sem")):
        try:
            outer = gdb.lookup_type(typename).strip_typedefs()
            inner = outer if kind == "sem" else outer["__data"].type.strip_typedefs()
            base = 0 if kind == "sem" else outer["__data"].bitpos // 8
            offsets[kind] = {n: base + inner[n].bitpos // 8 for n in gl.FIELDS[kind]}
            # sem_t is a union around struct new_sem, larger than it
            sizes[kind] = gdb.lookup_type("sem_t").sizeof if kind == "sem" else outer.sizeof
        except (gdb.error, KeyError, RuntimeError):
            return None
    return gl.Layout("debug info", offsets, sizes)


def choose_layout(force_table: bool) -> tuple[gl.Layout, str]:
    """(layout, glibc version) for this process: debug information unless forced or missing,
    then the table for its glibc version."""
    path = libc_path()
    version = gl.glibc_version(path) if path else None
    if not force_table:
        layout = _debug_layout()
        if layout is not None:
            return layout, version or ""
    machine = gdb.selected_inferior().architecture().name()
    try:
        table = gl.table_for(version, "x86_64" if machine == "i386:x86-64" else machine)
    except gl.LayoutError as exc:
        raise ProbeError(str(exc)) from None
    return table, version or ""


@dataclass
class _Frame:
    frame: gdb.Frame
    name: str
    pc: int


def _frames(thread: gdb.InferiorThread) -> list[_Frame]:
    thread.switch()
    out = []
    frame = gdb.newest_frame()
    while frame is not None and len(out) < MAX_FRAMES:
        name = frame.name() or ""
        out.append(_Frame(frame, gl.normalize_function(name), frame.pc()))
        try:
            frame = frame.older()
        except gdb.error:
            break
    return out


def _where(frames: list[_Frame], start: int) -> Where | None:
    """The first frame from START in the program's own sources (not glibc's, not /usr/)."""
    first = None
    for f in frames[start:]:
        sal = f.frame.find_sal()
        path = sal.symtab.fullname() if sal.symtab else ""
        here = Where(f.name or unnamed_frame(f.pc), os.path.basename(path) if path else "",
                     sal.line if path else 0)
        first = first or here
        if path.startswith("/") and not path.startswith("/usr/"):
            return here
    return first


def _function_start(pc: int) -> int | None:
    """The entry of the function PC is in: its ELF symbol (a function split into hot and cold
    parts has one symbol per part, while its debug-info block starts at the lowest part)."""
    try:
        text = gdb.execute(f"info symbol {pc:#x}", to_string=True)
    except gdb.error:
        return None
    m = re.match(r"(.*?)(?: \+ (\d+))? in section \.text\b", text)
    return pc - int(m.group(2) or 0) if m else None


def _registers(frame: gdb.Frame) -> dict[str, int]:
    regs = {}
    for reg in CALLEE_SAVED:
        try:
            value = frame.read_register(reg)
            if not value.is_optimized_out:
                regs[reg] = int(value) & 0xFFFFFFFFFFFFFFFF
        except (gdb.error, ValueError):
            continue
    return regs


class CodeReader:
    """The lock calls in the frames' code (core.locks.callscan), with the code read and the names
    demangled once per pc and name: the threads of a pool sit at the same few pcs."""

    def __init__(self) -> None:
        self.code: dict[int, list[Insn]] = {}
        self.names: dict[str, str] = {}

    def function_code(self, frame: gdb.Frame) -> list[Insn]:
        """The machine code of FRAME's function from its entry to the call it is in, with the
        out-of-line blocks that run before it (core.locks.callscan.trace)."""
        pc = frame.pc()
        if pc not in self.code:
            start = _function_start(pc)
            if start is None or pc - start > MAX_FUNCTION_BYTES or pc <= start:
                self.code[pc] = []
            else:
                arch = frame.architecture()
                try:
                    code = arch.disassemble(start, pc + AFTER_BYTES)
                except gdb.MemoryError:
                    code = arch.disassemble(start, pc - 1)
                self.code[pc] = trace([Insn(i["addr"], i["length"], i["asm"]) for i in code],
                                      pc)
        return self.code[pc]

    def demangled(self, name: str) -> str:
        """A C++ symbol as the source writes it (`std::mutex::lock()`), a C name unchanged."""
        plain = name.split("@", 1)[0]
        if not plain.startswith("_Z"):
            return name
        if plain not in self.names:
            try:
                self.names[plain] = gdb.execute(f"demangle -l c++ -- {plain}",
                                                to_string=True).strip()
            except gdb.error:
                self.names[plain] = plain
        return self.names[plain]

    def events(self, frame: gdb.Frame) -> list[LockEvent]:
        """The lock calls of FRAME's function up to and including the one the frame is in."""
        code = self.function_code(frame)
        return lock_events(code, _registers(frame), _read_word, self.demangled) if code else []

    def active_call(self, frame: gdb.Frame) -> LockEvent | None:
        """The lock call FRAME is in (the instruction before its pc), or None."""
        events = self.events(frame)
        if events and events[-1].address + CALL_MAX_BYTES >= frame.pc() > events[-1].address:
            return events[-1]
        return None

    def held(self, frame: gdb.Frame) -> list[LockEvent]:
        """The locks FRAME's function took and has not given back. The lock call the frame is
        in, when it is in one, has not returned: that lock is waited for, not held; any other
        frame's last lock call returned."""
        events = self.events(frame)
        if events and self.active_call(frame) is events[-1]:
            events = events[:-1]
        return still_held(events)


def _in_libc(pc: int) -> bool:
    solib = gdb.solib_name(pc) or ""
    return os.path.basename(solib).startswith(("libc.so", "libc-", "libpthread"))


def _futex_address(frames: list[_Frame]) -> int | None:
    """The futex word the thread sleeps on: futex(2)'s first argument when the thread is in a
    waiting futex operation (not a wake-up: a thread posting a semaphore waits for nothing)."""
    frame = frames[0].frame
    try:
        if int(frame.read_register("orig_rax")) != FUTEX_SYSCALL:
            return None
        if int(frame.read_register("rsi")) & FUTEX_CMD_MASK not in FUTEX_WAIT_OPS:
            return None
        return int(frame.read_register("rdi")) & 0xFFFFFFFFFFFFFFFF
    except (gdb.error, ValueError):
        return None


class Probe:
    """Reads one stopped process into a core.locks.waitgraph.Report."""

    def __init__(self, layout: gl.Layout, version: str, use_debug_args: bool) -> None:
        self.layout = layout
        self.version = version
        self.use_debug_args = use_debug_args
        self.report = Report(gdb.selected_inferior().pid, layout.source, version, [], {})
        self.frames: dict[int, list[_Frame]] = {}
        self.reader = CodeReader()
        self._lwps: set[int] = set()
        self.seen: dict[int, gl.LockInfo] = {}

    def run(self) -> Report:
        inferior = gdb.selected_inferior()
        selected = gdb.selected_thread()
        try:
            threads = sorted(inferior.threads(), key=lambda t: t.num)
            if any(t.is_running() for t in threads):
                raise ProbeError("some threads are running: interrupt the program first")
            self._lwps = {t.ptid[1] for t in threads}
            for thread in threads:
                self._thread(thread)
            self._exact_holders()
            name_locks(list(self.report.locks.values()),
                       [(t, self.frames[t.num]) for t in threads], self.layout)
        finally:
            if selected is not None and selected.is_valid():
                selected.switch()
        return self.report

    def _lock(self, address: int, kind: str) -> gl.LockInfo:
        """The lock at ADDRESS, read once, and in the report: a thread waits on it or holds it."""
        lock = self._decoded(address, kind)
        self.report.locks[address] = lock
        return lock

    def _decoded(self, address: int, kind: str) -> gl.LockInfo:
        """The lock at ADDRESS read once, in the report or not (a hold the code suggests is
        checked against it first)."""
        lock = self.seen.get(address)
        if lock is None:
            lock = gl.LockInfo(address, kind)
            size = self.layout.sizes.get(kind, 4)
            data = _read(address, size)
            if data is None:
                lock.notes.append(f"cannot read the {size} bytes at {address:#x}")
            elif kind == "mutex":
                lock.state = gl.decode_mutex(data, self.layout)
            elif kind == "rwlock":
                lock.state = gl.decode_rwlock(data, self.layout)
            elif kind == "sem":
                lock.state = gl.decode_sem(data, self.layout)
            elif kind == "cond":
                lock.state = gl.decode_cond(data, self.layout)
            self.seen[address] = lock
        return lock

    def _thread(self, thread: gdb.InferiorThread) -> None:
        frames = _frames(thread)
        self.frames[thread.num] = frames
        state = ThreadState(thread.num, thread.ptid[1], thread.name or "")
        self.report.threads.append(state)
        kind, mode, outer = self._wait_kind(frames)
        scan_from = 1
        if kind == "thread":
            self._join(state, frames)
            state.where = _where(frames, outer + 1)
            scan_from = outer + 1
        elif kind is not None:
            address = self._wait_address(frames, outer, kind)
            if address is not None:
                self._lock(address, kind)
                state.waits, state.wait_mode = address, mode
            else:
                state.note = f"in a {kind} lock function on a lock whose address is unknown"
            state.where = _where(frames, outer + 1)
            scan_from = outer + 1
        else:
            futex = _futex_address(frames)
            if futex is not None:
                self._lock(futex, "futex")
                state.waits = futex
                state.where = _where(frames, 1)
            elif frames:
                state.note = f"in {frames[0].name or '??'}"
        self._scanned_holds(state, frames[scan_from:])

    def _join(self, state: ThreadState, frames: list[_Frame]) -> None:
        """A thread in pthread_join sleeps on the joined thread's `tid` word (glibc's
        pthread_join waits for the kernel to clear it at the thread's exit): the word holds
        the LWP it joins."""
        futex = _futex_address(frames)
        data = _read(futex, 4) if futex is not None else None
        tid = int.from_bytes(data, "little") if data else 0
        if not tid:
            state.note = "in a join of a thread that cannot be told"
        elif tid not in self._lwps:
            state.note = f"joins LWP {tid}, none of the process's threads"
        else:
            state.joins = tid

    def _wait_kind(self, frames: list[_Frame]) -> tuple[str | None, str, int]:
        """(kind, mode, index of the last frame inside the lock function) of what the thread
        waits on; kind None when it waits on no lock. glibc's frames name the function when
        GDB has their symbols; without libc6-dbg they have none, and the call the program's
        first frame is in names it."""
        outer = next((i for i, f in enumerate(frames) if f.name in gl.WAIT_FRAMES), None)
        if outer is not None:
            kind, mode = gl.WAIT_FRAMES[frames[outer].name]
        elif frames and _in_libc(frames[0].pc):
            outer = 0
            kind = None
        else:
            return None, "", 0
        # the caller of glibc's entry point: past the inlined and internal frames
        while outer + 1 < len(frames) and (frames[outer + 1].name in gl.WAIT_FRAMES
                                           or _in_libc(frames[outer + 1].pc)):
            outer += 1
        if kind is None:
            active = (self.reader.active_call(frames[outer + 1].frame)
                      if outer + 1 < len(frames) else None)
            if active is None or active.call.op == "release":
                return None, "", 0
            kind, mode = active.call.kind, active.call.mode
        return kind, mode, outer

    def _wait_address(self, frames: list[_Frame], outer: int, kind: str) -> int | None:
        """The lock a waiting thread waits on: the entry point's argument (debug info), the
        caller's argument register at the call, and the futex word it sleeps on, agreeing."""
        if self.use_debug_args:
            for f in frames[: outer + 1]:
                try:
                    value = f.frame.read_var(gl.ARGUMENT[kind])
                    if not value.is_optimized_out:
                        return int(value) & 0xFFFFFFFFFFFFFFFF
                except (gdb.error, ValueError, RuntimeError):
                    continue
        futex = _futex_address(frames)
        candidates = gl.futex_candidates(kind, futex, self.layout) if futex is not None else []
        caller = None
        if outer + 1 < len(frames):
            active = self.reader.active_call(frames[outer + 1].frame)
            if active is not None and active.call.kind == kind:
                caller = active.lock
        if caller is not None and (caller in candidates or not candidates):
            return caller
        return candidates[0] if candidates else None

    def _scanned_holds(self, state: ThreadState, frames: list[_Frame]) -> None:
        for f in frames:
            if f.frame.type() != gdb.NORMAL_FRAME or _in_libc(f.pc):
                continue
            for event in self.reader.held(f.frame):
                lock = event.lock
                if lock is None or any(h.lock == lock for h in state.holds):
                    continue
                hold = self._check_hold(state, lock, event.call.kind, event.call.mode)
                if hold is not None:
                    self._lock(lock, event.call.kind)
                    state.holds.append(hold)

    def _check_hold(self, state: ThreadState, address: int, kind: str, mode: str) -> Hold | None:
        """A hold the code suggests, kept only where the lock's words agree with it."""
        s = self._decoded(address, kind).state
        if isinstance(s, gl.MutexState):
            return Hold(address, "", False) if s.locked and s.owner == state.tid else None
        if isinstance(s, gl.RwlockState):
            if s.write_locked and s.cur_writer == state.tid:
                return Hold(address, "write", False)
            return Hold(address, "read", True) if mode == "read" and s.readers else None
        if isinstance(s, gl.SemState):
            return Hold(address, "", True) if s.value == 0 else None
        return None

    def _exact_holders(self) -> None:
        """Owners the locks' own words name (a lock read for a thread whose code suggested it,
        and owned by another, is that one's); owners outside the process are said in a note."""
        by_tid = {t.tid: t for t in self.report.threads}
        for lock in list(self.seen.values()):
            s = lock.state
            if not isinstance(s, gl.MutexState | gl.RwlockState):
                continue
            problem = s.problem()
            if problem:
                lock.notes.append(f"the lock word looks corrupt: {problem}")
                continue
            owner = 0
            if isinstance(s, gl.MutexState):
                owner = s.owner if s.locked else 0
            else:
                owner = s.cur_writer if s.write_locked else 0
                candidates = [t.num for t in self.report.threads
                              if any(h.lock == lock.address and h.mode == "read"
                                     for h in t.holds)]
                if s.readers or candidates:
                    lock.notes.append(readers_note(s.readers, candidates))
            if owner <= 0:
                continue
            holder = by_tid.get(owner & gl.FUTEX_TID_MASK)
            if holder is None:
                lock.notes.append(outside_owner(owner & gl.FUTEX_TID_MASK, is_core_dump()))
            elif not any(h.lock == lock.address for h in holder.holds):
                mode = "write" if isinstance(s, gl.RwlockState) else ""
                holder.holds.append(Hold(lock.address, mode, False))
                self.report.locks[lock.address] = lock


def is_core_dump() -> bool:
    """Whether GDB reads a core dump rather than a live process."""
    connection = getattr(gdb.selected_inferior(), "connection", None)
    return connection is not None and connection.type == "core"


def outside_owner(tid: int, core: bool = False) -> str:
    """Why an owner is not one of the process's threads: another process's, or no thread."""
    if core:
        return (f"owner LWP {tid} is none of the core dump's threads: another process's "
                "(a process-shared lock), one that exited, or a corrupt lock word")
    try:
        with open(f"/proc/{tid}/status", encoding="utf-8", errors="replace") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        pid = int(fields["Tgid"])
        name = fields.get("Name", "").strip()
    except (OSError, KeyError, ValueError):
        return (f"owner LWP {tid} is no thread on this system: the lock word looks corrupt "
                "(or its owner exited)")
    return (f"owned by LWP {tid} of another process, {pid} ({name}): a process-shared lock; "
            f"run `deadlocks` in process {pid} to see what it waits for")
