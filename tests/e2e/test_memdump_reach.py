"""The pointer scan at exit: each leak kind, exact bytes and blocks per allocation site.

tests/programs/reach_kinds.c and reach_cpp.cpp make one case each (argv[1]); the figures are the
ones valgrind 3.19 gives too (test_memdump_vs_valgrind.py checks that).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from memdump_e2e import Report, Site, analyze, analyze_raw, frame_site, marker, read_dump, record

KINDS = ("definite", "indirect", "possible", "reachable")

# case -> (program, {(marker, leak kind): (bytes, blocks)})
CASES: dict[str, tuple[str, dict[tuple[str, str], tuple[int, int]]]] = {
    "global": ("reach_kinds", {("global", "reachable"): (100, 1)}),
    "list": ("reach_kinds", {("list-node", "definite"): (48, 1),
                             ("list-node", "indirect"): (192, 4)}),
    "tree": ("reach_kinds", {("tree-root", "definite"): (24, 1),
                             ("tree-kid1", "indirect"): (100, 1),
                             ("tree-kid2", "indirect"): (150, 1),
                             ("tree-kid3", "indirect"): (154, 1)}),
    "interior": ("reach_kinds", {("interior", "possible"): (200, 1)}),
    "cycle": ("reach_kinds", {("cycle-a", "definite"): (64, 1),
                              ("cycle-b", "indirect"): (64, 1)}),
    "length64": ("reach_kinds", {("length64", "reachable"): (128, 1)}),
    "thread-stack": ("reach_kinds", {("thread-stack", "reachable"): (300, 1)}),
    "thread-exited": ("reach_kinds", {("thread-exited", "definite"): (310, 1)}),
    "register": ("reach_kinds", {("register", "reachable"): (400, 1)}),
    "mmap-neighbour": ("reach_kinds", {("mmapped-big", "reachable"): (262144, 1),
                                       ("in-mmap", "reachable"): (24, 1)}),
    "newarray": ("reach_cpp", {("newarray", "reachable"): (56, 1)}),
    "multipleinheritance": ("reach_cpp", {("multipleinheritance", "reachable"): (40, 1)}),
}
# cases whose block is reachable only through an interior pointer a heuristic explains
HEURISTIC = ("newarray", "multipleinheritance", "length64")


def _source(program: str) -> str:
    return f"{program}.cpp" if program == "reach_cpp" else f"{program}.c"


def kind_sites(report: Report) -> dict[tuple[Site | None, str], tuple[int, int]]:
    """{(allocation site, leak kind): (bytes, blocks)} of the program's leak groups."""
    out: dict[tuple[Site | None, str], tuple[int, int]] = {}
    for group in report.groups("leak"):
        stack = group["stack"]
        key = (frame_site(stack[0]) if stack else None, group["leak_kind"])
        assert key not in out, report.dumps()
        out[key] = (group["bytes"], group["blocks"])
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_leak_kinds(case: str, dump: Path) -> None:
    program, expected = CASES[case]
    run = record(program, case, dump=dump)
    assert "pointer scan" not in run.output, run.describe()
    report = analyze(dump)
    source = _source(program)
    want = {(marker(source, name), kind): figures for (name, kind), figures in expected.items()}
    assert kind_sites(report) == want, report.dumps()
    totals = {k: [0, 0] for k in KINDS}
    for (_, kind), (nbytes, blocks) in expected.items():
        totals[kind][0] += nbytes
        totals[kind][1] += blocks
    kinds = report.summary["leak_kinds"]
    assert {k: (kinds[k]["bytes"], kinds[k]["blocks"]) for k in KINDS} == {
        k: tuple(v) for k, v in totals.items()}
    assert kinds["unknown"] == {"bytes": 0, "blocks": 0}
    assert report.summary["scan"]["status"] == "ok"
    assert report.summary["scan"]["root_bytes"] > 0
    text = dump.read_text()
    assert text.count("\nscan ") == 1
    heuristics = [line.split()[3] for line in text.splitlines()
                  if line.startswith("r ") and line.split()[2] != "I" and len(line.split()) == 4]
    assert heuristics == ([case] if case in HEURISTIC else []), text


def test_threads_alive_at_exit_keep_their_thread_data_possibly_lost(dump: Path) -> None:
    """A thread alive at exit: its stack is a root from its stack pointer up; glibc's dtv of it
    (a runtime block) is found only through the thread's `dtv` field, which points 8 bytes in:
    possibly lost, as valgrind says."""
    record("reach_kinds", "thread-stack", dump=dump)
    runtime = analyze(dump).groups("runtime")
    assert [(g["bytes"], g["blocks"], g["leak_kind"]) for g in runtime] == [(272, 1, "possible")]


