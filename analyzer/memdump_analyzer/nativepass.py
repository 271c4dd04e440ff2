"""The views' pass through libmemdump_core.so (analyzer/native/figures.c, series.c, moments.c),
falling back to heappass.py's loop.

The library reads the dump as it does for the leak report (native.py: the same decoding, the same
lines left to `DumpReader.other`) and computes, in place of the replay, what heappass.py's loop
computes inline: per allocating stack its live, peak and allocated figures, the peak, the live
blocks, and the parts of `PARTS` when asked for (`temporary`, `lifetimes`, `sizes`, and the
`timeline`'s series: its spans, each tag's bytes in them, the fragmentation samples), and the
moments the accumulators declared (passapi's `wanted_moments`: the live heap after chosen events,
with its live bytes by stack or its live blocks and their tags). It hands them over at the end as
tables (one row per stack, one entry per counter key, the spans and samples, the moments' rows),
which this module makes the `Figures` and `Moment`s the Python loop would have made. heappass.py
stays the reference: the randomised tests (test_analyzer_nativepass.py,
test_analyzer_moments.py) hold the two to the same figures,
and whatever the library cannot read exactly as the Python loop would (an unusual or malformed
field) is left to it: the dump is then read again by heappass.py from the start, for the figures
or the exact error.
"""

from __future__ import annotations

import ctypes
import functools
import weakref
from array import array
from bisect import bisect_left
from collections import abc
from collections.abc import Iterator
from typing import Any

from . import native
from .dumpfile import DumpReader
from .dumpformat import unescape
from .passapi import MOMENT_BLOCKS, Accumulator, Figures, Moment

__all__ = ["NATIVE_PARTS", "NATIVE_VIEWS", "LifetimeKeys", "StackTable", "figures", "typed_library"]

#: the parts of `PARTS` the library computes
NATIVE_PARTS = frozenset(("temporary", "lifetimes", "sizes", "timeline"))
#: the accumulators whose work the library does in place of their events (`Accumulator.native`,
#: tagviews.c): `--by-tag`, `--phases`, `--growth`
NATIVE_VIEWS = frozenset(("tags", "phases", "growth"))
_WANT = {"temporary": 1, "lifetimes": 2, "sizes": 4, "timeline": 8,  # figures.h's FIG_ flags
         "tags": 16, "phases": 32, "growth": 64}
_LIFE, _LIFE_MS, _FREED_BY, _SIZES = range(4)  # its counters
_STACK_FIELDS = 11  # struct fig_stack

#: struct fig_totals (figures.h)
_TOTALS = native._struct("_TOTALS", "cur peak peak_seq peak_blocks peak_ms temporary "
                                    "temporary_bytes live_n n_stacks clocked ms")
#: struct span_point, span, tag_row (figures.h)
_POINT = native._struct("_POINT", "seq bytes ms rss n_tags *tags")
_SPAN = type("_SPAN", (ctypes.Structure,), {"_fields_": [("index", ctypes.c_int64),
                                                         ("high", _POINT), ("low", _POINT)]})
_ROW = native._struct("_ROW", "live changed at_high index at_low ident")

