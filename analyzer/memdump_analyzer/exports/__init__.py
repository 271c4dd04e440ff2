"""Exports to the tools people use (`memdump-analyze --format F`): pprof, collapsed stacks,
massif, and one HTML page. Each module renders a `HeapProfile` (profile.py); `RENDERERS` holds
the renderer of each export of `formats.FORMATS`, the one table of `--format`. docs/exports.md is
their spec."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..formats import EXPORTS, FORMATS
from .metrics import METRICS

if TYPE_CHECKING:
    from ..model import Analysis
    from .profile import HeapProfile, Plan

# Each renderer is imported when its format is asked for: the command line builds its --format
# choices from formats.FORMATS without loading the HTML page's views and charts.

__all__ = ["METRICS", "RENDERERS", "ExportError", "PagePass", "export", "from_replay",
           "page_pass", "replay_snapshots"]


class ExportError(Exception):
    """A request an export cannot meet: one line for the user."""


def _pprof(profile: HeapProfile, base: HeapProfile | None, metric: str,
           symbols: bool) -> bytes:
    from .pprof import render_pprof
    from .profile import difference

    return render_pprof(profile if base is None else difference(profile, base))


def _collapsed(profile: HeapProfile, base: HeapProfile | None, metric: str,
               symbols: bool) -> bytes:
    from .collapsed import render_collapsed

    return render_collapsed(profile, metric, base).encode("utf-8", "surrogateescape")


def _massif(profile: HeapProfile, base: HeapProfile | None, metric: str,
            symbols: bool) -> bytes:
    from .massif import base_desc, growth_profile, render_massif

    if base is not None:
        return render_massif(growth_profile(profile, base), base_desc(profile, base)).encode(
            "utf-8", "surrogateescape")
    return render_massif(profile).encode("utf-8", "surrogateescape")


def _html(profile: HeapProfile, base: HeapProfile | None, metric: str,
          symbols: bool) -> bytes:
    from .html import render_html
    from .htmldiff import render_html_diff

    page = render_html(profile, symbols=symbols) if base is None else \
        render_html_diff(profile, base, symbols=symbols)
    return page.encode("utf-8", "surrogateescape")


#: each export's renderer: (profile, base's profile or None, metric, symbols) -> bytes
RENDERERS: dict[str, Callable[[HeapProfile, HeapProfile | None, str, bool], bytes]] = {
    "pprof": _pprof, "collapsed": _collapsed, "massif": _massif, "html": _html,
}


def from_replay(name: str) -> bool:
    """Whether export `name` writes only what the analysis's replay counts (the allocations,
    the leaks and the blocks at the peak by stack): then the dump is read once, by the analysis
    (`analyze(allocations=True)`), and not again by the exports' pass. Massif and the page take
    snapshots of the heap over time, at events known only after the replay."""
    return name in ("pprof", "collapsed")


def replay_snapshots(name: str, path: str) -> Plan | None:
    """The snapshots export `name` (without --base) asks of the analysis's replay of the dump at
    `path`, so that the dump is read once: massif's, when the dump's last SEQ is known before it
    is read (`dumptail.end_seq`: its `end` record is its last); None otherwise (the exports' pass
    then reads the dump again, after the analysis)."""
    if name != "massif":
        return None
    from ..dumptail import end_seq
    from .profile import snapshot_plan

    last = end_seq(path)
    return None if last is None else snapshot_plan(last)


class PagePass:
    """The HTML page's accumulators made before the analysis, for its replay's run (`analyze(
    also=PagePass.accumulators)`): the page reads the dump once. Its snapshots are planned from
    the dump's last SEQ, which its tail tells (`page_pass`)."""

    def __init__(self, last_seq: int, symbolize: bool) -> None:
        from .html import PageOutputs
        from .htmltrees import by_stack_every_of
        from .profile import PlannedProfileOutput, snapshot_plan

        detailed = by_stack_every_of(last_seq)
        self.profile = PlannedProfileOutput(snapshot_plan(last_seq, detailed_every=detailed),
                                            detailed, symbolize)
        self.page = PageOutputs(None, symbolize, maps=True, trees=True)
        self.accumulators = [self.profile, *self.page.outputs]

    def collected(self, analysis: Analysis) -> HeapProfile | None:
        """The page's profile from the figures the analysis's run computed (its accumulators
        given them), or None when the run took no pass (the Python replay; a dump the library
        left) or planned another dump's snapshots: the caller reads the dump again."""
        if analysis.pass_figures is None or not self.profile.attach(analysis):
            return None
        request, figures = analysis.pass_figures
        self.page.name_peak(analysis)
        request.deliver(figures)
        profile = self.profile.profile
        profile.page = self.page
        return profile


