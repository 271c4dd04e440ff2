"""valgrind memcheck's output from a leak report (`--format valgrind`, `--format valgrind-xml`):
what `memdump --leak-check=full ./app` writes where valgrind would, for the tools that read
valgrind (CTest's `ctest -T memcheck`, valgrind-ci, IDEs). docs/valgrind-compat.md.

The text is valgrind 3.19's: `==PID==` before every line (the program's PID), a preamble unless
quiet (memdump's own two lines where valgrind names itself), each heap error (`Invalid free() /
delete / delete[] / realloc()`, `Mismatched free() / delete / delete []`) with its stack, the HEAP
SUMMARY, the loss records of the shown leak kinds in valgrind's order (total bytes, then kind, then
blocks) with valgrind's numbering among them all, the LEAK SUMMARY and the ERROR SUMMARY. The XML
is valgrind's protocol 4 (its docs/internals/xml-output-protocol4.txt): one `<error>` per heap
error and per shown loss record.

The figures are what valgrind reports after its freeres ran: the C/C++ runtime's own blocks
(`runtime`), which glibc and libstdc++ free at valgrind's request, count as freed, not in use.
A loss record is one of the report's leak groups; without a pointer scan every leaked block is
reported definitely lost. Frames are valgrind's view of the stack (`suppressions.valgrind_view`):
the allocator's slot (`malloc`, `operator new(unsigned long)`) in valgrind's preload, then the
program's frames down to `main`, at most `--num-callers` in all (12 unless told).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .callsites import StackNames
    from .dumpfile import Frame
    from .model import Analysis, ErrorReport, Group
    from .suppressions import ViewFrame

__all__ = ["FORMATS", "VgOptions", "add_options", "error_count", "expand_path", "render_text",
           "render_xml", "short_name"]

#: the report formats of this module
FORMATS = ("valgrind", "valgrind-xml")
#: where valgrind 3.19 has its replacement allocators on Debian and Ubuntu (its stacks' `obj`)
PRELOAD = "/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so"
#: valgrind's default --num-callers
NUM_CALLERS = 12
_KIND_ORDER = {"definite": 0, "indirect": 1, "possible": 2, "reachable": 3}
_KIND_WORDS = {"definite": "definitely lost", "indirect": "indirectly lost",
               "possible": "possibly lost", "reachable": "still reachable"}
_XML_KINDS = {"definite": "Leak_DefinitelyLost", "indirect": "Leak_IndirectlyLost",
              "possible": "Leak_PossiblyLost", "reachable": "Leak_StillReachable"}
#: the preamble's place in valgrind's output: what wrote it, said truthfully (readers of valgrind's
#: output key on the `==PID==` lines, the records and the summaries, not on these words)
_PREAMBLE = ("memdump, a heap recorder under GDB, in valgrind memcheck's output format",
             "Not valgrind: leaks and heap errors from the heap's events and a pointer scan")
_INVALID_FREE = "Invalid free() / delete / delete[] / realloc()"
_MISMATCHED_FREE = "Mismatched free() / delete / delete []"
#: the deallocation a heap error's operation is in valgrind's stacks
_FREE_SLOT = {"free": "free", "delete": "operator delete(void*)",
              "delete[]": "operator delete[](void*)", "realloc": "realloc"}
_NEW_ARGS = {"m": "unsigned long", "mRKSt9nothrow_t": "unsigned long, std::nothrow_t const&",
             "mSt11align_val_t": "unsigned long, std::align_val_t",
             "mSt11align_val_tRKSt9nothrow_t":
             "unsigned long, std::align_val_t, std::nothrow_t const&"}


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


def add_options(parser) -> None:  # noqa: ANN001 - argparse.ArgumentParser, imported lazily
    """The leak report's options that only --format valgrind and valgrind-xml use."""
    group = parser.add_argument_group("--format valgrind, valgrind-xml (docs/valgrind-compat.md)")
    group.add_argument("--leak-check", choices=("no", "summary", "yes", "full"),
                       default="summary", help="valgrind's: the loss records listed with yes "
                       "or full, only the LEAK SUMMARY with summary (default), none with no")
    group.add_argument("--command", action="append", default=[], metavar="WORD",
                       help="a word of the program's command line (repeated, in order): "
                       "valgrind's `Command:` line")
    group.add_argument("--tool-arg", action="append", default=[], metavar="ARG",
                       help="an option memdump was given (repeated): the XML's <vargv>")
    group.add_argument("-q", "--quiet", action="store_true",
                       help="valgrind's -q: the errors and loss records only")


