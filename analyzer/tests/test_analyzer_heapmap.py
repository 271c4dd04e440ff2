"""memdump-analyze --heap-map (docs/heapmap.md): the worked example's outputs, the moments."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, run_cli

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
