#!/usr/bin/env python3
"""Benchmark memdump on a program started through an exec (issue 24, item 1).

Times `scripts/memdump.sh -- PROG N` (tests/programs/churn_leak: N iterations of a malloc and a
free, 2N events) run directly, through a `#!/bin/sh` wrapper that does `exec PROG "$@"` (the new
image recorded by the in-process recorder, loaded into it again), and through
tests/programs/exec_raw, whose raw execve system call passes no exec hook: the new image is then
recorded with breakpoints, as every exec'd image was before. Prints a markdown table (medians) and
writes it into docs/benchmarks.md between its markers.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
MEMDUMP_SH = ROOT / "scripts" / "memdump.sh"


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=3600, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench-exec: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, default=ROOT / "build", help="the build directory")
    parser.add_argument("--iterations", type=int, default=100000,
                        help="churn_leak's iterations (default 100000: 200,000 events)")
    parser.add_argument("--runs", type=int, default=3, help="runs of the fast forms")
    parser.add_argument("--slow-runs", type=int, default=1,
                        help="runs of the exec recorded with breakpoints (minutes each)")
    args = parser.parse_args()
    prog = args.build / "tests" / "programs" / "churn_leak"
    raw = args.build / "tests" / "programs" / "exec_raw"
    if not prog.is_file() or not raw.is_file():
        sys.exit(f"bench-exec: {prog} or {raw} is missing: build first (make build)")
    n = str(args.iterations)
    with tempfile.TemporaryDirectory(prefix="bench-exec.") as tmp:
        work = Path(tmp)
        wrap = work / "wrap.sh"
        wrap.write_text(f'#!/bin/sh\nexec {prog} "$@"\n')
        wrap.chmod(0o755)
        forms = [
            ("direct: `memdump.sh -- ./prog N`", [str(prog), n], args.runs),
            ("`memdump.sh -- ./wrap.sh N`, `exec ./prog` (in-process recorder after the exec)",
             ["./wrap.sh", n], args.runs),
            ("an exec no hook sees (raw execve: breakpoints after it, as every exec before)",
             [str(raw), str(prog), n], args.slow_runs),
        ]
        rows = []
        for label, argv, runs in forms:
            times = [timed([str(MEMDUMP_SH), "-o", str(work / "bench.memdump"), "--", *argv],
                           work) for _ in range(runs)]
            rows.append((label, statistics.median(times), runs))
            print(f"{label}: {statistics.median(times):.2f} s", file=sys.stderr)
    direct = rows[0][1]
    lines = [
        f"Machine: {machine()}; churn_leak {args.iterations:,} ({2 * args.iterations:,} events); "
        "median of the runs shown.",
        "",
        "| how the program is started | runs | memdump.sh (s) | against direct |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [f"| {label} | {runs} | {t:.2f} | {t / direct:.1f}x |" for label, t, runs in rows]
    lines += ["", f"Reproduce: `make build && python3 scripts/bench-exec.py --iterations "
                  f"{args.iterations} --runs {args.runs} --slow-runs {args.slow_runs}`"]
    table = "\n".join(lines)
    print(table)
    write_section("bench-exec", table)


if __name__ == "__main__":
    main()
