"""The replay through libmemdump_core.so (analyzer/native/), falling back to replay.py's.

The library reads the dump once, with pread into a buffer (finding the NUL padding as it goes, for
`DumpFile.padding_from`), or a compact dump's records straight from its decoder (analyzer/native/
compact.h: the heap records as packed events, never as text; a dump the decoder cannot give so is
read again as its decoded text), and replays the records that are most of a dump in C (the events,
`t`, the stack nodes `n`, comments); it stops at every other line, which `DumpReader.other` reads
here as it does in the Python replay, and then goes on; it also stops to ask whether a bad free's
stack is the runtime's alone (`rules.is_runtime_only`, on the reader's frames). It gives the same
`Replay` and leaves the reader in the same state (its node tables included) as `replay._Replayer`,
which stays the reference: whatever the library cannot decide exactly as it would (an unusual or
malformed field), it leaves to it, and the dump is replayed in Python from the start, for the answer
or the exact `PATH:LINE: message`.

Where the library is: $MEMDUMP_CORE_LIB, else next to this module (`pip install .`), else
$MEMDUMP_BUILD_DIR/analyzer/native/libmemdump_core.so, else build/analyzer/native/ in the
checkout this package lives in. MEMDUMP_NATIVE=0 replays in Python.
"""

from __future__ import annotations

import copy
import ctypes
import functools
import itertools
import weakref
from array import array
from collections import abc
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from .dumpdecode import fields
from .dumpfile import DumpError, DumpReader
from .dumpformat import OPERATIONS
from .libpath import enabled, library_path
from .model import HeapError
from .rules import is_runtime_only

__all__ = ["copied", "enabled", "library", "library_path", "replay"]

_ABI_VERSION = 1
_DONE, _LINES, _ASK, _FALLBACK = range(4)
#: the most lines `mdc_run` hands over at once (core.h's LINE_BATCH)
_LINE_BATCH = 512
_KINDS = ("invalid-free", "double-free", "invalid-realloc", "mismatched-free")
_FAMILIES = ("malloc", "new", "new[]")
_OPS = tuple(OPERATIONS)

#: the most changes of the live blocks after the peak the replay keeps for the peak's blocks by
#: node (`Replay.node_peak`; 24 bytes each): past them the exports that need these take their pass
PEAK_LOG = 1 << 22
#: why the library's last replay left its dump to Python (None: it did not; for the tests)
last_fallback: Exception | None = None


def _struct(name: str, fields: str, *arrays: tuple[str, int]) -> type[ctypes.Structure]:
    """A structure of 8-byte fields: `fields` names the signed ones, a `*` before a name an
    unsigned one."""
    layout: list[tuple[str, type]] = [(a, ctypes.c_int64 * n) for a, n in arrays]
    for f in fields.split():
        layout.append((f[1:], ctypes.c_uint64) if f[0] == "*" else (f, ctypes.c_int64))
    return type(name, (ctypes.Structure,), {"_fields_": layout})


#: struct mdc_io, mdc_counts, mdc_error (memdump_core.h)
_IO = _struct("_IO", "seq *other *node_read *n_lines *lines *pos *chunk *chunk_len ask_node "
                     "*attached *progress *fallback_pos")
_COUNTS = _struct(
    "_COUNTS",
    "allocations frees allocated_bytes live_bytes peak_bytes peak_blocks peak_seq peak_node "
    "error_count untracked_frees runtime_internal_frees reused_live free_null free_runtime "
    "free_errors free_untracked custom_allocations custom_frees delete_frees n_live n_custom "
    "n_errors n_nodes n_used tid",
    ("calls", len(_OPS)),
)
_ERROR = _struct("_ERROR", "kind seq tid op *ptr node freed_node has_freed alloc_size "
                           "alloc_node alloc_family freed_seq")


class Replayer(Protocol):
    """What the library's replay needs of replay.py's `_Replayer` (which imports this module)."""

    reader: DumpReader
    max_errors: int
    r: Any  # its replay.Replay
    live: dict[bytes, tuple[int, int]]
    custom: dict[bytes, tuple[int, int]]

    def _process(self, rec: list[bytes]) -> bool: ...

    def _finish(self, seq: int, *, check_live: bool = True) -> Any: ...


