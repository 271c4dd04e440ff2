"""Classification: which frames a report hides, and which live blocks are the runtime's own.

All the rules are in `RULES`, the table that docs/report-format.md ("Classification rules")
repeats; a test checks that the two agree. Patterns are shell-style (`fnmatch`, case-sensitive;
`*` matches anything). Function names are matched after removing a leading `__GI_` (glibc's
internal aliases, which GDB sometimes shows), module names by their basename.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import translate

from .dumpfile import DumpReader, Frame, ScanRecord
from .dumpformat import KIND_WORDS, KINDS, public_name
from .replay import EndRecord, HeapError, Replay

__all__ = [
    "RULES",
    "Analysis",
    "ErrorReport",
    "KIND_NAMES",
    "Group",
    "Rule",
    "build_analysis",
    "classify_stack",
    "is_dynamic_loader",
    "is_runtime_frame",
    "is_runtime_module",
    "outer_runtime_frames",
    "rules_markdown",
    "trim_stack",
]


@dataclass(frozen=True)
class Rule:
    """One row of the classification table."""

    name: str
    #: what the patterns are matched against
    matches: str
    patterns: tuple[str, ...]
    effect: str


RULES: tuple[Rule, ...] = (
    Rule(
        "allocator-frame",
        "function of the innermost frames",
        (
            "malloc",
            "calloc",
            "realloc",
            "reallocarray",
            "free",
            "cfree",
            "aligned_alloc",
            "memalign",
            "posix_memalign",
            "valloc",
            "pvalloc",
            "__libc_*alloc*",
            "__libc_free",
            "operator new*",
            "operator delete*",
            "_Znw*",
            "_Zna*",
            "_Zdl*",
            "_Zda*",
            "strdup",
            "__strdup",
            "strndup",
            "__strndup",
            "wcsdup",
            "__wcsdup",
        ),
        "trimmed from the stack while they are innermost: the report names the frame that "
        "called the allocator",
    ),
    Rule(
        "below-main",
        "function",
        ("main", "main(*)"),
        "when a stack contains `main` (GDB names C++'s `main()`), the frames outer to its "
        "outermost `main` (`__libc_start_call_main`, `__libc_start_main`, `_start`) are dropped",
    ),
    Rule(
        "dynamic-loader",
        "module of any frame",
        ("ld-linux*", "ld-*.so*"),
        "the block is `runtime`",
    ),
    Rule(
        "runtime-function",
        "function of any frame",
        (
            "_IO_file_doallocate",
            "_IO_doallocbuf",
            "(anonymous namespace)::pool::pool*",
            "__gnu_cxx::__freeres",
            "_dl_*",
            "__libc_early_init",
            "__tls_get_addr",
            "_nl_*",
            "__tzfile_read",
            "tzset_internal",
            "__nss_*",
            "nss_*",
            # glibc state that __libc_freeres releases at exit (what valgrind calls before it
            # counts): locale, gettext domains, wide-character and iconv module caches, the
            # static result buffers of the non-reentrant NSS lookups, setenv's environment.
            "setlocale",
            "new_composite_name",
            "bindtextdomain",
            "bind_textdomain_codeset",
            "set_binding_values",
            "textdomain",
            "__textdomain",
            "__wcsmbs_*",
            "__gconv_read_conf",
            "__gconv_load_conf",
            "__gconv_load_cache",
            "__gconv_find_shlib",
            "__gconv_get_path",
            "getpw*",
            "getgr*",
            "getsp*",
            "gethost*",
            "getserv*",
            "getproto*",
            "getnet*",
            "getlogin",
            "ttyname",
            "__add_to_environ",
            "_dlerror_run",
            "__resolv_context_*",
            "__new_exitfn",
        ),
        "the block is `runtime`",
    ),
    Rule(
        "runtime-module",
        "module of every frame",
        (
            "libc.so*",
            "libc-*.so",
            "ld-*.so*",
            "ld-linux*",
            "libstdc++.so*",
            "libgcc_s.so*",
            "libm.so*",
            "libm-*.so",
            "libpthread.so*",
            "libpthread-*.so",
            "libdl.so*",
            "libdl-*.so",
        ),
        "when every frame's module is one of these, the block is `runtime`; a frame whose "
        "module is unknown is not",
    ),
    Rule(
        "runtime-frame",
        "function or module of the outermost frames",
        ("std::*", "__gnu_cxx::*", "__cxxabiv1::*", "_start", "(the runtime-module patterns)"),
        "a frame of the C/C++ runtime: in a runtime module (`start_thread`, `clone3`, libstdc++'s "
        "`execute_native_thread_routine`), a function of the C++ standard library's namespaces "
        "compiled into the program (`std::thread::_State_impl<...>::_M_run()`, `std::__invoke`), "
        "or `_start`, the C runtime's entry point linked into every program (crt1.o), which calls "
        "`main` through the C library when `main` itself is not on the stack (a tail call). "
        "The outermost run of them, the callers of the program's outermost frame, is folded into "
        "one line of the text report (`--show-runtime-frames` shows it); frames of the runtime "
        "between the program's frames are always shown",
    ),
    Rule(
        "runtime-free",
        "function of any frame of a `free`",
        ("tcache_thread_shutdown",),
        "the free is the C library's own (a thread's cache being emptied): it is ignored, "
        "counted as `runtime_internal_frees`",
    ),
    Rule(
        "runtime-only-free",
        "module of every frame of a `free` or `realloc` of a pointer that is not live",
        ("(the runtime-module patterns)",),
        "not an error: the runtime freeing its own memory (glibc's thread cache when libc has no "
        "debug information to name `tcache_thread_shutdown`); counted as `runtime_internal_frees`",
    ),
)


def rules_markdown() -> str:
    """`RULES` as the markdown table that docs/report-format.md shows."""
    rows = ["| rule | matched against | patterns | effect |", "| --- | --- | --- | --- |"]
    for rule in RULES:
        patterns = ", ".join(f"`{p}`" for p in rule.patterns)
        rows.append(f"| `{rule.name}` | {rule.matches} | {patterns} | {rule.effect} |")
    return "\n".join(rows) + "\n"


def _rule(name: str) -> Rule:
    for rule in RULES:
        if rule.name == name:
            return rule
    raise KeyError(name)


def _matcher(patterns: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{translate(p)})" for p in patterns))


_WRAPPER = _matcher(_rule("allocator-frame").patterns)
_LOADER = _matcher(_rule("dynamic-loader").patterns)
_RUNTIME_FUNCTION = _matcher(_rule("runtime-function").patterns)
_RUNTIME_MODULE = _matcher(_rule("runtime-module").patterns)

_RUNTIME_FRAME_FUNCTION = _matcher(
    p for p in _rule("runtime-frame").patterns if not p.startswith("(")
)

#: functions that make a free the runtime's own (`DumpReader(mark_functions=...)`)
RUNTIME_FREE_FUNCTIONS = frozenset(_rule("runtime-free").patterns)
_MAIN = _matcher(_rule("below-main").patterns)


def _function(frame: Frame) -> str | None:
    return public_name(frame.function)


def is_dynamic_loader(module: str | None) -> bool:
    return module is not None and _LOADER.match(os.path.basename(module)) is not None


def is_runtime_module(module: str | None) -> bool:
    return module is not None and _RUNTIME_MODULE.match(os.path.basename(module)) is not None


def is_runtime_only(stack: Sequence[Frame]) -> bool:
    """Rule `runtime-only-free`: a known stack with no frame outside the runtime's modules."""
    return bool(stack) and all(is_runtime_module(f.module) for f in stack)


