"""The concurrency targets run to completion under memdump with nothing leaked and no heap errors.

Each benchmark runs a small configuration of every variant (a few hundred allocations at most:
every allocation costs a breakpoint stop under memdump), exits 0 and prints its result table.
RW 1.4 (`rw_locks_bench --variant 1.4-flawed`) deadlocks on purpose and is not run here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from memdump_e2e import GDB_TIMEOUT, REPO, analyze, build_dir

SCRIPT = REPO / "scripts" / "memdump.sh"

# Allocation counts are kept small: object_pool's segment pools allocate one segment per 64
# blocks, the new/delete and mutex pools one block per item; private_heap's malloc variant
# allocates every block, its heap and arena variants a chunk at a time.
CASES = {
    "spsc_ring": ("spsc_ring/spsc_ring_bench", "--ops", "2000", "--capacity", "16"),
    "mpmc_queue": ("mpmc_queue/mpmc_queue_bench", "--writers", "3", "--readers", "2",
                   "--items", "40"),
    "false_sharing": ("false_sharing/false_sharing_bench", "--iterations", "100000"),
    "object_pool": ("object_pool/object_pool_bench", "--producers", "2", "--consumers", "2",
                    "--items", "20", "--item-bytes", "256"),
    "private_heap": ("private_heap/private_heap_bench", "--threads", "2", "--blocks", "40"),
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
