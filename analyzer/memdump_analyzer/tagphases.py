"""Categories and phases (memdump_api.h's tags and MEMDUMP_PHASE): `memdump-analyze --by-tag`
and `--phases` (docs/tags.md), in one pass over the dump.

Each allocation belongs to the innermost tag its thread had pushed (`g`/`u` records) and to the
phase the process was in (`p SEQ phase NAME`). Per tag: what was allocated, the most it held at
once, and what is still live at the end, the program's (leaked) apart from the C/C++ runtime's own
blocks (rules.classify_stack, as the leak report). Per phase: what it allocated, what of that it
freed before the next phase began, and what *outlived* it (still live when the next phase began;
for the last phase, live at the end), grouped by allocation stack with the phase in which each such
block was finally freed, or "never".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from . import heappass
from .dumpfile import DumpReader, Frame
from .dumpformat import unescape
from .heappass import Accumulator, Figures
from .rules import classify_stack, trim_stack
from .wording import plural

__all__ = ["PhaseStats", "TagStats", "TagsAndPhases", "TagsPhasesOutput", "tags_and_phases"]

UNTAGGED = "(untagged)"
BEFORE = "(before the first phase)"
WHOLE_RUN = "(the whole run)"
NEVER = "never"


@dataclass
class TagStats:
    tag: str
    allocated_bytes: int = 0
    allocated_blocks: int = 0
    #: live at the end, the program's (the leak report's leaks)
    live_bytes: int = 0
    live_blocks: int = 0
    #: live at the end, the C/C++ runtime's own (the leak report's runtime blocks)
    runtime_bytes: int = 0
    runtime_blocks: int = 0
    peak_bytes: int = 0
    #: the event at which the tag's live bytes peaked
    peak_seq: int = 0


@dataclass
class Outlived:
    """Blocks of one allocation stack that outlived their phase."""

    node: int
    bytes: int = 0
    blocks: int = 0
    #: phase name -> blocks freed in it ("never": live at the end)
    freed_in: Counter = field(default_factory=Counter)
    stack: list[Frame] = field(default_factory=list)
    #: the C/C++ runtime's own blocks (rules.classify_stack)
    runtime: bool = False


@dataclass
class PhaseStats:
    phase: str
    seq: int
    allocated_bytes: int = 0
    allocated_blocks: int = 0
    freed_bytes: int = 0
    freed_blocks: int = 0
    outlived_bytes: int = 0
    outlived_blocks: int = 0
    groups: dict[int, Outlived] = field(default_factory=dict)


@dataclass
class TagsAndPhases:
    tags: list[TagStats]
    phases: list[PhaseStats]
    #: whether the dump has tags or phases at all (a program that does not use memdump_api.h)
    tagged: bool
    phased: bool


class _Block:
    __slots__ = ("size", "tag", "phase", "node", "outlived")

    def __init__(self, size: int, tag: TagStats, phase: int, node: int) -> None:
        self.size, self.tag, self.phase, self.node = size, tag, phase, node
        self.outlived = False


def tags_and_phases(path: str) -> TagsAndPhases:
    """The dump at PATH, read once. Raises DumpError as the leak report does."""
    out = TagsPhasesOutput()
    heappass.run_path(path, [out])
    return out.result


class TagsPhasesOutput(Accumulator):
    """--by-tag's and --phases's accumulator: each live block's tag, phase and stack; in the
    library's pass, its tables (analyzer/native/tagviews.c: this class's events are then not
    called)."""

    events = True
    native = frozenset(("tags", "phases"))

    def __init__(self) -> None:
        self.tags: dict[str | None, TagStats] = {}
        self.phases = [PhaseStats(BEFORE, 0)]
        self.live: dict[bytes, _Block] = {}
        self.reader: DumpReader | None = None
        self.ended: list[tuple[TagStats, int, int, int]] = []
        self.result = TagsAndPhases([], [], tagged=False, phased=False)

    def start(self, reader: DumpReader) -> None:
        self.reader = reader

    def alloc(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
              resize: bool) -> None:
        name = self.reader.tag_of(int(tid))  # type: ignore[union-attr]
        stats = self.tags.get(name)
        if stats is None:
            stats = self.tags[name] = TagStats(UNTAGGED if name is None else name or '""')
        stats.allocated_bytes += size
        stats.allocated_blocks += 1
        stats.live_bytes += size
        stats.live_blocks += 1
        if stats.live_bytes > stats.peak_bytes:
            stats.peak_bytes, stats.peak_seq = stats.live_bytes, seq
        phases = self.phases
        phase = phases[-1]
        phase.allocated_bytes += size
        phase.allocated_blocks += 1
        old = self.live.get(ptr)
        if old is not None:  # a block the dump never saw freed: gone
            _free(old, phases)
        self.live[ptr] = _Block(size, stats, len(phases) - 1, node)

    def release(self, seq: int, tid: bytes, ptr: bytes, size: int, node: int,
                made: bytes | None, last: bytes | None) -> None:
        _free(self.live.pop(ptr, None), self.phases)

    def record(self, seq: int, rec: list[bytes]) -> None:
        if rec[0] == b"p":
            if rec[2] == b"phase":
                _phase_begins(self.phases, self.live, unescape(rec[4]), seq)
            elif rec[2] == b"exec":
                self.live.clear()

    def finish(self, figures: Figures) -> None:
        if figures.views is not None:
            self._from_library(figures.views)
            self._conclude(figures, self.ended)
            return
        _phase_ends(self.phases, self.live)  # the last phase ends with the recording
        self._conclude(figures, [(b.tag, b.phase, b.node, b.size) for b in self.live.values()])

    def _from_library(self, views: dict) -> None:  # type: ignore[type-arg]
        """The figures of tagviews.c's tables (nativepass.py's `_tables`), the last phase
        ended; `ended`: the blocks live at the end as `_conclude` takes them."""
        names, phase_names = views["names"], views["phase_names"]
        tags = []
        for name_id, *figures in views["tags"]:
            name = names.get(name_id)
            stats = self.tags[name] = TagStats(UNTAGGED if name is None else name or '""')
            (stats.allocated_bytes, stats.allocated_blocks, stats.live_bytes, stats.live_blocks,
             stats.peak_bytes, stats.peak_seq) = figures
            tags.append(stats)
        self.phases = [PhaseStats(BEFORE if phase_names[name] is None else phase_names[name],
                                  seq, *figures) for seq, name, *figures in views["phases"]]
        groups = []
        for phase, node, nbytes, blocks in views["groups"]:
            group = self.phases[phase].groups[node] = Outlived(node, nbytes, blocks)
            groups.append(group)
        for group, name, blocks in views["freed_in"]:
            groups[group].freed_in[phase_names[name]] += blocks
        self.ended = [(tags[tag], phase, node, size) for tag, phase, node, size in views["live"]]

    def _conclude(self, figures: Figures, ended: list[tuple[TagStats, int, int, int]]) -> None:
        """The result, from the tags and phases (the last one ended) and the blocks live at the
        end (tag, phase, stack node, size each)."""
        reader, phases = figures.reader, self.phases
        for _, phase, node, _ in ended:
            phases[phase].groups[node].freed_in[NEVER] += 1
        kinds: dict[int, str] = {}
        for tag, _, node, size in ended:
            kind = kinds.get(node)
            if kind is None:
                kind = kinds[node] = classify_stack(trim_stack(reader.stack(abs(node))))
            if kind == "runtime":
                tag.live_bytes -= size
                tag.live_blocks -= 1
                tag.runtime_bytes += size
                tag.runtime_blocks += 1
        for phase in phases:
            for group in phase.groups.values():
                group.stack = reader.stack(abs(group.node))
                group.runtime = kinds.get(group.node) == "runtime"
        phased = len(phases) > 1
        if phases[0].allocated_blocks == 0 and phased:
            del phases[0]
        elif not phased:
            phases[0].phase = WHOLE_RUN
        order = sorted(self.tags.values(), key=lambda t: (-t.allocated_bytes, t.tag))
        self.result = TagsAndPhases(order, phases, tagged=any(n is not None for n in self.tags),
                                    phased=phased)


def _free(block: _Block | None, phases: list[PhaseStats]) -> None:
    if block is None:
        return
    block.tag.live_bytes -= block.size
    block.tag.live_blocks -= 1
    current = len(phases) - 1
    if block.outlived:
        phases[block.phase].groups[block.node].freed_in[phases[current].phase] += 1
    elif block.phase == current:
        phases[current].freed_bytes += block.size
        phases[current].freed_blocks += 1


def _phase_begins(phases: list[PhaseStats], live: dict[bytes, _Block], name: str,
                  seq: int) -> None:
    _phase_ends(phases, live)
    phases.append(PhaseStats(name if name != "-" else "", seq))


def _phase_ends(phases: list[PhaseStats], live: dict[bytes, _Block]) -> None:
    """The blocks the ending phase allocated and that are still live outlive it."""
    ending = len(phases) - 1
    phase = phases[ending]
    for block in live.values():
        if block.phase == ending and not block.outlived:
            block.outlived = True
            phase.outlived_bytes += block.size
            phase.outlived_blocks += 1
            group = phase.groups.get(block.node)
            if group is None:
                group = phase.groups[block.node] = Outlived(block.node)
            group.bytes += block.size
            group.blocks += 1


# -- rendering ------------------------------------------------------------------------------------

#: the JSON's `format` and `version` (docs/tags.md)
FORMAT = "memdump-tags"
VERSION = 1


def _pair(nbytes: int, blocks: int) -> dict[str, int]:
    return {"bytes": nbytes, "blocks": blocks}


def _frame(frame: Frame) -> dict[str, object]:
    return {"function": frame.function, "file": frame.file, "line": frame.line,
            "module": frame.module, "offset": f"0x{frame.offset:x}"}


def tags_json(result: TagsAndPhases, path: str,
              series: dict[str, list[list[int]]] | None = None) -> dict[str, object]:
    """`series`: each tag's live bytes over time (views.tag_series), as `series`."""
    return {"format": FORMAT, "version": VERSION, "view": "tags", "dump": path,
            "tags": [{"tag": t.tag, "allocated": _pair(t.allocated_bytes, t.allocated_blocks),
                      "peak_bytes": t.peak_bytes, "peak_seq": t.peak_seq,
                      "leaked": _pair(t.live_bytes, t.live_blocks),
                      "runtime": _pair(t.runtime_bytes, t.runtime_blocks),
                      **({} if series is None else {"series": series.get(t.tag, [])})}
                     for t in result.tags]}