def is_runtime_frame(frame: Frame) -> bool:
    """Rule `runtime-frame`: a runtime module's frame, or a C++ standard library function."""
    if is_runtime_module(frame.module):
        return True
    name = _function(frame)
    return name is not None and _RUNTIME_FRAME_FUNCTION.match(name) is not None


def outer_runtime_frames(stack: Sequence[Frame]) -> int:
    """How many of the outermost frames of `stack` (innermost first) are the runtime's, callers
    of the program's outermost frame; 0 when every frame is the runtime's (nothing to fold)."""
    n = 0
    for frame in reversed(stack):
        if not is_runtime_frame(frame):
            return n
        n += 1
    return 0


def trim_stack(frames: Sequence[Frame]) -> tuple[Frame, ...]:
    """The stack as reports show it (innermost first): allocator frames and below-main removed.

    A stack that would be left empty is kept whole.
    """
    start = 0
    n = len(frames)
    while start < n:
        name = _function(frames[start])
        if name is None or _WRAPPER.match(name) is None:
            break
        start += 1
    if start == n:
        start = 0
    end = n
    for i in range(n - 1, start - 1, -1):
        name = _function(frames[i])
        if name is not None and _MAIN.match(name) is not None:
            end = i + 1
            break
    return tuple(frames[start:end])


