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

from .vgframes import NUM_CALLERS, VgFrame, alloc_frames, callees, free_frames

if TYPE_CHECKING:
    from .model import Analysis, ErrorReport, Group

__all__ = ["KIND_WORDS", "PREAMBLE", "VgError", "VgOptions", "error_count", "errors",
           "frees", "in_use", "kind_of", "kind_totals", "loss_records", "shown",
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
        tid = 1 if error.tid == analysis.pid else error.tid  # valgrind's main thread is 1
        out.append(VgError(kind, _heading(error), tid,
                           free_frames(error.stack, error.op, limit, called),
                           _block(error, limit), same))
    return out


def errors(analysis: Analysis, opts: VgOptions) -> list[VgError]:
    """The errors valgrind prints before the HEAP SUMMARY, in its order: the heap errors (the
    first of each kind and stack)."""
    return _free_errors(analysis, opts.num_callers)


def _leak_errors(analysis: Analysis, opts: VgOptions) -> list[Group]:
    if opts.leak_check in ("no", "summary"):
        return []
    return [g for g in analysis.leaks if kind_of(g) in opts.error_kinds]


def error_count(analysis: Analysis, opts: VgOptions) -> tuple[int, int]:
    """valgrind's ERROR SUMMARY: (errors, contexts): every heap error, each heap access error
    guard pages caught, each loss record of --errors-for-leak-kinds (with --leak-check=full)."""
    leaks = len(_leak_errors(analysis, opts)) + len(analysis.access_errors)  # one context each
    return analysis.error_count + leaks, len(_contexts(analysis.errors)) + leaks


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
