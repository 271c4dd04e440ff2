"""Where a memdump recording is written: the path given, or the first free default name.

gdb-free. The default is `PROGRAM.PID.memdump` in the current directory; after `memdump -o
DIR/NAME.memdump` recorded a run, the next runs go to `DIR/NAME-2.memdump`, `-3`, ... A default
name never overwrites a file: it is created exclusively (O_EXCL), so two recorders cannot share
one. docs/memdump.md ("Recording") describes it for the user.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

__all__ = ["COMPACT_PENDING", "DumpPathError", "candidates", "create_dump", "open_dump"]

EXTENSION = ".memdump"
#: names tried before giving up (NAME-999)
_TRIES = 1000
#: the extended attribute that leaves a finished text dump to its first report to compact
#: (memdump.compact.defer; the analyser's compactfile.PENDING, which a test ties to it)
COMPACT_PENDING = "user.memdump.compact"


class DumpPathError(Exception):
    """The dump cannot be written where it should go; the message says why."""


def _open(path: str, exclusive: bool) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
    try:
        return os.open(path, flags, 0o600)  # a dump names every path and function: as a core
    except OSError as exc:
        if exclusive and exc.errno == errno.EEXIST:
            raise
        raise DumpPathError(f"cannot write the dump to {path}: {exc.strerror}") from None


def open_dump(path: str) -> int:
    """A descriptor on PATH for writing, truncated (the user named it); DumpPathError if not.
    An earlier recording's mark for compaction (COMPACT_PENDING) is taken off: this one is not
    finished."""
    fd = _open(path, exclusive=False)
    try:
        os.removexattr(fd, COMPACT_PENDING)
    except OSError:  # none (ENODATA), or no extended attributes on this file system
        pass
    return fd


def candidates(program: str, pid: int, series: str | None) -> tuple[str, str, Iterator[str]]:
    """(base, extension, the names to try in order) for a recording of PROGRAM as process PID,
    or for the next run of SERIES (the path an earlier run of this series was written to)."""
    base = f"{os.path.basename(program) or 'program'}.{pid}"
    ext = EXTENSION
    first = 1
    if series is not None:
        # `memdump -o DIR/NAME.memdump` recorded an earlier run: DIR/NAME-2.memdump, -3, ...
        base, ext = os.path.splitext(series) if series.endswith(EXTENSION) else (series, "")
        first = 2
    names = (f"{base}{ext}" if n == 1 else f"{base}-{n}{ext}" for n in range(first, _TRIES))
    return base, ext, names


def create_dump(program: str, pid: int, series: str | None) -> tuple[int, str]:
    """(descriptor, path) of a new file under the first free name of `candidates`."""
    base, ext, names = candidates(program, pid, series)
    for path in names:
        try:
            return _open(path, exclusive=True), path
        except FileExistsError:
            continue
    raise DumpPathError(f"no free dump name {base}*{ext} in {os.getcwd()}")
