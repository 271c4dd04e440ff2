"""memdump: record every heap operation of the program with its call stack, and report leaks."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import textwrap

import gdb

from .. import output, settings
from ..core import builtfiles
from ..core.breakcond import NO_MAX, ON, PCS, BreakCondition
from ..core.recorder import LIBRARY, find_library
from ..memdump import ends
from ..memdump.accessfault import check_spec, check_spec_setting
from ..memdump.bpbackend import BreakpointBackend
from ..memdump.breaks import function_ranges
from ..memdump.checks import CMD, NOT_RECORDED, check_program
from ..memdump.inprocess import InProcessBackend
from ..memdump.recording import Recording, State
from ..memdump.registry import RECORDINGS
from . import base

# `memdump status --json` is versioned as the report JSON is (`"format"`, `"version"` MAJOR.MINOR):
# a new key is a minor version, a key removed or changed in meaning a major one.
STATUS_FORMAT = "memdump-status"
STATUS_VERSION = "1.0"


def _build_parser() -> base.Parser:
    parser = base.Parser(
        prog="memdump",
        description=textwrap.fill(
            "Record every malloc, calloc, realloc, free (and reallocarray, posix_memalign, "
            "aligned_alloc, memalign, valloc, pvalloc) of the program with its call stack into a "
            f"dump file; analyse it with {builtfiles.ANALYZE}. Without a subcommand, start "
            "recording: at once on a live process, else when it runs; each later run of the "
            "program is recorded into a new dump until memdump stop. In batch mode (gdb -batch) "
            "a memdump that cannot record exits GDB with status 1.", width=78),
        epilog="settings (set memdump NAME VALUE; show memdump lists them):\n"
               + "\n".join(settings.usage_lines()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="dump path (default: ./PROGRAM.PID.memdump)")
    parser.add_argument("--breakpoints", action="store_true",
                        help="stop the program at every allocator call instead of loading the "
                             "in-process recorder into it (slow; nothing is loaded)")
    parser.add_argument("--children", action="store_true",
                        help="also record the processes the program forks and the programs "
                             "they execute, each into its own dump (in-process recorder only)")
    parser.add_argument("--guard", metavar="SPEC",
                        help="guard pages (docs/heap-errors.md): place the blocks SPEC chooses "
                             "against an inaccessible page; a faulting access stops GDB at the "
                             "instruction (in-process recorder only)")
    parser.set_defaults(run=_start)
    sub = parser.add_subparsers(parser_class=base.Parser)
    st = sub.add_parser("status", help="print what has been recorded so far")
    st.set_defaults(run=_status)
    st.add_argument("--json", action="store_true", help="print JSON")
    lk = sub.add_parser("leaks", help="print the blocks live now, grouped by allocation stack "
                                      "(nothing recorded: the heap walked, grouped by type)")
    lk.set_defaults(run=_leaks)
    lk.add_argument("--json", action="store_true", help="print the JSON report")
    lk.add_argument("--show-runtime", action="store_true",
                    help="also show blocks the C/C++ runtime allocated for itself")
    lk.add_argument("--show-runtime-frames", action="store_true",
                    help="show the C/C++ runtime's outermost frames (start_thread, std::thread's "
                         "internals) instead of folding them into one line")
    lk.add_argument("--top", type=int, metavar="N", help="show only the N largest groups")
    lk.add_argument("--show-leak-kinds", metavar="LIST", type=_kinds,
                    help="the leak kinds whose groups are listed: definite, indirect, possible, "
                         "reachable (comma-separated), all or none (default: every live block "
                         "at a stop; once the program ended, definite,possible, as "
                         "memdump-analyze)")
    lk.add_argument("--older-than", type=float, metavar="SECONDS",
                    help="only the blocks allocated at least SECONDS ago")
    change = lk.add_mutually_exclusive_group()
    change.add_argument("--increased", action="store_true",
                        help="only the groups that grew since the previous memdump leaks, with "
                             "valgrind's (+N) deltas")
    change.add_argument("--changed", action="store_true",
                        help="only the groups that grew or shrank since the previous memdump "
                             "leaks, with their deltas")
    lk.add_argument("-o", "--output", dest="report", metavar="FILE",
                    help="write the report to FILE and print a one-line summary")
    hp = sub.add_parser("heap", help="glibc's heap now (a stopped process or a core, recorded or "
                                     "not): blocks by type and size class, each arena's free "
                                     "bytes and fragmentation")
    hp.set_defaults(run=_heap)
    hp.add_argument("--json", action="store_true", help="print JSON")
    hp.add_argument("-o", "--output", dest="report", metavar="FILE",
                    help="write it to FILE and print a one-line summary")
    wp = sub.add_parser("who-points-at",
                        help="list the roots and live blocks holding a pointer into ADDR "
                             "(valgrind's who_points_at)")
    wp.set_defaults(run=_who_points_at)
    wp.add_argument("address", metavar="ADDR", help="address (an expression: 0x..., a pointer)")
    wp.add_argument("length", metavar="LEN", nargs="?", default="1",
                    help="bytes from ADDR a pointer may point into (default 1: ADDR itself)")
    bl = sub.add_parser("block-list",
                        help="list the blocks of group N of the last memdump leaks, with their "
                             "addresses (valgrind's block_list)")
    bl.set_defaults(run=_block_list)
    bl.add_argument("group", metavar="N", type=int, help="the group's number (LEAK N of ...)")
    br = sub.add_parser("break", help="stop the program at the heap events that match (both "
                                      "recorders); without options: show the break")
    br.set_defaults(run=_break)
    br.add_argument("--on", choices=sorted(ON), default=None,
                    help="the kind of event: alloc (every allocation, realloc included; the "
                         "default), free, realloc")
    size = br.add_mutually_exclusive_group()
    size.add_argument("--size", type=_count, metavar="N", help="allocations of exactly N bytes")
    size.add_argument("--size-min", type=_count, metavar="N",
                      help="allocations of N bytes or more")
    br.add_argument("--seq", type=_count, metavar="N", help="the event numbered N in the dump")
    br.add_argument("--tag", metavar="T",
                    help="events of threads whose innermost memdump_api.h tag is T")
    br.add_argument("--function", metavar="F",
                    help="events whose stack goes through function F (debug information)")
    br.add_argument("--count", type=_count, metavar="N",
                    help="stop at the N-th matching event only (default: at each one)")
    br.add_argument("--leak", type=_count, metavar="N",
                    help="the allocation that leaked as LEAK N of the report of --from DUMP "
                         "(its stack and which call from it): run the program again to land "
                         "there")
    br.add_argument("--from", dest="from_dump", metavar="DUMP",
                    help="the dump of an earlier run, for --leak")
    br.add_argument("--delete", action="store_true", help="remove the break")
    sub.add_parser("stop", help="stop recording and close the dump").set_defaults(run=_stop)
    sub.add_parser("check-heap", help="check every block's red zones and the quarantine now "
                                      "(in-process recorder with red zones: memdump.sh "
                                      "--redzones)").set_defaults(run=_check_heap)
    return parser


def _kinds(text: str) -> frozenset[str]:
    """--show-leak-kinds' LIST, as memdump-analyze reads it."""
    from memdump_analyzer.cli import parse_kinds

    try:
        return parse_kinds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {value}")
    return value