_P = ctypes.c_void_p
_U = ctypes.c_uint64
_SIGNATURES = {  # name: (restype, argtypes)
    "mdc_abi": (_U, []),
    "mdc_op_name": (ctypes.c_char_p, [ctypes.c_int]),
    "mdc_open": (_P, [ctypes.c_int, _U, _U, _U]),
    "mdc_open_compact": (_P, [ctypes.c_int, _U]),
    "mdc_nul_runs": (_U, [_P, _P]),
    "mdc_io": (_P, [_P]),
    "mdc_run": (ctypes.c_int, [_P]),
    "mdc_close": (None, [_P]),
    "mdc_frames": (ctypes.c_int, [_P, _P, _U, ctypes.c_int]),
    "mdc_runtime": (None, [_P, _U, ctypes.c_int]),
    "mdc_exec": (None, [_P]),
    "mdc_node": (ctypes.c_int, [_P, _U, _P]),
    "mdc_used": (_U, [_P, _P, _U]),
    "mdc_counts": (None, [_P, _P]),
    "mdc_blocks": (ctypes.c_int, [_P, ctypes.c_int, _P, _U]),
    "mdc_nodes": (None, [_P, _P]),
    "mdc_finish": (None, [_P]),
    "mdc_errors": (_P, [_P]),
    "mdc_alloc_rows": (_U, [_P, _P]),
    "mdc_peak_rows": (ctypes.c_int, [_P, _P, _P]),
    "mdc_keep_allocations": (None, [_P, _U]),
    "mdc_snapshots": (ctypes.c_int, [_P, _P, _P, _U, ctypes.c_int]),
    "mdc_snap_due": (ctypes.c_int, [_P]),
    "mdc_snap_end": (ctypes.c_int, [_P]),
    "mdc_snap_taken": (_U, [_P, _P, _P]),
    "mdc_fig_with_replay": (None, [_P]),
    "mdc_fig_done": (None, [_P]),
}


def library() -> ctypes.CDLL | None:
    """The loaded library, or None when it is missing, fails to load or has another layout."""
    return _load(library_path())


@functools.cache
def _load(path: str) -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL(path)
        for name, (restype, argtypes) in _SIGNATURES.items():
            getattr(lib, name).restype = restype
            getattr(lib, name).argtypes = argtypes
        ops = tuple((lib.mdc_op_name(i) or b"").decode() for i in range(len(_OPS) + 1))
        abi = lib.mdc_abi()
    except (OSError, AttributeError):
        return None
    return lib if abi == _ABI_VERSION << 32 | ctypes.sizeof(_IO) and ops == (*_OPS, "") else None


def replay(replayer: Callable[[], Replayer]) -> Any:
    """The replay by the library of the dump of the `replayer()`s (new `replay._Replayer`s, one
    an attempt): its `Replay` filled, or None when it is not there, or left the dump to the
    Python replay (the reader is then as it was)."""
    lib = library() if enabled() else None
    if lib is None:
        return None
    return attempt(replayer().reader, lambda direct: _Native(replayer(), lib, direct).run())


def attempt(reader: DumpReader, run: Callable[[bool], Any]) -> Any:
    """`run(direct)`'s result: first straight from a compact dump's decoder (`direct`), then
    from the dump's text; None when the library left the dump to Python each time (the reader is
    then as it was)."""
    global last_fallback
    if reader._file is None:
        return None
    for direct in (True, False) if reader._file.compact_fd >= 0 else (False,):
        saved = copy.deepcopy({k: v for k, v in vars(reader).items() if k != "_file"})
        try:
            result = run(direct)
        except (_Fallback, DumpError, ValueError, IndexError, KeyError, TypeError, OSError) as e:
            vars(reader).update(saved)
            last_fallback = e
            continue
        last_fallback = None
        return result
    return None


#: struct mom_taken (moments.h): a moment the library took, its rows in its data after `first`
TAKEN = _struct("TAKEN", "index seq cur allocated dropped kind first n")
_ADDRESS = (1 << 64) - 1  # an address, read as int64


