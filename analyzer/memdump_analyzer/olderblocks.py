"""The blocks from before a late attach's recording in the offline report: the dump's `ob`
records (format 2.7, written by the scan at the recording's end) grouped by leak kind and type as
GDB's `memdump leaks` groups them at a stop (docs/heapwalk.md, "After a late attach"), in the
same words, their leaks numbered on from the recorded leak groups; as text after the report, and
as the JSON `before_recording` (docs/report-format.md, 1.9). Bytes are the chunks' usable sizes
(the requests are not known); no stack is known. GDB's `memdump leaks` at a stop shows the blocks
its heap walk found through the same report (its `Heading`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .dumpdefs import OlderBlock
from .dumpformat import KIND_WORDS, KINDS
from .wording import plural

__all__ = ["NONE_RECORDED", "ORIGIN", "TITLE", "Heading", "json_section", "older_json",
           "older_text"]

#: the end of a leak line of a block allocated before the recording began
ORIGIN = ", allocated before the recording began"
TITLE = ("allocated before the recording began (the heap walked at the recording's end: blocks "
         "of unknown origin, grouped by type)")
_LEAK_KINDS = ("definite", "indirect", "possible")
#: the report's line when the recording knows no block (LIVE or LEAK: its words for them)
NONE_RECORDED = ("No {} among the blocks recorded (the blocks from before the recording follow "
                 "the summary).")
#: one group: [type, how, bytes, blocks]
_Group = list[Any]


@dataclass(frozen=True)
class Heading:
    """How the report introduces the blocks from before the recording: by default the dump's
    (TITLE, then their count and bytes); GDB's at a stop, its heap walk's: its TITLE, the walk's
    figures and problems as HEAD, and its `source`, `symbols`, `problems` and `engine` as KEYS of
    the JSON `before_recording`. Given, the blocks are shown even when there are none (the walk
    found none; a dump without `ob` records cannot tell that from a recording not attached)."""

    title: str = TITLE
    head: tuple[str, ...] | None = None
    keys: dict[str, Any] = field(default_factory=dict)


def _groups(older: Sequence[OlderBlock]) -> dict[str, list[_Group]]:
    """kind -> its groups by (type, how), largest first (bytes, blocks, then type)."""
    sums: dict[str, dict[tuple[str, str], list[int]]] = {}
    for b in older:
        entry = sums.setdefault(b.kind, {}).setdefault((b.type, b.how), [0, 0])
        entry[0] += b.size
        entry[1] += 1
    return {kind: sorted(([name, how, n, c] for (name, how), (n, c) in by_type.items()),
                         key=lambda g: (-g[2], -g[3], g[0]))
            for kind, by_type in sums.items()}


def _listed(older: Sequence[OlderBlock], kinds: frozenset[str] | None, top: int | None,
            first: int) -> tuple[list[list[Any]], list[_Group]]:
    """The numbered leak groups ([number, kind, type, how, bytes, blocks]), numbered from FIRST
    over every kind, those of KINDS only (None: all), and the reachable groups; the TOP first."""
    groups = _groups(older)
    leaks = sorted(((g, kind) for kind in _LEAK_KINDS for g in groups.get(kind, [])),
                   key=lambda e: (-e[0][2], -e[0][3], e[0][0]))
    numbered = [[n, kind, *g] for n, (g, kind) in enumerate(leaks, first)
                if kinds is None or kind in kinds]
    reachable = groups.get("reachable", []) if kinds is None or "reachable" in kinds else []
    if top is not None:
        numbered, reachable = numbered[:top], reachable[:max(0, top - len(numbered))]
    return numbered, reachable


def _blocks(n: int) -> str:
    return plural(n, "block")


def _totals(older: Sequence[OlderBlock]) -> dict[str, list[int]]:
    totals = {k: [0, 0] for k in KINDS}
    for b in older:
        totals[b.kind][0] += b.size
        totals[b.kind][1] += 1
    return totals


def older_text(older: Sequence[OlderBlock], kinds: frozenset[str] | None, top: int | None,
               first: int, *, title: str = TITLE, head: Sequence[str] | None = None,
               ) -> list[str]:
    """The lines of OLDER's blocks: TITLE, HEAD (GDB's: the walk's figures and problems; by
    default their count and bytes), the leaks of KINDS numbered from FIRST, the reachable
    groups, the totals of all."""
    numbered, reachable = _listed(older, kinds, top, first)
    if head is None:
        head = [f"blocks from before the recording: {_blocks(len(older))}, "
                f"{sum(b.size for b in older):,} bytes"]
    lines = [title, *head]
    lines += [f"LEAK {n}: {b:,} bytes in {_blocks(c)} of `{t}` ({h}), {KIND_WORDS[k]}{ORIGIN}"
              for n, k, t, h, b, c in numbered]
    lines += [f"reachable: {b:,} bytes in {_blocks(c)} of `{t}` ({h})"
              for t, h, b, c in reachable]
    totals = _totals(older)
    lines.append("totals: " + ", ".join(f"{KIND_WORDS[k]} {totals[k][0]:,} bytes in "
                                        f"{_blocks(totals[k][1])}" for k in KINDS))
    return lines


def older_json(older: Sequence[OlderBlock], kinds: frozenset[str] | None, top: int | None,
               first: int) -> dict[str, Any]:
    """`before_recording` (report format 1.9) for OLDER: GDB's keys, with `symbols` and
    `engine` null and `problems` empty, which GDB's walk at a stop fills in (the dump does not
    keep them)."""
    numbered, reachable = _listed(older, kinds, top, first)
    return {"source": "process", "symbols": None, "blocks": len(older),
            "bytes": sum(b.size for b in older), "engine": None, "origin": "unknown",
            "leaks": [{"number": n, "kind": k, "type": t, "how": h, "bytes": b, "blocks": c}
                      for n, k, t, h, b, c in numbered],
            "reachable": [{"type": t, "how": h, "bytes": b, "blocks": c}
                          for t, h, b, c in reachable],
            "totals": _totals(older), "problems": []}


def json_section(older: Sequence[OlderBlock], kinds: frozenset[str] | None, top: int | None,
                 first: int, heading: Heading | None = None) -> dict[str, Any]:
    """The report's `before_recording` key, with HEADING's keys; left out without older blocks
    and HEADING (so that the report of any other dump is what it was)."""
    if not older and heading is None:
        return {}
    keys = heading.keys if heading is not None else {}
    return {"before_recording": {**older_json(older, kinds, top, first), **keys}}
