"""Leak kinds: the `scan` and `r` records (MEMDUMP 1.1), groups split by kind, summaries, errors,
--fail-on-leak with --leak-kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyzer_testlib import LIBC, Dump, F, main_at, run_cli
from memdump_analyzer import DumpError, LiveScan, analyze, render_json, render_text


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
    # a live report (memdump leaks) shows the kinds of the scan it has
    assert "    definitely lost: 16 bytes in 1 block\n" in render_text(a, live=True)


def test_a_live_scan_replaces_the_dump_s(tmp_path: Path) -> None:
    """GDB's `memdump leaks` scans the process now: its kinds are the report's, not the dump's
    last scan's; a scan that could not run leaves the kinds unknown and says why."""
    path = _dump().write(tmp_path)
    scan = LiveScan("ok", 8192, 148, 3, [(0x10, "definite", None), (0x20, "indirect", "0x10"),
                                         (0x30, "possible", None), (0x40, "reachable", None)])
    a = analyze(path, scan=scan)
    assert [(g.bytes, g.blocks, g.leak_kind, g.indirect_bytes) for g in a.leaks] == [
        (100, 1, "reachable", 0), (16, 1, "definite", 16), (16, 1, "indirect", 0),
        (16, 1, "possible", 0)]
    assert a.scan is not None and (a.scan.root_bytes, a.scan.line) == (8192, 0)
    busy = analyze(path, scan=LiveScan("in-allocator"))
    assert busy.leak_kinds is None
    assert ("the pointer scan did not complete (a thread was inside an allocator call, changing "
            "the heap): leak kinds are unknown") in busy.warnings(live=True)
    assert "leak kinds:  unknown: the pointer scan did not complete" in render_text(busy, live=True)


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
    for option in ("--errors-for-leak-kinds", "--leak-kinds"):  # --leak-kinds: the older name
        assert run_cli("--fail-on-leak", option, "possible", path).returncode == 0
        assert run_cli("--fail-on-leak", option, "definite,possible", path).returncode == 1
        assert run_cli("--fail-on-leak", option, "none", path).returncode == 0
        assert run_cli("--fail-on-leak", option, "all", path).returncode == 1
    assert run_cli("--leak-kinds", "possible", path).returncode == 0  # no --fail-on-leak
    bad = run_cli("--leak-kinds", "lost", path)
    assert bad.returncode == 2 and "unknown leak kind 'lost'" in bad.stderr
    # a 1.0 dump has no scan: every leaked block counts, with a warning when the kinds are given
    old = Dump()
    old.malloc("0x10", 16, main_at(5))
    old.end()
    old_path = old.write(tmp_path, "old.memdump")
    result = run_cli("--fail-on-leak", "--leak-kinds", "possible", old_path)
    assert result.returncode == 1
    assert "the dump has no pointer scan" in result.stderr
    result = run_cli("--fail-on-leak", old_path)
    assert (result.returncode, result.stderr) == (1, "")


def test_errors_for_leak_kinds_default_is_valgrinds(tmp_path: Path) -> None:
    """valgrind 3.19's --errors-for-leak-kinds=definite,possible: a still reachable block alone
    does not fail, a definitely or possibly lost one does."""
    for code, kinds in (("R", 0), ("I", 0), ("P", 1), ("D", 1)):
        d = Dump(header="MEMDUMP 1.1")
        d.malloc("0x10", 16, main_at(5))
        d.raw(f"scan {d.seq} ok 4096 16 1")
        d.raw(f"r 0x10 {code}")
        d.end()
        assert run_cli("--fail-on-leak", d.write(tmp_path, f"{code}.memdump")).returncode == kinds


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--show-leak-kinds", "lost"], "memdump-analyze: error: --show-leak-kinds: unknown leak "
         "kind 'lost' (definite, indirect, possible, reachable, comma-separated; or all, none)\n"),
        (["--errors-for-leak-kinds", "definite,,possible"], "memdump-analyze: error: "
         "--errors-for-leak-kinds: unknown leak kind '' (definite, indirect, possible, "
         "reachable, comma-separated; or all, none)\n"),
        (["--leak-kinds", "all,definite"], "memdump-analyze: error: --errors-for-leak-kinds: "
         "'all' cannot be combined with other kinds\n"),
        (["--show-leak-kinds", "none,reachable"], "memdump-analyze: error: --show-leak-kinds: "
         "'none' cannot be combined with other kinds\n"),
    ],
)
def test_bad_leak_kinds_are_one_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    d = _dump()
    d.end()
    result = run_cli(*args, d.write(tmp_path))
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message)


