"""nativegroups: the views' grouping of stack nodes in libmemdump_core.so (groups.c) groups the
nodes as views/common.py's Python does (each node's stack trimmed by `trimmed_nodes`, then its
frames' keys), and the frames reached from a set of nodes are those `frames_without_symbols`'s
Python walk meets, in its order; on random stack trees with allocator frames, `main`s, inlined
code and frames that show alike (same function and file:line, or module and offset, at other
addresses), and with undefined nodes and frames left to Python."""

from __future__ import annotations

import operator
import random
from array import array
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from memdump_analyzer import native, nativegroups
from memdump_analyzer.dumpdefs import Frame
from memdump_analyzer.leaktext import frame_key
from memdump_analyzer.views.common import trimmed_nodes


@pytest.fixture(autouse=True)
def _library_built() -> None:
    """A build without the library must fail here, not fall back to Python silently."""
    lib = native.library()
    assert lib is not None and nativegroups._typed(lib) is not None, (
        f"{native.library_path()} missing, old or not loadable: run `make build`")


class _Nodes(dict):  # type: ignore[type-arg]
    """node -> (PARENT, FRAME), with the arrays native.py's table of nodes has."""

    def __init__(self, nodes: dict[int, tuple[int, int]], cap: int) -> None:
        super().__init__(nodes)
        self._final = True
        self._cap = cap
        self._flags = array("B", bytes(cap))
        self._parents = array("i", bytes(4 * cap))
        self._frames = array("i", bytes(4 * cap))
        for ident, (parent, frame) in nodes.items():
            if ident:
                self._flags[ident] = 1
                self._parents[ident], self._frames[ident] = parent, frame


def _reader(seed: int, n_nodes: int = 500, n_frames: int = 16,
            wide: bool = False) -> Any:  # noqa: ANN401 - a stand-in DumpReader
    """A random tree of `n_nodes` nodes over `n_frames - 1` frames, each node's parent one of the
    40 before it (`wide`: one of the first three, each with hundreds of children)."""
    from types import SimpleNamespace

    rng = random.Random(seed)
    names = ["malloc", "operator new(unsigned long)", "main", "f", "g", None, "realloc",
             "__libc_start_main"]
    files = [None, "/src/a.c", "/other/a.c", "/src/b.c"]

    def frame(pc: int) -> Frame:
        file = rng.choice(files)
        return Frame(pc, rng.choice(["/bin/a.out", "/lib/libc.so.6"]), rng.choice([pc, 7]),
                     rng.choice(names), file, rng.choice([1, 2]) if file else None)

    frames = {i: frame(i) for i in range(1, n_frames)}
    inlined = {i: tuple(frame(i) for _ in range(rng.randint(1, 2)))
               for i in rng.sample(range(1, n_frames), 4)}
    nodes: dict[int, tuple[int, int]] = {0: (0, 0)}
    for ident in rng.sample(range(1, 2 * n_nodes), n_nodes):
        nodes[ident] = (0, rng.randint(1, n_frames - 1))
    idents = sorted(nodes)
    for i, ident in enumerate(idents[1:], 1):  # a tree: each node's parent one before it
        near = idents[1:min(i, 4)] if wide else idents[max(1, i - 40):i]
        nodes[ident] = (rng.choice([0, *near]), nodes[ident][1])
    return SimpleNamespace(nodes=_Nodes(nodes, 2 * n_nodes + 1), frames=frames,
                           inlined_into=inlined, symbolized=set())


@pytest.mark.parametrize("seed", range(30))
def test_nodes_grouped_in_c_as_python_groups_them(seed: int) -> None:
    reader = _reader(seed)
    gid = nativegroups.node_groups(reader, frame_key)
    assert gid is not None
    trimmed = trimmed_nodes(reader)
    of_key: dict[Any, int] = {}
    of_gid: dict[int, Any] = {}
    for ident in reader.nodes:
        key = tuple(map(frame_key, trimmed(ident)))
        assert of_key.setdefault(key, gid[ident]) == gid[ident], ident
        assert of_gid.setdefault(gid[ident], key) == key, ident
        assert (gid[ident] == 0) == (key == ()), ident
    undefined = set(range(reader.nodes._cap)) - set(reader.nodes)
    assert all(gid[i] == -1 for i in undefined)
    # the random trees make groups of several nodes, and single ones
    sizes = [list(gid).count(g) for g in of_gid]
    assert max(sizes) > 1 and min(sizes) == 1


