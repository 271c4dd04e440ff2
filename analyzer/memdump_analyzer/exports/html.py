"""`--format html`: one self-contained page (no network, no external script, style or font): the
summary, the live heap over time as an SVG chart, flame graphs of the leaks and of the peak that
zoom into a clicked frame, the leak table with kinds and stacks, the heap errors.
docs/exports.md, "html"."""

from __future__ import annotations

from html import escape
from typing import Any

from ..dumpfile import Frame
from ..heapmap import HeapMapOutput, heap_maps, percent
from ..heappass import Accumulator, Figures
from ..leaktext import KIND_NAMES, frame_text
from ..model import Analysis, ErrorReport, Group
from ..passapi import AT_PEAK
from ..views import Options, Side, load
from ..views import timeline as timeline_view
from ..views.stream import ProfileOutput
from .charts import CHART_FILL, CHART_LINE, memory_charts, tag_colours
from .collapsed import METRICS
from .flame import WIDTH, flame_svg
from .htmltreejs import TREE_SCRIPT, TREE_STYLE
from .htmltrees import size_histogram, stacks_over_time, trees_section
from .mapsvg import colours_of, legend, map_svg
from .profile import HeapProfile

#: the parts of the pass (passapi.PARTS) the trees and the histogram read
TREE_PARTS = frozenset(("temporary", "sizes"))

__all__ = ["CHART_FILL", "CHART_LINE", "TREE_PARTS", "PageOutputs", "errors", "flames",
           "heap_map_section", "page", "render_html", "row", "sizes_of", "stack_text",
           "timeline_of"]

#: the page's script: frame labels fitted to their width, and the zoom (click a frame; the
#: address's #zoom-GRAPH-N opens a graph zoomed, so that a zoomed view can be shared); then the
#: trees of stacks (htmltreejs.py)
_SCRIPT = """
"use strict";
const CHAR = 7, W = WIDTH_PX;
function label(f, px) {
  const t = f.querySelector("text"), n = f.dataset.n, fit = Math.floor((px - 6) / CHAR);
  t.textContent = fit < 3 ? "" : (n.length <= fit ? n : n.slice(0, fit - 2) + "..");
}
function place(f, x, w) {
  const r = f.querySelector("rect");
  r.setAttribute("x", (x * W).toFixed(2));
  r.setAttribute("width", (w * W).toFixed(2));
  f.querySelector("text").setAttribute("x", (x * W + 3).toFixed(2));
  label(f, w * W);
}
function zoom(svg, i) {
  const g = svg.querySelector('g.f[data-i="' + i + '"]');
  if (!g) return false;
  const x = +g.dataset.x, w = +g.dataset.w, d = +g.dataset.d, e = 1e-9;
  for (const f of svg.querySelectorAll("g.f")) {
    const fx = +f.dataset.x, fw = +f.dataset.w, fd = +f.dataset.d;
    const inside = fd >= d && fx >= x - e && fx + fw <= x + w + e;
    const below = fd < d && fx <= x + e && fx + fw >= x + w - e;
    f.style.display = inside || below ? "" : "none";
    f.classList.toggle("faded", below);
    if (inside) place(f, (fx - x) / w, fw / w);
    if (below) place(f, 0, 1);
  }
  return true;
}
for (const svg of document.querySelectorAll("svg.flame")) {
  for (const f of svg.querySelectorAll("g.f")) {
    label(f, +f.dataset.w * W);
    f.addEventListener("click", () => {
      zoom(svg, f.dataset.i);
      history.replaceState(null, "", "#zoom-" + svg.id + "-" + f.dataset.i);
    });
  }
}
const m = /^#zoom-([a-z]+)-([0-9]+)$/.exec(location.hash);
if (m && document.getElementById(m[1])) zoom(document.getElementById(m[1]), m[2]);
""".replace("WIDTH_PX", str(WIDTH)) + TREE_SCRIPT + """console.log("memdump report ready");
"""

