"""`memdump-analyze --format heaptrack -o FILE DUMP`: a dump as heaptrack's data file, for
`heaptrack_print` and `heaptrack_gui` (docs/exports.md, "heaptrack").

The file is what heaptrack's interpreter (`heaptrack_interpret`) writes, file format 3 of
heaptrack 1.4: text lines of one letter and hex numbers, strings with their length.

    v 10400 3                 heaptrack's version, the file format's
    X CMDLINE                 the program
    I PAGESIZE PAGES          the machine's page size and pages
    s LEN TEXT                string N (from 1): a module, a function, a file
    i IP MODULE [FN FILE LINE [FN FILE LINE]...]   instruction pointer N (from 1): its module,
                              its function, file and line, then the functions it is inlined
                              into with the lines of those calls, outwards
    t IP PARENT               trace node N (from 1): instruction pointer IP called from node
                              PARENT (0: none)
    a SIZE TRACE              allocation info N (from 0): SIZE bytes allocated at TRACE
    + INFO                    a block of allocation info INFO is allocated
    - INFO                    a block of allocation info INFO is freed
    c MILLIS                  the time since the start
    R PAGES                   the resident set size

A dump's stack node is a heaptrack trace node (a frame called from a parent node), a frame an
instruction pointer with its inlined levels innermost first as heaptrack writes them, and a heap
event a `+` or `-` as heaptrack's hooks write them: a realloc frees its old block and allocates
its new one; `custom_alloc`/`custom_free` (memdump_api.h's custom blocks, inside blocks malloc
made) have no counterpart in heaptrack and are left out, as are releases of blocks the dump does
not have live. A program started through an exec (a wrapper script) is exported from its last
image, as heaptrack records one program. `c` records become `c` and `R` lines (RSS in pages).
The definitions come before the events in the file; the events are written to a temporary file
first (one pass over the dump, memory bounded by the live blocks and the stacks), then copied.
The pass runs in C when the analyser's library loads (heaptracknative.py, htexport.c; this loop
is the reference and the fallback, MEMDUMP_NATIVE=0 chooses it).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from typing import BinaryIO

from . import heaptracknative
from .dumpdecode import decode
from .dumpfile import DumpError, DumpReader
from .dumpformat import effect

__all__ = ["HEAPTRACK_VERSION", "function_name", "machine", "write"]

#: what the `v` line says: heaptrack 1.4.0, file format 3 (sized strings)
HEAPTRACK_VERSION = (0x10400, 3)

#: how the pass reads each operation: the frees and the plain allocations (most of a dump's
#: events) without `dumpformat.effect`, whose answer for them they write out; the operations
#: heaptrack does not see (memdump_api.h's custom blocks) skipped; the others through `effect`
_RELEASE, _MAKE, _SKIP, _OTHER = range(4)
_KINDS = {
    **dict.fromkeys((b"free", b"delete", b"delete[]"), _RELEASE),
    **dict.fromkeys((b"malloc", b"new", b"new[]"), _MAKE),
    **dict.fromkeys((b"custom_alloc", b"custom_free"), _SKIP),
}


class _Events:
    """The pass: the `+`, `-`, `a`, `c`, `R` lines, and the trace nodes they use."""

    def __init__(self, reader: DumpReader, out: BinaryIO, page_size: int) -> None:
        self.reader = reader
        self.out = out
        self.page_size = page_size
        #: the program of the last image, when an exec started it (else the dump's `program`)
        self.program: str | None = None
        #: stack node -> trace index (from 1), and the traces in order: (frame id, parent index)
        self.trace_of: dict[int, int] = {}
        self.traces: list[tuple[int, int]] = []
        #: live block -> its allocation info; (size, trace) -> allocation info (from 0), and
        #: each info's stack node
        self.live: dict[int, int] = {}
        self.infos: dict[tuple[int, int], int] = {}
        self.nodes: list[int] = []
        #: whether the recording ended with the program's exit (an `end exit` record)
        self.exited = False

    def _reset(self) -> None:
        """Forget the image before an exec: the file holds the last one, as heaptrack records
        one program."""
        for table in (self.trace_of, self.traces, self.live, self.infos, self.nodes):
            table.clear()
        self.out.seek(0)
        self.out.truncate()

    def trace(self, node: int) -> int:
        """Node's trace index, its ancestors' assigned first (a parent comes before its child)."""
        index = self.trace_of.get(node)
        if index is not None:
            return index
        chain = []
        nodes = self.reader.nodes
        while node and node not in self.trace_of:
            chain.append(node)
            node = nodes[node][0]
        parent = self.trace_of.get(node, 0)
        for ident in reversed(chain):
            self.traces.append((nodes[ident][1], parent))
            parent = len(self.traces)
            self.trace_of[ident] = parent
        return parent

    def run(self) -> None:
        write = self.out.write
        live = self.live
        infos = self.infos
        trace_of = self.trace_of
        reader = self.reader
        for seq, fl, _ in decode(reader, state=True):
            tag = fl[0]
            if tag == b"e":
                op = fl[3]
                kind = _KINDS.get(op, _OTHER)
                if kind == _RELEASE:  # free, delete, delete[]: what effect() says of them
                    released = int(fl[6], 0)
                    if released:
                        info = live.pop(released, None)
                        if info is not None:
                            write(b"- %x\n" % info)
                    continue
                if kind == _MAKE:  # malloc, new, new[]
                    size = int(fl[6], 0)
                    made = 0 if fl[5] == b"-" else int(fl[5], 16)
                    if not made:
                        continue
                elif kind == _SKIP:
                    continue
                else:
                    result = 0 if fl[5] == b"-" else int(fl[5], 16)
                    released, made, size = effect(op.decode(), result,
                                                  tuple(int(a, 0) for a in fl[6:]))
                    if released is not None:
                        info = live.pop(released, None)
                        if info is not None:
                            write(b"- %x\n" % info)
                    if made is None:
                        continue
                node = int(fl[4])
                trace = trace_of.get(node)
                key = (size, trace if trace is not None else self.trace(node))
                info = infos.get(key)
                if info is None:
                    info = infos[key] = len(infos)
                    self.nodes.append(node)
                    write(b"a %x %x\n" % key)
                live[made] = info
                write(b"+ %x\n" % info)
            elif tag == b"c":
                millis, rss = reader.clock_sample(fl, seq)
                write(b"c %x\n" % millis)
                if rss:
                    write(b"R %x\n" % (rss // self.page_size))
            elif tag == b"p" and fl[2] == b"exec":
                self.program = fl[4].decode(errors="replace")
                self._reset()
            elif tag == b"end":
                self.exited = fl[2] == b"exit"

    def freeres(self) -> None:
        """At the program's exit heaptrack's hooks call libstdc++'s `__gnu_cxx::__freeres`,
        which frees the exception-handling pool libstdc++'s constructor allocated (72,704 bytes
        with GCC 12): that block, still live in the dump, is freed here, after the events
        (`exited` known). Its stack: libstdc++'s code called by the loader's constructor calls."""
        if not self.exited:
            return
        from .rules import is_dynamic_loader

        self.out.seek(0, os.SEEK_END)  # after the events (the library's too)
        stack = self.reader.stack
        freed: dict[int, bool] = {}  # info -> whether its blocks are the pool (one walk each)
        for info in list(self.live.values()):
            pool = freed.get(info)
            if pool is None:
                frames = stack(self.nodes[info])
                pool = freed[info] = bool(
                    frames and os.path.basename(frames[0].module or "").startswith("libstdc++")
                    and any(is_dynamic_loader(f.module) for f in frames))
            if pool:
                self.out.write(b"- %x\n" % info)


def function_name(name: str | None) -> str | None:
    """NAME as heaptrack's interpreter writes it. heaptrack names a function by its linkage
    name, which heaptrack_print demangles with its parameters, as GDB's names have them; but
    `main` is never mangled, and GDB calls a C++ program's `main()`: it is written `main`, the
    name at which heaptrack_print stops showing a stack."""
    if name is not None and name.startswith("main(") and name.endswith(")"):
        return "main"
    return name


class _Definitions:
    """The `s`, `i` and `t` lines of the traces the events used."""

    def __init__(self, reader: DumpReader, out: BinaryIO) -> None:
        self.reader = reader
        self.out = out
        self.strings: dict[str, int] = {}
        self.ips: dict[int, int] = {}
        #: the lines not written yet, in order (written a few thousand at a time)
        self.lines: list[bytes] = []

    def string(self, text: str | None) -> int:
        if not text:
            return 0
        index = self.strings.get(text)
        if index is None:
            data = text.encode(errors="replace").replace(b"\n", b" ")
            self.lines.append(b"s %x %s\n" % (len(data), data))
            index = self.strings[text] = len(self.strings) + 1
        return index

    def ip(self, frame_id: int) -> int:
        index = self.ips.get(frame_id)
        if index is not None:
            return index
        reader = self.reader
        frames = [reader.frames[frame_id], *reader.inlined_into.get(frame_id, ())]
        first = frames[0]
        # heaptrack's instruction pointers are inside the call (its hooks write the return
        # address less one); a dump's frames hold return addresses
        words = [b"i %x %x" % (first.pc - 1, self.string(first.module))]
        function, file = self.string(function_name(first.function)), self.string(first.file)
        if function or file:
            words.append(b"%x" % function)
            if file:
                words.append(b"%x %x" % (file, first.line or 0))
                for outer in frames[1:]:
                    words.append(b"%x %x %x" % (self.string(function_name(outer.function)),
                                                self.string(outer.file), outer.line or 0))
        self.lines.append(b" ".join(words) + b"\n")
        index = self.ips[frame_id] = len(self.ips) + 1
        return index

    def traces(self, traces: Iterable[tuple[int, int]]) -> None:
        ips, lines, write = self.ips, self.lines, self.out.write
        for frame_id, parent in traces:
            index = ips.get(frame_id)
            lines.append(b"t %x %x\n" % (index if index is not None else self.ip(frame_id),
                                         parent))
            if len(lines) >= 4096:
                write(b"".join(lines))
                lines.clear()
        write(b"".join(lines))
        lines.clear()


def _open_output(path: str) -> tuple[BinaryIO, subprocess.Popen[bytes] | None]:
    """FILE for writing, compressed as its name says (`.gz`, `.zst`: what heaptrack_print
    reads by the name), created 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    raw = os.fdopen(fd, "wb")
    if path.endswith(".gz"):
        # no name and mtime 0 in its header: the same dump gives the same bytes, as pprof's
        return gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6,  # type: ignore[return-value]
                             mtime=0), None
    if path.endswith(".zst"):
        zstd = shutil.which("zstd")
        if zstd is None:
            raw.close()
            raise DumpError(path, None, "writing .zst needs the zstd program (name the file "
                            ".gz, or neither)")
        proc = subprocess.Popen([zstd, "-q", "-c"], stdin=subprocess.PIPE, stdout=raw)
        raw.close()
        assert proc.stdin is not None
        return proc.stdin, proc
    return raw, None


