"""Replay of a dump's heap events: the live blocks at the end, the errors, the counts and the peak.

This is the replay's definition, in Python. `replay()` runs it in C (native.py, libmemdump_core.so)
when that library loads, which gives the same `Replay` (test_analyzer_native.py) and leaves to this
one any dump it cannot replay exactly; `MEMDUMP_NATIVE=0` always runs this one.

The semantics of each operation are those of docs/dump-format.md ("Heap operations"). Counting:

- `calls[OP]`: every `e` record of that OP, whatever it did;
- `allocations`: blocks made live (a successful `realloc` makes one, and releases one);
- `frees`: blocks released (by `free`, `realloc`, `reallocarray`);
- `allocated_bytes`: the sum of the sizes of the blocks made live;
- peak: the most live bytes at any moment, the number of live blocks then, and the event that
  reached it first.
- custom blocks (`custom_alloc`, `custom_free`: memdump_api.h) are kept apart and counted in
  `custom_allocations` and `custom_frees` only; at the end, the malloc'd blocks that hold a live
  custom block (superblocks) leave `live` and the custom blocks join it (docs/dump-format.md,
  "Custom blocks").

`free`, `realloc` and `reallocarray` of a pointer that is not live are errors (`invalid-free`,
`double-free` when the pointer was freed before and not allocated again since, `invalid-realloc`),
except when the recording began on a running process (`i attached 1`) and the pointer was never
seen: then the block predates the recording and the call counts as `untracked_frees`. Frees whose
stack is marked (it contains a function of `DumpReader(mark_functions=...)`: glibc's
`tcache_thread_shutdown`) are the C library's own bookkeeping: they count as
`runtime_internal_frees` and nothing else.

One loop reads the records from the one decoder (dumpdecode.py: each heap event as its `e` record's
fields, a short record expanded, SEQ numbered and checked, definitions given to `DumpReader.other`),
dispatches on OP, and handles the usual cases of `malloc`, `free`, `calloc`, `realloc`,
`posix_memalign`, `aligned_alloc` and `memalign` inline, with local variables and no object per
event but the live block's tuple. Every other heap operation goes to `_Replayer._slow`, which checks
its record fully. A record that makes the fast path raise is checked fully too, for the exact
`PATH:LINE: message`. The fast path checks the fields it uses (SEQ, STACK, sizes, and the field
count); a TID is checked when an error reports it, and a pointer when a report shows it (the
pointers of the blocks still live at the end are all checked).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import native
from .customblocks import CustomBlocks
from .dumpdecode import decode
from .dumpfile import DumpError, DumpReader
from .dumpformat import (
    CUSTOM,
    NO_RESULT,
    OPERATIONS,
    PROCESS_EVENTS,
    effect,
    unescape,
)
from .families import RELEASES_B, FamilyChecks
from .model import EndRecord, HeapError
from .rescan import find_alloc_events, result_line
from .rules import is_runtime_only

__all__ = ["OPS", "EndRecord", "HeapError", "Replay", "replay"]

#: OP -> names of its ARGS (the format's table)
OPS = OPERATIONS
_OPS_B = {op.encode(): (op, args) for op, args in OPS.items()}
_DEC = re.compile(rb"[0-9]+")
_HEX = re.compile(rb"0x[0-9a-fA-F]+")

#: errors kept in detail; the rest are only counted
MAX_ERRORS = 1000


@dataclass
class Replay:
    """What replaying the events left."""

    #: pointer as written -> (size, stack node id), in the order the blocks were allocated;
    #: the id is negated when the node is marked (see `DumpReader.node_ids`)
    live: dict[bytes, tuple[int, int]]
    calls: dict[str, int]
    events: int = 0
    allocations: int = 0
    frees: int = 0
    allocated_bytes: int = 0
    live_bytes: int = 0
    peak_bytes: int = 0
    peak_blocks: int = 0
    peak_seq: int | None = None
    peak_node: int | None = None
    errors: list[HeapError] = field(default_factory=list)
    error_count: int = 0
    untracked_frees: int = 0
    runtime_internal_frees: int = 0
    #: an allocation returned a block that was still live (its free was not recorded)
    reused_live: int = 0
    #: what the `free` calls did, summing to calls["free"]: "released" a live block, freed
    #: "null", freed the "runtime"'s own memory (runtime_internal_frees), were "errors"
    #: (invalid or double free), or freed blocks from before an attached recording ("untracked")
    free_calls: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("released", "null", "runtime", "errors",
                                               "untracked"), 0)
    )
    end: EndRecord | None = None
    #: (SEQ, path) of each `exec`, (SEQ, SIGNAME) of each fatal `signal`
    execs: list[tuple[int, str]] = field(default_factory=list)
    signals: list[tuple[int, str]] = field(default_factory=list)
    #: unknown `p` WHAT -> SEQ of its first use
    unknown_process_events: dict[str, int] = field(default_factory=dict)
    last_seq: int = 0
    #: custom blocks (memdump_api.h) made live and released; the custom blocks still live at the
    #: end are in `live`, and the malloc'd blocks that hold them (`superblocks`) are not
    custom_allocations: int = 0
    custom_frees: int = 0
    superblocks: int = 0
    superblock_bytes: int = 0
    #: blocks released by `delete` and `delete[]` (2.1), of `frees`
    delete_frees: int = 0
    #: the library's replay alone: the allocations by stack node, (node, blocks, bytes) after
    #: one another, in the order of each node's first (the exports' pass's own figures); not
    #: compared: the Python replay leaves it None
    node_allocs: Any = field(default=None, compare=False)
    #: and the blocks and bytes live at the peak of each of these nodes (two arrays in their
    #: order), None when the library did not keep the changes after the peak
    node_peak: Any = field(default=None, compare=False)
    #: the snapshots asked for (`replay(snapshots=...)`), as (index, passapi.Moment) each, the
    #: peak's index after theirs; None when the library could not take them (the Python replay,
    #: a block returned again while live, more changes after the peak than it keeps)
    node_snapshots: Any = field(default=None, compare=False)
    #: the `Figures` of the library's pass run beside the replay (`replay(request=...)`), or
    #: None when it did not run (the caller then takes the pass on its own)
    pass_figures: Any = field(default=None, compare=False)


def replay(reader: DumpReader, *, max_errors: int = MAX_ERRORS, allocations: bool = False,
           snapshots: tuple[list[int], list[int]] | None = None,
           request: Any = None) -> Replay:
    """Read all of `reader`'s lines and replay their events (raises `DumpError`): in C through
    libmemdump_core.so when it loads (native.py), else, or when it leaves the dump to Python,
    with `_Replayer`, the reference. `allocations`: the library's replay counts the allocations
    and the peak's blocks by node too (`Replay.node_allocs`, `node_peak`). `snapshots`: with
    `allocations`, the library's replay takes these moments of the live heap too (their SEQs
    ascending, and each one's `passapi.MOMENT_` kind: massif's snapshots) and the peak's by node
    (`Replay.node_snapshots`). `request` (a `heappass.NativeRequest`): the library's views' pass
    of those accumulators in the same run (replaypass.py, `Replay.pass_figures`), when it can."""
    def replayer() -> _Replayer:
        return _Replayer(reader, max_errors, allocations, snapshots)

    if request is not None:
        from .replaypass import replay_with_pass

        both = replay_with_pass(replayer, request)
        if both is not None:
            both[0].pass_figures = both[1]
            return both[0]  # type: ignore[no-any-return]
    result = native.replay(replayer)
    if result is not None:
        return result
    return _Replayer(reader, max_errors).run()


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class _Replayer(CustomBlocks, FamilyChecks):
    def __init__(self, reader: DumpReader, max_errors: int, allocations: bool = False,
                 snapshots: tuple[list[int], list[int]] | None = None) -> None:
        self.reader = reader
        #: asked of the library's replay (native.py): the allocations by node, the snapshots
        self.allocations = allocations
        self.snapshots = snapshots
        self.max_errors = max_errors
        #: pointer as written -> (size, stack node id; negative when marked)
        self.live: dict[bytes, tuple[int, int]] = {}
        #: pointer as written -> stack node id of the free that released it, and its SEQ (two
        #: dicts: a tuple per free would cost more), for a double free's "freed at"
        self.freed: dict[bytes, int] = {}
        self.freed_at: dict[bytes, int] = {}
        #: the live custom blocks, apart from the malloc'd ones: pointer as written -> (size,
        #: stack node id), and the custom blocks released (pointer -> stack node id)
        self.custom: dict[bytes, tuple[int, int]] = {}
        self.custom_freed: dict[bytes, tuple[int, int]] = {}
        #: (2.1) the live blocks of the `new` and `new[]` families: pointer as written -> b"new"
        #: or b"new[]"; a live block not in it is of the `malloc` family
        self.fam: dict[bytes, bytes] = {}
        self.r = Replay(live=self.live, calls=dict.fromkeys(OPS, 0))
        self.slow_events = 0

    def run(self) -> Replay:
        reader = self.reader
        node_ids = reader.node_ids
        live = self.live
        freed = self.freed
        freed_at = self.freed_at
        live_pop = live.pop
        live_setdefault = live.setdefault
        slow = self._slow
        bad_free = self._bad_free
        fam = self.fam
        fam_pop = fam.pop
        mismatched = self._mismatched
        released_by = RELEASES_B
        more_calls = dict.fromkeys((b"posix_memalign", b"aligned_alloc", b"memalign", b"new",
                                    b"new[]", b"delete", b"delete[]"), 0)
        seq = 0
        n_malloc = n_free = n_calloc = n_realloc = internal = deleted = 0
        allocs = frees = total = cur = peak = peak_blocks = peak_seq = peak_node = 0
        line = b""
        fl: list[bytes] = []
        release: bytes | None
        try:
            # the decoder (dumpdecode.py) gives every heap event as its `e` record's fields
            for seq, fl, line in decode(reader):  # noqa: B007 (LINE: for _diagnose)
                if fl[0] == b"e":
                    op = fl[3]
                    if op == b"malloc":
                        _, _, _, _, node, p, size = fl
                    elif op == b"free":
                        _, _, _, _, node, _, p = fl
                    elif op == b"delete" or op == b"delete[]":
                        _, _, _, _, node, _, p = fl
                    elif op == b"new" or op == b"new[]":
                        _, _, _, _, node, p, size = fl
                else:  # a process event
                    if self._process(fl):  # exec: the image is gone, and its blocks
                        live.clear()
                        freed.clear()
                        freed_at.clear()
                        self.custom.clear()
                        self.custom_freed.clear()
                        fam.clear()
                        cur = 0
                    continue
                # an allocation or a resize: release the live block `release`, then make `p`
                # live with `size` bytes (a `free` is done in its branch)
                if op == b"malloc":
                    nid = node_ids[node]
                    n_malloc += 1
                    if p == b"0x0":
                        continue
                    size = int(size)
                    if size < 0:
                        raise ValueError(size)
                    release = None
                elif op == b"free":
                    nid = node_ids[node]
                    n_free += 1
                    if nid < 0:
                        internal += 1  # e.g. glibc's tcache_thread_shutdown
                        continue
                    b = live_pop(p, None)
                    if b is None:
                        bad_free(fl, seq)
                    else:
                        frees += 1
                        cur -= b[0]
                        freed[p] = nid
                        freed_at[p] = seq
                        if fam and p in fam:  # 2.1: a new'd block (a C program has none)
                            mismatched(fl, seq, fam_pop(p), b)
                    continue
                elif op == b"new" or op == b"new[]":  # 2.1: as malloc, of its own family
                    nid = node_ids[node]
                    more_calls[op] += 1
                    if p != b"0x0":
                        size = int(size)
                        if size < 0:
                            raise ValueError(size)
                        fam[p] = op
                        release = None
                    else:
                        continue
                elif op == b"delete" or op == b"delete[]":  # 2.1: as free, of its family
                    nid = node_ids[node]
                    more_calls[op] += 1
                    b = live_pop(p, None)
                    if b is None:  # NULL, or an error: _bad_free says which
                        bad_free(fl, seq)
                        continue
                    frees += 1
                    deleted += 1
                    cur -= b[0]
                    freed[p] = nid
                    freed_at[p] = seq
                    family = fam_pop(p, b"malloc")
                    if family != released_by[op]:
                        mismatched(fl, seq, family, b)
                    continue
                elif op == b"calloc":
                    _, _, _, _, node, p, nmemb, size = fl
                    nid = node_ids[node]
                    n_calloc += 1
                    if p == b"0x0":
                        continue
                    nmemb = int(nmemb)
                    size = int(size)
                    if nmemb < 0 or size < 0:
                        raise ValueError(size)
                    size *= nmemb
                    release = None
                elif op == b"realloc" and (
                    fl[6] == b"0x0" or (fl[7] != b"0" and fl[6] in live and fl[6] not in fam)
                ):
                    # realloc(NULL, n), or a live block resized; the rest is _slow's
                    _, _, _, _, node, p, release, size = fl
                    nid = node_ids[node]
                    n_realloc += 1
                    if p == b"0x0":
                        continue  # failed: the block stays live
                    if release == b"0x0":
                        release = None
                    size = int(size)
                    if size < 0:
                        raise ValueError(size)
                elif op == b"posix_memalign" or op == b"aligned_alloc" or op == b"memalign":
                    if op == b"posix_memalign":
                        _, _, _, _, node, p, align, size, rc = fl
                        if int(rc):
                            p = b"0x0"  # failed; RESULT is only meaningful when RC is 0
                    else:
                        _, _, _, _, node, p, align, size = fl
                    nid = node_ids[node]
                    int(align)  # checked, not used
                    more_calls[op] += 1
                    if p == b"0x0":
                        continue
                    size = int(size)
                    if size < 0:
                        raise ValueError(size)
                    release = None
                else:
                    act = slow(fl, seq)
                    if act is None:
                        continue
                    release, p, size, nid = act
                if release is not None:
                    b = live_pop(release)
                    frees += 1
                    cur -= b[0]
                    freed[release] = nid
                    freed_at[release] = seq
                    if p is None:
                        continue  # only _slow's actions release without making a block
                b = (size, nid)
                old = live_setdefault(p, b)
                if old is not b:
                    cur -= old[0]
                    live[p] = b
                    self.r.reused_live += 1
                    if op != b"new" and op != b"new[]":
                        fam.pop(p, None)  # a malloc'd block now
                allocs += 1
                total += size
                cur += size
                if cur > peak:
                    peak = cur
                    peak_blocks = len(live)
                    peak_seq = seq
                    peak_node = nid
        except (ValueError, IndexError, KeyError, TypeError):
            self._diagnose(line, fl, seq)
            raise
        except OSError as e:
            raise reader.read_error(e) from None
        r = self.r
        r.calls["malloc"] += n_malloc
        r.calls["free"] += n_free
        r.calls["calloc"] += n_calloc
        r.calls["realloc"] += n_realloc
        for op_b, n in more_calls.items():
            r.calls[op_b.decode()] += n
        r.events = (
            n_malloc + n_free + n_calloc + n_realloc + sum(more_calls.values()) + self.slow_events
        )
        r.runtime_internal_frees += internal
        r.free_calls["runtime"] += internal
        free_calls = r.free_calls  # the free calls that released a block: the others are counted
        free_calls["released"] = r.calls["free"] - sum(n for k, n in free_calls.items()
                                                      if k != "released")
        r.allocations = allocs
        r.frees = frees
        r.delete_frees = deleted
        r.allocated_bytes = total
        r.live_bytes = cur
        r.peak_bytes = peak
        r.peak_blocks = peak_blocks
        r.peak_seq = peak_seq if peak_seq else None
        r.peak_node = abs(peak_node) if peak_seq else None
        return self._finish(seq)

    def _finish(self, seq: int, *, check_live: bool = True) -> Replay:
        """After the last record (SEQ `seq`): the custom blocks in place of their superblocks,
        the live pointers checked, and the errors' second readings."""
        r = self.r
        r.last_seq = seq
        if r.end is not None and r.end.seq != seq:
            r.end = None  # the recording went on after its end record: judge by the last one
        self._hide_superblocks()
        if check_live:
            self._check_live()
        if any(e.alloc_node is not None for e in r.errors):
            find_alloc_events(self.reader.path, self.r.errors)
        return r

    # -- checks --------------------------------------------------------------------------------

    def _check_live(self) -> None:
        """Pointers are compared as written; those of the blocks still live must be numbers."""
        for p in self.live:
            if _HEX.fullmatch(p) is None:
                raise DumpError(
                    self.reader.path,
                    result_line(self.reader.path, p),
                    f"malformed RESULT '{_text(p)}' (expected a hex number like 0x1f)",
                )

    def _diagnose(self, line: bytes, fl: list[bytes], seq: int) -> None:
        """Raise the DumpError for a line that made the fast path fail, if it is malformed."""
        error = self.reader.diagnose(line, seq)
        if error is not None:
            raise error
        if fl and fl[0] == b"e":
            self._event(fl, seq)

    def _event(self, fl: list[bytes], seq: int) -> tuple[int, str, int, int | None, list[int]]:
        """Check the fields of `e` record `seq` after its SEQ: (TID, OP, STACK, RESULT, ARGS).

        RESULT is None for `free` ('-'); STACK is the node id (negative when marked).
        """
        reader = self.reader
        entry = _OPS_B.get(fl[3])
        if entry is None:
            raise reader.error(seq, f"unknown heap operation '{_text(fl[3])}'")
        op, names = entry
        if len(fl) != 6 + len(names):
            found = len(fl) - 6
            raise reader.error(
                seq,
                f"'{op}' event has {found} argument{'s' if found != 1 else ''}, "
                f"expected {len(names)} ({' '.join(names)})",
            )
        tid = self._dec(fl[2], "TID", seq)
        node = reader.node_ids.get(fl[4])
        if node is None:
            raise reader.undefined_stack(fl[4], seq)
        result: int | None
        if op in NO_RESULT:
            if fl[5] != b"-":
                raise reader.error(seq, f"malformed RESULT '{_text(fl[5])}' ({op} has '-')")
            result = None
        else:
            result = self._hex(fl[5], "RESULT", seq)
        args = [
            self._hex(tok, name, seq) if name == "PTR" else self._dec(tok, name, seq)
            for tok, name in zip(fl[6:], names, strict=True)
        ]
        return tid, op, node, result, args

    def _dec(self, tok: bytes, what: str, seq: int) -> int:
        if _DEC.fullmatch(tok) is None:
            raise self.reader.error(seq, f"malformed {what} '{_text(tok)}' (expected a number)")
        return int(tok)

    def _hex(self, tok: bytes, what: str, seq: int) -> int:
        if _HEX.fullmatch(tok) is None:
            raise self.reader.error(
                seq, f"malformed {what} '{_text(tok)}' (expected a hex number like 0x1f)"
            )
        return int(tok, 16)

    # -- the slow path ---------------------------------------------------------------------------

    def _slow(
        self, fl: list[bytes], seq: int
    ) -> tuple[bytes | None, bytes | None, int, int] | None:
        """An `e` record that the hot loop does not handle inline; the record is checked fully.

        Returns None, or the action (release, new, size, STACK): release the live block
        `release`, then make `new` live with `size` bytes.
        """
        tid, op, node, result, args = self._event(fl, seq)
        self.slow_events += 1
        self.r.calls[op] += 1
        if op in CUSTOM:
            self._custom(fl, seq, tid, op, node, args[0])
            return None
        if op == "free":
            if node < 0:
                self.r.runtime_internal_frees += 1
                self.r.free_calls["runtime"] += 1
            else:
                self._bad_free(fl, seq)
            return None
        bad = False
        if (op == "realloc" or op == "reallocarray") and args[0] and fl[6] not in self.live:
            bad = True  # an error whatever the call did; a failed call leaves no block
            self._bad_pointer("invalid-realloc", fl, seq, tid, op, args[0], node)
        release, new, size = effect(op, result or 0, tuple(args))
        # pointers are kept as written: RESULT is fl[5], PTR fl[6]
        rel = fl[6] if release is not None and not bad else None
        if rel is not None and rel in self.fam:  # 2.1: realloc of a new'd block
            self._mismatched(fl, seq, self.fam.pop(rel), self.live[rel])
        made = fl[5] if new is not None else None
        if rel is None and made is None:
            return None
        return (rel, made, size, node)

    def _bad_free(self, fl: list[bytes], seq: int) -> None:
        """A free of a pointer that is not live (or malformed: this checks the record)."""
        tid, op, node, _, args = self._event(fl, seq)
        ptr = args[0]
        if ptr == 0:
            if op == "free":
                self.r.free_calls["null"] += 1
            return  # free(NULL), delete of NULL
        self._bad_pointer("invalid-free", fl, seq, tid, op, ptr, node)

    def _bad_pointer(
        self, kind: str, fl: list[bytes], seq: int, tid: int, op: str, ptr: int, node: int
    ) -> None:
        outcome = self.r.free_calls if op == "free" else {}
        if is_runtime_only(self.reader.stack(abs(node))):
            self.r.runtime_internal_frees += 1  # the runtime's own memory: not the program's error
            outcome["runtime"] = outcome.get("runtime", 0) + 1
            return
        ptok = fl[6]
        prev = self.freed.get(ptok)
        if prev is not None:
            self._error(
                "double-free" if kind == "invalid-free" else kind,
                seq,
                tid,
                op,
                ptr,
                node,
                self.freed_at[ptok],
                prev,
            )
        elif self.reader.info.get("attached") == "1":
            self.r.untracked_frees += 1
            outcome["untracked"] = outcome.get("untracked", 0) + 1
            self.freed[ptok] = node
            self.freed_at[ptok] = seq
            return
        else:
            self._error(kind, seq, tid, op, ptr, node, None, None)
        outcome["errors"] = outcome.get("errors", 0) + 1

    def _error(
        self,
        kind: str,
        seq: int,
        tid: int,
        op: str,
        ptr: int,
        node: int,
        freed_seq: int | None,
        freed_node: int | None,
        alloc: tuple[int, int, str] | None = None,
    ) -> None:
        """ALLOC: a mismatched-free's block (size, STACK, family)."""
        r = self.r
        r.error_count += 1
        if len(r.errors) < self.max_errors:
            error = HeapError(kind, seq, tid, op, ptr, abs(node), freed_seq,
                              None if freed_node is None else abs(freed_node))
            if alloc is not None:
                error.alloc_size, node, error.alloc_op = alloc
                error.alloc_node = abs(node)
            r.errors.append(error)

    def _process(self, rec: list[bytes]) -> bool:
        """A `p` or `end` record, [TAG, SEQ, WHAT, b"", DETAIL]; True for an `exec`."""
        r = self.r
        seq = int(rec[1])
        what = _text(rec[2])
        detail = unescape(rec[4])  # the recorder escapes it like a string
        if rec[0] == b"end":
            r.end = EndRecord(seq, what, detail)
            return False
        if what == "exec":
            r.execs.append((seq, detail))
            return True
        if what == "signal":
            r.signals.append((seq, detail))
        elif what not in PROCESS_EVENTS:  # a phase (2.2) is --phases' (tagphases.py)
            r.unknown_process_events.setdefault(what, seq)
        return False
