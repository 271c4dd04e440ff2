"""The leak report's replay and the views' pass in one run of the library: an output that needs
the analysis and the pass's figures (the HTML page) reads the dump once.

The library applies each event to the replay's blocks and to the pass's, each its own table
(analyzer/native/heap.c's `do_event`, memdump_core.h's `mdc_fig_with_replay`); the lines it
leaves to Python are read once by the reader and taken by both (native.py's `_Native`, the
replay's; nativepass.py's `_Pass`, the pass's). The run gives the `Replay` the replay alone would
give and the `Figures` the pass alone would (test_analyzer_onepass_page.py). Whatever either
cannot read exactly leaves the dump to the replay alone (native.py) or to Python, and the caller
then takes the pass on its own, as without this module.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from . import native, nativepass
from .passapi import Figures, NativeRequest

__all__ = ["replay_with_pass"]


def replay_with_pass(replayer: Callable[[], native.Replayer],
                     request: NativeRequest) -> tuple[Any, Figures] | None:
    """The replay of the dump of the `replayer()`s (new `replay._Replayer`s, one an attempt)
    with the library's pass of `request` in the same run: the `Replay` and the `Figures`, or
    None when the library is not there or left the dump (the reader is then as it was)."""
    lib = native.library() if native.enabled() else None
    lib = nativepass.typed_library(lib) if lib is not None else None
    compute, _, views = request.args[:3]
    if lib is None or not compute <= nativepass.NATIVE_PARTS \
            or not views <= nativepass.NATIVE_VIEWS:
        return None
    return native.attempt(replayer().reader,
                          lambda direct: _Both(replayer(), lib, direct, request).run())


class _Both(nativepass._Pass):
    """The library's run with the replay's and the views' pass's figures: `_Pass`'s lines and
    results, and `_Native`'s, the replay's, for each line too."""

    def __init__(self, replayer: native.Replayer, lib: ctypes.CDLL, direct: bool,
                 request: NativeRequest) -> None:
        compute, series, views, wanted, records = request.args
        super().__init__(replayer.reader, lib, compute, series, views, direct, wanted, records)
        self.rp = replayer
        self.max_errors = replayer.max_errors
        self.snap_seqs: list[int] = []
        self.snap_i = 0

    def _start(self) -> None:
        native._Native._start(self)
        super()._start()
        self.lib.mdc_fig_with_replay(self.ctx)

    def _line(self, line: bytes, fl: list[bytes], seq: int) -> int:
        if (self.series is not None or self.wanted) and not self.lib.fig_line(self.ctx):
            raise native._Fallback("out of memory")
        rec = self.reader.other(line, fl, seq)
        after = self._read(fl, seq, rec)
        if rec is not None and self.rp._process(rec):  # exec: the image is gone, and its blocks
            self.lib.mdc_exec(self.ctx)
        return after

    def _results(self) -> tuple[Any, Figures]:  # type: ignore[override]
        figures = self._figures()
        self.lib.mdc_fig_done(self.ctx)
        return native._Native._results(self), figures
