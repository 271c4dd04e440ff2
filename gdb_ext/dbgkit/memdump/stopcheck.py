"""The red zones checked at every stop the user sees (`set memdump check-at-stop`,
docs/heap-errors.md "Red zones").

When the program stops in GDB (a breakpoint, a signal, a step, Ctrl-C) while a recording with red
zones is on, the check `memdump check-heap` makes runs by itself (checkheap.py: one call into the
recorder in the stopped thread alone, scheduler-locking on, no other thread resumed), and what it
finds is said before the prompt in the same words. The recorder fills a changed zone with its
pattern again once it wrote its record, so each finding is said at one stop only. What the
recorder found by itself since the previous stop (at a free, or as a block left the quarantine)
is read from the dump and said first, once.

A stop where the call is unsafe is skipped: a thread holds the recorder's lock or stopped inside
the recorder (an allocator call half done: any thread's newest frame, or one of the stopped
thread's newest frames, in the recorder's library), the stopped thread runs a signal handler
(the code it interrupted may be the allocator's), or it has exited; why is said once per
recording and reason.
A program without red zones, or a core file, is skipped without a word.
"""

from __future__ import annotations

import gdb

from .. import output, settings
from .checkheap import (
    CheckRefused,
    NoRedZones,
    Target,
    counters,
    describe_record,
    hc_records,
    prepare,
    run,
)
from .checks import CMD

__all__ = ["StopCheck"]

#: frames of the stopped thread looked at for a signal handler's trampoline or the recorder
SIGNAL_FRAMES = 256


class Unsafe(Exception):
    """An inferior call is unsafe at this stop; the text says why, the kind names the reason."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind = kind


def _stopped_in(library: str | None) -> str | None:
    """What the stopped thread's newest frames (SIGNAL_FRAMES of them) are inside: "signal" (a
    handler's trampoline), "recorder" (a frame in LIBRARY, an allocator call half done), None."""
    frame: gdb.Frame | None = gdb.newest_frame()
    for _ in range(SIGNAL_FRAMES):
        if frame is None:
            return None
        if frame.type() == gdb.SIGTRAMP_FRAME:
            return "signal"
        if library is not None and gdb.solib_name(frame.pc()) == library:
            return "recorder"
        try:
            frame = frame.older()
        except gdb.error:
            return None
    return None


def _inside_recorder(library: str | None, stopped: gdb.InferiorThread) -> int | None:
    """The global number of a thread whose newest frame is in the recorder's LIBRARY, if any."""
    if library is None:
        return None
    try:
        for thread in gdb.selected_inferior().threads():
            if not thread.is_valid() or thread.is_exited():
                continue
            thread.switch()
            if gdb.solib_name(gdb.newest_frame().pc()) == library:
                return thread.num
    finally:
        stopped.switch()
    return None


def _safe_target() -> Target | None:
    """The recorder to call, None when there is nothing to check; Unsafe when a call is not."""
    inferior = gdb.selected_inferior()
    connection = inferior.connection
    if inferior.pid == 0 or connection is None or connection.type == "core":
        return None
    thread = gdb.selected_thread()
    if thread is None or not thread.is_valid() or thread.is_exited():
        raise Unsafe("exited", "the stopped thread has exited")
    try:
        target = prepare()
    except NoRedZones:
        return None
    except CheckRefused as exc:
        raise Unsafe("lock", str(exc).split(":", 1)[0]) from None
    library = gdb.solib_name(target.function)
    inside_of = _stopped_in(library)
    if inside_of == "signal":
        raise Unsafe("signal", f"thread {thread.num} stopped in a signal handler")
    inside = thread.num if inside_of == "recorder" else _inside_recorder(library, thread)
    if inside is not None:
        raise Unsafe("recorder", f"thread {inside} stopped inside the recorder (an allocator "
                                 "call)")
    return target


#: where a zone the recorder found changed by itself was found (an `hc` record's FOUND)
FOUND_AT = {"free": "found at its free", "quarantine": "found as it left the quarantine"}


class StopCheck:
    """One recording's check at its stops: the reasons it was skipped, said once each, and
    where the previous stop left the dump and the recorder's count of red-zone records."""

    def __init__(self) -> None:
        self.said: set[str] = set()
        self.path = b""
        self.errors = 0
        self.end = 0

    def at_stop(self) -> None:
        """Check the heap at this stop, when the setting is on and a call is safe; say what the
        recorder found by itself since the last stop, then what the check found (nothing when
        nothing was)."""
        if not settings.get("check-at-stop"):
            return
        try:
            target = _safe_target()
            if target is None:
                return
            lines = self._found_since(target)
            found, checked = run(target)
            self.errors, self.end = counters(target)
        except Unsafe as exc:
            self._skip(exc.kind, str(exc))
            return
        except gdb.error as exc:
            self._skip("call", f"the call into the recorder failed ({exc})")
            return
        if found:
            lines += checked
        if lines:
            output.block("\n".join(lines))

    def _found_since(self, target: Target) -> list[str]:
        """The zones the recorder found changed at a free or as a block left the quarantine
        since the last stop (in the dump; said here once)."""
        if target.path != self.path:  # a new dump: from its start
            self.path, self.errors, self.end = target.path, 0, 0
        errors, end = counters(target)
        if errors == self.errors:
            return []
        records = [fields for fields in hc_records(target, self.end, end)
                   if fields[-1] in FOUND_AT]
        if not records:
            return []
        return ([f"memdump: {len(records)} zone(s) found changed since the last stop (hc "
                 "records in the dump; memdump-analyze reports them with their stacks)"]
                + [f"  {describe_record(fields)}, {FOUND_AT[fields[-1]]}" for fields in records])

    def _skip(self, kind: str, why: str) -> None:
        if kind in self.said:
            return
        self.said.add(kind)
        output.info(CMD, f"heap not checked at this stop: {why} (said once; memdump "
                         "check-heap asks again)")