def _break(args: argparse.Namespace) -> None:
    asked = [a for a in ("on", "size", "size_min", "seq", "tag", "function", "count", "leak",
                         "from_dump") if getattr(args, a) is not None]
    if args.delete:
        if asked:
            raise gdb.GdbError(f"{CMD} break: --delete takes no other option")
        deleted, RECORDINGS.break_condition = RECORDINGS.break_condition, None
        if _active() is not None:
            _active().set_break(None)
        # a --count break that fired is still the break: it stops again in the next run
        output.info(CMD, f"break deleted: {deleted.text}" if deleted is not None
                    else "no break to delete")
        return
    if not asked:
        shown = RECORDINGS.break_condition
        output.info(CMD, f"break: {shown.text}" if shown is not None else "no break")
        return
    if args.leak is not None or args.from_dump is not None:
        leak = RECORDINGS.break_condition = _leak_break(args, asked)
        if _active() is not None:
            _active().set_break(dataclasses.replace(leak))
        output.info(CMD, f"break: {leak.text}")
        _arm_for_break()
        return
    on = args.on or "alloc"
    if on == "free" and (args.size is not None or args.size_min is not None):
        raise gdb.GdbError(f"{CMD} break: --size and --size-min are for allocations "
                           "(--on alloc or realloc)")
    if args.function:
        function_ranges(args.function)  # there: its addresses are taken when the program runs
    words = [f"--on {on}"] + [f"--{a.replace('_', '-')} {getattr(args, a)}"
                              for a in asked if a != "on"]
    condition = BreakCondition(
        ops=frozenset(ON[on]),
        size_min=args.size if args.size is not None else args.size_min or 0,
        size_max=args.size if args.size is not None else NO_MAX,
        seq=args.seq or 0, tag=args.tag, function=args.function, count=args.count or 0,
        text=" ".join(words))
    RECORDINGS.break_condition = condition
    session = _active()
    if session is not None:
        session.set_break(dataclasses.replace(condition))
    output.info(CMD, f"break: {condition.text}")
    _arm_for_break()


