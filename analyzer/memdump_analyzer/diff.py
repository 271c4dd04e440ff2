"""`memdump-analyze diff BASE NEW`: the leak groups of NEW that BASE has not, and those that grew.

Groups are matched by their stacks' shape, never by address, so that two runs of the same program
compare whatever ASLR did, and an edit that moves lines (a comment added at the top of a file)
moves no leak. The groups of one shape (the same functions in the same files, frame by frame) are
taken in the order of their lines on each side and aligned, as many pairs as possible (an edit
moves lines, it keeps their order), of those the nearest lines. So a leak whose line moved within
the same calls is the same leak. Leak kinds must agree when both dumps have a pointer scan; when
one has none (every live block is "leaked", of no kind), the groups are matched whatever their
kind, and all of them are compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .dumpfile import Frame
from .leaktext import KIND_NAMES, frame_json, frame_key, split_by_kind, stack_text
from .model import Analysis, Group
from .wording import plural

__all__ = ["DiffEntry", "LeakDiff", "diff", "frames_key", "match_groups", "render_diff_json",
           "render_diff_text", "stack_key"]

DIFF_FORMAT = "memdump-diff"
DIFF_VERSION = "1.0"


def frames_key(frames: Sequence[Frame]) -> tuple[tuple[str, ...], ...]:
    """What matches a stack across runs: its frames' functions and lines (modules and offsets
    where a frame has no line), not their addresses."""
    return tuple(frame_key(f) for f in frames)


def stack_key(g: Group) -> tuple[Any, ...]:
    """What matches a group across runs: its leak kind and its frames' functions and lines."""
    return (g.leak_kind, frames_key(g.stack))


@dataclass
class DiffEntry:
    """One group of NEW, with BASE's figures at the same stack (0 when BASE has none)."""

    group: Group
    base_bytes: int
    base_blocks: int

    @property
    def status(self) -> str:
        return "new" if self.base_blocks == 0 and self.base_bytes == 0 else "grew"


@dataclass
class LeakDiff:
    base: Analysis
    new: Analysis
    #: NEW's groups absent from BASE, then those bigger in NEW, each largest first
    added: list[DiffEntry]
    grown: list[DiffEntry]
    #: BASE's groups absent from NEW (fixed), largest first
    gone: list[Group]
    #: the groups were compared by leak kind (both dumps have a pointer scan)
    by_kind: bool = True

    def failing(self, kinds: frozenset[str]) -> list[DiffEntry]:
        """The added and grown groups of `kinds` (and of an unknown kind)."""
        return [e for e in (*self.added, *self.grown)
                if e.group.leak_kind is None or e.group.leak_kind in kinds
                or e.group.leak_kind == "unknown"]


def _merged(groups: Sequence[Group], by_kind: bool) -> list[Group]:
    """The groups of a run, one per stack key (two groups whose stacks differ only in addresses,
    e.g. two copies of an inlined function, add up; so do a stack's kinds without `by_kind`,
    and the sum has no kind)."""
    out: dict[tuple[Any, ...], Group] = {}
    for g in groups:
        key = stack_key(g) if by_kind else (None, frames_key(g.stack))
        first = out.get(key)
        if first is None:
            out[key] = g if by_kind else _sized(g, g.bytes, g.blocks, None)
        else:
            out[key] = _sized(first, first.bytes + g.bytes, first.blocks + g.blocks,
                              first.leak_kind)
    return list(out.values())


def _shape(g: Group) -> tuple[tuple[str, str], ...]:
    """The functions of a stack and their files (modules without a line), frame by frame."""
    return tuple(k[:2] for k in frames_key(g.stack))


def _positions(g: Group) -> tuple[int, ...]:
    """Where each frame is in its file, outermost first: its line, or its offset without one."""
    return tuple(f.line if f.file is not None and f.line else f.offset for f in reversed(g.stack))


def _distance(a: Group, b: Group) -> int:
    """How far apart two stacks of one shape are: the sum of their frames' line differences (a
    frame without a line: 1 when its offset differs)."""
    total = 0
    for fa, fb in zip(a.stack, b.stack, strict=True):
        if fa.file is not None and fa.line and fb.file is not None and fb.line:
            total += abs(fa.line - fb.line)
        else:
            total += fa.offset != fb.offset
    return total


