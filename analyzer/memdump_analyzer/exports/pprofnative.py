"""`--format pprof`'s samples in libmemdump_core.so (analyzer/native/pprof.c): the stacks' frames,
numbered as the library's stack rows number them (nativegroups.py's `StackRows`, handed over
flat), cut into their locations, and the Sample messages written, in C. pprof.py's loop
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
from ..nativegroups import StackRows, address, typed
from .profile import StackFigures

__all__ = ["RUNS_ROOM", "samples"]

_P = ctypes.c_void_p
_U64 = ctypes.c_uint64
_I64 = ctypes.c_int64
_SIGNATURES = {  # name: (restype, argtypes)
    "mdc_pprof_gather": (_I64, [_P, _P, _U64, _P, _U64, _P, _P, _P, _P, _U64]),
    "mdc_pprof_runs": (_I64, [_P, _P, _U64, _P, _P, _P, _P, _P, _U64]),
    "mdc_pprof_samples": (_U64, [_P, _P, _U64, _P, _P, _P]),
}


#: the room first given to the distinct runs' frames (grown eightfold while short)
RUNS_ROOM = 1 << 16


@functools.cache
def _typed(lib: ctypes.CDLL) -> ctypes.CDLL | None:
    return typed(lib, _SIGNATURES)


def _zeros(code: str, n: int) -> array:
    return array(code, [0]) * max(1, n)


def _or_one(a: array) -> array:
    """`a`, or an array of one zero when it is empty (an address to hand over)."""
    return a or array(a.typecode, [0])


def samples(rows: Sequence[StackFigures], table: StackRows | None,
            modules: Callable[[list[Frame]], None],
            location: Callable[[tuple[Frame, ...]], int]) -> bytes | None:
    """The Sample messages of `rows`, as pprof.py's loop writes them, or None without the
    library. `table`: the library's stack rows (a row's `row` its place there), whose frames are
    read as its flat table numbers them; the others' frames are numbered here by identity.
    `modules` is called first with the distinct frames, then `location` with each distinct run of
    frames (a location) in the order the loop meets them."""
    if not native.enabled():
        return None
    lib = native.library()
    lib = _typed(lib) if lib is not None else None
    if lib is None:
        return None
    if table is None:
        table = StackRows(array("q"), [], [], [], array("i"), array("q", [0]))
    # frame k is objs[k]: the table's entries, then the other rows' frames, each object once
    objs = list(table.entries)
    sel = array("q", [row.row for row in rows])
    ext, ext_ends = array("i"), array("q", [0])
    if any(r < 0 for r in sel):
        number = {id(f): k for k, f in enumerate(objs)}
        for row in rows:
            if row.row >= 0:
                continue
            for f in row.frames:
                k = number.get(id(f))
                if k is None:
                    k = number[id(f)] = len(objs)
                    objs.append(f)
                ext.append(k)
            ext_ends.append(len(ext))
    room = len(table.index) + len(ext)
    ix, off = _zeros("i", room), _zeros("q", len(rows) + 1)
    n = lib.mdc_pprof_gather(address(_or_one(table.index)), address(_or_one(table.ends)),
                             len(table.ends) - 1, address(_or_one(sel)), len(rows),
                             address(_or_one(ext)), address(ext_ends), address(ix),
                             address(off), room)
    if n < 0:
        return None
    inlined = bytearray(f.inlined for f in objs) or bytearray(1)
    runs, run_off = _zeros("i", n), _zeros("q", len(rows) + 1)
    # the distinct runs' frames: far fewer than the stacks' (2,843 runs of 2M frames on
    # cppcheck's recording), their room grown when short
    room = min(n, RUNS_ROOM)
    while True:
        run_frames, run_at = _zeros("i", room), _zeros("q", room + 1)
        n_runs = lib.mdc_pprof_runs(address(ix), address(off), len(rows), address(inlined),
                                    address(runs), address(run_off), address(run_frames),
                                    address(run_at), room)
        if n_runs != -2 or room >= n:
            break
        room = min(n, 8 * room)
    if n_runs < 0:
        return None
    at = run_at[:n_runs + 1].tolist()
    pick = run_frames[:at[-1]].tolist()
    # every frame is in a run: the runs' frames are the distinct frames
    modules([objs[k] for k in dict.fromkeys(pick)])
    loc = array("q", (location(tuple(map(objs.__getitem__, pick[a:b])))
                      for a, b in zip(at[:-1], at[1:], strict=True)))
    values = array("q", chain.from_iterable(
        (row.alloc_blocks, row.alloc_bytes, row.leaked_blocks, row.leaked_bytes) for row in rows))
    out = bytearray(80 * len(rows) + 10 * run_off[len(rows)] + 1)
    size = lib.mdc_pprof_samples(address(runs), address(run_off), len(rows),
                                 address(_or_one(loc)), address(_or_one(values)), address(out))
    return bytes(out[:size])
