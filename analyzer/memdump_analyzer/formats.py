"""Every `--format` of the leak report's command line, in one table: the report's own formats
(text, JSON, SARIF), rendered from the replay's `Analysis` by cli.py, and the exports
(docs/exports.md), rendered from the exports' `HeapProfile` by `exports.export`. The command
line's choices, its help and its errors are made from this table, without importing a renderer."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EXPORTS", "FORMATS", "TRANSCODED", "OutputFormat", "format_help"]


@dataclass(frozen=True)
class OutputFormat:
    """One `--format`: whether it is an export (its renderer in `exports.RENDERERS`, or, with
    `events`, a transcoder of the dump's events that needs no analysis: heaptrackfile.py), what
    the help says of it (None: its name says enough), whether its bytes are text, and why an
    export takes no --base (None: it takes one)."""

    export: bool
    help: str | None = None
    text: bool = True
    no_base: str | None = None
    events: bool = False


FORMATS: dict[str, OutputFormat] = {
    "text": OutputFormat(False),
    "json": OutputFormat(False),
    "sarif": OutputFormat(False, "SARIF 2.1.0 for code scanning, one result per leak group "
                          "--show-leak-kinds lists"),
    "valgrind": OutputFormat(False, "valgrind memcheck's text output (docs/valgrind-compat.md)"),
    "valgrind-xml": OutputFormat(False, "valgrind memcheck's XML, protocol 4"),
    "pprof": OutputFormat(True, "gzip-compressed profile.proto for `go tool pprof`", text=False),
    "collapsed": OutputFormat(True, "folded stacks for flamegraph.pl, speedscope, inferno "
                              "(--metric)"),
    "massif": OutputFormat(True, "valgrind massif's out file for ms_print (--base: the stacks "
                           "that grew, the runs aligned on their events)"),
    "html": OutputFormat(True, "one self-contained page for a browser: summary, heap and RSS "
                         "over time, heap map, flame graphs, leaks, errors (--base: the two "
                         "runs' difference)"),
    "heaptrack": OutputFormat(True, "heaptrack's data file for heaptrack_print and heaptrack_gui "
                              "(-o FILE; FILE.gz, FILE.zst compressed)", text=False,
                              no_base="heaptrack's own tools compare two files", events=True),
}

#: the exports' names rendered from the analysis, in the table's order
EXPORTS: tuple[str, ...] = tuple(name for name, fmt in FORMATS.items()
                                 if fmt.export and not fmt.events)
#: the exports written from the dump's events alone
TRANSCODED: tuple[str, ...] = tuple(name for name, fmt in FORMATS.items() if fmt.events)


def _described(export: bool) -> str:
    return "; ".join(f"{name}: {fmt.help}" for name, fmt in FORMATS.items()
                     if fmt.export == export and fmt.help is not None)


def format_help(default: str) -> str:
    """The help of `--format`: the report's formats, then the exports."""
    return (f"report format ({default}); {_described(False)}; the exports (docs/exports.md): "
            f"{_described(True)}")
