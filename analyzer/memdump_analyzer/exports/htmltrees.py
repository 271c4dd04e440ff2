"""The HTML page's stacks as heaptrack_gui shows them: the stacks' figures embedded as JSON for the
page's script (htmltreejs.py) to make the top-down and bottom-up trees and the callers and
callees of a function, the live heap over time stacked by the stacks that held most of it, and
the allocation sizes' histogram, as SVG. docs/exports.md, "html"."""

from __future__ import annotations

import ctypes
import functools
import itertools
import json
from array import array
from collections.abc import Callable, Hashable
from typing import Any

from .. import native
from ..dumpfile import Frame
from ..model import Analysis
from ..nativegroups import address, typed
from ..views.sizes import buckets
from ..wording import plural
from .charts import OTHER, TAG_COLOURS, Line, human_bytes, xy_chart
from .collapsed import frame_name
from .flame import WIDTH
from .mapsvg import stack_name, tell_apart
from .profile import HeapProfile, Snapshot, StackFigures

__all__ = ["BY_STACK_ALL", "COLUMNS", "TOP_STACKS", "by_stack_every", "by_stack_every_of",
           "distinct_frames", "native_stack_tree", "size_histogram", "stack_data", "stack_tree",
           "stacks_over_time", "trees_section"]

#: the trees' columns, heaptrack_gui's: allocations (calls), temporary allocations (calls),
#: bytes live at the peak, bytes leaked
COLUMNS = ("allocations", "temporary", "peak", "leaked")
#: the stacks drawn apart in the live heap over time (the others summed, grey)
TOP_STACKS = 10
#: a dump of at most this many events has its live heap by stack at each of the exports'
#: snapshots (profile.SNAPSHOTS), a larger one at every other: each costs a sort of the live
#: blocks (cppcheck's recording: 1.2 s of CPU for 50, 2.5 s for 100)
BY_STACK_ALL = 100_000


def by_stack_every(analysis: Analysis) -> int:
    """Every how many snapshots the page takes the live heap by stack."""
    return by_stack_every_of(analysis.last_seq)


def by_stack_every_of(last_seq: int) -> int:
    """`by_stack_every` of a dump whose last SEQ is `last_seq`."""
    return 1 if last_seq <= BY_STACK_ALL else 2


def _figures(s: StackFigures) -> tuple[int, int, int, int]:
    return s.alloc_blocks, s.temp_blocks, s.peak_bytes, s.leaked_bytes


def stack_data(profile: HeapProfile) -> dict[str, Any]:
    """The page's stacks, as the script reads them (docs/exports.md, "html"): `functions`, the
    function names (as the flame graphs name frames); `nodes`, the stacks' prefixes by function
    as a tree, two numbers a node: how many nodes back its parent is (its index + 1 for a
    node of the root) and its function's index; `stacks`, [node of its innermost frame (-1: no
    frame), allocations, temporary, peak bytes, leaked bytes] each. The stacks that name the same
    functions in the same order are summed into one, the most allocations first (then by the
    functions' names); names and nodes are numbered as the stacks first use them. Made in C
    (analyzer/native/pagedata.c) when the library is there, else by `stack_tree`."""
    rows = [(s.frames, figures) for s in profile.stacks.values() if any(figures := _figures(s))]
    # the stacks' frames in one list, each stack a slice of it; each frame's function found by
    # the frame's identity (the stacks share the reader's frames), as its rank among the names:
    # the stacks' keys then sort as their names
    flat = list(itertools.chain.from_iterable(stack for stack, _ in rows))
    lengths = [len(stack) for stack, _ in rows]
    figures = [figures for _, figures in rows]
    del rows
    lib = _library() if native.enabled() else None
    tree = _native_data(lib, flat, lengths, figures) if lib is not None else None
    if tree is None:
        ids = list(map(id, flat))
        name_of = {i: frame_name(f) for i, f in dict(zip(ids, flat, strict=True)).items()}
        names = sorted(set(name_of.values()))
        rank = {name: r for r, name in enumerate(names)}
        function_of = {i: rank[name] for i, name in name_of.items()}
        functions_flat = list(map(function_of.__getitem__, ids))
        del flat, ids  # a frame's id is an integer object each: 1.9M of them on cppcheck's
        tree = names, stack_tree(functions_flat, lengths, figures)
    names, (functions, nodes, stacks) = tree
    return {"columns": list(COLUMNS), "functions": [names[f] for f in functions], "nodes": nodes,
            "stacks": stacks}


