"""`memdump-analyze --compact` and `--text`: a dump rewritten, not analysed (compactfile.py
does the work; docs/dump-format.md, "The compact encoding")."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from . import compactfile
from .dumpfile import DumpError

__all__ = ["convert"]


def convert(dump: str, output: str | None, *, compact: bool, say: Callable[[str], None]) -> int:
    """--compact (`compact`: the text dump DUMP compacted over itself, or into OUTPUT, and the
    sizes said) or --text (any dump printed as its text records, into OUTPUT or to standard
    output). A dump that cannot be converted raises DumpError. Returns the exit status, 0."""
    try:
        if compact:
            before = os.path.getsize(dump) if os.path.isfile(dump) else 0
            compactfile.compact_file(dump, output)
            after = os.path.getsize(output or dump)
            say(f"{output or dump}: compacted, {before:,} bytes of text in {after:,}")
        elif output is not None:
            compactfile.text_file(dump, output)
        else:
            try:
                compactfile.print_text(dump, sys.stdout.buffer)
            except BrokenPipeError:
                # the reader went away (`| head`): nothing more to say
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
    except compactfile.CompactError as e:
        raise DumpError(e.path, None, e.message) from None
    return 0
