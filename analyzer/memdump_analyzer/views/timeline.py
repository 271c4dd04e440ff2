"""`memdump-analyze timeline DUMP`: the live heap over the recording, and the process's RSS from
the clock samples (`c` records), as at most `--points` points (200): the highest and the lowest
live heap of each equal span of events, so that the peak is exact and a free phase falls as it
did. The RSS is the whole process's: with the in-process recorder, the recorder's own memory (its
window of the dump, its tables) is in it, and the view says so."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from ..heapmap import fragmentation, percent
from .common import Options, Side, envelope, heading, ms_text, plural

__all__ = ["NEEDS", "STACKS", "build"]

#: the parts of the pass this view needs (stream.PARTS)
NEEDS: frozenset[str] = frozenset(("timeline",))
#: it shows no stack: the dump's frames are not symbolised for it (views.VIEWS)
STACKS = False

_BAR = 40


#: what the RSS holds besides the program, by recorder (the dump's `i recorder`)
RSS_NOTES = {
    "in-process": "RSS is the whole process's, memdump's in-process recorder included (its "
                  "window of the dump, its tables)",
    "breakpoints": "RSS is the whole process's; the breakpoint recorder adds nothing to it",
}


def rss_note(info: dict[str, str]) -> str:
    """What the RSS series holds: the whole process, and the recorder's memory when it was in it
    (a dump older than format 1.3 does not say which recorder wrote it)."""
    return RSS_NOTES.get(info.get("recorder", ""), "RSS is the whole process's, memdump's "
                         "in-process recorder included if it recorded")


def _frag_at(frag: list[tuple[int, int, int, int]], seq: int) -> float | None:
    """The fragmentation of the last sample at or before event `seq`."""
    i = bisect_right(frag, (seq, 1 << 62, 0, 0)) - 1
    return None if i < 0 else round(fragmentation(*frag[i][1:]), 6)


def _points(side: Side, opts: Options) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
    """The points (`--top N`: the N highest, in order), how many were left out, and each tag's
    series at them."""
    p = side.profile
    pts = p.timeline
    keep = range(len(pts))
    if opts.top is not None and len(pts) > opts.top:
        keep = sorted(sorted(keep, key=lambda i: (-pts[i][1], i))[: opts.top])
    clocked = p.clocked
    points = [{"seq": seq, "ms": ms if clocked else None, "heap_bytes": heap,
               "rss_bytes": rss if clocked else None, "fragmentation": _frag_at(p.frag, seq)}
              for seq, heap, ms, rss in (pts[i] for i in keep)]
    tags = [{"tag": name, "series": [[pts[i][0], p.timeline_tags[i][t]] for i in keep]}
            for t, name in enumerate(p.tag_names)]
    return points, len(pts) - len(keep), tags


def _summary(side: Side) -> dict[str, Any]:
    p = side.profile
    return {"peak_bytes": p.peak_bytes, "peak_seq": p.peak_seq, "peak_ms": p.peak_ms,
            "peak_rss_bytes": p.peak_rss if p.clocked else None,
            "peak_rss_ms": p.peak_rss_ms if p.clocked else None,
            "end_seq": p.last_seq, "end_ms": p.last_ms if p.clocked else None,
            "end_bytes": p.live_bytes,
            "end_fragmentation": _frag_at(p.frag, p.last_seq),
            "rss_note": rss_note(side.info) if p.clocked else None,
            "fragmentation_samples": [list(f) for f in p.frag]}


def _table(side: Side, points: list[dict[str, Any]], tags: list[dict[str, Any]]) -> list[str]:
    clocked = side.profile.clocked
    widest = max((pt["heap_bytes"] for pt in points), default=0)
    names = [t["tag"] for t in tags]
    widths = [max(12, len(n)) for n in names]
    head = f"{'event':>12}" + (f"  {'ms':>10}" if clocked else "") + f"  {'heap bytes':>15}"
    head += f"  {'RSS bytes':>15}" if clocked else ""
    head += f"  {'frag':>7}" + "".join(f"  {n:>{w}}" for n, w in zip(names, widths, strict=True))
    lines = [head]
    for k, pt in enumerate(points):
        row = f"{pt['seq']:>12,}" + (f"  {pt['ms']:>10,}" if clocked else "")
        row += f"  {pt['heap_bytes']:>15,}"
        row += f"  {pt['rss_bytes']:>15,}" if clocked else ""
        frag = pt["fragmentation"]
        row += f"  {'-' if frag is None else percent(frag):>7}"
        row += "".join(f"  {t['series'][k][1]:>{w},}" for t, w in zip(tags, widths, strict=True))
        bar = round(_BAR * pt["heap_bytes"] / widest) if widest else 0
        lines.append(f"{row}  {'#' * bar}")
    return lines


def _said(side: Side) -> list[str]:
    p = side.profile
    lines = [f"peak heap: {plural(p.peak_bytes, 'byte')} after event {p.peak_seq or 0:,}"
             f"{ms_text(p.peak_ms)}; at the end (event {p.last_seq:,}): "
             f"{plural(p.live_bytes, 'byte')}"]
    if p.clocked and p.peak_rss:
        lines.append(f"peak RSS: {plural(p.peak_rss, 'byte')} at {p.peak_rss_ms or 0:,} ms; "
                     f"{rss_note(side.info)}")
    elif p.clocked:
        lines.append("RSS unknown (the recorder could not read it: RSS 0 in the clock samples)")
    else:
        lines.append("no clock samples in the dump: no times, no RSS")
    if p.frag:
        seq, free, largest, heap = p.frag[-1]
        lines.append(f"fragmentation at the end: {percent(fragmentation(free, largest, heap))} "
                     f"of the heap (free {plural(free, 'byte')} outside the largest run of "
                     f"{plural(largest, 'byte')}, in a heap of {plural(heap, 'byte')}); "
                     f"{plural(len(p.frag), 'sample')}")
    if p.tag_names:
        lines.append(f"tags: {', '.join(p.tag_names)} (live bytes at each point)")
    return lines


def build(side: Side, base: Side | None, opts: Options) -> tuple[dict[str, Any], list[str]]:
    """The view's JSON and its text lines (`--top N`: the N highest points, in order)."""
    points, more, tags = _points(side, opts)
    body: dict[str, Any] = {**_summary(side), "points": points, "more_points": more,
                            "tags": tags}
    lines = [heading("timeline", side, base), *_said(side), "", *_table(side, points, tags)]
    if more:
        lines += ["", f"... {plural(more, 'lower point')} left out (--top)"]
    if base is not None:
        base_points, base_more, base_tags = _points(base, opts)
        body["base"] = {**_summary(base), "points": base_points, "more_points": base_more,
                        "tags": base_tags}
        body["peak_bytes_delta"] = side.profile.peak_bytes - base.profile.peak_bytes
        lines += ["", f"base {base.path}:", *_said(base), "",
                  *_table(base, base_points, base_tags),
                  "", f"peak heap difference: {body['peak_bytes_delta']:+,} bytes"]
    return envelope("timeline", side, base, body), lines