_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_SIGNATURES = {  # name: (restype, argtypes)
    "mdc_figures": (ctypes.c_int, [_P, ctypes.c_uint, _I64]),
    "mdc_fig_clock": (ctypes.c_int, [_P, _I64, _I64, _I64]),
    "mdc_fig_record": (ctypes.c_int, [_P, _I64, ctypes.c_int]),
    "fig_line": (ctypes.c_int, [_P]),
    "mdc_fig_tagging": (ctypes.c_int, [_P, _I64]),
    "mdc_fig_thread_tag": (ctypes.c_int, [_P, _I64, _I64]),
    "mdc_fig_series_end": (ctypes.c_int, [_P, _I64]),
    "mdc_fig_no_samples": (ctypes.c_int, [_P]),
    "mdc_fig_spans": (ctypes.c_uint64, [_P, _P, _P]),
    "mdc_fig_samples": (ctypes.c_uint64, [_P, _P, _P]),
    "mdc_fig_tag_rows": (ctypes.c_uint64, [_P, _P]),
    "mdc_fig_end": (ctypes.c_int, [_P, _I64, _P]),
    "mdc_fig_stacks": (_P, [_P]),
    "mdc_fig_counter": (ctypes.c_uint64, [_P, ctypes.c_int, _P]),
    "mdc_fig_lifetimes": (_P, [_P]),
    "mdc_lifetimes_free": (None, [_P]),
    "mdc_lifetimes_keys": (ctypes.c_uint64, [_P, ctypes.c_int, ctypes.c_uint64, _P,
                                             ctypes.c_uint64]),
    "mdc_lifetimes_entries": (ctypes.c_uint64, [_P, ctypes.c_int, _P, ctypes.c_uint64]),
    "mdc_fig_blocks": (ctypes.c_int, [_P, _P, ctypes.c_uint64]),
    "mdc_tv_start": (ctypes.c_int, [_P, ctypes.c_uint]),
    "mdc_tv_thread": (ctypes.c_int, [_P, _I64, _I64]),
    "mdc_tv_phase": (ctypes.c_int, [_P, _I64, _I64]),
    "mdc_tv_end": (ctypes.c_int, [_P]),
    "mdc_tv_table": (ctypes.c_uint64, [_P, ctypes.c_int, _P]),
    "mdc_moments": (ctypes.c_int, [_P, _P, _P, ctypes.c_uint64]),
    "mdc_mom_thread_tag": (ctypes.c_int, [_P, _I64, _I64]),
    "mdc_mom_taken": (ctypes.c_uint64, [_P, _P, _P]),
    "mdc_fig_allocated": (None, [_P, _P]),
}
#: the fields of tagviews.c's tables (mdc_tv_table), 8 bytes each
_TV_FIELDS = (7, 8, 4, 3, 4, 8)


@functools.cache
def typed_library(lib: ctypes.CDLL) -> ctypes.CDLL | None:
    """`lib` with the views' pass's functions typed, or None when it has not got them (a
    library built before them)."""
    try:
        for name, (restype, argtypes) in _SIGNATURES.items():
            getattr(lib, name).restype = restype
            getattr(lib, name).argtypes = argtypes
    except AttributeError:
        return None
    return lib


def figures(reader: DumpReader, computed: frozenset[str], series: tuple[Any, Any] | None,
            views: frozenset[str] = frozenset(),
            wanted: list[tuple[int, int, Accumulator, int]] = (),  # type: ignore[assignment]
            records: bool = False) -> Figures | None:
    """The pass's `Figures` for the `computed` parts (a subset of `NATIVE_PARTS`) of `reader`'s
    dump (its header read, no line yet), or None when the library is not there or left the dump
    to heappass.py (the reader is then as it was). `series`: with the timeline, the `Timeline`
    and `FragSamples` (series.py) to fill, which are then left as heappass.py leaves them.
    `views` (of `NATIVE_VIEWS`): the accumulators' tables too, as `Figures.views`. `wanted`: the
    moments to take (passapi.plan), into `Figures.taken`. `records`: the `p` and `end` records
    too, into `Figures.records`."""
    lib = native.library() if native.enabled() else None
    lib = typed_library(lib) if lib is not None else None
    if lib is None or not computed <= NATIVE_PARTS or not views <= NATIVE_VIEWS:
        return None
    return native.attempt(reader, lambda direct: _Pass(reader, lib, computed, series, views,
                                                       direct, wanted, records).run())


