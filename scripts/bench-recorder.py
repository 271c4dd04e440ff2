#!/usr/bin/env python3
"""Benchmark memdump's in-process recorder against heaptrack and valgrind memcheck.

Runs tests/programs/alloc_bench (N heap events, each malloc 11 frames deep, built -O2 without
frame pointers) natively, under heaptrack, valgrind memcheck, memdump (its default, in-process
recorder) and memdump --breakpoints (small sizes only), the variants interleaved round by round,
and prints markdown tables (medians) that it also writes into docs/benchmarks.md between its
markers. Every memdump dump is checked with memdump-analyze: the leak must be exactly the
program's (3 blocks, 112 bytes) and the events exactly N more than at N = 0.

With --ops it measures each entry point instead (tests/programs/op_bench, scripts/benchops.py):
the overhead per event of heaptrack and memdump on malloc, calloc, realloc, posix_memalign,
aligned_alloc and the C++ operators, one table, written between its own markers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchops
from benchlib import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
MARKER = "bench-recorder"
OPS_MARKER = "bench-recorder-ops"
# alloc_bench's leak (tests/programs/alloc_bench.c: ALLOC_BENCH_LEAK_BLOCKS, _BYTES).
LEAK_BLOCKS, LEAK_BYTES = 3, 16 + 32 + 64
RSS_RE = re.compile(r"alloc_bench: peak_rss_kb (\d+)")
TIMEOUT = 4 * 3600


class BenchError(Exception):
    """A run failed or a dump is wrong: the benchmark stops, loudly."""


def version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    except OSError:
        return "?"
    return out.splitlines()[0].split()[-1] if out.strip() else "?"


def run(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall time of one run of cmd (its stdout discarded) and the process; alloc_bench prints its
    peak RSS to stderr."""
    start = time.perf_counter()
    env = {**os.environ, "ALLOC_BENCH_RSS": "1"}
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=TIMEOUT, check=False, env=env)
    return time.perf_counter() - start, proc


def peak_rss_kb(stderr: str) -> int | None:
    found = RSS_RE.findall(stderr)
    return int(found[-1]) if found else None


def recorder_mode(dump: Path) -> str:
    """The dump's `i recorder` value; a dump without it comes from the breakpoint-only memdump."""
    with dump.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("i recorder "):
                return line.split(" ", 2)[2].strip()
            if not line.startswith(("i ", "MEMDUMP")):
                break
    return "breakpoints"


def analyze(dump: Path) -> dict:
    """memdump-analyze's JSON summary of dump; the leak must be alloc_bench's, exactly."""
    analyzer = str(ROOT / "scripts" / "memdump-analyze")
    proc = subprocess.run([analyzer, "--format", "json", str(dump)], capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)
    if proc.returncode != 0:
        raise BenchError(f"memdump-analyze {dump} failed ({proc.returncode}):\n{proc.stderr}")
    summary = json.loads(proc.stdout)["summary"]
    leaked = summary["leaked"]
    if (leaked["blocks"], leaked["bytes"]) != (LEAK_BLOCKS, LEAK_BYTES):
        raise BenchError(f"{dump}: memdump-analyze reports {leaked['blocks']} leaked blocks, "
                         f"{leaked['bytes']} bytes; alloc_bench leaks exactly {LEAK_BLOCKS} "
                         f"blocks, {LEAK_BYTES} bytes")
    return summary


