"""memdump end to end: `--depth 0` (`set memdump depth 0`) records every event without its stack,
in both recorders, and the report reads it (issue 24, item 2)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import memdump_e2e
from memdump_e2e import GDB_TIMEOUT, analyze, analyze_raw, program, read_dump, record

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "memdump.sh"
ITERATIONS = 100


def _check(dump: Path) -> None:
    """churn_leak's 201 events, each with STACK 0, and its 77-byte leak, stackless."""
    facts = read_dump(dump)
    assert facts.info["depth"] == "0"
    assert {e[4] for e in facts.events} == {"0"}
    assert len(facts.events) == 2 * ITERATIONS + 1
    report = analyze(dump)
    assert report.leaked == (77, 1)
    assert [(g["bytes"], g["blocks"], g["leak_kind"], g["stack"]) for g in report.groups()] == \
        [(77, 1, "definite", [])]
    calls = {op: n for op, n in report.summary["calls"].items() if n}
    assert calls == {"malloc": ITERATIONS + 1, "free": ITERATIONS}
    text = analyze_raw(dump).stdout
    assert "LEAK 1 of 1: 77 bytes in 1 block, definitely lost\n" in text
    assert "recorder, no stacks (depth 0))" in text


def test_memdump_sh_depth_0_report(tmp_path: Path, dump: Path) -> None:
    """`memdump.sh --report --depth 0`: the report is printed, the program's status kept."""
    mode = ["--breakpoints"] if memdump_e2e.MODE == "breakpoints" else []
    proc = subprocess.run([str(SCRIPT), *mode, "--report", "--depth", "0", "-o", str(dump), "--",
                           str(program("churn_leak")), str(ITERATIONS)], capture_output=True,
                          text=True, timeout=GDB_TIMEOUT, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "LEAK 1 of 1: 77 bytes in 1 block, definitely lost\n" in proc.stderr
    _check(dump)


def test_set_memdump_depth_0(dump: Path) -> None:
    """`set memdump depth 0` in GDB, then `memdump` and `run`."""
    record("churn_leak", str(ITERATIONS), dump=dump, before=["set memdump depth 0"])
    _check(dump)
