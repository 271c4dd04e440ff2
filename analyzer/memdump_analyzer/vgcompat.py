"""valgrind memcheck's output from a leak report (`--format valgrind`, `--format valgrind-xml`):
what `memdump --leak-check=full ./app` writes where valgrind would, for the tools that read
valgrind (CTest's `ctest -T memcheck`, valgrind-ci, IDEs). docs/valgrind-compat.md.

This module is the command line's side: the options, valgrind's file names (`%p`, `%q{VAR}`) and
the report's exit verdict. What the output says is vgmodel.py's (the errors, loss records and
figures), the stacks vgframes.py's (valgrind's view of them), the writers vgtext.py (valgrind
3.19's text) and vgxml.py (its XML, protocol 4).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import Analysis
    from .vgmodel import VgOptions

__all__ = ["FORMATS", "add_options", "expand_path", "options", "report"]

#: the report formats of this module
FORMATS = ("valgrind", "valgrind-xml")


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
    """The VgOptions of a parsed command line (cli.py's argparse.Namespace). (The models are
    imported here: the leak report's command line loads none of them.)"""
    from .vgframes import NUM_CALLERS
    from .vgmodel import VgOptions

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


def report(args, analysis: Analysis, show_kinds: frozenset[str],  # noqa: ANN001
           error_kinds: frozenset[str]) -> tuple[str | None, str, bool]:
    """cli.py's --format valgrind and valgrind-xml: (the output file, -o with valgrind's `%p`
    and `%q{VAR}` expanded; the text; whether the ERROR SUMMARY counts errors, which
    --fail-on-leak turns into exit status 1)."""
    from .dumpfile import DumpError
    from .vgmodel import counted_errors

    opts = options(args, show_kinds, error_kinds)
    try:
        path = None if args.output is None else expand_path(args.output, analysis.pid)
    except ValueError as e:
        raise DumpError(args.output, None, f"-o {e}") from None
    ppid = int(analysis.info["ppid"]) if analysis.info.get("ppid", "").isdigit() else None
    if args.format == "valgrind-xml":
        from .vgxml import render_xml

        text = render_xml(analysis, opts, ppid)
    else:
        from .vgtext import render_text

        text = render_text(analysis, opts)
    return path, text, counted_errors(analysis, opts) > 0