def test_show_leak_kinds(tmp_path: Path) -> None:
    """Groups of the kinds not listed are left out of the text and JSON reports, with one line
    saying what; the summary counts every kind. Default: valgrind's definite,possible."""
    d = Dump(header="MEMDUMP 1.1")
    for i in range(3):
        d.malloc(f"0x{i + 1}0", 16, main_at(5))
    d.malloc("0x40", 100, main_at(6))
    d.malloc("0x50", 9, main_at(7))
    d.raw(f"scan {d.seq} ok 4096 141 7")
    for line in ("r 0x10 D", "r 0x20 I", "r 0x30 I", "r 0x40 R", "r 0x50 P"):
        d.raw(line)
    d.end()
    path = d.write(tmp_path)
    text = run_cli(path).stdout
    assert "LEAK 1 of 2: 16 bytes in 1 block, definitely lost\n" in text
    assert "LEAK 2 of 2: 9 bytes in 1 block, possibly lost\n" in text
    assert ("\n... and 2 leak groups indirectly lost or still reachable (132 bytes in 3 blocks) "
            "not shown (--show-leak-kinds all lists them)\n") in text
    assert "    still reachable: 100 bytes in 1 block\n" in text  # the summary counts them
    report = json.loads(run_cli("--format", "json", path).stdout)
    assert [(g["leak_kind"], g["bytes"]) for g in report["leaks"]] == [
        ("definite", 16), ("possible", 9)]
    assert report["not_shown"] == {"groups": 2, "bytes": 132, "blocks": 3}
    text = run_cli("--show-leak-kinds", "reachable,indirect", path).stdout
    assert "LEAK 1 of 2: 100 bytes in 1 block, still reachable\n" in text
    assert "LEAK 2 of 2: 32 bytes in 2 blocks, indirectly lost\n" in text
    assert ("\n... and 2 leak groups definitely lost or possibly lost (25 bytes in 2 blocks) "
            "not shown (--show-leak-kinds all lists them)\n") in text
    text = run_cli("--show-leak-kinds", "all", path).stdout
    assert "LEAK 4 of 4" in text and "not shown" not in text
    text = run_cli("--show-leak-kinds", "none", path).stdout
    assert "LEAK" not in text.split("SUMMARY")[0]
    assert "... and 4 leak groups definitely lost or indirectly lost or possibly lost or still " \
        "reachable (157 bytes in 5 blocks) not shown" in text
    # the runtime's groups (--show-runtime) are not filtered; nor those of unknown kind
    d = _dump()
    d.e("malloc", "0x60", 4, stack=[F("_IO_file_doallocate", module=LIBC, pc=0x7FFFF7E4A000)])
    d.malloc("0x70", 5, main_at(8))
    d.end()
    text = run_cli("--show-runtime", "--show-leak-kinds", "none", d.write(tmp_path, "r.memdump"))
    assert "RUNTIME 1 of 1: 4 bytes in 1 block, not scanned\n" in text.stdout
    assert "LEAK 1 of 1: 5 bytes in 1 block, not scanned\n" in text.stdout


def test_help_lists_the_leak_kind_options() -> None:
    out = " ".join(run_cli("--help").stdout.split())
    assert "--show-leak-kinds LIST" in out
    assert "--errors-for-leak-kinds LIST, --leak-kinds LIST" in out


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["r 0x10 D"], "'r' record before any 'scan' record"),
        (["scan 4 ok 1 2 3", "r 0x10 X"], "unknown leak kind 'X' (D, I, P or R)"),
        (["scan 4 ok 1 2 3", "r 0x10"],
         "'r' record has 1 field, expected 2 (ADDR KIND [HEURISTIC|LEADER])"),
        (["scan 4 ok 1 2 3", "r 0x10 I 10"],
         "malformed LEADER '10' (expected a hex number like 0x1f)"),
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


def test_top_counts_the_listed_groups_whatever_their_kind(tmp_path: Path) -> None:
    """--top N: the N largest of the groups listed, whatever their leak kind (as valgrind's
    max_loss_records_output), the same in text and JSON; the runtime's apart."""
    d = Dump(header="MEMDUMP 1.1")
    for i, size in enumerate((50, 40, 30, 20, 10)):
        d.malloc(f"0x{i + 1}0", size, main_at(10 + i))
    d.e("malloc", "0x60", 5, stack=[F("_IO_file_doallocate", module=LIBC, pc=0x7FFFF7E4A000)])
    d.e("malloc", "0x70", 4, stack=[F("_nl_load_locale", module=LIBC, pc=0x7FFFF7E4B000)])
    d.raw(f"scan {d.seq} ok 4096 159 1")
    for i, code in enumerate("DPDRP"):
        d.raw(f"r 0x{i + 1}0 {code}")
    d.raw("r 0x60 R")
    d.raw("r 0x70 R")
    d.end()
    path = d.write(tmp_path)
    text = run_cli("--top", "2", "--show-runtime", path).stdout
    titles = [line for line in text.splitlines() if line.startswith(("LEAK", "RUNTIME"))]
    assert titles == [
        "LEAK 1 of 4: 50 bytes in 1 block, definitely lost",
        "LEAK 2 of 4: 40 bytes in 1 block, possibly lost",
        "RUNTIME 1 of 2: 5 bytes in 1 block, still reachable",
        "RUNTIME 2 of 2: 4 bytes in 1 block, still reachable",
    ]
    assert "... and 2 more leak groups (40 bytes in 2 blocks) not shown (--top)\n" in text
    assert ("... and 1 leak group still reachable (20 bytes in 1 block) not shown "
            "(--show-leak-kinds all lists them)\n") in text
    report = json.loads(run_cli("--format", "json", "--top", "2", "--show-runtime", path).stdout)
    assert [(g["kind"], g["bytes"]) for g in report["leaks"]] == [
        ("leak", 50), ("leak", 40), ("runtime", 5), ("runtime", 4)]
    assert report["not_shown"] == {"groups": 3, "bytes": 60, "blocks": 3}
    help_text = " ".join(run_cli("--help").stdout.split())
    assert "list only the N largest groups" in help_text and "whatever their kind" in help_text


