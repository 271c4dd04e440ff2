"""Write a memdump dump (docs/dump-format.md): interned strings, frames, stacks.

GDB-free: the recorder hands in raw program counters and a resolver for the first sight of each one.
The format's constants (version line, operations, kind codes, escaping) are the analyser's
`memdump_analyzer.dumpformat`, which both sides import.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from memdump_analyzer.dumpformat import FORMAT_LINE, KIND_CODES, PROCESS_EVENTS, escape

from .locktable import LockCounts


class ScanOutcome(Protocol):
    """What a pointer scan gives (core/reach.py's ScanResult)."""

    root_bytes: int
    block_bytes: int
    #: (2.7) the blocks from before a late attach's recording (the `ob` records)
    older: tuple[tuple[int, int, str, str, str], ...]

    def records(self) -> Iterable[tuple[int, str, str | None]]: ...

#: the longest tag or phase name (memdump_api.h): longer ones are cut, as the recorder does
TAG_MAX = 255
#: seconds between two clock samples (`c` records) at most, as the in-process recorder's 10 ms
CLOCK_EVERY = 0.01


@dataclass(frozen=True)
class InlinedInto:
    """A function that the code of an inner frame was inlined into, and the line of that call."""

    function: str | None
    file: str | None = None
    line: int = 0


@dataclass(frozen=True)
class FrameInfo:
    """What the recorder knows of one program counter: module, offset, function, source line.

    When the code at the program counter was inlined, `function`, `file` and `line` are the
    innermost inlined function's, and `inlined_into` lists the functions it sits in, innermost
    first, each with the line of its call to the one before; the last is the function the program
    counter physically belongs to (the `fi` records of docs/dump-format.md).
    """

    module: str | None
    offset: int
    function: str | None = None
    file: str | None = None
    line: int = 0
    inlined_into: tuple[InlinedInto, ...] = ()


class DumpWriter:
    """Appends records to an open file descriptor; definitions go just before their first use.

    Each public method that produces an event writes everything it generated with a single
    ``os.write``, so the file on disk always ends on a complete record (or a torn last line, which
    readers ignore) even if GDB is killed.
    """

    def __init__(self, fd: int, resolve: Callable[[int], FrameInfo], *,
                 header: bool = True) -> None:
        self._fd = fd
        self._resolve = resolve
        self._pending: list[str] = []
        self._strings: dict[str, int] = {}
        self._frames: dict[int, int] = {}
        self._nodes: dict[tuple[int, int], int] = {}
        self._stacks: dict[tuple[int, ...], int] = {}
        self._pcs: dict[int, tuple[int, ...]] = {}
        self._rss: Callable[[], int] | None = None
        self._started = self._sampled = 0.0
        #: the next free ids: another writer (the in-process recorder) may have used some
        self.next_string = 1
        self.next_frame = 1
        self.next_node = 1
        self.seq = 0
        self.events = 0
        self.bytes_written = 0
        if header:
            self._pending.append(FORMAT_LINE)

    # -- definitions -------------------------------------------------------------------------
    def _string(self, text: str | None) -> int:
        if not text:
            return 0
        sid = self._strings.get(text)
        if sid is None:
            sid = self.next_string
            self.next_string += 1
            self._strings[text] = sid
            self._pending.append(f"s {sid} {escape(text)}\n")
        return sid

    def _frame(self, pc: int) -> int:
        fid = self._frames.get(pc)
        if fid is None:
            info = self._resolve(pc)
            mod = self._string(info.module)
            func = self._string(info.function)
            src = self._string(info.file)
            fid = self.next_frame
            self.next_frame += 1
            self._frames[pc] = fid
            self._pending.append(
                f"f {fid} {pc:#x} {mod} {info.offset:#x} {func} {src} {info.line}\n"
            )
            for outer in info.inlined_into:
                func = self._string(outer.function)
                src = self._string(outer.file)
                self._pending.append(f"fi {fid} {func} {src} {outer.line}\n")
        return fid

    def frame_symbols(self, fid: int, info: FrameInfo) -> None:
        """The `fs` record (and `fi` records) of frame FID, written earlier without symbols by
        another writer (the in-process recorder)."""
        func = self._string(info.function)
        src = self._string(info.file)
        self._pending.append(f"fs {fid} {func} {src} {info.line}\n")
        for outer in info.inlined_into:
            func = self._string(outer.function)
            src = self._string(outer.file)
            self._pending.append(f"fi {fid} {func} {src} {outer.line}\n")

    def forget_stacks(self) -> None:
        """Another writer defined frames and nodes meanwhile: define ours afresh."""
        self._frames.clear()
        self._nodes.clear()
        self._stacks.clear()
        self._pcs.clear()

    def stack(self, pcs: tuple[int, ...]) -> int:
        """Node id for a stack given innermost first (0 for an empty stack)."""
        node = self._stacks.get(pcs)
        if node is not None:
            return node
        node = 0
        for pc in reversed(pcs):
            key = (node, self._frame(pc))
            child = self._nodes.get(key)
            if child is None:
                child = self.next_node
                self.next_node += 1
                self._nodes[key] = child
                self._pending.append(f"n {child} {node} {key[1]}\n")
            node = child
        self._stacks[pcs] = node
        self._pcs[node] = pcs
        return node

    def pcs_of(self, node: int) -> tuple[int, ...]:
        """The program counters of stack NODE (this writer's), innermost first."""
        return self._pcs.get(node, ())

    @property
    def counts(self) -> dict[str, int]:
        return {
            "strings": len(self._strings),
            "frames": len(self._frames),
            "nodes": len(self._nodes),
            "stacks": len(self._stacks),
        }

    # -- records -----------------------------------------------------------------------------
    def info(self, key: str, value: object) -> None:
        self._pending.append(f"i {key} {escape(str(value))}\n")
        self.flush()

    def event(self, tid: int, op: str, stack: int, result: int | None, args: Iterable[str]) -> None:
        """One heap operation; args are already formatted (hex pointers, decimal sizes). A clock
        sample follows when `sample_clock` was called and CLOCK_EVERY has passed since the last."""
        self.seq += 1
        self.events += 1
        res = "-" if result is None else f"{result:#x}"
        self._pending.append(f"e {self.seq} {tid} {op} {stack} {res} {' '.join(args)}\n")
        if self._rss is not None:
            now = time.monotonic()
            if now - self._sampled >= CLOCK_EVERY:
                self._clock(now)
        self.flush()

    def tag(self, tid: int, name: str | None) -> None:
        """`g TID STRING`: thread TID pushed the tag NAME (memdump_api.h; the empty name is
        string 0); None: `u TID`, it popped its innermost tag (format 2.2)."""
        if name is None:
            self._pending.append(f"u {tid}\n")
        else:
            self._pending.append(f"g {tid} {self._string(name[:TAG_MAX])}\n")
        self.flush()

    def sample_clock(self, started: float, rss: Callable[[], int]) -> None:
        """Write `c MILLIS RSS` records from now on: MILLIS since STARTED (time.monotonic(),
        CLOCK_MONOTONIC, the in-process recorder's clock too), RSS() the resident bytes; one
        now, then after events, at most one per CLOCK_EVERY seconds, and with `clock()`."""
        self._started, self._rss = started, rss
        self.clock()

    def clock(self) -> None:
        """A clock sample now (a stop, the end), when `sample_clock` was called."""
        if self._rss is not None:
            self._clock(time.monotonic())
            self.flush()

    def _clock(self, now: float) -> None:
        self._sampled = now
        self.clock_record(max(0, int((now - self._started) * 1000)), self._rss())

    def clock_record(self, millis: int, rss: int) -> None:
        """`c MILLIS RSS`, written with the next record (or flush)."""
        self._pending.append(f"c {millis} {rss}\n")

    def process(self, what: str, detail: str) -> None:
        """A `p` record: process event WHAT (`dumpformat.PROCESS_EVENTS`) with its DETAIL."""
        if what not in PROCESS_EVENTS:
            raise ValueError(f"unknown process event {what!r}")
        self.seq += 1
        self._pending.append(f"p {self.seq} {what} {escape(detail) or '-'}\n")
        self.flush()

    def scan_outcome(self, status: str, result: ScanOutcome | None, millis: int) -> None:
        """The `scan` record of a scan that gave RESULT (None: it could not run), with the kinds."""
        if result is None:
            self.scan(status, 0, 0, millis)
        else:
            self.scan(status, result.root_bytes, result.block_bytes, millis, result.records(),
                      result.older)

    def scan(
        self,
        status: str,
        root_bytes: int,
        block_bytes: int,
        millis: int,
        kinds: Iterable[tuple[int, str, str | None]] = (),
        older: Iterable[tuple[int, int, str, str, str]] = (),
    ) -> None:
        """The pointer scan at exit: its `scan` record, then one `r` record per live block
        (address, kind, extra or None: a reachable block's heuristic, an indirect block's
        clique leader as hex), then (2.7) one `ob` record per block from before a late attach
        (address, usable size, kind, how its type was found, type), all with one write."""
        self._pending.append(f"scan {self.seq} {status} {root_bytes} {block_bytes} {millis}\n")
        codes = KIND_CODES
        self._pending.extend(
            f"r {addr:#x} {codes[kind]}\n" if heur is None
            else f"r {addr:#x} {codes[kind]} {heur}\n"
            for addr, kind, heur in kinds
        )
        self._pending.extend(f"ob {addr:#x} {size} {codes[kind]} {how} {escape(name)}\n"
                             for addr, size, kind, how, name in older)
        self.flush()

    def lock_counts(self, locks: Iterable[LockCounts]) -> None:
        """(2.3) The in-process recorder's lock counts at the end: one `lk` record per lock;
        (2.4) after it, one `lw` record per stack it was waited for from (its stack defined
        first, as any stack)."""
        for c in locks:
            self._pending.append(
                f"lk {c.address:#x} {c.kind} {c.locked} {c.read_locked} {c.owner_changes} "
                f"{c.contended} {c.try_busy} {c.wait_ns} {c.max_wait_ns}\n")
            for s in c.stacks:
                node = self.stack(s.pcs)
                self._pending.append(f"lw {c.address:#x} {node} {s.contended} {s.wait_ns} "
                                     f"{s.max_wait_ns}\n")
        self.flush()

    def end(self, reason: str, detail: str = "-") -> None:
        self.seq += 1
        self._pending.append(f"end {self.seq} {reason} {escape(detail) or '-'}\n")
        self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        data = "".join(self._pending).encode("utf-8", "surrogateescape")
        self._pending.clear()
        view = memoryview(data)
        while view:
            done = os.write(self._fd, view)
            view = view[done:]
        self.bytes_written += len(data)
