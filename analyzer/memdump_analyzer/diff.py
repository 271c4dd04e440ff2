"""`memdump-analyze diff BASE NEW`: the leak groups of NEW that BASE has not, and those that grew.

Groups are matched by leak kind and stack, each frame by function and file:line (by module and
offset when it has no line), never by address: two runs of the same program compare, whatever
ASLR did.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .dumpfile import Frame
from .model import Analysis, Group
from .report import KIND_NAMES, _by_kind, _frame_json, _stack_text

__all__ = ["DiffEntry", "LeakDiff", "diff", "frames_key", "render_diff_json", "render_diff_text",
           "stack_key"]

DIFF_FORMAT = "memdump-diff"
DIFF_VERSION = "1.0"


def _frame_key(f: Frame) -> tuple[str, ...]:
    if f.file is not None and f.line:
        return (f.function or "?", os.path.basename(f.file), str(f.line))
    return (f.function or "?", os.path.basename(f.module or "?"), f"+0x{f.offset:x}")


def frames_key(frames: Sequence[Frame]) -> tuple[tuple[str, ...], ...]:
    """What matches a stack across runs: its frames' functions and lines (modules and offsets
    where a frame has no line), not their addresses."""
    return tuple(_frame_key(f) for f in frames)


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

    def failing(self, kinds: frozenset[str]) -> list[DiffEntry]:
        """The added and grown groups of `kinds` (and of an unknown kind)."""
        return [e for e in (*self.added, *self.grown)
                if e.group.leak_kind is None or e.group.leak_kind in kinds
                or e.group.leak_kind == "unknown"]


def _merged(groups: Sequence[Group]) -> dict[tuple[Any, ...], list[Any]]:
    """stack key -> [bytes, blocks, first group] (two groups of a run whose stacks differ only
    in addresses, e.g. two copies of an inlined function, add up)."""
    out: dict[tuple[Any, ...], list[Any]] = {}
    for g in groups:
        row = out.setdefault(stack_key(g), [0, 0, g])
        row[0] += g.bytes
        row[1] += g.blocks
    return out


def diff(base: Analysis, new: Analysis, kinds: frozenset[str] | None = None) -> LeakDiff:
    """Compare the program's leak groups of the kinds `kinds` lists (None: all)."""
    old = _merged(_by_kind(base.leaks, kinds)[0])
    now = _merged(_by_kind(new.leaks, kinds)[0])
    added: list[DiffEntry] = []
    grown: list[DiffEntry] = []
    for key, (nbytes, blocks, g) in now.items():
        if key not in old:
            added.append(DiffEntry(_sized(g, nbytes, blocks), 0, 0))
        elif nbytes > old[key][0] or blocks > old[key][1]:
            grown.append(DiffEntry(_sized(g, nbytes, blocks), old[key][0], old[key][1]))
    gone = [_sized(g, b, n) for key, (b, n, g) in old.items() if key not in now]
    order = lambda e: (-e.group.bytes, -e.group.blocks)  # noqa: E731
    return LeakDiff(base, new, sorted(added, key=order), sorted(grown, key=order),
                    sorted(gone, key=lambda g: (-g.bytes, -g.blocks)))


def _sized(g: Group, nbytes: int, blocks: int) -> Group:
    if (g.bytes, g.blocks) == (nbytes, blocks):
        return g
    return Group(g.kind, nbytes, blocks, g.stack, g.order, g.leak_kind, g.indirect_bytes,
                 g.indirect_blocks, g.raw)


def _size(nbytes: int, blocks: int) -> str:
    return (f"{nbytes:,} byte{'s' if nbytes != 1 else ''} in "
            f"{blocks:,} block{'s' if blocks != 1 else ''}")


def _kind_text(g: Group) -> str:
    return f", {KIND_NAMES[g.leak_kind]}" if g.leak_kind is not None else ""


def render_diff_text(d: LeakDiff, max_frames: int | None = None) -> str:
    out = [f"memdump diff: {d.base.path} -> {d.new.path}"]
    for n, e in enumerate(d.added, 1):
        out.append("")
        out.append(f"NEW LEAK {n:,} of {len(d.added):,}: {_size(e.group.bytes, e.group.blocks)}"
                   f"{_kind_text(e.group)}")
        out.extend(_stack_text(e.group.stack, max_frames, True))
    for n, e in enumerate(d.grown, 1):
        g = e.group
        out.append("")
        out.append(f"GREW {n:,} of {len(d.grown):,}: {_size(g.bytes, g.blocks)}{_kind_text(g)} "
                   f"(+{g.bytes - e.base_bytes:,} bytes, +{g.blocks - e.base_blocks:,} blocks; "
                   f"base: {_size(e.base_bytes, e.base_blocks)})")
        out.extend(_stack_text(g.stack, max_frames, True))
    for n, g in enumerate(d.gone, 1):
        out.append("")
        out.append(f"GONE {n:,} of {len(d.gone):,}: {_size(g.bytes, g.blocks)}{_kind_text(g)} "
                   "(leaked in base only)")
        out.extend(_stack_text(g.stack, max_frames, True))
    out.append("")
    out.append("DIFF SUMMARY")
    added = _size(sum(e.group.bytes for e in d.added), sum(e.group.blocks for e in d.added))
    out.append(f"    new leaks:  {len(d.added):,} group{'s' if len(d.added) != 1 else ''}, "
               f"{added}")
    out.append(f"    grew:       {len(d.grown):,} group{'s' if len(d.grown) != 1 else ''}, "
               f"+{sum(e.group.bytes - e.base_bytes for e in d.grown):,} bytes")
    out.append(f"    gone:       {len(d.gone):,} group{'s' if len(d.gone) != 1 else ''}, "
               f"{_size(sum(g.bytes for g in d.gone), sum(g.blocks for g in d.gone))}")
    out.append(f"    leaked:     base {_size(d.base.leaked_bytes, d.base.leaked_blocks)}, "
               f"new {_size(d.new.leaked_bytes, d.new.leaked_blocks)}")
    return "\n".join(out) + "\n"


def _group_json(g: Group, max_frames: int | None) -> dict[str, Any]:
    stack = g.stack if max_frames is None else g.stack[:max_frames]
    return {"leak_kind": g.leak_kind, "bytes": g.bytes, "blocks": g.blocks,
            "indirect_bytes": g.indirect_bytes, "indirect_blocks": g.indirect_blocks,
            "stack": [_frame_json(f) for f in stack]}


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