def _kinds_agree(a: Group, b: Group) -> bool:
    unknown = (None, "unknown")
    return a.leak_kind == b.leak_kind or a.leak_kind in unknown or b.leak_kind in unknown


#: past this many candidate pairs in one shape, its groups pair up in order without the alignment
_ALIGN_LIMIT = 1_000_000


def _align(old: Sequence[Group], now: Sequence[Group]) -> list[tuple[int, int]]:
    """Pairs (index in `old`, index in `now`) of groups of one shape, each side in the order of
    its lines: as many pairs as the kinds allow, in order (an edit moves lines but keeps their
    order), and of those the nearest lines."""
    n, m = len(old), len(now)
    if n * m > _ALIGN_LIMIT:
        return [(i, j) for i, j in zip(range(n), range(m), strict=False)
                if _kinds_agree(old[i], now[j])]
    # best[i][j]: (pairs, -distance) of old[:i] against now[:j]
    best = [[(0, 0)] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            here = max(best[i - 1][j], best[i][j - 1])
            if _kinds_agree(old[i - 1], now[j - 1]):
                pairs, cost = best[i - 1][j - 1]
                here = max(here, (pairs + 1, cost - _distance(old[i - 1], now[j - 1])))
            best[i][j] = here
    out = []
    i, j = n, m
    while i and j:
        if best[i][j] == best[i - 1][j]:
            i -= 1
        elif best[i][j] == best[i][j - 1]:
            j -= 1
        else:
            out.append((i - 1, j - 1))
            i, j = i - 1, j - 1
    return out


def match_groups(old: Sequence[Group], now: Sequence[Group]) -> dict[int, int]:
    """{index in `now`: index in `old`} of the groups that are one leak in two runs: in each
    stack shape, the groups aligned in the order of their lines (`_align`)."""
    shapes: dict[tuple[Any, ...], tuple[list[int], list[int]]] = {}
    for i, g in enumerate(old):
        shapes.setdefault(_shape(g), ([], []))[0].append(i)
    for j, g in enumerate(now):
        shapes.setdefault(_shape(g), ([], []))[1].append(j)
    pairs: dict[int, int] = {}
    for olds, nows in shapes.values():
        olds.sort(key=lambda i: _positions(old[i]))
        nows.sort(key=lambda j: _positions(now[j]))
        for a, b in _align([old[i] for i in olds], [now[j] for j in nows]):
            pairs[nows[b]] = olds[a]
    return pairs


def diff(base: Analysis, new: Analysis, kinds: frozenset[str] | None = None) -> LeakDiff:
    """Compare the program's leak groups of the kinds `kinds` lists (None: all; all of them
    too when a dump has no pointer scan)."""
    by_kind = base.leak_kinds is not None and new.leak_kinds is not None
    if not by_kind:
        kinds = None
    old = _merged(base.leaks, by_kind)
    now = _merged(new.leaks, by_kind)
    pairs = match_groups(old, now)
    shown = {id(g) for g in split_by_kind([*old, *now], kinds)[0]}
    added: list[DiffEntry] = []
    grown: list[DiffEntry] = []
    for j, g in enumerate(now):
        if id(g) not in shown:
            continue
        if j not in pairs:
            added.append(DiffEntry(g, 0, 0))
        elif g.bytes > old[pairs[j]].bytes or g.blocks > old[pairs[j]].blocks:
            grown.append(DiffEntry(g, old[pairs[j]].bytes, old[pairs[j]].blocks))
    matched = set(pairs.values())
    gone = [g for i, g in enumerate(old) if i not in matched and id(g) in shown]
    order = lambda e: (-e.group.bytes, -e.group.blocks)  # noqa: E731
    return LeakDiff(base, new, sorted(added, key=order), sorted(grown, key=order),
                    sorted(gone, key=lambda g: (-g.bytes, -g.blocks)), by_kind)


def _sized(g: Group, nbytes: int, blocks: int, leak_kind: str | None) -> Group:
    if (g.bytes, g.blocks, g.leak_kind) == (nbytes, blocks, leak_kind):
        return g
    return Group(g.kind, nbytes, blocks, g.stack, g.order, leak_kind, g.indirect_bytes,
                 g.indirect_blocks, raw=g.raw)


def _size(nbytes: int, blocks: int) -> str:
    return f"{plural(nbytes, 'byte')} in {plural(blocks, 'block')}"


def _kind_text(g: Group) -> str:
    return f", {KIND_NAMES[g.leak_kind]}" if g.leak_kind is not None else ""


def render_diff_text(d: LeakDiff, max_frames: int | None = None) -> str:
    out = [f"memdump diff: {d.base.path} -> {d.new.path}"]
    if not d.by_kind:
        unscanned = [a.path for a in (d.base, d.new) if a.leak_kinds is None]
        out.append(f"note: {' and '.join(unscanned)} {'has' if len(unscanned) == 1 else 'have'} "
                   "no pointer scan: every leak group is compared, whatever its kind")
    for n, e in enumerate(d.added, 1):
        out.append("")
        out.append(f"NEW LEAK {n:,} of {len(d.added):,}: {_size(e.group.bytes, e.group.blocks)}"
                   f"{_kind_text(e.group)}")
        out.extend(stack_text(e.group.stack, max_frames, True))
    for n, e in enumerate(d.grown, 1):
        g = e.group
        out.append("")
        out.append(f"GREW {n:,} of {len(d.grown):,}: {_size(g.bytes, g.blocks)}{_kind_text(g)} "
                   f"(+{plural(g.bytes - e.base_bytes, 'byte')}, "
                   f"+{plural(g.blocks - e.base_blocks, 'block')}; "
                   f"base: {_size(e.base_bytes, e.base_blocks)})")
        out.extend(stack_text(g.stack, max_frames, True))
    for n, g in enumerate(d.gone, 1):
        out.append("")
        out.append(f"GONE {n:,} of {len(d.gone):,}: {_size(g.bytes, g.blocks)}{_kind_text(g)} "
                   "(leaked in base only)")
        out.extend(stack_text(g.stack, max_frames, True))
    out.append("")
    out.append("DIFF SUMMARY")
    added = _size(sum(e.group.bytes for e in d.added), sum(e.group.blocks for e in d.added))
    out.append(f"    new leaks:  {plural(len(d.added), 'group')}, "
               f"{added}")
    out.append(f"    grew:       {plural(len(d.grown), 'group')}, "
               f"+{plural(sum(e.group.bytes - e.base_bytes for e in d.grown), 'byte')}")
    out.append(f"    gone:       {plural(len(d.gone), 'group')}, "
               f"{_size(sum(g.bytes for g in d.gone), sum(g.blocks for g in d.gone))}")
    out.append(f"    leaked:     base {_size(d.base.leaked_bytes, d.base.leaked_blocks)}, "
               f"new {_size(d.new.leaked_bytes, d.new.leaked_blocks)}")
    return "\n".join(out) + "\n"


def _group_json(g: Group, max_frames: int | None) -> dict[str, Any]:
    stack = g.stack if max_frames is None else g.stack[:max_frames]
    return {"leak_kind": g.leak_kind, "bytes": g.bytes, "blocks": g.blocks,
            "indirect_bytes": g.indirect_bytes, "indirect_blocks": g.indirect_blocks,
            "stack": [frame_json(f) for f in stack]}


def render_diff_json(d: LeakDiff, max_frames: int | None = None) -> dict[str, Any]:
    return {
        "format": DIFF_FORMAT,
        "version": DIFF_VERSION,
        "base": d.base.path,
        "new": d.new.path,
        "added": [_group_json(e.group, max_frames) for e in d.added],
        "grown": [{**_group_json(e.group, max_frames), "base_bytes": e.base_bytes,
                   "base_blocks": e.base_blocks} for e in d.grown],
        "gone": [_group_json(g, max_frames) for g in d.gone],
        "summary": {
            "base": {"bytes": d.base.leaked_bytes, "blocks": d.base.leaked_blocks},
            "new": {"bytes": d.new.leaked_bytes, "blocks": d.new.leaked_blocks},
            "added": {"groups": len(d.added), "bytes": sum(e.group.bytes for e in d.added),
                      "blocks": sum(e.group.blocks for e in d.added)},
            "grown": {"groups": len(d.grown),
                      "bytes": sum(e.group.bytes - e.base_bytes for e in d.grown),
                      "blocks": sum(e.group.blocks - e.base_blocks for e in d.grown)},
            "gone": {"groups": len(d.gone), "bytes": sum(g.bytes for g in d.gone),
                     "blocks": sum(g.blocks for g in d.gone)},
        },
    }