def options(args, show_kinds: frozenset[str], error_kinds: frozenset[str]) -> VgOptions:  # noqa: ANN001
    """The VgOptions of a parsed command line (cli.py's argparse.Namespace)."""
    level = {"yes": "full"}.get(args.leak_check, args.leak_check)
    return VgOptions(level, show_kinds, error_kinds, args.max_frames or NUM_CALLERS, args.quiet,
                     args.gen_suppressions, list(args.command), list(args.tool_arg))


def expand_path(template: str, pid: int | None) -> str:
    """valgrind's --log-file and --xml-file: `%p` the program's PID, `%q{VAR}` the environment
    variable VAR, `%%` a percent sign. Raises ValueError naming what is wrong."""
    def one(match: re.Match[str]) -> str:
        text = match.group(0)
        if text == "%%":
            return "%"
        if text == "%p":
            return str(pid or 0)
        if text.startswith("%q{"):
            if match.group(1) not in os.environ:
                raise ValueError(f"{template}: environment variable {match.group(1)} is not set")
            return os.environ[match.group(1)]
        raise ValueError(f"{template}: '{text}' is not %p, %q{{VAR}} nor %%")
    return re.sub(r"%q\{([^}]*)\}|%.?", one, template)


# -- the model: loss records, errors ---------------------------------------------------------------


def _kind(group: Group) -> str:
    return group.leak_kind if group.leak_kind in _KIND_ORDER else "definite"


def loss_records(analysis: Analysis) -> list[Group]:
    """Every leak group, suppressed ones included (valgrind numbers them too), as valgrind sorts
    its loss records: total bytes, kind, blocks (then allocation order)."""
    groups = analysis.leaks + list(analysis.suppressed_groups or [])
    return sorted(groups, key=lambda g: (g.total_bytes, _KIND_ORDER[_kind(g)], g.blocks, g.order))


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


def _heading(error: ErrorReport) -> str:
    return _MISMATCHED_FREE if error.kind == "mismatched-free" else _INVALID_FREE


def _leak_errors(analysis: Analysis, opts: VgOptions) -> list[Group]:
    if opts.leak_check in ("no", "summary"):
        return []
    return [g for g in analysis.leaks if _kind(g) in opts.error_kinds]


def error_count(analysis: Analysis, opts: VgOptions) -> tuple[int, int]:
    """valgrind's ERROR SUMMARY: (errors, contexts): every heap error, each heap access error
    guard pages caught, each loss record of --errors-for-leak-kinds (with --leak-check=full)."""
    leaks = len(_leak_errors(analysis, opts)) + len(analysis.access_errors)  # one context each
    return analysis.error_count + leaks, len(_contexts(analysis.errors)) + leaks


def _suppressed_errors(analysis: Analysis, opts: VgOptions) -> int:
    """The ERROR SUMMARY's `suppressed: N from N`: the suppressed loss records it would count."""
    if opts.leak_check in ("no", "summary"):
        return 0
    return sum(1 for g in analysis.suppressed_groups or [] if _kind(g) in opts.error_kinds)


# -- frames ----------------------------------------------------------------------------------------


@dataclass
class _VgFrame:
    ip: int
    fn: str
    obj: str | None
    file: str | None = None
    line: int | None = None


def _slot_name(names: tuple[str, ...], op: str | None) -> str:
    """The allocator valgrind names: `operator new(unsigned long)` for `_Znwm`..."""
    name = names[0] if len(names) == 1 or op is None else op
    if name.startswith(("_Znw", "_Zna")) and name[4:] in _NEW_ARGS:
        return f"operator new{'[]' if name[3] == 'a' else ''}({_NEW_ARGS[name[4:]]})"
    return {"new": "operator new(unsigned long)",
            "new[]": "operator new[](unsigned long)"}.get(name, name)


