"""The dump compacted when its recording ends (`set memdump compact on`, the default;
docs/dump-format.md, "Compact encoding"): by the analyser's compactor (memdump_analyzer's
compactfile, which gdb_ext/memdump.py puts on the path), in C when its library is built. The text
is written beside the dump and renamed over it only when complete: a failure leaves the text dump
and says why in one line. No GDB API: the session (memdump_session) calls it."""

from __future__ import annotations

import os

from . import output
from .memdump_checks import CMD

__all__ = ["compact"]


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
