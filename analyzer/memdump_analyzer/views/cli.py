"""`memdump-analyze VIEW [options] DUMP`: the command line of the views (cli.py dispatches)."""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any

from ..progress import Progress
from ..report import dumps_json
from . import VIEWS, load, shows_stacks
from .common import Options

__all__ = ["build_view_parser", "run_view"]

PROG = "memdump-analyze"
#: the rows a view shows by default: the stacks that matter most, not hundreds of them
DEFAULT_TOP = 10

_WHAT = {
    "peak": "What was live at the moment of the peak live heap, by allocating stack, and when.",
    "hotspots": "The stacks that allocate most often, and those that allocate the most bytes.",
    "temporary": "Temporary allocations by stack: blocks freed with no other heap operation of "
                 "their thread in between (heaptrack's definition).",
    "lifetimes": "Per allocating stack, how long its blocks lived, and the stacks that freed "
                 "them.",
    "timeline": "The live heap, and the process's RSS, over the recording.",
    "sizes": "The allocation size histogram, in power-of-two buckets.",
}


def _count(minimum: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value
    return parse


def build_view_parser(view: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} {view}",
        description=_WHAT[view] + " (docs/views.md)",
        epilog="Exit status: 0 view written; 2 bad dump or usage.",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format (text)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the view to FILE")
    parser.add_argument("--top", type=_count(0), metavar="N",
                        help=f"show only the first N rows ({DEFAULT_TOP}; 0: all): stacks; "
                        "timeline: the N highest points (all by default); sizes: the N buckets "
                        "with most blocks (all by default)")
    parser.add_argument("--base", metavar="BASE",
                        help="show the view of DUMP minus that of BASE, stacks matched by "
                        "function and file:line (as `diff` matches leak groups)")
    parser.add_argument("--max-frames", type=_count(1), metavar="N",
                        help="show at most N frames of a stack")
    if view == "hotspots":
        parser.add_argument("--sort", choices=("calls", "bytes", "both"), default="both",
                            help="order by allocations (calls), by bytes, or list both (both)")
    if view == "timeline":
        parser.add_argument("--points", type=_count(2), default=200, metavar="N",
                            help="at most N points (200); each is the highest live heap of an "
                            "equal span of events, so the peak is exact")
    parser.add_argument("--no-symbolize", action="store_true",
                        help="do not symbolise frames the dump has no symbols for (addr2line)")
    parser.add_argument("dump", metavar="DUMP", help="the dump file written by `memdump`")
    return parser


def _side(view: str, path: str, options: Options, symbols: bool) -> tuple[Any, list[str]]:
    progress = Progress(sys.stderr, f"{PROG}: reading {path}")
    make = getattr(VIEWS[view], "accumulator", None)
    try:
        return load(path, points=options.points, symbols=symbols, progress=progress,
                    compute=VIEWS[view].NEEDS, also=[make()] if make is not None else [])
    finally:
        progress.done()


def run_view(view: str, args: argparse.Namespace) -> tuple[str, list[str]]:
    """The view's text or JSON, and the warnings to say. Raises `DumpError`."""
    collecting = gc.isenabled()
    gc.disable()  # no reference cycles are made; the collector would walk every stack's figures
    try:
        return _run_view(view, args)
    finally:
        if collecting:
            gc.enable()


def _run_view(view: str, args: argparse.Namespace) -> tuple[str, list[str]]:
    top = args.top
    if top is None:
        top = None if view in ("timeline", "sizes") else DEFAULT_TOP
    options = Options(top=top or None, max_frames=args.max_frames,
                      points=getattr(args, "points", 200), sort=getattr(args, "sort", "both"))
    symbols = not args.no_symbolize and shows_stacks(view)
    side, warnings = _side(view, args.dump, options, symbols)
    base = None
    if args.base is not None:
        base, more = _side(view, args.base, options, symbols)
        warnings += [f"{args.base}: {w}" for w in more]
    body, lines = VIEWS[view].build(side, base, options)
    if args.format == "json":
        return dumps_json(body), warnings
    return "\n".join(line.rstrip() for line in lines) + "\n", warnings