def test_text_report_has_valgrind_lines(dump: Path) -> None:
    record("reach_kinds", "list", dump=dump)
    proc = analyze_raw(dump, "--show-leak-kinds", "all")
    assert proc.returncode == 0, proc.stderr
    assert "LEAK 1 of 2: 240 (48 direct, 192 indirect) bytes in 1 block, definitely lost\n" \
        in proc.stdout
    assert "LEAK 2 of 2: 192 bytes in 4 blocks, indirectly lost\n" in proc.stdout
    default = analyze_raw(dump).stdout  # valgrind's --show-leak-kinds=definite,possible
    assert "LEAK 1 of 1: 240 (48 direct, 192 indirect) bytes in 1 block, definitely lost\n" \
        in default
    assert ("\n... and 1 leak group indirectly lost (192 bytes in 4 blocks) not shown "
            "(--show-leak-kinds all lists them)\n") in default
    for line in ("definitely lost: 48 bytes in 1 block\n",
                 "indirectly lost: 192 bytes in 4 blocks\n",
                 "possibly lost:   0 bytes in 0 blocks\n",
                 "still reachable: 0 bytes in 0 blocks\n"):
        assert line in proc.stdout, proc.stdout


def test_a_lost_tree_is_its_root_with_the_bytes_it_leads(dump: Path) -> None:
    """The children, allocated first, lead cliques of their own until the root's clique absorbs
    them: every indirect block's `r` record names the root, whose group is valgrind's
    `428 (24 direct, 404 indirect) bytes in 1 blocks are definitely lost`."""
    record("reach_kinds", "tree", dump=dump)
    text = dump.read_text()
    records = {line.split()[1]: line.split()[2:] for line in text.splitlines()
               if line.startswith("r ")}
    [root] = [addr for addr, fields in records.items() if fields == ["D"]]
    assert sorted(fields for addr, fields in records.items() if addr != root) == [
        ["I", root]] * 3, text
    report = analyze(dump)
    [group] = [g for g in report.groups("leak") if g["leak_kind"] == "definite"]
    assert frame_site(group["stack"][0]) == marker("reach_kinds.c", "tree-root")
    assert (group["bytes"], group["direct_bytes"], group["indirect_bytes"],
            group["indirect_blocks"], group["blocks"]) == (24, 24, 404, 3, 1)
    out = analyze_raw(dump).stdout
    assert "LEAK 1 of 1: 428 (24 direct, 404 indirect) bytes in 1 block, definitely lost\n" in out


def test_fail_on_leak_by_kind(tmp_path: Path) -> None:
    kept, lost = tmp_path / "kept.memdump", tmp_path / "lost.memdump"
    record("reach_kinds", "global", dump=kept)
    record("reach_kinds", "list", dump=lost)
    assert analyze_raw(kept, "--fail-on-leak").returncode == 0  # valgrind's definite,possible
    assert analyze_raw(lost, "--fail-on-leak").returncode == 1
    assert analyze_raw(kept, "--fail-on-leak", "--leak-kinds", "all").returncode == 1
    proc = analyze_raw(kept, "--fail-on-leak", "--errors-for-leak-kinds", "reachable")
    assert proc.returncode == 1
    assert analyze_raw(kept, "--fail-on-leak", "--leak-kinds", "definite,possible").returncode == 0
    assert analyze_raw(lost, "--fail-on-leak", "--leak-kinds", "definite,possible").returncode == 1
    assert analyze_raw(lost, "--fail-on-leak", "--leak-kinds", "reachable").returncode == 0
    bad = analyze_raw(lost, "--leak-kinds", "lost")
    assert bad.returncode == 2 and "unknown leak kind 'lost'" in bad.stderr


def test_no_scan_without_exit(dump: Path) -> None:
    """Killed before _exit: no scan record; the report says the kinds are unknown, and
    --fail-on-leak counts every leaked block whatever --leak-kinds says."""
    record("leak_sigkill", dump=dump)
    assert "\nscan " not in dump.read_text()
    report = analyze(dump)
    assert report.summary["leak_kinds"] is None and report.summary["scan"] is None
    assert {g["leak_kind"] for g in report.groups("leak")} == {None}
    text = analyze_raw(dump).stdout
    assert "leak kinds:" in text and "unknown: no pointer scan" in text
    proc = analyze_raw(dump, "--fail-on-leak", "--leak-kinds", "definite")
    assert proc.returncode == 1
    assert "the dump has no pointer scan" in proc.stderr


