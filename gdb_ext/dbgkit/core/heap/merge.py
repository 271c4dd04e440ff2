"""A late attach's recording and the heap walk together (docs/heapwalk.md, "After a late
attach"): the walk's blocks that hold no block the recording knows were allocated before it
began, their origin unknown; one pointer scan over both sets, so that an old block pointing at a
new one makes it reachable and the other way round; the kinds of the old blocks grouped by type,
as without a recording. After the in-process recorder was loaded into the process, a block not in
use at the load and not recorded was allocated since by what the recorder does not see (the
dynamic linker, for the load itself among others): not before the recording, in neither set."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import replace

from .. import reach
from .report import group_labelled

__all__ = ["attached_scan", "split_records", "unknown_kinds", "unrecorded"]


def attached_scan(result: reach.ScanResult, older: dict[int, int],
                  label_of: dict[int, tuple[str, str]]) -> reach.ScanResult:
    """RESULT, a scan of the recorded blocks and the OLDER ones (address -> usable size), split:
    its kinds the recorded blocks' (an indirect block keeps its leader, old or not), its `older`
    the older blocks with their kinds and LABEL_OF's (type, how) (`?`, `unknown` without)."""
    kinds = result.kinds
    old = tuple((a, older[a], kinds[a], *reversed(label_of.get(a, ("?", "unknown"))))
                for a in sorted(older) if a in kinds)
    return replace(result, kinds={a: k for a, k in kinds.items() if a not in older},
                   heuristics={a: h for a, h in result.heuristics.items() if a not in older},
                   leaders={a: g for a, g in result.leaders.items() if a not in older},
                   older=old)


def unrecorded(blocks: Iterable[tuple[int, int]], recorded: dict[int, int],
               at_load: Iterable[int] | None = None) -> dict[int, int]:
    """The walk's BLOCKS ((address, usable size) in address order) that hold no block of
    RECORDED (address -> size), and, given AT_LOAD (the addresses in use when the recorder was
    loaded), were in use then: address -> usable size. A chunk the recorder saw freed
    and allocated again is in RECORDED (the recording's); one freed since the attach is free in
    the walk, so in neither; a recorded block inside a walked one (an aligned allocation's) makes
    it the recording's."""
    known = sorted(recorded)
    out = {}
    for start, size in blocks:
        k = bisect.bisect_left(known, start)
        if k < len(known) and known[k] < start + size:
            continue
        out[start] = size
    if at_load is not None:
        for start in set(out).difference(at_load):  # the few allocated since, unseen
            del out[start]
    return out


def split_records(records: Iterable[tuple[int, str, str | None]], unknown: dict[int, int],
                  ) -> tuple[list[tuple[int, str, str | None]], list[tuple[int, str, str | None]]]:
    """The scan's (address, kind, extra) records of every block: (the recorded blocks', the
    UNKNOWN blocks'), each in address order."""
    recorded, old = [], []
    for record in records:
        (old if record[0] in unknown else recorded).append(record)
    return recorded, old


def unknown_kinds(old: list[tuple[int, str, str | None]], unknown: dict[int, int],
                  label_of: dict[int, tuple[str, str]], engine: str) -> dict:
    """The `kinds` of the survey's document (survey.py) for the blocks of unknown origin: OLD
    their scan records, UNKNOWN their sizes, LABEL_OF their (type, how) by address."""
    totals = {k: [0, 0] for k in reach.KINDS}
    blocks = []
    for addr, kind, extra in old:
        size = unknown[addr]
        totals[kind][0] += size
        totals[kind][1] += 1
        blocks.append([addr, size, kind, extra])
    groups = group_labelled(blocks, (label_of.get(b[0], ("?", "unknown")) for b in blocks))
    return {"engine": engine, "totals": totals, "blocks": blocks, "groups": groups}
