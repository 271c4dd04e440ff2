"""memdump end to end: `memdump status`, `memdump leaks` and `memdump stop` at a user breakpoint."""

from __future__ import annotations

import json
import re
from pathlib import Path

import memdump_e2e
from memdump_e2e import (
    Report,
    analyze,
    expect_leaks,
    marker,
    read_dump,
    record,
)

SRC = "live_blocks.c"


def _json_blocks(text: str) -> list[dict]:
    """The pretty-printed JSON objects (a `{` line to a `}` line) in GDB's output."""
    return [json.loads(m.group(0)) for m in re.finditer(r"(?ms)^\{$.*?^\}$", text)]


def test_status_and_leaks_at_a_breakpoint(tmp_path: Path, dump: Path) -> None:
    """At the breakpoint `kept` and `leaked` are live and `temp` is freed; `memdump leaks` groups
    them exactly as the analyser groups a copy of the dump taken at that moment."""
    brk = marker(SRC, "here", "BREAK")
    live_json = tmp_path / "live.json"
    snapshot = tmp_path / "snapshot.memdump"
    run = record("live_blocks", dump=dump, before=[f"break {brk}"], after=[
        f"memdump leaks --json --show-runtime -o {live_json}",
        f"shell cp {dump} {snapshot}",
        "memdump status --json",
        "memdump leaks",
        "continue",
    ])
    expected_live = {marker(SRC, "kept", "LIVE"): (11, 1), marker(SRC, "leaked"): (33, 1)}

    live = Report(json.loads(live_json.read_text()))
    assert live.data["format"] == "memdump-report" and live.data["version"].startswith("1.")
    expect_leaks(live, expected_live)
    assert any(f"report in {live_json}" in line for line in run.memdump_lines()), run.describe()

    offline = analyze(snapshot)
    expect_leaks(offline, expected_live)
    # the same groups, and the live report has the kinds of the scan it made at the stop
    assert [{**g, "leak_kind": None} for g in live.data["leaks"]] == offline.data["leaks"]
    assert [g["leak_kind"] for g in live.data["leaks"]] == ["reachable", "reachable"]
    assert {k: v for k, v in live.summary.items() if k not in ("leak_kinds", "scan")} == \
        {k: v for k, v in offline.summary.items() if k not in ("leak_kinds", "scan")}

    statuses = _json_blocks(run.stdout)
    assert len(statuses) == 1, run.describe()
    status = statuses[0]
    assert (status["format"], status["version"]) == ("memdump-status", "1.0")
    assert status["state"] == "recording"
    assert status["path"] == str(dump)
    snap = read_dump(snapshot)
    assert status["pid"] == int(snap.info["pid"])
    assert status["events"] == len(snap.events) + len(snap.process)
    assert status["pending_calls"] == 0
    assert status["recorder"] == memdump_e2e.MODE
    if memdump_e2e.MODE == "breakpoints":
        assert status["hooks"] > 0

    # The text report names both live sites and not the freed one.
    text = run.stdout
    assert str(marker(SRC, "kept", "LIVE")) in text and str(marker(SRC, "leaked")) in text
    assert str(marker(SRC, "temp", "FREE")) not in text

    final = analyze(dump)
    expect_leaks(final, {marker(SRC, "leaked"): (33, 1), marker(SRC, "late"): (44, 1)})
    assert read_dump(dump).end == ("exit", "0")


def test_stop_mid_run(dump: Path) -> None:
    """`memdump stop` at the breakpoint ends the dump there: what happens after is not recorded, so
    the blocks live at the stop are what the dump reports."""
    brk = marker(SRC, "here", "BREAK")
    run = record("live_blocks", dump=dump, before=[f"break {brk}"],
                 after=["memdump stop", "memdump status", "continue"])
    facts = read_dump(dump)
    assert facts.end == ("stop", "-")
    assert facts.sizes() == [11, 22, 33]
    report = analyze(dump)
    assert report.complete
    assert report.end["reason"] == "stop"
    expect_leaks(report, {marker(SRC, "kept", "LIVE"): (11, 1), marker(SRC, "leaked"): (33, 1)})
    assert "[Inferior 1 (process" in run.stdout and "exited normally" in run.stdout
    assert re.search(r"^state:\s+ended \(stop\)$", run.stdout, re.M), run.describe()


def test_leaks_folds_the_runtime_frames_unless_asked(dump: Path) -> None:
    """`memdump leaks` folds the threads' callers in the C library (start_thread, clone3) into one
    line, as the analyser does; `--show-runtime-frames` lists them."""
    run = record("leak_threads", dump=dump, before=["set breakpoint pending on", "break exit"],
                 after=["memdump leaks", "echo ==shown==\\n", "memdump leaks --show-runtime-frames",
                        "continue"])
    folded, shown = run.stdout.split("==shown==\n", 1)
    a = marker("leak_threads.c", "thread-a")
    b = marker("leak_threads.c", "thread-b")
    fold = "    ... 2 frames of the C/C++ runtime (--show-runtime-frames)\n"
    groups = ((1, "666 bytes in 3", "worker_b", b), (2, "555 bytes in 5", "worker_a", a))
    for n, size, fn, site in groups:
        # still reachable: the threads' blocks are held by globals when exit() is called
        group = f"LIVE {n} of 2: {size} blocks, still reachable\n    at {fn} ({site})\n{fold}"
        assert group in folded, run.describe()
    assert "start_thread" not in folded
    callers = (r"    by start_thread \(pthread_create\.c:\d+\)\n"
               r"    by clone3 \(clone3\.S:\d+\)\n")
    head = (rf"LIVE 2 of 2: 555 bytes in 5 blocks, still reachable\n"
            rf"    at worker_a \({re.escape(str(a))}\)\n")
    assert re.search(head + callers, shown), run.describe()
