"""`memdump break`: stop the program at chosen heap events (docs/memdump.md, "Breaks on allocation
events"), in both recorders.

The in-process recorder tests the condition itself after each event it writes (its
`memdump_recorder_break_at`, core/breakcond.py's words) and calls `memdump_recorder_break()` on
a match: GDB stops there and selects the program's frame, the caller of the allocator. The
breakpoint design tests it at its own stops: an allocation's at the return breakpoint, already in
the caller's frame; a release's at the function's entry, and the caller is selected.
"""

from __future__ import annotations

import os
from typing import Any

import gdb

from .. import output
from ..core.breakcond import RELEASES, BreakCondition, allocated_size, last_event, map_frames
from .checks import CMD

#: the in-process recorder's condition and the function a match calls
BREAK_AT = "memdump_recorder_break_at"
BREAK_FUNCTION = "memdump_recorder_break"


class BreakBreakpoint(gdb.Breakpoint):
    """Internal breakpoint on memdump_recorder_break: an event matched `memdump break`."""

    def __init__(self, session: Any, address: int) -> None:  # noqa: ANN401 - a session
        super().__init__(f"*{address:#x}", gdb.BP_BREAKPOINT, internal=True)
        self.session = session

    def stop(self) -> bool:
        return self.session.on_recorder_break()


def function_ranges(name: str) -> list[tuple[int, int]]:
    """The code of function NAME as [lo, hi) ranges, from the debug information; gdb.GdbError
    when there is none."""
    symbol = gdb.lookup_global_symbol(name) or gdb.lookup_static_symbol(name)
    if symbol is None:
        try:
            symbol = gdb.lookup_symbol(name)[0]
        except gdb.error:
            symbol = None
    if symbol is None or not symbol.is_function:
        raise gdb.GdbError(f"{CMD} break: no function '{name}' in the debug information "
                           "(build the program with -g)")
    start = int(symbol.value().address)
    block = gdb.block_for_pc(start)
    while block is not None and (block.function is None or block.function.name != symbol.name):
        block = block.superblock
    if block is None:
        raise gdb.GdbError(f"{CMD} break: the code of '{name}' is not known")
    return [(block.start, block.end)]


def _resolve(condition: BreakCondition, modules: Any) -> None:  # noqa: ANN401 - a ModuleMap
    """CONDITION's addresses in the running program: its function's code ranges, its stack's
    pcs (once each; a module not loaded yet is looked for again at the next event)."""
    if condition.frames and len(condition.pcs) != len(condition.frames):
        modules.refresh()
        pcs = map_frames(condition.frames, {m.path: m.bias for m in modules.modules()})
        condition.pcs = pcs or ()
    if condition.function is None or condition.ranges:
        return
    try:
        condition.ranges = function_ranges(condition.function)
    except gdb.GdbError as exc:
        output.warn(CMD, f"{exc}: the break stops nowhere")
        condition.function = None
        condition.ops = frozenset()


def _what(op: str, args: tuple[int, ...], address: int | None) -> str:
    if op in RELEASES:
        return f"{op}({args[0]:#x})"
    return f"{op}({allocated_size(op, args)}) = {address or 0:#x}"




class BreaksMixin:
    """A session's side of `memdump break` (session.Session's)."""

    break_condition: BreakCondition | None = None
    #: the recorder's condition, when loaded: its address
    _break_at: int = 0
    _break_now = False
    #: the breakpoint design's matching releases, stopped at when they return: thread -> text
    _break_after: dict[int, str]
    #: what to say at the stop a match made, and which frame to select: "" the stop's (the
    #: caller already), "caller" frame 1, "recorder" the first outside the recorder's library
    _break_hit: tuple[str, str] | None = None

    def set_break(self, condition: BreakCondition | None) -> None:
        """Stop at the events of CONDITION from now on (None: no more)."""
        self.break_condition = condition
        self.write_break()

    def write_break(self) -> None:
        """The condition into the in-process recorder, when it is loaded in a live process."""
        inferior = self.inferior  # type: ignore[attr-defined]
        if not self._break_at or not inferior.pid:
            return
        condition = self.break_condition
        if condition is not None:
            _resolve(condition, self._modules)  # type: ignore[attr-defined]
        data = condition.words() if condition is not None else bytes(8)
        inferior.write_memory(self._break_at, data)

    def take_break(self) -> bool:
        """Whether the stop being decided is a break (then reset)."""
        now, self._break_now = self._break_now, False
        return now

    def check_break(self, tid: int, op: str, args: tuple[int, ...], stack: int,
                    address: int | None) -> None:
        """The breakpoint design, after writing an event: is it one to stop at?"""
        condition = self.break_condition
        if condition is None:
            return
        _resolve(condition, self._modules)  # type: ignore[attr-defined]
        tags = self.thread_tags.get(tid)  # type: ignore[attr-defined]
        writer = self.writer  # type: ignore[attr-defined]
        if condition.matches(op, args, writer.seq, tags[-1] if tags else None,
                             writer.pcs_of(stack)):
            text = f"break at event {writer.seq}: {_what(op, args, address)} in thread {tid}"
            if op in RELEASES and op != "custom_free":  # stop as the call returns, as the
                self._break_after[tid] = text          # in-process recorder's break does
                return
            self._break_now = True
            self._break_hit = (text, "caller" if op == "custom_free" else "")

    def release_returned(self, tid: int) -> None:
        """The breakpoint design: thread TID's free (delete) returned: a break if it matched."""
        text = self._break_after.pop(tid, None)
        if text is not None:
            self._break_now = True
            self._break_hit = (text, "")

    def on_recorder_break(self) -> bool:
        """The in-process recorder's memdump_recorder_break: the event it matched."""
        try:
            raw = bytes(self.inferior.read_memory(self._break_at, 93 * 8))  # type: ignore
            seq, op, size, address = last_event(raw)
            tid = gdb.selected_thread().ptid[1]
            what = f"{op}({address:#x})" if op in RELEASES else f"{op}({size}) = {address:#x}"
            self._break_hit = (f"break at event {seq}: {what} in thread {tid}", "recorder")
            return True
        except (gdb.error, gdb.MemoryError, OSError) as exc:
            self._break_hit = (f"break (the recorder's event cannot be read: {exc})", "recorder")
            return True

    def announce_break(self) -> None:
        """At the stop a break made: the program's frame selected, and what matched."""
        hit, self._break_hit = self._break_hit, None
        if hit is None:
            return
        text, select = hit
        if select == "recorder":  # GDB shows the caller's frame where the call returns
            _finish_recorder(getattr(self, "library", None))
        output.info(CMD, text)
        if select == "caller":
            _select_program_frame()
            gdb.execute("frame", to_string=False)


def _select_program_frame() -> None:
    """At a release function's entry (the breakpoint design): its caller's frame."""
    frame = gdb.newest_frame().older()
    if frame is not None:
        frame.select()


def _finish_recorder(library: str | None) -> None:
    """Let the allocator call the in-process recorder matched return (`finish` from its
    outermost frame in the recorder's library), so that the program's frame is frame 0: `bt`
    and `frame 1` then show what the breakpoint design shows."""
    ours = os.path.basename(library) if library else None
    frame, last = gdb.newest_frame(), None
    while frame is not None and os.path.basename(gdb.solib_name(frame.pc()) or "") == ours:
        frame, last = frame.older(), frame
    if last is not None:
        last.select()
        gdb.execute("finish", to_string=True)