def stack_tree(functions_flat: list[int], lengths: list[int],
               figures: list[tuple[int, int, int, int]]) -> tuple[list[int], list[int],
                                                                  list[list[int]]]:
    """`stack_data`'s tree of stacks, the reference: the stacks' functions (by rank, each stack's
    innermost first) in one list, each stack `lengths[i]` of them, with its `figures`. Returns
    the functions by number (their ranks), the nodes and the stacks, as `stack_data` says."""
    merged: dict[tuple[int, ...], list[int]] = {}
    end = 0
    for length, row_figures in zip(lengths, figures, strict=True):
        start, end = end, end + length
        key = tuple(reversed(functions_flat[start:end]))
        row = merged.get(key)
        if row is None:
            merged[key] = list(row_figures)
        else:
            for i, n in enumerate(row_figures):
                row[i] += n
    functions: dict[int, int] = {}  # renumbered as the stacks first use them
    kids: list[dict[int, int]] = [{}]  # node + 1 -> its children by function
    nodes: list[int] = []
    stacks = []
    for key, row in sorted(merged.items(), key=lambda kv: (-kv[1][0], kv[0])):
        at = -1
        for f in key:
            node = kids[at + 1].get(f)
            if node is None:  # a function's first use makes a node
                node = kids[at + 1][f] = len(kids) - 1
                kids.append({})
                nodes += (node - at, functions.setdefault(f, len(functions)))
            at = node
        stacks.append([at, *row])
    return list(functions), nodes, stacks


_P = ctypes.c_void_p
_I64 = ctypes.c_int64
_STACK_TREE = {"mdc_stack_tree": (_I64, [_P, _P, _P, _I64, _P, _I64, _I64, _P, _P, _P, _P])}
_Tree = tuple[list[int], list[int], list[list[int]]]


def _library() -> ctypes.CDLL | None:
    lib = native.library()
    return typed(lib, _STACK_TREE) if lib is not None else None


@functools.cache
def _distinct_ids(path: str) -> Callable[..., int]:
    """The library's `mdc_distinct_ids` called with the GIL held (PyDLL): it reads the list of
    frames through Python's PyList_GetItem."""
    f = ctypes.PyDLL(path).mdc_distinct_ids
    f.restype = _I64
    f.argtypes = [ctypes.py_object, _P, _I64, _P, _P]
    return f  # type: ignore[no-any-return]


def distinct_frames(lib: ctypes.CDLL, frames: list[Frame]) -> tuple[array[int], list[int]] | None:
    """Each frame's number, the distinct frames (by identity) numbered as first met, and where
    each number was first met; None when the library leaves them to Python."""
    index = array("i", bytes(4 * max(1, len(frames))))
    firsts = array("q", bytes(8 * max(1, len(frames))))
    item = ctypes.cast(ctypes.pythonapi.PyList_GetItem, _P)
    n = _distinct_ids(lib._name)(frames, item, len(frames), address(index), address(firsts))
    return None if n < 0 else (index[:len(frames)], firsts[:n].tolist())


def _native_data(lib: ctypes.CDLL, flat: list[Frame], lengths: list[int],
                 figures: list[tuple[int, int, int, int]]) -> tuple[list[str], _Tree] | None:
    """`stack_data`'s names and tree from the library: the frames told apart by identity in C
    (`mdc_distinct_ids`), each distinct frame named here, the tree made in C; None when the
    library leaves the stacks to Python."""
    distinct = distinct_frames(lib, flat)
    if distinct is None:
        return None
    index, firsts = distinct
    name_of = [frame_name(flat[i]) for i in firsts]
    names = sorted(set(name_of))
    rank = {name: r for r, name in enumerate(names)}
    tree = _tree(lib, index, array("i", map(rank.__getitem__, name_of)), lengths, figures,
                 len(names))
    return None if tree is None else (names, tree)


