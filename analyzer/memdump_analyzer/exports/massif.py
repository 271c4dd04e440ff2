"""`--format massif`: the live heap over time in massif's out file format (valgrind's
`massif.out.PID`), for `ms_print` and massif-visualizer. docs/exports.md, "massif".

Time is massif's `--time-unit=B`: the bytes allocated and freed so far. Snapshots as massif takes
them by default: about 100 regular ones, every 10th detailed (with its heap tree), the peak's
detailed and marked `peak`, and the last. A heap tree lists the live bytes by allocation stack,
innermost frame first, children largest first; children under 1% of the snapshot's heap fold into
one `in N places, all below massif's threshold (1.00%)` line, as massif's default --threshold=1.0.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from typing import Any

from ..dumpfile import Frame
from .profile import (
    DETAILED_EVERY,
    SNAPSHOTS,
    HeapProfile,
    Snapshot,
    StackKey,
    difference,
)

__all__ = ["THRESHOLD", "base_desc", "growth_profile", "render_massif"]

#: massif's default --threshold, in percent of the snapshot's heap
THRESHOLD = 1.0
ROOT = "(heap allocation functions) malloc/new/new[], --alloc-fns, etc."
_SEP = "#-----------"


def _frame_text(f: Frame | None) -> str:
    """A tree node's text as massif writes it: `0xPC: function (file:line)`, `(in module)`
    without a line, `???` without a function."""
    if f is None:
        return "(no stack: it could not be read)"
    name = f.function if f.function is not None else "???"
    if f.file is not None and f.line:
        where = f"({os.path.basename(f.file)}:{f.line})"
    else:
        where = f"(in {f.module})" if f.module is not None else ""
    return _one_line(" ".join(x for x in (f"0x{f.pc:X}:", name, where) if x))


def _one_line(text: str) -> str:
    return text.replace("\n", " ").replace("\r", " ")


#: a stack in a heap tree: its keys and frames from the root down (one None each without
#: frames: the stack could not be read), and its live bytes
_Stack = tuple[tuple[Any, ...], tuple[Any, ...], int]


def _stacks(profile: HeapProfile, tree: dict[StackKey, int]) -> list[_Stack]:
    """The heap tree's stacks: the root, then each stack's frames, innermost first."""
    out = []
    for key, nbytes in tree.items():
        frames = profile.frames_of(key)
        out.append((key, frames, nbytes) if frames else ((None,), (None,), nbytes))
    return out


def _lines(stacks: list[_Stack], depth: int, value: int, total: int, out: list[str],
           text: str) -> None:
    """The node `depth` frames deep that `stacks` pass through (`value` bytes): its line, then
    its children's, largest first (first seen first among equals), those under the threshold
    folded into one line. Only the children shown are grouped further: the many small stacks
    are counted once each, not made a node a frame."""
    groups: dict[Hashable, list[Any]] = {}  # key of the next frame -> [bytes, frame, stacks]
    for stack in stacks:
        keys, frames, nbytes = stack
        if depth < len(keys):
            group = groups.get(keys[depth])
            if group is None:
                group = groups[keys[depth]] = [0, frames[depth], []]
            group[0] += nbytes
            group[2].append(stack)
    kids = sorted(groups.values(), key=lambda g: -g[0])  # stable: first seen first
    shown = [g for g in kids if total and g[0] * 100 / total >= THRESHOLD]
    below = kids[len(shown):]  # the children are largest first: those shown are a prefix
    count = len(shown) + (1 if below else 0)
    out.append(f"{' ' * depth}n{count}: {value} {text}")
    for nbytes, frame, inner in shown:
        _lines(inner, depth + 1, nbytes, total, out,
               _frame_text(frame if isinstance(frame, Frame) else None))
    if below:
        places = "1 place," if len(below) == 1 else f"{len(below)} places, all"
        out.append(f"{' ' * (depth + 1)}n0: {sum(g[0] for g in below)} in {places} "
                   f"below massif's threshold ({THRESHOLD:.2f}%)")


def render_massif(profile: HeapProfile, desc: str | None = None) -> str:
    a = profile.analysis
    # one line each, whatever the paths hold
    events = f"{a.events:,} heap event{'s' if a.events != 1 else ''}"
    out = [_one_line(desc) if desc is not None else
           f"desc: memdump-analyze --format massif {_one_line(a.path)} ({events})",
           f"cmd: {_one_line(a.program or a.path)}", "time_unit: B"]
    for n, shot in enumerate(profile.snapshots):
        kind = "empty" if shot.tree is None else ("peak" if shot.peak else "detailed")
        out += [_SEP, f"snapshot={n}", _SEP, f"time={shot.time}", f"mem_heap_B={shot.live_bytes}",
                "mem_heap_extra_B=0", "mem_stacks_B=0", f"heap_tree={kind}"]
        if shot.tree is not None:
            stacks = _stacks(profile, shot.tree)
            _lines(stacks, 0, sum(n for _, _, n in stacks), shot.live_bytes, out, ROOT)
    return "\n".join(out) + "\n"


def growth_profile(new: HeapProfile, base: HeapProfile) -> HeapProfile:
    """`--base`: the runs aligned on their events (NEW's k-th regular snapshot, k% through its
    events, against BASE's at the same share of its own), each snapshot the bytes by stack NEW
    has more of than BASE then, only the stacks that grew (massif has no negative sizes), on
    NEW's time; every 10th, the last and the largest detailed, the largest marked the peak.
    Both profiles must have every regular snapshot detailed (`collect(detailed_every=1)`)."""
    mine, theirs = _regular(new), _regular(base)
    shots = [Snapshot(0, 0, 0)]
    for k, shot in enumerate(mine[1:], 1):
        other = theirs[round(k * (len(theirs) - 1) / max(1, len(mine) - 1))]
        grew = {key: n - (other.tree or {}).get(key, 0) for key, n in (shot.tree or {}).items()}
        tree = {key: n for key, n in grew.items() if n > 0}
        shots.append(Snapshot(shot.seq, shot.time, sum(tree.values()), tree))
    top = max(range(len(shots)), key=lambda i: (shots[i].live_bytes, -i))
    for i, shot in enumerate(shots):
        if i == top and shot.live_bytes:
            shot.peak = True
        elif i % DETAILED_EVERY and i != len(shots) - 1 or not shot.tree:
            shot.tree = None
    out = difference(new, base)
    out.snapshots = shots
    return out


def _regular(profile: HeapProfile) -> list[Snapshot]:
    """The regular snapshots (every N events, and the last): the peak's only when it is one of
    them (the pass then took it in the regular one's place)."""
    last = profile.analysis.last_seq
    every = max(1, last // SNAPSHOTS)
    return [s for s in profile.snapshots if not s.peak or s.seq % every == 0 or s.seq == last]


def base_desc(new: HeapProfile, base: HeapProfile) -> str:
    """The `desc:` line of `--base`'s file: what its sizes are."""
    return (f"desc: memdump-analyze --format massif --base {base.analysis.path} "
            f"{new.analysis.path}: the bytes by stack the new run had more of than the base at "
            "the same share of each run's events; the stacks that shrank are left out")
