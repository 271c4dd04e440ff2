"""`--format pprof`'s samples in libmemdump_core.so (analyzer/native/pprof.c): the stacks' frames
numbered and cut into their locations, and the Sample messages written, in C. pprof.py's loop
is the reference and the fallback (MEMDUMP_NATIVE=0, or a library without these functions),
held to this by test_analyzer_nativegroups.py's byte-for-byte exports on generated dumps."""

from __future__ import annotations

import ctypes
import functools
from array import array
from collections.abc import Callable, Sequence
from itertools import chain

from .. import native
from ..dumpfile import Frame
from ..nativegroups import address, typed
from .profile import StackFigures

__all__ = ["samples"]

_P = ctypes.c_void_p
_U64 = ctypes.c_uint64
_I64 = ctypes.c_int64
_SIGNATURES = {  # name: (restype, argtypes)
    "mdc_pprof_frames": (_I64, [_P, _U64, _P, _P]),
    "mdc_pprof_runs": (_I64, [_P, _P, _U64, _P, _P, _P, _P, _P]),
    "mdc_pprof_samples": (_U64, [_P, _P, _U64, _P, _P, _P]),
}


@functools.cache
def _typed(lib: ctypes.CDLL) -> ctypes.CDLL | None:
    return typed(lib, _SIGNATURES)


def _zeros(code: str, n: int) -> array:
    return array(code, [0]) * max(1, n)


def samples(rows: Sequence[StackFigures], modules: Callable[[list[Frame]], None],
            location: Callable[[tuple[Frame, ...]], int]) -> bytes | None:
    """The Sample messages of `rows`, as pprof.py's loop writes them, or None without the
    library. `modules` is called first with the distinct frames, then `location` with each
    distinct run of frames (a location) in the order the loop meets them."""
    if not native.enabled():
        return None
    lib = native.library()
    lib = _typed(lib) if lib is not None else None
    if lib is None:
        return None
    ids = array("q", map(id, chain.from_iterable(row.frames for row in rows)))
    n = len(ids)
    off = array("q", [0])
    off.extend(map(len, (row.frames for row in rows)))
    for i in range(1, len(off)):  # the rows' ends
        off[i] += off[i - 1]
    ix, first = _zeros("i", n), _zeros("q", n)
    n_frames = lib.mdc_pprof_frames(address(ids or array("q", [0])), n, address(ix),
                                    address(first))
    if n_frames < 0:
        return None
    del ids
    # each distinct frame, from its first row (the rows' frames are found by position)
    ends = off.tolist()
    row_at = 0
    frames: list[Frame] = []
    for pos in first[:n_frames]:
        while ends[row_at + 1] <= pos:
            row_at += 1
        frames.append(rows[row_at].frames[pos - ends[row_at]])
    modules(frames)
    inlined = bytearray(f.inlined for f in frames) or bytearray(1)
    runs, run_off = _zeros("i", n), _zeros("q", len(rows) + 1)
    run_frames, run_at = _zeros("i", n), _zeros("q", n + 1)
    n_runs = lib.mdc_pprof_runs(address(ix), address(off), len(rows), address(inlined),
                                address(runs), address(run_off), address(run_frames),
                                address(run_at))
    if n_runs < 0:
        return None
    at, pick = run_at.tolist(), run_frames.tolist()
    loc = array("q", (location(tuple(map(frames.__getitem__, pick[a:b])))
                      for a, b in zip(at[:n_runs], at[1:n_runs + 1], strict=True)))
    values = array("q", chain.from_iterable(
        (row.alloc_blocks, row.alloc_bytes, row.leaked_blocks, row.leaked_bytes) for row in rows))
    out = bytearray(80 * len(rows) + 10 * run_off[len(rows)] + 1)
    size = lib.mdc_pprof_samples(address(runs), address(run_off), len(rows),
                                 address(loc or array("q", [0])),
                                 address(values or array("q", [0])), address(out))
    return bytes(out[:size])