def classify_stack(frames: Sequence[Frame]) -> str:
    """`runtime` or `leak` for a (trimmed) allocation stack."""
    if not frames:
        return "leak"
    all_runtime = True
    for frame in frames:
        if is_dynamic_loader(frame.module):
            return "runtime"
        name = _function(frame)
        if name is not None and _RUNTIME_FUNCTION.match(name) is not None:
            return "runtime"
        if all_runtime and not is_runtime_module(frame.module):
            all_runtime = False
    return "runtime" if all_runtime else "leak"


#: leak kind -> valgrind's words for it; "unknown": a block the pointer scan did not see
KIND_NAMES: dict[str, str] = {**KIND_WORDS, "unknown": "not scanned"}


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

    @property
    def total_bytes(self) -> int:
        """Direct and indirect bytes: what valgrind sorts loss records by."""
        return self.bytes + self.indirect_bytes


@dataclass
class ErrorReport:
    kind: str  # "invalid-free" | "double-free" | "invalid-realloc"
    seq: int
    tid: int
    op: str
    pointer: int
    stack: tuple[Frame, ...]
    freed_seq: int | None = None
    freed_stack: tuple[Frame, ...] | None = None


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
    #: leak kind -> [bytes, blocks] of the `leak` blocks; None without a successful scan
    leak_kinds: dict[str, list[int]] | None = None
    unknown_tags: dict[str, int] = field(default_factory=dict)
    unknown_process_events: dict[str, int] = field(default_factory=dict)
    #: what the `free` calls did (`Replay.free_calls`): released, null, runtime, errors, untracked
    free_calls: dict[str, int] = field(default_factory=dict)

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
            if self.truncated:
                out.append(
                    "the dump's last line is incomplete (the recorder was killed while writing "
                    "it): it was ignored"
                )
            if not self.complete:
                out.append(
                    "the dump has no end record: the recording stopped early (GDB or the machine "
                    f"died); everything up to the last complete record (event {self.last_seq}) "
                    "was analysed"
                )
        if self.error_count > len(self.errors):
            out.append(
                f"only the first {len(self.errors)} of {self.error_count} heap errors are listed"
            )
        if self.scan is not None and self.scan.status != "ok":
            why = _SCAN_FAILURES.get(self.scan.status, self.scan.status)
            out.append(f"the pointer scan at exit did not complete ({why}): leak kinds are unknown")
        if self.leak_kinds is not None and self.leak_kinds["unknown"][1]:
            out.append(
                f"{self.leak_kinds['unknown'][1]:,} leaked block(s) were allocated after the "
                "pointer scan: their leak kind is unknown"
            )
        if self.reused_live:
            out.append(
                f"{self.reused_live} allocation(s) returned a block that was still live: "
                "some frees were not recorded"
            )
        return out


_SCAN_FAILURES = {
    "timeout": "it ran out of time: set memdump scan-time-limit",
    "threads": "the registers of a thread could not be read",
}


class _Stacks:
    """Trimmed frames and kind of each stack node, computed once per node."""

    def __init__(self, reader: DumpReader) -> None:
        self.reader = reader
        self.cache: dict[int, tuple[Frame, ...]] = {}

    def trimmed(self, node: int) -> tuple[Frame, ...]:
        frames = self.cache.get(node)
        if frames is None:
            frames = trim_stack(self.reader.stack(node))
            self.cache[node] = frames
        return frames