class Bench:
    def __init__(self, program: Path, work: Path, runs: int, valgrind_max: int, bp_max: int):
        self.program, self.work, self.runs = program, work, runs
        self.spread: dict[str, float] = {}
        self.valgrind_max, self.bp_max = valgrind_max, bp_max
        self.dump = work / "bench.memdump"
        self.heaptrack_dir = work / "heaptrack"
        self.heaptrack_dir.mkdir()
        self.has_breakpoints = True
        self.startup_events = 0  # events a dump has at N = 0 (the leaks, and the runtime's if any)
        self.dump_bytes: dict[tuple[str, int], list[int]] = {}

    def gdb(self, n: int, *ex: str) -> list[str]:
        return ["gdb", "-nx", "-batch", *[a for e in ex for a in ("-ex", e)],
                "--args", str(self.program), str(n)]

    def memdump(self, n: int, option: str = "") -> list[str]:
        return self.gdb(n, f"source {ROOT / 'gdb_ext' / 'memdump.py'}",
                        f"memdump {option}-o {self.dump}", "r")

    def command(self, name: str, n: int) -> list[str]:
        prog = [str(self.program), str(n)]
        return {
            "native": prog,
            "gdb": self.gdb(n, "r"),
            "heaptrack": ["heaptrack", "-o", str(self.heaptrack_dir / "x"), *prog],
            "valgrind": ["valgrind", "-q", "--leak-check=full", *prog],
            "memdump": self.memdump(n),
            "breakpoints": self.memdump(n, "--breakpoints "),
        }[name]

    def variants(self, n: int, startup: bool = False) -> list[str]:
        names = ["native", "heaptrack"]
        if startup or n <= self.valgrind_max:
            names.append("valgrind")
        names.append("memdump")
        if self.has_breakpoints and (startup or n <= self.bp_max):
            names.append("breakpoints")
        if startup:
            names.append("gdb")
        return names

    def once(self, name: str, n: int) -> tuple[float, int | None]:
        """One run: wall time and peak RSS; a memdump dump is checked, then removed."""
        self.dump.unlink(missing_ok=True)
        for old in self.heaptrack_dir.iterdir():
            old.unlink()
        cmd = self.command(name, n)
        wall, proc = run(cmd, self.work)
        if proc.returncode != 0:
            raise BenchError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        if name in ("memdump", "breakpoints"):
            if not self.dump.exists():
                raise BenchError(f"{' '.join(cmd)} wrote no dump:\n{proc.stderr}")
            self.dump_bytes.setdefault((name, n), []).append(self.dump.stat().st_size)
            summary = analyze(self.dump)
            if n == 0:
                self.startup_events = summary["events"]
            elif summary["events"] - self.startup_events != 2 * (n // 2):
                raise BenchError(f"{self.dump} ({name}, N={n}): {summary['events']} events, "
                                 f"{self.startup_events} at N=0: expected {2 * (n // 2)} more")
        return wall, peak_rss_kb(proc.stderr)

    def measure(self, n: int, names: list[str]) -> dict[str, tuple[float, int | None]]:
        """Median wall time and peak RSS of each variant, interleaved round by round."""
        walls: dict[str, list[float]] = {}
        rss: dict[str, list[int]] = {}
        for _ in range(self.runs):
            for name in names:
                wall, kb = self.once(name, n)
                walls.setdefault(name, []).append(wall)
                if kb is not None:
                    rss.setdefault(name, []).append(kb)
        if n == 0:  # how much a start-up varies from run to run: below it, no figure
            self.spread = {name: max(ws) - min(ws) for name, ws in walls.items()}
        return {name: (statistics.median(ws),
                       int(statistics.median(rss[name])) if name in rss else None)
                for name, ws in walls.items()}

    def probe(self) -> str:
        """The default memdump mode, and whether memdump takes --breakpoints (a run at N = 0)."""
        wall, proc = run(self.command("memdump", 0), self.work)
        if proc.returncode != 0 or not self.dump.exists():
            raise BenchError(f"memdump does not record alloc_bench ({proc.returncode}):\n"
                             f"{proc.stderr}")
        mode = recorder_mode(self.dump)
        self.dump.unlink()
        _, proc = run(self.command("breakpoints", 0), self.work)
        if proc.returncode != 0:
            if "--breakpoints" not in proc.stderr:
                raise BenchError(f"memdump --breakpoints failed ({proc.returncode}):\n"
                                 f"{proc.stderr}")
            print("bench-recorder: memdump has no --breakpoints option (the in-process recorder "
                  "is not merged): that variant is skipped", file=sys.stderr)
            self.has_breakpoints = False
        return mode


def fmt_s(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=str(ROOT / "build"))
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--sizes", default="5000000,20000000", help="events, comma-separated")
    parser.add_argument("--flat-sizes", default="10000,100000,1000000,10000000",
                        help="events of the per-event-cost flatness table (memdump in-process)")
    parser.add_argument("--valgrind-max", type=int, default=5_000_000,
                        help="largest size valgrind memcheck runs at")
    parser.add_argument("--breakpoints-size", type=int, default=20_000,
                        help="the size (a row of its own) memdump --breakpoints runs at; 0: none")
    parser.add_argument("--ops", metavar="OPS",
                        help="measure each entry point instead: comma-separated op_bench "
                        f"operations ({', '.join(benchops.OPS)}), or `all`")
    parser.add_argument("--ops-events", type=int, default=10_000_000,
                        help="events of each --ops measurement")
    parser.add_argument("--ops-baseline", metavar="LIB",
                        help="with --ops: also run memdump with this recorder library (another "
                        "build's libmemdump_recorder.so), interleaved, in two more columns")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args()
    if args.ops is not None:
        return ops_main(args, parser)

    program = Path(args.build_dir).resolve() / "tests" / "programs" / "alloc_bench"
    if not program.exists():
        sys.exit(f"bench-recorder: {program} is not built (run make build)")
    for tool in ("gdb", "heaptrack", "valgrind"):
        if shutil.which(tool) is None:
            sys.exit(f"bench-recorder: {tool} is not installed "
                     "(scripts/setup.sh --bench installs it)")
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        flat_sizes = [int(s) for s in args.flat_sizes.split(",")] if args.flat_sizes else []
    except ValueError:
        parser.error("--sizes and --flat-sizes take comma-separated integers")
    if args.runs < 1 or any(n < 2 for n in sizes + flat_sizes):
        parser.error("--runs must be at least 1 and every size at least 2")
    bp_size = args.breakpoints_size
    rows_sizes = sorted(set(sizes) | ({bp_size} if bp_size > 0 else set()))

    work = Path(tempfile.mkdtemp(prefix="bench-recorder-"))
    try:
        bench = Bench(program, work, args.runs, args.valgrind_max, bp_size)
        mode = bench.probe()
        in_process = mode != "breakpoints"
        if not in_process:
            largest = max(rows_sizes + flat_sizes)
            print("bench-recorder: memdump's default mode is the breakpoint one (no in-process "
                  "recorder yet): the tables are printed, not written", file=sys.stderr)
            if largest > max(bp_size, 20_000):
                print(f"bench-recorder: {largest:,} events would take hours at ~5k events/s: "
                      "nothing measured (try --sizes 2000 --flat-sizes 1000,4000 "
                      "--breakpoints-size 2000)",
                      file=sys.stderr)
                return 0
        started = time.monotonic()
        startup = bench.measure(0, bench.variants(0, startup=True))
        rows = {n: bench.measure(n, bench.variants(n)) for n in rows_sizes}
        flat = {n: bench.measure(n, ["native", "memdump"]) for n in flat_sizes}
        minutes = (time.monotonic() - started) / 60
    except (BenchError, subprocess.TimeoutExpired) as err:
        sys.exit(f"bench-recorder: FAILED: {err}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def per_event(name: str, n: int, t: dict) -> float | None:
        """µs of overhead per event: (wall - native wall - the tool's start-up) / events."""
        if name not in t:
            return None
        tool_startup = startup[name][0] - startup["native"][0]
        overhead = t[name][0] - t["native"][0] - tool_startup
        if overhead <= bench.spread.get(name, 0.0):
            return None  # lost in the start-up's run-to-run spread
        return overhead / n * 1e6

    def rate(name: str, n: int, t: dict) -> str:
        if per_event(name, n, t) is None:
            return "—"
        return f"{n / (t[name][0] - (startup[name][0] - startup['native'][0])):,.0f}"

    def us(x: float | None, digits: int = 3) -> str:
        return "—" if x is None else f"{x:.{digits}f}"

    def dump_mib(name: str, n: int) -> str:
        sizes_ = bench.dump_bytes.get((name, n))
        if not sizes_:
            return "—"
        mib = statistics.median(sizes_) / 2**20
        return f"{mib:,.2f}" if mib < 10 else f"{mib:,.0f}"

    label = "memdump" if in_process else "memdump (breakpoint mode: no in-process recorder)"
    lines = [
        f"Machine: {machine()}; gdb {version(['gdb', '--version'])}, heaptrack "
        f"{version(['heaptrack', '--version'])}, valgrind {version(['valgrind', '--version'])}; "
        f"memdump's recorder: `{mode}`; median of {args.runs} run(s), variants interleaved; "
        f"{minutes:.0f} min. Every memdump dump checked: leak exactly {LEAK_BLOCKS} blocks, "
        f"{LEAK_BYTES} bytes, and N events.",
        "",
        f"| events | native s | heaptrack s | valgrind s | {label} s | memdump --breakpoints s "
        "| heaptrack µs/event | memdump µs/event | ratio memdump/heaptrack | memdump events/s "
        "| dump MiB |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n, t in rows.items():
        ht, md = per_event("heaptrack", n, t), per_event("memdump", n, t)
        bp = t.get("breakpoints")
        vg = t.get("valgrind")
        lines.append(
            f"| {n:,} | {fmt_s(t['native'][0])} | {fmt_s(t['heaptrack'][0])} | "
            f"{fmt_s(vg[0] if vg else None)} | {fmt_s(t['memdump'][0])} | "
            f"{fmt_s(bp[0] if bp else None)} "
            f"| {us(ht)} | {us(md)} | "
            f"{f'{md / ht:.2f}x' if md is not None and ht is not None else '—'} "
            f"| {rate('memdump', n, t)} "
            f"| {dump_mib('memdump', n)} |")
    if "breakpoints" in startup and bp_size in rows:
        t = rows[bp_size]
        lines += ["", f"memdump --breakpoints at {bp_size:,} events: "
                  f"{us(per_event('breakpoints', bp_size, t), 1)} µs/event, "
                  f"{rate('breakpoints', bp_size, t)} events/s."]

    lines += ["", "| start-up (N = 0) | s |", "| --- | ---: |"]
    names = {"native": "native", "gdb": "GDB alone (`gdb -batch -ex r`)", "memdump": label,
             "breakpoints": "memdump --breakpoints", "heaptrack": "heaptrack",
             "valgrind": "valgrind memcheck"}
    for name, title in names.items():
        if name in startup:
            lines.append(f"| {title} | {startup[name][0]:.3f} |")

    largest = rows_sizes[-1]
    rss = {name: kb for name, (_, kb) in rows[largest].items() if kb is not None}
    if rss:
        lines += ["", f"| peak RSS of the program at {largest:,} events (VmHWM) | MiB |",
                  "| --- | ---: |"]
        for name, kb in rss.items():
            lines.append(f"| {names[name]} | {kb / 1024:,.1f} |")

    if flat:
        lines += ["", f"Per-event cost of {label} (should be flat):", "",
                  "| events | native s | memdump s | µs/event | events/s | dump MiB |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for n, t in flat.items():
            lines.append(f"| {n:,} | {fmt_s(t['native'][0])} | {fmt_s(t['memdump'][0])} | "
                         f"{us(per_event('memdump', n, t))} | {rate('memdump', n, t)} | "
                         f"{dump_mib('memdump', n)} |")
    spread = ", ".join(f"{name} {s * 1000:.0f} ms" for name, s in bench.spread.items()
                       if name in ("memdump", "heaptrack"))
    lines += ["", f"—: the overhead was within the start-up's run-to-run spread ({spread}), "
              "too small to measure at that size."]
    lines += ["", f"Reproduce: `make build && python3 scripts/bench-recorder.py --runs {args.runs} "
              f"--sizes {args.sizes} --flat-sizes {args.flat_sizes} "
              f"--valgrind-max {args.valgrind_max} --breakpoints-size {bp_size}`"]
    table = "\n".join(lines)
    print(table)
    if args.no_write:
        return 0
    if not in_process:
        print("bench-recorder: not written to docs/benchmarks.md: measured without the in-process "
              "recorder", file=sys.stderr)
        return 0
    write_section(MARKER, table)
    return 0


def ops_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """--ops: the per-operation table."""
    ops = list(benchops.OPS) if args.ops == "all" else args.ops.split(",")
    unknown = [op for op in ops if op not in benchops.OPS]
    if unknown:
        parser.error(f"--ops: unknown operation {unknown[0]!r} (one of {', '.join(benchops.OPS)})")
    if args.runs < 1 or args.ops_events < 6:
        parser.error("--runs must be at least 1 and --ops-events at least 6")
    program = Path(args.build_dir).resolve() / "tests" / "programs" / "op_bench"
    if not program.exists():
        sys.exit(f"bench-recorder: {program} is not built (run make build)")
    baseline = Path(args.ops_baseline).resolve() if args.ops_baseline else None
    if baseline is not None and not baseline.is_file():
        sys.exit(f"bench-recorder: --ops-baseline {args.ops_baseline}: no such file")
    if baseline is not None and baseline.name != "libmemdump_recorder.so":
        sys.exit(f"bench-recorder: --ops-baseline {args.ops_baseline}: memdump loads a recorder "
                 "only under its own name, libmemdump_recorder.so")
    for tool in ("gdb", "heaptrack"):
        if shutil.which(tool) is None:
            sys.exit(f"bench-recorder: {tool} is not installed "
                     "(scripts/setup.sh --bench installs it)")
    work = Path(tempfile.mkdtemp(prefix="bench-recorder-ops-"))
    started = time.monotonic()
    try:
        rows = benchops.measure(program, work, ROOT, args.runs, args.ops_events, ops, baseline)
    except (benchops.OpsError, subprocess.TimeoutExpired) as err:
        sys.exit(f"bench-recorder: FAILED: {err}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    tools = ("heaptrack, memdump and memdump with the baseline recorder" if baseline
             else "heaptrack and memdump")
    lines = [
        f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end; gdb "
        f"{version(['gdb', '--version'])}, heaptrack {version(['heaptrack', '--version'])}; "
        f"{args.ops_events:,} events per entry point, median of {args.runs} run(s), native, "
        f"{tools} interleaved; {minutes:.0f} min. Every memdump run recorded exactly its events.",
        "", *rows, "",
        f"Reproduce: `make build && python3 scripts/bench-recorder.py --ops {args.ops} "
        f"--ops-events {args.ops_events} --runs {args.runs}"
        f"{' --ops-baseline OLD/libmemdump_recorder.so' if baseline else ''}`"]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        write_section(OPS_MARKER, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
