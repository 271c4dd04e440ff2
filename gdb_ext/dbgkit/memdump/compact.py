"""The dump compacted when its recording ends (`set memdump compact on`, the default;
docs/dump-format.md, "Compact encoding"; docs/memdump.md, "Compaction"): left to its first report,
which reads the text anyway and compacts it meanwhile on another core (`defer`: the extended
attribute `COMPACT_PENDING` on the file), or, where the file system keeps no such attribute, by the
analyser's compactor now (`compact`: memdump_analyzer's compactfile, which gdb_ext/memdump.py puts
on the path), in C when its library is built. The compact file is written beside the dump and
renamed over it only when complete: a failure leaves the text dump and says why in one line. No
GDB API: the recording (recording.py) calls it."""

from __future__ import annotations

import os

from .. import output
from ..core import builtfiles
from ..core.dumpnames import COMPACT_PENDING
from .checks import CMD

__all__ = ["compact", "defer"]


def defer(path: str) -> bool:
    """Leave the finished text dump PATH to its first report to compact (an analyser that reads
    it compacts it meanwhile), or compact it now where the file system keeps no extended
    attributes; whether it is (or will be) compact."""
    try:
        with open(path, "rb") as fh:
            if fh.read(7) != b"MEMDUMP":
                return False
        os.setxattr(path, COMPACT_PENDING, b"1")
    except OSError:
        return compact(path)
    output.info(CMD, f"{path}: compacted by its first report (or now: "
                     f"{builtfiles.ANALYZE} --compact {path})")
    return True


def compact(path: str) -> bool:
    """Rewrite the text dump PATH compact; whether it was. A dump that is not text (empty: no
    recording started) is left as it is."""
    try:
        before = os.path.getsize(path)
        with open(path, "rb") as fh:
            if fh.read(7) != b"MEMDUMP":
                return False
    except OSError:
        return False
    try:
        from memdump_analyzer.compactfile import CompactError, compact_file
    except ImportError as exc:
        output.warn(CMD, f"could not compact {path} (no analyser: {exc}); the dump stays text")
        return False
    try:
        compact_file(path)
    except CompactError as exc:
        output.warn(CMD, f"could not compact {exc.path}: {exc.message}; the dump stays text")
        return False
    output.info(CMD, f"{path}: compacted, {before:,} bytes of text in "
                     f"{os.path.getsize(path):,}")
    return True
