"""A progress bar on stderr while a dump is read: bytes read, records a second, time left.

It appears only when reading takes over a second and stderr is a terminal (never in a pipe, a
file or CI's log), is redrawn at most five times a second from the reader's chunk callback (once
a MiB: nothing per record), and is erased when the reading ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["Progress"]

#: seconds before the bar appears, and between two drawings
DELAY = 1.0
REDRAW = 0.2


def _clock_text(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours
            else f"{rest // 60}:{rest % 60:02d}")


class Progress:
    """`on_read(offset, chunk)` for `DumpReader.on_read`; `total` bytes are to be read."""

    def __init__(self, stream: TextIO, label: str, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.label = label
        self.total = 0
        self.records = 0
        self.enabled = stream.isatty()
        self._clock = clock
        self._start = clock()
        self._next = self._start + DELAY
        self._drawn = 0  # width of what is on the line

    def on_read(self, offset: int, chunk: memoryview | int) -> None:
        """`offset` reached in the file, after the bytes `chunk` (or, from a compact dump's
        decoder, after `chunk` more records)."""
        if not self.enabled:
            return
        self.records += chunk if isinstance(chunk, int) else bytes(chunk).count(b"\n")
        now = self._clock()
        if now < self._next:
            return
        self._next = now + REDRAW
        self.draw(offset, now - self._start)

    def draw(self, offset: int, elapsed: float) -> None:
        total = max(self.total, offset, 1)
        rate = offset / elapsed if elapsed > 0 else 0.0
        left = _clock_text((total - offset) / rate) if rate else "?"
        width = 20
        filled = width * offset // total
        text = (f"{self.label}: [{'#' * filled}{'.' * (width - filled)}] "
                f"{offset / 2**20:,.1f} / {total / 2**20:,.1f} MiB, "
                f"{self.records / elapsed if elapsed > 0 else 0:,.0f} records/s, {left} left")
        pad = " " * max(0, self._drawn - len(text))
        self.stream.write(f"\r{text}{pad}")
        self.stream.flush()
        self._drawn = len(text)

    def done(self) -> None:
        """Erase the bar, if it was drawn."""
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
            self._drawn = 0
