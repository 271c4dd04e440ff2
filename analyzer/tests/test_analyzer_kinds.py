"""Leak kinds: the `scan` and `r` records (MEMDUMP 1.1), groups split by kind, summaries, errors,
--fail-on-leak with --leak-kinds."""

from __future__ import annotations

from pathlib import Path

import pytest
from analyzer_testlib import Dump, main_at, run_cli
from memdump_analyzer import DumpError, analyze, render_json, render_text


def _dump(scan: str | None = "ok") -> Dump:
    d = Dump(header="MEMDUMP 1.1")
    for i in range(3):
        d.malloc(f"0x{i + 1}0", 16, main_at(5))  # one stack, three blocks
    d.malloc("0x40", 100, main_at(6))
    if scan is not None:
        d.raw(f"scan {d.seq} {scan} 4096 132 7")
        if scan == "ok":
            d.raw("r 0x10 D")
            d.raw("r 0x20 I")
            d.raw("r 0x30 I")
            d.raw("r 0x40 R newarray")
    return d


def test_groups_split_by_kind_and_the_summary(tmp_path: Path) -> None:
    d = _dump()
    d.end()
    a = analyze(d.write(tmp_path))
    assert [(g.bytes, g.blocks, g.leak_kind) for g in a.leaks] == [
        (100, 1, "reachable"), (32, 2, "indirect"), (16, 1, "definite")]
    assert a.leak_kinds == {"definite": [16, 1], "indirect": [32, 2], "possible": [0, 0],
                            "reachable": [100, 1], "unknown": [0, 0]}
    assert a.scan is not None and (a.scan.after, a.scan.root_bytes, a.scan.millis) == (4, 4096, 7)
    text = render_text(a)
    assert "LEAK 2 of 3: 32 bytes in 2 blocks, indirectly lost\n    at main (app.c:5)\n" in text
    for line in ("    definitely lost: 16 bytes in 1 block\n",
                 "    indirectly lost: 32 bytes in 2 blocks\n",
                 "    possibly lost:   0 bytes in 0 blocks\n",
                 "    still reachable: 100 bytes in 1 block\n"):
        assert line in text
    report = render_json(a)
    assert [g["leak_kind"] for g in report["leaks"]] == ["reachable", "indirect", "definite"]
    assert report["summary"]["leak_kinds"]["indirect"] == {"bytes": 32, "blocks": 2}
    # a live report shows no kinds
    assert "lost" not in render_text(a, live=True).split("SUMMARY")[1]


def test_blocks_allocated_after_the_scan_are_unknown(tmp_path: Path) -> None:
    d = _dump()
    d.malloc("0x50", 7, main_at(9))
    d.end()
    a = analyze(d.write(tmp_path))
    assert a.leak_kinds is not None and a.leak_kinds["unknown"] == [7, 1]
    text = render_text(a)
    assert "LEAK 4 of 4: 7 bytes in 1 block, not scanned\n" in text
    assert "    not scanned:     7 bytes in 1 block\n" in text
    assert any("allocated after the pointer scan" in w for w in a.warnings())


def test_a_failed_scan_leaves_the_kinds_unknown(tmp_path: Path) -> None:
    d = _dump(scan="timeout")
    d.end()
    a = analyze(d.write(tmp_path))
    assert a.leak_kinds is None and {g.leak_kind for g in a.groups} == {None}
    assert any("ran out of time" in w for w in a.warnings())
    assert "leak kinds:  unknown: the pointer scan at exit did not complete" in render_text(a)
    assert render_json(a)["summary"]["scan"]["status"] == "timeout"


def test_fail_on_leak_by_kind(tmp_path: Path) -> None:
    d = _dump()
    d.end()
    path = d.write(tmp_path)
    assert run_cli("--fail-on-leak", path).returncode == 1
    assert run_cli("--fail-on-leak", "--leak-kinds", "possible", path).returncode == 0
    assert run_cli("--fail-on-leak", "--leak-kinds", "definite,possible", path).returncode == 1
    assert run_cli("--leak-kinds", "possible", path).returncode == 0  # no --fail-on-leak
    bad = run_cli("--leak-kinds", "lost", path)
    assert bad.returncode == 2 and "unknown leak kind 'lost'" in bad.stderr
    # a 1.0 dump has no scan: every leaked block counts, with a warning
    old = Dump()
    old.malloc("0x10", 16, main_at(5))
    old.end()
    old_path = old.write(tmp_path, "old.memdump")
    result = run_cli("--fail-on-leak", "--leak-kinds", "possible", old_path)
    assert result.returncode == 1
    assert "the dump has no pointer scan" in result.stderr


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["r 0x10 D"], "'r' record before any 'scan' record"),
        (["scan 4 ok 1 2 3", "r 0x10 X"], "unknown leak kind 'X' (D, I, P or R)"),
        (["scan 4 ok 1 2 3", "r 0x10"],
         "'r' record has 1 field, expected 2 (ADDR KIND [HEURISTIC])"),
        (["scan 4 ok 1 2 3", "r 10 D"], "malformed ADDR '10' (expected a hex number like 0x1f)"),
        (["scan 4 ok 1 2"], "'scan' record has 4 fields, expected 5"),
        (["scan 3 ok 1 2 3"], "scan record says it follows event 3, but it follows event 4"),
    ],
)
def test_malformed_scan_records(tmp_path: Path, lines: list[str], message: str) -> None:
    d = _dump(scan=None)
    n = 0
    for line in lines:
        n = d.raw(line)
    d.end()
    with pytest.raises(DumpError) as info:
        analyze(d.write(tmp_path))
    assert message in str(info.value)
    assert info.value.line == n


def test_a_1_0_reader_would_skip_the_records(tmp_path: Path) -> None:
    """The records are plain tags: a reader that does not know them skips them (dump-format.md)."""
    d = _dump()
    d.end()
    text = Path(d.write(tmp_path)).read_text()
    assert all(line.split()[0] in {"i", "s", "f", "n", "e", "scan", "r", "end"}
               for line in text.splitlines()[1:])