def native_stack_tree(functions_flat: list[int], lengths: list[int],
                      figures: list[tuple[int, int, int, int]], n_functions: int) -> _Tree | None:
    """`stack_tree`'s answer from the library (`mdc_stack_tree`), or None when it is not there
    (or was built before it), or leaves the stacks to Python (a figure past 64 bits)."""
    lib = _library()
    if lib is None:
        return None
    try:
        funcs = array("i", functions_flat)
    except OverflowError:
        return None
    return _tree(lib, funcs, array("i", range(n_functions)), lengths, figures, n_functions)


def _tree(lib: ctypes.CDLL, funcs: array[int], rank: array[int], lengths: list[int],
          figures: list[tuple[int, int, int, int]], n_functions: int) -> _Tree | None:
    """`mdc_stack_tree` of the frames `funcs`, each an index into `rank`."""
    n = len(lengths)
    try:
        ends = array("q", itertools.accumulate(lengths)) or array("q", [0])
        figs = array("q", itertools.chain.from_iterable(figures)) or array("q", [0])
    except OverflowError:
        return None
    nodes = array("i", bytes(8 * max(1, len(funcs))))
    stacks = array("q", bytes(40 * max(1, n)))
    functions = array("i", bytes(4 * max(1, n_functions)))
    counts = array("q", [0, 0])
    n_nodes = lib.mdc_stack_tree(*map(address, (funcs or array("i", [0]), ends, figs)), n,
                                 address(rank or array("i", [0])), len(rank), n_functions,
                                 *map(address, (nodes, stacks, functions, counts)))
    if n_nodes < 0:
        return None
    flat = stacks.tolist()
    return (functions[:counts[1]].tolist(), nodes[:2 * n_nodes].tolist(),
            [flat[i:i + 5] for i in range(0, 5 * counts[0], 5)])


def _embedded(data: dict[str, Any]) -> str:
    """`data` as a JSON script element; `</` escaped so that no name ends the element."""
    text = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return f'<script type="application/json" id="stack-data">{text}</script>'


def trees_section(profile: HeapProfile) -> list[str]:
    """The trees' section: the data and the tables the page's script (`TREE_SCRIPT`) fills."""
    grid = '<table class="tree" id="{}" aria-label="{}"></table>'
    return [
        '<p class="note">Allocations and temporary allocations are calls (a temporary one is '
        "freed with no other heap operation of its thread in between); peak and leaked are "
        "bytes, live at the peak and leaked. Click a column to sort by it; in a tree, the arrow "
        "keys move and open (right) or close (left) a row, Enter opens or closes it, and in the "
        "functions picks the function.</p>",
        _embedded(stack_data(profile)),
        "<h3>Top-down (callers first)</h3>", grid.format("topdown", "top-down tree"),
        "<h3>Bottom-up (allocating functions first)</h3>",
        grid.format("bottomup", "bottom-up tree"),
        "<h3>Callers and callees</h3>",
        '<p class="note">Each function with the figures of the stacks it is on (each stack '
        "counted once); pick one to see who called it and what it called.</p>",
        grid.format("functions", "functions"),
        '<h4 id="callers-title">Callers</h4>', grid.format("callers", "callers"),
        '<h4 id="callees-title">Callees</h4>', grid.format("callees", "callees")]


#: a legend's longest name: a C++ function's full signature would widen the page
LONGEST = 150


def _short(name: str) -> str:
    return name if len(name) <= LONGEST else name[:LONGEST - 3] + "..."


def _detailed(profile: HeapProfile) -> list[Snapshot]:
    """The snapshots with their bytes by stack (and the empty heap before the first event)."""
    return [s for s in profile.snapshots if s.tree is not None or s.live_bytes == 0]


