"""memdump-analyze --heap-map (docs/heapmap.md): the worked example's outputs, the moments."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, run_cli
from memdump_analyzer import heapmap

ROOT = Path(__file__).resolve().parents[2]
DUMP = "tests/fixtures/heapmap.memdump"


@pytest.mark.parametrize(("args", "golden"), [
    ((), "heapmap.end.txt"), (("--at", "phase:level 2"), "heapmap.phase.txt"),
    (("--format", "json"), "heapmap.end.json"), (("--at", "peak"), None),
    (("--at", "7"), None),
])
def test_golden(args: tuple[str, ...], golden: str | None) -> None:
    res = run_cli("--heap-map", *args, DUMP, cwd=ROOT / "analyzer")
    assert (res.returncode, res.stderr) == (0, "")
    if golden is None:  # the peak and event 7 are the phase's moment: all six blocks
        expected = (FIXTURES / "heapmap.phase.txt").read_text().replace(
            "at phase:level 2", f"at {args[1]}")
        assert res.stdout == expected
    else:
        assert res.stdout == (FIXTURES / golden).read_text()


def test_the_spec_shows_the_fixture_and_its_outputs() -> None:
    blocks = re.findall(r"```\n(.*?)```", (ROOT / "docs" / "heapmap.md").read_text(), re.S)
    for name in ("heapmap.memdump", "heapmap.end.txt", "heapmap.phase.txt"):
        assert (FIXTURES / name).read_text() in blocks, name


@pytest.mark.parametrize(("at", "error"), [
    ("99", "event 99 is past the last of tests/fixtures/heapmap.memdump (11)"),
    ("phase:level 9", "no phase 'level 9' in tests/fixtures/heapmap.memdump (its phases: "
                      "'level 2')"),
    ("soon", "--at soon: end, peak, an event number or phase:NAME"),
])
def test_moments_not_in_the_dump(at: str, error: str) -> None:
    res = run_cli("--heap-map", "--at", at, DUMP, cwd=ROOT / "analyzer")
    assert (res.returncode, res.stderr) == (2, f"memdump-analyze: error: {error}\n")


def test_the_map_line_is_the_chunk_by_chunk_ones() -> None:
    """The map line of disjoint chunks, from the running sum of their bytes, is the reference's
    (each chunk's bytes into its cells) on random regions, small enough that chunks often end
    one byte past a cell's start, where the reference leaves that byte out."""
    rng = random.Random(25)
    ends_past_a_bound = 0
    for _ in range(3000):
        los, his, at = [], [], rng.randrange(1 << 40)
        for _ in range(rng.randrange(1, 40)):
            at += rng.choice([0, 0, rng.randrange(1, 64), rng.randrange(64, 4096)])
            los.append(at)
            at += rng.randrange(32, rng.choice([48, 200, 3000]))
            his.append(at)
        lo, hi = los[0], his[-1]
        bounds = heapmap._bounds(lo, hi)
        ends_past_a_bound += bool(set(his) & {b + 1 for b in bounds})
        assert heapmap._cells(los, his, lo, hi) == heapmap._cells_by_chunk(
            los, his, lo, hi)
    assert ends_past_a_bound > 100
