"""The command line: `memdump-analyze [options] DUMP` and `memdump-analyze diff [options] BASE NEW`.

Exit status: 0 the report was written; 1 with `--fail-on-leak` when the program leaked blocks of
the `--errors-for-leak-kinds` (alias `--leak-kinds`; default definite,possible, as valgrind's; every
leaked block when the dump has no pointer scan; after a late attach, the blocks from before it
too); 2 the dump or the command line is bad (one line
on stderr: `memdump-analyze: <problem>`); 3 with `--fail-on-leak` or `--fail-on-error` when
neither found what it counts but a dump has no end record (the recording was cut, perhaps before
its first event): no verdict, not a pass; 4 with `--fail-on-error` when the dump holds heap errors
(invalid, double or mismatched frees, access errors guard pages caught, heap corruption red zones
found), before 1 when both options are given and both fail.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import analyze, vgcompat
from .colour import colour_wanted
from .dumpfile import DumpError
from .dumpformat import KINDS as _ALL_KINDS
from .exports import METRICS, from_replay, page_pass, replay_snapshots
from .formats import EXPORTS as _EXPORTS
from .formats import FORMATS, TRANSCODED, format_help
from .suppfile import SuppressionError
from .verdicts import EXIT_BAD_INPUT, EXIT_OK, failing_blocks, verdict

if TYPE_CHECKING:
    from .exports import PagePass
    from .exports.profile import Plan
    from .model import Analysis, Group
    from .report import SuppressionOf
    from .suppressions import Suppression

# The modules of one kind of output (the report, diff, a view, an export) are imported by the
# function that makes it: the leak report loads neither the views nor the exports' renderers.

PROG = "memdump-analyze"
#: the views' subcommands (views.VIEWS' keys, which a test holds them to): named here, so that
#: a leak report does not import the views to tell that its dump is not one of them
VIEW_NAMES = ("peak", "hotspots", "temporary", "lifetimes", "timeline", "sizes")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


#: valgrind 3.19's default of --errors-for-leak-kinds (--show-leak-kinds': leaktext's)
DEFAULT_ERROR_KINDS = frozenset(("definite", "possible"))


def parse_kinds(text: str) -> frozenset[str]:
    """A set of leak kinds as valgrind writes it: `definite,indirect,possible,reachable` (any
    of them, comma-separated), `all` or `none`. Raises ValueError with the reason."""
    words = [word.strip() for word in text.split(",")]
    if words in (["all"], ["none"]):
        return frozenset(_ALL_KINDS) if words == ["all"] else frozenset()
    kinds: set[str] = set()
    for word in words:
        if word in ("all", "none"):
            raise ValueError(f"'{word}' cannot be combined with other kinds")
        if word not in _ALL_KINDS:
            raise ValueError(
                f"unknown leak kind '{word}' (definite, indirect, possible, reachable, "
                "comma-separated; or all, none)"
            )
        kinds.add(word)
    return frozenset(kinds)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Report the leaks and heap errors recorded in a memdump dump.",
        epilog="`memdump-analyze diff [options] BASE NEW` compares two dumps (diff --help); "
        "`memdump-analyze peak|hotspots|temporary|lifetimes|timeline|sizes [options] DUMP` shows "
        "a view of a dump (docs/views.md; VIEW --help). A subcommand is one only as the first "
        "argument: a dump named diff is ./diff. "
        "Exit status: 0 report written; 1 leaks found with --fail-on-leak; "
        "2 bad dump, suppression file or usage; 3 with --fail-on-leak or --fail-on-error, "
        "nothing found but the recording was cut (the dump has no end record: perhaps not one "
        "event); 4 heap errors found with --fail-on-error (before 1 when both fail). "
        "MEMDUMP_DEBUG=1 shows the traceback of an internal error.",
    )
    parser.add_argument(
        "--format",
        choices=tuple(FORMATS),
        default="text",
        help=format_help("text"),
    )
    parser.add_argument("--base", metavar="DUMP",
                        help="--format pprof, collapsed, massif, html: export the difference "
                        "from the dump DUMP, stack by stack (matched by function and file:line, "
                        "as pprof's -base)")
    parser.add_argument("--metric", choices=tuple(METRICS),
                        help="--format collapsed: what each stack counts (leaked-bytes)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")
    parser.add_argument(
        "--show-runtime",
        action="store_true",
        help="also list the C/C++ runtime's own blocks (stdio buffers, loader, locale...)",
    )
    parser.add_argument(
        "--fail-on-leak", action="store_true",
        help="exit with 1 when the program leaked; with 3 when it did not but the recording was "
        "cut (no end record)"
    )
    parser.add_argument(
        "--fail-on-error", action="store_true",
        help="exit with 4 when the dump holds heap errors: invalid, double or mismatched frees, "
        "access errors guard pages caught, heap corruption red zones found (4 before "
        "--fail-on-leak's 1 when both fail); with 3 when it holds none but the recording was "
        "cut"
    )
    parser.add_argument(
        "--show-leak-kinds",
        metavar="LIST",
        help="the leak kinds whose groups are listed: definite, indirect, possible, reachable "
        "(comma-separated), all or none (definite,possible, as valgrind; the indirectly lost "
        "bytes are shown with the definitely lost block that owns them; the summary counts "
        "every kind)",
    )
    parser.add_argument(
        "--errors-for-leak-kinds",
        "--leak-kinds",
        dest="errors_for_leak_kinds",
        metavar="LIST",
        help="the leak kinds --fail-on-leak counts, same syntax (definite,possible, as "
        "valgrind); --leak-kinds is an older name of it. A dump without a pointer scan "
        "counts every leaked block",
    )
    parser.add_argument(
        "--show-runtime-frames",
        action="store_true",
        help="show the C/C++ runtime's frames that called the program's outermost frame "
        "(start_thread, clone3, std::thread's internals...), folded into one line by default",
    )
    parser.add_argument(
        "--max-frames", type=_positive, metavar="N", help="show at most N frames of a stack"
    )
    parser.add_argument(
        "--top",
        type=_positive,
        metavar="N",
        help="list only the N largest groups (of those --show-leak-kinds lists, whatever their "
        "kind; the runtime's, with --show-runtime, apart); the summary still counts them all",
    )
    parser.add_argument(
        "--no-symbolize",
        action="store_true",
        help="do not symbolise from the modules (addr2line) the frames the dump has no symbols "
        "for (the recording did not finish): they are shown by module and offset",
    )
    _ci_options(parser)
    vgcompat.add_options(parser)
    views = parser.add_mutually_exclusive_group()
    views.add_argument("--by-tag", action="store_true",
                       help="instead of the leaks: per memdump_api.h tag, the bytes and blocks "
                       "allocated, the peak and what is still live (docs/tags.md)")
    views.add_argument("--growth", action="store_true",
                       help="instead of the leaks: the growth chains (a vector or string grown "
                       "step by step, a buffer grown by realloc) by stack, and the reserve that "
                       "avoids them (docs/growth.md); --top N")
    views.add_argument("--heap-map", action="store_true",
                       help="instead of the leaks: the live blocks laid out by address at "
                       "--at's moment, per region: used, free runs, fragmentation "
                       "(docs/heapmap.md)")
    parser.add_argument("--at", default="end", metavar="WHEN",
                        help="--heap-map's moment: end (default), peak, an event number, or "
                        "phase:NAME (as the phase began)")
    views.add_argument("--phases", action="store_true",
                       help="instead of the leaks: per MEMDUMP_PHASE, what it allocated, freed "
                       "within it, and what outlived it, by stack, with where it was freed")
    convert = parser.add_mutually_exclusive_group()
    convert.add_argument("--compact", action="store_true",
                         help="rewrite the text dump DUMP in the compact encoding (over DUMP, or "
                         "into -o FILE; docs/dump-format.md), instead of a report")
    convert.add_argument("--text", action="store_true",
                         help="print any dump, compact or not, as its text records (to -o FILE)")
    parser.add_argument("--gen-suppressions", action="store_true",
                        help="after each listed leak group, the suppression in valgrind's format "
                        "that --suppressions applies back (JSON: each leak's `suppression`)")
    parser.add_argument("--sarif-root", metavar="DIR",
                        help="--format sarif: source files under DIR are named relative to it "
                        "(uriBaseId %%SRCROOT%%), as code scanning wants (the current directory)")
    parser.add_argument("--sarif-information-uri", metavar="URI",
                        help="the tool's informationUri in --format sarif (none by default)")
    parser.add_argument("dump", metavar="DUMP", help="the dump file written by `memdump` (a dump "
                        "named `diff`: ./diff)")
    return parser


def _ci_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suppressions", action="append", default=[], metavar="FILE",
        help="leave out the leak groups a suppression of FILE matches (repeatable): valgrind's "
        "format ({ name, Memcheck:Leak, match-leak-kinds:, fun:/obj:/src: frames, ... }) or "
        "LeakSanitizer's (leak:PATTERN lines); counted by name in the report. As valgrind, "
        "only the groups of --show-leak-kinds and --errors-for-leak-kinds are checked",
    )


def build_diff_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} diff",
        description="The leak groups of NEW that BASE has not, and those that grew, matched by "
        "leak kind and stack shape (the functions and files of each frame, lines paired in "
        "their order, so that an edit that moves lines moves no leak; never addresses).",
        epilog="Exit status: 0 diff written; 1 with --fail-on-leak when NEW adds a leak group "
        "or one grew (of --errors-for-leak-kinds); 2 bad dump, suppression file or usage; 3 with "
        "--fail-on-leak when neither but a dump was cut (no end record).",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="diff format (text)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the diff to FILE")
    parser.add_argument("--fail-on-leak", action="store_true",
                        help="exit with 1 when NEW adds a leak group or a group grew")
    parser.add_argument("--show-leak-kinds", metavar="LIST",
                        help="the leak kinds compared (definite,possible, as valgrind)")
    parser.add_argument("--errors-for-leak-kinds", metavar="LIST",
                        help="the leak kinds --fail-on-leak counts (definite,possible)")
    parser.add_argument("--max-frames", type=_positive, metavar="N",
                        help="show at most N frames of a stack")
    _ci_options(parser)
    parser.add_argument("base", metavar="BASE", help="the dump of the reference run")
    parser.add_argument("new", metavar="NEW", help="the dump of the run to check")
    return parser


def _say(line: str) -> None:
    sys.stderr.write(f"{PROG}: {' '.join(line.split())}\n")
    sys.stderr.flush()


def _kind_option(args: argparse.Namespace, name: str, default: frozenset[str]) -> frozenset[str]:
    text = getattr(args, name.lstrip("-").replace("-", "_"))
    if text is None:
        return default
    try:
        return parse_kinds(text)
    except ValueError as e:
        raise _UsageError(f"{name}: {e}") from None


class _UsageError(Exception):
    """A bad option value: one line, exit 2."""


def _load(path: str, suppressions: list[Suppression], kinds: frozenset[str],
          symbolize: bool = True, allocations: bool = False,
          snapshots: Plan | None = None, page: PagePass | None = None) -> Analysis:
    """The analysis of a dump, its warnings said; the suppressions applied to the groups of
    `kinds` (valgrind checks only the loss records it shows or counts as errors).
    `allocations`: for an export that reads no more than the replay (`exports.from_replay`);
    `snapshots`: the moments it asks of the replay too (`exports.replay_snapshots`); `page`: the
    accumulators run in the replay's run (`exports.page_pass`)."""
    from .progress import Progress

    key = (path, kinds, symbolize, allocations, snapshots)
    if _kept is not None and not suppressions and page is None and key in _kept:
        return _kept[key]  # read for an earlier report of `several`: its warnings said then
    progress = Progress(sys.stderr, f"{PROG}: reading {path}")
    try:
        analysis = analyze(path, symbolize=symbolize, progress=progress,
                           allocations=allocations, snapshots=snapshots,
                           also=page.accumulators if page is not None else None)
    finally:
        progress.done()
    for warning in analysis.warnings():
        _say(f"warning: {warning}")
    if suppressions:
        from .suppressions import apply as apply_suppressions

        apply_suppressions(analysis, suppressions, kinds)
    elif _kept is not None:
        _kept[key] = analysis
    return analysis


