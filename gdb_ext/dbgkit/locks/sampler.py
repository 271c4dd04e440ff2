"""`contention --sample`: let the program run, stop it every INTERVAL, and note each thread
blocked in one of glibc's lock waits, with the lock, its owner and the waiting stack.

The stop is a SIGINT that GDB keeps for itself (`handle SIGINT stop nopass`, GDB's default; set
for the run and put back after), sent by a timer thread while `continue` runs: the same stop as
Ctrl-C. Frames, names and the lock word are read while every thread is stopped.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import struct
import threading
import time
from collections.abc import Iterable, Iterator

import gdb

from ..core.locks.contention import Frame, Sample, SampleRun, lock_call
from .names import unnamed_frame

# glibc's x86-64 pthread_mutex_t (sysdeps/nptl/bits/struct_mutex.h): __lock at 0, __owner at 8.
_MUTEX_OWNER = 8
# pthread_rwlock_t (sysdeps/nptl/bits/struct_rwlock.h, x86-64): __cur_writer at 24.
_RWLOCK_WRITER = 24
_STACK_DEPTH = 12        # the program's frames kept per waiting stack
_LIBC = re.compile(r"/libc(\.so|-[0-9.]+\.so)")


class SamplingError(Exception):
    """Sampling cannot start or go on; the text is one line for the user."""


def _in_libc(frame: gdb.Frame) -> bool:
    name = gdb.solib_name(frame.pc())
    return bool(name and _LIBC.search(name))


def _lock_address(frames: list[gdb.Frame], kind: str, innermost: gdb.Frame | None
                  ) -> int | None:
    """The lock's address: the lock function's argument (FRAMES: it and the libc frames it
    called, outermost first) when glibc's debug info is there, else the futex word of a
    blocked wait's system call (rdi; a mutex's word is its first member)."""
    for frame in frames:
        try:
            value = frame.read_var("mutex" if kind == "mutex" else "rwlock")
            if not value.is_optimized_out:
                return int(value)
        except (ValueError, gdb.error, RuntimeError):
            continue
    if kind != "mutex" or innermost is None:
        return None
    try:
        pc = innermost.pc()
        if bytes(gdb.selected_inferior().read_memory(pc - 2, 2)) != b"\x0f\x05":  # syscall
            return None
        return int(innermost.read_register("rdi")) & 0xFFFFFFFFFFFFFFFF
    except (gdb.error, gdb.MemoryError, ValueError):
        return None


def _owner(address: int | None, kind: str) -> int:
    if address is None:
        return 0
    offset = _MUTEX_OWNER if kind == "mutex" else _RWLOCK_WRITER
    try:
        raw = bytes(gdb.selected_inferior().read_memory(address + offset, 4))
    except gdb.MemoryError:
        return 0
    # the field as it is: a tid, or a value no thread has (a robust mutex's
    # PTHREAD_MUTEX_INCONSISTENT, a corrupt lock word), which owner_states() says
    return int(struct.unpack("<i", raw)[0])


def _frame(frame: gdb.Frame) -> Frame:
    sal = frame.find_sal()
    path = sal.symtab.filename if sal.symtab is not None else ""
    name = frame.name()
    if not name:
        name = unnamed_frame(frame.pc())
    return Frame(name, path, sal.line if path else 0)


def owner_states(owners: Iterable[int], names: dict[int, str]) -> dict[int, str]:
    """For each owner that is no thread of this process: `another process` when a thread of
    that id exists (/proc/TID: a process-shared lock's owner), else `no such thread` (a corrupt
    lock word, a robust mutex's owner-died marks, a thread that ended with the lock)."""
    out = {}
    for tid in owners:
        if tid and tid not in names:
            alive = tid > 0 and os.path.exists(f"/proc/{tid}")
            out[tid] = "another process" if alive else "no such thread"
    return out


# Types that are the lock itself: a name stops at them (`this->mutex_`, not `this->mutex_.__data`).
_LOCK_TYPES = re.compile(r"^(pthread_(mutex|rwlock|spinlock)_t|std::(recursive_|timed_|"
                         r"recursive_timed_|shared_|shared_timed_)?mutex|union .*)$")


def _field_path(gtype: gdb.Type, offset: int, depth: int = 0) -> str | None:
    """`.a.b` naming the member of GTYPE that starts at OFFSET, down to a lock type ("" when
    GTYPE itself is the thing there; None: no member starts there); a base class adds no name."""
    gtype = gtype.strip_typedefs()
    if gtype.code != gdb.TYPE_CODE_STRUCT or depth > 6 or _LOCK_TYPES.match(str(gtype)):
        return "" if offset == 0 else None
    for f in gtype.fields():
        if not hasattr(f, "bitpos") or f.type is None:
            continue
        start = f.bitpos // 8
        if start <= offset < start + max(f.type.sizeof, 1):
            inner = _field_path(f.type, offset - start, depth + 1)
            if inner is None:
                continue
            return inner if f.is_base_class else f".{f.name}{inner}"
    return "" if offset == 0 else None


def _name_in(value: gdb.Value, base: str, address: int, hops: int) -> str | None:
    """A path from BASE (a variable's name) to the object at ADDRESS through VALUE, following
    pointers up to HOPS times: `q->hdr->mutex`, `this->mutex_`, `counter.lock`."""
    gtype = value.type.strip_typedefs()
    if gtype.code in (gdb.TYPE_CODE_REF, gdb.TYPE_CODE_RVALUE_REF):
        try:
            return _name_in(value.referenced_value(), base, address, hops)
        except (gdb.error, gdb.MemoryError):
            return None
    if gtype.code == gdb.TYPE_CODE_PTR:
        target = gtype.target().strip_typedefs()
        if target.code not in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION) or hops <= 0:
            return None
        try:
            start = int(value)
            if start == 0:
                return None
            pointee = value.dereference()
        except (gdb.error, gdb.MemoryError):
            return None
        if start <= address < start + target.sizeof:
            path = _field_path(target, address - start)
            if path:
                return f"{base}->{path[1:]}"
            return f"*{base}" if path == "" else None
        return _through_fields(pointee, f"{base}->", address, hops - 1)
    if gtype.code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION):
        try:
            start = int(value.address) if value.address is not None else -1
        except gdb.error:
            return None
        if start <= address < start + gtype.sizeof:
            path = _field_path(gtype, address - start)
            if path is not None:
                return base + path
        return _through_fields(value, f"{base}.", address, hops)
    return None