def taken_moments(n: int, taken: int, data: int,
                  strings: abc.Mapping[int, str] | None = None) -> list[tuple[int, Any]]:
    """The `n` moments the library took (struct mom_taken at address `taken`, their rows in
    `data`: moments.c's, snapshots.c's) as passapi's `Moment`s, each with its index among those
    asked for; a moment's blocks' tags are string ids in `strings`."""
    from .passapi import MOMENT_BLOCKS, MOMENT_BY_NODE, Moment

    out = []
    for t in (TAKEN * n).from_address(taken) if n else ():
        m = Moment(t.seq, t.cur, t.allocated, t.dropped)
        width = 3 if t.kind == MOMENT_BY_NODE else 4
        rows = (ctypes.c_int64 * (width * t.n)).from_address(data + 8 * t.first)[:] if t.n \
            else []
        if t.kind == MOMENT_BY_NODE:
            m.by_node = list(zip(rows[0::3], rows[1::3], rows[2::3], strict=True))
        elif t.kind == MOMENT_BLOCKS and strings is not None:
            m.blocks = [(rows[i] & _ADDRESS, rows[i + 1], rows[i + 2],
                         None if rows[i + 3] < 0 else strings.get(rows[i + 3], ""))
                        for i in range(0, len(rows), 4)]
        out.append((t.index, m))
    return out


class _Fallback(Exception):
    """The library left the dump to the Python replay."""


def copied(code: str, n: int, address: int) -> array:  # type: ignore[type-arg]
    """The library's `n` items of array type `code` at `address`, copied once into an array of
    Python's (where `array(code, bytes(...))` copied them twice: 8 ms of 9 MB of counters)."""
    out = array(code)
    if n:
        out.frombytes((ctypes.c_ubyte * (n * out.itemsize)).from_address(address))
    return out


def _array(ctype: Any, fmt: str, n: int, address: int) -> Sequence[int]:
    """The library's array of `n` `ctype` at `address`, read in place: a memoryview in the
    machine's own format, which Python indexes without ctypes' conversion per item."""
    if not n:
        return ()
    return memoryview((ctype * n).from_address(address)).cast("B").cast(fmt)


class _Nodes(abc.Mapping):
    """`reader.nodes` (stack node id -> (PARENT, FRAME)) as the library holds it, in the order
    the nodes were defined: through `mdc_node` during the run, then on its arrays."""

    def __init__(self, lib: ctypes.CDLL, ctx: int) -> None:
        self._lib = lib
        self._ctx = ctx
        self._out = (ctypes.c_int64 * 2)()
        self._final = False
        self._cap = 0
        self._order: Sequence[int] = ()
        weakref.finalize(self, lib.mdc_close, ctx)

    def finish(self) -> None:
        """The run is over: look the nodes up in the library's arrays, which stay as they are
        until the library is closed (when the last of these tables goes)."""
        out = (ctypes.c_uint64 * 6)()
        self._lib.mdc_nodes(self._ctx, out)
        self._cap = cap = out[3]
        self._flags = _array(ctypes.c_uint8, "B", cap, out[0])
        self._parents = _array(ctypes.c_int32, "i", cap, out[1])
        self._frames = _array(ctypes.c_int32, "i", cap, out[2])
        self._order = _array(ctypes.c_uint32, "I", out[5], out[4])
        self._final = True

    def flags(self, ident: int) -> int:
        """Node `ident`'s flags: 1 defined, 2 marked (0: not defined)."""
        if self._final:
            return self._flags[ident] & 3 if 0 < ident < self._cap else 0
        return 1 if ident > 0 and self._lib.mdc_node(self._ctx, ident, self._out) else 0

    def __getitem__(self, ident: int) -> tuple[int, int]:
        if self._final and type(ident) is int and 0 < ident < self._cap \
                and self._flags[ident] & 1:  # the common case, first: the views' stacks
            return (self._parents[ident], self._frames[ident])
        if ident == 0 and isinstance(ident, int):
            return (0, 0)
        if not isinstance(ident, int) or not self.flags(ident):
            raise KeyError(ident)
        if self._final:
            return (self._parents[ident], self._frames[ident])
        return (self._out[0], self._out[1])

    def __iter__(self) -> Iterator[int]:
        yield 0
        yield from self._order

    def __len__(self) -> int:
        return 1 + len(self._order)


