"""`memdump-analyze hotspots DUMP`: the stacks that allocate most often, and those that allocate
the most bytes in total (`--sort calls|bytes`; both by default)."""

from __future__ import annotations

from typing import Any

from .common import (
    Group,
    Options,
    Side,
    counted,
    envelope,
    group_lines,
    heading,
    minus,
    percent,
    plural,
    ranked,
    stack_json,
)

__all__ = ["NEEDS", "build"]

#: the parts of the pass this view needs (stream.PARTS)
NEEDS: frozenset[str] = frozenset()

_ORDERS = {
    "calls": ("most allocations", ("allocations", "allocated_bytes")),
    "bytes": ("most bytes allocated", ("allocated_bytes", "allocations")),
}


def build(side: Side, base: Side | None, opts: Options) -> tuple[dict[str, Any], list[str]]:
    """The view's JSON and its text lines."""
    p = side.profile
    groups = side.groups
    if base is not None:
        groups = minus(groups, base.groups, ("allocations", "allocated_bytes"))
    diff = base is not None
    body: dict[str, Any] = {"allocations": p.allocations, "allocated_bytes": p.allocated_bytes}
    if diff:
        body["base"] = {"allocations": base.profile.allocations,  # type: ignore[union-attr]
                        "allocated_bytes": base.profile.allocated_bytes}  # type: ignore[union-attr]
    lines = [heading("hotspots", side, base),
             f"{plural(p.allocations, 'allocation')}, {plural(p.allocated_bytes, 'byte')} "
             "allocated in all"]
    if diff:
        b = base.profile  # type: ignore[union-attr]
        lines.append(f"base: {plural(b.allocations, 'allocation')}, "
                     f"{plural(b.allocated_bytes, 'byte')}")
    orders = ("calls", "bytes") if opts.sort == "both" else (opts.sort,)
    for order in orders:
        title, fields = _ORDERS[order]
        shown, more = ranked(groups, fields, opts.top, nonzero=True)
        body[f"by_{order}"] = [_row(g, opts) for g in shown]
        body[f"more_by_{order}"] = more
        lines += ["", f"== {title} =="]
        lines += group_lines(((_title(g.stats, p, diff), g.stack) for g in shown), more,
                             opts.max_frames)
    return envelope("hotspots", side, base, body), lines


def _row(g: Group, opts: Options) -> dict[str, Any]:
    return {"allocations": g.stats.allocations, "bytes": g.stats.allocated_bytes,
            "stack": stack_json(g.stack, opts.max_frames)}


def _title(s: Any, p: Any, diff: bool) -> str:  # noqa: ANN401 - a group's stats, the profile
    share = "" if diff else (
        f" ({percent(s.allocations, p.allocations)} of allocations, "
        f"{percent(s.allocated_bytes, p.allocated_bytes)} of bytes)")
    return (f"{counted(s.allocations, 'allocation', diff)}, "
            f"{counted(s.allocated_bytes, 'byte', diff)}{share}, at")
