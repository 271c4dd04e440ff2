"""A late attach's recording and the heap walk together (docs/heapwalk.md, "After a late
attach"): the walk's blocks that hold no block the recording knows were allocated before it
began, their origin unknown; one pointer scan over both sets, so that an old block pointing at a
new one makes it reachable and the other way round; its kinds split between the two sets, the
old blocks' with their types (the dump's `ob` records; the analyser's olderblocks groups them by
type, at a stop as in the offline report). After the in-process recorder was loaded into the
process, a block not in use at the load and not recorded was allocated since by what the
recorder does not see (the dynamic linker, for the load itself among others): not before the
recording, in neither set."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import replace

from .. import reach

__all__ = ["attached_scan", "unrecorded"]


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
