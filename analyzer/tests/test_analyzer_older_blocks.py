"""The blocks from before a late attach's recording in the dump (`ob` records, format 2.7,
docs/dump-format.md "Blocks from before the recording"): the reader keeps them, those of the last
scan; its errors; a 2.6 reader skips them with one warning and reads the rest; a 2.6 dump still
reads; the compaction carries them byte for byte."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, REPO, Dump, run_analyser_before, run_cli
from memdump_analyzer import DumpError, DumpReader, analyze, render_json, render_text
from memdump_analyzer.dumpdefs import OlderBlock
from memdump_analyzer.olderblocks import Heading

ATTACH = FIXTURES / "attach.memdump"
SCRIPT = REPO / "scripts" / "memdump-analyze"


def _older(path: str) -> list[OlderBlock]:
    with DumpReader(path) as reader:
        list(reader.records())
        assert reader.unknown_tags == {}
        return reader.older


def test_the_worked_example_is_read() -> None:
    with DumpReader(str(ATTACH)) as reader:
        list(reader.records())
        assert reader.version == (2, 7) and reader.info["attached"] == "1"
        assert reader.kinds == {b"0x55555556b2c0": ("definite", None)}
        assert reader.older == [
            OlderBlock(0x55555556A2A0, 56, "definite", "vtable", "Connection"),
            OlderBlock(0x55555556A2E0, 56, "definite", "vtable", "Connection"),
            OlderBlock(0x55555556A320, 24, "definite", "vtable", "graph::Node"),
            OlderBlock(0x55555556A340, 24, "indirect", "vtable", "graph::Node"),
            OlderBlock(0x55555556A360, 40, "reachable", "string", "char[]")]
    # the recorded block's report is as before: the older blocks are not among its kinds
    kinds = render_json(analyze(str(ATTACH)))["summary"]["leak_kinds"]
    assert {k: (v["bytes"], v["blocks"]) for k, v in kinds.items()} == {
        "definite": (64, 1), "indirect": (0, 0), "possible": (0, 0), "reachable": (0, 0),
        "unknown": (0, 0)}


def _attached(tmp_path: Path, *tail: str, name: str = "test.memdump") -> str:
    d = Dump(attached=True, header="MEMDUMP 2.7")
    d.malloc("0x1000", 16)
    for line in tail:
        d.raw(line)
    d.end("detach", "-")
    return d.write(tmp_path, name)


def test_the_types_are_unescaped_and_a_later_scan_replaces_them(tmp_path: Path) -> None:
    path = _attached(tmp_path, "scan 1 ok 10 10 0", "r 0x1000 R",
                     "ob 0x2000 24 P rtti a\\\\b\\nc d", "ob 0x2020 40 R pointers pointer array")
    assert _older(path) == [OlderBlock(0x2000, 24, "possible", "rtti", "a\\b\nc d"),
                            OlderBlock(0x2020, 40, "reachable", "pointers", "pointer array")]
    again = _attached(tmp_path, "scan 1 ok 10 10 0", "ob 0x2000 24 D unknown ?",
                      "scan 1 ok 10 10 0", "ob 0x3000 56 I unknown ?", name="again.memdump")
    assert _older(again) == [OlderBlock(0x3000, 56, "indirect", "unknown", "?")]


@pytest.mark.parametrize(("line", "error"), [
    ("ob 0x2000 24 D unknown ?", "'ob' record before any 'scan' record"),
    ("scan 1 ok 0 0 0\nob 0x2000 24 X unknown ?", "unknown leak kind 'X' (D, I, P or R)"),
    ("scan 1 ok 0 0 0\nob 2000 24 D unknown ?",
     "malformed ADDR '2000' (expected a hex number like 0x1f)"),
    ("scan 1 ok 0 0 0\nob 0x2000 -4 D unknown ?", "malformed SIZE '-4' (expected a number)"),
    ("scan 1 ok 0 0 0\nob 0x2000 24 D unknown", "'ob' record has 4 fields, expected 5 "
     "(ADDR SIZE KIND HOW TYPE)"),
])
def test_errors_name_the_line(tmp_path: Path, line: str, error: str) -> None:
    path = _attached(tmp_path, *line.split("\n"))
    with pytest.raises(DumpError) as info:
        analyze(path)
    lineno = Path(path).read_text().splitlines().index(line.split("\n")[-1]) + 1
    assert str(info.value) == f"{path}:{lineno}: {error}"


def test_a_26_dump_still_reads(tmp_path: Path) -> None:
    """The worked example as a 2.6 recorder wrote it (no `ob` records) reads as before."""
    old = tmp_path / "old.memdump"
    old.write_text("".join(line for line in ATTACH.read_text().splitlines(True)
                           if not line.startswith("ob "))
                   .replace("MEMDUMP 2.7\n", "MEMDUMP 2.6\n", 1))
    with DumpReader(str(old)) as reader:
        list(reader.records())
        assert (reader.version, reader.older, reader.unknown_tags) == ((2, 6), [], {})
    new = run_cli(str(ATTACH), cwd=tmp_path).stdout.replace(str(ATTACH), str(old))
    assert run_cli(str(old), cwd=tmp_path).stdout == new[:new.index("allocated before the rec")]


def test_a_26_reader_skips_them_with_one_warning(tmp_path: Path) -> None:
    result = run_analyser_before((2, 7), ATTACH, tmp_path, "ob",
                                 "ob 0x55555556a2a0 56 D vtable Connection")
    assert "LEAK 1 of 1: 64 bytes in 1 block, definitely lost" in result.stdout  # as before


def test_the_compaction_carries_them_byte_for_byte(tmp_path: Path) -> None:
    dump = tmp_path / "attach.memdump"
    dump.write_bytes(ATTACH.read_bytes())
    run = subprocess.run([str(SCRIPT), "--compact", str(dump)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert not dump.read_bytes().startswith(b"MEMDUMP")
    printed = subprocess.run([str(SCRIPT), "--text", str(dump)], capture_output=True)
    assert printed.stdout == ATTACH.read_bytes()
    assert _older(str(dump)) == _older(str(ATTACH))  # read from the compact dump


ORIGIN = ", allocated before the recording began"


def test_the_text_report_lists_them_after_the_recorded_blocks(tmp_path: Path) -> None:
    """As GDB's `memdump leaks` at a stop (docs/heapwalk.md), numbered on from the recorded
    leak (LEAK 1), over every kind; the kinds asked only; the totals of all."""
    every = run_cli("--show-leak-kinds", "all", str(ATTACH), cwd=tmp_path).stdout
    tail = every[every.index("\nallocated before the recording began"):].splitlines()[1:]
    totals = ("totals: definitely lost 136 bytes in 3 blocks, indirectly lost 24 bytes in 1 "
              "block, possibly lost 0 bytes in 0 blocks, still reachable 40 bytes in 1 block")
    assert tail == [
        "allocated before the recording began (the heap walked at the recording's end: blocks of "
        "unknown origin, grouped by type)",
        "blocks from before the recording: 5 blocks, 200 bytes",
        f"LEAK 2: 112 bytes in 2 blocks of `Connection` (vtable), definitely lost{ORIGIN}",
        f"LEAK 3: 24 bytes in 1 block of `graph::Node` (vtable), definitely lost{ORIGIN}",
        f"LEAK 4: 24 bytes in 1 block of `graph::Node` (vtable), indirectly lost{ORIGIN}",
        "reachable: 40 bytes in 1 block of `char[]` (string)",
        totals]
    default = run_cli(str(ATTACH), cwd=tmp_path).stdout  # valgrind's default kinds
    assert default.splitlines()[-5:] == tail[:4] + [totals]
    top = run_cli("--top", "2", "--show-leak-kinds", "all", str(ATTACH), cwd=tmp_path).stdout
    assert top.splitlines()[-3:] == tail[2:4] + [totals]


def test_the_json_report_has_before_recording(tmp_path: Path) -> None:
    doc = json.loads(run_cli("--format", "json", "--show-leak-kinds", "all", str(ATTACH),
                             cwd=tmp_path).stdout)
    assert doc["version"] == "1.9"
    assert doc["before_recording"] == {
        "source": "process", "symbols": None, "blocks": 5, "bytes": 200, "engine": None,
        "origin": "unknown",
        "leaks": [{"number": 2, "kind": "definite", "type": "Connection", "how": "vtable",
                   "bytes": 112, "blocks": 2},
                  {"number": 3, "kind": "definite", "type": "graph::Node", "how": "vtable",
                   "bytes": 24, "blocks": 1},
                  {"number": 4, "kind": "indirect", "type": "graph::Node", "how": "vtable",
                   "bytes": 24, "blocks": 1}],
        "reachable": [{"type": "char[]", "how": "string", "bytes": 40, "blocks": 1}],
        "totals": {"definite": [136, 3], "indirect": [24, 1], "possible": [0, 0],
                   "reachable": [40, 1]},
        "problems": []}
    # the recorded blocks' figures are the recording's alone
    assert doc["summary"]["leak_kinds"]["definite"] == {"bytes": 64, "blocks": 1}
    other = json.loads(run_cli("--format", "json", str(FIXTURES / "example.memdump"),
                               cwd=tmp_path).stdout)
    assert "before_recording" not in other  # a dump without `ob` records: as it was


def _freed_then(tmp_path: Path, older: str, name: str) -> str:
    """A late attach's dump whose one recorded block was freed, then the scan and OLDER."""
    d = Dump(attached=True, header="MEMDUMP 2.7")
    d.malloc("0x1000", 16)
    d.free("0x1000")
    d.raw("scan 2 ok 10 10 0")
    d.raw(older)
    d.end("detach", "-")
    return d.write(tmp_path, name)


