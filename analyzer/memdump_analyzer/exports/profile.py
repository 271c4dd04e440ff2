"""The figures the exports write: one pass over a dump's heap events, per allocation stack.

The analysis (`analyze`) gives what leaked; this pass adds what it does not keep: how much each
stack allocated, what was live at the peak, and the live heap over time (massif's snapshots).
Its live blocks follow the replay's rules (docs/dump-format.md, "Heap operations"; replay.py):
custom blocks are apart and not counted, a `free` from a marked stack (glibc's own bookkeeping)
releases nothing, an `exec` empties the heap. Memory: the live blocks and one row per stack node.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field

from ..diff import frames_key
from ..dumpfile import DumpError, DumpReader, Frame
from ..dumpformat import CUSTOM, effect
from ..model import Analysis
from ..rules import RUNTIME_FREE_FUNCTIONS, trim_stack
from ..symbolize import symbolize as _symbolize

__all__ = ["SNAPSHOTS", "HeapProfile", "Snapshot", "StackFigures", "collect", "difference",
           "TreeNode", "frame_label", "nonzero"]

#: regular snapshots over a run, and every how many of them one is detailed (massif's defaults,
#: --max-snapshots=100 and --detailed-freq=10)
SNAPSHOTS = 100
DETAILED_EVERY = 10

StackKey = tuple[tuple[str, ...], ...]


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

    def frames_of(self, key: StackKey) -> tuple[Frame, ...]:
        return self.stacks[key].frames


def collect(analysis: Analysis, *, symbolize: bool = True, snapshots: int = SNAPSHOTS,
            detailed_every: int = DETAILED_EVERY) -> HeapProfile:
    """Read the dump of `analysis` again and gather its figures by stack. `snapshots`: how many
    regular snapshots of the live heap to take (plus the peak's and the last), every
    `detailed_every`th with its live bytes by stack."""
    collecting = gc.isenabled()
    gc.disable()  # as analyze(): the pass makes no reference cycles
    try:
        with DumpReader(analysis.path, mark_functions=RUNTIME_FREE_FUNCTIONS) as reader:
            return _Pass(reader, analysis, snapshots, detailed_every).run(symbolize)
    finally:
        if collecting:
            gc.enable()


class _Pass:
    def __init__(self, reader: DumpReader, analysis: Analysis, snapshots: int,
                 detailed_every: int) -> None:
        self.reader = reader
        self.analysis = analysis
        #: pointer as written -> (size, stack node)
        self.live: dict[bytes, tuple[int, int]] = {}
        #: stack node -> [blocks, bytes] allocated there
        self.allocs: dict[int, list[int]] = {}
        #: stack node -> [blocks, bytes] live at the peak
        self.at_peak: dict[int, list[int]] = {}
        #: (seq, time, live bytes, live bytes by node or None, is the peak)
        self.shots: list[tuple[int, int, int, dict[int, int] | None, bool]] = []
        self.every = max(1, analysis.last_seq // max(1, snapshots))
        self.detailed_every = detailed_every

    def run(self, symbolize: bool) -> HeapProfile:
        """One pass over the lines. The analysis read this dump already, so its records are
        well formed: the short records (most of an in-process recording) are taken apart here,
        the `e` records by `_event`, the definitions by the reader."""
        reader = self.reader
        live = self.live
        allocs = self.allocs
        node_ids = reader.node_ids
        peak_seq = self.analysis.peak_seq
        last_seq = self.analysis.last_seq
        every = self.every
        seq = cur = time = taken = 0
        self.shots.append((0, 0, 0, None, False))
        line = b""
        try:
            for line in reader.lines():
                fl = line.split()
                tag = fl[0]
                if tag == b"+" or tag == b"+n" or tag == b"+a":  # STACK RESULT SIZE
                    seq += 1
                    p = fl[2]
                    if p != b"0x0":
                        size = int(fl[3])
                        node = abs(node_ids[fl[1]])
                        old = live.get(p)
                        if old is not None:  # its free was not recorded
                            cur -= old[0]
                        live[p] = (size, node)
                        cur += size
                        time += size
                        row = allocs.get(node)
                        if row is None:
                            allocs[node] = [1, size]
                        else:
                            row[0] += 1
                            row[1] += size
                elif tag == b"-" or tag == b"-n" or tag == b"-a":  # STACK PTR
                    seq += 1
                    # a `free` from a marked stack is the C library's own bookkeeping
                    if tag != b"-" or node_ids[fl[1]] >= 0:
                        old = live.pop(fl[2], None)
                        if old is not None:
                            cur -= old[0]
                            time += old[0]
                elif tag == b"e":
                    seq += 1
                    cur, time = self._event(fl, cur, time)
                elif tag == b"t":
                    reader.thread(fl, seq)
                    continue
                else:
                    rec = reader.other(line, fl, seq)
                    if rec is None:
                        continue
                    seq += 1
                    if rec[2] == b"exec":  # the image is gone, and its blocks
                        time += cur
                        cur = 0
                        live.clear()
                if seq == peak_seq:
                    self._peak(seq, time, cur)
                elif seq % every == 0 or seq == last_seq:
                    taken += 1
                    detailed = taken % self.detailed_every == 0 or seq == last_seq
                    self.shots.append((seq, time, cur, self._by_node() if detailed else None,
                                       False))
        except (ValueError, IndexError, KeyError):
            raise DumpError(reader.path, None, f"the dump changed while it was read again (at "
                            f"'{line[:40].decode(errors='replace').strip()}')") from None
        except OSError as e:
            raise reader.read_error(e) from None
        if symbolize:
            _symbolize(reader, self._nodes())
        return self._profile()

    def _event(self, fl: list[bytes], cur: int, time: int) -> tuple[int, int]:
        """An `e` record's effect on the live blocks (dumpformat.effect)."""
        op = fl[3].decode()
        if op in CUSTOM:
            return cur, time
        node = self.reader.node_ids[fl[4]]
        if op == "free" and node < 0:
            return cur, time  # the C library's own bookkeeping (replay.py: runtime_internal_frees)
        args = tuple(int(a, 16) if a.startswith(b"0x") else int(a) for a in fl[6:])
        release, made, size = effect(op, 0 if fl[5] == b"-" else int(fl[5], 16), args)
        live = self.live
        if release is not None:
            old = live.pop(fl[6], None)
            if old is not None:
                cur -= old[0]
                time += old[0]
        if made is not None:
            node = abs(node)
            old = live.get(fl[5])
            if old is not None:  # its free was not recorded
                cur -= old[0]
            live[fl[5]] = (size, node)
            cur += size
            time += size
            row = self.allocs.get(node)
            if row is None:
                self.allocs[node] = [1, size]
            else:
                row[0] += 1
                row[1] += size
        return cur, time

    def _by_node(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for size, node in self.live.values():
            out[node] = out.get(node, 0) + size
        return out

    def _peak(self, seq: int, time: int, cur: int) -> None:
        if cur != self.analysis.peak_bytes:
            raise DumpError(self.reader.path, None, f"the live heap after event {seq} is "
                            f"{cur} bytes, not the replay's peak of {self.analysis.peak_bytes}")
        for size, node in self.live.values():
            row = self.at_peak.setdefault(node, [0, 0])
            row[0] += 1
            row[1] += size
        self.shots.append((seq, time, cur, {n: b for n, (_, b) in self.at_peak.items()}, True))

    def _nodes(self) -> Iterator[int]:
        yield from self.allocs
        yield from self.at_peak
        for shot in self.shots:
            if shot[3] is not None:
                yield from shot[3]

    def _profile(self) -> HeapProfile:
        trimmed: dict[int, tuple[Frame, ...]] = {}
        keys: dict[int, StackKey] = {}
        stacks: dict[StackKey, StackFigures] = {}

        def key_of(node: int) -> StackKey:
            key = keys.get(node)
            if key is None:
                frames = trim_stack(self.reader.stack(node))
                trimmed[node] = frames
                key = keys[node] = frames_key(frames)
                if key not in stacks:
                    stacks[key] = StackFigures(frames)
            return key

        for node, (blocks, nbytes) in self.allocs.items():
            row = stacks[key_of(node)]
            row.alloc_blocks += blocks
            row.alloc_bytes += nbytes
        for node, (blocks, nbytes) in self.at_peak.items():
            row = stacks[key_of(node)]
            row.peak_blocks += blocks
            row.peak_bytes += nbytes
        for g in self.analysis.leaks:
            key = frames_key(g.stack)
            row = stacks.setdefault(key, StackFigures(g.stack))
            row.leaked_blocks += g.blocks
            row.leaked_bytes += g.bytes
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
                           self.analysis.peak_seq)


def difference(new: HeapProfile, base: HeapProfile) -> HeapProfile:
    """NEW's figures minus BASE's, stack by stack (matched by `frames_key`, as `diff` matches
    groups: function and file:line of each frame, never addresses), as pprof's -base."""
    stacks = {k: StackFigures(s.frames, s.alloc_blocks, s.alloc_bytes, s.leaked_blocks,
                              s.leaked_bytes, s.peak_blocks, s.peak_bytes)
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
                       base.analysis)


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
