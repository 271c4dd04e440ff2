"""Compact dumps as files (docs/dump-format.md, "Compact encoding"): a text dump compacted beside
itself and renamed over it when complete, a compact dump printed or decoded for the reader; in C
(analyzer/native/compact.c, compactdec.c) when the analyser's library loads, with compact.py
otherwise. Dumps compacted in a thread while reports read their text (`compacting`): memdump.sh's,
and those GDB marked for their first report (`PENDING`, docs/memdump.md "Compaction")."""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from typing import BinaryIO

from .compact import BLOCK_TEXT, LEVEL, CompactError, decode, encode, is_compact
from .dumpformat import COMPACT_MAGIC
from .libpath import enabled, library_path

__all__ = ["PENDING", "CompactError", "compact_file", "compacting", "decoded", "info", "last_line",
           "pending", "print_text", "text_file"]

#: the extended attribute by which GDB's memdump leaves a finished text dump to be compacted by its
#: first report (gdb_ext/dbgkit/memdump/compact.py sets it; dumpnames.py clears it on a dump
#: opened again for writing)
PENDING = "user.memdump.compact"


def _library() -> ctypes.CDLL | None:
    """The analyser's C library (found as native.py finds it), None when it does not load."""
    if not enabled():
        return None
    try:
        lib = ctypes.CDLL(library_path())
        enc, dec = lib.mdz_encode, lib.mdz_decode
        info_of, last_line = lib.mdz_info, lib.mdz_last_line
    except (OSError, AttributeError):  # none, or one older than this module: compact.py's
        return None
    enc.restype = dec.restype = ctypes.c_int
    enc.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p,
                    ctypes.c_size_t]
    dec.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    info_of.restype = last_line.restype = ctypes.c_int
    info_of.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
                        ctypes.c_char_p, ctypes.c_size_t]
    last_line.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                          ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p, ctypes.c_size_t]
    return lib


#: the longest first line a reader takes (dumpio.DumpFile reads 256 bytes for it)
_FIRST = 256


def info(fd: int) -> tuple[bytes, int, int, bool] | None:
    """What a reader needs of the compact dump open as `fd` before its records, without decoding
    them (the C library's `mdz_info`): its first line, the length of its text, that length up to
    the last line end, and whether more than NUL bytes follow that. None when only decoding the
    whole dump can say (no library, a long first line, a fault in the file)."""
    lib = _library()
    if lib is None:
        return None
    first = ctypes.create_string_buffer(_FIRST)
    out = (ctypes.c_uint64 * 4)()
    err = ctypes.create_string_buffer(256)
    if lib.mdz_info(fd, first, _FIRST, out, err, len(err)) != 0 or not 0 < out[0] <= _FIRST:
        return None
    return first.raw[: out[0]], out[1], out[2], bool(out[3])


def last_line(fd: int) -> bytes | None:
    """The last record of the compact dump open as `fd` when it is a whole line (of at most 256
    bytes) with nothing but NUL bytes after it, read from its last block without decoding the
    others (the C library's `mdz_last_line`); None when it is not, or cannot be told."""
    lib = _library()
    if lib is None:
        return None
    line = ctypes.create_string_buffer(_FIRST)
    n = ctypes.c_uint64()
    err = ctypes.create_string_buffer(256)
    if lib.mdz_last_line(fd, line, _FIRST, ctypes.byref(n), err, len(err)) != 0 or n.value > _FIRST:
        return None
    return line.raw[: n.value]


def _run(convert: str, src: BinaryIO, dst: BinaryIO, path: str,
         lib: ctypes.CDLL | None | bool = True) -> None:
    """`encode` or `decode` from `src` to `dst`, with `lib` (True: the C library when it loads;
    None: compact.py); a text dump "decodes" as itself."""
    if convert == "decode" and not is_compact(src.peek(len(COMPACT_MAGIC))):  # type: ignore[attr-defined]
        _copy(src, dst, path)
        return
    lib = _library() if lib is True else lib or None
    if lib is None:
        if convert == "encode":
            encode(src, dst)
        else:
            decode(src, dst, path)
        return
    err = ctypes.create_string_buffer(512)
    dst.flush()
    os.lseek(src.fileno(), src.tell(), os.SEEK_SET)  # what src read ahead is read again
    if convert == "encode":
        rc = lib.mdz_encode(src.fileno(), dst.fileno(), LEVEL, BLOCK_TEXT, err, len(err))
    else:
        rc = lib.mdz_decode(src.fileno(), dst.fileno(), err, len(err))
    if rc != 0:
        raise CompactError(path, None, err.value.decode("utf-8", "replace"))