class _Pass(native._Native):
    """The library's run with the views' figures in place of the replay's; the lines it leaves
    to Python are read as heappass.py reads them (the clock samples, `p exec`)."""

    def __init__(self, reader: DumpReader, lib: ctypes.CDLL, computed: frozenset[str],
                 series: tuple[Any, Any] | None, views: frozenset[str], direct: bool,
                 wanted: list[tuple[int, int, Accumulator, int]], records: bool) -> None:
        self.reader = reader
        #: the `p` and `end` records read (SEQ, fields), or None when not kept
        self.records: list[tuple[int, list[bytes]]] | None = [] if records else None
        self.views = views
        #: the names of the tags and the phases (tagviews.c has their ids), in order
        self.names: dict[str, int] = {}
        self.phase_names: dict[str, int] = {}
        self.max_errors = 0
        self.lib = lib
        self.direct = direct
        self.ctx = 0
        self.n_frames = 0
        self.marked: set[int] = set()
        self.computed = computed
        self.series = series if "timeline" in computed else None
        self.clocked = False
        self.ms = self.rss = self.peak_rss = 0
        self.peak_rss_ms: int | None = None
        self.clock: list[tuple[int, int]] = []  # (SEQ, ms): the ms of the events after SEQ
        self.wanted = [(seq, kind) for seq, kind, _, _ in wanted]
        # the threads' tags, for the moments' blocks, when no series keeps them
        self.tags = self.series is None and any(k == MOMENT_BLOCKS for _, k in self.wanted)

    def _start(self) -> None:
        want = sum(_WANT[part] for part in self.computed)
        limit = self.series[0].limit if self.series is not None else 0
        if not self.lib.mdc_figures(self.ctx, want, limit) or (
                self.series is not None and not self.series[1].wanted
                and not self.lib.mdc_fig_no_samples(self.ctx)):
            raise native._Fallback("out of memory")
        if self.views:
            if not self.lib.mdc_tv_start(self.ctx, sum(_WANT[view] for view in self.views)):
                raise native._Fallback("out of memory")
        if self.wanted:
            seqs = array("q", [seq for seq, _ in self.wanted])
            kinds = array("q", [kind for _, kind in self.wanted])
            if not self.lib.mdc_moments(self.ctx, seqs.buffer_info()[0], kinds.buffer_info()[0],
                                        len(seqs)):
                raise native._Fallback("out of memory")

    def _line(self, line: bytes, fl: list[bytes], seq: int) -> int:
        if (self.series is not None or self.wanted) and not self.lib.fig_line(self.ctx):  # a
            # sample, a moment, if due
            raise native._Fallback("out of memory")
        return self._read(fl, seq, self.reader.other(line, fl, seq))

    def _read(self, fl: list[bytes], seq: int, rec: list[bytes] | None) -> int:
        """What the pass takes of a line the reader read (`rec`: its `p` or `end` record), after
        event `seq`: the SEQ after it."""
        lib, ctx, tag = self.lib, self.ctx, fl[0]
        ok = True
        if tag == b"c":
            self.ms, self.rss = self.reader.clock
            self.clocked = True
            if self.rss > self.peak_rss:
                self.peak_rss, self.peak_rss_ms = self.rss, self.ms
            if self.clock and self.clock[-1][0] == seq:
                self.clock.pop()
            self.clock.append((seq, self.ms))
            ok = lib.mdc_fig_clock(ctx, seq, self.ms, self.rss)
        elif tag == b"g" or tag == b"u":
            tid = int(fl[1])  # its innermost tag, for the timeline's tags (the first: tagging)
            stack = self.reader.tags.get(tid)
            if self.series is not None:
                ok = (tag == b"u" or lib.mdc_fig_tagging(ctx, seq)) and lib.mdc_fig_thread_tag(
                    ctx, tid, stack[-1] if stack else -1)
            elif self.tags:
                ok = lib.mdc_mom_thread_tag(ctx, tid, stack[-1] if stack else -1)
            if "tags" in self.views:  # and for --by-tag's, by name
                ok = ok and lib.mdc_tv_thread(ctx, tid, self._tag_name(tid))
        elif rec is not None:
            seq += 1
            if self.records is not None:
                self.records.append((seq, rec))
            ok = lib.mdc_fig_record(ctx, seq, rec[0] == b"p" and rec[2] == b"exec")
            if ok and rec[0] == b"p" and rec[2] == b"phase" and "phases" in self.views:
                name = unescape(rec[4])
                name = name if name != "-" else ""
                ok = lib.mdc_tv_phase(ctx, seq, self.phase_names.setdefault(  # 0: the phase
                    name, len(self.phase_names) + 1))  # before the first
        if not ok:
            raise native._Fallback("out of memory")
        return seq

    def _tag_name(self, tid: int) -> int:
        """The id of thread `tid`'s innermost tag's name now (-1: none). (The reader refuses a
        tag whose string is not defined; were one let through, its name would change when
        defined, tagphases.py naming a block's tag when it is made: Python's to read.)"""
        stack = self.reader.tags.get(tid)
        if not stack:
            return -1
        name = self.reader.strings.get(stack[-1])
        if name is None:
            raise native._Fallback("a tag before its string")
        return self.names.setdefault(name, len(self.names))

    def _tables(self) -> dict[str, Any]:
        """tagviews.c's tables, as `Figures.views`: each a list of rows (tuples of ints), the
        names of the tags and phases by id (None: untagged; the phase before the first)."""
        lib, ctx = self.lib, self.ctx
        if not lib.mdc_tv_end(ctx):
            raise native._Fallback("out of memory")
        out, tables = ctypes.c_void_p(), []
        for which, width in enumerate(_TV_FIELDS):
            n = lib.mdc_tv_table(ctx, which, ctypes.byref(out))
            flat = (ctypes.c_int64 * (width * n)).from_address(out.value)[:] if n else []
            tables.append([tuple(flat[i:i + width]) for i in range(0, len(flat), width)])
        names = {v: k for k, v in self.names.items()}
        phase_names: dict[int, str | None] = {v: k for k, v in self.phase_names.items()}
        phase_names[0] = None  # the phase before the first
        return dict(zip(("tags", "phases", "groups", "freed_in", "live", "sites"), tables,
                        strict=True), views=self.views, names=names, phase_names=phase_names)

    def _results(self) -> Figures:
        figures = self._figures()
        k = native._COUNTS()
        self.lib.mdc_counts(self.ctx, ctypes.byref(k))
        self._finish_reader(k.tid)
        return figures

    def _figures(self) -> Figures:
        """The pass's figures, read from the library (its tables not freed yet)."""
        lib, ctx = self.lib, self.ctx
        t = _TOTALS()
        if not lib.mdc_fig_series_end(ctx, self.seq) or not lib.mdc_fig_end(
                ctx, self.seq, ctypes.byref(t)):
            raise native._Fallback("out of memory")
        views = self._tables() if self.views else None
        n = t.n_stacks
        flat = native.copied("q", _STACK_FIELDS * n, lib.mdc_fig_stacks(ctx) if n else 0)
        stacks = StackTable(flat, self._lifetimes())
        entries = self._counter(_SIZES)
        sizes = dict(zip(entries[0::3], entries[2::3], strict=True))
        blocks = array("Q", bytes(32 * t.live_n))
        if not lib.mdc_fig_blocks(ctx, blocks.buffer_info()[0], t.live_n):
            raise native._Fallback("live blocks")
        live = _Live(blocks, stacks, self.clock)
        timeline, frag = self.series if self.series is not None else (None, None)
        tag_rows, tag_list = self._fill_series() if self.series is not None else ({}, [])
        taken = self._taken() if self.wanted else []
        allocated = (ctypes.c_int64 * 2)()
        lib.mdc_fig_allocated(ctx, allocated)
        return Figures(
            self.reader, self.computed, stacks, live,  # type: ignore[arg-type]
            timeline=timeline, frag=frag, tag_rows=tag_rows, tag_list=tag_list,
            last_seq=self.seq, clocked=self.clocked, last_ms=self.ms, last_rss=self.rss,
            cur=t.cur, peak=t.peak, peak_seq=t.peak_seq, peak_blocks=t.peak_blocks,
            peak_ms=t.peak_ms, peak_rss=self.peak_rss, peak_rss_ms=self.peak_rss_ms,
            temporary=t.temporary, temporary_bytes=t.temporary_bytes, sizes=sizes, views=views,
            taken=taken, allocated=allocated[0], dropped=allocated[1],
            records=self.records or [])

    def _taken(self) -> list[tuple[int, Moment]]:
        """The moments the library took (moments.c), as passapi's `Moment`s, each with its
        index in `wanted`."""
        out, data = ctypes.c_void_p(), ctypes.c_void_p()
        n = self.lib.mdc_mom_taken(self.ctx, ctypes.byref(out), ctypes.byref(data))
        return native.taken_moments(n, out.value or 0, data.value or 0, self.reader.strings)

    def _fill_series(self) -> tuple[dict[int, list[int]], list[list[int]]]:
        """The library's spans and samples into the `Timeline` and `FragSamples`; the tags'
        rows (tag string id, -1 untagged -> its row, as stream.py's; and in order)."""
        lib, ctx = self.lib, self.ctx
        timeline, frag = self.series  # type: ignore[misc]
        out, width = ctypes.c_void_p(), ctypes.c_int64()
        n = lib.mdc_fig_spans(ctx, ctypes.byref(out), ctypes.byref(width))
        spans = (_SPAN * n).from_address(out.value) if n else ()
        timeline.width = width.value
        timeline.spans = [[s.index, _point(s.high), _point(s.low)] for s in spans]
        n = lib.mdc_fig_samples(ctx, ctypes.byref(out), ctypes.byref(width))
        flat = (ctypes.c_int64 * (4 * n)).from_address(out.value)[:] if n else []
        frag.width = width.value
        frag.samples = [tuple(flat[i:i + 4]) for i in range(0, len(flat), 4)]
        n = lib.mdc_fig_tag_rows(ctx, ctypes.byref(out))
        rows = (_ROW * n).from_address(out.value) if n else ()
        tag_list = [[r.live, r.changed, r.at_high, r.index, r.at_low] for r in rows]
        return {r.ident: row for r, row in zip(rows, tag_list, strict=True)}, tag_list

    def _lifetimes(self) -> LifetimeKeys | None:
        """The lifetime counters (when computed), taken from the library's pass."""
        if "lifetimes" not in self.computed:
            return None
        taken = self.lib.mdc_fig_lifetimes(self.ctx)
        if not taken:
            raise native._Fallback("out of memory")
        return LifetimeKeys(self.lib, taken)

    def _counter(self, which: int) -> array:  # type: ignore[type-arg]
        """Counter `which`'s entries, flat: (a, b, n) after another."""
        out = ctypes.c_void_p()
        n = self.lib.mdc_fig_counter(self.ctx, which, ctypes.byref(out))
        return native.copied("q", 3 * n, out.value or 0)