#: the analyses made while `several` runs, by (dump, kinds, symbolize): none otherwise
_kept: dict[tuple[str, frozenset[str], bool, bool, Plan | None], Analysis] | None = None


def several(*argvs: list[str]) -> tuple[int, int]:
    """`memdump-analyze ARGV` for each ARGV in turn, as `main` runs it, each dump read once for
    them all (scripts/memdump.sh --report --json FILE: the text report, then the JSON one). Stops
    at the first that fails: (its number from 1, its exit status); (0, 0) when none failed."""
    global _kept
    _kept = {}
    try:
        for number, argv in enumerate(argvs, 1):
            code = main(argv)
            if code != EXIT_OK:
                return number, code
        return 0, EXIT_OK
    finally:
        _kept = None


def several_compacting(dumps: list[str], *argvs: list[str]) -> tuple[tuple[int, int], list[str]]:
    """`several(*argvs)` while DUMPS are compacted beside it (compactfile.compacting):
    scripts/memdump.sh's reports and compaction in one analyser, without a second start-up.
    Returns `several`'s result and, for each dump, what its compaction said."""
    from .compactfile import compacting

    said: list[str] = []
    with compacting(dumps, said):
        result = several(*argvs)
        sys.stdout.flush()  # the reports shown before the compaction's end is waited for
    return result, said