def _through_fields(value: gdb.Value, prefix: str, address: int, hops: int) -> str | None:
    """The lock reached through one of VALUE's pointer members."""
    if hops <= 0:
        return None
    try:
        fields = value.type.strip_typedefs().fields()
    except TypeError:
        return None
    for f in fields:
        if f.is_base_class or not f.name or f.type is None:
            continue
        if f.type.strip_typedefs().code not in (gdb.TYPE_CODE_PTR, gdb.TYPE_CODE_REF):
            continue
        try:
            found = _name_in(value[f.name], prefix + f.name, address, hops)
        except (gdb.error, gdb.MemoryError):
            continue
        if found is not None and not found.startswith("*"):
            return found
    return None


def lock_name(address: int | None, frames: list[gdb.Frame]) -> tuple[str, str]:
    """(name, scope): a global's or static's name (scope ""), else a path from an argument
    or local of the program's innermost frames (scope: that frame's function)."""
    if address is None:
        return "", ""
    text = gdb.execute(f"info symbol {address:#x}", to_string=True)
    m = re.match(r"(\S+)( \+ (\d+))? in section", text)
    if m is not None:
        name, offset = m.group(1), int(m.group(3) or 0)
        sym = gdb.lookup_global_symbol(name) or gdb.lookup_static_symbol(name)
        if offset and sym is not None:
            path = _field_path(sym.type, offset)
            return (name + path if path else f"{name}+{offset}"), ""
        return (name if not offset else f"{name}+{offset}"), ""
    fallback = ("", "")
    for frame in frames[:3]:
        try:
            block = frame.block()
        except RuntimeError:
            continue
        while block is not None and not block.is_global:
            for sym in block:
                if not (sym.is_argument or sym.is_variable):
                    continue
                try:
                    found = _name_in(sym.value(frame), sym.name, address, 2)
                except (gdb.error, gdb.MemoryError, RuntimeError, TypeError):
                    continue
                if found is None:
                    continue
                if not found.startswith("*"):
                    return found, frame.name() or ""
                if not fallback[0]:
                    fallback = (found, frame.name() or "")
            if block.function is not None:
                break
            block = block.superblock
    return fallback