def phases_json(result: TagsAndPhases, path: str, max_frames: int | None) -> dict[str, object]:
    return {"format": FORMAT, "version": VERSION, "view": "phases", "dump": path,
            "phases": [{
                "phase": p.phase, "seq": p.seq,
                "allocated": _pair(p.allocated_bytes, p.allocated_blocks),
                "freed_in_phase": _pair(p.freed_bytes, p.freed_blocks),
                "outlived": _pair(p.outlived_bytes, p.outlived_blocks),
                "groups": [{"bytes": g.bytes, "blocks": g.blocks, "runtime": g.runtime,
                            "freed_in": dict(sorted(g.freed_in.items(), key=_freed_order)),
                            "stack": [_frame(f) for f in g.stack[:max_frames]]}
                           for g in _groups(p)],
            } for p in result.phases]}


def _groups(phase: PhaseStats) -> list[Outlived]:
    return sorted(phase.groups.values(), key=lambda g: (-g.bytes, -g.blocks, g.node))


def _freed_order(item: tuple[str, int]) -> tuple[bool, str]:
    return item[0] == NEVER, ""


def _size(nbytes: int, blocks: int) -> str:
    return f"{plural(nbytes, 'byte')} in {plural(blocks, 'block')}"


def _where(frame: Frame) -> str:
    name = frame.function or (f"{frame.module}+0x{frame.offset:x}" if frame.module else "??")
    if frame.file:
        return f"{name} ({frame.file.rsplit('/', 1)[-1]}:{frame.line})"
    return name