def _suppressions(args: argparse.Namespace) -> list[Suppression]:
    """The suppression files' entries; an empty list (not None) when none was given."""
    if not args.suppressions:
        return []
    from .suppressions import load_all

    return load_all(args.suppressions)


def _gen_suppressions(analysis: Analysis) -> SuppressionOf:
    from .gensupp import suppression_text
    from .suppressions import group_names

    names = group_names(analysis, analysis.leaks)

    def text(group: Group, number: int) -> str:
        return suppression_text(group, f"memdump-leak-{number}-{group.leak_kind or 'leak'}",
                                names)

    return text


def _run(args: argparse.Namespace) -> int:
    if args.compact or args.text:
        from .convert import convert

        return convert(args.dump, args.output, compact=args.compact, say=_say)
    if args.format in TRANSCODED:
        return _transcode(args)
    if args.by_tag or args.phases or args.growth or args.heap_map:
        return _run_tags(args)
    from .leaktext import DEFAULT_SHOW_KINDS
    from .report import dumps_json, render_json, render_text

    show_kinds = _kind_option(args, "--show-leak-kinds", DEFAULT_SHOW_KINDS)
    error_kinds = _kind_option(args, "--errors-for-leak-kinds", DEFAULT_ERROR_KINDS)
    suppressions = _suppressions(args)
    replayed = args.format in _EXPORTS and from_replay(args.format)
    # massif's snapshots taken by the analysis's replay when its SEQs can be known before it
    snapshots = replay_snapshots(args.format, args.dump) if args.base is None else None
    # and the page's accumulators run in the analysis's replay, when they can be made before it
    page = page_pass(args.format, args.dump, not args.no_symbolize) if args.base is None \
        else None
    analysis = _load(args.dump, suppressions, show_kinds | error_kinds, not args.no_symbolize,
                     replayed or snapshots is not None, snapshots, page)
    if args.suppressions and analysis.suppressed_groups is None:
        analysis.suppressed_groups = []
    if args.format in vgcompat.FORMATS:  # docs/valgrind-compat.md
        path, text, failing = vgcompat.report(args, analysis, show_kinds, error_kinds)
        return _write(path, text, verdict(args.fail_on_leak, failing, analysis,
                                          fail_on_error=args.fail_on_error, say=_say))
    if (args.fail_on_leak and analysis.leak_kinds is None
            and args.errors_for_leak_kinds is not None and error_kinds != set(_ALL_KINDS)):
        _say("warning: the dump has no pointer scan: --fail-on-leak counts every leaked block, "
             "whatever --errors-for-leak-kinds says")
    if args.metric is not None and args.format != "collapsed":
        raise _UsageError(f"--metric is an option of --format collapsed, not {args.format}")
    if args.format in _EXPORTS:
        return _run_export(args, analysis, suppressions, show_kinds | error_kinds, replayed,
                           snapshots, page)
    if args.base is not None:
        raise _UsageError(f"--base needs --format {', '.join(_EXPORTS)} (the leak report's "
                          "difference is `memdump-analyze diff BASE NEW`)")
    gen = _gen_suppressions(analysis) if args.gen_suppressions else None
    if args.format == "sarif":
        from .sarif import render_sarif

        text = dumps_json(render_sarif(analysis, show_leak_kinds=show_kinds,
                                       error_kinds=error_kinds, root=args.sarif_root,
                                       information_uri=args.sarif_information_uri))
    elif args.format == "json":
        text = dumps_json(render_json(analysis, show_runtime=args.show_runtime,
                                      max_frames=args.max_frames, top=args.top,
                                      show_leak_kinds=show_kinds, suppression_of=gen))
    else:
        color = args.output is None and colour_wanted(sys.stdout.isatty())
        text = render_text(
            analysis,
            show_runtime=args.show_runtime,
            max_frames=args.max_frames,
            top=args.top,
            color=color,
            show_leak_kinds=show_kinds,
            show_runtime_frames=args.show_runtime_frames,
            suppression_of=gen,
        )
    code = verdict(args.fail_on_leak, failing_blocks(analysis, error_kinds) > 0, analysis,
                   fail_on_error=args.fail_on_error, say=_say)
    return _write(args.output, text, code)


