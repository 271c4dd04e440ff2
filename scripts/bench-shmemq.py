#!/usr/bin/env python3
"""Benchmark targets/shmemq (seed 002) and write the `shmemq` section of docs/benchmarks.md.

Three tables, each beside the seed's figures:

1. 256-byte messages x 1M round trips for each lock kind (normal, adaptive, lock-free; the mutexes
   robust and not): the median of several runs, interleaved, of real/user/sys time, and a futex
   count from one separate run under `strace -f -c -e trace=futex` (strace stops the traced process
   at every futex call, which slows it and changes the contention it counts: its counts are
   indicative, not exact figures of an untraced run).
2. Message sizes 16 B to 64 KiB with the adaptive lock; big sizes run fewer round trips and every
   row is also given per million packets, the seed's 2 million packets normalised the same way.
3. Contention counters of the stats build (shmemq_bench_stats), per process, in place of the seed's
   SystemTap script.

    scripts/bench-shmemq.py                # the seed's parameters: minutes on a quiet machine
    scripts/bench-shmemq.py --quick --runs 1 --output /tmp/shmemq.md   # about 10 seconds

Both processes poll, so each needs a core of its own: on a machine with other load every figure
(and the run time) grows many times over. Run it when the machine is otherwise idle.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchlib import BENCHMARKS_MD, machine, write_section

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 240


@dataclass(frozen=True)
class Variant:
    """A lock configuration of shmemq_bench and the seed's figures for it (None if not given)."""

    label: str
    lock: str
    robust: bool
    seed_times: tuple[float, float, float] | None = None
    seed_futex: int | None = None

    def args(self) -> list[str]:
        return ["--lock", self.lock, "--robust", "on" if self.robust else "off"]


# The seed: ADAPTIVE_MUTEX=0/1 of a plain (not robust) process-shared mutex, 256 B x 1M.
VARIANTS = [
    Variant("normal, robust", "normal", True),
    Variant("normal, not robust (the seed's)", "normal", False, (1.833, 2.258, 1.371), 5974233),
    Variant("adaptive, robust (own spin)", "adaptive", True),
    Variant("adaptive, not robust (glibc spin, the seed's)", "adaptive", False,
            (0.754, 1.354, 0.148), 5846),
    Variant("lock-free SPSC", "lockfree", False),
]

# The seed's `make run DATA_SIZE=...` with the adaptive mutex, 1M round trips (2M packets) each.
SEED_SIZES = {16: 0.739, 128: 0.737, 1024: 0.949, 8192: 3.221, 65536: 59.469}
SIZE_VARIANT = Variant("adaptive, not robust", "adaptive", False)


@dataclass(frozen=True)
class Times:
    real: float
    user: float
    sys: float


@dataclass
class Run:
    """One shmemq_bench run: its times and, for the stats build, each process's counters."""

    times: Times
    stats: dict[str, dict[str, int]]
    spins: dict[str, dict[str, int]]


TIME_RE = re.compile(r"^(real|user|sys)\s+(\d+)m([\d.]+)s$", re.M)
STATS_RE = re.compile(r"^(stats|spins) (client|server): (.*)$", re.M)


def parse_output(text: str) -> Run:
    """Reads the seed-style time lines and the stats lines of shmemq_bench's output."""
    found = {name: int(m) * 60 + float(s) for name, m, s in TIME_RE.findall(text)}
    if set(found) != {"real", "user", "sys"}:
        raise RuntimeError(f"shmemq_bench printed no time lines:\n{text}")
    stats: dict[str, dict[str, int]] = {}
    spins: dict[str, dict[str, int]] = {}
    for kind, role, rest in STATS_RE.findall(text):
        pairs = dict(item.split("=", 1) for item in rest.split())
        (stats if kind == "stats" else spins)[role] = {k: int(v) for k, v in pairs.items()}
    return Run(Times(found["real"], found["user"], found["sys"]), stats, spins)