def short_name(name: str) -> str:
    """An inlined function as valgrind names it, by its DWARF name: without its scope and
    parameters (`std::vector<int>::reserve(unsigned long)` is `reserve`)."""
    end = len(name)
    if name.endswith(" const"):
        end -= len(" const")
    if end and name[end - 1] == ")":
        depth = 0
        for i in range(end - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                end = i
                break
    depth, start = 0, 0
    for i, c in enumerate(name[:end]):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(c, 0)
        if depth == 0 and name.startswith("::", i):
            start = i + 2
    return name[start:end] or name


def _frames(view: Sequence[ViewFrame], raw: Sequence[Frame], op: str | None,
            limit: int) -> list[_VgFrame]:
    """The frames valgrind shows: at most `limit`, down to `main` (its --show-below-main=no)."""
    out = []
    for vf in view[:limit]:
        if vf.slot:
            out.append(_VgFrame(raw[0].pc if raw else 0, _slot_name(vf.names, op), PRELOAD))
        elif vf.frame is not None:
            f = vf.frame
            name = vf.names[-1]
            if name.startswith("main("):  # C++'s main(int, char**)
                name = "main"
            elif f.inlined and f.file is not None:
                name = short_name(name)
            out.append(_VgFrame(f.pc, name, f.module, f.file, f.line))
            if name == "main":
                break
        else:
            out.append(_VgFrame(0, vf.names[-1], PRELOAD))
    return out


#: the arguments of `operator delete` and `delete[]` by their mangled suffix
_DELETE_ARGS = {"Pv": "void*", "Pvm": "void*, unsigned long",
                "PvSt11align_val_t": "void*, std::align_val_t",
                "PvmSt11align_val_t": "void*, unsigned long, std::align_val_t",
                "PvRKSt9nothrow_t": "void*, std::nothrow_t const&"}


def _deallocator(called: str | None) -> str | None:
    """valgrind's name of the deallocation a call site called (`_ZdlPvm`: `operator
    delete(void*, unsigned long)`), None when it is not one it names so."""
    if called in ("free", "realloc"):
        return called
    if called and called.startswith(("_Zdl", "_Zda")) and called[4:] in _DELETE_ARGS:
        return f"operator delete{'[]' if called[3] == 'a' else ''}({_DELETE_ARGS[called[4:]]})"
    return None


def _callees(analysis: Analysis, errors: Sequence[ErrorReport]) -> dict[tuple[str, int], str]:
    """The functions the heap errors' call sites called (callsites.called_functions)."""
    from .callsites import called_functions
    from .suppressions import call_site

    sites = []
    for e in errors:
        if e.stack:
            f = e.stack[call_site(e.stack)]
            if f.module is not None:
                sites.append((f.module, f.offset))
    return called_functions(sites, arch=analysis.info.get("arch")) if sites else {}


def _free_frames(error: ErrorReport, limit: int,
                 callees: dict[tuple[str, int], str] | None = None) -> list[_VgFrame]:
    """A heap error's stack as valgrind shows it: the deallocation in its preload (the one the
    call site called, when it can be read: a sized `delete` is one), then the program's frames
    from the call down to `main`."""
    from .suppressions import call_site, valgrind_view

    start = call_site(error.stack)
    view = valgrind_view(error.stack[start:] or error.stack)[1:]
    called = (error.stack[0].function or "") if start else ""
    site = error.stack[start] if error.stack else None
    name = _deallocator((callees or {}).get((site.module or "", site.offset))) \
        if site is not None else None
    if name is None:
        name = called if called.startswith("operator delete") else \
            _FREE_SLOT.get(error.op, error.op)
    slot = _VgFrame(error.stack[0].pc if error.stack else 0, name, PRELOAD)
    return [slot, *_frames(view, error.stack, None, limit - 1)]


class _Stacks:
    """The groups' stacks in valgrind's view, their names read once for them all."""

    def __init__(self, analysis: Analysis, groups: Sequence[Group], limit: int) -> None:
        from .callsites import StackNames, stack_names
        from .dumpfile import DumpError
        from .rescan import alloc_ops
        from .suppressions import call_site

        self.limit = limit
        self.names: StackNames = StackNames()
        if not groups:
            return
        self.names = stack_names(groups, call_site, analysis.info.get("arch"))
        # the operation recorded at a stack names the slot when its call site could not be read:
        # looked up for those alone (a second reading of the dump, up to their allocations)
        unread = set()
        for g in groups:
            raw = g.raw or g.stack
            site = raw[call_site(raw)] if raw else None
            if g.node and (site is None or (site.module or "", site.offset)
                           not in self.names.callees):
                unread.add(g.node)
        if unread:
            try:
                self.names.ops = alloc_ops(analysis.path, unread)
            except (OSError, DumpError):
                pass  # the dump is gone since it was read: the frames must say

    def of(self, group: Group) -> list[_VgFrame]:
        from .suppressions import valgrind_view

        raw = group.raw or group.stack
        op = self.names.ops.get(group.node)
        view = valgrind_view(raw, self.names.callees, op, self.names.depth)
        return _frames(view, raw, op, self.limit)


def _frame_text(f: _VgFrame, first: bool) -> str:
    where = (f"({os.path.basename(f.file)}:{f.line})" if f.file and f.line
             else f"(in {f.obj})" if f.obj else "")
    return f"   {'at' if first else 'by'} 0x{f.ip:X}: {f.fn} {where}".rstrip()


# -- text ------------------------------------------------------------------------------------------


def _n(value: int) -> str:
    return f"{value:,}"


def _record_text(group: Group, number: int, total: int) -> str:
    kind = _KIND_WORDS[_kind(group)]
    if group.indirect_bytes:
        size = (f"{_n(group.total_bytes)} ({_n(group.bytes)} direct, "
                f"{_n(group.indirect_bytes)} indirect) bytes")
    else:
        size = f"{_n(group.bytes)} bytes"
    return f"{size} in {_n(group.blocks)} blocks are {kind} in loss record {_n(number)} of " \
        f"{_n(total)}"


def _shown(analysis: Analysis, opts: VgOptions) -> list[tuple[Group, int, int]]:
    """(group, number, of) of the loss records valgrind prints, in its order."""
    if opts.leak_check != "full":
        return []
    records = loss_records(analysis)
    suppressed = {id(g) for g in analysis.suppressed_groups or []}
    return [(g, i, len(records)) for i, g in enumerate(records, 1)
            if id(g) not in suppressed and _kind(g) in opts.show_kinds]


def _block(error: ErrorReport, limit: int) -> tuple[str, list[_VgFrame]] | None:
    """A mismatched free's block: valgrind's `Address 0x... is 0 bytes inside a block of size N
    alloc'd` and the allocation's stack; None for the other errors (the report has no block)."""
    if error.kind != "mismatched-free" or error.alloc_size is None:
        return None
    from .suppressions import valgrind_view

    what = (f"Address 0x{error.pointer:x} is 0 bytes inside a block of size "
            f"{_n(error.alloc_size)} alloc'd")
    raw = error.alloc_stack or ()
    return what, _frames(valgrind_view(raw, None, error.alloc_op), raw, error.alloc_op, limit)


def _error_lines(error: ErrorReport, limit: int,
                 callees: dict[tuple[str, int], str]) -> list[str]:
    lines = [_heading(error)]
    lines += [_frame_text(f, i == 0) for i, f in enumerate(_free_frames(error, limit, callees))]
    block = _block(error, limit)
    if block is not None:
        lines.append(f" {block[0]}")
        lines += [_frame_text(f, i == 0) for i, f in enumerate(block[1])]
    return lines


def render_text(analysis: Analysis, opts: VgOptions) -> str:
    """valgrind's text output of the run (`==PID==` lines)."""
    lines: list[str] = []
    if not opts.quiet:
        lines += [*_PREAMBLE, f"Command: {' '.join(opts.command or [analysis.program or '?'])}",
                  ""]
    contexts = _contexts(analysis.errors)
    callees = _callees(analysis, contexts)
    for error in contexts:
        lines += [*_error_lines(error, opts.num_callers, callees), ""]
    if not opts.quiet:
        lines += ["", "HEAP SUMMARY:",
                  f"    in use at exit: {_n(_in_use(analysis)[0])} bytes in "
                  f"{_n(_in_use(analysis)[1])} blocks",
                  f"  total heap usage: {_n(analysis.allocations)} allocs, "
                  f"{_n(_frees(analysis))} frees, "
                  f"{_n(analysis.allocated_bytes)} bytes allocated", ""]
    shown = _shown(analysis, opts)
    stacks = _Stacks(analysis, [g for g, _, _ in shown], opts.num_callers)
    supp = _suppression_of(analysis, opts)
    body: list[str] = []
    for group, number, total in shown:
        body += [_record_text(group, number, total)]
        body += [_frame_text(f, i == 0) for i, f in enumerate(stacks.of(group))]
        body.append("")
        if supp is not None:
            body.append(supp(group))
    lines += body
    if not opts.quiet:
        lines += _summary(analysis, opts)
    prefix = f"=={analysis.pid or 0}== "
    out = []
    for line in lines:
        if line.startswith("{\n"):  # a suppression: unprefixed, as valgrind prints it
            out.append(line.rstrip("\n"))
        else:
            out.append(f"{prefix}{line}".rstrip() + (" " if not line else ""))
    return "\n".join(out) + "\n" if out else ""


def _in_use(analysis: Analysis) -> tuple[int, int]:
    """valgrind's bytes and blocks in use at exit: the leaked ones, suppressed ones too."""
    hidden = analysis.suppressed_groups or []
    return (analysis.leaked_bytes + sum(g.bytes for g in hidden),
            analysis.leaked_blocks + sum(g.blocks for g in hidden))


def _frees(analysis: Analysis) -> int:
    """valgrind's count of frees: every call with a pointer, invalid ones too, and the runtime's
    blocks that its freeres releases."""
    return analysis.frees + analysis.free_calls.get("errors", 0) + analysis.runtime_blocks


def _suppression_of(analysis: Analysis, opts: VgOptions) -> Callable[[Group], str] | None:
    if not opts.gen_suppressions or not analysis.leaks:
        return None
    from .gensupp import suppression_text
    from .suppressions import group_names

    names = group_names(analysis, analysis.leaks)
    return lambda group: suppression_text(group, "<insert_a_suppression_name_here>", names)


def _kind_totals(analysis: Analysis) -> dict[str, list[int]]:
    totals = {kind: [0, 0] for kind in _KIND_ORDER}
    for g in analysis.leaks:
        totals[_kind(g)][0] += g.bytes
        totals[_kind(g)][1] += g.blocks
    return totals


def _summary(analysis: Analysis, opts: VgOptions) -> list[str]:
    lines: list[str] = []
    if opts.leak_check != "no":
        if not analysis.leaks and not analysis.suppressed_groups:
            lines += ["All heap blocks were freed -- no leaks are possible", ""]
        else:
            totals = _kind_totals(analysis)
            hidden = analysis.suppressed_groups or []
            lines.append("LEAK SUMMARY:")
            for kind, words in _KIND_WORDS.items():
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
    errors, contexts = error_count(analysis, opts)
    lines.append("For lists of detected and suppressed errors, rerun with: -s")
    hidden = _n(_suppressed_errors(analysis, opts))
    lines.append(f"ERROR SUMMARY: {_n(errors)} errors from {_n(contexts)} contexts "
                 f"(suppressed: {hidden} from {hidden})")
    return lines


# -- XML (protocol 4) ------------------------------------------------------------------------------


def _x(text: object) -> str:
    """Text as XML character data (xml.sax.saxutils' escape would import urllib.request)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _xml_stack(frames: Sequence[_VgFrame], indent: str = "  ") -> list[str]:
    lines = [f"{indent}<stack>"]
    for f in frames:
        lines += [f"{indent}  <frame>", f"{indent}    <ip>0x{f.ip:X}</ip>"]
        if f.obj:
            lines.append(f"{indent}    <obj>{_x(f.obj)}</obj>")
        if f.fn != "???":
            lines.append(f"{indent}    <fn>{_x(f.fn)}</fn>")
        if f.file and f.line:
            lines += [f"{indent}    <dir>{_x(os.path.dirname(f.file))}</dir>",
                      f"{indent}    <file>{_x(os.path.basename(f.file))}</file>",
                      f"{indent}    <line>{f.line}</line>"]
        lines.append(f"{indent}  </frame>")
    return [*lines, f"{indent}</stack>"]


def render_xml(analysis: Analysis, opts: VgOptions, ppid: int | None = None) -> str:
    """valgrind's XML output of the run (protocol 4)."""
    command = opts.command or [analysis.program or "?"]
    lines = ['<?xml version="1.0"?>', "", "<valgrindoutput>", "",
             "<protocolversion>4</protocolversion>", "<protocoltool>memcheck</protocoltool>", "",
             "<preamble>", *(f"  <line>{_x(line)}</line>" for line in _PREAMBLE),
             f"  <line>Command: {_x(' '.join(command))}</line>", "</preamble>", "",
             f"<pid>{analysis.pid or 0}</pid>", f"<ppid>{ppid if ppid is not None else 0}</ppid>",
             "<tool>memcheck</tool>", "", "<args>", "  <vargv>", "    <exe>memdump</exe>",
             *(f"    <arg>{_x(arg)}</arg>" for arg in opts.tool_args), "  </vargv>",
             "  <argv>", f"    <exe>{_x(command[0])}</exe>",
             *(f"    <arg>{_x(arg)}</arg>" for arg in command[1:]), "  </argv>", "</args>", "",
             "<status>", "  <state>RUNNING</state>", "</status>", "", ""]
    unique = 0
    counts: list[tuple[int, int]] = []
    contexts = _contexts(analysis.errors)
    callees = _callees(analysis, contexts)
    for error in contexts:
        same = sum(1 for e in analysis.errors if _heading(e) == _heading(error)
                   and [f.offset for f in e.stack] == [f.offset for f in error.stack])
        kind = "MismatchedFree" if error.kind == "mismatched-free" else "InvalidFree"
        tid = 1 if error.tid == analysis.pid else error.tid  # valgrind's main thread is 1
        lines += ["<error>", f"  <unique>0x{unique:x}</unique>", f"  <tid>{tid}</tid>",
                  f"  <kind>{kind}</kind>", f"  <what>{_x(_heading(error))}</what>",
                  *_xml_stack(_free_frames(error, opts.num_callers, callees))]
        block = _block(error, opts.num_callers)
        if block is not None:
            lines += [f"  <auxwhat>{_x(block[0])}</auxwhat>", *_xml_stack(block[1])]
        lines += ["</error>", ""]
        counts.append((unique, same))
        unique += 1
    lines += ["<status>", "  <state>FINISHED</state>", "</status>", ""]
    shown = _shown(analysis, opts)
    stacks = _Stacks(analysis, [g for g, _, _ in shown], opts.num_callers)
    for group, number, total in shown:
        lines += ["<error>", f"  <unique>0x{unique:x}</unique>", "  <tid>1</tid>",
                  f"  <kind>{_XML_KINDS[_kind(group)]}</kind>", "  <xwhat>",
                  f"    <text>{_x(_record_text(group, number, total))}</text>",
                  f"    <leakedbytes>{group.total_bytes}</leakedbytes>",
                  f"    <leakedblocks>{group.blocks}</leakedblocks>", "  </xwhat>",
                  *_xml_stack(stacks.of(group)), "</error>", ""]
        unique += 1
    lines.append("<errorcounts>")
    for number, count in counts:
        lines += ["  <pair>", f"    <count>{count}</count>", f"    <unique>0x{number:x}</unique>",
                  "  </pair>"]
    lines += ["</errorcounts>", "", "<suppcounts>"]
    for name, _file, _line, _groups, _bytes, blocks in analysis.used_suppressions:
        lines += ["  <pair>", f"    <count>{blocks}</count>", f"    <name>{_x(name)}</name>",
                  "  </pair>"]
    lines += ["</suppcounts>", "", "</valgrindoutput>", ""]
    return "\n".join(lines)


def report(args, analysis: Analysis, show_kinds: frozenset[str],  # noqa: ANN001
           error_kinds: frozenset[str]) -> tuple[str | None, str, bool]:
    """cli.py's --format valgrind and valgrind-xml: (the output file, -o with valgrind's `%p`
    and `%q{VAR}` expanded; the text; whether the ERROR SUMMARY counts errors, which
    --fail-on-leak turns into exit status 1)."""
    from .dumpfile import DumpError

    opts = options(args, show_kinds, error_kinds)
    try:
        path = None if args.output is None else expand_path(args.output, analysis.pid)
    except ValueError as e:
        raise DumpError(args.output, None, f"-o {e}") from None
    ppid = int(analysis.info["ppid"]) if analysis.info.get("ppid", "").isdigit() else None
    text = render_xml(analysis, opts, ppid) if args.format == "valgrind-xml" \
        else render_text(analysis, opts)
    return path, text, error_count(analysis, opts)[0] > 0