_STYLE = """
body { font: 14px sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; } td, th { padding: 2px 10px 2px 0; text-align: left;
vertical-align: top; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.leaks td, table.errors td { border-top: 1px solid #ddd; }
.stack { font: 12px monospace; white-space: pre-wrap; }
svg.flame g.f { cursor: pointer; } svg.flame text { font: 11px monospace; fill: #000;
pointer-events: none; } svg.flame g.faded rect { opacity: 0.5; }
svg.flame g.f:hover rect { stroke: #000; stroke-width: 0.5; }
.chart text, .heapmap text { font: 11px sans-serif; fill: #444; } .note { color: #666; }
h3 { font-size: 1em; margin: 1em 0 0.2em; } .legend { margin: 0.3em 0; font-size: 12px; }
.key { margin-right: 1.2em; white-space: nowrap; } .sw { display: inline-block; width: 12px;
height: 12px; margin-right: 4px; vertical-align: -1px; border: 1px solid #999; }
pre.map { font: 11px monospace; color: #444; } svg.heapmap rect.cell:hover { stroke: #000; }
svg.sizes g.bar:hover rect { stroke: #000; }
.legend .key { display: inline-block; max-width: 1000px; overflow: hidden; text-overflow: ellipsis;
vertical-align: top; }
""" + TREE_STYLE


def stack_text(frames: tuple[Frame, ...]) -> str:
    if not frames:
        return "(no stack: it could not be read)"
    return "\n".join(("at " if i == 0 else "by ") + frame_text(f) for i, f in enumerate(frames))


def row(*cells: str, numeric: tuple[int, ...] = ()) -> str:
    return "<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                            for i, c in enumerate(cells)) + "</tr>"


def _summary(a: Analysis) -> str:
    rows = [("program", escape(a.program or "?")), ("dump", escape(a.path)),
            ("recorded", escape(a.info.get("start", "?"))),
            ("events", f"{a.events:,}"),
            ("allocated", f"{a.allocated_bytes:,} bytes in {a.allocations:,} blocks"),
            ("peak", f"{a.peak_bytes:,} bytes in {a.peak_blocks:,} blocks"
                     + (f" at event {a.peak_seq:,}" if a.peak_seq else "")),
            ("leaked", f"{a.leaked_bytes:,} bytes in {a.leaked_blocks:,} blocks"),
            ("runtime", f"{a.runtime_bytes:,} bytes in {a.runtime_blocks:,} blocks (the C/C++ "
                        "runtime's own)")]
    if a.leak_kinds is not None:
        rows += [(KIND_NAMES.get(k, k), f"{b:,} bytes in {n:,} blocks")
                 for k, (b, n) in a.leak_kinds.items() if n or k != "unknown"]
    rows.append(("heap errors", f"{a.error_count:,}"))
    return "<table>" + "".join(row(escape(k), v) for k, v in rows) + "</table>"


def _leaks(groups: list[Group]) -> str:
    if not groups:
        return '<p class="note">No leaks.</p>'
    head = "<tr><th>kind</th><th>bytes</th><th>blocks</th><th>indirect bytes</th>" \
           "<th>allocated at</th></tr>"
    return '<table class="leaks">' + head + "".join(
        row(escape(KIND_NAMES.get(g.leak_kind or "", "leaked")), f"{g.bytes:,}",
             f"{g.blocks:,}", f"{g.indirect_bytes:,}",
             f'<div class="stack">{escape(stack_text(g.stack))}</div>', numeric=(1, 2, 3))
        for g in groups) + "</table>"


def errors(found: list[ErrorReport], count: int) -> str:
    if not found:
        return '<p class="note">No heap errors.</p>'
    head = "<tr><th>error</th><th>event</th><th>call</th><th>pointer</th><th>at</th></tr>"
    rows = "".join(row(escape(e.kind), f"{e.seq:,}", escape(e.op), f"0x{e.pointer:x}",
                        f'<div class="stack">{escape(stack_text(e.stack))}</div>', numeric=(1,))
                   for e in found)
    more = "" if count == len(found) else f'<p class="note">{count - len(found):,} more.</p>'
    return '<table class="errors">' + head + rows + "</table>" + more


class SeriesOutput(ProfileOutput):
    """The page's series: the `timeline` view's JSON (docs/views.md), made in the exports' pass;
    with `trees`, the pass computes the stacks' temporary allocations (the trees' column) and the
    allocation sizes (`profile.sizes`, the histogram) too."""

    def __init__(self, trees: bool = False) -> None:
        super().__init__(timeline_view.NEEDS | (TREE_PARTS if trees else frozenset()))
        self.json: dict[str, Any] = {}

    def finish(self, figures: Figures) -> None:
        super().finish(figures)
        side = Side(figures.reader.path, self.profile, {}, dict(figures.reader.info))
        self.json = timeline_view.build(side, None, Options())[0]


