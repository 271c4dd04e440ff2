"""`memdump-analyze temporary DUMP`: temporary allocations by stack, as heaptrack defines them: a
block freed with no other heap operation of its thread between its allocation and its free."""

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
    percent,
    plural,
    ranked,
    stack_json,
)

__all__ = ["NEEDS", "build"]

#: the parts of the pass this view needs (stream.PARTS)
NEEDS: frozenset[str] = frozenset(("temporary",))


def build(side: Side, base: Side | None, opts: Options) -> tuple[dict[str, Any], list[str]]:
    """The view's JSON and its text lines."""
    p = side.profile
    groups = side.groups
    diff = base is not None
    if base is not None:
        groups = minus(groups, base.groups, ("temporary", "temporary_bytes", "allocations"))
    shown, more = ranked(groups, ("temporary", "temporary_bytes"), opts.top, nonzero=True)
    body: dict[str, Any] = {
        "temporary": p.temporary,
        "temporary_bytes": p.temporary_bytes,
        "allocations": p.allocations,
        "stacks": [{"temporary": g.stats.temporary, "bytes": g.stats.temporary_bytes,
                    "allocations": g.stats.allocations,
                    "stack": stack_json(g.stack, opts.max_frames)} for g in shown],
        "more_stacks": more,
    }
    lines = [heading("temporary allocations", side, base),
             f"{plural(p.temporary, 'temporary allocation')} of "
             f"{plural(p.allocations, 'allocation')} ({percent(p.temporary, p.allocations)}), "
             f"{plural(p.temporary_bytes, 'byte')}"]
    if base is not None:
        b = base.profile
        body["base"] = {"temporary": b.temporary, "temporary_bytes": b.temporary_bytes,
                        "allocations": b.allocations}
        lines.append(f"base: {plural(b.temporary, 'temporary allocation')} of "
                     f"{plural(b.allocations, 'allocation')}, "
                     f"{plural(b.temporary_bytes, 'byte')}")
    def title(s: Any) -> str:  # noqa: ANN401 - a group's stats
        share = "" if diff else f" ({percent(s.temporary, s.allocations)} of its allocations)"
        return (f"{counted(s.temporary, 'temporary allocation', diff)}, "
                f"{counted(s.temporary_bytes, 'byte', diff)}{share}, at")

    lines += group_lines(((title(g.stats), g.stack) for g in shown), more, opts.max_frames)
    return envelope("temporary", side, base, body), lines