def _transcode(args: argparse.Namespace) -> int:
    """--format heaptrack: the dump's events in another tool's file, not analysed."""
    from .heaptrackfile import write

    if args.output is None:
        raise _UsageError(f"--format {args.format} writes a file: give -o FILE")
    if args.base is not None:
        raise _UsageError(f"--format {args.format} takes no --base: "
                          f"{FORMATS[args.format].no_base}")
    write(args.dump, args.output, symbolize=not args.no_symbolize)
    return 0


def _run_export(args: argparse.Namespace, analysis: Analysis, suppressions: list[Suppression],
                kinds: frozenset[str], replayed: bool, snapshots: Plan | None,
                page: PagePass | None) -> int:
    """--format pprof|collapsed|massif: binary pprof only to a file or a pipe."""
    from .exports import ExportError, export

    if not FORMATS[args.format].text and args.output is None and sys.stdout.isatty():
        raise _UsageError(f"--format {args.format} writes binary data: give -o FILE, or "
                          "redirect the output")
    base = None
    if args.base is not None:
        base = _load(args.base, suppressions, kinds, not args.no_symbolize, replayed)
    try:
        data = export(args.format, analysis, base, metric=args.metric or next(iter(METRICS)),
                      symbolize=not args.no_symbolize, snapshots=snapshots, page=page)
    except ExportError as e:
        raise _UsageError(str(e)) from None
    failing = failing_blocks(analysis, _kind_option(args, "--errors-for-leak-kinds",
                                                    DEFAULT_ERROR_KINDS)) > 0
    return _write(args.output, data, verdict(args.fail_on_leak, failing, analysis,
                                             fail_on_error=args.fail_on_error, say=_say))


