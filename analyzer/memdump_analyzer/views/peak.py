"""`memdump-analyze peak DUMP`: what was live at the moment of the peak live heap, by allocating
stack, and when the peak happened (its event, and its time when the dump has clock samples)."""

from __future__ import annotations

from typing import Any

from .common import (
    Options,
    Side,
    counted,
    envelope,
    group_lines,
    heading,
    minus,
    ms_text,
    percent,
    plural,
    ranked,
    stack_json,
)

__all__ = ["NEEDS", "build"]

#: the parts of the pass this view needs (stream.PARTS)
NEEDS: frozenset[str] = frozenset()


def build(side: Side, base: Side | None, opts: Options) -> tuple[dict[str, Any], list[str]]:
    """The view's JSON and its text lines."""
    p = side.profile
    groups = side.groups
    if base is not None:
        groups = minus(groups, base.groups, ("peak_bytes", "peak_blocks"))
    shown, more = ranked(groups, ("peak_bytes", "peak_blocks"), opts.top, nonzero=True)
    summary: dict[str, Any] = {
        "peak_bytes": p.peak_bytes,
        "peak_blocks": p.peak_blocks,
        "seq": p.peak_seq,
        "ms": p.peak_ms,
    }
    if base is not None:
        b = base.profile
        summary["base"] = {"peak_bytes": b.peak_bytes, "peak_blocks": b.peak_blocks,
                           "seq": b.peak_seq, "ms": b.peak_ms}
    body = {
        "peak": summary,
        "stacks": [{"bytes": g.stats.peak_bytes, "blocks": g.stats.peak_blocks,
                    "stack": stack_json(g.stack, opts.max_frames)} for g in shown],
        "more_stacks": more,
    }
    diff = base is not None
    lines = [heading("peak", side, base)]
    if p.peak_seq is None:
        lines.append("no block was ever live")
    else:
        lines.append(f"peak: {plural(p.peak_bytes, 'byte')} in {plural(p.peak_blocks, 'block')} "
                     f"live after event {p.peak_seq:,}{ms_text(p.peak_ms)}")
    if diff:
        b = base.profile  # type: ignore[union-attr]
        lines.append(f"base peak: {plural(b.peak_bytes, 'byte')} in "
                     f"{plural(b.peak_blocks, 'block')} ({p.peak_bytes - b.peak_bytes:+,} bytes)")
    def title(s: Any) -> str:  # noqa: ANN401 - a group's stats
        share = "" if diff else f" ({percent(s.peak_bytes, p.peak_bytes)})"
        return (f"{counted(s.peak_bytes, 'byte', diff)} in "
                f"{counted(s.peak_blocks, 'block', diff)}{share} live at the peak, allocated")

    lines += group_lines(((title(g.stats), g.stack) for g in shown), more, opts.max_frames)
    return envelope("peak", side, base, body), lines
