"""`--format heaptrack`'s events through libmemdump_core.so (analyzer/native/htexport.c), falling
back to heaptrackfile.py's loop.

The library reads the dump as it does for the leak report (native.py: the same decoding, a compact
dump's packed events straight from its decoder, the same lines left to `DumpReader.other`) and,
in place of the replay, writes heaptrack's `a`, `+` and `-` lines into the events' file, with its
own live blocks, allocation infos by (size, trace) and traces. The lines it leaves to Python are
read here as heaptrackfile.py reads them: a clock sample's `c` and `R` lines go into the library's
output between the events, `p exec` starts the file again, `end` says whether the program exited.
At the end the traces (frame, parent), their nodes, each info's node and the live blocks' infos
fill heaptrackfile's `_Events` as its own loop fills them. heaptrackfile.py stays the reference:
test_analyzer_heaptrack_native.py holds the two to the same file byte for byte, and whatever the
library cannot read exactly as the Python loop would is left to it (the dump read again from the
start, for the file or the exact `PATH:LINE: message`).
"""

from __future__ import annotations

import ctypes
import os
from array import array
from typing import Any, Protocol

from . import native
from .dumpfile import DumpReader
from .nativegroups import typed

__all__ = ["events", "library"]

_P = ctypes.c_void_p
_U = ctypes.c_uint64
_SIGNATURES = {  # name: (restype, argtypes)
    "mdc_ht_start": (ctypes.c_int, [_P, ctypes.c_int]),
    "mdc_ht_put": (ctypes.c_int, [_P, ctypes.c_char_p, _U]),
    "mdc_ht_exec": (ctypes.c_int, [_P]),
    "mdc_ht_end": (ctypes.c_int, [_P, _P]),
    "mdc_ht_live": (ctypes.c_int, [_P, _P, _U]),
}


class Run(Protocol):
    """What the library fills of heaptrackfile's `_Events`."""

    reader: DumpReader
    page_size: int
    program: str | None
    exited: bool
    trace_of: Any  # an iterable of the traces' stack nodes, in order (the dict's keys)
    traces: Any  # an iterable of the traces' (frame, parent), in order, read once
    live: dict[int, int]
    nodes: Any  # a sequence of ints: each info's stack node


def library() -> ctypes.CDLL | None:
    """The analyser's library with the export's functions, or None (missing, old, or
    MEMDUMP_NATIVE=0)."""
    lib = native.library() if native.enabled() else None
    return typed(lib, _SIGNATURES) if lib is not None else None


def events(run: Run, fd: int) -> bool:
    """`run`'s events written by the library into the file open as `fd` (from its start), and
    `run` filled; False when the library is not there or left the dump to Python (the reader is
    then as it was, the file to be cut)."""
    lib = library()
    if lib is None:
        return False
    return native.attempt(run.reader, lambda direct: _Export(run, lib, direct, fd).run()) \
        is not None


class _Export(native._Native):
    """The library's run with heaptrack's events in place of the replay's."""

    def __init__(self, run: Run, lib: ctypes.CDLL, direct: bool, fd: int) -> None:
        self.out = run
        self.reader = run.reader
        self.max_errors = 0
        self.lib = lib
        self.direct = direct
        self.fd = fd
        self.ctx = 0
        self.n_frames = 0
        self.marked: set[int] = set()
        self.program: str | None = None
        self.exited = False

    def _start(self) -> None:
        if not self.lib.mdc_ht_start(self.ctx, self.fd):
            raise native._Fallback("out of memory")

    def _line(self, line: bytes, fl: list[bytes], seq: int) -> int:
        rec = self.reader.other(line, fl, seq)
        ok = True
        if fl[0] == b"c":
            millis, rss = self.reader.clock
            text = b"c %x\n" % millis
            if rss:
                text += b"R %x\n" % (rss // self.out.page_size)
            ok = self.lib.mdc_ht_put(self.ctx, text, len(text))
        elif rec is not None:
            seq += 1
            if rec[0] == b"p" and rec[2] == b"exec":
                self.program = rec[4].decode(errors="replace")
                ok = self.lib.mdc_ht_exec(self.ctx)
            elif rec[0] == b"end":
                self.exited = rec[2] == b"exit"
        if not ok:
            raise native._Fallback("the events' file")
        return seq

    def _results(self) -> bool:
        lib, ctx, run = self.lib, self.ctx, self.out
        out = (ctypes.c_uint64 * 5)()
        error = lib.mdc_ht_end(ctx, out)
        if error:
            raise OSError(error, os.strerror(error))
        n_traces, n_infos, n_live = out[1], out[3], out[4]
        rows = native.copied("q", 3 * n_traces, out[0] + 24)
        infos = native.copied("i", n_infos, out[2])
        live = array("Q", bytes(8 * n_live))
        if not lib.mdc_ht_live(ctx, live.buffer_info()[0], n_live):
            raise native._Fallback("live blocks")
        k = native._COUNTS()
        lib.mdc_counts(ctx, ctypes.byref(k))
        self._finish_reader(k.tid)
        frames, parents, nodes = rows[0::3], rows[1::3], rows[2::3]
        run.program = self.program
        run.exited = self.exited
        run.traces = zip(frames, parents, strict=True)  # no list: 40 MiB for 358k traces
        run.trace_of = nodes
        run.nodes = infos
        run.live = dict(enumerate(live))
        return True
