"""Opening a dump file: its complete lines, and the NUL padding of format 1.3 taken out of them.

Only complete lines are read: the size of the file and the position of its last newline are taken
when the file is opened, so a dump that is still being written (`memdump leaks`) reads as it was
then, and a final line without its newline is ignored and marks the dump `truncated`. That covers
the end of a dump written through a file mapping (the in-process recorder, docs/recorder.md): a
final run of NUL bytes without a newline is space the recorder had not written yet.

A compact dump is opened without decoding its records: the C library reads its first line and
the lengths of its text (`compactfile.info`), and the C replay and views' pass read its records
straight from the decoder (`compact_fd`, native.py). Its text is decoded only when a reader asks for
its lines (the Python replay, the passes the library leaves to Python), into an unlinked temporary
file then read as a text dump is; without the library, that happens when it is opened. The latest
dump decoded stays decoded for the process (`_latest`): a reader that opens it again reads the same
text without decoding it twice.

NUL bytes before a record are padding (docs/dump-format.md, "Padding"). They are found by one scan
of the file when its lines are first read (memchr speed), or given by a reader that found them as it
read (the C replay, native.py); the lines they touch are cleaned then, once: what
follows the last NUL of a line is its record, and what precedes its first NUL is a partial record
(the recorder was killed while writing it), ignored and counted. `lines()` then chains the
untouched stretches of the file, read as they are, with the cleaned lines, so that the event path
costs the same whether a dump has padding or not.
"""

from __future__ import annotations

import io
import itertools
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator

from .compactfile import CompactError, decoded, info
from .dumpformat import COMPACT_MAGIC, PADDING

__all__ = ["DumpError", "DumpFile", "clean_line", "show"]

_CHUNK = 1 << 20
#: the latest compact dump decoded, by its file's identity, and a descriptor of its text
_latest: tuple[tuple[int, int, int, int], int] | None = None
_NULS = re.compile(re.escape(PADDING) + b"+")
#: what a line of padding alone reads as: a comment, so that line numbers stay right
_BLANK = b"#\n"


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


def show(raw: bytes, limit: int = 60) -> str:
    """A field or line as it can be quoted in a one-line message."""
    text = raw.decode("utf-8", "backslashreplace")
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def clean_line(line: bytes) -> bytes:
    """A line without its padding: what follows its last NUL byte (for the slow re-reads)."""
    rest = line.rsplit(PADDING, 1)[-1]
    return rest if rest.strip() else _BLANK


class _Range(io.RawIOBase):
    """Bytes `start` to `end` of a file descriptor, read with pread (no shared position)."""

    def __init__(self, fd: int, start: int, end: int,
                 on_read: Callable[[int, memoryview | int], None] | None = None) -> None:
        self._fd = fd
        self._pos = start
        self._end = end
        self._on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self._end - self._pos)
        if n <= 0:
            return 0
        view = memoryview(buffer)[:n]
        n = os.preadv(self._fd, [view], self._pos)  # into the buffer: no copy
        self._pos += n
        if self._on_read is not None:
            self._on_read(self._pos, view[:n])  # once a chunk: nothing per line
        return n


