#!/usr/bin/env python3
"""Benchmark the seeds' concurrency targets and write the `targets` section of docs/benchmarks.md.

Runs each variant of targets/spsc_ring, targets/mpmc_queue and targets/false_sharing as fresh
processes through scripts/bench.sh (whole-process wall time, as the seeds' runner and `perf stat`
measured), and prints one markdown table: our min/median/average/max beside the seed's figure, and
the ratio of each variant to the experiment's first (baseline) variant, ours and the seed's.

    scripts/bench-targets.py                       # the seeds' parameters, a few minutes
    scripts/bench-targets.py --runs 3 --quick      # smaller parameters, a few seconds
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchlib import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
BENCH_SH = ROOT / "scripts" / "bench.sh"


@dataclass(frozen=True)
class Variant:
    """One row: a program, its arguments, and the seed's figure for it (ms, None if not given)."""

    experiment: str
    name: str
    program: str
    args: tuple[str, ...]
    seed_ms: float | None
    quick_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Timing:
    minimum: float
    maximum: float
    average: float
    median: float


# The seeds' experiments; the first variant of each experiment is its baseline.
SPSC = "targets/spsc_ring/spsc_ring_bench"
MPMC = "targets/mpmc_queue/mpmc_queue_bench"
FALSE = "targets/false_sharing/false_sharing_bench"
VARIANTS = [
    Variant("SPSC ring, 1M ops (seed 001 §9, perf stat)", "locked", SPSC,
            ("--ops", "1000000", "--variant", "locked"), 438.0, ("--ops", "100000")),
    Variant("SPSC ring, 1M ops (seed 001 §9, perf stat)", "lock-free seq_cst", SPSC,
            ("--ops", "1000000", "--variant", "seq_cst"), 110.0, ("--ops", "100000")),
    Variant("SPSC ring, 5M ops (seed 000 §6, avg of 5)", "lock-free seq_cst", SPSC,
            ("--ops", "5000000", "--variant", "seq_cst"), 85.4, ("--ops", "500000")),
    Variant("SPSC ring, 5M ops (seed 000 §6, avg of 5)", "lock-free acq/rel, padded", SPSC,
            ("--ops", "5000000", "--variant", "acq_rel"), 38.8, ("--ops", "500000")),
    Variant("MPMC queue, 50 + 50 threads x 1000 (seed 000 §7, avg of 100)", "coarse-grained", MPMC,
            ("--variant", "coarse"), 47.23, ("--writers", "8", "--readers", "8")),
    Variant("MPMC queue, 50 + 50 threads x 1000 (seed 000 §7, avg of 100)", "fine-grained", MPMC,
            ("--variant", "fine"), 20.81, ("--writers", "8", "--readers", "8")),
    Variant("False sharing, 3 threads x 100M (seed 001 §8)", "packed, all on one CPU", FALSE,
            ("--layout", "packed", "--affinity", "same"), 746.0, ("--iterations", "10000000")),
    Variant("False sharing, 3 threads x 100M (seed 001 §8)", "packed, spread", FALSE,
            ("--layout", "packed", "--affinity", "spread"), 1029.5, ("--iterations", "10000000")),
    Variant("False sharing, 3 threads x 100M (seed 001 §8)", "aligned, spread", FALSE,
            ("--layout", "aligned", "--affinity", "spread"), 290.3, ("--iterations", "10000000")),
    Variant("False sharing, 3 threads x 100M (seed 001 §8)", "aligned, all on one CPU", FALSE,
            ("--layout", "aligned", "--affinity", "same"), None, ("--iterations", "10000000")),
]

FIELD = re.compile(r"^(Maximum|Minimum|Average|Median) time : ([0-9.]+) milliseconds$", re.M)


def run_once(argv: list[str]) -> float:
    """One run of ARGV timed by scripts/bench.sh, in milliseconds."""
    proc = subprocess.run([str(BENCH_SH), "--runs", "1", "--", *argv],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    found = {name: float(value) for name, value in FIELD.findall(proc.stdout)}
    return found["Median"]


def timing(samples: list[float]) -> Timing:
    return Timing(min(samples), max(samples), statistics.fmean(samples), statistics.median(samples))


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "—"


def table(rows: list[tuple[Variant, Timing, int]]) -> str:
    lines = [
        "| experiment | variant | runs | min ms | median ms | avg ms | max ms | seed ms | "
        "baseline / variant, ours | seed |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    baseline: dict[str, tuple[float, float | None]] = {}
    for variant, t, runs in rows:
        base_ours, base_seed = baseline.setdefault(variant.experiment, (t.median, variant.seed_ms))
        seed = f"{variant.seed_ms:g}" if variant.seed_ms is not None else "—"
        lines.append(
            f"| {variant.experiment} | {variant.name} | {runs} | {t.minimum:.1f} | "
            f"{t.median:.1f} | {t.average:.1f} | {t.maximum:.1f} | {seed} | "
            f"{ratio(base_ours, t.median)} | {ratio(base_seed, variant.seed_ms)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build",
                        help="CMake build directory holding targets/ (default: build)")
    parser.add_argument("--runs", type=int, default=5,
                        help="runs per variant (default 5; the MPMC rows use 4x as many)")
    parser.add_argument("--quick", action="store_true",
                        help="smaller parameters (a smoke test); does not write the document")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    for variant in VARIANTS:
        if not (args.build_dir / variant.program).is_file():
            parser.error(f"{args.build_dir / variant.program} is not built: run `make build` first")
    # The variants of one experiment run interleaved, one round at a time, so that drift in the
    # machine's load (it is shared) weighs on all of them alike.
    samples: dict[Variant, list[float]] = {v: [] for v in VARIANTS}
    experiments = list(dict.fromkeys(v.experiment for v in VARIANTS))
    for experiment in experiments:
        members = [v for v in VARIANTS if v.experiment == experiment]
        runs = args.runs * 4 if members[0].program == MPMC else args.runs
        for _ in range(runs):
            for variant in members:
                extra = variant.quick_args if args.quick else ()
                argv = [str(args.build_dir / variant.program), *variant.args, *extra]
                samples[variant].append(run_once(argv))
        for variant in members:
            median = statistics.median(samples[variant])
            print(f"{experiment}: {variant.name}: median {median:.1f} ms", file=sys.stderr)
    rows = [(v, timing(samples[v]), len(samples[v])) for v in VARIANTS]
    load = os.getloadavg()[0]

    text = (
        f"Machine: {machine()}; whole-process wall time from `scripts/bench.sh` "
        f"(each run a fresh process, the variants of an experiment interleaved); ratios compare "
        f"medians with the experiment's first row; load average at the end {load:.2f}.\n\n"
        f"{table(rows)}\n\n"
        f"Reproduce: `make build && python3 scripts/bench-targets.py --runs {args.runs}`"
    )
    print(text)
    if not args.quick:
        write_section("targets", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