def test_scan_can_be_turned_off(dump: Path) -> None:
    record("reach_kinds", "global", dump=dump, before=["set memdump scan-time-limit 0"])
    assert "\nscan " not in dump.read_text()
    assert analyze(dump).summary["leak_kinds"] is None


def test_a_direct_exit_call_is_scanned(dump: Path) -> None:
    """leak_exit calls _exit() itself (no exit handlers): the scan happens there, and main's
    frame, above the stack pointer, still holds the block."""
    record("leak_exit", dump=dump)
    report = analyze(dump)
    assert report.summary["scan"]["status"] == "ok"
    kinds = report.summary["leak_kinds"]
    assert {k: (kinds[k]["bytes"], kinds[k]["blocks"]) for k in KINDS} == {
        "definite": (0, 0), "indirect": (0, 0), "possible": (0, 0), "reachable": (48, 1)}


@pytest.mark.parametrize(("name", "site", "size"), [("crash_segv", "before-crash", 64),
                                                    ("crash_abort", "before-abort", 56)])
def test_a_fatal_signal_is_scanned(name: str, site: str, size: int, dump: Path) -> None:
    """A signal the program does not catch stops it for good: the scan happens at that stop.
    main's frame still holds the block, so it is still reachable, as valgrind 3.19 says too."""
    record(name, dump=dump, after=["continue"])
    report = analyze(dump)
    assert report.end["reason"] == "killed"
    assert report.summary["scan"]["status"] == "ok"
    assert kind_sites(report) == {(marker(f"{name}.c", site), "reachable"): (size, 1)}


def test_a_default_terminating_signal_is_scanned(dump: Path) -> None:
    """leak_sigterm dies of SIGTERM's default action: the scan happens at the stop, and the kinds
    are valgrind 3.19's (48 bytes definitely lost, 32 still reachable through a global)."""
    record("leak_sigterm", dump=dump, after=["continue"])
    report = analyze(dump)
    assert (report.end["reason"], report.end["detail"]) == ("killed", "SIGTERM")
    assert report.summary["scan"]["status"] == "ok"
    assert kind_sites(report) == {(marker("leak_sigterm.c", "lost"), "definite"): (48, 1),
                                  (marker("leak_sigterm.c", "kept"), "reachable"): (32, 1)}


def test_a_signal_gdb_does_not_pass_is_no_death(dump: Path) -> None:
    """With `handle SIGTERM nopass` the program survives its SIGTERM (pause() then waits): no
    signal record, no scan at that stop."""
    record("leak_sigterm", dump=dump, before=["handle SIGTERM stop print nopass"])
    facts = read_dump(dump)
    assert facts.process == []
    assert analyze(dump).summary["scan"] is None


@pytest.mark.parametrize("how", ["object", "exit", "_exit"])
def test_a_pointer_that_died_before_exit_is_not_a_root(how: str, dump: Path) -> None:
    """exit_stale loses a C++ object (104 bytes, with a string, a vector and a map: 301 bytes)
    in a function that returned, then ends (main's return, exit() from a function, _exit() from
    main). A copy of the pointer stays in the stack exit's path grows over, or in a register
    _exit overwrites: valgrind says all 405 bytes are lost (definitely and indirectly; which block
    leads the clique depends on the heap's layout), and so must memdump."""
    record("exit_stale", how, dump=dump)
    report = analyze(dump)
    kinds = report.summary["leak_kinds"]
    lost = kinds["definite"]["bytes"] + kinds["indirect"]["bytes"]
    assert (lost, kinds["definite"]["blocks"] + kinds["indirect"]["blocks"]) == (405, 4)
    assert (kinds["possible"]["blocks"], kinds["reachable"]["blocks"]) == (0, 0)


def test_a_caught_signal_waits_for_exit(dump: Path) -> None:
    """crash_handled catches its SIGSEGV, allocates in the handler and _exits: the scan waits for
    _exit, so the handler's block is scanned (reachable through a global) and not 'not scanned'."""
    record("crash_handled", dump=dump, after=["continue"])
    report = analyze(dump)
    assert report.end["reason"] == "exit" and str(report.end["detail"]) == "3"
    assert report.summary["scan"]["status"] == "ok"
    assert kind_sites(report) == {(marker("crash_handled.c", "in-handler"), "reachable"): (40, 1)}