def _run_diff(args: argparse.Namespace) -> int:
    from .diff import diff, render_diff_json, render_diff_text
    from .leaktext import DEFAULT_SHOW_KINDS
    from .report import dumps_json

    show_kinds = _kind_option(args, "--show-leak-kinds", DEFAULT_SHOW_KINDS)
    error_kinds = _kind_option(args, "--errors-for-leak-kinds", DEFAULT_ERROR_KINDS)
    suppressions = _suppressions(args)
    kinds = show_kinds | error_kinds
    base, new = _load(args.base, suppressions, kinds), _load(args.new, suppressions, kinds)
    result = diff(base, new, show_kinds)
    if args.format == "json":
        text = dumps_json(render_diff_json(result, args.max_frames))
    else:
        text = render_diff_text(result, args.max_frames)
    code = verdict(args.fail_on_leak, bool(result.failing(error_kinds)), base, new, say=_say)
    return _write(args.output, text, code)


def _view_runner(view: str) -> Callable[[argparse.Namespace], int]:
    from .views.cli import run_view

    def run(args: argparse.Namespace) -> int:
        text, warnings = run_view(view, args)
        for warning in warnings:
            _say(f"warning: {warning}")
        return _write(args.output, text, EXIT_OK)
    return run


def _run_tags(args: argparse.Namespace) -> int:
    from .growth import growth, growth_json, growth_text
    from .heapmap import HeapMapError, heap_map, heap_map_json, heap_map_text
    from .report import dumps_json
    from .tagphases import phases_json, phases_text, tags_and_phases, tags_json, tags_text
    from .views import tags_with_series

    if args.format not in ("text", "json"):
        raise _UsageError("--by-tag, --phases, --growth and --heap-map are text or json, not "
                          f"--format {args.format}")
    if args.heap_map:
        try:
            found = heap_map(args.dump, args.at, blocks=False)  # text and JSON: the regions
        except HeapMapError as exc:
            raise _UsageError(str(exc)) from None
        text = (dumps_json(heap_map_json(found, args.dump)) if args.format == "json"
                else heap_map_text(found, args.dump))
        return _write(args.output, text, EXIT_OK)
    if args.growth:
        sites = growth(args.dump)
        text = (dumps_json(growth_json(sites, args.dump, args.top, args.max_frames))
                if args.format == "json" else
                growth_text(sites, args.dump, args.top, args.max_frames))
        return _write(args.output, text, EXIT_OK)
    if args.by_tag:
        result, series = tags_with_series(args.dump)
        text = (dumps_json(tags_json(result, args.dump, series)) if args.format == "json"
                else tags_text(result, args.dump, series))
    else:
        result = tags_and_phases(args.dump)
        text = (dumps_json(phases_json(result, args.dump, args.max_frames))
                if args.format == "json" else phases_text(result, args.dump, args.max_frames))
    return _write(args.output, text, EXIT_OK)