def tags_text(result: TagsAndPhases, path: str,
              series: dict[str, list[list[int]]] | None = None) -> str:
    """`series`: each tag's live bytes over time (views.tag_series), as a table after the
    totals when the dump has tags."""
    out = [f"memdump tags of {path}"]
    if not result.tagged:
        out.append("note: the program pushed no memdump_api.h tag: every block is untagged")
    rows = [("tag", "allocated", "blocks", "peak", "leaked", "blocks")]
    rows += [(t.tag, f"{t.allocated_bytes:,}", f"{t.allocated_blocks:,}", f"{t.peak_bytes:,}",
              f"{t.live_bytes:,}", f"{t.live_blocks:,}") for t in result.tags]
    runtime = (sum(t.runtime_bytes for t in result.tags),
               sum(t.runtime_blocks for t in result.tags))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    out.append("")
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:],
                                                                         strict=True)]
        out.append("  ".join(cells).rstrip())
    if runtime[1]:
        out += ["", f"not leaked: the C/C++ runtime's own {plural(runtime[0], 'byte')} in "
                f"{plural(runtime[1], 'block')} live at the end (stdio buffers, the loader's "
                "data...: the leak report's --show-runtime lists them)"]
    if series and result.tagged:
        out += ["", "live bytes over time (at the points of `memdump-analyze timeline`):", ""]
        out += _series_table([t.tag for t in result.tags if t.tag in series], series)
    return "\n".join(out) + "\n"


def _series_table(tags: list[str], series: dict[str, list[list[int]]]) -> list[str]:
    events = [seq for seq, _ in series[tags[0]]] if tags else []
    rows = [("event", *tags)] + [(f"{seq:,}", *(f"{series[t][i][1]:,}" for t in tags))
                                 for i, seq in enumerate(events)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]


def phases_text(result: TagsAndPhases, path: str, max_frames: int | None) -> str:
    out = [f"memdump phases of {path}"]
    if not result.phased:
        out.append("note: the program marked no MEMDUMP_PHASE: one phase, the whole run")
    for p in result.phases:
        outlived = "live at the end" if p is result.phases[-1] else "outlived it"
        out.append("")
        out.append(f"PHASE {p.phase!r} (from event {p.seq:,}): allocated "
                   f"{_size(p.allocated_bytes, p.allocated_blocks)}, freed within it "
                   f"{_size(p.freed_bytes, p.freed_blocks)}, {outlived} "
                   f"{_size(p.outlived_bytes, p.outlived_blocks)}")
        for g in _groups(p):
            fates = ", ".join(f"{n:,} in {name!r}" if name != NEVER else f"{n:,} never"
                              for name, n in sorted(g.freed_in.items(), key=_freed_order))
            whose = " (the C/C++ runtime's own)" if g.runtime else ""
            out.append(f"  {_size(g.bytes, g.blocks)}{whose} freed: {fates}")
            for i, frame in enumerate(g.stack[:max_frames]):
                out.append(f"    #{i} {_where(frame)}")
    return "\n".join(out) + "\n"
