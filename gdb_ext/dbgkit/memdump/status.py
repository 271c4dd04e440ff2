"""Where a recording is, and `memdump status`: what it has done so far, as GDB counts it (each
backend adds its own counts: the breakpoints' hooks, the in-process recorder's events)."""

from __future__ import annotations

import enum
import time
from typing import Any


class State(enum.Enum):
    """Where a recording is: armed (no process yet), recording, ended (for good)."""

    ARMED = "armed"
    RECORDING = "recording"
    ENDED = "ended"


def status_of(session: Any) -> dict[str, object]:  # noqa: ANN401 - a recording.Recording
    """The fields of `memdump status --json` (docs/memdump.md)."""
    elapsed = time.monotonic() - session.started
    running = session.running_time()
    writer = session.writer
    events = writer.events if writer else 0
    return {
        "state": session.state.value,  # `memdump status --json` prints the name
        "recorder": session.mode,
        "path": session.path,
        "pid": session.pid,
        "events": events,
        "elapsed_s": round(elapsed, 3),
        "running_s": round(running, 3),
        "events_per_s": round(events / running, 1) if running > 0 else 0.0,
        "pending_calls": len(session.pending),
        "hooks": 0,
        "live_blocks": len(session.live),
        "scan": session.scan_status,
        "return_sites": 0,
        "dump_bytes": writer.bytes_written if writer else 0,
        "interned": writer.counts if writer else {},
        "counts": dict(session.counts),
        "ended": session.ended_reason or None,
    }