def _arm_for_break() -> None:
    """A break stops only a recorded run: with no recording armed, arm one for the next run, as
    `memdump` does (its settings), and say so; a program already running unrecorded is said."""
    if _active() is not None:
        return
    inferior = gdb.selected_inferior()
    if inferior.pid:
        output.warn(CMD, "break: the program is running unrecorded: the break stops nothing "
                         "until memdump records it (memdump)")
        return
    _start(argparse.Namespace(output=None, breakpoints=False, children=False),
           note="armed: the next run is recorded, so that the break can stop it (memdump stop "
                "disarms)")


def _active() -> Recording | None:
    return RECORDINGS.active()


def _leak_break(args: argparse.Namespace, asked: list[str]) -> BreakCondition:
    """--leak N --from DUMP: the condition that stops where group N was allocated."""
    from memdump_analyzer.leaksite import LeakSiteError, leak_site  # when asked for

    if args.leak is None or args.from_dump is None:
        raise gdb.GdbError(f"{CMD} break: --leak N and --from DUMP go together")
    if len(asked) > 2:
        raise gdb.GdbError(f"{CMD} break: --leak takes no other condition")
    if args.leak < 1:
        raise gdb.GdbError(f"{CMD} break: leak groups are numbered from 1")
    try:
        site = leak_site(os.path.expanduser(args.from_dump), args.leak)
    except LeakSiteError as exc:
        raise gdb.GdbError(f"{CMD} break: {exc}") from None
    if not site.occurrence:
        raise gdb.GdbError(f"{CMD} break: {args.from_dump}: the allocation of LEAK "
                           f"{args.leak} is not among its events")
    return BreakCondition(ops=frozenset(ON["alloc"]), frames=site.frames[:PCS],
                          count=site.occurrence,
                          text=f"--leak {args.leak} --from {args.from_dump} ({site.title}; the "
                               f"allocation of {site.size:,} bytes, call {site.occurrence:,} "
                               "from its stack)")


def _start(args: argparse.Namespace, note: str | None = None) -> None:
    """`memdump`: arm or start a recording. NOTE: the one line said when armed (memdump
    break's), in place of the usual ones."""
    current = _active()
    if current is not None and current.again and current.state == State.ARMED:
        current.finish("stop")  # armed by itself (next run, a break): this memdump replaces it
        current = None
    if current is not None and current.state == State.ARMED:
        where = f" to {current.path}" if current.path else ""
        raise gdb.GdbError(f"{CMD}: already armed: recording{where} starts when the program runs "
                           "(memdump stop disarms)")
    if current is not None:
        where = current.path or "the dump"
        raise gdb.GdbError(f"{CMD}: already recording to {where} (memdump stop ends it)")
    inferior = gdb.selected_inferior()
    program = inferior.progspace.filename
    if not inferior.pid and not program:
        raise gdb.GdbError(
            f"{CMD}: no program to record: start GDB with one (gdb ./app), use 'file ./app', "
            "or attach to a process (gdb -p PID)"
        )
    if program:
        check_program(program)
    if args.output is not None and os.path.isdir(args.output):
        raise gdb.GdbError(f"{CMD}: cannot write the dump to {args.output}: it is a directory")
    if args.output is None and not os.access(os.getcwd(), os.W_OK):
        raise gdb.GdbError(
            f"{CMD}: cannot write the dump in the current directory {os.getcwd()}: "
            "permission denied (use memdump -o FILE)"
        )
    guard = getattr(args, "guard", None)
    guard = check_spec(guard) if guard is not None else check_spec_setting()
    session = _new_session(args.output, breakpoints=args.breakpoints, children=args.children)
    if guard and session.chosen == BreakpointBackend.mode:
        raise gdb.GdbError(f"{CMD}: --guard needs the in-process recorder (not --breakpoints)")
    session.guard = guard
    session.arm(note=note)
    session.again = note is not None  # armed by memdump break: a `memdump` replaces it
    RECORDINGS.current = session