def run_bench(program: Path, args: list[str]) -> Run:
    """Runs shmemq_bench once; a failure stops the benchmark with the program's output."""
    proc = subprocess.run([str(program), *args], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{program.name} {' '.join(args)} exited {proc.returncode}:\n"
                           f"{proc.stdout}{proc.stderr}")
    return parse_output(proc.stdout)


def futex_calls(program: Path, args: list[str]) -> int:
    """futex system calls of both processes, counted by `strace -f -c -e trace=futex`."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        subprocess.run(["strace", "-f", "-c", "-e", "trace=futex", "-o", out.name,
                        str(program), *args], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S, check=True)
        for line in out.read().splitlines():
            fields = line.split()
            if fields and fields[-1] == "futex":
                return int(fields[3])
    return 0  # strace prints no futex row when there was none


def median_times(runs: list[Run]) -> Times:
    return Times(statistics.median(r.times.real for r in runs),
                 statistics.median(r.times.user for r in runs),
                 statistics.median(r.times.sys for r in runs))


def fmt_times(t: tuple[float, float, float] | Times | None) -> str:
    if t is None:
        return "-"
    real, user, sys_ = (t.real, t.user, t.sys) if isinstance(t, Times) else t
    return f"{real:.3f} / {user:.3f} / {sys_:.3f}"


def fmt_int(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def lock_table(program: Path, runs: int, reps: int, strace_reps: int) -> str:
    """Table 1: the lock kinds at 256 B, median of RUNS interleaved runs, and futex counts."""
    args = ["--size", "256", "--repetitions", str(reps)]
    results: dict[str, list[Run]] = {v.label: [] for v in VARIANTS}
    for _ in range(runs):
        for v in VARIANTS:
            results[v.label].append(run_bench(program, [*args, *v.args()]))
    have_strace = shutil.which("strace") is not None
    lines = [
        f"256 B messages x {reps:,} round trips ({2 * reps / 1e6:g} M packets), capacity 16, "
        f"median of {runs} interleaved runs; seed: 1M round trips. Futex calls: one separate run "
        f"under `strace -f -c -e trace=futex` with {strace_reps:,} round trips, per 1M round "
        "trips beside; strace slows every futex call, so contention under it differs.",
        "",
        "| lock | real / user / sys s | seed real / user / sys s | futex calls (strace) "
        "| futex per 1M round trips | seed futex (1M) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for v in VARIANTS:
        calls: int | None = None
        if have_strace:
            calls = futex_calls(program, ["--size", "256", "--repetitions", str(strace_reps),
                                          *v.args()])
        per_million = None if calls is None else round(calls * 1e6 / strace_reps)
        lines.append(f"| {v.label} | {fmt_times(median_times(results[v.label]))} | "
                     f"{fmt_times(v.seed_times)} | {fmt_int(calls)} | {fmt_int(per_million)} | "
                     f"{fmt_int(v.seed_futex)} |")
    if not have_strace:
        lines.append("")
        lines.append("strace is not installed (scripts/setup.sh installs it): no futex counts.")
    return "\n".join(lines)


def size_table(program: Path, runs: int, reps_for: dict[int, int]) -> str:
    """Table 2: message sizes with the seed's lock (adaptive, not robust), per 1M packets too."""
    results: dict[int, list[Run]] = {size: [] for size in SEED_SIZES}
    for _ in range(runs):
        for size in SEED_SIZES:
            results[size].append(run_bench(program, ["--size", str(size), "--repetitions",
                                                     str(reps_for[size]), *SIZE_VARIANT.args()]))
    lines = [
        f"Message sizes, lock {SIZE_VARIANT.label} (the seed's `make run`), median of {runs} "
        "interleaved runs. The seed ran 1M round trips (2M packets) at every size; where we run "
        "fewer, compare the per-1M-packets columns.",
        "",
        "| size B | round trips | MB passed | real / user / sys s | real s per 1M packets "
        "| seed real s (2M packets) | seed real s per 1M packets |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size, seed_real in SEED_SIZES.items():
        reps = reps_for[size]
        t = median_times(results[size])
        mb = 2 * reps * size / (1024 * 1024)
        note = "" if reps == 1_000_000 else " (fewer than the seed)"
        lines.append(f"| {size:,} | {reps:,}{note} | {mb:,.2f} | {fmt_times(t)} | "
                     f"{t.real * 1e6 / (2 * reps):.3f} | {seed_real:.3f} | {seed_real / 2:.3f} |")
    return "\n".join(lines)


STAT_KEYS = ("acquisitions", "contended", "spin_acquired", "blocking", "slept")


def stats_table(program: Path, reps: int) -> str:
    """Table 3: the stats build's counters per process, one run per mutex kind."""
    lines = [
        f"Contention counters of `shmemq_bench_stats` (256 B x {reps:,} round trips, one run "
        "each), per process; the seed counted with SystemTap probes in glibc (adaptive, 10M "
        "round trips: 63,509,587 locks, 722,800 contended, 1,287 went to the kernel, 720,918 "
        "spun once). acquisitions: locks taken, almost all by polls of an empty queue; "
        "contended: the first trylock failed; spin_acquired: got it while spinning; blocking: "
        "called pthread_mutex_lock; slept: the thread's voluntary context switches rose during "
        "that call (it waited in the kernel). glibc's own spin (not robust) is invisible here.",
        "",
        "| lock | process | " + " | ".join(STAT_KEYS) + " | spins histogram |",
        "| --- | --- |" + " ---: |" * len(STAT_KEYS) + " --- |",
    ]
    for v in VARIANTS:
        if v.lock == "lockfree":
            continue
        run = run_bench(program, ["--size", "256", "--repetitions", str(reps), *v.args()])
        for role in ("client", "server"):
            counters = run.stats.get(role, {})
            hist = ", ".join(f"{k}: {n:,}" for k, n in run.spins.get(role, {}).items() if n)
            lines.append(f"| {v.label} | {role} | "
                         + " | ".join(fmt_int(counters.get(k)) for k in STAT_KEYS)
                         + f" | {hist or '-'} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per row, interleaved (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="100x fewer round trips, for a try-out (seconds, not minutes)")
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build",
                        help="CMake build directory with targets/shmemq built (default build/)")
    parser.add_argument("--output", type=Path, default=BENCHMARKS_MD,
                        help="Markdown file whose `shmemq` section is rewritten "
                             "(default docs/benchmarks.md)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    bench = args.build_dir / "targets" / "shmemq" / "shmemq_bench"
    bench_stats = args.build_dir / "targets" / "shmemq" / "shmemq_bench_stats"
    for program in (bench, bench_stats):
        if not program.exists():
            parser.error(f"{program} not found: build it first (cmake --build "
                         f"{args.build_dir} --target {program.name})")

    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"bench-shmemq: load average {load:.1f}: the two polling processes need a core "
              "each; expect slow runs and unrepresentative figures", file=sys.stderr)
    scale = 100 if args.quick else 1
    reps = 1_000_000 // scale
    reps_for = {16: reps, 128: reps, 1024: reps, 8192: reps // 2, 65536: reps // 20}
    started = time.monotonic()
    tables = [
        lock_table(bench, args.runs, reps, strace_reps=200_000 // scale),
        size_table(bench, args.runs, reps_for),
        stats_table(bench_stats, reps),
    ]
    elapsed = time.monotonic() - started
    text = (f"### Shared-memory queue (seed 002)\n\n{machine()}; "
            f"`scripts/bench-shmemq.py --runs {args.runs}{' --quick' if args.quick else ''}`, "
            f"{elapsed:.0f} s; load average {load:.2f} at the start.\n\n"
            + "\n\n".join(tables))
    print(text)
    write_section("shmemq", text, path=args.output)
    print(f"\nwrote the shmemq section of {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
