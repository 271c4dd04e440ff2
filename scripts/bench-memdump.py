#!/usr/bin/env python3
"""Benchmark memdump's recording cost against its design's floor, an empty Python breakpoint stop.

Runs targets/alloc_churn natively, under GDB with empty Python breakpoints on malloc and free (the
floor: every event of this design is at least one such stop), under memdump, and under valgrind
memcheck for reference, several times each, and prints a markdown table (medians) that it also
writes into docs/benchmarks.md between its markers. GDB start-up is cancelled out by subtracting a
0-iteration run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import machine, write_section

ROOT = Path(__file__).resolve().parents[1]

# An empty Python breakpoint on the allocator's entry points: GDB's cost per stop before any work.
EMPTY_STOP_PY = """
import gdb
class Empty(gdb.Breakpoint):
    hits = 0
    def stop(self):
        Empty.hits += 1
        return False
for name in ("__libc_malloc", "__libc_free"):
    Empty(name, internal=True)
def report(event):
    with open(OUT, "w") as fh:
        fh.write(str(Empty.hits))
gdb.events.exited.connect(report)
"""


def gdb_version() -> str:
    out = subprocess.run(["gdb", "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0].split()[-1] if out else "?"


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=3600, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench-memdump: {' '.join(cmd[:3])}... failed ({proc.returncode}):\n"
                 f"{proc.stderr}")
    return elapsed


def count_stops(dump: Path) -> tuple[int, int]:
    """(events, breakpoint stops) of a dump: every operation stops at its entry and its return
    (a free's return is watched too, docs/memdump.md)."""
    events = stops = 0
    with dump.open() as fh:
        for line in fh:
            if line.startswith("e "):
                events += 1
                stops += 2
    return events, stops


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=str(ROOT / "build"))
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--sizes", default="500,5000,50000",
                        help="alloc_churn iterations (2 events each)")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args()

    # absolute: the runs below happen in a scratch directory
    program = Path(args.build_dir).resolve() / "targets" / "alloc_churn" / "alloc_churn"
    if not program.exists():
        sys.exit(f"bench-memdump: {program} is not built (run make build)")
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: not a comma-separated list of integers: {args.sizes!r}")
    if args.runs < 1 or any(n < 1 for n in sizes):
        parser.error("--runs and every --sizes entry must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="bench-memdump-"))
    try:
        hits_file = work / "hits"
        empty_py = work / "empty.py"
        empty_py.write_text(f"OUT = {str(hits_file)!r}\n" + EMPTY_STOP_PY)
        gdb = ["gdb", "-nx", "-batch"]

        def memdump_cmd(n: int) -> list[str]:
            return gdb + ["-ex", f"source {ROOT / 'gdb_ext' / 'memdump.py'}",
                          "-ex", f"memdump --breakpoints -o {work / 'bench.memdump'}",
                          "-ex", "run",
                          "--args", str(program), str(n)]

        def empty_cmd(n: int) -> list[str]:
            return gdb + ["-x", str(empty_py), "-ex", "run", "--args", str(program), str(n)]

        pinned = ["taskset", "-c", "0"]
        has_valgrind = shutil.which("valgrind") is not None

        def variants(n: int) -> dict[str, list[str]]:
            runs = {"native": [str(program), str(n)], "memdump": memdump_cmd(n),
                    "pinned": pinned + memdump_cmd(n), "empty": empty_cmd(n)}
            if has_valgrind:
                runs["valgrind"] = ["valgrind", "-q", "--leak-check=full", str(program), str(n)]
            return runs

        def measure(n: int) -> tuple[dict[str, float], int]:
            """Median time of each variant; the runs are interleaved round by round, so that the
            machine's drift (a shared VM) weighs on every variant alike."""
            times: dict[str, list[float]] = {}
            hits = 0
            for _ in range(args.runs):
                for name, cmd in variants(n).items():
                    times.setdefault(name, []).append(timed(cmd, work))
                    if name == "empty":
                        hits = int(hits_file.read_text())
            return {name: statistics.median(ts) for name, ts in times.items()}, hits

        base, base_hits = measure(0)
        rows = []
        for n in sizes:
            t, hits = measure(n)
            events, stops = count_stops(work / "bench.memdump")
            per_stop = (t["memdump"] - base["memdump"]) / stops * 1e6
            per_empty = (t["empty"] - base["empty"]) / max(hits - base_hits, 1) * 1e6
            per_pinned = (t["pinned"] - base["pinned"]) / stops * 1e6
            rows.append((events, t["native"], t["memdump"], events / t["memdump"], per_stop,
                         per_empty, per_stop / per_empty, per_pinned,
                         t.get("valgrind", float("nan"))))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    lines = [
        f"Machine: {machine()}; gdb {gdb_version()}; median of {args.runs} runs; GDB start-up "
        "(a 0-iteration run) subtracted from per-stop costs.",
        "",
        "| events | native (s) | memdump (s) | events/s | memdump µs/stop | empty stop µs | ratio "
        "| memdump µs/stop, one CPU | valgrind memcheck (s) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for ev, nat, md, rate, ps, pe, ratio, pp, vg in rows:
        lines.append(f"| {ev:,} | {nat:.3f} | {md:.2f} | {rate:,.0f} | {ps:.1f} | {pe:.1f} | "
                     f"{ratio:.2f}x | {pp:.1f} | {vg:.2f} |")
    lines += ["", f"Reproduce: `make build && python3 scripts/bench-memdump.py --runs {args.runs} "
              f"--sizes {args.sizes}`"]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        write_section("bench-memdump", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
