"""Heap corruption (`hc` records, format 2.6: docs/dump-format.md, "Heap corruption"): read from
the worked example's fixture (redzone.memdump, redzone_errors slack recorded with `--redzones`),
its malformed forms named with their line, the text report's entry with the free that found it
and the block's allocation, the JSON report's error, and the sentences of every kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyzer_testlib import run_cli
from memdump_analyzer import DumpError, DumpReader
from memdump_analyzer.heapcorruption import HeapCorruption, describe

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REDZONE = FIXTURES / "redzone.memdump"


def test_the_worked_example_is_read() -> None:
    with DumpReader(str(REDZONE)) as reader:
        list(reader.records())
    assert reader.heap_corruption == [HeapCorruption(
        2, 2184, "overrun", 0x555555559c80, 20, 0, 1, "free")]
    assert reader.unknown_tags == {}


@pytest.mark.parametrize(("record", "message"), [
    ("hc 2 2184 overrun 0x10 20 0 1\n", "'hc' record has 7 fields, expected 8"),
    ("hc 2 2184 spill 0x10 20 0 1 free\n", "'hc' record: bad KIND FOUND 'spill free'"),
    ("hc 2 2184 overrun 0x10 20 0 1 later\n", "'hc' record: bad KIND FOUND 'overrun later'"),
    ("hc 2 2184 overrun 0x10 20 0 0 free\n", "'hc' record: BYTES is 0"),
])
def test_bad_records_name_the_line(tmp_path: Path, record: str, message: str) -> None:
    lines = REDZONE.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("hc "))
    lines[at] = record
    path = tmp_path / "bad.memdump"
    path.write_text("".join(lines))
    with pytest.raises(DumpError) as info, DumpReader(str(path)) as reader:
        list(reader.records())
    assert f"bad.memdump:{at + 1}:" in str(info.value) and message in str(info.value)


def test_the_report_names_both_stacks() -> None:
    proc = run_cli(str(REDZONE))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = lines.index("HEAP CORRUPTION 1 of 1, found by a red zone: heap block overrun: 1 byte "
                        "after the 20-byte block at 0x555555559c80 in thread 2184, found at its "
                        "free at event 2:")
    assert lines[start + 1:start + 8] == [
        "    at slack (redzone_errors.c:32)",
        "    by main (redzone_errors.c:153)",
        "    ... 3 frames of the C/C++ runtime (--show-runtime-frames)",
        "  Block was alloc'd by malloc at event 1:",
        "    at slack (redzone_errors.c:29)",
        "    by main (redzone_errors.c:153)",
        "    ... 3 frames of the C/C++ runtime (--show-runtime-frames)",
    ]
    assert "    heap corruption: 1 (found by red zones: the heap corruption above)" in lines


def test_the_json_error(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(str(REDZONE), "--format", "json", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    (error,) = json.loads(out.read_text())["errors"]
    assert {k: error[k] for k in ("kind", "op", "seq", "tid", "pointer", "offset", "bytes",
                                  "found", "freed_at", "message")} == {
        "kind": "heap-block-overrun", "op": "free", "seq": 2, "tid": 2184,
        "pointer": "0x555555559c80", "offset": 0, "bytes": 1, "found": "free", "freed_at": None,
        "message": "heap block overrun: 1 byte after the 20-byte block"}
    assert [(f["function"], f["line"]) for f in error["stack"][:2]] == [("slack", 32),
                                                                         ("main", 153)]
    assert error["allocated_at"]["op"] == "malloc" and error["allocated_at"]["bytes"] == 20
    assert error["allocated_at"]["stack"][0]["line"] == 29


@pytest.mark.parametrize(("kind", "offset", "nbytes", "sentence"), [
    ("overrun", 0, 3, "heap block overrun: 3 bytes after the 24-byte block"),
    ("overrun", 2, 1, "heap block overrun: 1 byte, from 2 bytes after the end of the 24-byte "
                      "block"),
    ("underrun", 0, 8, "heap block underrun: 8 bytes before the 24-byte block"),
    ("freed", 8, 4, "write after free into the 24-byte block (bytes 8 to 11 changed)"),
])
def test_sentences(kind: str, offset: int, nbytes: int, sentence: str) -> None:
    assert describe(HeapCorruption(1, 1, kind, 0x10, 24, offset, nbytes, "exit")) == sentence


def test_the_sarif_result(tmp_path: Path) -> None:
    out = tmp_path / "r.sarif"
    proc = run_cli(str(REDZONE), "--format", "sarif", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    run = json.loads(out.read_text())["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules[-1] == "memdump/heap-block-overrun" and rules.count(rules[-1]) == 1
    (result,) = [r for r in run["results"] if r["ruleId"] == "memdump/heap-block-overrun"]
    assert result["ruleIndex"] == len(rules) - 1 and result["level"] == "error"
    assert result["message"]["text"] == ("heap block overrun: 1 byte after the 20-byte block, "
                                         "found at its free at event 2")
    where = result["locations"][0]["physicalLocation"]
    assert where["artifactLocation"]["uri"].endswith("redzone_errors.c")
    assert where["region"] == {"startLine": 32}
    assert result["codeFlows"][0]["threadFlows"][0]["locations"][-1]["location"][
        "physicalLocation"]["region"] == {"startLine": 29}