def build_analysis(reader: DumpReader, r: Replay) -> Analysis:
    """Group the live blocks and resolve the stacks of a finished replay."""
    stacks = _Stacks(reader)
    scanned = reader.scan is not None and reader.scan.status == "ok"
    kinds = reader.kinds
    owned = _owned(r.live, kinds, reader.leaders) if scanned else {}
    # live blocks by stack node and leak kind, in allocation order:
    # -> [bytes, blocks, rank, indirect bytes, indirect blocks]
    by_node: dict[tuple[int, str | None], list[int]] = {}
    for p, (size, node) in r.live.items():
        key = (node, (kinds[p][0] if p in kinds else "unknown") if scanned else None)
        agg = by_node.get(key)
        if agg is None:
            agg = by_node[key] = [size, 1, len(by_node), 0, 0]
        else:
            agg[0] += size
            agg[1] += 1
        if p in owned:
            agg[3] += owned[p][0]
            agg[4] += owned[p][1]
    # then by trimmed stack (tuple of PCs) and kind
    by_stack: dict[tuple[tuple[int, ...], str | None], Group] = {}
    for (node, leak_kind), (nbytes, blocks, rank, ibytes, iblocks) in by_node.items():
        frames = stacks.trimmed(abs(node))
        key = (tuple(f.pc for f in frames), leak_kind)
        group = by_stack.get(key)
        if group is None:
            by_stack[key] = Group(classify_stack(frames), nbytes, blocks, frames, rank, leak_kind,
                                  ibytes, iblocks)
        else:
            group.bytes += nbytes
            group.blocks += blocks
            group.indirect_bytes += ibytes
            group.indirect_blocks += iblocks
    # largest first, by direct and indirect bytes as valgrind's loss records
    groups = sorted(by_stack.values(), key=lambda g: (-g.total_bytes, -g.blocks, g.order))
    leaked = [g for g in groups if g.kind == "leak"]
    leak_kinds = None
    if scanned:
        leak_kinds = {k: [0, 0] for k in (*KINDS, "unknown")}
        for g in leaked:
            leak_kinds[g.leak_kind or "unknown"][0] += g.bytes
            leak_kinds[g.leak_kind or "unknown"][1] += g.blocks
    runtime = [g for g in groups if g.kind == "runtime"]
    errors = [_error_report(e, stacks) for e in r.errors]
    pid_text = reader.info.get("pid", "")
    return Analysis(
        path=reader.path,
        info=dict(reader.info),
        version=reader.version,
        program=reader.info.get("program"),
        pid=int(pid_text) if pid_text.isdigit() else None,
        attached=reader.info.get("attached") == "1",
        complete=r.end is not None,
        truncated=reader.truncated,
        end=r.end,
        last_seq=r.last_seq,
        events=r.events,
        calls=dict(r.calls),
        allocations=r.allocations,
        frees=r.frees,
        allocated_bytes=r.allocated_bytes,
        peak_bytes=r.peak_bytes,
        peak_blocks=r.peak_blocks,
        peak_seq=r.peak_seq,
        peak_stack=stacks.trimmed(r.peak_node) if r.peak_node is not None else (),
        leaked_bytes=sum(g.bytes for g in leaked),
        leaked_blocks=sum(g.blocks for g in leaked),
        runtime_bytes=sum(g.bytes for g in runtime),
        runtime_blocks=sum(g.blocks for g in runtime),
        groups=groups,
        errors=errors,
        error_count=r.error_count,
        untracked_frees=r.untracked_frees,
        runtime_internal_frees=r.runtime_internal_frees,
        reused_live=r.reused_live,
        execs=list(r.execs),
        signals=list(r.signals),
        scan=reader.scan,
        leak_kinds=leak_kinds,
        unknown_tags=dict(reader.unknown_tags),
        unknown_process_events=dict(r.unknown_process_events),
        free_calls=dict(r.free_calls),
    )


def _owned(
    live: dict[bytes, tuple[int, int]],
    kinds: dict[bytes, tuple[str, str | None]],
    leaders: dict[bytes, bytes],
) -> dict[bytes, list[int]]:
    """Definitely lost block -> [bytes, blocks] of the live indirectly lost blocks it leads.

    A leader that is not a live definitely lost block (freed after the scan, or a dump that
    does not say) owns nothing: its blocks then count in no group's indirect figures."""
    owned: dict[bytes, list[int]] = {}
    for p, leader in leaders.items():
        block = live.get(p)
        if block is None or leader not in live or kinds.get(leader, ("",))[0] != "definite":
            continue
        agg = owned.setdefault(leader, [0, 0])
        agg[0] += block[0]
        agg[1] += 1
    return owned


def _error_report(e: HeapError, stacks: _Stacks) -> ErrorReport:
    return ErrorReport(
        kind=e.kind,
        seq=e.seq,
        tid=e.tid,
        op=e.op,
        pointer=e.pointer,
        stack=stacks.trimmed(e.node),
        freed_seq=e.freed_seq,
        freed_stack=stacks.trimmed(e.freed_node) if e.freed_node is not None else None,
    )
