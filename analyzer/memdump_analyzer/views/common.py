"""What the views share: stacks grouped by what they show, the JSON envelope, the text helpers, and
`--base` (NEW minus BASE, stacks matched by their frames' functions and file:line)."""

from __future__ import annotations

import functools
import heapq
import operator
from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from .. import nativegroups
from ..dumpfile import DumpReader, Frame
from ..leaktext import clean, frame_json, frame_key, stack_text
from ..rules import is_allocator_frame, is_main_frame
from ..wording import plural
from .stream import Profile, StackStats, TableStacks

__all__ = [
    "VIEW_FORMAT",
    "VIEW_VERSION",
    "Group",
    "LazyGroups",
    "Options",
    "Side",
    "counted",
    "envelope",
    "group_stacks",
    "minus",
    "ms_text",
    "percent",
    "plural",
    "ranked",
    "stack_json",
    "stack_lines",
    "stack_nodes",
    "trimmed_nodes",
]

VIEW_FORMAT = "memdump-view"
VIEW_VERSION = "2.0"

#: a stack as matched across dumps: each frame's function and file:line (module+offset without
#: a line), never its address
StackKey = tuple[tuple[str, ...], ...]


@dataclass
class Options:
    """The options every view takes."""

    top: int | None = None
    max_frames: int | None = None
    points: int = 200
    sort: str = "both"


class Group:
    """The stacks of one dump that show alike (same functions and lines), their figures added.
    Its stack, its text and its free stacks are made when first read: a view reads them only
    for the groups it shows (and, for its order, the text of those tied with them)."""

    __slots__ = ("_freed_by", "_made", "_stack", "_stacks", "_text", "stats")

    def __init__(self, stack: tuple[Frame, ...], stats: StackStats,
                 freed_by: dict[Any, list[Any]] | None = None,
                 text: tuple[tuple[str, str, int], ...] | None = None,
                 made: _Stacks | None = None) -> None:
        self.stats = stats
        self._stack = stack
        #: the free stacks of this group's blocks: their group -> [frames, blocks]
        self._freed_by = freed_by
        #: the stack's text as `sorted_groups` breaks ties with it
        self._text = text
        #: what makes the rest from the stats' first node, when first read
        self._stacks = self._made = made

    def _make(self) -> None:
        made, self._made = self._made, None
        assert made is not None
        self._stack = made.frames(self.stats.node)
        self._text = tuple(map(_frame_text, self._stack))

    @property
    def stack(self) -> tuple[Frame, ...]:
        if self._made is not None:
            self._make()
        return self._stack

    @property
    def text(self) -> tuple[tuple[str, str, int], ...]:
        if self._made is not None:
            self._make()
        if self._text is None:
            self._text = tuple(map(_frame_text, self._stack))
        return self._text

    @property
    def freed_by(self) -> dict[Any, list[Any]]:
        if self._freed_by is None:
            stacks = self._stacks
            self._freed_by = {}
            for node, n in self.stats.freed_by.items():
                assert stacks is not None
                row = self._freed_by.setdefault(stacks.group(node), [None, 0])
                if row[0] is None:
                    row[0] = stacks.frames(node)
                row[1] += n
        return self._freed_by

    @property
    def key(self) -> StackKey:
        """The stack as matched across dumps."""
        return tuple(map(frame_key, self.stack))


@dataclass
class Side:
    """One dump, passed: its path, its figures and its groups by stack key."""

    path: str
    profile: Profile
    groups: Mapping[StackKey, Group]
    #: the dump's `i` records (its recorder...)
    info: dict[str, str] = field(default_factory=dict)
    #: the view's own accumulator after the pass (its module's `accumulator()`), if it has one
    accumulated: Any = None


def _frame_text(f: Frame) -> tuple[str, str, int]:
    return (f.function or "", f.file or "", f.line or 0)


