"""The concurrency targets run to completion under memdump with nothing leaked and no heap errors.

Each benchmark runs a small configuration of every variant (a few hundred allocations at most:
every allocation costs a breakpoint stop under memdump), exits 0 and prints its result table.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from memdump_e2e import GDB_TIMEOUT, REPO, analyze, build_dir

SCRIPT = REPO / "scripts" / "memdump.sh"

CASES = {
    "spsc_ring": ("spsc_ring/spsc_ring_bench", "--ops", "2000", "--capacity", "16"),
    "mpmc_queue": ("mpmc_queue/mpmc_queue_bench", "--writers", "3", "--readers", "2",
                   "--items", "40"),
    "false_sharing": ("false_sharing/false_sharing_bench", "--iterations", "100000"),
}


def target(relative: str) -> Path:
    path = build_dir() / "targets" / relative
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `make build`", pytrace=False)
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_target_runs_clean_under_memdump(name: str, dump: Path) -> None:
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
