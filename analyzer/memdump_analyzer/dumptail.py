"""A text dump's last event known before it is read: its `end SEQ REASON DETAIL` record
(docs/dump-format.md), found by reading the file's tail backwards a few KiB at a time. The exports
whose snapshots fall every `last_seq // N` events (massif, the HTML page) need the last SEQ before
their pass; only a dump whose last record is a whole `end` line tells it: after a crash, a SIGKILL,
a cut last line, records after the `end` or anything else doubtful, the answer is None (and the
caller reads the dump first, as without this module). A compact dump's `end` line is a literal of
its last block, which the C library decodes alone (`compactfile.last_line`)."""

from __future__ import annotations

import os

from .compact import is_compact
from .compactfile import last_line

__all__ = ["end_seq"]

#: how much of the tail is read at a time, and at most (the `end` line and the padding after it)
STEP = 4096
LIMIT = 1 << 20


def end_seq(path: str) -> int | None:
    """The SEQ of the dump `path`'s `end` record when it is the dump's last record, whole;
    None when it is not, or cannot be told from the tail (the file's faults included)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if is_compact(f.read(16)):
                line = last_line(f.fileno())
                return None if line is None else _seq(line.rsplit(b"\0", 1)[-1])
            tail = b""
            pos = size
            while pos > 0 and len(tail) < LIMIT:
                step = min(STEP, pos)
                pos -= step
                f.seek(pos)
                tail = f.read(step) + tail
                found = _last_record(tail, pos == 0)
                if found is not None:
                    return _seq(found)
    except OSError:
        return None
    return None


def _last_record(tail: bytes, whole: bool) -> bytes | None:
    """The last record of the file whose last bytes are `tail` (`whole`: all of it): b"" when it
    is not a whole line (cut, or not begun within `tail`), None when more of the tail is needed."""
    body = tail.rstrip(b"\0")  # the recorder's padding past its last record
    if not body.endswith(b"\n"):
        return b"" if body or whole else None  # a cut last line; a tail of NULs alone: read on
    end = len(body) - 1
    while True:
        start = body.rfind(b"\n", 0, end) + 1
        if start == 0 and not whole:
            return None  # the line may begin before the tail
        line = body[start:end]
        if line.strip(b"\0"):
            return line.rsplit(b"\0", 1)[-1]  # padding, after a partial record, before it
        if start == 0:
            return b""
        end = start - 1  # a line of padding alone


def _seq(line: bytes) -> int | None:
    """SEQ of a whole `end SEQ REASON DETAIL` record, else None."""
    fields = line.split(b" ")
    if len(fields) != 4 or fields[0] != b"end" or not fields[1].isdigit() or not fields[2]:
        return None
    if not fields[3] or fields[1].startswith(b"0"):
        return None
    return int(fields[1])
