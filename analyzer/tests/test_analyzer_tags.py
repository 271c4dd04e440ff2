"""memdump-analyze --by-tag and --phases (docs/tags.md): golden outputs of the spec's worked
example, the reader's checks of `g`/`u` records, and bad usage."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, LIBC, Dump, F, main_at, run_cli

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
    assert phases.stdout.splitlines()[1:] == [
        "note: the program marked no MEMDUMP_PHASE: one phase, the whole run", "",
        "PHASE '(the whole run)' (from event 0): allocated 8 bytes in 1 block, freed "
        "within it 0 bytes in 0 blocks, live at the end 8 bytes in 1 block",
        "  8 bytes in 1 block freed: 1 never", "    #0 load_level (game.c:10)",
        "    #1 main (game.c:30)"]


def test_the_runtimes_blocks_are_not_leaked(tmp_path: Path) -> None:
    """As the leak report: a stdio buffer live at the end is the runtime's, not a tag's leak;
    --phases lists it under its phase, said to be the runtime's."""
    d = Dump(header="MEMDUMP 2.2")
    buffer = [F("_IO_file_doallocate", "./libio/./libio/filedoalloc.c", 101, module=LIBC),
              F("_IO_doallocbuf", module=LIBC), F("puts", module=LIBC), *main_at(5)]
    d.malloc("0x1000", 1024, buffer)
    d.malloc("0x2000", 24, [F("make", "/src/app.c", 3), *main_at(6)])
    d.end()
    path = d.write(tmp_path)
    tags = run_cli("--by-tag", path)
    assert tags.stdout.splitlines()[3:] == [
        "tag         allocated  blocks   peak  leaked  blocks",
        "(untagged)      1,048       2  1,048      24       1", "",
        "not leaked: the C/C++ runtime's own 1,024 bytes in 1 block live at the end (stdio "
        "buffers, the loader's data...: the leak report's --show-runtime lists them)"]
    [tag] = json.loads(run_cli("--by-tag", "--format", "json", path).stdout)["tags"]
    assert (tag["leaked"], tag["runtime"]) == ({"bytes": 24, "blocks": 1},
                                               {"bytes": 1024, "blocks": 1})
    phases = run_cli("--phases", path).stdout.splitlines()
    assert phases[4:6] == ["  1,024 bytes in 1 block (the C/C++ runtime's own) freed: 1 never",
                           "    #0 _IO_file_doallocate (filedoalloc.c:101)"]
    assert "  24 bytes in 1 block freed: 1 never" in phases
    report = json.loads(run_cli("--format", "json", "--show-runtime", path).stdout)
    assert report["summary"]["leaked"] == {"bytes": 24, "blocks": 1}
    [runtime] = [g for g in report["leaks"] if g["kind"] == "runtime"]
    assert runtime["stack"][0]["file"] == "./libio/filedoalloc.c"  # GDB's join undone


def test_views_are_text_or_json(tmp_path: Path) -> None:
    res = run_cli("--by-tag", "--format", "sarif", str(EXAMPLE))
    assert (res.returncode, res.stderr) == (
        2, "memdump-analyze: error: --by-tag, --phases, --growth and --heap-map are text or "
           "json, not --format sarif\n")
    both = run_cli("--by-tag", "--phases", str(EXAMPLE))
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
