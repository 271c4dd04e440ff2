"""The recordings of this GDB, in one place: per inferior, the current recording (armed,
recording or ended), the groups its last `memdump leaks` listed and what that check found; for
every inferior, the condition `memdump break` set for every recording to come. The `memdump`
command and the attach window (window.py) both read them here.

What is kept, and what clears it (GDB's events; `connect()` hooks them once):
- recordings are per inferior (`gdb.selected_inferior().num`): after `add-inferior` and
  `inferior 2`, `memdump status` speaks of inferior 2's recording, if any, and inferior 1's stays
  as it was; an inferior removed (`remove-inferiors`: `gdb.events.inferior_deleted`) takes its
  recording, armed or ended, out of the registry;
- `last_groups`, the numbers `memdump block-list N` refers to, name the groups of one run: they
  are cleared when a new run of that inferior's recording starts (its dump opens), not when the
  run ends (after the exit, `memdump leaks` then `memdump block-list 1` still work);
- `previous_leaks`, what `memdump leaks --increased`/`--changed` compares with, survives new
  runs (the point of it: does the leak grow from run to run?) and is cleared when the inferior's
  program changes (`file ./other`, an exec: `gdb.events.new_objfile`/`clear_objfiles` with
  another `progspace.filename`).

GDB glue only: a recording's start and end (exit, kill, detach: GDB's events, which the session
follows) come back here through `Recording.on_start`/`Recording.on_program_end`, where the command
arms the next run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gdb

from ..core.breakcond import BreakCondition
from .recording import Recording, State

__all__ = ["RECORDINGS", "InferiorRecordings", "Recordings"]


@dataclass
class InferiorRecordings:
    """What `memdump` keeps for one inferior between commands."""

    #: the last recording started or armed in this inferior; None before the first `memdump`
    current: Recording | None = None
    #: the groups the last `memdump leaks` of the current run listed, in its order (block-list N)
    last_groups: list[Any] = field(default_factory=list)
    #: what the previous `memdump leaks` found (`--increased`, `--changed`), None before one
    previous_leaks: Any = None
    #: the program `previous_leaks` was found in (its `progspace.filename`)
    program: str | None = None


class Recordings:
    """The recordings of every inferior (one per GDB: RECORDINGS)."""

    def __init__(self) -> None:
        #: `memdump break`'s condition: every recording from now on stops at its events
        self.break_condition: BreakCondition | None = None
        self._inferiors: dict[int, InferiorRecordings] = {}
        self._connected = False

    # -- the selected inferior's --------------------------------------------------------------
    def here(self) -> InferiorRecordings:
        """The selected inferior's recordings (made empty on first use)."""
        return self._inferiors.setdefault(gdb.selected_inferior().num, InferiorRecordings())

    @property
    def current(self) -> Recording | None:
        """The selected inferior's last recording started or armed."""
        slot = self._inferiors.get(gdb.selected_inferior().num)
        return slot.current if slot is not None else None

    @current.setter
    def current(self, session: Recording | None) -> None:
        self.here().current = session

    def active(self) -> Recording | None:
        """The recording that is armed or recording, None when there is none or it ended."""
        current = self.current
        return current if current is not None and current.state != State.ENDED else None

    def next_run_armed(self) -> bool:
        """Whether the next run is armed by itself (the previous one ended)."""
        current = self.current
        return current is not None and current.again and current.state == State.ARMED

    def queried(self) -> Recording | None:
        """The recording the queries report on: the last one when the next is only armed by
        itself; None before the first `memdump`."""
        current = self.current
        if self.next_run_armed() and current is not None and current.previous is not None:
            return current.previous
        return current

    def inferiors(self) -> list[int]:
        """The numbers of the inferiors that have a recording (armed, recording or ended)."""
        return sorted(num for num, slot in self._inferiors.items() if slot.current is not None)

    # -- GDB's events ---------------------------------------------------------------------------
    def connect(self) -> None:
        """Follow GDB's events that clear what is kept (once per GDB)."""
        if self._connected:
            return
        gdb.events.inferior_deleted.connect(self._inferior_deleted)
        gdb.events.new_objfile.connect(self._program_changed)
        gdb.events.clear_objfiles.connect(self._program_changed)
        self._connected = True

    def run_started(self, session: Recording) -> None:
        """SESSION's dump opened (a run, an attach): the group numbers of the previous run name
        nothing any more."""
        slot = self._inferiors.get(session.inferior.num)
        if slot is not None:
            slot.last_groups = []

    def _inferior_deleted(self, event: Any) -> None:
        slot = self._inferiors.pop(event.inferior.num, None)
        if slot is not None and slot.current is not None:
            slot.current.finish("stop")  # armed: no process to record any more

    def _program_changed(self, event: Any) -> None:
        for inferior in gdb.inferiors():
            slot = self._inferiors.get(inferior.num)
            if slot is None or slot.program is None or not inferior.is_valid():
                continue
            if inferior.progspace.filename != slot.program:
                slot.previous_leaks = slot.program = None


RECORDINGS = Recordings()