class DumpFile:
    """One dump file, opened: `first` (its first line), `lines()` (the complete lines after it,
    cleaned of padding), `truncated`, `partial_records` (file offsets of partial records before
    padding). Raises `DumpError` when the file cannot be read."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.first = b""
        self.truncated = False
        self._partial: list[int] = []
        #: the stretches to read as they are, and the cleaned line after each (None: none); found
        #: when first needed (`_padding`)
        self._pieces: list[tuple[int, int, bytes | None]] | None = None
        self._fd = -1  # the text's descriptor: the file's, or its decoded text's (-1: not yet)
        #: a compact dump's own descriptor, while its text is read through the decoder (-1: a
        #: text dump, or one decoded when it was opened)
        self.compact_fd = -1
        self._lines: Iterable[bytes] | None = None
        #: called with the file offset reached and the bytes read, after each chunk `lines()`
        #: reads (a progress bar)
        self.on_read: Callable[[int, memoryview | int], None] | None = None
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise DumpError(path, None, "no such file") from None
        except IsADirectoryError:
            raise DumpError(path, None, "is a directory, not a dump file") from None
        except PermissionError:
            raise DumpError(path, None, "cannot read the file (permission denied)") from None
        except OSError as e:
            raise DumpError(path, None, f"cannot read the file ({e.strerror or e})") from None
        try:
            self._scan()
        except OSError as e:
            self.close()
            raise DumpError(path, None, f"cannot read the file ({e.strerror or e})") from None
        except BaseException:
            self.close()
            raise

    def _scan(self) -> None:
        st = os.fstat(self._fd)
        if stat.S_ISDIR(st.st_mode):
            raise DumpError(self.path, None, "is a directory, not a dump file")
        if not stat.S_ISREG(st.st_mode):
            raise DumpError(self.path, None, "is not a regular file (a dump is a file on disk)")
        size = st.st_size
        if size == 0:
            raise DumpError(self.path, None, "the file is empty (not a memdump dump)")
        if os.pread(self._fd, len(COMPACT_MAGIC), 0) == COMPACT_MAGIC:
            known = info(self._fd)
            if known is not None:
                self.compact_fd, self._fd = self._fd, -1
                self.first, _, self.complete, self.truncated = known
                return
            self._decode(self._fd)
            size = os.fstat(self._fd).st_size
        self.complete = self._complete_length(size)
        # a final line without its newline: a record cut short (NUL bytes alone are space the
        # recorder had not written yet: no record was cut)
        self.truncated = self._tail_written
        head = os.pread(self._fd, 256, 0)
        cut = head.find(b"\n")
        self.first = head if cut < 0 else head[: cut + 1]

    def _text(self) -> int:
        """The descriptor of the dump's text: a compact dump's is decoded the first time."""
        if self._fd < 0:
            if self.compact_fd < 0:
                raise ValueError("the reader is closed")
            self._decode(os.dup(self.compact_fd))
        return self._fd

    def _decode(self, fd: int) -> None:
        """The compact dump open as `fd` (docs/dump-format.md, "Compact encoding") read as its
        text, decoded into an unlinked temporary file (`fd` is closed)."""
        global _latest
        self._fd = -1
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if _latest is not None and _latest[0] == key:
            os.close(fd)
            self._fd = os.dup(_latest[1])
        else:
            try:
                self._fd = decoded(self.path, fd)
            except CompactError as e:
                raise DumpError(e.path, None, e.message) from None
            if _latest is not None:
                os.close(_latest[1])
            _latest = (key, os.dup(self._fd))

    @property
    def partial_records(self) -> list[int]:
        """File offsets of the partial records before padding."""
        self._padding()
        return self._partial

    def padding_from(self, runs: Iterable[tuple[int, int]]) -> None:
        """Take the file's runs of NUL bytes after its first line, (start, end) in order, from a
        reader that found them (the C replay, native.py) instead of reading the file again."""
        self._padding(runs)

    def _padding(
        self, runs: Iterable[tuple[int, int]] | None = None
    ) -> list[tuple[int, int, bytes | None]]:
        """The lines with padding, cleaned, and the stretches between them (found once)."""
        if self._pieces is None:
            pieces: list[tuple[int, int, bytes | None]] = []
            if self.complete:
                start = len(self.first)
                for ls, le, nuls in self._padded_lines(start, self.complete, runs):
                    pieces.append((start, ls, self._cleaned(ls, le, nuls)))
                    start = le
                pieces.append((start, self.complete, None))
            self._pieces = pieces
        return self._pieces

    def _complete_length(self, size: int) -> int:
        """Length of the file up to and including its last newline; sets `_tail_written` when
        what follows it is more than NUL bytes."""
        end = size
        self._tail_written = False
        while end > 0:
            begin = max(0, end - _CHUNK)
            data = os.pread(self._fd, end - begin, begin)
            i = data.rfind(b"\n")
            if data[i + 1 :].strip(b"\0"):
                self._tail_written = True
            if i >= 0:
                return begin + i + 1
            end = begin
        return 0

    def _runs(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """The runs of NUL bytes between offsets `start` and `end`, merged across chunks."""
        pending: tuple[int, int] | None = None
        pos = start
        while pos < end:
            data = os.pread(self._text(), min(_CHUNK, end - pos), pos)
            if not data:
                break
            if PADDING in data:
                for m in _NULS.finditer(data):
                    s, e = pos + m.start(), pos + m.end()
                    if pending is not None and pending[1] == s:
                        pending = (pending[0], e)
                        continue
                    if pending is not None:
                        yield pending
                    pending = (s, e)
            pos += len(data)
        if pending is not None:
            yield pending

    def _padded_lines(
        self, start: int, end: int, runs: Iterable[tuple[int, int]] | None = None
    ) -> Iterator[tuple[int, int, list[tuple[int, int]]]]:
        """(start, end, NUL runs) of each line that holds padding, in order."""
        line: tuple[int, int, list[tuple[int, int]]] | None = None
        for s, e in self._runs(start, end) if runs is None else runs:
            if line is not None and s < line[1]:
                line[2].append((s, e))
                continue
            if line is not None:
                yield line
            line = (self._line_start(s, start), self._line_end(e), [(s, e)])
        if line is not None:
            yield line

    def _line_start(self, pos: int, floor: int) -> int:
        while pos > floor:
            begin = max(floor, pos - 4096)
            i = os.pread(self._text(), pos - begin, begin).rfind(b"\n")
            if i >= 0:
                return begin + i + 1
            pos = begin
        return floor

    def _line_end(self, pos: int) -> int:
        while True:  # the file's complete part ends with a newline
            data = os.pread(self._text(), 4096, pos)
            i = data.find(b"\n")
            if i >= 0 or not data:
                return pos + i + 1 if i >= 0 else pos
            pos += len(data)

    def _cleaned(self, ls: int, le: int, runs: list[tuple[int, int]]) -> bytes:
        """The record of a line with padding; notes a partial record before the padding."""
        pieces = [(ls, runs[0][0])]
        pieces.extend((a[1], b[0]) for a, b in itertools.pairwise(runs))
        for s, e in pieces:
            if e > s and os.pread(self._text(), e - s, s).strip():
                self._partial.append(s)
        record = os.pread(self._text(), le - runs[-1][1], runs[-1][1])
        return record if record.strip() else _BLANK

    def partial_line(self) -> int | None:
        """Line number of the first partial record before padding (reads the file again)."""
        if not self.partial_records:
            return None
        target = self.partial_records[0]
        count = pos = 0
        while pos < target:
            data = os.pread(self._text(), min(_CHUNK, target - pos), pos)
            if not data:
                break
            count += data.count(b"\n")
            pos += len(data)
        return count + 1

    def lines(self) -> Iterable[bytes]:
        """The complete lines after the first, each ending with its newline."""
        if self._fd < 0 and self.compact_fd < 0:
            raise ValueError("the reader is closed")
        if self._lines is None:
            self._lines = self._open_lines()
        return self._lines

    def _open_lines(self) -> Iterable[bytes]:
        parts: list[Iterable[bytes]] = []
        for start, end, cleaned in self._padding():
            if end > start:
                parts.append(io.BufferedReader(_Range(self._text(), start, end, self.on_read),
                                               buffer_size=_CHUNK))
            if cleaned is not None:
                parts.append((cleaned,))
        if len(parts) == 1:
            return parts[0]
        return itertools.chain.from_iterable(parts)

    def close(self) -> None:
        for fd in (self._fd, self.compact_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self.compact_fd = -1