@pytest.mark.parametrize("seed", range(12))
def test_the_groups_of_some_nodes_are_theirs_among_all(seed: int) -> None:
    """node_groups of chosen nodes (negated: marked) walks those alone: the same partition of
    them as the groups of every node, -1 for the others; on trees with nodes of hundreds of
    children (`wide`: the library's table of cells then probes far from a tail's slots)."""
    rng = random.Random(seed)
    reader = _reader(seed, 3000, 1500, wide=seed % 2 == 0)
    every = nativegroups.node_groups(reader, frame_key)
    chosen = rng.sample(sorted(reader.nodes), 400)
    some = nativegroups.node_groups(reader, frame_key,
                                    [-n if rng.random() < 0.2 else n for n in chosen])
    assert every is not None and some is not None
    pairs = {(some[n], every[n]) for n in chosen}
    assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})
    assert all((some[n] == 0) == (every[n] == 0) for n in chosen)
    assert all(some[n] == -1 for n in set(range(reader.nodes._cap)) - set(chosen))
    trimmed = trimmed_nodes(reader)
    of_key: dict[Any, int] = {}
    for n in chosen:
        assert of_key.setdefault(tuple(map(frame_key, trimmed(n))), some[n]) == some[n], n
    assert nativegroups.node_groups(reader, frame_key, [reader.nodes._cap]) is None
    assert nativegroups.node_groups(reader, frame_key, []) is not None


def _walk(reader: Any, nodes: list[int]) -> list[int]:  # noqa: ANN401
    """frames_without_symbols's walk, every frame kept."""
    seen: dict[int, None] = {}
    done: set[int] = set()
    for node in nodes:
        node = abs(node)
        while node and node not in done:
            done.add(node)
            node, frame = reader.nodes[node]
            seen.setdefault(frame)
    return list(seen)


@pytest.mark.parametrize("seed", range(30))
def test_frames_reached_in_c_as_python_meets_them(seed: int) -> None:
    from memdump_analyzer.symbolize import frames_without_symbols

    reader = _reader(seed)
    rng = random.Random(seed)
    starts = rng.sample(sorted(reader.nodes), 60)
    starts = [-n if rng.random() < 0.2 else n for n in starts]
    assert nativegroups.reached_frames(reader, starts) == _walk(reader, starts)
    for ident, f in reader.frames.items():
        if rng.random() < 0.5:
            reader.frames[ident] = replace(f, function=None)
    reader.symbolized = {1, 2}
    want = [f for f in _walk(reader, starts)
            if reader.frames[f].function is None and f not in reader.symbolized]
    assert frames_without_symbols(reader, iter(starts)) == want


def test_undefined_nodes_and_frames_are_left_to_python() -> None:
    reader = _reader(1)
    leaf = max(reader.nodes)
    parent = reader.nodes[leaf][0]
    del reader.frames[reader.nodes[leaf][1]]  # a frame the dump never defined
    assert nativegroups.node_groups(reader, frame_key) is None
    with pytest.raises(KeyError):  # Python's walk says which
        trimmed_nodes(reader)(leaf)
    reader = _reader(1)
    if parent:
        reader.nodes._flags[parent] = 0  # a parent the dump never defined
        assert nativegroups.node_groups(reader, frame_key) is None
        assert nativegroups.reached_frames(reader, [leaf]) is None
    reader.nodes._parents[leaf] = leaf  # a node its own ancestor
    reader.nodes._flags[parent] = 1
    assert nativegroups.node_groups(reader, frame_key) is None


@pytest.mark.parametrize("seed", range(20))
def test_ranked_is_the_sorted_groups_first(seed: int) -> None:
    """views.common.ranked (the text made only for the groups tied with the first N) gives the
    first N of sorted_groups, ties broken by the text, equal texts in the groups' order, with
    and without the groups whose two figures are 0 (the rows it compares chosen by the first
    figure: many tie)."""
    from memdump_analyzer.views.common import Group, ranked, sorted_groups, top
    from memdump_analyzer.views.stream import StackStats

    rng = random.Random(seed)
    groups = []
    for i in range(rng.randint(0, 60)):
        low = -2 if seed % 2 else 0  # a difference's figures (--base) may be negative
        stats = StackStats(i, 0, 0, rng.randint(low, 4), rng.randint(low, 2), 0, 0, 0, 0, 0, {},
                           {}, {})
        text = tuple(("f", rng.choice("ab"), rng.randint(1, 2)) for _ in range(rng.randint(1, 2)))
        groups.append(Group((), stats, text=text))

    def key(g: Group) -> tuple[int, int]:
        return (-g.stats.peak_bytes, -g.stats.peak_blocks)

    by_id = dict(enumerate(groups))
    for n in (None, 1, 3, 10, 100):
        for nonzero in (False, True):
            shown, more = ranked(by_id, ("peak_bytes", "peak_blocks"), n, nonzero)
            rows = [g for g in groups if not nonzero or g.stats.peak_bytes or g.stats.peak_blocks]
            want, want_more = top(sorted_groups(rows, key), n)
            assert [g.stats.node for g in shown] == [g.stats.node for g in want]
            assert more == want_more


