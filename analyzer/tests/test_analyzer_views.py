"""The views (docs/views.md): goldens of each view on the worked example, its figures checked one
by one, `--base`, the options, the errors, and a randomised test tying the views' pass to the
replay's figures (peak, live blocks, allocations)."""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, REPO, Dump, F, main_at, run_cli
from memdump_analyzer import analyze
from memdump_analyzer.views import VIEWS, load
from memdump_analyzer.views.lifetimes import quantiles
from memdump_analyzer.views.stream import bucket

EXAMPLE = FIXTURES / "views.memdump"
GOLDEN = FIXTURES / "views"
#: set to 1 to rewrite the goldens from the analyser's output (then review the diff)
UPDATE = os.environ.get("MEMDUMP_UPDATE_GOLDEN") == "1"
DOC = (REPO / "docs" / "views.md").read_text()


def _doc_block(marker: str, lang: str = "") -> str:
    """The first fenced block after `marker` in docs/views.md."""
    section = DOC.split(marker, 1)[1]
    m = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert m is not None, marker
    return m.group(1)


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_golden(view: str, fmt: str) -> None:
    more = ("--format", "json", "--max-frames", "1") if fmt == "json" else ()
    result = run_cli(view, *more, "views.memdump", cwd=FIXTURES)
    assert (result.returncode, result.stderr) == (0, "")
    golden = GOLDEN / f"{view}.{'txt' if fmt == 'text' else 'json'}"
    if UPDATE:
        golden.write_text(result.stdout)
    assert golden.exists(), f"{golden} is missing (MEMDUMP_UPDATE_GOLDEN=1 writes it)"
    assert result.stdout == golden.read_text()


def test_the_worked_example_is_the_fixture() -> None:
    assert _doc_block("The worked example's dump") == EXAMPLE.read_text()


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_the_docs_show_each_golden(view: str) -> None:
    assert _doc_block(f"`memdump-analyze {view} views.memdump`:") == (
        GOLDEN / f"{view}.txt").read_text()
    assert _doc_block(f"`memdump-analyze {view} --format json --max-frames 1 views.memdump`:",
                      "json") == (
        GOLDEN / f"{view}.json").read_text()