def test_a_definitely_lost_group_shows_the_bytes_it_leads(tmp_path: Path) -> None:
    """valgrind's `428 (24 direct, 404 indirect) bytes in 1 blocks are definitely lost`: a lost
    list head of 24 bytes with three children (100, 150, 154 bytes, each its own stack); two
    heads at one stack add up; a leader freed after the scan owns nothing."""
    d = Dump(header="MEMDUMP 1.2")
    head = main_at(20)
    d.malloc("0x1000", 24, head)
    for k, size in enumerate((100, 150, 154)):
        d.malloc(f"0x{0x2000 + 0x100 * k:x}", size, main_at(21 + k))
    d.malloc("0x3000", 24, head)  # a second head, at the same stack, with one child
    d.malloc("0x3100", 8, main_at(21))
    d.malloc("0x4000", 500, main_at(30))  # a bigger leak without children
    d.malloc("0x5000", 16, main_at(31))  # a head freed after the scan
    d.malloc("0x5100", 32, main_at(32))
    d.raw(f"scan {d.seq} ok 4096 1008 1")
    for line in ("r 0x1000 D", "r 0x2000 I 0x1000", "r 0x2100 I 0x1000", "r 0x2200 I 0x1000",
                 "r 0x3000 D", "r 0x3100 I 0x3000", "r 0x4000 D", "r 0x5000 D",
                 "r 0x5100 I 0x5000"):
        d.raw(line)
    d.free("0x5000", main_at(33))
    d.end()
    path = d.write(tmp_path)
    a = analyze(path)
    assert [(g.leak_kind, g.stack[0].line, g.bytes, g.blocks, g.indirect_bytes,
             g.indirect_blocks) for g in a.leaks] == [
        ("definite", 30, 500, 1, 0, 0),
        ("definite", 20, 48, 2, 412, 4),  # sorted by 460 bytes in all, as valgrind's records
        ("indirect", 23, 154, 1, 0, 0),
        ("indirect", 22, 150, 1, 0, 0),
        ("indirect", 21, 108, 2, 0, 0),
        ("indirect", 32, 32, 1, 0, 0),
    ]
    text = run_cli(path).stdout
    assert "LEAK 1 of 2: 500 bytes in 1 block, definitely lost\n" in text
    assert ("LEAK 2 of 2: 460 (48 direct, 412 indirect) bytes in 2 blocks, definitely lost\n"
            "    at main (app.c:20)\n") in text
    assert "    definitely lost: 548 bytes in 3 blocks\n" in text  # the summary: direct only
    assert "    indirectly lost: 444 bytes in 5 blocks\n" in text
    report = json.loads(run_cli("--format", "json", path).stdout)
    assert [(g["bytes"], g["direct_bytes"], g["indirect_bytes"], g["indirect_blocks"])
            for g in report["leaks"]] == [(500, 500, 0, 0), (48, 48, 412, 4)]
    # one head with three children: valgrind's line exactly
    d = Dump(header="MEMDUMP 1.2")
    d.malloc("0x1000", 24, main_at(20))
    for k, size in enumerate((100, 150, 154)):
        d.malloc(f"0x{0x2000 + 0x100 * k:x}", size, main_at(21))
    d.raw(f"scan {d.seq} ok 4096 428 1")
    for line in ("r 0x1000 D", "r 0x2000 I 0x1000", "r 0x2100 I 0x1000", "r 0x2200 I 0x1000"):
        d.raw(line)
    d.end()
    text = run_cli("--show-leak-kinds", "all", d.write(tmp_path, "list.memdump")).stdout
    assert "LEAK 1 of 2: 428 (24 direct, 404 indirect) bytes in 1 block, definitely lost\n" in text
    assert "LEAK 2 of 2: 404 bytes in 3 blocks, indirectly lost\n" in text