class LifetimeKeys:
    """The lifetime counters of the library's pass (figures.c's keys by stack: `mdc_fig_lifetimes`,
    freed with this object), read where the library keeps them: a stack's keys, or a counter's
    every entry. Counter `which`: 0 the lifetimes in events, 1 in ms, 2 the stacks that freed
    the blocks."""

    def __init__(self, lib: ctypes.CDLL, taken: int) -> None:
        self._lib = lib
        self._taken = taken
        self._buf = array("q", bytes(8 * 2 * 64))
        # freed when no longer read, but not at the exit (82k stacks' tables: 3 ms on cppcheck)
        weakref.finalize(self, lib.mdc_lifetimes_free, taken).atexit = False

    def of(self, which: int, stack: int) -> array:  # type: ignore[type-arg]
        """Stack `stack`'s keys in counter `which` in the order they were first counted:
        (key, count) after another."""
        lib, buf = self._lib, self._buf
        n = lib.mdc_lifetimes_keys(self._taken, which, stack, buf.buffer_info()[0], len(buf) // 2)
        if 2 * n > len(buf):
            buf = self._buf = array("q", bytes(8 * 2 * n))
            lib.mdc_lifetimes_keys(self._taken, which, stack, buf.buffer_info()[0], n)
        return buf[:2 * n]

    def entries(self, which: int) -> array:  # type: ignore[type-arg]
        """Counter `which`'s every key: (stack, key, count) after another, by stack and then in
        the order each stack's were first counted."""
        n = self._lib.mdc_lifetimes_entries(self._taken, which, None, 0)
        out = array("q", bytes(8 * 3 * n))
        if n:
            self._lib.mdc_lifetimes_entries(self._taken, which, out.buffer_info()[0], n)
        return out


class StackTable(abc.Mapping):  # type: ignore[type-arg]
    """`Figures.stacks` (the stack node as written -> its row, passapi's) on the library's table
    of stacks (struct fig_stack each, in order) and its lifetime counters (`LifetimeKeys`, None
    when not computed), made rows only when read beyond its length; the views read its columns
    (`column`) and the rows of the stacks they show (`rows_of`) without making the others."""

    #: the views' accumulator reads the table whole (views/stream.py)
    table = True

    def __init__(self, flat: array, lifetimes: LifetimeKeys | None) -> None:  # type: ignore[type-arg]
        self._flat = flat
        self._lifetimes = lifetimes
        self._rows: list[list[Any]] | None = None
        self._dict: dict[bytes, list[Any]] | None = None

    def column(self, field: int) -> list[int]:
        """Field `field` of struct fig_stack (0 CUR ... 10 NODE) of every stack, in order."""
        return self._flat[field::_STACK_FIELDS].tolist()

    def _row(self, i: int) -> list[Any]:
        cur, cur_n, changed, peak, peak_n, allocs, nbytes, temp, temp_bytes, gone, node = \
            self._flat[i * _STACK_FIELDS:(i + 1) * _STACK_FIELDS]
        return [cur, cur_n, changed, peak, peak_n, allocs, nbytes, temp, temp_bytes, {}, {}, {},
                gone, node]

    def rows_of(self, stacks: list[int]) -> list[list[Any]]:
        """The rows of the stacks at positions `stacks`, their lifetimes read from the library
        stack by stack, the other rows not made."""
        if self._rows is not None:
            return [self._rows[i] for i in stacks]
        rows = [self._row(i) for i in stacks]
        if self._lifetimes is not None:
            of = self._lifetimes.of
            for i, row in zip(stacks, rows, strict=True):
                for field, which in ((9, _LIFE), (10, _LIFE_MS), (11, _FREED_BY)):
                    keys = of(which, i)
                    row[field] = dict(zip(keys[0::2], keys[1::2], strict=True))
        return rows

    def rows(self) -> list[list[Any]]:
        """Every stack's row, in order."""
        if self._rows is None:
            rows = self._rows = [self._row(i) for i in range(len(self))]
            for field, which in ((9, _LIFE), (10, _LIFE_MS), (11, _FREED_BY)):
                entries = self._entries(which)
                for i in range(0, len(entries), 3):
                    rows[entries[i]][field][entries[i + 1]] = entries[i + 2]
        return self._rows

    def _entries(self, which: int) -> array:  # type: ignore[type-arg]
        return self._lifetimes.entries(which) if self._lifetimes is not None else array("q")

    def freed_nodes(self) -> set[int]:
        """The nodes of the stacks that freed blocks."""
        return set(map(abs, self._entries(_FREED_BY)[1::3]))

    def _made(self) -> dict[bytes, list[Any]]:
        if self._dict is None:
            self._dict = {b"%d" % row[13]: row for row in self.rows()}
        return self._dict

    def __len__(self) -> int:
        return len(self._flat) // _STACK_FIELDS

    def __getitem__(self, node: bytes) -> list[Any]:
        return self._made()[node]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._made())


