"""memdump-analyze --by-tag and --phases (docs/tags.md): golden outputs of the spec's worked
example, the reader's checks of `g`/`u` records, and bad usage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = FIXTURES / "tags.memdump"


@pytest.mark.parametrize(("view", "form"), [("by-tag", "txt"), ("by-tag", "json"),
                                             ("phases", "txt"), ("phases", "json")])
def test_golden(view: str, form: str) -> None:
    args = [f"--{view}"] + (["--format", "json"] if form == "json" else [])
    res = run_cli(*args, "tests/fixtures/tags.memdump", cwd=ROOT / "analyzer")
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout == (FIXTURES / f"tags.{view}.{form}").read_text()


def test_the_spec_shows_the_fixture_and_its_outputs() -> None:
    doc = (ROOT / "docs" / "tags.md").read_text()
    blocks = re.findall(r"```\n(.*?)```", doc, re.S)
    assert EXAMPLE.read_text() in blocks
    for name in ("tags.by-tag.txt", "tags.phases.txt"):
        assert (FIXTURES / name).read_text() in blocks, name


def _dump(tmp_path: Path, body: str) -> Path:
    text = EXAMPLE.read_text()
    head = text[:text.index("p 1 phase")]
    path = tmp_path / "bad.memdump"
    path.write_text(head + body)
    return path


@pytest.mark.parametrize(("body", "error"), [
    ("t 100\n+ 2 0x1000 8\nu 100\n", "bad.memdump:25: thread 100 pops a tag it has not pushed"),
    ("g 100 99\n", "bad.memdump:23: tag string 99 is not defined"),
    ("g 100\n", "bad.memdump:23: 'g' record has 1 field, expected 2 (TID STRING)"),
])
def test_bad_tag_records_are_named_with_their_line(tmp_path: Path, body: str, error: str) -> None:
    res = run_cli("--by-tag", str(_dump(tmp_path, body)))
    assert res.returncode == 2
    assert res.stderr == f"memdump-analyze: {tmp_path}/{error}\n"


def test_a_dump_without_tags_or_phases_says_so(tmp_path: Path) -> None:
    path = _dump(tmp_path, "t 100\n+ 2 0x1000 8\nend 2 exit 0\n")
    tags = run_cli("--by-tag", str(path))
    phases = run_cli("--phases", str(path))
    assert tags.stdout.splitlines()[1:] == [
        "note: the program pushed no memdump_api.h tag: every block is untagged", "",
        "tag         allocated  blocks  peak  leaked  blocks",
        "(untagged)          8       1     8       8       1"]
    assert phases.stdout.splitlines()[1:4] == [
        "note: the program marked no MEMDUMP_PHASE: one phase, the whole run", "",
        "PHASE '(before the first phase)' (from event 0): allocated 8 bytes in 1 block, freed "
        "within it 0 bytes in 0 blocks, outlived it 0 bytes in 0 blocks"]


def test_views_are_text_or_json(tmp_path: Path) -> None:
    res = run_cli("--by-tag", "--format", "sarif", str(EXAMPLE))
    assert (res.returncode, res.stderr) == (
        2, "memdump-analyze: error: --by-tag, --phases, --growth and --heap-map are text or "
           "json, not --format sarif\n")
    both = run_cli("--by-tag", "--phases", str(EXAMPLE))
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