def machine() -> tuple[int, int]:
    """The `I` line's page size and physical pages: this machine's (a dump does not say the
    recording machine's; heaptrack_gui shows them as the system's memory)."""
    return os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_PHYS_PAGES")


def write(dump: str, path: str, *, symbolize: bool = True) -> None:
    """Write DUMP as heaptrack's data file PATH (`.gz` or `.zst` compressed by its name)."""
    page_size, pages = machine()
    with DumpReader(dump) as reader, tempfile.TemporaryFile() as events:
        run = _Events(reader, events, page_size)
        if not heaptracknative.events(run, events.fileno()):
            events.truncate(0)  # what the library wrote before it left the dump to Python
            try:
                run.run()
            except (ValueError, IndexError, KeyError):  # a field the pass cannot read: the
                from .heappass import diagnose  # replay's exact `PATH:LINE: message`

                raise diagnose(dump) from None
        if symbolize:
            from .symbolize import symbolize as symbolize_frames

            symbolize_frames(reader, run.trace_of)
        run.freeres()
        try:
            _write_file(path, reader, run, page_size, pages, events)
        except OSError as e:
            raise DumpError(path, None, f"cannot write the file ({e.strerror or e})") from None


def _write_file(path: str, reader: DumpReader, run: _Events, page_size: int, pages: int,
                events: BinaryIO) -> None:
    out, proc = _open_output(path)
    try:
        try:
            out.write(b"v %x %x\n" % HEAPTRACK_VERSION)
            program = run.program or reader.info.get("program", "")
            out.write(b"X %s\n" % program.encode(errors="replace").replace(b"\n", b" "))
            out.write(b"I %x %x\n" % (page_size, pages))
            if reader.info.get("attached") == "1":
                out.write(b"A\n")  # heaptrack's mark of a recording that began with an attach
            _Definitions(reader, out).traces(run.traces)
            events.seek(0)
            shutil.copyfileobj(events, out, 1 << 20)
        finally:
            out.close()
            if proc is not None and proc.wait() != 0:
                raise DumpError(path, None, f"zstd failed (status {proc.returncode})")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)  # not half a file (a full disk, an interrupt)
        raise