def _new_session(out_path: str | None, series: str | None = None,
                 breakpoints: bool = False, again: bool = False,
                 children: bool = False) -> Recording:
    """A session that reads the settings when its recording starts and, when the program ends,
    arms the next one: each run of the program in this GDB gets its own dump. The in-process
    recorder records unless BREAKPOINTS or the library is not built (on a live process it is
    loaded into it: memdump_attach)."""
    library = None
    if not breakpoints and settings.get("recorder") == "in-process":
        library = find_library()
        if library is None:
            output.info(CMD, f"the in-process recorder ({LIBRARY}) is not built (make build): "
                             "recording with breakpoints")
    session = Recording(
        out_path,
        depth=int(settings.get("depth")),
        unwinder=str(settings.get("unwinder")),
        return_sites=int(settings.get("return-sites")),
        backend=BreakpointBackend if library is None else
        functools.partial(InProcessBackend, library=library),
        scan_time_limit=int(settings.get("scan-time-limit")),
    )
    session.series = series
    session.children = children or bool(settings.get("children"))
    if session.children and library is None:
        output.warn(CMD, "children are recorded by the in-process recorder only: this recording "
                         "follows the program alone")
    session.settings = settings.get
    session.on_program_end = _rearm
    session.on_start = RECORDINGS.run_started
    if RECORDINGS.break_condition is not None:  # its matches count anew in each run
        session.breaks.condition = dataclasses.replace(RECORDINGS.break_condition, hits=0)
    return session


def _rearm(ended: Recording) -> None:
    """The recorded program ended (exit, killed, detach): record its next run too."""
    if RECORDINGS.current is not ended:
        return
    session = _new_session(None, series=ended.series or ended.out_path,
                           breakpoints=ended.chosen == BreakpointBackend.mode, again=True,
                           children=ended.children)
    session.previous = ended
    session.guard = ended.guard
    session.arm(again=True)
    RECORDINGS.current = session


# Queries need a recording to report on (armed counts: `memdump status` says so).
needs_recording = base.Precondition("nothing recorded yet", "start with: memdump, then run",
                                    lambda: RECORDINGS.current is not None)


def _need_session() -> Recording:
    """The recording queries report on: the last one when the next is only armed by itself."""
    session = RECORDINGS.queried()
    if session is None:
        raise base.PreconditionFailed(needs_recording.line)
    return session


# What each counter of `memdump status` means (Recording.counts).
COUNTER_LEGEND = {
    "nested": "allocator calls made by the allocator itself (realloc(NULL, n) calling malloc): "
              "part of the outer operation, not recorded again",
    "partial-stacks": "call stacks memdump's unwinder could walk only part of (no unwind "
                      "information, unreadable memory): recorded as far as they go",
    "gdb-unwinds": "call stacks walked by GDB's unwinder because memdump's could not",
    "unreadable-registers": "allocator entries skipped: the thread's registers could not be read",
    "internal-errors": "errors inside memdump while recording (set dbgkit debug on to see them)",
    "scan-ms": "milliseconds the pointer scan at the end (exit, memdump stop, detach) took",
}