def _copy(src: BinaryIO, dst: BinaryIO, path: str) -> None:
    head = src.read(len(b"MEMDUMP"))
    if head != b"MEMDUMP":
        raise CompactError(path, None, "not a memdump dump (it does not begin with 'MEMDUMP' or "
                           "the compact encoding's signature)")
    dst.write(head)
    while data := src.read(1 << 20):
        dst.write(data)


def _replace(path: str, out: str, convert: str) -> None:
    """Writes the conversion of `path` to a temporary file beside `out` (0600), renamed over
    `out` only when complete: a full disk or a kill leaves `out` as it was. An `out` that exists
    and is not a regular file (/dev/null, a pipe, a terminal) is written to, never replaced."""
    directory = os.path.dirname(os.path.abspath(out))
    try:
        if not _regular_or_absent(out):
            with open(path, "rb") as src, open(out, "wb") as dst:
                _run(convert, src, dst, path)
            return
        with open(path, "rb") as src:
            fd, tmp = tempfile.mkstemp(prefix=".memdump-", suffix=".part", dir=directory)
            try:
                with os.fdopen(fd, "wb") as dst:
                    _run(convert, src, dst, path)
                    dst.flush()
                    os.fsync(dst.fileno())
                os.replace(tmp, out)
            except BaseException:
                os.unlink(tmp)
                raise
    except OSError as e:
        raise CompactError(e.filename or path, None, f"cannot write the file ({e.strerror or e})"
                           if e.filename != path else f"cannot read the file ({e.strerror or e})"
                           ) from None


def _regular_or_absent(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


def compact_file(path: str, out: str | None = None) -> None:
    """Compacts the text dump `path` into `out` (default: over `path` itself, which must be a
    regular file)."""
    if out is None and not _regular_or_absent(path):
        raise CompactError(path, None, "not a regular file (a dump is compacted over itself)")
    with open(path, "rb") as f:
        head = f.read(len(COMPACT_MAGIC))
    if is_compact(head):
        raise CompactError(path, None, "the dump is compact already")
    if not head.startswith(b"MEMDUMP"[: len(head)]) or not head:
        raise CompactError(path, None, "not a memdump dump (it does not begin with 'MEMDUMP')")
    _replace(path, out or path, "encode")


def text_file(path: str, out: str) -> None:
    """Writes the text records of the dump `path` (compact or text) to `out`."""
    _replace(path, out, "decode")


def print_text(path: str, out: BinaryIO) -> None:
    """Writes the text records of the dump `path` (compact or text) to `out`."""
    try:
        with open(path, "rb") as src:
            _run("decode", src, out, path)
            out.flush()
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        raise CompactError(path, None, f"cannot read the file ({e.strerror or e})") from None


def decoded(path: str, fd: int) -> int:
    """A descriptor of the text of the compact dump open as `fd`: an unlinked temporary file
    (0600, in $TMPDIR) that the reader reads as it reads a text dump; `fd` is closed."""
    with os.fdopen(fd, "rb") as src:
        dst = tempfile.TemporaryFile()
        try:
            _run("decode", src, dst, path)
            dst.flush()
        except BaseException:
            dst.close()
            raise
    with dst:
        return os.dup(dst.fileno())


def pending(path: str) -> bool:
    """Whether `path` is a finished text dump that GDB left to its first report to compact: it
    carries the `PENDING` attribute and its last line is the recording's `end` record."""
    try:
        os.getxattr(path, PENDING)
        with open(path, "rb") as fh:
            if fh.read(len(b"MEMDUMP")) != b"MEMDUMP":
                return False
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - 4096))
            tail = fh.read()
    except OSError:  # no attribute (or none kept by the file system), no file
        return False
    return tail.endswith(b"\n") and tail[tail.rfind(b"\n", 0, -1) + 1:].startswith(b"end ")


@contextlib.contextmanager
def compacting(dumps: list[str], said: list[str]) -> Iterator[None]:
    """Compacts DUMPS in a thread while the body runs (the C library's compaction runs without
    Python's lock, on another core); `said` receives, for each dump, what its compaction said
    (`PATH: compacted, ...`, or why the dump stays text)."""

    def compact_all() -> None:
        for dump in dumps:
            try:
                before = os.path.getsize(dump)
                compact_file(dump)
                said.append(f"{dump}: compacted, {before:,} bytes of text in "
                            f"{os.path.getsize(dump):,}")
            except (CompactError, OSError) as e:
                with contextlib.suppress(OSError):
                    os.removexattr(dump, PENDING)  # not tried again by every report
                why = str(e) if isinstance(e, CompactError) else f"{dump}: {e.strerror or e}"
                said.append(f"{why}; the dump stays text")

    worker = threading.Thread(target=compact_all, name="compact")
    worker.start()
    try:
        yield
    finally:
        worker.join()
