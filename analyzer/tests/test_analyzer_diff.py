"""`memdump-analyze diff BASE NEW`: groups matched by kind and stack (function, file:line), not by
address; new and grown groups, exit status with --fail-on-leak, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from analyzer_testlib import FIXTURES, LIBC, Dump, F, run_cli


def _recording(tmp_path: Path, name: str, base: int, blocks: dict[int, int],
               kinds: str | None = "D", make: dict[int, tuple[str, int]] | None = None) -> str:
    """A run whose code is loaded at `base` (ASLR): `blocks` {line of main: how many 16-byte
    blocks allocated there}, all of kind `kinds` (None: no pointer scan), by `make` at line 3 of
    app.c or by `make[line]`'s (function, line)."""
    d = Dump(header="MEMDUMP 1.2")
    start = F("__libc_start_call_main", module=LIBC, pc=base + 0x7000_0000)
    ptrs = []
    for k, (line, n) in enumerate(sorted(blocks.items())):
        function, at = (make or {}).get(line, ("make", 3))
        stack = [F(function, "/src/app.c", at, pc=base + 0x100 + k),
                 F("main", "/src/app.c", line, pc=base + 0x200 + k), start]
        for i in range(n):
            ptr = f"0x{(k + 1) * 0x1000 + i * 0x20:x}"
            d.malloc(ptr, 16, stack)
            ptrs.append(ptr)
    if kinds is not None:
        d.raw(f"scan {d.seq} ok 4096 600 1")
        for p in ptrs:
            d.raw(f"r {p} {kinds}")
    d.end()
    return d.write(tmp_path, name)


def test_new_and_grown_groups_by_stack_not_address(tmp_path: Path) -> None:
    base = _recording(tmp_path, "base.memdump", 0x555555554000, {10: 1, 11: 2, 12: 1})
    new = _recording(tmp_path, "new.memdump", 0x563412340000, {10: 1, 11: 3, 13: 2},
                     make={13: ("load", 30)})
    result = run_cli("diff", base, new)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"""\
memdump diff: {base} -> {new}

NEW LEAK 1 of 1: 32 bytes in 2 blocks, definitely lost
    at load (app.c:30)
    by main (app.c:13)

GREW 1 of 1: 48 bytes in 3 blocks, definitely lost (+16 bytes, +1 block; base: 32 bytes in \
2 blocks)
    at make (app.c:3)
    by main (app.c:11)

GONE 1 of 1: 16 bytes in 1 block, definitely lost (leaked in base only)
    at make (app.c:3)
    by main (app.c:12)

DIFF SUMMARY
    new leaks:  1 group, 32 bytes in 2 blocks
    grew:       1 group, +16 bytes
    gone:       1 group, 16 bytes in 1 block
    leaked:     base 64 bytes in 4 blocks, new 96 bytes in 6 blocks
"""
    assert run_cli("diff", "--fail-on-leak", base, new).returncode == 1
    # the same run against itself, and a run that only fixed leaks: nothing new
    same = run_cli("diff", "--fail-on-leak", new, new)
    assert same.returncode == 0 and "new leaks:  0 groups, 0 bytes in 0 blocks" in same.stdout
    assert run_cli("diff", "--fail-on-leak", new, base).returncode == 1  # line 12 is new there
    fixed = _recording(tmp_path, "fixed.memdump", 0x561111110000, {10: 1})
    assert run_cli("diff", "--fail-on-leak", base, fixed).returncode == 0


def test_json_and_kinds(tmp_path: Path) -> None:
    base = _recording(tmp_path, "base.memdump", 0x555555554000, {10: 1})
    new = _recording(tmp_path, "new.memdump", 0x563412340000, {10: 1, 20: 1}, kinds="R")
    report = json.loads(run_cli("diff", "--format", "json", "--show-leak-kinds", "all",
                                base, new).stdout)
    assert (report["format"], report["version"]) == ("memdump-diff", "1.0")
    assert report["summary"] == {
        "base": {"bytes": 16, "blocks": 1}, "new": {"bytes": 32, "blocks": 2},
        "added": {"groups": 2, "bytes": 32, "blocks": 2},
        "grown": {"groups": 0, "bytes": 0, "blocks": 0},
        "gone": {"groups": 1, "bytes": 16, "blocks": 1}}
    assert [(g["leak_kind"], g["stack"][1]["line"]) for g in report["added"]] == [
        ("reachable", 10), ("reachable", 20)]
    assert report["gone"][0]["leak_kind"] == "definite"
    # still reachable is not compared by default (valgrind's definite,possible), nor fails
    plain = json.loads(run_cli("diff", "--format", "json", base, new).stdout)
    assert plain["added"] == [] and plain["summary"]["gone"]["groups"] == 1
    assert run_cli("diff", "--fail-on-leak", "--show-leak-kinds", "all", base, new).returncode == 0
    assert run_cli("diff", "--fail-on-leak", "--show-leak-kinds", "all",
                   "--errors-for-leak-kinds", "reachable", base, new).returncode == 1


