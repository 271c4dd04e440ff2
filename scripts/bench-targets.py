#!/usr/bin/env python3
"""Benchmark the seeds' concurrency targets and write the `targets` section of docs/benchmarks.md.

Runs each variant of targets/spsc_ring, targets/mpmc_queue and targets/false_sharing as fresh
processes through scripts/bench.sh (whole-process wall time, as the seeds' runner and `perf stat`
measured), and prints one markdown table: our min/median/average/max beside the seed's figure, and
the ratio of each variant to the experiment's first (baseline) variant, ours and the seed's.

Then runs targets/object_pool, targets/private_heap, targets/monte_carlo_pi,
targets/producer_consumer and targets/rw_locks, whose programs time themselves and print a
markdown table with a row per variant; a second table gives the median, min and max of the figures
the seeds report (times, rates, latencies; writes and writer waits for the reader-writer locks),
the seed's figure, and how each row compares with its group's first row, ours and the seed's.

    scripts/bench-targets.py                       # the seeds' parameters or less, ~2 minutes
    scripts/bench-targets.py --runs 3 --quick      # smaller parameters, a few seconds
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
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


@dataclass(frozen=True)
class Measure:
    """A column of a program's table: COLUMN (PART of an `a / b / c` cell), shown times SCALE."""

    column: str
    label: str
    scale: float = 1.0
    higher_is_better: bool = True
    part: int | None = None


@dataclass(frozen=True)
class ReportRow:
    """Rows of the program's table whose cells equal MATCH; SEED: the seed's figure per measure."""

    name: str
    match: tuple[tuple[str, str], ...]
    seed: tuple[float | None, ...]
    group: str = ""


@dataclass(frozen=True)
class Report:
    """An experiment whose program times itself and prints a markdown table, one row a variant."""

    experiment: str
    program: str
    args: tuple[str, ...]
    quick_args: tuple[str, ...]
    measures: tuple[Measure, ...]
    rows: tuple[ReportRow, ...]


def _rows(key: str, names: list[str], seeds: list[tuple[float | None, ...]], group: str = "",
          extra: tuple[tuple[str, str], ...] = ()) -> tuple[ReportRow, ...]:
    return tuple(ReportRow(name, ((key, name), *extra), seed, group)
                 for name, seed in zip(names, seeds, strict=True))


POOL = "targets/object_pool/object_pool_bench"
POOL_VARIANTS = ["none", "mutex", "linear", "tree-old", "tree-new"]
POOL_MEASURES = (
    Measure("ms", "total ms", higher_is_better=False),
    Measure("acquire min/avg/max ns", "acquire avg µs", 1e-3, False, part=1),
    Measure("release min/avg/max ns", "release avg µs", 1e-3, False, part=1),
)
# Seed 004: total ms, then the average acquire and release latency in µs, for each N/M.
POOL_SEEDS: dict[tuple[int, int], list[tuple[float | None, ...]]] = {
    (30, 1): [(40601, 373, 373), (34768, 332, 11), (6607, 33, 0), (4108, 23, 0), (3879, 14, 0)],
    (15, 15): [(3402, 3, 3), (2737, 13, 11), (2332, 1, 0), (2285, 0, 0), (2269, 1, 0)],
    (1, 30): [(2029, 2, 2), (2058, 4, 5), (1905, 0, 0), (1970, 0, 0), (2011, 0, 0)],
}
POOL_ITEMS = {(30, 1): 4000, (15, 15): 4000, (1, 30): 40000}
MONTE = "targets/monte_carlo_pi/monte_carlo_pi_bench"
MONTE_VARIANTS = ["mutex", "spin", "spin_yield", "adaptive", "atomic", "none", "local"]
# Seed 003, k = 60 threads, M points/s without and with affinity; `local` (202M/s) has no affinity
# given.
MONTE_SEEDS = {"off": [0.384, 0.448, 6.8, 6.9, 19.4, 25.5, 202.0],
               "on": [0.447, 0.485, 6.8, 15.9, 19.2, 19.9, None]}
PC = "targets/producer_consumer/producer_consumer_bench"
PC_VARIANTS = ["spin", "semaphore", "bulk_semaphore", "condvar", "sleep_poll"]
# Seed 003, k = 600 threads, K items/s: PC 1.1, 1.2, 1.4, 3.0 and 3.4 at batch 1 and 10.
PC_SEEDS = {"1": [0.66, 275, 275, 205, 22000], "10": [187, 130, 182, 5900, 5900]}
RW = "targets/rw_locks/rw_locks_bench"
RW_VARIANTS = ["1.0", "1.1", "1.2", "1.3", "pthread", "shared_mutex"]
HEAP = "targets/private_heap/private_heap_bench"

