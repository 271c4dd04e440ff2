"""The stacks' walks through libmemdump_core.so (analyzer/native/groups.c) on the library's table of
stack nodes, for a dump read by the library (native.py): each node's group as the views show it
(views/common.py's `trimmed_nodes` then its frames' keys, made once per node in C), and the
frames a set of stacks reaches (symbolize.py's `frames_without_symbols`). Each returns None when
the library or its table is not there, or when the C walk found something it leaves to Python (an
undefined node or frame: the Python walk then says what is wrong); Python's walks are the
reference, held to these by the randomised test in test_analyzer_views.py."""

from __future__ import annotations

import ctypes
import functools
from array import array
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import native
from .dumpfile import DumpReader, Frame
from .rules import is_allocator_frame, is_main_frame

__all__ = ["StackRows", "node_groups", "reached_frames", "stack_rows"]

_P = ctypes.c_void_p
_U64 = ctypes.c_uint64
_SIGNATURES = {  # name: (restype, argtypes)
    "mdc_group_nodes": (ctypes.c_int, [_P, _P, _P, _U64, _P, _P, _P, _P, _U64, _P, _U64, _P]),
    "mdc_reached_frames": (_U64, [_P, _P, _P, _U64, _U64, _P, _U64, _P]),
    "mdc_stack_rows": (ctypes.c_int64, [_P, _P, _U64, _P, _P, _P, _P, _P, _U64, _P, _P, _P, _U64,
                                        _P]),
}
#: frame ids this far beyond the dump's number of frames are left to Python (no sparse tables)
_SPARSE = 1 << 16


def typed(lib: ctypes.CDLL, signatures: dict[str, tuple[Any, list[Any]]]) -> ctypes.CDLL | None:
    """`lib` with the functions of `signatures` (name: (restype, argtypes)) typed, or None when
    it has not all of them (a library built before these)."""
    try:
        for name, (restype, argtypes) in signatures.items():
            getattr(lib, name).restype = restype
            getattr(lib, name).argtypes = argtypes
    except AttributeError:
        return None
    return lib


@functools.cache
def _typed(lib: ctypes.CDLL) -> ctypes.CDLL | None:
    return typed(lib, _SIGNATURES)


def address(buffer: Any) -> int:  # noqa: ANN401 - a writable buffer (memoryview, array)
    """The address of a writable buffer's first byte, for the library."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


_address = address


def _tables(reader: DumpReader) -> tuple[ctypes.CDLL, int, tuple[int, int, int]] | None:
    """The library and the addresses of the node table's flags, parents and frames, and its
    size, or None."""
    nodes = reader.nodes
    if not getattr(nodes, "_final", False) or not native.enabled():
        return None
    lib = native.library()
    lib = _typed(lib) if lib is not None else None
    cap = getattr(nodes, "_cap", 0)
    if lib is None or not cap:
        return None
    try:
        views = (nodes._flags, nodes._parents, nodes._frames)  # type: ignore[attr-defined]
        return lib, cap, tuple(map(_address, views))  # type: ignore[return-value]
    except (TypeError, ValueError, AttributeError):
        return None


def _frame_bound(reader: DumpReader) -> int | None:
    """One more than the largest frame id, or None when the ids are too sparse."""
    top = max(reader.frames, default=-1) + 1
    return top if top <= 4 * len(reader.frames) + _SPARSE else None


class _Grouped:
    """The library's groups of a reader's nodes (`node_groups`) and what made them: the node
    table, each frame's entries (frame f's frames are entries off[f]..off[f + 1], its own frame
    then the code inlined into it, outermost last), how many of them lead as allocator frames,
    its outermost main, and each entry's frame and key."""

    def __init__(self, lib: ctypes.CDLL, cap: int, tables: tuple[int, int, int], off: array,
                 lead: array, main: array, gid: array, entries: list[Frame],
                 entry_keys: list[Hashable]) -> None:
        self.lib, self.cap, self.tables = lib, cap, tables
        self.off, self.lead, self.main, self.gid = off, lead, main, gid
        self.entries, self.entry_keys = entries, entry_keys


