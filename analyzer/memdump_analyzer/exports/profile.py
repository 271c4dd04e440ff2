"""The figures the exports write, per allocation stack: the exports' accumulator of the one pass
(heappass.py).

The analysis (`analyze`) gives what leaked; the pass adds what it does not keep: how much each
stack allocated, what was live at the peak, and the live heap over time (massif's snapshots).
Its live blocks follow the replay's rules (docs/dump-format.md, "Heap operations"; replay.py):
custom blocks are apart and not counted, a `free` from a marked stack (glibc's own bookkeeping)
releases nothing, an `exec` empties the heap. Memory: the live blocks and one row per stack node.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import heappass
from ..diff import frames_key
from ..dumpfile import DumpError, DumpReader, Frame
from ..leaktext import frame_key
from ..model import Analysis
from ..passapi import (
    ALLOC_BYTES,
    ALLOCS,
    AT_PEAK,
    MOMENT_BY_NODE,
    MOMENT_TOTALS,
    NODE,
    TEMP,
    TEMP_BYTES,
    Accumulator,
    Figures,
    Moment,
)
from ..rules import RUNTIME_FREE_FUNCTIONS, trim_stack
from ..symbolize import symbolize as _symbolize

if TYPE_CHECKING:
    from ..nativegroups import StackRows

__all__ = ["SNAPSHOTS", "HeapProfile", "Plan", "PlannedProfileOutput", "Snapshot", "StackFigures",
           "StackProfileOutput",
           "collect", "difference", "from_replay", "snapshot_plan",
           "TreeNode", "frame_label", "nonzero"]

#: regular snapshots over a run, and every how many of them one is detailed (massif's defaults,
#: --max-snapshots=100 and --detailed-freq=10)
SNAPSHOTS = 100
DETAILED_EVERY = 10

StackKey = tuple[tuple[str, ...], ...]
#: the moments asked of the analysis's replay (`analyze(snapshots=...)`): SEQs, and their kinds
Plan = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass
class StackFigures:
    """What one allocation stack (trimmed, innermost first, as the reports show it) did."""

    frames: tuple[Frame, ...]
    alloc_blocks: int = 0
    alloc_bytes: int = 0
    #: the analyser's leaked blocks of this stack, every leak kind (runtime groups apart)
    leaked_blocks: int = 0
    leaked_bytes: int = 0
    #: its blocks live at the peak
    peak_blocks: int = 0
    peak_bytes: int = 0
    #: its temporary allocations (heaptrack's: freed with no other heap operation of the thread
    #: between), when the pass computed the `temporary` part (the HTML page's), else 0
    temp_blocks: int = 0
    temp_bytes: int = 0
    #: its row in the profile's `rows` (the library's stack rows), or -1 (not one of them)
    row: int = field(default=-1, compare=False, repr=False)


@dataclass
class Snapshot:
    """The live heap after event `seq`; `time` is massif's with --time-unit=B (bytes allocated
    and freed so far). `tree`: live bytes by stack key, for a detailed snapshot."""

    seq: int
    time: int
    live_bytes: int
    tree: dict[StackKey, int] | None = None
    peak: bool = False


@dataclass
class HeapProfile:
    """A dump's figures by stack (or two dumps' difference, `difference`)."""

    analysis: Analysis
    stacks: dict[StackKey, StackFigures]
    snapshots: list[Snapshot] = field(default_factory=list)
    #: most live bytes at any moment (the analyser's peak), and when
    peak_bytes: int = 0
    peak_seq: int | None = None
    base: Analysis | None = None
    #: what the HTML page shows besides (html.py's `PageOutputs`), when the pass gathered it
    page: Any = None
    #: the stacks' frames as the library's rows (nativegroups.py), flat, when it made them: a
    #: stack's `row` is its place there
    rows: StackRows | None = None

    def frames_of(self, key: StackKey) -> tuple[Frame, ...]:
        return self.stacks[key].frames


def collect(analysis: Analysis, *, symbolize: bool = True, snapshots: int = SNAPSHOTS,
            detailed_every: int = DETAILED_EVERY,
            also: Sequence[Accumulator] = ()) -> HeapProfile:
    """Read the dump of `analysis` again, in the one pass (heappass.py), and gather its figures
    by stack. `snapshots`: how many regular snapshots of the live heap to take (plus the
    peak's and the last), every `detailed_every`th with its live bytes by stack. `also`: other
    outputs of the same pass (the HTML page's series and heap maps)."""
    collecting = gc.isenabled()
    gc.disable()  # as analyze(): the pass makes no reference cycles
    out = StackProfileOutput(analysis, snapshots, detailed_every, symbolize)
    try:
        with DumpReader(analysis.path, mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
            try:
                heappass.run(reader, [out, *also])
            except (ValueError, IndexError, KeyError):
                raise DumpError(reader.path, None, "the dump changed while it was read again"
                                ) from None
            except OSError as e:
                raise reader.read_error(e) from None
        return out.profile
    finally:
        if collecting:
            gc.enable()


def snapshot_plan(last_seq: int, snapshots: int = SNAPSHOTS,
                  detailed_every: int = DETAILED_EVERY) -> Plan:
    """The moments the analysis's replay takes for `collect`'s snapshots of a dump whose last
    SEQ is `last_seq`, before its peak is known: every `last_seq // snapshots` events and the
    last, by node where a snapshot may be detailed. The peak's place among them moves the count
    of the detailed ones by one at most (`StackProfileOutput.wanted_moments` leaves it out): the
    `m`th is detailed when `m % detailed_every` is 0 or 1, and the last."""
    if last_seq <= 0:
        return ((), ())
    every = max(1, last_seq // max(1, snapshots))
    seqs = list(range(every, last_seq + 1, every))
    kinds = [MOMENT_BY_NODE if m % detailed_every in (0, 1) else MOMENT_TOTALS
             for m in range(1, len(seqs) + 1)]
    if seqs[-1] == last_seq:
        kinds[-1] = MOMENT_BY_NODE
    else:
        seqs.append(last_seq)
        kinds.append(MOMENT_BY_NODE)
    return tuple(seqs), tuple(kinds)


def from_replay(analysis: Analysis, *, symbolize: bool = True, peak: bool = False,
                snapshots: Plan | None = None) -> HeapProfile | None:
    """The figures by stack of `analysis`'s dump without reading it again: the allocations by
    stack node the library's replay counted (`analyze(allocations=True)`), the leaks and, with
    `peak`, the blocks live at the peak; with `snapshots` (the `snapshot_plan` the analysis was
    asked for), `collect`'s snapshots from the moments the replay took, else none (all that
    pprof and collapsed write). None when the analysis has no such figures (the Python replay;
    the peak's when more changes followed it than the library keeps; a plan that is not the
    dump's, whose last SEQ was not the one its tail said)."""
    if analysis.node_allocs is None or (peak and analysis.node_allocs[2] is None):
        return None
    if snapshots is not None and (analysis.node_snapshots is None
                                  or snapshots != snapshot_plan(analysis.last_seq)):
        return None
    reader, rows, at_peak = analysis.node_allocs
    collecting = gc.isenabled()
    gc.disable()
    try:
        out = StackProfileOutput(analysis, SNAPSHOTS, DETAILED_EVERY, symbolize)
        if snapshots is None:
            out.shots = []
        elif not out.take_planned(snapshots[0], analysis.node_snapshots or []):
            return None
        out.reader = reader
        it = iter(rows)
        out.allocs = {node: [blocks, nbytes]
                      for node, blocks, nbytes in zip(it, it, it, strict=True)}
        if peak:
            out.at_peak = {node: [blocks, nbytes] for node, blocks, nbytes
                           in zip(out.allocs, *at_peak, strict=True) if blocks}
        out._make()
        return out.profile
    finally:
        if collecting:
            gc.enable()


class StackProfileOutput(Accumulator):
    """The exports' accumulator: per stack node, the blocks and bytes allocated (the pass's own
    figures) and live at the analysis's peak, and snapshots of the live heap (moments)."""

    def __init__(self, analysis: Analysis, snapshots: int, detailed_every: int,
                 symbolize: bool) -> None:
        self.analysis = analysis
        self.symbolize = symbolize
        self.reader: DumpReader | None = None
        #: stack node -> [blocks, bytes, temporary blocks, their bytes] allocated there
        self.allocs: dict[int, list[int]] = {}
        #: stack node -> [blocks, bytes] live at the peak
        self.at_peak: dict[int, list[int]] = {}
        self.roles: list[bool | None] = []
        #: (seq, time, live bytes, live bytes by node or None, is the peak)
        self.shots: list[tuple[int, int, int, dict[int, int] | None, bool]] = [
            (0, 0, 0, None, False)]
        self.every = max(1, analysis.last_seq // max(1, snapshots))
        self.detailed_every = detailed_every
        self.profile = HeapProfile(analysis, {})

    def _next(self, seq: int) -> int:
        """The next event after `seq` with a snapshot: a multiple of `every`, the peak, the
        last."""
        wanted = [(seq // self.every + 1) * self.every]
        wanted += [s for s in (self.analysis.peak_seq, self.analysis.last_seq)
                   if s is not None and s > seq]
        return min(wanted)

    def wanted_moments(self) -> list[tuple[int, int]]:
        return self._snapshot_moments()

    def _snapshot_moments(self) -> list[tuple[int, int]]:
        """The snapshots' events, known from the analysis: the peak's (its blocks by node), every
        `every`th, each `detailed_every`th of these and the last with its live bytes by node."""
        out: list[tuple[int, int]] = []
        self.roles: list[bool | None] = []  # each moment: the peak (None), detailed or not
        taken = 0
        seq = self._next(0)
        while seq <= self.analysis.last_seq:
            if seq == self.analysis.peak_seq:
                self.roles.append(None)
            else:
                taken += 1
                self.roles.append(taken % self.detailed_every == 0
                                  or seq == self.analysis.last_seq)
            out.append((seq, MOMENT_TOTALS if self.roles[-1] is False else MOMENT_BY_NODE))
            seq = self._next(seq)
        return out

    def take_planned(self, seqs: Sequence[int], taken: list[tuple[int, Moment]]) -> bool:
        """The snapshots from the moments the replay took at `seqs` (`snapshot_plan`'s) and at
        the peak (the index after them), each in the role `wanted_moments` gives it; False when
        one is missing."""
        regular = {seqs[index]: m for index, m in taken if index < len(seqs)}
        at_peak = next((m for index, m in taken if index == len(seqs)), None)
        for index, (seq, _) in enumerate(self._snapshot_moments()):
            moment = at_peak if self.roles[index] is None else regular.get(seq)
            if moment is None or (self.roles[index] and moment.by_node is None):
                return False
            self._shot(index, moment)
        return True

    def take(self, index: int, moment: Moment) -> None:
        self._shot(index, moment)

    def _shot(self, index: int, moment: Moment) -> None:
        """Moment `index` of `_snapshot_moments` as a snapshot in its role."""
        # massif's time with --time-unit=B: bytes allocated and freed (an exec frees its blocks;
        # a block dropped while live is not freed)
        seq, cur = moment.seq, moment.cur
        time = 2 * moment.allocated - cur - moment.dropped
        by_node = moment.by_node or []
        if self.roles[index] is None:
            if cur != self.analysis.peak_bytes:
                raise DumpError(self.analysis.path, None, f"the live heap after event {seq} is "
                                f"{cur} bytes, not the replay's peak of "
                                f"{self.analysis.peak_bytes}")
            for node, blocks, nbytes in by_node:
                row = self.at_peak.setdefault(node, [0, 0])
                row[0] += blocks
                row[1] += nbytes
            self.shots.append((seq, time, cur, {n: b for n, (_, b) in self.at_peak.items()},
                               True))
        else:
            self.shots.append((seq, time, cur, {n: b for n, _, b in by_node}
                               if self.roles[index] else None, False))

    def finish(self, figures: Figures) -> None:
        self.reader = figures.reader
        allocs = self.allocs
        stacks = figures.stacks
        if getattr(stacks, "table", False):  # the library's table: its columns, no rows made
            # (struct fig_stack's fields 5 to 8 and 10: allocations, their bytes, the temporary
            # ones and theirs, the node; one row a node)
            column = stacks.column  # type: ignore[attr-defined]
            for node, n, nbytes, temp, temp_bytes in zip(
                    column(10), column(5), column(6), column(7), column(8), strict=True):
                allocs[node] = [n, nbytes, temp, temp_bytes]
        else:
            for st in stacks.values():
                row = allocs.get(st[NODE])
                if row is None:
                    allocs[st[NODE]] = [st[ALLOCS], st[ALLOC_BYTES], st[TEMP], st[TEMP_BYTES]]
                else:
                    row[0] += st[ALLOCS]
                    row[1] += st[ALLOC_BYTES]
                    row[2] += st[TEMP]
                    row[3] += st[TEMP_BYTES]
        self._make()

    def _make(self) -> None:
        """The profile, of the figures gathered (its stacks symbolised first, if asked)."""
        if self.symbolize:
            _symbolize(self.reader, self._nodes())
        self.profile = self._profile()

    def _nodes(self) -> Iterator[int]:
        yield from self.allocs
        yield from self.at_peak
        for shot in self.shots:
            if shot[3] is not None:
                yield from shot[3]

    def _profile(self) -> HeapProfile:
        from .. import nativegroups  # the exports' alone: the leak report imports this module
        reader = self.reader
        assert reader is not None
        # the nodes in the order the rows are made: allocations, the peak, the snapshots
        front = [*self.allocs, *self.at_peak]
        # the snapshots' nodes, each once (a node live at many snapshots is keyed once)
        in_trees = list(dict.fromkeys(n for shot in self.shots if shot[3] is not None
                                      for n, nbytes in shot[3].items() if nbytes))
        rows = nativegroups.stack_rows(reader, frame_key, front + in_trees)
        if rows is None:
            return self._profile_py()
        row_of, frames_of, keys_of = rows.row_of, rows.frames, rows.keys
        n_allocs = len(self.allocs)
        stacks: dict[StackKey, StackFigures] = {}
        # the rows of the allocations and the peak: one a group, so a key each
        n_front = max(row_of[:len(front)], default=-1) + 1
        # the allocations summed by row, each row's figures then made with them
        sums = [[0] * n_front for _ in range(4)]
        blocks_at, bytes_at, temp_at, temp_bytes_at = sums
        for alloc, r in zip(self.allocs.values(), row_of[:n_allocs].tolist(), strict=True):
            blocks_at[r] += alloc[0]
            bytes_at[r] += alloc[1]
            if len(alloc) > 2:  # the replay's rows have no temporaries
                temp_at[r] += alloc[2]
                temp_bytes_at[r] += alloc[3]
        figures = [StackFigures(frames, blocks, nbytes, 0, 0, 0, 0, temp, temp_bytes, r)
                   for r, (frames, blocks, nbytes, temp, temp_bytes)
                   in enumerate(zip(frames_of[:n_front], *sums, strict=True))]
        stacks.update(zip(keys_of[:n_front], figures, strict=True))
        for (blocks, nbytes), r in zip(self.at_peak.values(), row_of[n_allocs:len(front)],
                                   strict=True):
            row = figures[r]
            row.peak_blocks += blocks
            row.peak_bytes += nbytes
        self._add_leaks(stacks)
        for r, (key, frames) in enumerate(zip(keys_of[n_front:], frames_of[n_front:],
                                              strict=True), n_front):
            if key not in stacks:  # a leak's stack comes first
                stacks[key] = StackFigures(frames, row=r)
        key_of = dict(zip(in_trees, map(keys_of.__getitem__, row_of[len(front):]), strict=True))
        return self._with_snapshots(stacks, key_of.__getitem__, rows)

    def _add_leaks(self, stacks: dict[StackKey, StackFigures]) -> None:
        """The analysis's leaked blocks, by stack."""
        for g in self.analysis.leaks:
            key = frames_key(g.stack)
            row = stacks.setdefault(key, StackFigures(g.stack))
            row.leaked_blocks += g.blocks
            row.leaked_bytes += g.bytes

    def _profile_py(self) -> HeapProfile:
        """`_profile` in Python: the reference, and the fallback without the library."""
        from .. import nativegroups
        from ..views.common import trimmed_nodes
        reader = self.reader
        assert reader is not None
        keys: dict[int, StackKey] = {}  # node -> its key
        by_group: dict[int, StackKey] = {}  # the library's group of nodes -> their key
        stacks: dict[StackKey, StackFigures] = {}
        groups = nativegroups.node_groups(reader, frame_key)  # None: each node's key made
        trimmed = trimmed_nodes(reader)
        # each frame's key by the frame (the reader keeps its frames): a stack's key is then
        # made without a call per frame
        every = [*reader.frames.values(), *(f for chain in reader.inlined_into.values()
                                            for f in chain)]
        frame_keys = {id(f): frame_key(f) for f in every}.__getitem__

        def key_of(node: int) -> StackKey:
            key = keys.get(node)
            if key is None:
                group = groups[node] if groups is not None and 0 <= node < len(groups) else -1
                key = by_group.get(group) if group >= 0 else None
                if key is None:
                    if group >= 0:
                        frames = trimmed(node)
                        key = tuple(map(frame_keys, map(id, frames)))
                    else:
                        frames = trim_stack(reader.stack(node))
                        key = frames_key(frames)
                    if group >= 0:
                        by_group[group] = key
                    if key not in stacks:
                        stacks[key] = StackFigures(frames)
                keys[node] = key
            return key

        for node, alloc in self.allocs.items():
            _add_allocs(stacks[key_of(node)], alloc)
        for node, (blocks, nbytes) in self.at_peak.items():
            row = stacks[key_of(node)]
            row.peak_blocks += blocks
            row.peak_bytes += nbytes
        self._add_leaks(stacks)
        return self._with_snapshots(stacks, key_of)

    def _with_snapshots(self, stacks: dict[StackKey, StackFigures],
                        key_of: Callable[[int], StackKey],
                        rows: StackRows | None = None) -> HeapProfile:
        """The profile of STACKS, with the snapshots' live bytes summed by stack (KEY_OF: a
        node's stack; ROWS: the library's rows of the stacks, if it made them)."""
        shots = []
        for seq, time, cur, by_node, peak in self.shots:
            tree = None
            if by_node is not None:
                tree = {}
                for node, nbytes in by_node.items():
                    if nbytes:
                        k = key_of(node)
                        tree[k] = tree.get(k, 0) + nbytes
            shots.append(Snapshot(seq, time, cur, tree, peak))
        return HeapProfile(self.analysis, stacks, shots, self.analysis.peak_bytes,
                           self.analysis.peak_seq, rows=rows)


class PlannedProfileOutput(StackProfileOutput):
    """The exports' accumulator made before the analysis, which runs it in its replay's run
    (`analyze(also=...)`): its moments `snapshot_plan`'s and the peak's, their roles given once
    the analysis is known (`attach`, before the figures are handed over)."""

    def __init__(self, plan: Plan, detailed_every: int, symbolize: bool) -> None:
        self.plan = plan
        self.planned_every = detailed_every
        self.taken: list[tuple[int, Moment]] = []
        self.symbolize = symbolize
        self.reader = None
        self.allocs = {}
        self.at_peak = {}
        self.roles = []

    def attach(self, analysis: Analysis) -> bool:
        """The analysis is known: whether the plan is its dump's (the last SEQ its tail said)."""
        super().__init__(analysis, SNAPSHOTS, self.planned_every, self.symbolize)
        return self.plan == snapshot_plan(analysis.last_seq, SNAPSHOTS, self.planned_every)

    def wanted_moments(self) -> list[tuple[int, int]]:
        return [*zip(*self.plan, strict=True), (AT_PEAK, MOMENT_BY_NODE)]

    def take(self, index: int, moment: Moment) -> None:
        self.taken.append((index, moment))

    def finish(self, figures: Figures) -> None:
        if not self.take_planned(self.plan[0], self.taken):
            raise DumpError(self.analysis.path, None, "the pass missed a snapshot")
        super().finish(figures)


def _add_allocs(row: StackFigures, alloc: list[int]) -> None:
    """A node's allocations (`StackProfileOutput.allocs`' row) counted in its stack's row; the
    replay's rows (`from_replay`) have no temporaries: pprof and collapsed write none."""
    row.alloc_blocks += alloc[0]
    row.alloc_bytes += alloc[1]
    if len(alloc) > 2:
        row.temp_blocks += alloc[2]
        row.temp_bytes += alloc[3]


def difference(new: HeapProfile, base: HeapProfile) -> HeapProfile:
    """NEW's figures minus BASE's, stack by stack (matched by `frames_key`, as `diff` matches
    groups: function and file:line of each frame, never addresses), as pprof's -base."""
    stacks = {k: StackFigures(s.frames, s.alloc_blocks, s.alloc_bytes, s.leaked_blocks,
                              s.leaked_bytes, s.peak_blocks, s.peak_bytes, row=s.row)
              for k, s in new.stacks.items()}
    for k, s in base.stacks.items():
        row = stacks.setdefault(k, StackFigures(s.frames))
        row.alloc_blocks -= s.alloc_blocks
        row.alloc_bytes -= s.alloc_bytes
        row.leaked_blocks -= s.leaked_blocks
        row.leaked_bytes -= s.leaked_bytes
        row.peak_blocks -= s.peak_blocks
        row.peak_bytes -= s.peak_bytes
    return HeapProfile(new.analysis, stacks, [], new.peak_bytes - base.peak_bytes, None,
                       base.analysis, rows=new.rows)


@dataclass
class TreeNode:
    """A node of a stack tree (massif's heap trees, flame graphs): what its `label` names (a
    frame, a function's name), the count under it, its children by key."""

    label: object
    value: int = 0
    children: dict[Hashable, TreeNode] = field(default_factory=dict)

    def add(self, path: Iterable[tuple[Hashable, object]], n: int) -> None:
        """Count `n` here and at each node of `path`, (key, label) per level from this node's
        child down, making the nodes missing."""
        self.value += n
        node = self
        for key, label in path:
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = TreeNode(label)
            child.value += n
            node = child


def frame_label(f: Frame) -> str:
    """A frame's name in an export: its function, `module+0xOFFSET` without one."""
    if f.function is not None:
        return f.function
    if f.module is not None:
        return f"{os.path.basename(f.module)}+0x{f.offset:x}"
    return f"0x{f.pc:x}"


def nonzero(stacks: Iterable[StackFigures]) -> list[StackFigures]:
    """The stacks with any figure other than zero (a difference leaves many at zero)."""
    return [s for s in stacks if s.alloc_blocks or s.alloc_bytes or s.leaked_blocks
            or s.leaked_bytes or s.peak_blocks or s.peak_bytes]