def _write(output: str | None, text: str | bytes, code: int) -> int:
    data = text.encode("utf-8") if isinstance(text, str) else text
    if output is None:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        except BrokenPipeError:
            # the reader went away (`| head`): nothing more to say
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return code
    try:
        with open(output, "wb") as f:
            f.write(data)
    except OSError as e:
        raise DumpError(output, None, f"cannot write the report ({e.strerror or e})") from None
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # `diff` first is the subcommand; a dump named diff is ./diff
    if argv[:1] == ["diff"]:
        args = build_diff_parser().parse_args(argv[1:])
        run = _run_diff
    elif argv[:1] and argv[0] in VIEW_NAMES:  # a view: the same rule as diff
        from .views.cli import build_view_parser

        view = argv[0]
        args = build_view_parser(view).parse_args(argv[1:])
        run = _view_runner(view)
    else:
        args = build_parser().parse_args(argv)
        run = _run
    dump = getattr(args, "dump", None)
    if isinstance(dump, str) and not getattr(args, "compact", False):
        from .compactfile import compacting, pending

        if pending(dump):  # GDB left it to its first report: compacted while this one reads
            said: list[str] = []
            with compacting([dump], said):
                code = _main(args, run)
                sys.stdout.flush()  # the report shown before the compaction's end is waited for
            for line in said:
                _say(line)
            return code
    return _main(args, run)


def _main(args: argparse.Namespace, run: Callable[[argparse.Namespace], int]) -> int:
    """`run(args)`, its failures turned into one line and an exit status."""
    try:
        return run(args)
    except (DumpError, SuppressionError) as e:
        _say(str(e))
        return EXIT_BAD_INPUT
    except _UsageError as e:
        _say(f"error: {e}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except Exception as e:  # the one place that turns any failure into a line
        if os.environ.get("MEMDUMP_DEBUG", "") not in ("", "0"):
            raise
        _say(
            f"internal error: {type(e).__name__}: {e} "
            "(run with MEMDUMP_DEBUG=1 for the traceback)"
        )
        return EXIT_BAD_INPUT