def test_bad_input_is_exit_2(tmp_path: Path) -> None:
    good = _recording(tmp_path, "base.memdump", 0x555555554000, {10: 1})
    missing = tmp_path / "missing.memdump"
    result = run_cli("diff", good, str(missing))
    assert result.returncode == 2 and result.stderr.startswith(f"memdump-analyze: {missing}")
    assert result.stderr.count("\n") == 1
    usage = run_cli("diff", good)
    assert usage.returncode == 2 and "the following arguments are required: NEW" in usage.stderr
    bad = run_cli("diff", "--show-leak-kinds", "lost", good, good)
    assert bad.returncode == 2 and "unknown leak kind 'lost'" in bad.stderr


def test_a_dump_named_diff(tmp_path: Path) -> None:
    (tmp_path / "diff").write_bytes((FIXTURES / "example.memdump").read_bytes())
    result = run_cli("./diff", cwd=tmp_path)
    assert result.returncode == 0 and "LEAK 1 of 2" in result.stdout
    # `diff` alone is the subcommand, which wants two dumps
    assert run_cli("diff", cwd=tmp_path).returncode == 2
    # a dump path after options is a dump, whatever its name
    assert run_cli("--format", "json", "diff", cwd=tmp_path).returncode == 0


def _shifted(lines: dict[int, int], by: int = 1) -> dict[int, int]:
    return {line + by: n for line, n in lines.items()}


def test_lines_moved_by_an_edit_match(tmp_path: Path) -> None:
    """A comment line added at the top of app.c moves every line by one: no leak is new or
    gone. A leak added in the same function, at a line of its own, is new; the nearest lines
    pair up."""
    lines = {10: 1, 20: 2, 30: 1}
    base = _recording(tmp_path, "base.memdump", 0x555555554000, lines)
    moved = _recording(tmp_path, "moved.memdump", 0x563412340000, _shifted(lines),
                       make={line: ("make", 4) for line in _shifted(lines)})
    result = run_cli("diff", "--fail-on-leak", "--format", "json", base, moved)
    assert result.returncode == 0, result.stdout
    report = json.loads(result.stdout)
    assert (report["added"], report["grown"], report["gone"]) == ([], [], [])
    more = {**_shifted(lines), 21: 3, 16: 1}
    edited = _recording(tmp_path, "edited.memdump", 0x563412340000, more,
                        make={line: ("make", 4) for line in more})
    result = run_cli("diff", "--fail-on-leak", "--format", "json", base, edited)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert [(g["stack"][1]["line"], g["blocks"]) for g in report["added"]] == [(16, 1)]
    assert [(g["stack"][1]["line"], g["blocks"], g["base_blocks"]) for g in report["grown"]] == [
        (21, 3, 2)]
    assert report["gone"] == []


def test_a_dump_without_a_scan_matches_a_scanned_one(tmp_path: Path) -> None:
    """Without a pointer scan every live block is leaked, of no kind: its groups match the
    scanned run's whatever their kind (a still reachable group, not listed by default, is no new
    leak), and every group is compared."""
    lines = {10: 1, 20: 2}
    for kind in ("D", "R"):
        scanned = _recording(tmp_path, f"scanned-{kind}.memdump", 0x555555554000, lines, kind)
        unscanned = _recording(tmp_path, "unscanned.memdump", 0x563412340000, _shifted(lines),
                               None, make={line: ("make", 4) for line in _shifted(lines)})
        for base, new in ((scanned, unscanned), (unscanned, scanned)):
            result = run_cli("diff", "--fail-on-leak", base, new)
            assert result.returncode == 0, result.stdout
            assert result.stdout.splitlines()[1] == (
                f"note: {unscanned} has no pointer scan: every leak group is compared, whatever "
                "its kind")
            assert "new leaks:  0 groups" in result.stdout
            assert "gone:       0 groups" in result.stdout
    grew = _recording(tmp_path, "grew.memdump", 0x563412340000, {11: 1, 21: 3}, None,
                      make={11: ("make", 4), 21: ("make", 4)})
    report = json.loads(run_cli("diff", "--format", "json", scanned, grew).stdout)
    assert [(g["leak_kind"], g["blocks"], g["base_blocks"]) for g in report["grown"]] == [
        (None, 3, 2)]