def _add(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _merge(a: StackStats, b: StackStats) -> StackStats:
    return StackStats(
        a.node, a.live_bytes + b.live_bytes, a.live_blocks + b.live_blocks,
        a.peak_bytes + b.peak_bytes, a.peak_blocks + b.peak_blocks,
        a.allocations + b.allocations, a.allocated_bytes + b.allocated_bytes,
        a.temporary + b.temporary, a.temporary_bytes + b.temporary_bytes, a.frees + b.frees,
        _add(a.lifetimes, b.lifetimes), _add(a.lifetimes_ms, b.lifetimes_ms),
        _add(a.freed_by, b.freed_by),
    )


def trimmed_nodes(reader: DumpReader) -> Callable[[int], tuple[Frame, ...]]:
    """Each stack node's stack as `rules.trim_stack` shows it (allocator frames and what is below
    main removed), made once per node from its parent's. A node's frames are its own (with their
    inlined code's) then its parent's, so its leading allocator frames and its outermost `main`
    follow from its parent's: the stacks of a dump, which share most of their nodes, cost a tuple
    and a slice each rather than a walk and a trim of the whole stack."""
    nodes, table, inlined_into = reader.nodes, reader.frames, reader.inlined_into
    # frame number -> its frames, how many of them lead as allocator frames, the index of the
    # outermost `main` among them (-1: none)
    own: dict[int, tuple[tuple[Frame, ...], int, int]] = {}
    # node -> its whole stack, its leading allocator frames, the index of its outermost `main`
    memo: dict[int, tuple[tuple[Frame, ...], int, int]] = {0: ((), 0, -1)}

    def frames_of(frame: int) -> tuple[tuple[Frame, ...], int, int]:
        outer = inlined_into.get(frame)
        fs = (table[frame], *outer) if outer else (table[frame],)
        lead = 0
        while lead < len(fs) and is_allocator_frame(fs[lead]):
            lead += 1
        main = next((i for i in range(len(fs) - 1, -1, -1) if is_main_frame(fs[i])), -1)
        got = own[frame] = (fs, lead, main)
        return got

    def trimmed(node: int) -> tuple[Frame, ...]:
        got = memo.get(node)
        path = []
        while got is None:
            parent, frame = nodes[node]
            path.append((node, frame))
            node = parent
            got = memo.get(node)
        full, lead, main = got
        for ident, frame in reversed(path):
            fs, own_lead, own_main = own.get(frame) or frames_of(frame)
            n = len(fs)
            lead = own_lead + lead if own_lead == n else own_lead
            main = n + main if main >= 0 else own_main
            full = fs + full
            memo[ident] = (full, lead, main)
        # a stack of allocator frames alone is kept whole
        start = lead if lead < len(full) else 0
        return full[start:main + 1] if main >= start else full[start:]

    return trimmed


class LazyGroups(Mapping[Any, Group]):
    """`group_stacks(reader, profile)`, made when first read: the views that show no stack
    (`timeline`, `sizes`, the HTML page's series) do not pay for grouping the stacks. On the
    library's table of stacks (stream.TableStacks), when no two of its stacks show alike (each
    group one stack), a view reads the groups' figures as columns and makes the groups it shows
    alone (`column`, `pick`: what `ranked` reads)."""

    def __init__(self, reader: DumpReader, profile: Profile,
                 nodes: Sequence[int] | None = None) -> None:
        self._args: tuple[DumpReader, Profile] | None = (reader, profile)
        #: the profile's `stack_nodes`, when known
        self._nodes = nodes
        self._groups: dict[Any, Group] | None = None
        #: the stacks, the table, each stack's group: when each group is one stack
        self._table: tuple[_Stacks, TableStacks, list[int]] | None = None

    def _grouped(self) -> None:
        if self._args is None:
            return
        reader, profile = self._args
        self._args = None
        stacks = _Stacks(reader, self._nodes if self._nodes is not None else stack_nodes(profile))
        table = profile.stacks
        if stacks.native and isinstance(table, TableStacks):
            gids = list(map(stacks.group, table.column("node")))
            if len(set(gids)) == len(gids):
                self._table = (stacks, table, gids)
                return
        self._groups = group_stacks(reader, profile, stacks)

    def _made(self) -> dict[Any, Group]:
        self._grouped()
        if self._groups is None:
            assert self._table is not None
            stacks, table, gids = self._table
            self._groups = {gid: Group((), stats, made=stacks)
                            for gid, stats in zip(gids, table.values(), strict=True)}
        return self._groups

    def column(self, name: str) -> list[int]:
        """Each group's figure `name` (a StackStats field), in the groups' order."""
        self._grouped()
        if self._groups is None and self._table is not None:
            return self._table[1].column(name)
        return [getattr(g.stats, name) for g in self._made().values()]

    def pick(self, positions: list[int]) -> list[Group]:
        """The groups at `positions` in the groups' order."""
        self._grouped()
        if self._groups is None and self._table is not None:
            stacks, table, _ = self._table
            return [Group((), stats, made=stacks) for stats in table.stats_of(positions)]
        every = list(self._made().values())
        return [every[i] for i in positions]

    def __getitem__(self, key: Any) -> Group:  # noqa: ANN401 - a group's id
        return self._made()[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._made())

    def __len__(self) -> int:
        self._grouped()
        return len(self._table[2]) if self._groups is None and self._table else len(self._made())

    # the views read every group: the dict's own views, not a look-up per key
    def keys(self) -> KeysView[Any]:
        return self._made().keys()

    def values(self) -> ValuesView[Group]:
        return self._made().values()

    def items(self) -> ItemsView[Any, Group]:
        return self._made().items()


class _Stacks:
    """A dump's stack nodes as the views group and show them: a node's group (its key, or the
    library's id for it), its trimmed frames. `nodes`: those whose groups are asked for (the
    library walks those alone), None: any."""

    def __init__(self, reader: DumpReader, nodes: Iterable[int] | None = None) -> None:
        self.frames = functools.cache(trimmed_nodes(reader))
        ids = nativegroups.node_groups(reader, frame_key, nodes)
        #: the groups are the library's ids (node_groups)
        self.native = ids is not None
        self.group: Callable[[int], Any] = self._key if ids is None else ids.__getitem__
        if ids is None:  # each frame's key by the frame's id (the reader keeps its frames): a
            # stack's keys are then found without a call per frame
            every = [*reader.frames.values(), *(f for chain in reader.inlined_into.values()
                                                for f in chain)]
            self._key_of = {id(f): frame_key(f) for f in every}.__getitem__

    def _key(self, node: int) -> StackKey:
        return tuple(map(self._key_of, map(id, self.frames(node))))


def stack_nodes(p: Profile) -> list[int]:
    """The nodes of the stacks profile `p` shows, the allocating stacks and those that freed
    their blocks, each once, in order."""
    stacks = p.stacks
    if isinstance(stacks, TableStacks):
        nodes = set(stacks.column("node"))
        nodes.update(stacks.table.freed_nodes())
    else:
        nodes = set(stacks)
        for stats in stacks.values():
            nodes.update(stats.freed_by)
    return sorted(nodes)


def group_stacks(reader: DumpReader, profile: Profile,
                 stacks: _Stacks | None = None) -> dict[Any, Group]:
    """The profile's stacks grouped by how they show (trimmed of allocator frames and of what
    is below main, as the leak report shows them), by their group's id (`_Stacks.group`)."""
    stacks = stacks or _Stacks(reader)
    group = stacks.group
    groups: dict[Any, Group] = {}
    for node, stats in profile.stacks.items():
        gid = group(node)
        g = groups.get(gid)
        if g is None:
            groups[gid] = Group((), stats, made=stacks)
        else:
            g.stats = _merge(g.stats, stats)
    return groups


def minus(new: Mapping[Any, Group], base: Mapping[Any, Group],
          fields: Sequence[str]) -> dict[StackKey, Group]:
    """NEW's groups with BASE's figures of `fields` subtracted (a group BASE alone has comes with
    negative figures); the other figures stay NEW's (BASE's for a group NEW has not)."""
    new = {g.key: g for g in new.values()}
    base = {g.key: g for g in base.values()}
    out: dict[StackKey, Group] = {}
    for key in (*new, *(k for k in base if k not in new)):
        mine, theirs = new.get(key), base.get(key)
        g = mine or theirs
        assert g is not None
        stats = StackStats(**{f: getattr(g.stats, f) for f in StackStats.__dataclass_fields__})
        for name in fields:
            value = (getattr(mine.stats, name) if mine else 0) - (
                getattr(theirs.stats, name) if theirs else 0)
            setattr(stats, name, value)
        out[key] = Group(g.stack, stats, g.freed_by, g.text)
    return out


def top(rows: list[Any], n: int | None) -> tuple[list[Any], int]:
    """The first `n` rows, and how many were left out."""
    if n is None or len(rows) <= n:
        return rows, 0
    return rows[:n], len(rows) - n


def stack_json(stack: Sequence[Frame], max_frames: int | None) -> list[dict[str, Any]]:
    shown = stack if max_frames is None else stack[:max_frames]
    return [frame_json(f) for f in shown]


def stack_lines(stack: Sequence[Frame], max_frames: int | None, indent: str = "    ") -> list[str]:
    return stack_text(stack, max_frames, indent=indent)


def group_lines(entries: Iterable[tuple[str, Sequence[Frame]]], more: int,
                max_frames: int | None) -> list[str]:
    """The text of a view's groups: each one's title after a blank line, then its stack; last,
    how many groups --top left out."""
    lines: list[str] = []
    for title, stack in entries:
        lines += ["", title, *stack_lines(stack, max_frames)]
    return lines + more_lines(more)


def more_lines(more: int) -> list[str]:
    """The line saying how many groups --top left out (none when it left none)."""
    return ["", f"... {plural(more, 'more stack')} (--top)"] if more else []


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def ms_text(ms: int | None) -> str:
    return "" if ms is None else f", {ms:,} ms"


def envelope(view: str, side: Side, base: Side | None, body: dict[str, Any]) -> dict[str, Any]:
    """A view's JSON: format, version, view, the dumps, whether times are known, then its body."""
    return {
        "format": VIEW_FORMAT,
        "version": VIEW_VERSION,
        "view": view,
        "dump": clean(side.path),
        "base": None if base is None else clean(base.path),
        "clocked": side.profile.clocked,
        **body,
    }


def heading(view: str, side: Side, base: Side | None) -> str:
    """The first line of a view's text."""
    what = f"{view} of {clean(side.path)}"
    if base is not None:
        what += f" minus {clean(base.path)}"
    return what


def sorted_groups(groups: Iterable[Group], key: Callable[[Group], tuple[Any, ...]]) -> list[Group]:
    """Groups largest first by `key`, ties broken by the stack's text, so the order is stable."""
    return sorted(groups, key=lambda g: (key(g), g.text))


def ranked(groups: Mapping[Any, Group], fields: tuple[str, str], n: int | None,
           nonzero: bool = False) -> tuple[list[Group], int]:
    """The first `n` groups largest first by their figures `fields` (StackStats'), ties broken
    by the stack's text (`sorted_groups`), and how many were left out; `nonzero`: only the
    groups with either figure. The figures are read as columns (`LazyGroups.column`) and the
    groups made, with their stack's text, only for those whose figures are among the first `n`
    (ties included)."""
    if isinstance(groups, LazyGroups):
        first, second = (groups.column(f) for f in fields)
        pick = groups.pick
    else:
        every = list(groups.values())
        first, second = ([getattr(g.stats, f) for g in every] for f in fields)

        def pick(positions: list[int]) -> list[Group]:
            return [every[i] for i in positions]

    rows: Sequence[int] = list(compress(range(len(first)), map(operator.or_, first, second))) \
        if nonzero else range(len(first))
    more = 0
    if n is not None and len(rows) > n:
        more = len(rows) - n
        # the first n have the n largest first figures: the rows with the n-th of them or more
        # (a few, but for ties) are those whose keys are made and compared
        firsts = first if len(rows) == len(first) else list(map(first.__getitem__, rows))
        least = heapq.nlargest(n, firsts)[-1]
        rows = list(compress(rows, map(least.__le__, firsts)))
        keys = list(zip(map(operator.neg, map(first.__getitem__, rows)),
                        map(operator.neg, map(second.__getitem__, rows)), strict=True))
        last = heapq.nsmallest(n, keys)[-1]
        rows = list(compress(rows, map(last.__ge__, keys)))
    a, b = fields
    shown = sorted_groups(pick(list(rows)), lambda g: (-getattr(g.stats, a),
                                                       -getattr(g.stats, b)))
    return shown[:n], more


def plural_s(n: int) -> str:
    """The plural's `s` for a count `n`."""
    return "" if abs(n) == 1 else "s"


def counted(n: int, word: str, diff: bool) -> str:
    """`1 block`, `2 blocks`; in a difference `+1 block`, `-2 blocks`."""
    return f"{signed(n, diff)} {word}{plural_s(n)}"


def signed(n: int, diff: bool) -> str:
    """`1,234`, or `+1,234` / `-1,234` in a difference."""
    return f"{n:+,}" if diff else f"{n:,}"