@pytest.mark.parametrize("seed", range(30))
def test_stack_rows_in_c_as_python_makes_them(seed: int) -> None:
    """The exports' rows (groups.c's mdc_stack_rows): one row per group, numbered as the wanted
    nodes first meet them, each with its first node's trimmed frames (the reader's own frames)
    and their keys, as `trimmed_nodes` and `frame_key` make them."""
    reader = _reader(seed)
    rng = random.Random(seed)
    defined = sorted(reader.nodes)
    wanted = [rng.choice(defined) for _ in range(rng.randint(0, 700))]
    got = nativegroups.stack_rows(reader, frame_key, wanted)
    assert got is not None
    row_of, frames, keys = got.row_of, got.frames, got.keys
    # the same rows flat: row r's frames are the entries at index[ends[r]:ends[r + 1]]
    assert len(got.ends) == len(frames) + 1 and got.ends[-1] == len(got.index)
    for r, mine in enumerate(frames):
        flat = got.index[got.ends[r]:got.ends[r + 1]]
        assert len(flat) == len(mine) and all(map(operator.is_, mine, map(got.entries.__getitem__,
                                                                           flat)))
    trimmed = trimmed_nodes(reader)
    rows: dict[Any, int] = {}
    want_frames = []
    for node, row in zip(wanted, row_of, strict=True):
        key = tuple(map(frame_key, trimmed(node)))
        if key not in rows:
            rows[key] = len(rows)
            want_frames.append(trimmed(node))
        assert rows[key] == row, node
    assert keys == list(rows)
    assert len(frames) == len(want_frames)
    for mine, theirs in zip(frames, want_frames, strict=True):
        assert len(mine) == len(theirs) and all(map(operator.is_, mine, theirs))
    # rows of several nodes
    if len(wanted) > 200:
        assert len(rows) < len(set(wanted))
    # node 0, the empty stack
    got = nativegroups.stack_rows(reader, frame_key, [*wanted, 0])
    assert got is not None
    assert got.frames[got.row_of[-1]] == got.keys[got.row_of[-1]] == ()


def test_stack_rows_of_undefined_nodes_are_left_to_python() -> None:
    reader = _reader(2)
    undefined = next(i for i in range(reader.nodes._cap) if i not in reader.nodes)
    assert nativegroups.stack_rows(reader, frame_key, [1, undefined]) is None
    assert nativegroups.stack_rows(reader, frame_key, [-1]) is None
    assert nativegroups.stack_rows(reader, frame_key, [reader.nodes._cap]) is None
    empty = nativegroups.stack_rows(reader, frame_key, [])
    assert empty is not None
    assert (empty.row_of, empty.frames, empty.keys, empty.index, empty.ends) == (
        array("q"), [], [], array("i"), array("q", [0]))


@pytest.mark.parametrize("seed", range(10))
def test_exports_byte_for_byte_on_generated_dumps(seed: int, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """pprof (alone and minus another dump), collapsed and massif (every metric's stacks, the
    snapshots' trees) the same with the stacks' rows and pprof's samples (pprof.c) made in C or
    in Python, on generated dumps whose stacks often show alike and have inlined frames."""
    from gendump import Dump, check_generated
    from memdump_analyzer import analyze
    from memdump_analyzer.dumpfile import DumpError
    from memdump_analyzer.exports import export, pprofnative

    base_path = tmp_path / "base.memdump"
    base_path.write_bytes(Dump(random.Random(seed + 1000)).build(60))

    def exports(path: Path) -> list[Any]:
        outs = []
        for engine in ("0", "1"):
            monkeypatch.setenv("MEMDUMP_NATIVE", engine)
            calls = []
            monkeypatch.setattr(nativegroups, "stack_rows", _spy(nativegroups.stack_rows, calls))
            monkeypatch.setattr(pprofnative, "samples", _spy(pprofnative.samples, calls))
            # the distinct runs' room short at first: grown until they fit
            monkeypatch.setattr(pprofnative, "RUNS_ROOM", 1 + seed % 3)
            try:
                analysis = analyze(str(path))
                got: list[Any] = [export(name, analysis, symbolize=False)
                                  for name in ("pprof", "massif")]
                got += [export("collapsed", analysis, metric=m, symbolize=False)
                        for m in ("leaked-bytes", "alloc-count", "peak-bytes")]
                got.append(export("pprof", analysis, analyze(str(base_path)), symbolize=False))
            except DumpError as e:
                got = [str(e)]
            outs.append(got)
            if engine == "1" and not isinstance(got[0], str):
                # made in C: the rows of 7 profiles (the base's among them), pprof's samples twice
                assert len(calls) == 7 + 2 and all(c is not None for c in calls)
        assert outs[0] == outs[1]
        return outs[1]

    check_generated(seed, tmp_path / "gen.memdump", exports)


def _spy(real: Any, calls: list[Any]) -> Any:  # noqa: ANN401 - `real`, its answers kept
    def spy(*args: Any) -> Any:  # noqa: ANN401
        calls.append(real(*args))
        return calls[-1]
    return spy