REPORTS = [
    *(Report(f"Object pool, N/M = {n}/{m}, {POOL_ITEMS[n, m]:,} x 10 KiB per producer (seed 004: "
             f"100,000)", POOL,
             ("--producers", str(n), "--consumers", str(m), "--items", str(POOL_ITEMS[n, m])),
             ("--items", str(POOL_ITEMS[n, m] // 20)), POOL_MEASURES,
             _rows("variant", POOL_VARIANTS, POOL_SEEDS[n, m]))
      for n, m in POOL_SEEDS),
    Report("Private heap, 12 threads x 1M blocks of 4 bytes (seed 003: 10M)", HEAP,
           ("--blocks", "1000000"), ("--blocks", "100000"),
           (Measure("allocations/s", "M allocations/s", 1e-6),),
           _rows("variant", ["malloc", "heap", "arena"], [(3.3,), (12.0,), (36.0,)])),
    Report("Monte Carlo pi, 60 threads x 100k points (seed 003)", MONTE,
           ("--points", "100000"), ("--points", "5000"),
           (Measure("Mpoints/s", "M points/s"),),
           tuple(row for aff, label in (("off", "no affinity"), ("on", "affinity"))
                 for row in _rows("variant", MONTE_VARIANTS, [(x,) for x in MONTE_SEEDS[aff]],
                                  label, (("affinity", aff),)))),
    Report("Producer-consumer, 600 threads, 200k items (seed 003)", PC,
           ("--items", "200000"), ("--items", "5000"),
           (Measure("items/s", "K items/s", 1e-3),),
           tuple(row for batch in ("1", "10")
                 for row in _rows("variant", PC_VARIANTS, [(x,) for x in PC_SEEDS[batch]],
                                  f"batch {batch}", (("batch", batch),)))),
    Report("Reader-writer locks, 8 readers + 2 writers, 0.5 s per lock (seed 003: no timings)",
           RW, ("--millis", "500"), ("--millis", "50"),
           (Measure("writes", "writes done"),
            Measure("writer wait avg ms", "writer wait avg ms", higher_is_better=False),
            Measure("writer wait max ms", "writer wait max ms", higher_is_better=False)),
           _rows("variant", RW_VARIANTS, [(None, None, None)] * len(RW_VARIANTS))),
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


def parse_table(text: str) -> list[dict[str, str]]:
    """The rows of the markdown tables in TEXT, each a dict from column name to cell."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not all(set(cell) <= set("-:") for cell in cells):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


def run_report(report: Report, argv: list[str]) -> dict[tuple[ReportRow, Measure], float]:
    """One run of ARGV: each row's measures, scaled."""
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    table_rows = parse_table(proc.stdout)
    found: dict[tuple[ReportRow, Measure], float] = {}
    for row in report.rows:
        matches = [r for r in table_rows if all(r.get(k) == v for k, v in row.match)]
        if len(matches) != 1:
            raise RuntimeError(f"{' '.join(argv)}: {len(matches)} rows match {row.match}")
        for measure in report.measures:
            cell = matches[0][measure.column]
            if measure.part is not None:
                cell = cell.split("/")[measure.part]
            found[row, measure] = float(cell) * measure.scale
    return found


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


def better(value: float | None, base: float | None, higher_is_better: bool) -> str:
    """How many times better VALUE is than BASE (above 1x: faster, more, or shorter)."""
    a, b = (value, base) if higher_is_better else (base, value)
    if a is None or not b:
        return "—"
    if a / b >= 100:
        return f"{a / b:,.0f}x"
    return f"{a / b:.2f}x" if a / b >= 0.01 else f"{a / b:.2g}x"


def number(value: float) -> str:
    if value == int(value) or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.1f}"


def report_table(rows: list[tuple[Report, ReportRow, Measure, list[float]]]) -> str:
    lines = [
        "| experiment | variant | measure | runs | min | median | max | seed | "
        "vs first row, ours | seed |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    baseline: dict[tuple[str, str], tuple[float, float | None]] = {}
    for report, row, measure, samples in rows:
        experiment = f"{report.experiment}, {row.group}" if row.group else report.experiment
        seed = row.seed[report.measures.index(measure)]
        median = statistics.median(samples)
        base_ours, base_seed = baseline.setdefault((experiment, measure.label), (median, seed))
        seed_text = number(seed) if seed is not None else "—"
        seed_ratio = better(seed, base_seed, measure.higher_is_better) if seed is not None else "—"
        lines.append(
            f"| {experiment} | {row.name} | {measure.label} | {len(samples)} | "
            f"{number(min(samples))} | {number(median)} | {number(max(samples))} | {seed_text} | "
            f"{better(median, base_ours, measure.higher_is_better)} | {seed_ratio} |"
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

    for program in dict.fromkeys([*(v.program for v in VARIANTS), *(r.program for r in REPORTS)]):
        if not (args.build_dir / program).is_file():
            parser.error(f"{args.build_dir / program} is not built: run `make build` first")
    started = time.monotonic()
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

    # The programs that time themselves: every variant in each run, as the seeds ran them.
    figures: dict[tuple[ReportRow, Measure], list[float]] = {}
    for report in REPORTS:
        extra = report.quick_args if args.quick else ()
        argv = [str(args.build_dir / report.program), *report.args, *extra]
        for _ in range(args.runs):
            for key, value in run_report(report, argv).items():
                figures.setdefault(key, []).append(value)
        print(f"{report.experiment}: done", file=sys.stderr)
    report_rows = [(r, row, m, figures[row, m]) for r in REPORTS for row in r.rows
                   for m in r.measures]
    load = os.getloadavg()[0]

    text = (
        f"Machine: {machine()}; whole-process wall time from `scripts/bench.sh` "
        f"(each run a fresh process, the variants of an experiment interleaved); ratios compare "
        f"medians with the experiment's first row; load average at the end {load:.2f} "
        "(the benchmarks' own hundreds of threads count in it).\n\n"
        f"{table(rows)}\n\n"
        f"The programs below time themselves, from before their threads are created until they "
        f"are joined (so thread start-up counts, process start-up does not), and run every "
        f"variant in turn in each process, one process per run; latencies are the programs' own "
        f"per-call averages. Our figures and the seed's are in the unit of the measure column "
        f"(the seed's work sizes differ, so compare ratios); the ratio columns compare each row "
        f"with its group's first row, above 1x meaning better (faster, more throughput, more "
        f"writes, a shorter wait). Both tables took {time.monotonic() - started:.0f} s.\n\n"
        f"{report_table(report_rows)}\n\n"
        f"Reproduce: `make build && python3 scripts/bench-targets.py --runs {args.runs}`"
    )
    print(text)
    if not args.quick:
        write_section("targets", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
