"""Streaming reader of memdump dumps (docs/dump-format.md).

`DumpReader` checks the first line when it is opened; then the rest is read in one pass, as the
grammar of `dumpformat.GRAMMAR` says (each record's fields, their types, what the record is). Its
`records()` generator keeps the definitions (`i`, `s`, `f`, `fi`, `fs`, `n`) in the reader's tables
(`dumpdefs.Definitions` reads them) and yields every sequenced record (`e`, `p`, `end`) as the
list of its fields, still bytes, with its SEQ checked, and for an `e` record its STACK too;
everything else about an event is the consumer's to check. The lines are read by the one decoder
(`dumpdecode.decode`), which reads the short records of format 2.0 (`+` malloc and `-` free, of the
thread the last `t` record named, and the others of the grammar) as the `e` records they stand for
and gives this reader `thread()` for a `t` record and `other()` for every other line that is not an
event; the replay (`replay.py`) and the one pass's Python loops (`heapevents.events`) read the same
decoder.

Only complete lines are read, without their NUL padding (format 1.3): `dumpio.DumpFile`.

A frame's symbols may come after its use (`fs` records, format 1.3): stacks are resolved with
`stack()` once the whole dump was read, so that they have them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from .accesserrors import AccessError
from .dumpdecode import SHORT_ROWS, decode
from .dumpdefs import (
    FI_MAY_FOLLOW,
    READ,
    TEXT_RECORDS,
    Definitions,
    Frame,
    OlderBlock,
    ScanRecord,
)
from .dumpformat import (
    GRAMMAR,
    HEADER,
    PROCESS,
    READS_MAJOR,
    LockRecord,
    LockWait,
    source_path,
    split_record,
    unescape,
)
from .dumpio import DumpError, DumpFile, show
from .heapcorruption import HeapCorruption

__all__ = ["DumpError", "DumpReader", "Frame", "LockRecord", "ScanRecord", "unescape"]

_DEC = re.compile(rb"[0-9]+")
#: the process events (`p`, `end`), sequenced records with a rest-of-line DETAIL
_PROCESS = frozenset(rec.tag.encode() for rec in GRAMMAR if rec.kind == PROCESS)


class DumpReader(Definitions):
    """Reads one dump. Use as a context manager, or call `close()`.

    `mark_functions`: function names; a stack node whose stack contains a frame with one of these
    functions is marked: its `node_ids` entry is negative, so that the look-up that checks an
    event's STACK also tells whether it is marked.
    """

    def __init__(self, path: str, *, mark_functions: frozenset[str] = frozenset()) -> None:
        self.path = path
        self.info: dict[str, str] = {}
        #: `i` records after the first sequenced one (an exec'd image's, images.py): (the SEQ
        #: before, key, value); the header's `info` keeps the first image's
        self.image_info: list[tuple[int, str, str]] = []
        self.strings: dict[int, str] = {}
        self.frames: dict[int, Frame] = {}
        #: frame id -> the frames its code was inlined into (`fi` records), innermost first;
        #: such a frame's own entry in `frames` is marked `inlined`
        self.inlined_into: dict[int, list[Frame]] = {}
        self._used_frames: set[int] = set()  # frames a stack node refers to
        #: stack node id -> (parent node id, frame id)
        self.nodes: dict[int, tuple[int, int]] = {0: (0, 0)}
        #: stack node id as written (bytes) -> id, negated when the node is marked (its stack
        #: contains a function of `mark_functions`): the table events' STACKs are looked up in
        self.node_ids: dict[bytes, int] = {b"0": 0}
        self.version: tuple[int, int] = (0, 0)
        #: unknown tag -> line of its first use
        self.unknown_tags: dict[str, int] = {}
        #: a final line without its newline was ignored
        self.truncated = False
        #: the pointer scan at exit (`scan` record), if any, and the kind of each block it saw:
        #: pointer as written -> (leak kind, heuristic or None)
        self.scan: ScanRecord | None = None
        #: (2.3) the `lk` records: lock counts, in file order; (2.4) `lw`: their waiting stacks
        self.locks: list[LockRecord] = []
        self.lock_waits: list[LockWait] = []
        #: (2.6) the `ae` records: heap access errors the guard pages caught
        self.access_errors: list[AccessError] = []
        #: (2.6) the `hc` records: heap corruption the red zones found
        self.heap_corruption: list[HeapCorruption] = []
        self.kinds: dict[bytes, tuple[str, str | None]] = {}
        #: indirect block's pointer as written -> its clique leader's (format 1.2)
        self.leaders: dict[bytes, bytes] = {}
        #: (2.7) the `ob` records: the blocks from before a late attach's recording, at the scan
        self.older: list[OlderBlock] = []
        self._mark_functions = mark_functions
        self._marked_frames: set[int] = set()
        self._other = 0  # lines after the first that are not sequenced records, read so far
        self._file: DumpFile | None = None
        #: the thread of the short event records that follow, as written (`t` record, 2.0)
        self.tid: bytes | None = None
        #: frame id -> line of its `fs` record (format 1.3: its symbols, written after its use)
        self.symbolized: dict[int, int] = {}
        #: (2.2) each thread's stack of memdump_api.h tags (string ids, innermost last)
        self.tags: dict[int, list[int]] = {}
        #: (frame id, SEQ) of the last `fs` record while `fi` records may follow it
        self._open_fs: tuple[int, int] = (0, -1)
        #: (2.2) the last clock sample (`c` record): milliseconds since the recording began and
        #: the process's resident set size in bytes (0: unknown), and how many were read
        self.clock: tuple[int, int] = (0, 0)
        self.clocks = 0
        self._open()

    # -- opening -------------------------------------------------------------------------------

    def _open(self) -> None:
        self._file = DumpFile(self.path)
        try:
            self.truncated = self._file.truncated
            self._check_header(self._file.first, partial=self._file.complete == 0)
        except BaseException:
            self.close()
            raise

    def _check_header(self, first: bytes, *, partial: bool) -> None:
        line = first.rstrip(b"\n")
        if partial and line.startswith(b"MEMDUMP"):
            raise DumpError(
                self.path, 1, "the dump ends inside its first line (the recording stopped at once)"
            )
        m = HEADER.fullmatch(line)
        if m is None or partial:
            raise DumpError(self.path, 1, f"not a memdump dump (first line is '{show(line)}')")
        major, minor = int(m.group(1)), int(m.group(2))
        if major > READS_MAJOR:
            raise DumpError(
                self.path,
                1,
                f"dump format {major}.{minor} is newer than this analyser (reads {READS_MAJOR}.x)",
            )
        if major < 1:
            raise DumpError(self.path, 1, f"dump format {major}.{minor} is not supported")
        self.version = (major, minor)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> DumpReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- errors ------------------------------------------------------------------------------

    def line_of(self, seq: int) -> int:
        """Line number of the sequenced record `seq` while `records()` is paused on it."""
        return 1 + self._other + seq

    _here = line_of

    def error(self, seq: int, message: str) -> DumpError:
        """A `DumpError` for the sequenced record `seq` that `records()` last yielded."""
        return DumpError(self.path, self.line_of(seq), message)

    # -- stacks ------------------------------------------------------------------------------

    def stack(self, node: int) -> list[Frame]:
        """The frames of stack `node`, innermost first (`[]` for node 0), with the frames of
        inlined code expanded: an `f` record's frame, then those of its `fi` records."""
        frames = []
        nodes = self.nodes
        table = self.frames
        inlined_into = self.inlined_into
        while node:
            node, frame = nodes[node]
            frames.append(table[frame])
            outer = inlined_into.get(frame)
            if outer is not None:
                frames.extend(outer)
        return frames

    def set_symbols(
        self, ident: int, chain: list[tuple[str | None, str | None, int | None]]
    ) -> None:
        """Give frame `ident` symbols found elsewhere (`symbolize`): (function, file, line) of
        each level, innermost first, as its `f` (or `fs`) record and `fi` records would have."""
        frame = self.frames[ident]
        (function, file, line), outer = chain[0], chain[1:]
        self.frames[ident] = replace(
            frame, function=function, file=source_path(file), line=line, inlined=bool(outer)
        )
        if outer:
            levels = [Frame(frame.pc, frame.module, frame.offset, name, source_path(path), at)
                      for name, path, at in outer]
            for i in range(len(levels) - 1):
                levels[i] = replace(levels[i], inlined=True)
            self.inlined_into[ident] = levels

    # -- reading (the replay runs `records()`'s steps in its own loop) -----------------------

    def lines(self) -> Iterable[bytes]:
        """The complete lines after the first, each ending with its newline (padding removed)."""
        if self._file is None:
            raise ValueError("the reader is closed")
        return self._file.lines()

    def on_read(self, callback: Callable[[int, memoryview | int], None]) -> int:
        """Have `callback(offset, chunk)` called as `lines()` reads each chunk of the file (a
        progress bar); returns the bytes there are to read. Call it before `lines()`."""
        if self._file is None:
            raise ValueError("the reader is closed")
        self._file.on_read = callback
        if self._file.compact_fd >= 0:  # read through the decoder (native.py): its offsets
            return os.fstat(self._file.compact_fd).st_size
        return self._file.complete

    @property
    def partial_records(self) -> int:
        """How many partial records before NUL padding were ignored (format 1.3)."""
        return len(self._file.partial_records) if self._file is not None else 0

    def partial_line(self) -> int | None:
        """Line of the first partial record before padding, or None (reads the file again)."""
        return self._file.partial_line() if self._file is not None else None

    def records(self) -> Iterator[list[bytes]]:
        """Yield the sequenced records in order, each as its list of fields (bytes), as the
        decoder (dumpdecode.py) reads them: `e` records with their SEQ checked, and that their
        STACK is defined; the short records (2.0) as the `e` records they stand for, their SEQ
        written in; `p` and `end` records as `[TAG, SEQ, WHAT, b"", DETAIL]` (see `other()`).
        """
        node_ids = self.node_ids
        for seq, fl, _ in decode(self):
            if fl[0] == b"e":
                if not fl[1]:
                    fl[1] = b"%d" % seq
                if fl[4] not in node_ids:
                    raise self.undefined_stack(fl[4], seq)
            yield fl

    def expand(self, fl: list[bytes], seq: int, seq_text: bytes = b"",
               tid: bytes | None = None) -> list[bytes]:
        """The `e` record's fields that short record `fl` (`+` or `-`, numbered `seq`) stands
        for, with SEQ `seq_text` and the TID of the last `t` record (`tid`, when the caller
        read it): `e SEQ TID OP STACK RESULT ARGS` for an allocation (2.5: `+c` and `+r` have
        calloc's and realloc's ARGS), `e SEQ TID OP STACK - PTR` for a release."""
        if tid is None:
            tid = self.tid
        op, words, makes = SHORT_ROWS[fl[0]]
        if len(fl) != words or tid is None:
            raise self._short_error(fl, seq)
        if makes:
            return [b"e", seq_text, tid, op, *fl[1:]]
        return [b"e", seq_text, tid, op, fl[1], b"-", *fl[2:]]

    def thread(self, fl: list[bytes], seq: int) -> bytes:
        """A `t` record (2.0; `seq`: the last SEQ): its TID is the short records' from now."""
        self._other += 1
        if len(fl) != 2:
            self.check_fields(fl, seq)  # raises the error
        if not fl[1].isdigit():
            self._num(fl[1], "TID", seq)  # raises the error
        self.tid = fl[1]
        return fl[1]

    def other(self, line: bytes, fl: list[bytes], seq: int) -> list[bytes] | None:
        """Read a line that is not an `e` record; `seq` is the SEQ of the last sequenced record.

        Definitions go into the tables (None is returned). A `p` or `end` record, whose SEQ must be
        `seq + 1`, is returned as `[TAG, SEQ, WHAT, b"", DETAIL]`: DETAIL is the rest of the line,
        and index 3 (an `e` record's OP) is empty so that no OP matches it.
        """
        tag = fl[0]
        if tag in _PROCESS:
            seq += 1
            rec = split_record(line)
            if len(rec) < 2 or _DEC.fullmatch(rec[1]) is None:
                raise self.malformed(line, seq)
            if int(rec[1]) != seq:
                raise self.seq_error(rec[1], seq)
            if len(rec) != 4 or not rec[2]:
                raise self._fields_error(tag, len(rec) - 1, seq)
            rec.insert(3, b"")
            return rec
        self._other += 1
        if line[0] == 35:  # `#`: a comment
            return None
        read = READ.get(tag)
        if read is None:
            self._unknown(tag, seq)
        else:
            read(self, split_record(line) if tag in TEXT_RECORDS else fl, seq)
            if tag in FI_MAY_FOLLOW:
                return None
        self._open_fs = (0, -1)  # `fi` records follow their `fs` at once (strings apart)
        return None
