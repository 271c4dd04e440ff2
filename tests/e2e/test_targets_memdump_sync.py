"""The sync targets (RW locks, Monte Carlo pi, producer-consumer) run clean under memdump.

Each benchmark runs a small configuration of every variant (few threads, few items: every
allocation costs a breakpoint stop under memdump), exits 0 and prints its result table, with
nothing leaked and no heap error. RW 1.4 (`--variant 1.4-flawed`) deadlocks on purpose and is not
run here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from memdump_e2e import GDB_TIMEOUT, REPO, analyze, build_dir

SCRIPT = REPO / "scripts" / "memdump.sh"

CASES = {
    "rw_locks": ("rw_locks/rw_locks_bench", "--readers", "2", "--writers", "1",
                 "--millis", "20"),
    "monte_carlo_pi": ("monte_carlo_pi/monte_carlo_pi_bench", "--threads", "2",
                       "--points", "2000"),
    "producer_consumer": ("producer_consumer/producer_consumer_bench", "--threads", "2",
                          "--items", "20", "--sleep-us", "100"),
}


def target(relative: str) -> Path:
    path = build_dir() / "targets" / relative
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `make build`", pytrace=False)
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_sync_target_runs_clean_under_memdump(name: str, dump: Path) -> None:
    program, *args = CASES[name]
    proc = subprocess.run([str(SCRIPT), "-o", str(dump), "--", str(target(program)), *args],
                          capture_output=True, text=True, timeout=GDB_TIMEOUT,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("| "), proc.stdout
    report = analyze(dump)
    assert report.complete, report.dumps()
    assert report.leaked == (0, 0), report.dumps()
    assert report.summary["errors"] == 0, report.dumps()
    assert report.errors() == [], report.dumps()
    assert report.summary["untracked_frees"] == 0, report.dumps()
    assert report.summary["allocations"] > 0, "memdump saw no allocation at all"
