"""`memdump-analyze lifetimes DUMP`: per allocating stack, how long its blocks lived (in events,
and in milliseconds when the dump has clock samples), and the stacks that freed them. A block never
freed lives to the end of the dump, and is counted apart as well."""

from __future__ import annotations

from typing import Any

from .common import (
    Group,
    Options,
    Side,
    counted,
    envelope,
    heading,
    minus,
    more_lines,
    plural,
    ranked,
    signed,
    stack_json,
    stack_lines,
)
from .stream import LIFE_EXACT

__all__ = ["FREE_STACKS", "NEEDS", "build", "quantiles"]

#: the parts of the pass this view needs (stream.PARTS)
NEEDS: frozenset[str] = frozenset(("lifetimes",))

#: the free stacks shown per group, most blocks first
FREE_STACKS = 5


def quantiles(hist: dict[int, int]) -> dict[str, int] | None:
    """min, median (the lower one) and max of a histogram value -> count."""
    n = sum(hist.values())
    if not n:
        return None
    keys = sorted(hist)
    want = (n - 1) // 2
    seen = 0
    median = keys[-1]
    for k in keys:
        seen += hist[k]
        if seen > want:
            median = k
            break
    return {"min": keys[0], "median": median, "max": keys[-1]}


def _range(q: dict[str, int] | None, unit: str) -> str:
    if q is None:
        return f"- {unit}"
    return f"{q['min']:,} / {q['median']:,} / {q['max']:,} {unit}"


def build(side: Side, base: Side | None, opts: Options) -> tuple[dict[str, Any], list[str]]:
    """The view's JSON and its text lines."""
    p = side.profile
    groups = side.groups
    diff = base is not None
    if base is not None:
        groups = minus(groups, base.groups, ("allocations", "frees", "live_blocks"))
    shown, more = ranked(groups, ("allocations", "frees"), opts.top)
    body: dict[str, Any] = {
        "end_seq": p.last_seq,
        "end_ms": p.last_ms if p.clocked else None,
        "exact_below": LIFE_EXACT,
        "stacks": [],
        "more_stacks": more,
    }
    end = f"event {p.last_seq:,}" + (f", {p.last_ms:,} ms" if p.clocked else "")
    lines = [heading("lifetimes", side, base),
             f"min / median / max; blocks never freed live to the end ({end}); lifetimes of "
             f"{LIFE_EXACT:,} events or more are rounded down to 6 significant bits (1/32)"]
    for g in shown:
        row, text = _group(g, p.clocked, diff, opts)
        body["stacks"].append(row)
        lines += text
    lines += more_lines(more)
    return envelope("lifetimes", side, base, body), lines


def _group(g: Group, clocked: bool, diff: bool, opts: Options) -> tuple[dict[str, Any], list[str]]:
    s = g.stats
    events = quantiles(s.lifetimes)
    ms = quantiles(s.lifetimes_ms) if clocked else None
    frees = sorted(g.freed_by.values(), key=lambda r: (-r[1], [(f.function or "", f.line or 0)
                                                              for f in r[0]]))
    shown, more = frees[:FREE_STACKS], max(0, len(frees) - FREE_STACKS)
    row = {
        "blocks": s.allocations,
        "freed": s.frees,
        "never_freed": s.live_blocks,
        "events": events,
        "ms": ms,
        "freed_by": [{"blocks": n, "stack": stack_json(frames, opts.max_frames)}
                     for frames, n in shown],
        "more_freed_by": more,
    }
    text = ["", f"{counted(s.allocations, 'block', diff)} "
            f"({signed(s.frees, diff)} freed, {signed(s.live_blocks, diff)} never freed) "
            f"lived {_range(events, 'events')}"
            + (f", {_range(ms, 'ms')}" if clocked else "") + ", allocated"]
    text += stack_lines(g.stack, opts.max_frames)
    for frames, n in shown:
        text.append(f"  {plural(n, 'block')} freed")
        text += stack_lines(frames, opts.max_frames, indent="      ")
    if more:
        text.append(f"  ... {plural(more, 'more free stack')}")
    return row, text
