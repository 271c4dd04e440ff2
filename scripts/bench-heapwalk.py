#!/usr/bin/env python3
"""Benchmark the heap walk (gdb_ext/dbgkit/core/heap/) and the pointer scan over what it finds, on a
process nobody recorded: tests/programs/heapwalk_big N allocates N blocks of 24 bytes, frees every
tenth (into tcache, then a fastbin) and stops itself; the walk attaches (ptrace), walks, scans and
detaches, timed in this process (CPU and wall seconds, medians of --runs). Prints a markdown table,
written into docs/benchmarks.md between its markers with --write.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import machine, publish

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "gdb_ext"), str(ROOT / "analyzer")]

from dbgkit.core.heap import blocktypes, kinds, source, vtables, walk  # noqa: E402


def _stopped(exe: Path, n: int) -> subprocess.Popen:
    proc = subprocess.Popen([str(exe), str(n)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "READY\n"
    while True:
        with open(f"/proc/{proc.pid}/stat", encoding="ascii") as f:
            if f.read().rsplit(") ", 1)[1][0] == "T":
                return proc
        time.sleep(0.01)


def _measure(pid: int) -> tuple[float, ...]:
    """(walk CPU, walk wall, scan CPU, scan wall, typing CPU, typing wall, blocks, free chunks)
    of one run."""
    c0, w0 = time.process_time(), time.perf_counter()
    src = source.LiveProcess(pid)
    try:
        result = walk.walk(src)
        c1, w1 = time.process_time(), time.perf_counter()
        blocktypes.block_types(src, result, vtables.vtable_table(src.read, src.maps))
        result.heaps = []  # as the driver does: the heaps' bytes are not kept for the scan
        c2, w2 = time.process_time(), time.perf_counter()
        scanned = kinds.scan_walk(src, result)
        c3, w3 = time.process_time(), time.perf_counter()
    finally:
        src.close()
    assert scanned.engine == "c" and not result.problems
    return (c1 - c0, w1 - w0, c3 - c2, w3 - w2, c2 - c1, w2 - w1, len(result.blocks),
            len(result.free))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, default=ROOT / "build")
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    os.environ.setdefault("MEMDUMP_BUILD_DIR", str(args.build))
    exe = args.build / "tests" / "programs" / "heapwalk_big"
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        proc = _stopped(exe, n)
        try:
            runs = [_measure(proc.pid) for _ in range(args.runs)]
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        med = [statistics.median(r[k] for r in runs) for k in range(6)]
        rows.append(f"| {n:,} | {runs[0][6]:,} | {runs[0][7]:,} | {med[0]:.2f} ({med[1]:.2f}) | "
                    f"{med[2]:.2f} ({med[3]:.2f}) | {med[4]:.2f} ({med[5]:.2f}) | "
                    f"{med[0] + med[2] + med[4]:.2f} |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    table = "\n".join([
        f"Machine: {machine()}; medians of {args.runs} runs; peak RSS of the walker {peak:,} MiB.",
        "",
        "| chunks allocated | blocks in use | free chunks | walk: CPU s (wall) | "
        "scan: CPU s (wall) | types: CPU s (wall) | CPU s, all three |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
    ])
    publish("bench-heapwalk", table, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
