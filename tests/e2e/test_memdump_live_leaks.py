"""Leak checks in a running process: `memdump leaks` scans at any stop (valgrind's `monitor
leak_check`), `memdump block-list N`, `memdump who-points-at ADDR [LEN]`, and a stop inside an
allocator call, where no scan can be trusted.

tests/programs/live_leaks.c builds every leak kind by the line marked `BREAK: check`, where its
valgrind build (live_leaks_valgrind) asks valgrind for its leak check: the reference answer.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from memdump_e2e import Report, Site, marker, program, record

SRC = "live_leaks.c"
FIRST = marker(SRC, "first", "BREAK")
CHECK = marker(SRC, "check", "BREAK")
KIND_WORDS = {"definitely lost": "definite", "indirectly lost": "indirect",
              "possibly lost": "possible", "still reachable": "reachable"}


def _json_blocks(text: str) -> list[dict]:
    return [json.loads(m.group(0)) for m in re.finditer(r"(?ms)^\{$.*?^\}$", text)]


def _kinds(report: Report) -> dict[tuple[Site, str], tuple[int, int]]:
    """{(the first frame's file:line in live_leaks.c, leak kind): (bytes, blocks)}."""
    out = {}
    for group in report.groups("leak"):
        site = next(Site(Path(f["file"]).name, f["line"]) for f in group["stack"]
                    if f.get("file") and f["file"].endswith(SRC))
        out[(site, group["leak_kind"])] = (group["bytes"], group["blocks"])
    return out


def _valgrind_kinds(check: int = 1) -> dict[tuple[Site, str], tuple[int, int]]:
    """valgrind's leak check at the same line (VALGRIND_DO_LEAK_CHECK; CHECK 0: at `first`, 1:
    at `check`), by allocation site."""
    exe = program("live_leaks_valgrind")
    if not exe.exists() or shutil.which("valgrind") is None:
        pytest.skip("valgrind or its memcheck.h is not installed")
    proc = subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=all", str(exe)],
                          capture_output=True, text=True, timeout=120, check=True)
    text = proc.stderr.split("LEAK SUMMARY")[check]
    if check:
        text = text.split("suppressed:", 1)[1]  # the previous check's summary
    out = {}
    for record_text in re.split(r"\n==\d+== \n", text):
        head = re.search(r"([\d,]+)(?: \(([\d,]+) direct, [\d,]+ indirect\))? bytes in ([\d,]+) "
                         r"blocks are (definitely lost|indirectly lost|possibly lost|still "
                         r"reachable)", record_text)
        if head is None:
            continue
        line = re.search(rf"\({SRC}:(\d+)\)", record_text)
        assert line is not None, record_text
        nbytes = int((head.group(2) or head.group(1)).replace(",", ""))
        out[(Site(SRC, int(line.group(1))), KIND_WORDS[head.group(4)])] = (
            nbytes, int(head.group(3).replace(",", "")))
    return out


def test_leaks_at_a_stop_are_valgrinds(tmp_path: Path, dump: Path) -> None:
    """The kinds `memdump leaks` finds at the breakpoint are valgrind's at that line, to the byte;
    at exit everything was freed."""
    live_json = tmp_path / "live.json"
    run = record("live_leaks", dump=dump, before=[f"break {CHECK}"], after=[
        f"memdump leaks --json -o {live_json}", "memdump leaks", "continue"])
    live = Report(json.loads(live_json.read_text()))
    expected = {(marker(SRC, "lost"), "definite"): (48, 1),
                (marker(SRC, "lost-child"), "indirect"): (16, 1),
                (marker(SRC, "inside"), "possible"): (64, 1),
                (marker(SRC, "held"), "reachable"): (40, 1),
                (marker(SRC, "held-child"), "reachable"): (24, 1)}
    assert _kinds(live) == expected, run.describe()
    assert _kinds(live) == _valgrind_kinds()
    kinds = live.summary["leak_kinds"]
    assert {k: (v["bytes"], v["blocks"]) for k, v in kinds.items()} == {
        "definite": (48, 1), "indirect": (16, 1), "possible": (64, 1), "reachable": (64, 2),
        "unknown": (0, 0)}
    assert "    definitely lost: 48 bytes in 1 block\n" in run.stdout
    assert "64 (48 direct, 16 indirect) bytes in 1 block, definitely lost\n" in run.stdout


def test_block_list_and_who_points_at(dump: Path) -> None:
    """block-list N gives the blocks of the Nth group of the last `memdump leaks`; who-points-at
    finds the global that holds a block and the one pointing inside another, as valgrind's."""
    run = record("live_leaks", dump=dump, before=[f"break {CHECK}"], after=[
        "memdump leaks", "memdump block-list 1", "memdump block-list 9",
        "printf \"held=%p &held=%p inside=%p &inside=%p\\n\", held, &held, inside, &inside",
        "memdump who-points-at held", "memdump who-points-at inside-8 64"])
    m = re.search(r"held=(0x[0-9a-f]+) &held=(0x[0-9a-f]+) inside=(0x[0-9a-f]+) "
                  r"&inside=(0x[0-9a-f]+)", run.stdout)
    assert m is not None, run.describe()
    held, held_at, inside, inside_at = (int(g, 16) for g in m.groups())
    block = inside - 8
    # group 1: the largest, 64 bytes possibly lost (listed before the 64 direct+indirect)
    assert f"LEAK 1: 64 bytes in 1 block, possible\n  {block:#x}[64]\n" in run.stdout
    assert "memdump: block-list: no group 9 (the last memdump leaks listed 5)" in run.stderr
    assert f"Searching for pointers to {held:#x}\n" in run.stdout
    assert (f"*{held_at:#x} points at {held:#x}\n  Address {held_at:#x} is 0 bytes inside data "
            'symbol "held"\n') in run.stdout
    assert (f"Searching for pointers pointing in 64 bytes from {block:#x}\n"
            f"*{inside_at:#x} interior points at 8 bytes inside {block:#x}\n") in run.stdout


def test_a_stop_inside_malloc_is_not_scanned(dump: Path) -> None:
    """Stopped inside malloc(40) (the C library's, under the recorder's hook in-process): the heap
    is being changed, so memdump says it cannot scan there instead of guessing."""
    run = record("live_leaks", dump=dump,
                 before=["set breakpoint pending on", "break __libc_malloc if $rdi == 40"],
                 after=["memdump leaks"])
    assert re.search(r"memdump: warning: no pointer scan at this stop: thread \d+ in malloc "
                     r"\(the heap is being changed\); leak kinds unknown", run.output), \
        run.describe()
    assert "leak kinds:  unknown: the pointer scan did not complete" in run.stdout


def test_increased_and_changed_since_the_previous_check(dump: Path) -> None:
    """`memdump leaks` at `first`, then `--increased` at `check`: only the groups that grew, with
    valgrind's (+N) deltas, as valgrind's two checks at those lines differ; `--changed` right
    after finds nothing."""
    run = record("live_leaks", dump=dump, before=[f"break {FIRST}", f"break {CHECK}"], after=[
        "memdump leaks", "continue", "echo ==increased==\\n", "memdump leaks --increased",
        "echo ==changed==\\n", "memdump leaks --changed --json"])
    first, rest = run.stdout.split("==increased==\n", 1)
    increased, changed = rest.split("==changed==\n", 1)
    before, after = _valgrind_kinds(0), _valgrind_kinds(1)
    grown = {key for key, (nbytes, blocks) in after.items()
             if (nbytes, blocks) > before.get(key, (0, 0))}
    assert grown == {(marker(SRC, "lost"), "definite"), (marker(SRC, "lost-child"), "indirect"),
                     (marker(SRC, "inside"), "possible")}
    lines = [line for line in increased.splitlines() if line.startswith(("LIVE", "    at"))]
    assert lines == [
        "LIVE 1 of 3: 64 (+64) bytes in 1 (+1) block, possibly lost",
        f"    at main ({marker(SRC, 'inside')})",
        "LIVE 2 of 3: 64 (+64) bytes in 1 (+1) block, definitely lost",
        f"    at lose ({marker(SRC, 'lost')})",
        "LIVE 3 of 3: 16 (+16) bytes in 1 (+1) block, indirectly lost",
        f"    at lose ({marker(SRC, 'lost-child')})",
    ], increased
    for row in ("    definitely lost: 48 (+48) bytes in 1 (+1) block\n",
                "    indirectly lost: 16 (+16) bytes in 1 (+1) block\n",
                "    possibly lost:   64 (+64) bytes in 1 (+1) block\n",
                "    still reachable: 64 (-64) bytes in 2 (-1) blocks\n"):
        assert row in increased, increased
    assert "64 bytes in 1 block, still reachable" in first
    [report] = _json_blocks(changed)
    assert report["leaks"] == []


def test_older_than(dump: Path) -> None:
    """leak_ages allocates 30 bytes, sleeps 2.5 s, allocates 20: at the breakpoint only the first
    is older than 2 s (ages are counted in whole seconds: up to 1 s too old); --older-than 0 lists
    both; a negative age is refused."""
    brk = marker("leak_ages.c", "check", "BREAK")
    run = record("leak_ages", dump=dump, before=[f"break {brk}"], after=[
        "memdump leaks --older-than 2 --json", "memdump leaks --older-than 0 --json",
        "memdump leaks --older-than -1"])
    old, both = _json_blocks(run.stdout)
    assert [(g["bytes"], g["blocks"]) for g in old["leaks"]] == [(30, 1)]
    assert old["summary"]["leaked"] == {"bytes": 30, "blocks": 1}
    assert [(g["bytes"], g["blocks"]) for g in both["leaks"]] == [(30, 1), (20, 1)]
    assert "memdump: --older-than needs a number of seconds >= 0, not -1" in run.stderr


def _valgrind_monitor(commands: list[str]) -> str:
    """valgrind's answers to monitor COMMANDS at the `check` line of live_leaks_valgrind (its
    gdbserver, through vgdb), with `$held` and `$inside` set to the program's pointers."""
    exe = program("live_leaks_valgrind")
    if not exe.exists() or shutil.which("valgrind") is None or shutil.which("vgdb") is None:
        pytest.skip("valgrind, vgdb or memcheck.h is not installed")
    server = subprocess.Popen(["valgrind", "--vgdb=yes", "--vgdb-error=0", str(exe)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        argv = ["gdb", "-nx", "-batch", "-ex", f"target remote | vgdb --pid={server.pid}",
                "-ex", f"break {CHECK}", "-ex", "continue",
                "-ex", "printf \"held=%p inside=%p\\n\", held, inside"]
        for command in commands:
            argv += ["-ex", command]
        argv += ["-ex", "kill", str(exe)]
        for _ in range(50):  # vgdb finds the server once valgrind has started it
            run = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                                 stdin=subprocess.DEVNULL)
            # held=(nil): GDB printed the file's variable, vgdb had not found the server yet
            if "held=0x" in run.stdout:
                break
            time.sleep(0.2)
        # The answers are GDB's (vgdb relays them); valgrind's own log is kept when it ends in
        # time, which a loaded machine may not grant after GDB's `kill`.
        try:
            log = server.communicate(timeout=60)[1]
        except subprocess.TimeoutExpired:
            log = ""
        return run.stdout + run.stderr + log
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()


def test_who_points_at_and_block_list_are_valgrinds(dump: Path) -> None:
    """The same questions to valgrind's gdbserver (monitor who_points_at, block_list) and to
    memdump at the same line: the same holders (a data symbol, 0 or 8 bytes inside) and the same
    blocks in the possibly lost group (valgrind's loss record 5 of 6 at that point)."""
    vg = _valgrind_monitor([
        "python gdb.execute(f\"monitor who_points_at {int(gdb.parse_and_eval('held')):#x}\")",
        "python gdb.execute(f\"monitor who_points_at "
        "{int(gdb.parse_and_eval('inside')) - 8:#x} 64\")",
        "monitor leak_check full reachable any", "monitor block_list 5"])
    ours = record("live_leaks", dump=dump, before=[f"break {CHECK}"], after=[
        "memdump leaks", "memdump who-points-at held", "memdump who-points-at inside-8 64",
        "memdump block-list 1"]).stdout

    def holders(text: str) -> list[str]:
        return re.findall(r"(\*0x[0-9a-f]+ (?:interior )?points at (?:[\d,]+ bytes inside )?)"
                          r"0x[0-9a-f]+\n\s*Address 0x[0-9a-f]+ is (.*)", text, re.I)

    strip = [(re.sub(r"0x[0-9a-f]+", "ADDR", a, flags=re.I), b) for a, b in holders(vg)]
    mine = [(re.sub(r"0x[0-9a-f]+", "ADDR", a), b) for a, b in holders(ours)]
    assert strip == [("*ADDR points at ", '0 bytes inside data symbol "held"'),
                     ("*ADDR interior points at 8 bytes inside ", '0 bytes inside data symbol '
                      '"inside"')], vg
    assert mine == strip, ours
    vg_blocks = re.findall(r"0x[0-9A-F]+\[(\d+)\]", vg)
    our_blocks = re.findall(r"^  0x[0-9a-f]+\[(\d+)\]$", ours, re.M)
    assert vg_blocks == our_blocks == ["64"], (vg, ours)
