"""`--format html --base BASE`: the page of two runs' difference (docs/exports.md, "html"): the
summary with both runs' figures and the change, both runs' heaps over time on one chart, flame
graphs of the difference (as pprof's -base: what grew red, what shrank green), the leaks the new
run has that the base has not or that grew (`memdump-analyze diff`'s), the new run's heap map and
heap errors."""

from __future__ import annotations

from html import escape
from typing import Any

from ..diff import DiffEntry, diff
from ..leaktext import KIND_NAMES
from ..model import Analysis
from .charts import (
    BASE_LINE,
    CHART_LINE,
    RSS_LINE,
    Line,
    by_ms,
    human_bytes,
    rss_chart,
    rss_line,
    xy_chart,
)
from .collapsed import METRICS
from .flame import diff_flame_svg
from .html import errors, flames, heap_map_section, page, row, stack_text, timeline_of
from .profile import HeapProfile, difference

__all__ = ["render_html_diff"]

#: the RSS of the base run, dashed beside the new run's
_BASE_RSS = "#f5b041"


def _figures(a: Analysis, series: dict[str, Any]) -> list[tuple[str, int | None]]:
    return [("events", a.events), ("allocated bytes", a.allocated_bytes),
            ("allocations", a.allocations), ("peak heap bytes", a.peak_bytes),
            ("peak RSS bytes", series["peak_rss_bytes"]), ("leaked bytes", a.leaked_bytes),
            ("leaked blocks", a.leaked_blocks), ("heap errors", a.error_count),
            ("fragmentation at the end, %",
             None if series["end_fragmentation"] is None
             else round(100 * series["end_fragmentation"]))]


def _summary(new: Analysis, base: Analysis, ours: dict[str, Any],
             theirs: dict[str, Any]) -> str:
    head = "<tr><th></th><th>base</th><th>new</th><th>change</th></tr>"
    out = [row("program", escape(base.program or "?"), escape(new.program or "?"), ""),
           row("dump", escape(base.path), escape(new.path), "")]
    for (name, b), (_, n) in zip(_figures(base, theirs), _figures(new, ours), strict=True):
        if b is None and n is None:
            continue
        change = "" if b is None or n is None else f"{n - b:+,}"
        out.append(row(escape(name), "-" if b is None else f"{b:,}", "-" if n is None
                       else f"{n:,}", change, numeric=(1, 2, 3)))
    return "<table>" + head + "".join(out) + "</table>"


def _xs(series: dict[str, Any], clocked: bool) -> list[float]:
    return [p["ms"] if clocked else p["seq"] for p in series["points"]]


def _chart(ours: dict[str, Any], theirs: dict[str, Any]) -> str:
    """Both runs' live heaps over ms or events, and below, on their own axis, their RSS when
    both have clock samples."""
    clocked = by_ms(ours) and by_ms(theirs)
    xs, base_xs = _xs(ours, clocked), _xs(theirs, clocked)
    lines = [Line("new: live heap bytes", CHART_LINE, [p["heap_bytes"] for p in ours["points"]]),
             Line("base: live heap bytes", BASE_LINE,
                  [p["heap_bytes"] for p in theirs["points"]], xs=base_xs)]
    rss = [*rss_line(ours, xs, "new: RSS bytes", RSS_LINE),
           *rss_line(theirs, base_xs, "base: RSS bytes", _BASE_RSS)]
    titles = [f"new run, event {p['seq']:,}" + (f", {p['ms']:,} ms" if clocked else "")
              + f": heap {p['heap_bytes']:,} bytes" for p in ours["points"]]
    label = "milliseconds since the recording began" if clocked else "events"
    note = (f'<p class="note">Peak heap: base {theirs["peak_bytes"]:,} bytes, new '
            f'{ours["peak_bytes"]:,} ({ours["peak_bytes"] - theirs["peak_bytes"]:+,}).</p>')
    return "\n".join([xy_chart(xs, lines, height=220, x_label=label, y_text=human_bytes,
                               titles=titles) + note,
                      *rss_chart(rss, label, ours.get("rss_note") or "RSS is the whole "
                                 "process's", [*xs, *base_xs])])


def _new_leaks(entries: list[DiffEntry]) -> str:
    if not entries:
        return '<p class="note">The new run leaks nothing the base did not.</p>'
    head = ("<tr><th>status</th><th>kind</th><th>base bytes</th><th>new bytes</th>"
            "<th>base blocks</th><th>new blocks</th><th>allocated at</th></tr>")
    return '<table class="leaks">' + head + "".join(
        row(e.status, escape(KIND_NAMES.get(e.group.leak_kind or "", "leaked")),
            f"{e.base_bytes:,}", f"{e.group.bytes:,}", f"{e.base_blocks:,}",
            f"{e.group.blocks:,}", f'<div class="stack">{escape(stack_text(e.group.stack))}'
            "</div>", numeric=(2, 3, 4, 5))
        for e in entries) + "</table>"


def render_html_diff(new: HeapProfile, base: HeapProfile, *, symbols: bool = True) -> str:
    a, b = new.analysis, base.analysis
    ours, theirs = timeline_of(new), timeline_of(base)
    change = difference(new, base)
    leaks = diff(b, a)
    what = ": the new run minus the base (red grew, green shrank)"
    return page(f"memdump report: {a.program or a.path} against {b.path}", [
        "<h2>Summary</h2>", _summary(a, b, ours, theirs),
        "<h2>Memory over time</h2>", _chart(ours, theirs),
        *flames(diff_flame_svg(change, METRICS["leaked-bytes"], "leaks", "bytes leaked"),
                diff_flame_svg(change, METRICS["peak-bytes"], "peak", "bytes live at the peak"),
                what),
        "<h2>Leaks new or grown since the base</h2>", _new_leaks(leaks.added + leaks.grown),
        "<h2>Heap map of the new run</h2>", heap_map_section(new, ours, symbols),
        "<h2>Heap errors of the new run</h2>", errors(a.errors, a.error_count)])
