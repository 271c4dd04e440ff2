"""valgrind memcheck's text output of a leak report (`--format valgrind`,
docs/valgrind-compat.md): valgrind 3.19's words, `==PID==` before every line (the program's PID),
a preamble unless quiet (memdump's own two lines where valgrind names itself), each error with
its stacks (vgmodel.errors), the HEAP SUMMARY, the loss records of the shown leak kinds with
valgrind's numbering among them all, the LEAK SUMMARY and the ERROR SUMMARY.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .vgframes import GroupStacks, VgFrame
from .vgmodel import (
    KIND_WORDS,
    PREAMBLE,
    VgError,
    VgOptions,
    error_count,
    errors,
    frees,
    in_use,
    kind_of,
    kind_totals,
    shown,
    suppressed_errors,
    thousands,
)

if TYPE_CHECKING:
    from .model import Analysis, Group

__all__ = ["error_lines", "frame_lines", "record_text", "render_text"]

_n = thousands


def frame_lines(frames: Sequence[VgFrame]) -> list[str]:
    """A stack as valgrind prints it: `   at 0x...: f (file.c:12)`, then `   by ...`."""
    out = []
    for i, f in enumerate(frames):
        where = (f"({os.path.basename(f.file)}:{f.line})" if f.file and f.line
                 else f"(in {f.obj})" if f.obj else "")
        out.append(f"   {'by' if i else 'at'} 0x{f.ip:X}: {f.fn} {where}".rstrip())
    return out


def error_lines(error: VgError) -> list[str]:
    """An error's lines: its sentence and stack, then each further sentence (indented by one)
    and its stack."""
    lines = [error.what, *frame_lines(error.stack)]
    for what, frames in error.aux:
        lines += [f" {what}", *frame_lines(frames)]
    return lines


def record_text(group: Group, number: int, total: int) -> str:
    """A loss record's sentence: `6 bytes in 1 blocks are definitely lost in loss record 1 of
    2`."""
    kind = KIND_WORDS[kind_of(group)]
    if group.indirect_bytes:
        size = (f"{_n(group.total_bytes)} ({_n(group.bytes)} direct, "
                f"{_n(group.indirect_bytes)} indirect) bytes")
    else:
        size = f"{_n(group.bytes)} bytes"
    return f"{size} in {_n(group.blocks)} blocks are {kind} in loss record {_n(number)} of " \
        f"{_n(total)}"


def render_text(analysis: Analysis, opts: VgOptions) -> str:
    """valgrind's text output of the run (`==PID==` lines)."""
    lines: list[str] = []
    if not opts.quiet:
        lines += [*PREAMBLE, f"Command: {' '.join(opts.command or [analysis.program or '?'])}",
                  ""]
    listed = errors(analysis, opts)
    thread = 1
    for error in listed:
        if error.tid != thread:  # valgrind names the thread when it changes
            lines.append(f"Thread {error.tid}:")
            thread = error.tid
        lines += [*error_lines(error), ""]
    if not opts.quiet:
        lines += ["", "HEAP SUMMARY:",
                  f"    in use at exit: {_n(in_use(analysis)[0])} bytes in "
                  f"{_n(in_use(analysis)[1])} blocks",
                  f"  total heap usage: {_n(analysis.allocations)} allocs, "
                  f"{_n(frees(analysis))} frees, "
                  f"{_n(analysis.allocated_bytes)} bytes allocated", ""]
    records = shown(analysis, opts)
    stacks = GroupStacks(analysis, [g for g, _, _ in records], opts.num_callers)
    supp = _suppression_of(analysis, opts)
    for group, number, total in records:
        lines += [record_text(group, number, total), *frame_lines(stacks.of(group)), ""]
        if supp is not None:
            lines.append(supp(group))
    if not opts.quiet:
        lines += _summary(analysis, opts, listed)
    prefix = f"=={analysis.pid or 0}== "
    out = []
    for line in lines:
        if line.startswith("{\n"):  # a suppression: unprefixed, as valgrind prints it
            out.append(line.rstrip("\n"))
        else:
            out.append(f"{prefix}{line}".rstrip() + (" " if not line else ""))
    return "\n".join(out) + "\n" if out else ""


def _suppression_of(analysis: Analysis, opts: VgOptions) -> Callable[[Group], str] | None:
    if not opts.gen_suppressions or not analysis.leaks:
        return None
    from .gensupp import suppression_text
    from .suppressions import group_names

    names = group_names(analysis, analysis.leaks)
    return lambda group: suppression_text(group, "<insert_a_suppression_name_here>", names)


def _summary(analysis: Analysis, opts: VgOptions, listed: Sequence[VgError]) -> list[str]:
    lines: list[str] = []
    if opts.leak_check != "no":
        if not analysis.leaks and not analysis.suppressed_groups:
            lines += ["All heap blocks were freed -- no leaks are possible", ""]
        else:
            totals = kind_totals(analysis)
            hidden = analysis.suppressed_groups or []
            lines.append("LEAK SUMMARY:")
            for kind, words in KIND_WORDS.items():
                size, blocks = totals[kind]
                lines.append(f"{words:>18}: {_n(size)} bytes in {_n(blocks)} blocks")
            lines.append(f"{'suppressed':>18}: {_n(sum(g.bytes for g in hidden))} bytes in "
                         f"{_n(sum(g.blocks for g in hidden))} blocks")
            if opts.leak_check == "summary":
                lines.append("Rerun with --leak-check=full to see details of leaked memory")
            elif "reachable" not in opts.show_kinds and totals["reachable"][1]:
                lines.append("Reachable blocks (those to which a pointer was found) are not "
                             "shown.")
                lines.append("To see them, rerun with: --leak-check=full --show-leak-kinds=all")
            lines.append("")
    count, contexts = error_count(analysis, opts, listed)
    lines.append("For lists of detected and suppressed errors, rerun with: -s")
    hidden = _n(suppressed_errors(analysis, opts))
    lines.append(f"ERROR SUMMARY: {_n(count)} errors from {_n(contexts)} contexts "
                 f"(suppressed: {hidden} from {hidden})")
    return lines
