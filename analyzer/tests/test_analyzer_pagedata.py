"""The HTML page's figures made in libmemdump_core.so (pagedata.c) are the Python's: the tree of
stacks htmltrees.py's `stack_tree` makes, on random stacks (repeated ones that are summed,
prefixes of others, stacks with no frame, ties in allocations broken by the functions' names);
the frames told apart by identity; the heap maps' cells mapsvg.py's `_cells` makes, on random
regions; figures past 64 bits (or the library's bounds) are left to Python; and the page's
embedded data is the same with the library and without it."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
from memdump_analyzer import native
from memdump_analyzer.dumpdefs import Frame
from memdump_analyzer.exports.htmltrees import (
    distinct_frames,
    native_stack_tree,
    stack_data,
    stack_tree,
)
from memdump_analyzer.exports.mapsvg import Cell, cell_figures
from memdump_analyzer.exports.profile import StackFigures
from memdump_analyzer.heapmap import Block


@pytest.fixture(autouse=True)
def _library_built() -> None:
    """A build without the library must fail here, not fall back to Python silently."""
    lib = native.library()
    assert lib is not None and all(hasattr(lib, f) for f in (
        "mdc_stack_tree", "mdc_distinct_ids", "mdc_map_cells")), (
        f"{native.library_path()} missing, old or not loadable: run `make build`")


def _stacks(seed: int) -> tuple[list[int], list[int], list[tuple[int, int, int, int]], int]:
    """Random stacks over few functions (so that keys repeat and share prefixes): their
    functions in one list (each innermost first), their lengths, their figures, how many
    functions."""
    rng = random.Random(seed)
    n_functions = rng.choice([1, 3, 12, 300])
    made: list[list[int]] = []
    for _ in range(rng.randint(0, 400)):
        if made and rng.random() < 0.3:  # the same functions again, or one more frame on them
            stack = list(rng.choice(made))
            if rng.random() < 0.5:
                stack.insert(0, rng.randrange(n_functions))
        else:
            stack = [rng.randrange(n_functions) for _ in range(rng.choice([0, 1, 2, 5, 30]))]
        made.append(stack)
    figures = [(rng.choice([0, 1, 2, 3, 1 << 40]), rng.randint(0, 3), rng.randint(0, 1 << 20),
                rng.choice([0, 7])) for _ in made]
    return [f for s in made for f in s], [len(s) for s in made], figures, n_functions


@pytest.mark.parametrize("seed", range(60))
def test_the_tree_in_c_is_pythons(seed: int) -> None:
    flat, lengths, figures, n_functions = _stacks(seed)
    expected = stack_tree(flat, lengths, figures)
    assert native_stack_tree(flat, lengths, figures, n_functions) == expected


def test_a_known_tree() -> None:
    # stacks (innermost first): [0, 2] twice, [1, 2], [2], []; 2 is main, outermost: the
    # functions are numbered as the stacks, most allocations first, use them
    flat = [0, 2, 1, 2, 0, 2, 2]
    lengths = [2, 2, 2, 1, 0]
    figures = [(1, 0, 10, 0), (5, 1, 0, 0), (3, 0, 0, 4), (1, 0, 0, 0), (9, 0, 0, 0)]
    tree = ([2, 1, 0], [1, 0, 1, 1, 2, 2],
            [[-1, 9, 0, 0, 0], [1, 5, 1, 0, 0], [2, 4, 0, 10, 4], [0, 1, 0, 0, 0]])
    assert stack_tree(flat, lengths, figures) == tree
    assert native_stack_tree(flat, lengths, figures, 3) == tree


def test_figures_past_64_bits_are_left_to_python() -> None:
    assert native_stack_tree([0], [1], [(1 << 63, 0, 0, 0)], 1) is None
    # the sum of two that fit does not
    assert native_stack_tree([0, 0], [1, 1], [(1 << 62, 0, 0, 0)] * 2, 1) is None
    assert native_stack_tree([0, 0], [1, 1], [((1 << 62) - 1, 0, 0, 0)] * 2, 1) is not None


def test_a_rank_out_of_range_is_left_to_python() -> None:
    assert native_stack_tree([3], [1], [(1, 0, 0, 0)], 3) is None


def _profile(seed: int) -> Any:  # noqa: ANN401 - a stand-in HeapProfile
    """A profile whose stacks share the reader's frames, some of them named alike (one
    function at two lines, a frame without a function)."""
    rng = random.Random(seed)
    frames = [Frame(pc, "/bin/a.out", pc, rng.choice(["f", "g", "h", "main", None, "a;b"]),
                    "/src/a.c", rng.randint(1, 3)) for pc in range(1, 30)]
    stacks = {}
    for i in range(300):
        stack = tuple(rng.choice(frames) for _ in range(rng.randint(0, 12)))
        stacks[i] = StackFigures(stack, alloc_blocks=rng.randint(0, 4),
                                 temp_blocks=rng.randint(0, 2), peak_bytes=rng.randint(0, 99),
                                 leaked_bytes=rng.choice([0, 0, 16]))
    return SimpleNamespace(stacks=stacks)


@pytest.mark.parametrize("seed", range(10))
def test_the_pages_data_with_and_without_the_library(seed: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with_library = stack_data(_profile(seed))
    monkeypatch.setenv("MEMDUMP_NATIVE", "0")
    assert stack_data(_profile(seed)) == with_library
    assert len(with_library["stacks"]) > 10


@pytest.mark.parametrize("seed", range(10))
def test_frames_told_apart_by_identity_in_c_as_in_python(seed: int) -> None:
    rng = random.Random(seed)
    # equal frames that are other objects are other frames: the stacks share the reader's
    frames = [Frame(pc % 7, "/bin/a.out", pc % 7, "f", None, None) for pc in range(20)]
    listed = [rng.choice(frames) for _ in range(rng.randint(0, 500))]
    number: dict[int, int] = {}
    firsts = []
    for i, f in enumerate(listed):
        if id(f) not in number:
            number[id(f)] = len(number)
            firsts.append(i)
    lib = native.library()
    assert lib is not None
    index, found = distinct_frames(lib, listed)  # type: ignore[misc]
    assert (index.tolist(), found) == ([number[id(f)] for f in listed], firsts)


def _python_cells(lo: int, hi: int, blocks: list[Block], numbers: list[int],
                  n_numbers: int) -> list[Cell]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMDUMP_NATIVE", "0")
        return cell_figures(lo, hi, blocks, numbers, n_numbers)


@pytest.mark.parametrize("seed", range(40))
def test_the_heap_maps_cells_in_c_are_pythons(seed: int) -> None:
    """Random regions (a few bytes to megabytes: fewer cells than MAX_CELLS, and as many) with
    blocks of odd sizes, chunks that overlap, and blocks past the region's bounds on either
    side (clipped), coloured by a few keys (ties in a cell's bytes)."""
    rng = random.Random(seed)
    lo = rng.choice([0x1000, 0x5555_5555_0000])
    hi = lo + rng.choice([48, 1000, 6400, 1 << 20])
    n_numbers = rng.choice([1, 3, 50])
    blocks = sorted((Block(rng.randint(lo - 64, hi + 64), rng.choice([0, 1, 24, 100, 5000]),
                           0, None) for _ in range(rng.randint(0, 300))),
                    key=lambda b: b.addr)
    numbers = [rng.randrange(n_numbers) for _ in blocks]
    cells = cell_figures(lo, hi, blocks, numbers, n_numbers)
    assert cells == _python_cells(lo, hi, blocks, numbers, n_numbers)
    assert sum(count for *_, count, _ in cells) >= len([b for b in blocks if lo < b.addr < hi])


def test_heap_map_figures_past_the_librarys_bounds_are_left_to_python() -> None:
    blocks = [Block((1 << 60) + 16, 8, 0, None)]
    assert cell_figures(1 << 60, (1 << 60) + 64, blocks, [0], 1) == [
        ((1 << 60) + 16 * i, (1 << 60) + 16 * i + 16, *figures) for i, figures in
        enumerate([(16, 0, 1, blocks), (16, 0, 1, blocks), (0, None, 0, []), (0, None, 0, [])])]
