"""The recordings of this GDB, in one place: the current one (armed, recording or ended), the
condition `memdump break` set for every recording to come, and what the last `memdump leaks`
listed. The `memdump` command and the attach window (window.py) both read them here.

GDB glue only: a recording's end (exit, kill, detach: GDB's events, which the session follows)
comes back here through `Session.on_program_end`, where the command arms the next run.
"""

from __future__ import annotations

from typing import Any

from ..core.breakcond import BreakCondition
from .session import Session, State

__all__ = ["RECORDINGS", "Recordings"]


class Recordings:
    """What `memdump` keeps between commands (one per GDB: RECORDINGS)."""

    def __init__(self) -> None:
        #: the last recording started or armed; None before the first `memdump`
        self.current: Session | None = None
        #: `memdump break`'s condition: every recording from now on stops at its events
        self.break_condition: BreakCondition | None = None
        #: the groups the last `memdump leaks` listed, in its order (`memdump block-list N`)
        self.last_groups: list[Any] = []
        #: dump path -> what its last `memdump leaks` found (`--increased`, `--changed`)
        self.previous_leaks: dict[str, Any] = {}

    def active(self) -> Session | None:
        """The recording that is armed or recording, None when there is none or it ended."""
        current = self.current
        return current if current is not None and current.state != State.ENDED else None

    def next_run_armed(self) -> bool:
        """Whether the next run is armed by itself (the previous one ended)."""
        current = self.current
        return current is not None and current.again and current.state == State.ARMED

    def queried(self) -> Session | None:
        """The recording the queries report on: the last one when the next is only armed by
        itself; None before the first `memdump`."""
        current = self.current
        if self.next_run_armed() and current is not None and current.previous is not None:
            return current.previous
        return current


RECORDINGS = Recordings()
