"""Streaming reader of memdump dumps (docs/dump-format.md).

`DumpReader` checks the first line when it is opened; then the rest is read in one pass. Its
`records()` generator keeps the definitions (`i`, `s`, `f`, `fi`, `n`) in the reader's tables and
yields every sequenced record (`e`, `p`, `end`) as the list of its fields, still bytes, with its SEQ
checked, and for an `e` record its STACK too; everything else about an event is the consumer's to
check. The replay (`replay.py`) runs the same steps in its own loop over `lines()`, with `other()`
for every line that is not an `e` record: one generator less per event.

Only complete lines are read: the size of the file and the position of its last newline are taken
when the reader is opened, so a dump that is still being written (`memdump leaks`) reads as it was
then, and a final line without its newline is ignored and marks the dump `truncated`.
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, replace

from .dumpformat import HEADER, KIND_BY_CODE, READS_MAJOR, RECORDS, SEQUENCED, unescape

__all__ = ["DumpError", "DumpReader", "Frame", "ScanRecord", "unescape"]

_TAG = re.compile(rb"[A-Za-z][A-Za-z0-9_.-]*")
_DEC = re.compile(rb"[0-9]+")
_HEX = re.compile(rb"0x[0-9a-fA-F]+")
_SEQUENCED = tuple(tag.encode() for tag in SEQUENCED)


class DumpError(Exception):
    """A dump that cannot be read: `str()` is `PATH:LINE: message`, or `PATH: message`."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        super().__init__(path, line, message)
        self.path = path
        self.line = line
        self.message = message

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a stack: a program counter and what GDB knew about it.

    Code inlined at a program counter makes several frames with that one `pc`, `module` and
    `offset` (an `f` record and its `fi` records): each but the outermost has `inlined` set, its
    function having been inlined into the next frame's.
    """

    pc: int
    module: str | None
    offset: int
    function: str | None
    file: str | None
    line: int | None
    inlined: bool = False


@dataclass(frozen=True, slots=True)
class ScanRecord:
    """The `scan` record: the pointer scan at exit, made after sequenced record `after`."""

    after: int
    status: str
    root_bytes: int
    block_bytes: int
    millis: int
    line: int


def _show(raw: bytes, limit: int = 60) -> str:
    """A field or line as it can be quoted in a one-line message."""
    text = raw.decode("utf-8", "backslashreplace")
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


class _Limited(io.RawIOBase):
    """The first `limit` bytes of a binary file."""

    def __init__(self, raw: io.BufferedReader, limit: int) -> None:
        self._raw = raw
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._left <= 0:
            return 0
        view = memoryview(buffer)
        if len(view) > self._left:
            view = view[: self._left]
        n = self._raw.readinto(view) or 0
        self._left -= n
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _complete_length(f: io.BufferedReader, size: int) -> int:
    """Length of the file up to and including its last newline."""
    end = size
    chunk = 1 << 16
    while end > 0:
        start = max(0, end - chunk)
        f.seek(start)
        data = f.read(end - start)
        i = data.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        end = start
    return 0


class DumpReader:
    """Reads one dump. Use as a context manager, or call `close()`.

    `mark_functions`: function names; a stack node whose stack contains a frame with one of these
    functions is marked: its `node_ids` entry is negative, so that the look-up that checks an
    event's STACK also tells whether it is marked.
    """

    def __init__(self, path: str, *, mark_functions: frozenset[str] = frozenset()) -> None:
        self.path = path
        self.info: dict[str, str] = {}
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
        self.kinds: dict[bytes, tuple[str, str | None]] = {}
        #: indirect block's pointer as written -> its clique leader's (format 1.2)
        self.leaders: dict[bytes, bytes] = {}
        self._mark_functions = mark_functions
        self._marked_frames: set[int] = set()
        self._other = 0  # lines after the first that are not sequenced records, read so far
        self._file: io.BufferedReader | None = None
        self._open()

    # -- opening -------------------------------------------------------------------------------

    def _open(self) -> None:
        path = self.path
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed by close()
        except FileNotFoundError:
            raise DumpError(path, None, "no such file") from None
        except IsADirectoryError:
            raise DumpError(path, None, "is a directory, not a dump file") from None
        except PermissionError:
            raise DumpError(path, None, "cannot read the file (permission denied)") from None
        except OSError as e:
            raise DumpError(path, None, f"cannot read the file ({e.strerror or e})") from None
        try:
            st = os.fstat(raw.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise DumpError(path, None, "is not a regular file (a dump is a file on disk)")
            size = st.st_size
            if size == 0:
                raise DumpError(path, None, "the file is empty (not a memdump dump)")
            complete = _complete_length(raw, size)
            self.truncated = complete < size
            raw.seek(0)
            first = raw.readline(256)
            if complete == 0:
                self._check_header(first, partial=True)
            self._check_header(first, partial=False)
            raw.seek(0)
            buffered = io.BufferedReader(_Limited(raw, complete), buffer_size=1 << 20)
            buffered.readline()
        except OSError as e:
            raw.close()
            raise DumpError(path, None, f"cannot read the file ({e.strerror or e})") from None
        except BaseException:
            raw.close()
            raise
        self._file = buffered

    def _check_header(self, first: bytes, *, partial: bool) -> None:
        line = first.rstrip(b"\n")
        if partial and line.startswith(b"MEMDUMP"):
            raise DumpError(
                self.path, 1, "the dump ends inside its first line (the recording stopped at once)"
            )
        m = HEADER.fullmatch(line)
        if m is None or partial:
            raise DumpError(self.path, 1, f"not a memdump dump (first line is '{_show(line)}')")
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

    def find_line_of(self, seq: int) -> int | None:
        """Line number of sequenced record `seq`, found by reading the file again (slow)."""
        with open(self.path, "rb") as f:
            f.readline()
            want = str(seq).encode()
            for n, line in enumerate(f, 2):
                fl = line.split(None, 2)
                if len(fl) > 1 and fl[0] in _SEQUENCED and fl[1] == want:
                    return n
        return None

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

    # -- reading (the replay runs `records()`'s steps in its own loop) -----------------------

    def lines(self) -> Iterator[bytes]:
        """The complete lines after the first, each ending with its newline."""
        if self._file is None:
            raise ValueError("the reader is closed")
        return self._file

    def records(self) -> Iterator[list[bytes]]:
        """Yield the sequenced records in order, each as its list of fields (bytes).

        `e` records are `line.split()`; their SEQ is checked, and that their STACK is defined.
        `p` and `end` records are `[TAG, SEQ, WHAT, b"", DETAIL]` (see `other()`).
        """
        node_ids = self.node_ids
        seq = 0
        line = b""
        try:
            for line in self.lines():
                fl = line.split()
                if fl[0] == b"e":
                    seq += 1
                    if int(fl[1]) != seq:
                        raise self.seq_error(fl[1], seq)
                    if fl[4] not in node_ids:
                        raise self.undefined_stack(fl[4], seq)
                    yield fl
                else:
                    rec = self.other(line, fl, seq)
                    if rec is not None:
                        seq += 1
                        yield rec
        except (ValueError, IndexError):
            raise self.malformed(line, seq) from None
        except OSError as e:
            raise self.read_error(e) from None

    def other(self, line: bytes, fl: list[bytes], seq: int) -> list[bytes] | None:
        """Read a line that is not an `e` record; `seq` is the SEQ of the last sequenced record.

        Definitions go into the tables (None is returned). A `p` or `end` record, whose SEQ must be
        `seq + 1`, is returned as `[TAG, SEQ, WHAT, b"", DETAIL]`: DETAIL is the rest of the line,
        and index 3 (an `e` record's OP) is empty so that no OP matches it.
        """
        tag = fl[0]
        if tag == b"p" or tag == b"end":
            seq += 1
            rec = line.rstrip(b"\n").split(b" ", 3)
            if len(rec) < 2 or _DEC.fullmatch(rec[1]) is None:
                raise self.malformed(line, seq)
            if int(rec[1]) != seq:
                raise self.seq_error(rec[1], seq)
            if len(rec) != 4 or not rec[2]:
                raise self._fields_error(tag, RECORDS["p"], len(rec) - 1, seq)
            rec.insert(3, b"")
            return rec
        self._other += 1
        if tag == b"f":
            self._frame(fl, seq)
        elif tag == b"fi":
            self._inlined(fl, seq)
        elif tag == b"n":
            self._node(fl, seq)
        elif tag == b"s":
            self._string(line, seq)
        elif tag == b"i":
            self._info(line, seq)
        elif tag == b"r":
            self._kind(fl, seq)
        elif tag == b"scan":
            self._scan(fl, seq)
        elif line[0] != 35:  # not a '#' comment
            self._unknown(tag, seq)
        return None

    def read_error(self, e: OSError) -> DumpError:
        return DumpError(self.path, None, f"cannot read the file ({e.strerror or e})")

    # Definitions are rare next to events: they are read carefully, not fast.

    def _num(self, tok: bytes, what: str, seq: int) -> int:
        if _DEC.fullmatch(tok) is None:
            raise DumpError(
                self.path, self._here(seq), f"malformed {what} '{_show(tok)}' (expected a number)"
            )
        return int(tok)

    def _hexnum(self, tok: bytes, what: str, seq: int) -> int:
        if _HEX.fullmatch(tok) is None:
            raise DumpError(
                self.path,
                self._here(seq),
                f"malformed {what} '{_show(tok)}' (expected a hex number like 0x1f)",
            )
        return int(tok, 16)

    def _new_id(self, tok: bytes, kind: str, table: dict, seq: int) -> int:  # type: ignore[type-arg]
        ident = self._num(tok, f"{kind} id", seq)
        if ident == 0:
            raise DumpError(self.path, self._here(seq), f"{kind} id 0 is reserved for 'none'")
        if ident in table:
            raise DumpError(self.path, self._here(seq), f"{kind} {ident} is defined twice")
        return ident

    def _str_ref(self, tok: bytes, what: str, seq: int) -> str | None:
        ident = self._num(tok, f"{what} string id", seq)
        if ident == 0:
            return None
        try:
            return self.strings[ident]
        except KeyError:
            raise DumpError(
                self.path, self._here(seq), f"string {ident} is used before it is defined"
            ) from None

    def _fields_error(self, tag: bytes, fields: str, found: int, seq: int) -> DumpError:
        n = sum(1 for word in fields.split() if not word.startswith("["))  # [X]: optional
        return DumpError(
            self.path,
            self._here(seq),
            f"'{_show(tag)}' record has {found} field{'s' if found != 1 else ''}, "
            f"expected {n} ({fields})",
        )

    def _string(self, line: bytes, seq: int) -> None:
        fl = line.rstrip(b"\n").split(b" ", 2)
        if len(fl) < 2:
            raise self._fields_error(b"s", RECORDS["s"], len(fl) - 1, seq)
        ident = self._new_id(fl[1], "string", self.strings, seq)
        self.strings[ident] = unescape(fl[2]) if len(fl) > 2 else ""

    def _info(self, line: bytes, seq: int) -> None:
        fl = line.rstrip(b"\n").split(b" ", 2)
        if len(fl) < 2 or not fl[1]:
            raise self._fields_error(b"i", RECORDS["i"], len(fl) - 1, seq)
        self.info[unescape(fl[1])] = unescape(fl[2]) if len(fl) > 2 else ""

    def _frame(self, fl: list[bytes], seq: int) -> None:
        if len(fl) != 8:
            raise self._fields_error(b"f", RECORDS["f"], len(fl) - 1, seq)
        ident = self._new_id(fl[1], "frame", self.frames, seq)
        pc = self._hexnum(fl[2], "PC", seq)
        module = self._str_ref(fl[3], "MODULE", seq)
        offset = self._hexnum(fl[4], "OFFSET", seq)
        function = self._str_ref(fl[5], "FUNCTION", seq)
        file = self._str_ref(fl[6], "FILE", seq)
        line = self._num(fl[7], "LINE", seq)
        self.frames[ident] = Frame(pc, module, offset, function, file, line or None)
        if function is not None and function in self._mark_functions:
            self._marked_frames.add(ident)

    def _inlined(self, fl: list[bytes], seq: int) -> None:
        if len(fl) != 5:
            raise self._fields_error(b"fi", RECORDS["fi"], len(fl) - 1, seq)
        ident = self._num(fl[1], "frame id", seq)
        inner = self.frames.get(ident)
        if inner is None:
            raise DumpError(
                self.path, self._here(seq), f"frame {ident} is used before it is defined"
            )
        if ident in self._used_frames:
            raise DumpError(
                self.path,
                self._here(seq),
                f"'fi' record of frame {ident} after a stack node used the frame",
            )
        function = self._str_ref(fl[2], "FUNCTION", seq)
        file = self._str_ref(fl[3], "FILE", seq)
        line = self._num(fl[4], "LINE", seq)
        outer = self.inlined_into.setdefault(ident, [])
        if outer:
            outer[-1] = replace(outer[-1], inlined=True)
        else:
            self.frames[ident] = replace(inner, inlined=True)
        outer.append(Frame(inner.pc, inner.module, inner.offset, function, file, line or None))
        if function is not None and function in self._mark_functions:
            self._marked_frames.add(ident)

    def _node(self, fl: list[bytes], seq: int) -> None:
        if len(fl) != 4:
            raise self._fields_error(b"n", RECORDS["n"], len(fl) - 1, seq)
        ident = self._new_id(fl[1], "stack", self.nodes, seq)
        parent = self._num(fl[2], "PARENT", seq)
        frame = self._num(fl[3], "FRAME", seq)
        if parent not in self.nodes:
            raise DumpError(
                self.path, self._here(seq), f"stack {parent} is used before it is defined"
            )
        if frame not in self.frames:
            raise DumpError(
                self.path,
                self._here(seq),
                "stack node needs a frame (FRAME is 0)"
                if frame == 0
                else f"frame {frame} is used before it is defined",
            )
        self.nodes[ident] = (parent, frame)
        self._used_frames.add(frame)
        marked = frame in self._marked_frames or (
            parent != 0 and self.node_ids[str(parent).encode()] < 0
        )
        self.node_ids[str(ident).encode()] = -ident if marked else ident

    def _scan(self, fl: list[bytes], seq: int) -> None:
        if len(fl) != 6:
            raise self._fields_error(b"scan", RECORDS["scan"], len(fl) - 1, seq)
        after = self._num(fl[1], "AFTER", seq)
        if after != seq:
            raise DumpError(
                self.path,
                self._here(seq),
                f"scan record says it follows event {after}, but it follows event {seq}",
            )
        self.scan = ScanRecord(
            after,
            fl[2].decode("utf-8", "surrogateescape"),
            self._num(fl[3], "ROOT_BYTES", seq),
            self._num(fl[4], "BLOCK_BYTES", seq),
            self._num(fl[5], "MILLIS", seq),
            self._here(seq),
        )
        self.kinds.clear()
        self.leaders.clear()

    def _kind(self, fl: list[bytes], seq: int) -> None:
        if len(fl) not in (3, 4):
            raise self._fields_error(b"r", RECORDS["r"], len(fl) - 1, seq)
        if self.scan is None:
            raise DumpError(self.path, self._here(seq), "'r' record before any 'scan' record")
        self._hexnum(fl[1], "ADDR", seq)
        kind = KIND_BY_CODE.get(fl[2])
        if kind is None:
            raise DumpError(
                self.path, self._here(seq), f"unknown leak kind '{_show(fl[2])}' (D, I, P or R)"
            )
        heuristic = None
        if len(fl) > 3:
            if kind == "indirect":
                self._hexnum(fl[3], "LEADER", seq)
                self.leaders[fl[1]] = fl[3]  # as written, like the pointers of events
            else:
                heuristic = fl[3].decode("utf-8", "surrogateescape")
        self.kinds[fl[1]] = (kind, heuristic)

    def _unknown(self, tag: bytes, seq: int) -> None:
        if _TAG.fullmatch(tag) is None:
            raise DumpError(self.path, self._here(seq), f"malformed record (tag '{_show(tag)}')")
        name = tag.decode("ascii")
        self.unknown_tags.setdefault(name, self._here(seq))

    def seq_error(self, tok: bytes, seq: int) -> DumpError:
        """The error for SEQ `tok` where `seq` was expected (raises ValueError if not a number)."""
        got = int(tok)
        here = self._here(seq)
        if got == seq:
            return DumpError(self.path, here, f"malformed SEQ '{_show(tok)}' (expected {seq})")
        if seq == 1:
            return DumpError(
                self.path, here, f"the first event is numbered {got}, not 1 (events are missing)"
            )
        prev = seq - 1
        if got > seq:
            return DumpError(
                self.path, here, f"event {got} follows event {prev} (events are missing)"
            )
        return DumpError(
            self.path, here, f"event {got} follows event {prev} (events are out of order)"
        )

    def undefined_stack(self, tok: bytes, seq: int) -> DumpError:
        if _DEC.fullmatch(tok) is None:
            return DumpError(
                self.path,
                self._here(seq),
                f"malformed STACK '{_show(tok)}' (expected a number)",
            )
        return DumpError(
            self.path, self._here(seq), f"stack {int(tok)} is used before it is defined"
        )

    def diagnose(self, line: bytes, seq: int) -> DumpError | None:
        """The error in a line's tag, SEQ or (for `e`) STACK, or None when those are right.

        For a line that made a fast path raise: `seq` is the SEQ that the line should have if it
        is a sequenced record, or the last one if it is not.
        """
        fl = line.split()
        if not fl:
            return DumpError(self.path, self._here(seq) + 1, "empty line (expected a record)")
        tag = fl[0]
        here = self._here(seq)
        if tag in (b"p", b"end"):
            fl = line.rstrip(b"\n").split(b" ", 3)
        elif tag != b"e":
            return None
        if len(fl) < 2 or not fl[1]:
            return DumpError(self.path, here, f"'{_show(tag)}' record has no SEQ")
        if _DEC.fullmatch(fl[1]) is None:
            return DumpError(self.path, here, f"malformed SEQ '{_show(fl[1])}' (expected a number)")
        if int(fl[1]) != seq:
            return self.seq_error(fl[1], seq)
        if tag == b"e":
            if len(fl) < 6:
                found = len(fl) - 1
                fields = f"field{'s' if found != 1 else ''}, expected at least 5 ({RECORDS['e']})"
                return DumpError(self.path, here, f"'e' record has {found} {fields}")
            if fl[4] not in self.node_ids:
                return self.undefined_stack(fl[4], seq)
        return None

    def malformed(self, line: bytes, seq: int) -> DumpError:
        """The error for a line that made a fast path raise, as precise as `diagnose` can be."""
        error = self.diagnose(line, seq)
        if error is None:
            error = DumpError(
                self.path, self._here(seq), f"malformed record '{_show(line.rstrip())}'"
            )
        return error