@needs_recording
def _status(args: argparse.Namespace) -> None:
    status = _need_session().status()
    status["next_run_armed"] = RECORDINGS.next_run_armed()
    if args.json:
        versioned = {"format": STATUS_FORMAT, "version": STATUS_VERSION, **status}
        output.block(json.dumps(versioned, indent=2, sort_keys=True))
        return
    counts = status["counts"]
    lines = [
        f"state:        {status['state']}" + (f" ({status['ended']})" if status["ended"] else ""),
        f"dump:         {status['path'] or '(opened when the program starts)'}",
        f"events:       {status['events']:,} in {status['running_s']:.1f} s of running "
        f"({status['events_per_s']:,.0f}/s; time stopped in GDB not counted)",
        f"pending:      {status['pending_calls']} allocator calls not returned yet",
        f"live blocks:  {status['live_blocks']:,}",
        f"breakpoints:  {status['hooks']} entry points, {status['return_sites']} return sites",
    ]
    if status["interned"]:
        interned = ", ".join(f"{v:,} {k}" for k, v in status["interned"].items())
        lines.append(f"interned:     {interned} (written to the dump once, then referred to "
                     "by number)")
    if counts:
        lines.append("counters:")
        width = max(len(f"{k} {v:,}") for k, v in counts.items())
        for key, value in sorted(counts.items()):
            legend = COUNTER_LEGEND.get(key, "")
            lines.append(f"  {key + ' ' + format(value, ','):<{width}}  {legend}".rstrip())
    if status["next_run_armed"]:
        lines.append("next run:     recorded into a new dump (memdump stop disarms)")
    output.block("\n".join(lines))


def _heap(args: argparse.Namespace) -> None:
    from ..memdump import heapcmd

    heapcmd.heap_command(args)


def _leaks(args: argparse.Namespace) -> None:
    from ..memdump import live as memdump_live  # with the analyser: imported when first asked for

    if RECORDINGS.queried() is None:  # nothing recorded: the heap walk, blocks by type
        from ..memdump import heapcmd

        if heapcmd.walkable():  # else: nothing recorded yet, and no heap to walk
            heapcmd.leaks_without_recording(args)
            return
    session = _need_session()
    if session.path is None or session.writer is None:
        raise gdb.GdbError(f"{CMD}: nothing recorded yet: the program has not started")
    from memdump_analyzer import DumpError, analyze, dumps_json, render_json, render_text
    from memdump_analyzer.leaktext import DEFAULT_SHOW_KINDS, FILTERED_KINDS

    live = session.state == State.RECORDING
    if args.older_than is not None and not (live and session.inferior.pid):
        raise gdb.GdbError(f"{CMD}: --older-than: the program is not running")
    session.sync_dump()
    from ..memdump import heapcmd

    before = heapcmd.before_recording(session) if live else None  # after a late attach
    scan = before.scan if before is not None else memdump_live.live_scan(session)
    try:
        analysis = analyze(session.path, scan=scan, addresses=True)
    except DumpError as exc:
        raise gdb.GdbError(f"{CMD}: {exc}") from None
    if args.older_than is not None:
        if args.older_than < 0:
            raise gdb.GdbError(f"{CMD}: --older-than needs a number of seconds >= 0, not "
                               f"{args.older_than:g}")
        memdump_live.older_than(analysis, session.block_ages(), args.older_than)
    kept = RECORDINGS.here()  # this inferior's: the previous check may be of an earlier run
    previous, kept.previous_leaks = kept.previous_leaks, memdump_live.snapshot(analysis)
    kept.program = session.inferior.progspace.filename
    memdump_live.compare(analysis, previous,
                         "increased" if args.increased else "changed" if args.changed else None)
    # the offline report's default kinds once the program ended; at a stop, all that is live
    kinds = args.show_leak_kinds if args.show_leak_kinds is not None else \
        None if live else DEFAULT_SHOW_KINDS
    kept.last_groups = [
        g for g in analysis.groups if (args.show_runtime or g.kind == "leak") and
        (kinds is None or g.kind != "leak" or g.leak_kind not in FILTERED_KINDS
         or g.leak_kind in kinds)]
    # the blocks from before a late attach: the report's own, as the offline report's are
    heading = before.heading() if before is not None else None
    if before is not None and before.older is not None:
        analysis.older = before.older
    if args.json:
        text = dumps_json(render_json(analysis, show_runtime=args.show_runtime, live=live,
                                      top=args.top, show_leak_kinds=kinds,
                                      older_heading=heading))
    else:
        text = render_text(analysis, show_runtime=args.show_runtime, top=args.top, live=live,
                           show_leak_kinds=kinds, show_runtime_frames=args.show_runtime_frames,
                           title="memdump leaks: blocks live now" if live else "memdump report",
                           color=output.colour_enabled() and not args.report,
                           older_heading=heading)
    if args.report:
        try:
            with open(args.report, "w", encoding="utf-8") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")
        except OSError as exc:
            raise gdb.GdbError(f"{CMD}: cannot write {args.report}: {exc.strerror}") from None
        output.info(CMD, f"{analysis.leaked_bytes:,} bytes in {analysis.leaked_blocks:,} blocks "
                         f"live (runtime's own apart); report in {args.report}")
        return
    output.block(text)


