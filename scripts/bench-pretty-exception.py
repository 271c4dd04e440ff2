#!/usr/bin/env python3
"""Benchmark pretty_exception: throw+catch against std::runtime_error, and the cost of printing.

Runs the bench programs (pretty_exception/bench, built -O2 -g by `make build`) several times as
fresh processes, alternately; each run measures throw+catch of a pretty exception and of a plain
std::runtime_error from 5, 20 and 50 frames (interleaved), and the printing of a 20-frame trace: the
first printing in the process (libdw starts, debug information is read), the first printing of a
later exception, and printing the same exception again. The second program links the __cxa_throw
hook and also measures the plain throw with trace_all_exceptions() on ("any exception") and off.
Prints a markdown table of the medians and writes it to the `pretty-exception` section of
docs/benchmarks.md.

    scripts/bench-pretty-exception.py                 # 7 runs
    scripts/bench-pretty-exception.py --runs 11 --iterations 40000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchlib import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
GOAL_RATIO = 2.0  # pretty throw+catch over plain, at depth 20


@dataclass
class Run:
    """One process's figures, in nanoseconds."""

    first_print_cold: float
    first_print_warm: float
    later_print: float
    throw_catch: dict[int, tuple[float, float]]  # depth -> (plain, pretty)
    any_exception: dict[int, tuple[float, float]]  # depth -> (hook off, on): the _any program


def run_json(program: Path, iterations: int) -> dict:
    """Run one bench program once and parse its JSON line."""
    out = subprocess.run([str(program), "--iterations", str(iterations)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def run_once(program: Path, any_program: Path, iterations: int) -> Run:
    """Run the two bench programs once each, one after the other."""
    data = run_json(program, iterations)
    hooked = run_json(any_program, iterations)
    return Run(first_print_cold=data["first_print_cold_ns"],
               first_print_warm=data["first_print_warm_ns"],
               later_print=data["later_print_ns"],
               throw_catch={d["depth"]: (d["plain_ns"], d["pretty_ns"]) for d in data["depths"]},
               any_exception={d["depth"]: (d["plain_ns"], d["any_ns"]) for d in hooked["depths"]})


def compiler_of(build_dir: Path) -> str:
    """The C++ compiler the build used, from its CMake cache."""
    cache = build_dir / "CMakeCache.txt"
    if cache.exists():
        for line in cache.read_text().splitlines():
            if line.startswith("CMAKE_CXX_COMPILER:"):
                cxx = line.split("=", 1)[1]
                try:
                    version = subprocess.run([cxx, "--version"], capture_output=True, text=True,
                                             check=True).stdout.splitlines()[0]
                except (OSError, subprocess.CalledProcessError):
                    return cxx
                return version
    return "unknown compiler"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=str(ROOT / "build"))
    parser.add_argument("--runs", type=int, default=7, help="processes to run (median)")
    parser.add_argument("--iterations", type=int, default=20000,
                        help="throw+catch iterations per depth and variant in each run")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args()

    build_dir = Path(args.build_dir)
    program = build_dir / "pretty_exception" / "bench" / "pretty_exception_bench"
    any_program = program.with_name("pretty_exception_bench_any")
    for path in (program, any_program):
        if not path.exists():
            sys.exit(f"bench-pretty-exception: {path} is not built (run make build)")

    load_before = os.getloadavg()
    runs = [run_once(program, any_program, args.iterations) for _ in range(args.runs)]
    load_after = os.getloadavg()

    def median(values: list[float]) -> float:
        return statistics.median(values)

    lines = [
        f"Machine: {machine()}; {compiler_of(build_dir)}, -O2 -g; median of {args.runs} runs "
        f"of {args.iterations:,} throws per depth and variant; goal: ratio at most "
        f"{GOAL_RATIO:.1f} at depth 20, for both. Load average (1 min) {load_before[0]:.2f} "
        f"before, {load_after[0]:.2f} after (2 cores, shared).",
        "",
        "| frames to the catch | std::runtime_error µs | pretty exception µs | ratio "
        "| hook linked, off µs | any exception (`trace_all_exceptions()`) µs | ratio |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratio_at_20 = float("nan")
    any_ratio_at_20 = float("nan")
    for depth in sorted(runs[0].throw_catch):
        plain = median([r.throw_catch[depth][0] for r in runs])
        pretty = median([r.throw_catch[depth][1] for r in runs])
        ratio = median([r.throw_catch[depth][1] / r.throw_catch[depth][0] for r in runs])
        off = median([r.any_exception[depth][0] for r in runs])
        on = median([r.any_exception[depth][1] for r in runs])
        # Against the plain throw of a program without the hook (the other process of the same run).
        any_ratio = median([r.any_exception[depth][1] / r.throw_catch[depth][0] for r in runs])
        if depth == 20:
            ratio_at_20 = ratio
            any_ratio_at_20 = any_ratio
        lines.append(f"| {depth} | {plain / 1000:.2f} | {pretty / 1000:.2f} | {ratio:.2f}x "
                     f"| {off / 1000:.2f} | {on / 1000:.2f} | {any_ratio:.2f}x |")
    lines += [
        "",
        "| printing a 20-frame trace (`to_string`) | µs |",
        "| --- | ---: |",
        f"| first in the process (libdw starts, debug info read) "
        f"| {median([r.first_print_cold for r in runs]) / 1000:,.0f} |",
        f"| first of a later exception (frames resolved) "
        f"| {median([r.first_print_warm for r in runs]) / 1000:,.1f} |",
        f"| the same exception again (formatting only) "
        f"| {median([r.later_print for r in runs]) / 1000:,.1f} |",
        "",
        f"Goal {'met' if ratio_at_20 <= GOAL_RATIO else 'NOT met'}: ratio {ratio_at_20:.2f} "
        f"at depth 20 for a pretty exception; "
        f"{'met' if any_ratio_at_20 <= GOAL_RATIO else 'NOT met'}: {any_ratio_at_20:.2f} for any "
        f"exception.",
        "",
        f"Reproduce: `make build && python3 scripts/bench-pretty-exception.py --runs {args.runs} "
        f"--iterations {args.iterations}`",
    ]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        write_section("pretty-exception", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
