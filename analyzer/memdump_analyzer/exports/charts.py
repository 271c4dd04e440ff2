"""The HTML report's charts over time, as SVG written by hand: the live heap, and the RSS on a chart
of its own (the `timeline` view's points, docs/views.md: a heap of a few MiB would sink to the
bottom of a scale that an RSS of tens of MiB sets), the fragmentation, each tag's live bytes
stacked, and with `--base` both runs'. Every point has a `<title>` with its exact figures; the
tick labels are anchored so that none runs past the chart's edges."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from ..tagphases import UNTAGGED
from .flame import WIDTH

__all__ = ["BASE_LINE", "CHART_FILL", "CHART_LINE", "FRAG_LINE", "RSS_LINE", "TAG_COLOURS",
           "Line", "OTHER", "by_ms", "human_bytes", "memory_charts", "rss_chart", "rss_line",
           "tag_colours", "xy_chart"]

CHART_FILL = "#9ab8e8"
CHART_LINE = "#2a5cb0"
RSS_LINE = "#e07b00"
FRAG_LINE = "#8e44ad"
BASE_LINE = "#3a9d5d"
#: distinct colours for the tags (and the heap map's stacks), grey being "the others"
TAG_COLOURS = ("#4e79a7", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7",
               "#9c755f", "#f28e2b", "#17becf")
OTHER = "#a0a0a0"
_MARGIN = 70  # pixels left of the chart for the labels of y
_RIGHT = 20


def human_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:,.0f} B"


@dataclass
class Line:
    """One series of a chart: its name (the legend), colour, values (one per x), and whether the
    area under it is filled (a stacked chart fills between it and the line below)."""

    name: str
    colour: str
    values: Sequence[float]
    fill: str | None = None
    #: its own x values (another run's), else the chart's
    xs: Sequence[float] | None = None


def xy_chart(xs: Sequence[float], lines: list[Line], *, height: int, x_label: str,
             y_text: Callable[[float], str], titles: Sequence[str], top: float | None = None,
             stacked: bool = False, css: str = "chart", x_range: Sequence[float] = ()) -> str:
    """An SVG chart of `lines` over `xs` (the first line's points carry `titles`, their
    exact figures, as hover text). `stacked`: each line is drawn on top of the ones before.
    `x_range`: x values the axis spans too (another chart's, to line the two up)."""
    if len(xs) < 2 or any(len(line.xs or xs) < 2 for line in lines):
        return '<p class="note">Too few points for a chart.</p>'
    every_x = [x for line in lines for x in (line.xs or ())] + list(xs) + list(x_range)
    x0, x1 = min(every_x), max(every_x)
    span = (x1 - x0) or 1
    bases = [0.0] * len(xs)
    tops: list[list[float]] = []
    for line in lines:
        ys = [b + v for b, v in zip(bases, line.values, strict=True)] if stacked \
            else list(line.values)
        tops.append(ys)
        if stacked:
            bases = ys
    high = top if top is not None else max((max(ys) for ys in tops), default=0) or 1
    w, h = WIDTH - _MARGIN - _RIGHT, height

    def pt(x: float, y: float) -> str:
        return f"{_MARGIN + (x - x0) / span * w:.2f},{h - y / high * (h - 10):.2f}"

    out = [f'<svg class="{css}" viewBox="0 0 {WIDTH} {h + 42}" width="{WIDTH}" '
           f'height="{h + 42}">']
    below = [0.0] * len(xs)
    for line, ys in zip(lines, tops, strict=True):
        points = " ".join(pt(x, y) for x, y in zip(line.xs or xs, ys, strict=True))
        if line.fill is not None:
            under = " ".join(pt(x, y) for x, y in reversed(list(zip(xs, below, strict=True))))
            out.append(f'<polygon points="{points} {under}" fill="{line.fill}"/>')
        out.append(f'<polyline points="{points}" fill="none" stroke="{line.colour}" '
                   f'stroke-width="2"><title>{escape(line.name)}</title></polyline>')
        if stacked:
            below = ys
    out += [f'<line x1="{_MARGIN}" y1="{h}" x2="{_MARGIN + w}" y2="{h}" stroke="#444"/>',
            f'<line x1="{_MARGIN}" y1="0" x2="{_MARGIN}" y2="{h}" stroke="#444"/>']
    for k in range(5):
        y = high * k / 4
        out.append(f'<text x="{_MARGIN - 4}" y="{h - y / high * (h - 10) + 4:.2f}" '
                   f'text-anchor="end">{escape(y_text(y))}</text>')
    ticks = 4 if span >= 4 else max(1, int(span))  # whole events or ms on a short axis
    for k in range(ticks + 1):
        x = x0 + span * k / ticks
        # the first and the last label start and end at their tick: centred, the last one ran
        # past the right edge and was clipped ("4,000,00")
        anchor = "start" if k == 0 else "end" if k == ticks else "middle"
        out.append(f'<text x="{_MARGIN + (x - x0) / span * w:.2f}" y="{h + 16}" '
                   f'text-anchor="{anchor}">{x:,.0f}</text>')
    out.append(f'<text x="{_MARGIN + w / 2:.0f}" y="{h + 34}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    first = tops[0] if tops else []
    for x, y, title in zip(xs, first, titles, strict=True):
        c = pt(x, y).split(",")
        out.append(f'<circle class="pt" cx="{c[0]}" cy="{c[1]}" r="3" fill="{lines[0].colour}">'
                   f'<title>{escape(title)}</title></circle>')
    out.append("</svg>")
    legend = "".join(f'<span class="key"><span class="sw" style="background:{line.colour}">'
                     f'</span>{escape(line.name)}</span>' for line in lines)
    return f'<div class="legend">{legend}</div>\n' + "\n".join(out)


def tag_colours(names: Sequence[str]) -> dict[str, str]:
    """Each tag's colour, in the order given: grey for `(untagged)`, the others in turn."""
    out: dict[str, str] = {}
    for name in names:
        out[name] = OTHER if name == UNTAGGED else TAG_COLOURS[
            sum(1 for n in out if n != UNTAGGED) % len(TAG_COLOURS)]
    return out


def by_ms(body: dict[str, Any]) -> bool:
    """Whether the points' x is milliseconds: when the dump has clock samples and they spread
    the points over 3 moments at least, and over a quarter as many moments as there are points.
    The recorder samples the clock at most every 10 ms: a run of a few tens of ms has a few
    moments for hundreds of points, columns of points rather than a line, and is drawn over its
    events."""
    points = body["points"]
    return body["clocked"] and len({p["ms"] for p in points}) >= max(3, len(points) // 4)


def _x(body: dict[str, Any]) -> tuple[list[float], str]:
    """The points' x: milliseconds (`by_ms`), else events."""
    if by_ms(body):
        return [p["ms"] for p in body["points"]], "milliseconds since the recording began"
    return [p["seq"] for p in body["points"]], "events"


def rss_line(body: dict[str, Any], xs: list[float], name: str, colour: str) -> list[Line]:
    """The RSS as a line over the points that have one (an RSS of 0 is not known: before the
    first clock sample, or not readable); none with fewer than 2."""
    known = [(x, p["rss_bytes"]) for x, p in zip(xs, body["points"], strict=True)
             if p["rss_bytes"]]
    if not body["clocked"] or len(known) < 2:
        return []
    return [Line(name, colour, [r for _, r in known], xs=[x for x, _ in known])]


def _title(p: dict[str, Any]) -> str:
    when = f"event {p['seq']:,}" + (f", {p['ms']:,} ms" if p["ms"] is not None else "")
    what = f"heap {p['heap_bytes']:,} bytes"
    if p["rss_bytes"] is not None:
        what += f", RSS {p['rss_bytes']:,} bytes"
    if p["fragmentation"] is not None:
        what += f", fragmentation {100 * p['fragmentation']:.2f}%"
    return f"{when}: {what}"


def rss_chart(lines: list[Line], x_label: str, note: str,
              x_range: Sequence[float] = ()) -> list[str]:
    """The RSS lines (`rss_line`'s) on a chart of their own, under a heading saying what the
    RSS holds (`note`), its x axis spanning `x_range` too (the heap chart's); nothing without
    a line."""
    if not lines:
        return []
    first = lines[0]
    titles = [f"RSS {r:,} bytes" for r in first.values]
    return ["<h3>Resident set (RSS)</h3>", f'<p class="note">{escape(note)}.</p>',
            xy_chart(list(first.xs or ()), lines, height=160, x_label=x_label,
                     y_text=human_bytes, titles=titles, x_range=x_range)]


def memory_charts(body: dict[str, Any]) -> str:
    """The `timeline` view's JSON (`body`) as charts: the heap, the RSS on its own axis (when
    the dump has clock samples, said to include the in-process recorder's memory), the
    fragmentation below in percent, the tags' live bytes stacked."""
    pts = body["points"]
    xs, x_label = _x(body)
    titles = [_title(p) for p in pts]
    lines = [Line("live heap bytes", CHART_LINE, [p["heap_bytes"] for p in pts], CHART_FILL)]
    out = [xy_chart(xs, lines, height=220, x_label=x_label, y_text=human_bytes, titles=titles)]
    if body["peak_seq"]:
        out.append(f'<p class="note">Peak: {body["peak_bytes"]:,} bytes after event '
                   f'{body["peak_seq"]:,}' + (f', {body["peak_ms"]:,} ms' if body["clocked"]
                                              else "") + ".</p>")
    out += rss_chart(rss_line(body, xs, "RSS bytes", RSS_LINE), x_label,
                     body.get("rss_note") or "RSS is the whole process's", xs)
    frag = [100 * (p["fragmentation"] or 0.0) for p in pts]
    out += ["<h3>Fragmentation</h3>",
            '<p class="note">The share of the heap that is free outside its largest free run: '
            "(the free bytes between the live blocks - the largest free run) / the heap's "
            "bytes, over all regions (the heap map's figure), sampled.</p>",
            xy_chart(xs, [Line("fragmentation %", FRAG_LINE, frag)], height=110,
                     x_label=x_label, y_text=lambda v: f"{v:.2f}%", titles=titles)]
    if body["tags"]:
        colours = tag_colours([t["tag"] for t in body["tags"]])
        tags = [Line(t["tag"], colours[t["tag"]], [v for _, v in t["series"]],
                     colours[t["tag"]]) for t in body["tags"]]
        tag_titles = [f"{title}; " + ", ".join(f"{t['tag']} {t['series'][i][1]:,}"
                                                for t in body["tags"])
                      for i, title in enumerate(titles)]
        out += ["<h3>Live bytes by tag</h3>",
                xy_chart(xs, tags, height=180, x_label=x_label, y_text=human_bytes,
                         titles=tag_titles, stacked=True)]
    return "\n".join(out)