class PageOutputs:
    """What the page shows besides the exports' figures, gathered in their pass (heappass.py):
    the series, and (`maps`) the heap map at the analysis's peak (the page's summary says when)
    and at the end; `trees`: the figures of the trees and the sizes' histogram (the page of one
    run)."""

    def __init__(self, a: Analysis | None, symbols: bool, maps: bool = True,
                 trees: bool = False) -> None:
        self.series = SeriesOutput(trees)
        self.maps = None
        if maps and a is not None:
            self.maps = HeapMapOutput([str(a.peak_seq or 0), "end"], symbols=symbols)
        elif maps:  # made before the analysis, run in its replay's (analyze(also=...)): its peak
            self.maps = HeapMapOutput(["peak", "end"], symbols=symbols, when={0: AT_PEAK})
        self.outputs: list[Accumulator] = [self.series] + ([self.maps] if self.maps else [])

    def name_peak(self, a: Analysis) -> None:
        """The map at the peak named as the page names it, by the analysis's peak's event
        (when it was made before the analysis: before its pass's figures are handed over)."""
        if self.maps is not None and self.maps.when.get(0) == AT_PEAK:
            self.maps.moments_at[0] = str(a.peak_seq or 0)


def timeline_of(profile: HeapProfile) -> dict[str, Any]:
    """The `timeline` view's JSON of the profile's dump (docs/views.md): the page's series,
    from the exports' pass when it gathered them."""
    if profile.page is not None:
        return profile.page.series.json
    side, _ = load(profile.analysis.path, symbols=False, compute=timeline_view.NEEDS)
    return timeline_view.build(side, None, Options())[0]


def heap_map_section(profile: HeapProfile, series: dict[str, Any], symbols: bool) -> str:
    """The heap map at the peak and at the end, coloured alike, with their text summaries."""
    a = profile.analysis
    if profile.page is not None and profile.page.maps is not None:
        peak, end = profile.page.maps.maps
    else:  # the analysis's peak: the page's summary says when
        peak, end = heap_maps(a.path, [str(a.peak_seq or 0), "end"], symbols=symbols)
    maps = [("At the peak", peak), ("At the end", end)]
    colours = colours_of((m for _, m in maps), tag_colours([t["tag"] for t in series["tags"]]))
    out = [legend(colours, [m for _, m in maps])]
    for title, m in maps:
        out += [f"<h3>{title} (event {m.seq:,}): fragmentation {percent(m.fragmentation)}, "
                f"largest free run {m.largest_free:,} of {m.free:,} free bytes</h3>",
                map_svg(m, colours, a.path)]
    return "\n".join(out)


def flames(leaks: str, at_peak: str, what: str = "") -> list[str]:
    """The two flame graphs' sections (`what`: said after their headings)."""
    click = '<p class="note">Click a frame to zoom into it, the bottom frame to zoom out.</p>'
    return ["<h2>Leaks by stack" + what + "</h2>",
            (click + leaks) if leaks else '<p class="note">No leaks.</p>',
            "<h2>Live at the peak by stack" + what + "</h2>",
            (click + at_peak) if at_peak else '<p class="note">No peak.</p>']


def page(title: str, body: list[str]) -> str:
    """The page: its head (title, style), `body`'s parts, the script."""
    title = escape(title)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{title}</title><style>{_STYLE}</style></head><body>", f"<h1>{title}</h1>",
        *body, f"<script>{_SCRIPT}</script>", "</body></html>"]) + "\n"


def render_html(profile: HeapProfile, *, symbols: bool = True) -> str:
    a = profile.analysis
    series = timeline_of(profile)
    return page(f"memdump report: {a.program or a.path}", [
        "<h2>Summary</h2>", _summary(a),
        "<h2>Memory over time</h2>", memory_charts(series),
        "<h2>Live heap by stack</h2>", stacks_over_time(profile),
        "<h2>Heap map</h2>", heap_map_section(profile, series, symbols),
        *flames(flame_svg(profile, METRICS["leaked-bytes"], "leaks", "bytes leaked"),
                flame_svg(profile, METRICS["peak-bytes"], "peak", "bytes live at the peak")),
        "<h2>Stacks</h2>", *trees_section(profile),
        "<h2>Allocation sizes</h2>", size_histogram(sizes_of(profile)),
        "<h2>Leaks</h2>", _leaks(a.leaks), "<h2>Heap errors</h2>",
        errors(a.errors, a.error_count)])


def sizes_of(profile: HeapProfile) -> dict[int, int]:
    """Requested size -> blocks allocated: the pass's, when it gathered them (`trees`), else
    read again with the `sizes` view's pass."""
    if profile.page is not None and "sizes" in profile.page.series.parts:
        return profile.page.series.profile.sizes
    side, _ = load(profile.analysis.path, symbols=False, compute=frozenset(("sizes",)))
    return side.profile.sizes
