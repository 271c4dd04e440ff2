"""The libraries' separate debug files left unread while an in-process recording runs, and read
as soon as the user can look at the program.

GDB reads and indexes the separate debug file of every library the program loads as it loads it
(glibc's from libc6-dbg: 4 MB of compressed DWARF, half of GDB's CPU time on a small program).
The in-process recording uses none of it: the recorder unwinds in the program, and the frames
of those libraries are symbolised from the same files by memdump-symbolize
(`symbols.from_debug_files`). So a `memdump` armed before `run` clears GDB's
`debug-file-directory` for the run (as `scripts/memdump.sh` does for its whole GDB), and puts the
user's value back, having GDB read the files of the libraries loaded meanwhile
(`Objfile.add_separate_debug_file`), as soon as the user can look: at the first stop GDB
reports, when a breakpoint is made, when the recording is disarmed, and at the next prompt
after the program ended. A `gdb -batch ... -ex run` whose program just ends never reads them.

Not deferred (GDB reads as always): without memdump-symbolize, with `--guard` (its fault reports
use GDB's symbols at the stop), with a breakpoint of the user's already set, and when GDB may ask
debuginfod (`set debuginfod enabled` not off and $DEBUGINFOD_URLS set). What stays different:
the location line GDB prints for a stop inside such a library is printed before any Python
runs, from the library's symbol table alone (`0x... in ?? () from .../libc.so.6`): memdump
prints the frame again (`frame`) with its function, arguments and source line once the debug
file is read; `bt` and every command after have the debug information.

GDB glue only.
"""

from __future__ import annotations

import os

import gdb

from .symbols import debug_file, symbolizer

__all__ = ["DebugDeferral"]

_PARAMETER = "debug-file-directory"


def _debuginfod_possible() -> bool:
    """Whether GDB may look a debug file up with debuginfod (the user's settings)."""
    if not os.environ.get("DEBUGINFOD_URLS", "").strip():
        return False
    try:
        return str(gdb.parameter("debuginfod enabled")) != "off"
    except (RuntimeError, gdb.error):  # a GDB built without debuginfod
        return False


class DebugDeferral:
    """GDB's `debug-file-directory` cleared for one run of the program, put back at the first
    moment the user can look; `active` while it is cleared."""

    def __init__(self) -> None:
        self._saved = ""
        self.active = False
        self._loaded: list[gdb.Objfile] = []   # libraries GDB loaded meanwhile
        self._pending = False                   # their debug files still to read
        self._at_prompt = False                 # ... at the next prompt

    def start(self, guard: str) -> bool:
        """Clear the setting for the coming run when nothing needs GDB's reading of the debug
        files (the module's docstring); whether it did."""
        saved = str(gdb.parameter(_PARAMETER) or "")
        if (self.active or not saved or guard or symbolizer() is None
                or _debuginfod_possible() or any(b.visible for b in gdb.breakpoints())):
            return False
        gdb.execute(f"set {_PARAMETER}", to_string=True)
        self._saved = saved
        self.active = True
        self._loaded = []
        gdb.events.new_objfile.connect(self._on_new_objfile)
        gdb.events.stop.connect(self._on_stop)
        gdb.events.breakpoint_created.connect(self._on_breakpoint)
        gdb.events.exited.connect(self._on_exited)
        return True

    def _on_new_objfile(self, event: gdb.NewObjFileEvent) -> None:
        if self.active and event.new_objfile.owner is None:
            self._loaded.append(event.new_objfile)

    def _on_stop(self, _event: gdb.StopEvent) -> None:
        read = self.finish(read=True)
        if not read:
            return
        try:
            if gdb.solib_name(gdb.newest_frame().pc()) in read:
                # GDB printed the stop's location before any Python ran, from the library's
                # symbol table alone: again, with its source line now
                gdb.execute("frame")
        except (RuntimeError, gdb.error):
            pass

    def _on_breakpoint(self, breakpoint: gdb.Breakpoint) -> None:
        if breakpoint.visible:  # the user's: its locations from the debug information
            self.finish(read=True)

    def _on_exited(self, _event: gdb.ExitedEvent) -> None:
        self.finish(read=False)  # read at the next prompt, if there is one

    def _on_prompt(self) -> None:
        self.finish(read=True)

    def finish(self, read: bool) -> set[str]:
        """The user's setting back (once); with READ, the debug files of the libraries loaded
        meanwhile read now, else at the next prompt. Returns the libraries whose debug files
        GDB read now."""
        if self.active:
            self.active = False
            self._pending = True
            gdb.execute(f"set {_PARAMETER} {self._saved}", to_string=True)
            for registry, handler in ((gdb.events.new_objfile, self._on_new_objfile),
                                      (gdb.events.stop, self._on_stop),
                                      (gdb.events.breakpoint_created, self._on_breakpoint),
                                      (gdb.events.exited, self._on_exited)):
                registry.disconnect(handler)
        if not self._pending:
            return set()
        if not read:
            if not self._at_prompt:
                self._at_prompt = True
                gdb.events.before_prompt.connect(self._on_prompt)
            return set()
        self._pending = False
        if self._at_prompt:
            self._at_prompt = False
            gdb.events.before_prompt.disconnect(self._on_prompt)
        loaded, self._loaded = self._loaded, []
        roots = tuple(r for r in self._saved.split(os.pathsep) if r)
        owners = {o.owner for o in gdb.objfiles() if o.is_valid() and o.owner is not None}
        read_now: set[str] = set()
        for objfile in loaded:
            if not objfile.is_valid() or objfile in owners:
                continue
            path = debug_file(objfile, roots)
            if path is not None:
                try:
                    objfile.add_separate_debug_file(path)
                except (RuntimeError, gdb.error):
                    continue
                read_now.add(objfile.filename)
        return read_now