def test_fail_on_leak_counts_them_and_no_leaks_says_of_which_blocks(tmp_path: Path) -> None:
    """A late attach whose recorded blocks leak nothing but whose older blocks do: the report
    does not open with a bare "No leaks.", and --fail-on-leak fails on the older blocks of the
    kinds it counts (valgrind's default: definitely and possibly lost) and on those alone."""
    lost = _freed_then(tmp_path, "ob 0x2000 24 D vtable Connection", name="lost.memdump")
    run = run_cli("--fail-on-leak", lost, cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert ("\nNo leaks among the blocks recorded (the blocks from before the recording follow "
            "the summary).\n") in run.stdout
    assert f"LEAK 1: 24 bytes in 1 block of `Connection` (vtable), definitely lost{ORIGIN}" \
        in run.stdout
    held = _freed_then(tmp_path, "ob 0x2000 40 R string char[]", name="held.memdump")
    assert run_cli("--fail-on-leak", held, cwd=tmp_path).returncode == 0
    assert run_cli("--fail-on-leak", "--errors-for-leak-kinds", "all", held,
                   cwd=tmp_path).returncode == 1


def test_gdbs_heading_at_a_stop(tmp_path: Path) -> None:
    """GDB's `memdump leaks` at a stop hands its walk's older blocks to the same report: with no
    recorded block live, the live words of the offline sentence; its walk's title and figures
    instead of the dump's; its keys in `before_recording`; and, given, the section even when the
    walk found no older block (a dump cannot tell that from a recording not attached)."""
    analysis = analyze(_freed_then(tmp_path, "ob 0x2000 24 D vtable Connection",
                                   name="lost.memdump"))
    heading = Heading("walked (title)", ("walk: 1 block",),
                      {"source": "process", "symbols": "debug", "engine": "c", "problems": []})
    text = render_text(analysis, live=True, older_heading=heading).splitlines()
    assert "No live blocks among the blocks recorded (the blocks from before the recording "\
        "follow the summary)." in text
    assert text[-4:] == [
        "walked (title)", "walk: 1 block",
        f"LEAK 1: 24 bytes in 1 block of `Connection` (vtable), definitely lost{ORIGIN}",
        "totals: definitely lost 24 bytes in 1 block, indirectly lost 0 bytes in 0 blocks, "
        "possibly lost 0 bytes in 0 blocks, still reachable 0 bytes in 0 blocks"]
    older = render_json(analysis, live=True, older_heading=heading)["before_recording"]
    assert (older["symbols"], older["engine"], older["blocks"], older["leaks"][0]["number"]) \
        == ("debug", "c", 1, 1)
    analysis.older, heading = [], replace(heading, head=("walk: 0 blocks",))
    text = render_text(analysis, live=True, older_heading=heading).splitlines()
    assert text[-3:-1] == ["walked (title)", "walk: 0 blocks"]
    assert render_json(analysis, older_heading=heading)["before_recording"]["blocks"] == 0
    assert "before_recording" not in render_json(analysis)
    assert "No live blocks of the program." in render_text(analysis, live=True)
