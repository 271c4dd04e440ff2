"""The time a program runs while recorded, not the time it sits stopped at GDB's prompt.

gdb-free: the caller passes the registry of GDB's `cont` events (gdb.events.cont), or any object
with connect and disconnect. The clock listens to it only while the program is stopped, so the
breakpoints that do not stop (the recorder's hot path) never reach it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["RunClock"]


class EventRegistry(Protocol):
    def connect(self, handler: Callable[[object], None]) -> None: ...

    def disconnect(self, handler: Callable[[object], None]) -> None: ...


class RunClock:
    """Seconds from each `cont` event to the next stop, summed."""

    def __init__(self, cont: EventRegistry, now: Callable[[], float] = time.monotonic) -> None:
        self._cont = cont
        self._now = now
        self._total = 0.0
        self._since: float | None = None  # None while the program is stopped
        self._watching = False

    def running(self, since: float | None = None) -> None:
        """The program runs from SINCE (default: now), as when GDB starts it."""
        self._since = self._now() if since is None else since

    def stopped(self) -> None:
        """The program stopped: count up to now, and wait for it to go on."""
        self._count()
        if not self._watching:
            self._cont.connect(self._on_cont)
            self._watching = True

    def close(self) -> None:
        """The recording ended: count up to now and stop listening."""
        self._count()
        if self._watching:
            self._cont.disconnect(self._on_cont)
            self._watching = False

    def seconds(self) -> float:
        if self._since is None:
            return self._total
        return self._total + self._now() - self._since

    def _count(self) -> None:
        if self._since is not None:
            self._total += self._now() - self._since
            self._since = None

    def _on_cont(self, event: object) -> None:
        if self._since is None:
            self._since = self._now()
        self._cont.disconnect(self._on_cont)
        self._watching = False