def _point(p: ctypes.Structure) -> tuple[int, ...]:
    """A span's extreme as series.py's `Extreme`: (SEQ, bytes, ms, RSS, its tags' bytes)."""
    tags = (ctypes.c_int64 * p.n_tags).from_address(p.tags)[:] if p.n_tags else []
    return (p.seq, p.bytes, p.ms, p.rss, tuple(tags))


class _Live(abc.Mapping):  # type: ignore[type-arg]
    """`Figures.live` from the library's table of live blocks (address, size, stack, SEQ),
    made the Python pass's dict (pointer as written -> (size, the stack's figures, SEQ, ms))
    only when read beyond its length."""

    def __init__(self, blocks: array, stacks: StackTable,  # type: ignore[type-arg]
                 clock: list[tuple[int, int]]) -> None:
        self._blocks = blocks
        self._stacks = stacks
        self._clock = clock
        self._dict: dict[bytes, tuple[int, list[Any], int, int]] | None = None

    def _made(self) -> dict[bytes, tuple[int, list[Any], int, int]]:
        if self._dict is None:
            b, rows, clock = self._blocks, self._stacks.rows(), self._clock
            seqs = [s for s, _ in clock]

            def ms_at(seq: int) -> int:
                i = bisect_left(seqs, seq)
                return clock[i - 1][1] if i else 0

            self._dict = {b"%#x" % b[i]: (b[i + 1], rows[b[i + 2]], b[i + 3], ms_at(b[i + 3]))
                          for i in range(0, len(b), 4)}
        return self._dict

    def __len__(self) -> int:
        return len(self._blocks) // 4

    def __getitem__(self, ptr: bytes) -> tuple[int, list[Any], int, int]:
        return self._made()[ptr]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._made())
