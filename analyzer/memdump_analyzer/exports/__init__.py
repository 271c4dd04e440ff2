"""Exports to the tools people use (`memdump-analyze --format F`): pprof, collapsed stacks,
massif, and one HTML page. Each module renders a `HeapProfile` (profile.py); `FORMATS` feeds the
command line's choices. docs/exports.md is their spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..model import Analysis
from .collapsed import METRICS, render_collapsed
from .html import render_html
from .massif import render_massif
from .pprof import render_pprof
from .profile import HeapProfile, collect, difference

__all__ = ["FORMATS", "METRICS", "ExportError", "export"]


class ExportError(Exception):
    """A request an export cannot meet: one line for the user."""


@dataclass(frozen=True)
class Format:
    """One export: how it renders, whether its bytes are text, why it takes no --base (None:
    it takes one)."""

    render: Callable[[HeapProfile, HeapProfile | None, str, bool], bytes]
    text: bool
    no_base: str | None
    help: str


def _pprof(profile: HeapProfile, base: HeapProfile | None, metric: str,
           symbols: bool) -> bytes:
    return render_pprof(profile if base is None else difference(profile, base))


def _collapsed(profile: HeapProfile, base: HeapProfile | None, metric: str,
               symbols: bool) -> bytes:
    return render_collapsed(profile, metric, base).encode("utf-8", "surrogateescape")


def _massif(profile: HeapProfile, base: HeapProfile | None, metric: str,
            symbols: bool) -> bytes:
    return render_massif(profile).encode("utf-8", "surrogateescape")


def _html(profile: HeapProfile, base: HeapProfile | None, metric: str,
          symbols: bool) -> bytes:
    return render_html(profile, symbols=symbols).encode("utf-8", "surrogateescape")


FORMATS: dict[str, Format] = {
    "pprof": Format(_pprof, False, None, "gzip-compressed profile.proto for `go tool pprof`"),
    "collapsed": Format(_collapsed, True, None,
                        "folded stacks for flamegraph.pl, speedscope, inferno (--metric)"),
    "massif": Format(_massif, True, "it is the heap over one run's time, and two runs' times "
                     "do not line up", "valgrind massif's out file for ms_print"),
    "html": Format(_html, True, "it is one run's report (`memdump-analyze diff BASE NEW` "
                   "compares two runs' leaks)", "one self-contained page for a browser: summary, "
                   "heap over time, flame graphs, leaks, errors"),
}


def export(name: str, analysis: Analysis, base: Analysis | None = None, *,
           metric: str = "leaked-bytes", symbolize: bool = True) -> bytes:
    """The bytes of export `name` of `analysis` (minus `base`'s, when given). Raises
    ExportError, or DumpError when a dump cannot be read."""
    fmt = FORMATS[name]
    if base is not None and fmt.no_base is not None:
        takes = " and ".join(n for n, f in FORMATS.items() if f.no_base is None)
        raise ExportError(f"--format {name} has no --base: {fmt.no_base} ({takes} take --base)")
    if metric not in METRICS:
        raise ExportError(f"unknown metric '{metric}' ({', '.join(METRICS)})")
    profile = collect(analysis, symbolize=symbolize)
    old = collect(base, symbolize=symbolize) if base is not None else None
    return fmt.render(profile, old, metric, symbolize)
