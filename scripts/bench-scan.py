#!/usr/bin/env python3
"""Benchmark memdump's pointer scan at exit: MB/s of live heap, Python (reach.py) vs C
(libmemdump_scan.so), with valgrind memcheck's whole run of the same program for scale.

tests/programs/scan_bench leaves N MiB of live blocks full of interior pointers and waits; the
scan runs on it as memdump runs it at _exit (the same roots, blocks, /proc/PID/mem), timed around
the call, without GDB: the C library with its snapshot of the heap (process_vm_readv) and
without (as over its memory budget: pread on /proc/PID/mem as it goes). Prints a markdown table
(medians) that it also writes into docs/benchmarks.md between its markers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

from benchlib import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "gdb_ext"), str(ROOT / "analyzer")]

from dbgkit.core import procfs, reach, reach_fast  # noqa: E402
from memdump_analyzer.dumpfile import DumpReader  # noqa: E402


class Heap:
    """A scan_bench process waiting with its heap built, and what the scan needs of it."""

    def __init__(self, program: Path, mib: int, spread: int, every: int, work: Path) -> None:
        listing = work / "blocks"
        self.proc = subprocess.Popen([str(program), str(mib), str(spread), str(every),
                                      str(listing)],
                                     stdout=subprocess.PIPE, text=True)
        if self.proc.stdout is None or self.proc.stdout.readline().strip() != "ready":
            sys.exit(f"bench-scan: {program} did not get ready")
        pairs = array("Q", listing.read_bytes())
        order = sorted(range(len(pairs) // 2), key=lambda k: pairs[2 * k])
        self.starts = array("Q", (pairs[2 * k] for k in order))
        self.sizes = array("Q", (pairs[2 * k + 1] for k in order))
        self.heap_bytes = sum(self.sizes)
        pid = self.proc.pid
        self.memory = procfs.ProcessMemory(pid)
        self.mappings = procfs.read_maps(pid)
        blocked = None
        for _ in range(500):  # "ready" is printed just before pause()
            blocked = procfs.blocked_in_syscall(pid, pid)
            if blocked is not None:
                break
            time.sleep(0.01)
        if blocked is None:
            sys.exit("bench-scan: cannot read the waiting program's registers")
        self.threads = [reach.Thread(pid, blocked[0], blocked[1])]

    def scan(self, engine: str) -> tuple[float, reach.ScanResult]:
        began = time.perf_counter()
        if engine in ("c", "c-pread"):  # c-pread: without the snapshot, as over its budget
            result = reach_fast.scan(self.memory.read_some, self.mappings,
                                     (self.starts, self.sizes), self.threads, fd=self.memory.fd,
                                     pid=self.proc.pid, budget=0 if engine == "c-pread" else None)
        else:
            blocks = dict(zip(self.starts, self.sizes, strict=True))
            began = time.perf_counter()  # memdump holds a dict already
            result = reach.scan(self.memory.read_some, self.mappings, blocks, self.threads)
        elapsed = time.perf_counter() - began
        if result.engine != engine.split("-")[0]:
            sys.exit(f"bench-scan: asked for the {engine} scan, {result.engine} ran "
                     f"(is {reach_fast.library_path()} built?)")
        return elapsed, result

    def close(self) -> None:
        self.memory.close()
        self.proc.kill()
        self.proc.wait()


def load_of(averages: tuple[float, float, float]) -> str:
    return f"{averages[0]:.1f}"


def timed(cmd: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   timeout=3600)
    return time.perf_counter() - began


def memdump_scan_ms(program: Path, mib: int, spread: int, every: int,
                    work: Path) -> tuple[int, int]:
    """The program recorded as a user would (`gdb -batch -ex 'source gdb_ext/memdump.py' -ex
    memdump -ex run`, the in-process recorder): (the milliseconds of its scan at exit, from the
    dump's `scan` record, the wall milliseconds of the whole run)."""
    dump = work / "scan.memdump"
    began = time.perf_counter()
    subprocess.run(["gdb", "-batch", "-nx", "-ex", f"source {ROOT / 'gdb_ext' / 'memdump.py'}",
                    "-ex", f"memdump -o {dump}", "-ex", "run", "--args", str(program), str(mib),
                    str(spread), str(every)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=3600)
    wall = int((time.perf_counter() - began) * 1000)
    with DumpReader(str(dump)) as reader:
        for _ in reader.records():
            pass
    scan = reader.scan
    if scan is None:
        sys.exit(f"bench-scan: {dump} has no scan record")
    if scan.status != "ok":
        sys.exit(f"bench-scan: memdump's scan at exit ended {scan.status}")
    dump.unlink()
    return scan.millis, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=str(ROOT / "build"))
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--sizes", default="100,400", help="MiB of live blocks")
    parser.add_argument("--python-max", type=int, default=100,
                        help="largest size the Python scan runs at (it does 20 MB/s)")
    parser.add_argument("--heaps", default="64/32,64/1,0/1,64/8",
                        help="SPREAD/EVERY,...: interior pointers reach the SPREAD blocks around "
                             "(0: anywhere); one word in EVERY is one")
    parser.add_argument("--python-heaps", default="64/32,64/8",
                        help="heaps the Python scan runs on (anywhere, it does 0.25 MB/s)")
    parser.add_argument("--valgrind-runs", type=int, default=1,
                        help="runs of valgrind's whole run per heap (for scale only; one takes "
                             "200 s where pointers go to any block of 400 MiB)")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args()
    build = Path(args.build_dir).resolve()
    program = build / "tests" / "programs" / "scan_bench"
    if not program.exists():
        sys.exit(f"bench-scan: {program} is not built (run make build)")
    os.environ.setdefault("MEMDUMP_BUILD_DIR", str(build))  # where the library is looked for
    if reach_fast.library() is None:
        sys.exit(f"bench-scan: {reach_fast.library_path()} is not built (run make build)")
    sizes = [int(s) for s in args.sizes.split(",")]
    heaps = [tuple(int(x) for x in h.split("/")) for h in args.heaps.split(",")]
    python_heaps = {tuple(int(x) for x in h.split("/")) for h in args.python_heaps.split(",") if h}
    has_valgrind = shutil.which("valgrind") is not None
    rows = []
    work = Path(tempfile.mkdtemp(prefix="bench-scan-"))
    try:
        for spread, every in heaps:
            for mib in sizes:
                engines = ["c", "c-pread"]
                if mib <= args.python_max and (spread, every) in python_heaps:
                    engines.append("python")
                times: dict[str, list[float]] = {e: [] for e in engines}
                copies: list[float] = []  # the snapshot's copy, first run first
                results: dict[str, reach.ScanResult] = {}
                heap = Heap(program, mib, spread, every, work)
                try:
                    for _ in range(args.runs):
                        for engine in engines:
                            elapsed, results[engine] = heap.scan(engine)
                            times[engine].append(elapsed)
                            if engine == "c":
                                copies.append(getattr(results[engine], "snapshot_seconds", 0.0))
                    heap_bytes, blocks = heap.heap_bytes, len(heap.starts)
                finally:
                    heap.close()
                c = results["c"]
                for other in ("c-pread", "python"):
                    if other in results and (results[other].kinds, results[other].heuristics,
                                             results[other].leaders) != (
                                                 c.kinds, c.heuristics, c.leaders):
                        sys.exit(f"bench-scan: the C scan and {other} disagree")
                if getattr(c, "reads", "") != "snapshot":
                    sys.exit(f"bench-scan: the C scan read the heap by {c.reads}, not a snapshot")
                in_gdb = [memdump_scan_ms(program, mib, spread, every, work)
                          for _ in range(args.runs)]
                gdb_scan = statistics.median(ms for ms, _ in in_gdb) / 1000
                gdb_wall = statistics.median(wall for _, wall in in_gdb) / 1000
                valgrind = (statistics.median(
                    timed(["valgrind", "-q", "--leak-check=full", str(program), str(mib),
                           str(spread), str(every)]) for _ in range(args.valgrind_runs))
                    if has_valgrind and args.valgrind_runs > 0
                    else float("nan"))
                med = {e: statistics.median(ts) for e, ts in times.items()}
                rows.append((spread, every, mib, blocks, c.block_bytes, heap_bytes, med, valgrind,
                             c.snapshot_bytes, c.snapshot_calls, copies, c.replayed,
                             (gdb_scan, gdb_wall), load_of(os.getloadavg())))
                print(rows[-1], file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    loads = [row[-1] for row in rows]
    lines = [
        f"Machine: {machine()}; median of {args.runs} runs (valgrind: {args.valgrind_runs}); "
        "MB/s = live heap bytes (10^6) per "
        f"second of scan; load average (1 min) during the runs: {min(loads)} to {max(loads)}.",
        "",
        "C: the blocks copied first into a snapshot (process_vm_readv), then scanned in memory; "
        "copy: the part of C's time the copy took, in the process's first scan (fresh memory) "
        "and the median; C, pread: the same library over its snapshot budget, reading "
        "/proc/PID/mem as it goes.",
        "",
        "memdump at exit: the same program recorded by `gdb -batch -ex 'source "
        "gdb_ext/memdump.py' -ex memdump -ex run --args scan_bench MIB SPREAD EVERY` (the "
        "in-process recorder): its scan at exit as the dump's `scan` record times it (the live "
        "blocks read from the recorder, the roots chosen, the scan), and the whole run's wall "
        "time. Replayed: blocks scanned as possibly lost, then as reachable, whose second scan "
        "came from what the first kept.",
        "",
        "| pointers | heap (MiB) | blocks | bytes scanned (MiB) | replayed | "
        "snapshot (MiB, calls) | Python (s) | Python MB/s | C (s) | C MB/s "
        "| copy, first / median (s) | C, pread (s) | C, pread MB/s "
        "| memdump at exit: scan (s) | MB/s | whole run (s) "
        "| valgrind memcheck, whole run (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for (spread, every, mib, blocks, scanned, heap_bytes, med, vg, snap_bytes, snap_calls,
         copies, replayed, (gdb_scan, gdb_wall), _load) in rows:
        reach_text = ("every word" if every == 1 else f"1 word in {every}") + ", to " + (
            f"the {spread} blocks around" if spread else "any block")
        py = med.get("python")
        py_cells = (f"{py:.2f} | {heap_bytes / py / 1e6:,.0f}" if py is not None else "- | -")
        lines.append(
            f"| {reach_text} | {mib} | {blocks:,} | {scanned / 2**20:,.0f} | {replayed:,} | "
            f"{snap_bytes / 2**20:,.0f}, {snap_calls:,} | {py_cells} | "
            f"{med['c']:.3f} | {heap_bytes / med['c'] / 1e6:,.0f} | "
            f"{copies[0]:.2f} / {statistics.median(copies):.2f} | {med['c-pread']:.3f} | "
            f"{heap_bytes / med['c-pread'] / 1e6:,.0f} | {gdb_scan:.3f} | "
            f"{heap_bytes / gdb_scan / 1e6:,.0f} | {gdb_wall:.2f} | {vg:.2f} |")
    lines += ["", f"Reproduce: `make build && python3 scripts/bench-scan.py --runs {args.runs} "
              f"--sizes {args.sizes} --heaps {args.heaps} --python-max {args.python_max} "
              f"--python-heaps {args.python_heaps} --valgrind-runs {args.valgrind_runs}`"]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        write_section("bench-scan", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