def stacks_over_time(profile: HeapProfile) -> str:
    """The live heap at each snapshot with its bytes by stack (`by_stack_every`), stacked by the
    `TOP_STACKS` stacks with the most bytes live at any of them (named by their innermost frame,
    and where they differ when they share it), the others summed in grey."""
    shots = _detailed(profile)
    most: dict[Hashable, int] = {}
    for shot in shots:
        for key, nbytes in (shot.tree or {}).items():
            if nbytes > most.get(key, 0):
                most[key] = nbytes
    frames = {k: profile.stacks[k].frames if k in profile.stacks else () for k in most}
    label = {k: stack_name(frames[k]) for k in most}
    top = sorted(most, key=lambda k: (-most[k], label[k]))[:TOP_STACKS]
    tell_apart(top, frames, label)  # type: ignore[arg-type]
    label = {k: _short(name) for k, name in label.items()}
    xs = [s.seq for s in shots]
    lines = [Line(label[k], TAG_COLOURS[i], [(s.tree or {}).get(k, 0) for s in shots],
                  TAG_COLOURS[i]) for i, k in enumerate(top)]
    rest = [s.live_bytes - sum((s.tree or {}).get(k, 0) for k in top) for s in shots]
    if any(rest):
        lines.append(Line("other stacks", OTHER, rest, OTHER))
    if not lines:
        return '<p class="note">No block was live at a snapshot.</p>'
    titles = ["\n".join([f"event {s.seq:,}: {s.live_bytes:,} bytes live"] + [
        f"{line.name}: {line.values[i]:,}" for line in lines if line.values[i]])
        for i, s in enumerate(shots)]
    return xy_chart(xs, lines, height=200, x_label="events", y_text=human_bytes,
                    titles=titles, stacked=True)


def _bounds(b: int) -> str:
    def short(n: int) -> str:
        for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
            if n >= 1 << shift:
                return f"{n >> shift}{unit}"
        return str(n)
    return short(0 if b == 0 else 1 << (b - 1))


def size_histogram(sizes: dict[int, int]) -> str:
    """The allocations by requested size, in power-of-two buckets (`memdump-analyze sizes`'):
    a bar per bucket from the smallest to the largest used, each as high as its blocks, labelled
    with its lowest size, its title the exact range, blocks and bytes."""
    rows = buckets(sizes)
    if not rows:
        return '<p class="note">No allocations.</p>'
    order = range(min(rows), max(rows) + 1)
    total = sum(n for n, _ in rows.values())
    high = max(n for n, _ in rows.values())
    h, left, bar_w = 160, 70, (WIDTH - 90) / len(order)
    out = [f'<svg class="chart sizes" viewBox="0 0 {WIDTH} {h + 40}" width="{WIDTH}" '
           f'height="{h + 40}">',
           f'<line x1="{left}" y1="{h}" x2="{WIDTH - 20}" y2="{h}" stroke="#444"/>']
    for i, b in enumerate(order):
        n, nbytes = rows.get(b, (0, 0))
        x = left + i * bar_w
        y = h - n / high * (h - 20)
        lo, hi = (0, 0) if b == 0 else (1 << (b - 1), (1 << b) - 1)
        what = f"{lo:,} bytes" if lo == hi else f"{lo:,} to {hi:,} bytes"
        out.append(f'<g class="bar"><title>{what}: {plural(n, "block")} '
                   f'({100 * n / total:.2f}%), {nbytes:,} bytes</title>'
                   f'<rect x="{x + 1:.2f}" y="{y:.2f}" '
                   f'width="{bar_w - 2:.2f}" height="{h - y:.2f}" fill="{TAG_COLOURS[0]}"/>'
                   f'<text x="{x + bar_w / 2:.2f}" y="{h + 14}" text-anchor="middle">'
                   f"{_bounds(b)}</text></g>")
    out += [f'<text x="{left - 4}" y="14" text-anchor="end">{high:,}</text>',
            f'<text x="{left - 4}" y="{h + 4}" text-anchor="end">0</text>',
            f'<text x="{WIDTH / 2:.0f}" y="{h + 34}" text-anchor="middle">requested size '
            "(bytes, from)</text>", "</svg>"]
    return f'<p class="note">{total:,} allocations by requested size; each bar is a power of ' \
        "two of sizes, as high as its blocks.</p>\n" + "\n".join(out)