def page_pass(name: str, path: str, symbolize: bool) -> PagePass | None:
    """For `--format html` (one run's page), the accumulators its analysis can run in its
    replay's run, when the dump's last SEQ is known before it is read (`dumptail.end_seq`);
    None otherwise."""
    if name != "html":
        return None
    from ..dumptail import end_seq

    last = end_seq(path)
    return None if last is None else PagePass(last, symbolize)


def _needs_peak(name: str, metric: str, base: bool) -> bool:
    """Whether export `name` writes the blocks at the peak: pprof's --base (a difference of
    every figure: `nonzero` keeps a stack whose peak alone differs), collapsed's peak-bytes."""
    return (name == "pprof" and base) or (name == "collapsed" and metric == "peak-bytes")


def _collect(name: str, analysis: Analysis, symbolize: bool, detailed: int,
             maps: bool, replayed: bool = False, peak: bool = False,
             trees: bool = False, snapshots: Plan | None = None) -> HeapProfile:
    """The figures of `analysis`'s dump by stack; for the HTML page (`maps`: with the heap maps,
    `trees`: with its trees' figures) its series and heap maps too, gathered in the same pass (one
    read of the dump). `replayed`: the export needs only the replay's figures (`from_replay`;
    `peak`: the peak's too; `snapshots`: the moments it was asked for), taken from the analysis
    when it kept them."""
    from .html import PageOutputs
    from .profile import collect, from_replay

    if replayed:
        profile = from_replay(analysis, symbolize=symbolize, peak=peak, snapshots=snapshots)
        if profile is not None:
            return profile
    page = PageOutputs(analysis, symbolize, maps=maps, trees=trees) if name == "html" else None
    profile = collect(analysis, symbolize=symbolize, detailed_every=detailed,
                      also=page.outputs if page else ())
    profile.page = page
    return profile


def export(name: str, analysis: Analysis, base: Analysis | None = None, *,
           metric: str = "leaked-bytes", symbolize: bool = True,
           snapshots: Plan | None = None, page: PagePass | None = None) -> bytes:
    """The bytes of export `name` of `analysis` (minus `base`'s, when given). `snapshots`: the
    moments `analysis` was asked for (`replay_snapshots`); `page`: the accumulators its run was
    given (`page_pass`). Raises ExportError, or DumpError when a dump cannot be read."""
    from .profile import DETAILED_EVERY

    fmt = FORMATS[name]
    if base is not None and fmt.no_base is not None:
        takes = " and ".join(n for n in EXPORTS if FORMATS[n].no_base is None)
        raise ExportError(f"--format {name} has no --base: {fmt.no_base} ({takes} take --base)")
    if metric not in METRICS:
        raise ExportError(f"unknown metric '{metric}' ({', '.join(METRICS)})")
    # massif's --base compares every snapshot of the two runs: all of them with their stacks
    detailed = 1 if base is not None and name == "massif" else DETAILED_EVERY
    snapshots = snapshots if base is None else None
    replayed = from_replay(name) or snapshots is not None
    peak = _needs_peak(name, metric, base is not None)
    one_page = base is None and name == "html"
    if one_page:  # the page of one run stacks its live heap by stack at its snapshots
        from .htmltrees import by_stack_every
        detailed = by_stack_every(analysis)
    profile = page.collected(analysis) if page is not None and one_page else None
    if profile is None:
        profile = _collect(name, analysis, symbolize, detailed, maps=True, replayed=replayed,
                           peak=peak, trees=one_page, snapshots=snapshots)
    old = _collect(name, base, symbolize, detailed, maps=False, replayed=from_replay(name),
                   peak=peak) if base is not None else None
    collecting = gc.isenabled()
    gc.disable()  # the renderers make trees of many nodes and no reference cycle: the collector
    try:  # would walk the reader's frames and the stacks again and again
        return RENDERERS[name](profile, old, metric, symbolize)
    finally:
        if collecting:
            gc.enable()