def waiting(thread: gdb.InferiorThread) -> Sample | None:
    """What THREAD waits for, when it is blocked in a lock wait."""
    thread.switch()
    frame = gdb.newest_frame()
    innermost = frame
    libc: list[gdb.Frame] = []
    while frame is not None and _in_libc(frame) and len(libc) < 16:
        libc.append(frame)
        frame = frame.older()
    found = lock_call([f.name() for f in libc])
    if found is None:
        return None
    index, kind, mode, blocked = found
    address = _lock_address(libc[index::-1], kind, innermost if blocked else None)
    program: list[gdb.Frame] = []
    while frame is not None and len(program) < _STACK_DEPTH:
        program.append(frame)
        frame = frame.older()
    name, scope = lock_name(address, program)
    return Sample(address, kind, mode, thread.ptid[1], tuple(_frame(f) for f in program),
                  owner=_owner(address, kind), name=name, scope=scope, blocked=blocked)


def _sigint_handling() -> tuple[bool, bool]:
    """(stop, pass) of GDB's handling of SIGINT now."""
    text = gdb.execute("info signals SIGINT", to_string=True)
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "SIGINT":
            return parts[1] == "Yes", parts[3] == "Yes"
    return True, False


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """GDB's own stdout sent to /dev/null while the program runs to the next sample: each stop
    prints a "received signal SIGINT" line and the frame, which neither `to_string` nor
    `set logging redirect` catches. stderr, where errors go, stays."""
    gdb.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        gdb.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def sample(seconds: float, interval_ms: int) -> SampleRun:
    """Run the program for SECONDS, stopping it every INTERVAL_MS to look at its threads; the
    process is left stopped. SamplingError when it cannot run."""
    inferior = gdb.selected_inferior()
    pid = inferior.pid
    selected = gdb.selected_thread()
    stop, passed = _sigint_handling()
    reasons: list[object] = []

    def on_stop(event: gdb.StopEvent) -> None:
        reasons.append(event)

    run = SampleRun(0, 0.0, interval_ms)
    gdb.events.stop.connect(on_stop)
    if not stop or passed:
        gdb.execute("handle SIGINT stop nopass", to_string=True)
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            reasons.clear()
            timer = threading.Timer(interval_ms / 1000, os.kill, (pid, signal.SIGINT))
            timer.start()
            try:
                with _quiet():
                    gdb.execute("continue", to_string=True)
            finally:
                timer.cancel()
            if not inferior.pid or not inferior.threads():
                run.ended = "the program exited"
                break
            event = reasons[-1] if reasons else None
            if not (isinstance(event, gdb.SignalEvent) and event.stop_signal == "SIGINT"):
                run.ended = ("the program stopped at a breakpoint"
                             if isinstance(event, gdb.BreakpointEvent) else
                             "the program stopped for another reason")
                break
            run.samples += 1
            found = []
            for thread in inferior.threads():
                if thread.is_valid():
                    hit = waiting(thread)
                    if hit is not None:
                        found.append(hit)
            run.found.append(found)
    finally:
        run.seconds = time.monotonic() - start
        gdb.events.stop.disconnect(on_stop)
        if not stop or passed:
            gdb.execute(f"handle SIGINT {'stop' if stop else 'nostop'} "
                        f"{'pass' if passed else 'nopass'}", to_string=True)
        if selected is not None and selected.is_valid():
            selected.switch()
    return run