class _NodeIds(abc.Mapping):
    """`reader.node_ids` (stack node id as written -> id, negated when marked) on `_Nodes`."""

    def __init__(self, nodes: _Nodes) -> None:
        self._nodes = nodes

    def __getitem__(self, written: bytes) -> int:
        if written == b"0":
            return 0
        if (type(written) is not bytes or not written.isdigit() or written[0] == 48
                or not (flags := self._nodes.flags(int(written)))):
            raise KeyError(written)
        return -int(written) if flags & 2 else int(written)

    def __iter__(self) -> Iterator[bytes]:
        for ident in self._nodes:
            yield str(ident).encode()

    def __len__(self) -> int:
        return len(self._nodes)


def _signed(n: int) -> int:
    return n - (1 << 64) if n >> 63 else n


class _Native:
    """The library doing a `_Replayer`'s hot loop; the rest (`p` and `end` records, custom
    blocks at the end, the errors' second readings) is the Python replay's own code."""

    def __init__(self, replayer: Replayer, lib: ctypes.CDLL, direct: bool) -> None:
        self.rp = replayer
        self.reader = replayer.reader
        self.max_errors = replayer.max_errors
        self.lib = lib
        self.direct = direct
        self.ctx = 0
        self.n_frames = 0
        self.marked: set[int] = set()
        self.nodes: _Nodes
        #: the snapshots asked of the replay (`Replay.node_snapshots`): their SEQs, and the next
        #: one's index, for those due after the lines read here
        plan = getattr(replayer, "snapshots", None)
        self.snap_seqs: list[int] = plan[0] if plan is not None else []
        self.snap_i = 0

    def run(self) -> Any:
        f = self.reader._file
        assert f is not None
        start, end = len(f.first), f.complete
        if end <= start:
            raise _Fallback
        if self.direct:
            self.ctx = self.lib.mdc_open_compact(f.compact_fd, self.max_errors)
        else:
            self.ctx = self.lib.mdc_open(f._text(), start, end, self.max_errors)
        if not self.ctx:
            raise _Fallback
        self.nodes = _Nodes(self.lib, self.ctx)  # it closes the library's context
        self._start()
        self._loop()
        return self._results()

    def _loop(self) -> None:
        lib, ctx, reader = self.lib, self.ctx, self.reader
        io = _IO.from_address(lib.mdc_io(ctx))
        reader.nodes = self.nodes  # type: ignore[assignment]
        string_at = ctypes.string_at
        on_read = reader._file.on_read if reader._file is not None else None
        io.progress = on_read is not None
        #: a frame id for the library (`_sync_frames`), and its address
        self._one = array("Q", [0])
        self._one_at = self._one.buffer_info()[0]
        self._sync_frames()
        status = _LINES
        counted = 0  # the records counted for the progress bar (compact dumps)
        line_of, sync_frames, info = self._line, self._sync_frames, reader.info
        frames, marked = reader.frames, reader._marked_frames
        attached = io.attached = info.get("attached") == "1"
        # the library's (address, length) pairs of its lines, read in place (its array is made
        # with the context, for LINE_BATCH lines)
        lines = _array(ctypes.c_uint64, "Q", 2 * _LINE_BATCH, io.lines)
        while status != _DONE:
            if attached != (info.get("attached") == "1"):  # an `i` record among the lines
                attached = io.attached = not attached
            status = lib.mdc_run(ctx)
            reader._other += io.other
            io.other = 0
            if io.node_read:
                reader._open_fs = (0, -1)  # `fi` records follow their `fs` at once
                io.node_read = 0
            if on_read is not None and io.chunk_len:
                on_read(io.pos, memoryview((ctypes.c_char * io.chunk_len).from_address(io.chunk)))
            elif on_read is not None and self.direct:  # the decoder's offset, and the records
                on_read(io.pos, io.seq + reader._other - counted)
                counted = io.seq + reader._other
            if status == _LINES and (n := io.n_lines):
                seq = io.seq
                pairs = lines[:2 * n].tolist() if n <= _LINE_BATCH else \
                    array("Q", string_at(io.lines, 16 * n)).tolist()
                for i in range(0, 2 * n, 2):
                    line = string_at(pairs[i], pairs[i + 1])
                    fl = fields(line)  # the decoder's split (dumpdecode.py)
                    if fl and fl[0] == b"fi":
                        self._sync_used()
                    seq = line_of(line, fl, seq)
                    io.seq = seq  # the library's SEQ follows: a sample or moment due at the
                    # next line's start is taken after this one
                if len(frames) != self.n_frames or len(marked) != len(self.marked):
                    sync_frames()
            elif status == _ASK:
                node = io.ask_node
                lib.mdc_runtime(ctx, node, is_runtime_only(reader.stack(node)))
            elif status == _FALLBACK:
                raise _Fallback(f"offset {io.fallback_pos}")
        self._sync_used()
        self.seq = io.seq

    def _start(self) -> None:
        """The context is open, before the first line."""
        if getattr(self.rp, "allocations", False):
            self.lib.mdc_keep_allocations(self.ctx, PEAK_LOG)
        plan = getattr(self.rp, "snapshots", None)
        if plan is not None:
            seqs, kinds = array("q", plan[0]), array("q", plan[1])
            if not self.lib.mdc_snapshots(self.ctx, seqs.buffer_info()[0],
                                          kinds.buffer_info()[0], len(seqs), 1):
                self.snap_seqs = []  # out of memory: none (the export reads the dump again)

    def _line(self, line: bytes, fl: list[bytes], seq: int) -> int:
        """A line the library left to Python (`DumpReader.other`'s), after event `seq`: the SEQ
        after it."""
        if self.snap_i < len(self.snap_seqs) and self.snap_seqs[self.snap_i] <= seq:
            self._snapshots_due(seq)
        rec = self.reader.other(line, fl, seq)
        if rec is not None:
            seq += 1
            if self.rp._process(rec):  # exec: the image is gone, and its blocks
                self.lib.mdc_exec(self.ctx)
        return seq

    def _snapshots_due(self, seq: int) -> None:
        """The snapshots due at this line's start, after the records before it (SEQ `seq`)."""
        if not self.lib.mdc_snap_due(self.ctx):
            raise _Fallback
        while self.snap_i < len(self.snap_seqs) and self.snap_seqs[self.snap_i] <= seq:
            self.snap_i += 1

    def _sync_frames(self) -> None:
        """The frames `other` defined, and those it marked, told to the library."""
        frames = self.reader.frames
        if len(frames) == self.n_frames + 1:  # most often: one (a batch of one `f` line)
            self._one[0] = next(reversed(frames))
            if not self.lib.mdc_frames(self.ctx, self._one_at, 1, 0):
                raise _Fallback
            self.n_frames += 1
        elif len(frames) != self.n_frames:
            new = array("Q", itertools.islice(reversed(frames), len(frames) - self.n_frames))
            if not self.lib.mdc_frames(self.ctx, new.buffer_info()[0], len(new), 0):
                raise _Fallback
            self.n_frames = len(frames)
        marked = self.reader._marked_frames
        if len(marked) != len(self.marked):
            new = array("Q", marked - self.marked)
            if not self.lib.mdc_frames(self.ctx, new.buffer_info()[0], len(new), 1):
                raise _Fallback
            self.marked |= marked

    def _sync_used(self) -> None:
        """The frames the library's stack nodes used, into the reader (its `fi` check)."""
        buf = array("Q", bytes(8 * 4096))
        while n := self.lib.mdc_used(self.ctx, buf.buffer_info()[0], 4096):
            self.reader._used_frames.update(buf[:n])

    def _results(self) -> Any:
        lib, ctx, rp = self.lib, self.ctx, self.rp
        r = rp.r
        k = _COUNTS()
        lib.mdc_counts(ctx, ctypes.byref(k))
        errors = (_ERROR * k.n_errors).from_address(lib.mdc_errors(ctx))
        r.errors = [self._heap_error(e) for e in errors]
        rp.live = r.live = self._blocks(0, k.n_live)
        rp.custom = self._blocks(1, k.n_custom)
        self._allocations(r)
        self._finish_reader(k.tid)
        r.calls = dict(zip(_OPS, k.calls, strict=True))
        r.events = sum(k.calls)
        for name in ("allocations", "frees", "allocated_bytes", "live_bytes", "peak_bytes",
                     "peak_blocks", "error_count", "untracked_frees", "runtime_internal_frees",
                     "reused_live", "custom_allocations", "custom_frees", "delete_frees"):
            setattr(r, name, getattr(k, name))
        calls = r.free_calls
        calls.update(null=k.free_null, runtime=k.free_runtime, errors=k.free_errors,
                     untracked=k.free_untracked)
        calls["released"] = r.calls["free"] - k.free_null - k.free_runtime - k.free_errors \
            - k.free_untracked
        r.peak_seq = k.peak_seq or None
        r.peak_node = abs(k.peak_node) if k.peak_seq else None
        # the blocks still live were written as the library reads pointers: as hex numbers
        return rp._finish(self.seq, check_live=False)

    def _allocations(self, r: Any) -> None:  # noqa: ANN401 - replay.Replay
        """The allocations by node and the blocks live at the peak by node, before the live
        blocks are freed."""
        lib, ctx = self.lib, self.ctx
        if not getattr(self.rp, "allocations", False):
            return
        at = ctypes.c_void_p()
        n = lib.mdc_alloc_rows(ctx, ctypes.byref(at))
        r.node_allocs = array("q", _array(ctypes.c_int64, "q", 3 * n, at.value or 0))
        blocks, nbytes = array("q", bytes(8 * max(1, n))), array("q", bytes(8 * max(1, n)))
        if lib.mdc_peak_rows(ctx, blocks.buffer_info()[0], nbytes.buffer_info()[0]):
            r.node_peak = (blocks[:n], nbytes[:n])
        if getattr(self.rp, "snapshots", None) is not None and lib.mdc_snap_end(ctx):
            out, data = ctypes.c_void_p(), ctypes.c_void_p()
            n = lib.mdc_snap_taken(ctx, ctypes.byref(out), ctypes.byref(data))
            r.node_snapshots = taken_moments(n, out.value or 0, data.value or 0)

    def _finish_reader(self, tid: int) -> None:
        """The library's run is over (its results read): the reader left as the Python
        replay leaves it (the padding found, the node tables), the library's tables freed."""
        reader = self.reader
        runs = ctypes.c_void_p()
        n = self.lib.mdc_nul_runs(self.ctx, ctypes.byref(runs))
        flat = (ctypes.c_uint64 * (2 * n)).from_address(runs.value) if n else ()
        assert reader._file is not None
        reader._file.padding_from(zip(flat[0::2], flat[1::2], strict=True))
        self.lib.mdc_finish(self.ctx)
        self.nodes.finish()
        reader.node_ids = _NodeIds(self.nodes)  # type: ignore[assignment]
        reader.tid = str(tid).encode() if tid >= 0 else None

    def _blocks(self, custom: int, n: int) -> dict[bytes, tuple[int, int]]:
        buf = array("Q", bytes(24 * n))
        if not self.lib.mdc_blocks(self.ctx, custom, buf.buffer_info()[0], n):
            raise _Fallback
        return {b"%#x" % buf[i]: (buf[i + 1], _signed(buf[i + 2]))
                for i in range(0, len(buf), 3)}

    @staticmethod
    def _heap_error(e: ctypes.Structure) -> HeapError:
        error = HeapError(_KINDS[e.kind], e.seq, e.tid, _OPS[e.op], e.ptr, abs(e.node),
                          e.freed_seq if e.has_freed and e.freed_seq else None,
                          abs(e.freed_node) if e.has_freed else None)
        if e.alloc_family >= 0:
            error.alloc_size = e.alloc_size
            error.alloc_node = abs(e.alloc_node)
            error.alloc_op = _FAMILIES[e.alloc_family]
        return error