def _grouped(reader: DumpReader, key_of: Callable[[Frame], Hashable],
             nodes: Iterable[int] | None = None) -> _Grouped | None:
    """The library's groups of every node, or of `nodes` alone (the others' -1)."""
    tables = _tables(reader)
    n_frames = _frame_bound(reader)
    if tables is None or n_frames is None:
        return None
    lib, cap, (flags, parents, frames) = tables
    table, inlined_into = reader.frames, reader.inlined_into
    # frame f's keys are keys[off[f]:off[f + 1]]: none for a frame the dump has not defined
    off = array("q", bytes(8 * (n_frames + 1)))
    lead, main = array("i", bytes(4 * n_frames)), array("i", bytes(4 * n_frames))
    entries: list[Frame] = []
    for frame in range(n_frames):
        off[frame] = len(entries)
        f = table.get(frame)
        if f is None:
            continue
        outer = inlined_into.get(frame)
        if outer:
            fs = (f, *outer)
            n = 0
            while n < len(fs) and is_allocator_frame(fs[n]):
                n += 1
            lead[frame] = n
            main[frame] = next((i for i in range(len(fs) - 1, -1, -1) if is_main_frame(fs[i])),
                               -1)
            entries.extend(fs)
        else:  # most frames: no code inlined into them
            lead[frame] = is_allocator_frame(f)
            main[frame] = 0 if is_main_frame(f) else -1
            entries.append(f)
    off[n_frames] = len(entries)
    entry_keys = list(map(key_of, entries))
    ident: dict[Hashable, int] = {}
    keys = array("i", [ident.setdefault(key, len(ident) + 1) for key in entry_keys] or [0])
    if nodes is None:
        starts, n_starts, gid = None, 0, array("q", bytes(8 * cap))
    else:
        wanted = array("q", nodes)
        n_starts, gid = len(wanted), array("q", [-1]) * cap
        wanted = wanted or array("q", [0])  # (held until the call: its address is passed)
        starts = _address(wanted)
    if not lib.mdc_group_nodes(parents, frames, flags, cap, _address(off), _address(keys),
                               _address(lead), _address(main), n_frames, starts, n_starts,
                               _address(gid)):
        return None
    return _Grouped(lib, cap, (flags, parents, frames), off, lead, main, gid, entries,
                    entry_keys)


def node_groups(reader: DumpReader, key_of: Callable[[Frame], Hashable],
                nodes: Iterable[int] | None = None) -> Sequence[int] | None:
    """Each node's group (indexed by node id; -1: not a node): two nodes have the same group
    when their stacks, trimmed as `views.common.trimmed_nodes` trims them, have the same keys
    `key_of` frame by frame. With `nodes` (negated: marked), the groups of those alone (and -1
    for the others), the other nodes not walked."""
    grouped = _grouped(reader, key_of, nodes)
    return None if grouped is None else grouped.gid


@dataclass(frozen=True)
class StackRows:
    """`stack_rows`'s answer. Row r's trimmed frames are the entries `entries[i]` for i in
    `index[ends[r]:ends[r + 1]]` (handed over flat, as the library wrote them: pprof's samples
    read them so), as a tuple `frames[r]`, and their keys `keys[r]`; `row_of[i]` is the row of the
    i-th wanted node."""

    row_of: array
    frames: list[tuple[Frame, ...]]
    keys: list[tuple[Hashable, ...]]
    entries: list[Frame]
    index: array
    ends: array


def _sliced(items: list[Any], index: array, ends: list[int]) -> list[tuple[Any, ...]]:
    """The rows of `items` at `index`, row r's `index[ends[r]:ends[r + 1]]`, each a tuple: one
    tuple of them all made at once, then cut."""
    every = tuple(map(items.__getitem__, index))
    return [every[a:b] for a, b in zip(ends[:-1], ends[1:], strict=True)]


def stack_rows(reader: DumpReader, key_of: Callable[[Frame], Hashable], wanted: Sequence[int]
               ) -> StackRows | None:
    """The stacks of the nodes `wanted` in rows, one per group (`node_groups`), numbered as the
    groups are first met: each wanted node's row, and each row's trimmed frames (its first
    node's, as `views.common.trimmed_nodes` trims them) and their keys `key_of`."""
    grouped = _grouped(reader, key_of)
    if grouped is None:
        return None
    g = grouped
    flags, parents, frames = g.tables
    nodes = array("q", wanted) or array("q", [0])
    row_of, row_off = array("q", bytes(8 * len(nodes))), array("q", bytes(8 * (len(nodes) + 1)))
    need = ctypes.c_uint64(0)
    room = 24 * len(nodes)
    while True:
        out = array("i", [0]) * max(1, room)
        n_rows = g.lib.mdc_stack_rows(parents, frames, g.cap, _address(g.off), _address(g.lead),
                                      _address(g.main), _address(g.gid), _address(nodes),
                                      len(wanted), _address(row_of), _address(row_off),
                                      _address(out), room, ctypes.byref(need))
        if n_rows < 0:
            return None
        if need.value <= room:
            break
        room = need.value
    index, ends = out[:need.value], row_off[:n_rows + 1]
    bounds = ends.tolist()
    return StackRows(row_of[:len(wanted)], _sliced(g.entries, index, bounds),
                     _sliced(g.entry_keys, index, bounds), g.entries, index, ends)


def reached_frames(reader: DumpReader, nodes: Iterable[int]) -> list[int] | None:
    """The frames of the stacks of `nodes` (negated: marked), each once, in the order
    `symbolize.frames_without_symbols` meets them."""
    tables = _tables(reader)
    n_frames = _frame_bound(reader)
    if tables is None or n_frames is None:
        return None
    lib, cap, (flags, parents, frames) = tables
    starts = array("q", nodes) or array("q", [0])
    out = array("i", bytes(4 * max(1, min(cap, n_frames))))
    n = lib.mdc_reached_frames(parents, frames, flags, cap, n_frames, _address(starts),
                               len(starts), _address(out))
    if n == 2 ** 64 - 1:
        return None
    return out[:n].tolist()
