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

import gdb

from .. import output
from ..core.breakcond import RELEASES, BreakCondition, allocated_size, last_event, map_frames
from ..core.dumpwriter import DumpWriter
from ..core.procmaps import ModuleMap
from .checks import CMD

#: the in-process recorder's condition and the function a match calls
BREAK_AT = "memdump_recorder_break_at"
BREAK_FUNCTION = "memdump_recorder_break"


class BreakBreakpoint(gdb.Breakpoint):
    """Internal breakpoint on memdump_recorder_break: an event matched `memdump break`."""

    def __init__(self, breaks: Breaks, address: int) -> None:
        super().__init__(f"*{address:#x}", gdb.BP_BREAKPOINT, internal=True)
        self.breaks = breaks

    def stop(self) -> bool:
        return self.breaks.on_recorder_break()


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


def _resolve(condition: BreakCondition, modules: ModuleMap) -> None:
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


class Breaks:
    """A recording's side of `memdump break`: its condition, the in-process recorder's copy of
    it, and the stop a match makes. Handed the INFERIOR it stops and the in-process recorder's
    LIBRARY (None in the breakpoint design); what an event is tested with (the dump's writer,
    the modules, the thread's tag) is handed with each event."""

    def __init__(self, inferior: gdb.Inferior, library: str | None = None) -> None:
        self.inferior = inferior
        self.library = library
        self.condition: BreakCondition | None = None
        #: the recorder's condition, when loaded: its address
        self.recorder_at = 0
        self._now = False
        #: the breakpoint design's matching releases, stopped at when they return: thread -> text
        self._after: dict[int, str] = {}
        #: what to say at the stop a match made, and which frame to select: "" the stop's (the
        #: caller already), "caller" frame 1, "recorder" the first outside the recorder's library
        self._hit: tuple[str, str] | None = None

    def write(self, modules: ModuleMap | None) -> None:
        """The condition into the in-process recorder, when it is loaded in a live process
        (MODULES: where its addresses are)."""
        if not self.recorder_at or not self.inferior.pid:
            return
        condition = self.condition
        if condition is not None and modules is not None:
            _resolve(condition, modules)
        data = condition.words() if condition is not None else bytes(8)
        self.inferior.write_memory(self.recorder_at, data)

    def take(self) -> bool:
        """Whether the stop being decided is a break (then reset)."""
        now, self._now = self._now, False
        return now

    def check(self, event: tuple[int, str, tuple[int, ...], int, int | None], writer: DumpWriter,
              modules: ModuleMap, tag: str | None) -> None:
        """The breakpoint design, after WRITER wrote EVENT (thread, op, arguments, stack, address;
        TAG: the thread's innermost): is it one to stop at?"""
        condition = self.condition
        if condition is None:
            return
        tid, op, args, stack, address = event
        _resolve(condition, modules)
        if condition.matches(op, args, writer.seq, tag, writer.pcs_of(stack)):
            text = f"break at event {writer.seq}: {_what(op, args, address)} in thread {tid}"
            if op in RELEASES and op != "custom_free":  # stop as the call returns, as the
                self._after[tid] = text                 # in-process recorder's break does
                return
            self._now = True
            self._hit = (text, "caller" if op == "custom_free" else "")

    def release_returned(self, tid: int) -> None:
        """The breakpoint design: thread TID's free (delete) returned: a break if it matched."""
        text = self._after.pop(tid, None)
        if text is not None:
            self._now = True
            self._hit = (text, "")

    def on_recorder_break(self) -> bool:
        """The in-process recorder's memdump_recorder_break: the event it matched."""
        try:
            raw = bytes(self.inferior.read_memory(self.recorder_at, 93 * 8))
            seq, op, size, address = last_event(raw)
            tid = gdb.selected_thread().ptid[1]
            what = f"{op}({address:#x})" if op in RELEASES else f"{op}({size}) = {address:#x}"
            self._hit = (f"break at event {seq}: {what} in thread {tid}", "recorder")
            return True
        except (gdb.error, gdb.MemoryError, OSError) as exc:
            self._hit = (f"break (the recorder's event cannot be read: {exc})", "recorder")
            return True

    def announce(self) -> None:
        """At the stop a break made: the program's frame selected, and what matched."""
        hit, self._hit = self._hit, None
        if hit is None:
            return
        text, select = hit
        if select == "recorder":  # GDB shows the caller's frame where the call returns
            _finish_recorder(self.library)
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
