"""memdump-analyze --growth (docs/growth.md): the spec's worked example and its golden outputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, Dump, F, main_at, run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("form", ["txt", "json"])
def test_golden(form: str) -> None:
    args = ["--growth"] + (["--format", "json"] if form == "json" else [])
    res = run_cli(*args, "tests/fixtures/growth.memdump", cwd=ROOT / "analyzer")
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout == (FIXTURES / f"growth.{form}").read_text()


def test_the_spec_shows_the_fixture_and_its_output() -> None:
    blocks = re.findall(r"```\n(.*?)```", (ROOT / "docs" / "growth.md").read_text(), re.S)
    assert (FIXTURES / "growth.memdump").read_text() in blocks
    assert (FIXTURES / "growth.txt").read_text() in blocks


def test_top_and_no_growth(tmp_path: Path) -> None:
    top = run_cli("--growth", "--top", "1", str(FIXTURES / "growth.memdump"))
    assert "GROWTH 1 of 2" in top.stdout and "GROWTH 2" not in top.stdout
    res = run_cli("--growth", str(FIXTURES / "example.memdump"))
    assert res.stdout.splitlines()[1:] == [
        "no growth chain: no block was replaced by a larger one from its stack"]


def test_one_regrowth_is_said_in_the_singular(tmp_path: Path) -> None:
    """One container grown once, by one byte: "1 time", "1 allocation", no "(1.0 each)"."""
    d = Dump()
    stack = [F("push", "/src/grow.cc", 12), *main_at(40)]
    d.malloc("0x1000", 1, stack)
    d.e("realloc", "0x2000", "0x1000", 2, stack=stack)
    d.end()
    res = run_cli("--growth", d.write(tmp_path))
    assert res.stdout.splitlines()[2:4] == [
        "GROWTH 1 of 1: 1 container regrew 1 time, copying 1 byte; final size 2 bytes",
        "  reserve 2 bytes up front: 1 allocation and 1 copied byte fewer"]