@needs_recording
def _who_points_at(args: argparse.Namespace) -> None:
    from ..memdump import live as memdump_live

    session = _need_session()
    memdump_live.check_stopped(session)
    try:
        start = int(gdb.parse_and_eval(args.address)) & 0xFFFFFFFFFFFFFFFF
        length = int(gdb.parse_and_eval(args.length))
    except gdb.error as exc:
        raise gdb.GdbError(f"{CMD}: who-points-at: {exc}") from None
    if length < 1:
        raise gdb.GdbError(f"{CMD}: who-points-at: LEN must be at least 1, not {length}")
    found = memdump_live.points_at(session, start, length)
    ours = [p for p in found if not p.glibc]
    glibc = [p for p in found if p.glibc]
    lines = [f"Searching for pointers to {start:#x}" if length == 1 else
             f"Searching for pointers pointing in {length:,} bytes from {start:#x}"]
    lines += [memdump_live.describe(p, start) for p in ours]
    lines.append(f"{len(ours):,} pointer{'s' if len(ours) != 1 else ''} found")
    if glibc:  # the scan does not count them: say why they are left out
        lines.append(f"and {len(glibc):,} word{'s' if len(glibc) != 1 else ''} of glibc's "
                     "malloc, each the address of the chunk header after a live block (its bins, "
                     "its top, the fd/bk words left in recycled memory), not pointers into it:")
        lines += [memdump_live.describe(p, start) for p in glibc]
    output.block("\n".join(lines))


@needs_recording
def _block_list(args: argparse.Namespace) -> None:
    groups = RECORDINGS.here().last_groups
    if not groups:
        raise gdb.GdbError(f"{CMD}: block-list: no groups yet: run memdump leaks first")
    if not 1 <= args.group <= len(groups):
        raise gdb.GdbError(f"{CMD}: block-list: no group {args.group} (the last memdump leaks "
                           f"listed {len(groups)})")
    group = groups[args.group - 1]
    kind = f", {group.leak_kind}" if group.leak_kind else ""
    lines = [f"LEAK {args.group}: {group.bytes:,} bytes in {group.blocks:,} "
             f"block{'s' if group.blocks != 1 else ''}{kind}"]
    lines += [f"  {addr:#x}[{size:,}]" for addr, size in sorted(group.addresses)]
    output.block("\n".join(lines))


def _stop(args: argparse.Namespace) -> None:
    session = _active()
    if session is None:
        raise gdb.GdbError(f"{CMD}: not recording")
    armed = session.state == State.ARMED
    if not armed:  # the process stays: its leak kinds now, into the dump, as at exit
        ends.scan_before_end(session, "stop")
    session.finish("stop")
    if armed:
        output.info(CMD, "disarmed: the program's next run is not recorded")


def _check_heap(args: argparse.Namespace) -> None:
    from ..memdump.checkheap import CheckRefused, check_heap
    try:
        output.block("\n".join(check_heap()))
    except CheckRefused as exc:
        raise base.PreconditionFailed(str(exc)) from None


_PARSER = _build_parser()
RECORDINGS.connect()


@base.register
class MemdumpCommand(base.Command):
    NAME = CMD
    SUMMARY = __doc__ or ""
    PARSER = _PARSER

    def run(self, args: argparse.Namespace) -> None:
        args.run(args)

    def batch_failure(self, argv: list[str]) -> str | None:
        """A memdump that was to start recording and cannot, bad options and all (`memdump -o`,
        `memdump --frobnicate`, `memdump stats`; not `memdump leaks`): in batch mode GDB must not
        go on to run the program unrecorded and exit 0 (a CI job would pass without a dump)."""
        starts = self.PARSER.subcommand_of(argv) is None
        return NOT_RECORDED if starts and RECORDINGS.active() is None else None
