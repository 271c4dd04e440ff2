"""What valgrind memcheck's output says of a leak report, for both of its writers (vgtext.py,
vgxml.py; docs/valgrind-compat.md): the options that shape it, the errors it prints (`VgError`:
kind, sentence, stacks), the loss records in valgrind's order and the summaries' figures.

The figures are what valgrind reports after its freeres ran: the C/C++ runtime's own blocks
(`runtime`), which glibc and libstdc++ free at valgrind's request, count as freed, not in use.
A loss record is one of the report's leak groups; without a pointer scan every leaked block is
reported definitely lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .vgframes import NUM_CALLERS, VgFrame, access_frames, alloc_frames, callees, free_frames

if TYPE_CHECKING:
    from .accesserrors import AccessRow, BlockEvent
    from .heapcorruption import CorruptionRow
    from .model import Analysis, ErrorReport, Group

__all__ = ["KIND_WORDS", "PREAMBLE", "VgError", "VgOptions", "counted_errors", "error_count",
           "errors", "frees", "in_use", "kind_of", "kind_totals", "loss_records", "shown",
           "suppressed_errors", "thousands"]

KIND_ORDER = {"definite": 0, "indirect": 1, "possible": 2, "reachable": 3}
KIND_WORDS = {"definite": "definitely lost", "indirect": "indirectly lost",
              "possible": "possibly lost", "reachable": "still reachable"}
#: the preamble's place in valgrind's output: what wrote it, said truthfully (readers of valgrind's
#: output key on the `==PID==` lines, the records and the summaries, not on these words)
PREAMBLE = ("memdump, a heap recorder under GDB, in valgrind memcheck's output format",
            "Not valgrind: leaks and heap errors from the heap's events and a pointer scan")
_INVALID_FREE = "Invalid free() / delete / delete[] / realloc()"
_MISMATCHED_FREE = "Mismatched free() / delete / delete []"


@dataclass
class VgOptions:
    """What valgrind's options asked of the report (memdump's valgrind-style command line)."""

    leak_check: str = "summary"  # "no" | "summary" | "full"
    show_kinds: frozenset[str] = frozenset(("definite", "possible"))
    error_kinds: frozenset[str] = frozenset(("definite", "possible"))
    num_callers: int = NUM_CALLERS
    quiet: bool = False
    gen_suppressions: bool = False
    #: the program's command line as typed (valgrind's `Command:`), and the options memdump was
    #: given (the XML's `<vargv>`)
    command: list[str] = field(default_factory=list)
    tool_args: list[str] = field(default_factory=list)


@dataclass
class VgError:
    """An error as valgrind prints it: its XML `kind`, its sentence (`what`), the thread, the
    stack, then each further sentence with its stack (`auxwhat`), and how many errors of the
    run are this one (its context's count)."""

    kind: str
    what: str
    tid: int
    stack: list[VgFrame]
    aux: list[tuple[str, list[VgFrame]]] = field(default_factory=list)
    count: int = 1


def thousands(value: int) -> str:
    """A figure as valgrind prints it: `1,078`."""
    return f"{value:,}"


def kind_of(group: Group) -> str:
    """The group's leak kind in valgrind's words' table (definite without a scan)."""
    return group.leak_kind if group.leak_kind in KIND_ORDER else "definite"


def loss_records(analysis: Analysis) -> list[Group]:
    """Every leak group, suppressed ones included (valgrind numbers them too), as valgrind sorts
    its loss records: total bytes, kind, blocks (then allocation order)."""
    groups = analysis.leaks + list(analysis.suppressed_groups or [])
    return sorted(groups, key=lambda g: (g.total_bytes, KIND_ORDER[kind_of(g)], g.blocks,
                                         g.order))


def _heading(error: ErrorReport) -> str:
    return _MISMATCHED_FREE if error.kind == "mismatched-free" else _INVALID_FREE


def _contexts(errors: Sequence[ErrorReport]) -> list[ErrorReport]:
    """The heap errors valgrind prints: the first of each kind and stack."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for e in errors:
        key = (_heading(e), tuple((f.module, f.offset) for f in e.stack))
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def _block(error: ErrorReport, limit: int) -> list[tuple[str, list[VgFrame]]]:
    """A mismatched free's block: valgrind's `Address 0x... is 0 bytes inside a block of size N
    alloc'd` and the allocation's stack; none for the other errors (the report has no block)."""
    if error.kind != "mismatched-free" or error.alloc_size is None:
        return []
    what = (f"Address 0x{error.pointer:x} is 0 bytes inside a block of size "
            f"{thousands(error.alloc_size)} alloc'd")
    return [(what, alloc_frames(error.alloc_stack or (), error.alloc_op, limit))]


def _free_errors(analysis: Analysis, limit: int) -> list[VgError]:
    contexts = _contexts(analysis.errors)
    called = callees(analysis, [e.stack for e in contexts])
    out = []
    for error in contexts:
        same = sum(1 for e in analysis.errors if _heading(e) == _heading(error)
                   and [f.offset for f in e.stack] == [f.offset for f in error.stack])
        kind = "MismatchedFree" if error.kind == "mismatched-free" else "InvalidFree"
        out.append(VgError(kind, _heading(error), _thread(analysis, error.tid),
                           free_frames(error.stack, error.op, limit, called),
                           _block(error, limit), same))
    return out


def _block_stacks(what: str, free: BlockEvent | None, alloc: BlockEvent | None, limit: int,
                  called: dict[tuple[str, int], str]) -> list[tuple[str, list[VgFrame]]]:
    """valgrind's sentences of a block and their stacks: `Address ... free'd` with the free's
    stack, then `Block was alloc'd at` and the allocation's; `... alloc'd` and the allocation's
    for a live block."""
    alloc_stack = alloc_frames(alloc.stack, alloc.op, limit) if alloc is not None else []
    if free is None:
        return [(what, alloc_stack)]
    return [(what, free_frames(free.stack, free.op, limit, called)),
            ("Block was alloc'd at", alloc_stack)]


def _access_errors(analysis: Analysis, rows: Sequence[AccessRow], limit: int) -> list[VgError]:
    """The access errors guard pages caught, as valgrind's `Invalid read of size N` (the size
    from the faulting instruction, read with objdump; `of unknown size` when the module's code
    that ran cannot be read), one per kind and stack, counting the others (a loop reading two
    bytes past the end: two errors)."""
    from .faultinsn import access_sizes, access_text

    sizes = access_sizes([(r.stack[0].module, r.stack[0].offset - 1) for r in rows
                          if r.stack and r.stack[0].module], arch=analysis.info.get("arch"),
                         start=analysis.info.get("start"))
    called = callees(analysis, [r.free.stack for r in rows if r.free is not None])
    found: dict[tuple[object, ...], VgError] = {}
    for row in rows:
        e = row.error
        top = row.stack[0] if row.stack else None
        size = sizes.get((top.module or "", top.offset - 1)) if top is not None else None
        what = access_text(e.access, size)
        stack = access_frames(row.stack, limit)
        key = (what, e.tid, tuple(f.ip for f in stack))
        if key in found:
            found[key].count += 1
            continue
        where = (f"Address 0x{e.address:x} is {thousands(e.offset)} bytes {e.relation} a block "
                 f"of size {thousands(e.size)} {'free' if e.state == 'freed' else 'alloc'}'d")
        kind = "InvalidWrite" if e.access == "write" else "InvalidRead"
        found[key] = VgError(kind, what, _thread(analysis, e.tid), stack,
                             _block_stacks(where, row.free, row.alloc, limit, called))
    return list(found.values())


def _corruption_errors(analysis: Analysis, rows: Sequence[CorruptionRow],
                       limit: int) -> list[VgError]:
    """The red zones' findings, which valgrind has no words for (it sees the write itself): an
    `InvalidWrite` whose sentence says what changed and where it was found, its stack that of
    the free that found it (else the block's free, else its allocation), then valgrind's
    sentences of the block at the first changed byte."""
    from .heapcorruption import describe, found_text

    called = callees(analysis, [ev.stack for r in rows for ev in (r.found, r.free)
                                if ev is not None])
    out = []
    for row in rows:
        e = row.error
        if e.kind == "overrun":
            address, where = e.block + e.size + e.offset, f"{thousands(e.offset)} bytes after"
        elif e.kind == "underrun":
            address, where = e.block - e.offset - 1, f"{thousands(e.offset + 1)} bytes before"
        else:
            address, where = e.block + e.offset, f"{thousands(e.offset)} bytes inside"
        state = "free'd" if row.free is not None else "alloc'd"
        what = f"Invalid write ({describe(e)}), {found_text(row)}"
        aux = _block_stacks(f"Address 0x{address:x} is {where} a block of size "
                            f"{thousands(e.size)} {state}", row.free, row.alloc, limit, called)
        if row.found is not None:
            stack = free_frames(row.found.stack, row.found.op, limit, called)
        else:  # the block's first stack is the error's
            stack, aux = aux[0][1], [(aux[0][0], []), *aux[1:]]
        out.append(VgError("InvalidWrite", what, _thread(analysis, e.tid), stack, aux))
    return out


def _thread(analysis: Analysis, tid: int) -> int:
    """valgrind's number of a thread: 1 for the main one; the kernel's id for the others.
    valgrind gives a new thread the lowest number free at its creation (an ended thread's comes
    free), which needs every thread's creation and end: the dump has neither, and a thread is in
    it only from its first heap call (docs/valgrind-compat.md, "Thread numbers")."""
    return 1 if tid == analysis.pid else tid


def errors(analysis: Analysis, opts: VgOptions) -> list[VgError]:
    """The errors valgrind prints before the HEAP SUMMARY, in its order: the heap errors (the
    first of each kind and stack), the access errors guard pages caught, the heap corruption
    red zones found."""
    limit = opts.num_callers
    return [*_free_errors(analysis, limit),
            *_access_errors(analysis, analysis.access_errors, limit),
            *_corruption_errors(analysis, analysis.heap_corruption, limit)]


def _leak_errors(analysis: Analysis, opts: VgOptions) -> list[Group]:
    if opts.leak_check in ("no", "summary"):
        return []
    return [g for g in analysis.leaks if kind_of(g) in opts.error_kinds]


def counted_errors(analysis: Analysis, opts: VgOptions) -> int:
    """The ERROR SUMMARY's errors: every heap error, access error guard pages caught and
    corruption red zones found, and each loss record of --errors-for-leak-kinds (with
    --leak-check=full)."""
    return (analysis.error_count + len(analysis.access_errors) + len(analysis.heap_corruption)
            + len(_leak_errors(analysis, opts)))


def error_count(analysis: Analysis, opts: VgOptions,
                listed: Sequence[VgError]) -> tuple[int, int]:
    """valgrind's ERROR SUMMARY: (errors, contexts), `listed` being the run's `errors`: one
    context each, and one per loss record counted."""
    return counted_errors(analysis, opts), len(listed) + len(_leak_errors(analysis, opts))


def suppressed_errors(analysis: Analysis, opts: VgOptions) -> int:
    """The ERROR SUMMARY's `suppressed: N from N`: the suppressed loss records it would count."""
    if opts.leak_check in ("no", "summary"):
        return 0
    return sum(1 for g in analysis.suppressed_groups or [] if kind_of(g) in opts.error_kinds)


def shown(analysis: Analysis, opts: VgOptions) -> list[tuple[Group, int, int]]:
    """(group, number, of) of the loss records valgrind prints, in its order."""
    if opts.leak_check != "full":
        return []
    records = loss_records(analysis)
    suppressed = {id(g) for g in analysis.suppressed_groups or []}
    return [(g, i, len(records)) for i, g in enumerate(records, 1)
            if id(g) not in suppressed and kind_of(g) in opts.show_kinds]


def in_use(analysis: Analysis) -> tuple[int, int]:
    """valgrind's bytes and blocks in use at exit: the leaked ones, suppressed ones too."""
    hidden = analysis.suppressed_groups or []
    return (analysis.leaked_bytes + sum(g.bytes for g in hidden),
            analysis.leaked_blocks + sum(g.blocks for g in hidden))


def frees(analysis: Analysis) -> int:
    """valgrind's count of frees: every call with a pointer, invalid ones too, and the runtime's
    blocks that its freeres releases."""
    return analysis.frees + analysis.free_calls.get("errors", 0) + analysis.runtime_blocks


def kind_totals(analysis: Analysis) -> dict[str, list[int]]:
    """Bytes and blocks of each leak kind, for the LEAK SUMMARY."""
    totals = {kind: [0, 0] for kind in KIND_ORDER}
    for g in analysis.leaks:
        totals[kind_of(g)][0] += g.bytes
        totals[kind_of(g)][1] += g.blocks
    return totals
