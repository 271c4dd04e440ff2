"""The analyser's records: what the replay finds (`HeapError`, `EndRecord`) and what a report shows
(`Group`, `ErrorReport`, `Analysis`). Frames and the scan record are the reader's (`dumpfile`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .accesserrors import AccessRow
from .dumpdefs import OlderBlock
from .dumpfile import Frame, ScanRecord
from .heapcorruption import CorruptionRow
from .images import Image
from .locks import LockRow
from .wording import plural

__all__ = ["Analysis", "EndRecord", "ErrorReport", "Group", "HeapError"]


@dataclass(slots=True)
class HeapError:
    """A misuse of the heap seen in the events. Stacks are stack node ids."""

    kind: str  # "invalid-free" | "double-free" | "invalid-realloc" | "mismatched-free"
    seq: int
    tid: int
    op: str
    pointer: int
    node: int
    freed_seq: int | None = None
    freed_node: int | None = None
    #: mismatched-free (2.1): the block's size and allocation stack; the allocation's OP and SEQ
    #: are found after the pass (rescan.find_alloc_events)
    alloc_size: int | None = None
    alloc_node: int | None = None
    alloc_op: str | None = None
    alloc_seq: int | None = None


@dataclass(slots=True)
class EndRecord:
    seq: int
    reason: str
    detail: str


@dataclass
class Group:
    """Live blocks allocated at one (trimmed) stack, of one leak kind when the dump has a scan."""

    kind: str  # "leak" | "runtime"
    bytes: int
    blocks: int
    stack: tuple[Frame, ...]
    #: rank of its oldest live block in allocation order (ties in size are ordered by it)
    order: int = 0
    #: "definite" | "indirect" | "possible" | "reachable" | "unknown" (allocated after the
    #: scan); None when the dump has no pointer scan that succeeded
    leak_kind: str | None = None
    #: of a definitely lost group: the indirectly lost blocks its blocks lead (their clique),
    #: valgrind's "N (D direct, I indirect) bytes"; `bytes` and `blocks` are the direct ones
    indirect_bytes: int = 0
    indirect_blocks: int = 0
    #: (address, size) of its blocks, in allocation order, when the analysis was asked to keep
    #: them (GDB's `memdump block-list`)
    addresses: list[tuple[int, int]] = field(default_factory=list)
    #: the whole stack of the group's first block, allocator and below-main frames included
    #: (what suppressions match, docs/memdump.md "Leaks in CI")
    raw: tuple[Frame, ...] = ()
    #: the stack node of the group's first block (`raw`'s), as the dump numbers it
    node: int = 0
    #: of a definitely lost group: the indirectly lost groups its blocks lead, with the bytes
    #: and blocks of each that they lead (what a LeakSanitizer suppression of it hides too)
    leads: list[tuple[Group, int, int]] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        """Direct and indirect bytes: what valgrind sorts loss records by."""
        return self.bytes + self.indirect_bytes


@dataclass
class ErrorReport:
    kind: str  # "invalid-free" | "double-free" | "invalid-realloc" | "mismatched-free"
    seq: int
    tid: int
    op: str
    pointer: int
    stack: tuple[Frame, ...]
    freed_seq: int | None = None
    freed_stack: tuple[Frame, ...] | None = None
    #: mismatched-free: the allocation of the block (its OP, SEQ, size and stack)
    alloc_op: str | None = None
    alloc_seq: int | None = None
    alloc_size: int | None = None
    alloc_stack: tuple[Frame, ...] | None = None


@dataclass
class Analysis:
    """Everything a report shows about one dump (see `memdump_analyzer.analyze`)."""

    path: str
    info: dict[str, str]
    version: tuple[int, int]
    program: str | None
    pid: int | None
    attached: bool
    #: the dump has an end record
    complete: bool
    #: its last line was incomplete and was ignored
    truncated: bool
    end: EndRecord | None
    last_seq: int
    events: int
    calls: dict[str, int]
    allocations: int
    frees: int
    allocated_bytes: int
    peak_bytes: int
    peak_blocks: int
    peak_seq: int | None
    peak_stack: tuple[Frame, ...]
    leaked_bytes: int
    leaked_blocks: int
    runtime_bytes: int
    runtime_blocks: int
    #: all groups, leaks and runtime, largest first
    groups: list[Group]
    errors: list[ErrorReport]
    error_count: int
    untracked_frees: int
    runtime_internal_frees: int
    reused_live: int
    execs: list[tuple[int, str]]
    signals: list[tuple[int, str]]
    #: the pointer scan at exit, if the dump has one (its status may say it failed)
    scan: ScanRecord | None = None
    #: custom blocks (memdump_api.h): {"allocations", "frees", "superblocks",
    #: "superblock_bytes"}; None when the dump has no custom_alloc nor custom_free
    custom: dict[str, int] | None = None
    #: leak kind -> [bytes, blocks] of the `leak` blocks; None without a successful scan
    leak_kinds: dict[str, list[int]] | None = None
    unknown_tags: dict[str, int] = field(default_factory=dict)
    unknown_process_events: dict[str, int] = field(default_factory=dict)
    #: what the `free` calls did (`Replay.free_calls`): released, null, runtime, errors, untracked
    free_calls: dict[str, int] = field(default_factory=dict)
    #: the blocks released by `delete` and `delete[]` (format 2.1)
    delete_frees: int = 0
    #: partial records before NUL padding that were ignored (format 1.3), and the first's line
    partial_records: int = 0
    partial_line: int | None = None
    #: frames without symbols in the dump that were symbolised from their modules (addr2line),
    #: what the text report says about it, and why frames kept no symbols (warnings)
    symbolized_frames: int = 0
    symbol_notes: list[str] = field(default_factory=list)
    symbol_warnings: list[str] = field(default_factory=list)
    #: with suppressions (`suppressions.apply`): the leak groups they removed from `groups`, and
    #: per suppression that matched, (name, file, line, groups, bytes, blocks); None without
    suppressed_groups: list[Group] | None = None
    used_suppressions: list[tuple[str, str, int, int, int, int]] = field(default_factory=list)

    #: GDB's `memdump leaks --increased|--changed`: (bytes, blocks) gained since the previous
    #: `memdump leaks`, per listed group (by `id`) and per leak kind; None otherwise
    deltas: dict[int, tuple[int, int]] | None = None
    kind_deltas: dict[str, tuple[int, int]] | None = None
    #: the lock counts and waiting stacks (dump format 2.3, 2.4: `locks.rows`); [] without
    locks: list[LockRow] = field(default_factory=list)
    #: the heap access errors guard pages caught (dump format 2.6: `accesserrors.rows`)
    access_errors: list[AccessRow] = field(default_factory=list)
    #: the heap corruption red zones found (dump format 2.6: `heapcorruption.rows`)
    heap_corruption: list[CorruptionRow] = field(default_factory=list)
    #: the process images, the program's then each one it executed (images.py)
    images: list[Image] = field(default_factory=list)
    #: (dump format 2.7) the blocks from before a late attach's recording, with their kinds and
    #: types, from its end's scan (`ob` records; olderblocks.py shows them)
    older: list[OlderBlock] = field(default_factory=list)
    #: `analyze(allocations=True)` replayed in the library: its reader (the stacks), the
    #: allocations by stack node (`Replay.node_allocs`) and the peak's blocks by node
    #: (`Replay.node_peak`, or None), which the exports read instead of the dump; None otherwise
    node_allocs: tuple[Any, Any, Any] | None = None
    #: `analyze(snapshots=...)` replayed in the library: the snapshots it took
    #: (`Replay.node_snapshots`), or None
    node_snapshots: list[tuple[int, Any]] | None = None
    #: `analyze(also=...)`: the accumulators' request (`heappass.NativeRequest`) and the figures
    #: of the library's pass run beside the replay, to hand them (`deliver`); None when the pass
    #: did not run with the replay
    pass_figures: tuple[Any, Any] | None = None

    @property
    def cut_by(self) -> str:
        """What can have ended a recording without its end record."""
        if "parent" in self.info:  # a child recorded without GDB (`set memdump children on`)
            return "the process was killed, called _exit or executed another program"
        return "GDB or the machine died"

    @property
    def leaks(self) -> list[Group]:
        return [g for g in self.groups if g.kind == "leak"]

    @property
    def runtime(self) -> list[Group]:
        return [g for g in self.groups if g.kind == "runtime"]

    def warnings(self, *, live: bool = False) -> list[str]:
        """Problems of the dump worth a warning. `live`: the program is still being recorded."""
        out = []
        for tag, line in self.unknown_tags.items():
            out.append(
                f"skipped records with unknown tag '{tag}' (first at line {line}): "
                "the dump was written by a newer memdump"
            )
        for what, seq in self.unknown_process_events.items():
            out.append(f"skipped process events of unknown kind '{what}' (first at event {seq})")
        if not live:
            if self.partial_records:
                n = self.partial_records
                out.append(
                    f"{plural(n, 'partial record')} before NUL padding (first at line "
                    f"{self.partial_line}) {'was' if n == 1 else 'were'} ignored: the recorder "
                    "was killed while writing"
                )
            if self.truncated:
                out.append(
                    "the dump's last line is incomplete (the recorder was killed while writing "
                    "it): it was ignored"
                )
            if not self.complete:
                out.append(
                    f"the dump has no end record: the recording stopped early ({self.cut_by}); "
                    f"everything up to the last complete record (event {self.last_seq}) "
                    "was analysed"
                )
        if self.error_count > len(self.errors):
            out.append(
                f"only the first {len(self.errors)} of {self.error_count} heap errors are listed"
            )
        if self.scan is not None and self.scan.status != "ok":
            why = _SCAN_FAILURES.get(self.scan.status, self.scan.status)
            when = "" if live else " at exit"
            out.append(f"the pointer scan{when} did not complete ({why}): leak kinds are unknown")
        if self.leak_kinds is not None and self.leak_kinds["unknown"][1]:
            out.append(
                f"{plural(self.leak_kinds['unknown'][1], 'leaked block')} "
                f"{'was' if self.leak_kinds['unknown'][1] == 1 else 'were'} allocated after the "
                "pointer scan: their leak kind is unknown"
            )
        out.extend(self.symbol_warnings)
        if self.reused_live:
            out.append(
                f"{plural(self.reused_live, 'allocation')} returned a block that was still live: "
                "some frees were not recorded"
            )
        return out


_SCAN_FAILURES = {
    "timeout": "it ran out of time: set memdump scan-time-limit",
    "threads": "the registers of a thread could not be read",
    "in-allocator": "a thread was inside an allocator call, changing the heap",
    "off": "set memdump scan-time-limit is 0",
}
