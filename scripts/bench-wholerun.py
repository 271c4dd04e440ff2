#!/usr/bin/env python3
"""Benchmark the whole run, recording and leak report, of memdump against heaptrack's.

For each program (a small one, tests/programs/churn_leak: 300 allocations and one leak; a real
one, cppcheck on a C file), it runs, one after the other and several times each:

- `scripts/memdump.sh --report PROGRAM`: records under GDB, then prints the leak report;
- GDB's one-liner, `gdb -batch -ex 'source gdb_ext/memdump.py' -ex memdump -ex r PROGRAM`,
  then `scripts/memdump-analyze DUMP`;
- the same with GDB's index cache on (the user's setting `set index-cache enabled on`, warm);
- `heaptrack PROGRAM` then `heaptrack_print FILE` (the leak report among its views);

memdump's on the small program also with its symbol cache cold (emptied before each run; warm
otherwise: the runs' own XDG_CACHE_HOME, filled by the warm-up run), and the parts of memdump's
start-up alone (GDB's, `source gdb_ext/memdump.py` and
`gdb_ext/dbgkit.py`, memdump's module imported at its first use, the analyser's).
Each figure is the median of the runs: wall seconds and CPU seconds (user + system of every
process of the run). It prints a markdown table that it also writes into docs/benchmarks.md
between its markers. Python's compiled bytecode is cached (a warm-up run writes it), as in a
checkout that has run once or an installed package.

`--guard` measures the guard pages instead (docs/heap-errors.md, "Cost"): alloc_bench, live_churn
(many live blocks) and, with --big, cppcheck, each natively, as an ASan build, under valgrind
memcheck, recorded by `memdump.sh --no-compact`, and recorded with `--guard` at each of
--guard-rates and `all`; its table goes between the markers bench-guard.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchlib import machine, publish

ROOT = Path(__file__).resolve().parents[1]

Step = Sequence[str]


def timed(steps: Sequence[Step], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of STEPS run one after the other; a failing step ends the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for step in steps:
        proc = subprocess.run(step, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=3600, check=False)
        if proc.returncode != 0:
            sys.exit(f"bench-wholerun: {' '.join(step[:4])}... failed ({proc.returncode}):\n"
                     f"{proc.stderr.decode(errors='replace')[-2000:]}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def cases(root: Path, program: Sequence[str], work: Path, cold: bool,
          ) -> dict[str, list[Step]]:
    """The runs compared on PROGRAM, by label, with their files under WORK; COLD: memdump's
    also with the symbol cache emptied before each run."""
    dump, heaptrack = str(work / "run.memdump"), str(work / "run.heaptrack")
    source = f"source {root / 'gdb_ext' / 'memdump.py'}"
    script = [[str(root / "scripts" / "memdump.sh"), "--report", "-o", dump, *program]]
    one_liner = [["gdb", "-nx", "-batch", "-ex", source, "-ex", f"memdump -o {dump}", "-ex", "r",
                  "--args", *program],
                 [str(root / "scripts" / "memdump-analyze"), dump]]
    # the symbol cache (XDG_CACHE_HOME, set by main) is warm after measure's warm-up run; cold,
    # it is removed first (`rm -rf`, counted: 1 ms)
    empty = [["rm", "-rf", os.path.join(os.environ["XDG_CACHE_HOME"], "dbgkit")]]
    return {
        "`memdump.sh --report`": script,
        **({"`memdump.sh --report`, symbol cache cold": empty + script} if cold else {}),
        "`gdb -batch ... memdump -ex r` + `memdump-analyze`": one_liner,
        **({"the same, symbol cache cold": empty + one_liner} if cold else {}),
        # the same with the user's GDB setting `set index-cache enabled on` (a directory of the
        # run's own; warm after measure's first run): the debug files' indexes read, not built
        "the same, GDB's index cache on (warm)": [
            ["gdb", "-nx", "-batch", "-iex", f"set index-cache directory {work / 'gdb-index'}",
             "-iex", "set index-cache enabled on", "-ex", source, "-ex", f"memdump -o {dump}",
             "-ex", "r", "--args", *program],
            [str(root / "scripts" / "memdump-analyze"), dump]],
        "`heaptrack` + `heaptrack_print`": [["heaptrack", "-o", heaptrack, *program],
                                            ["heaptrack_print", heaptrack + ".zst"]],
    }


def parts(root: Path) -> dict[str, list[Step]]:
    """memdump's start-up costs, alone."""
    return {
        "GDB's start-up (`gdb -batch -nx`)": [["gdb", "-nx", "-batch"]],
        "`gdb -batch -nx -ex 'source gdb_ext/memdump.py'`": [
            ["gdb", "-nx", "-batch", "-ex", f"source {root / 'gdb_ext' / 'memdump.py'}"]],
        "`gdb -batch -nx -ex 'source gdb_ext/dbgkit.py'` (every command and printer)": [
            ["gdb", "-nx", "-batch", "-ex", f"source {root / 'gdb_ext' / 'dbgkit.py'}"]],
        "`gdb -batch -nx -ex 'source gdb_ext/memdump.py' -ex 'memdump -h'` (its module imported)": [
            ["gdb", "-nx", "-batch", "-ex", f"source {root / 'gdb_ext' / 'memdump.py'}",
             "-ex", "memdump -h"]],
        "`memdump-analyze --help`": [[str(root / "scripts" / "memdump-analyze"), "--help"]],
    }


def guard_cases(root: Path, program: Sequence[str], work: Path, rates: Sequence[str],
                asan: Path | None, valgrind: bool) -> dict[str, list[Step]]:
    """The runs the guard table compares on PROGRAM, by label."""
    record = [str(root / "scripts" / "memdump.sh"), "--no-compact", "-o", str(work / "g.memdump")]
    runs: dict[str, list[Step]] = {"native (no GDB)": [list(program)]}
    if asan is not None:
        # no leak check at the exit, as valgrind's --leak-check=no (alloc_bench leaks on purpose)
        runs["an ASan build (`gcc -O2 -g -fsanitize=address`, no GDB)"] = [
            ["env", "ASAN_OPTIONS=detect_leaks=0", str(asan), *program[1:]]]
    if valgrind:
        runs["valgrind memcheck (`--leak-check=no`, no GDB)"] = [
            ["valgrind", "-q", "--leak-check=no", *program]]
    runs["recorded, no guard pages"] = [[*record, *program]]
    for rate in [*rates, "all"]:
        runs[f"`--guard {rate}`"] = [[*record, "--guard", rate, *program]]
    return runs


def interleaved(runs_of: dict[str, list[Step]], runs: int, work: Path,
                ) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each of RUNS_OF, a warm-up run each, then RUNS rounds that
    run every variant once, so that the machine's drift weighs on every variant alike."""
    for steps in runs_of.values():
        timed(steps, work)
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label in runs_of}
    for _ in range(runs):
        for label, steps in runs_of.items():
            samples[label].append(timed(steps, work))
    medians = {label: (statistics.median(s[0] for s in out), statistics.median(s[1] for s in out))
               for label, out in samples.items()}
    for label, (wall, cpu) in medians.items():
        print(f"  {label}: {wall:.2f} {cpu:.2f}", file=sys.stderr)
    return medians


def asan_build(source: Path, work: Path) -> Path:
    """SOURCE built with AddressSanitizer into WORK, as the project builds it (-O2)."""
    out = work / f"{source.stem}.asan"
    subprocess.run(["gcc", "-O2", "-g", "-fsanitize=address", "-o", str(out), str(source)],
                   check=True)
    return out


def guard_main(args: argparse.Namespace) -> int:
    """--guard: the guard pages' table (bench-guard)."""
    build = Path(args.build_dir).resolve() / "tests" / "programs"
    rates = [r for r in args.guard_rates.split(",") if r]
    programs: list[tuple[str, list[str], str | None, int, bool]] = [
        ("alloc_bench 2000000 (1M malloc/free pairs, 16 to 527 bytes, 11 frames deep)",
         [str(build / "alloc_bench"), "2000000"], "alloc_bench.c", args.runs, True),
        ("live_churn 50000 1000000 (50,000 live blocks, one replaced at random 1M times)",
         [str(build / "live_churn"), "50000", "1000000"], "live_churn.c", args.runs, True)]
    if args.big:
        if shutil.which("cppcheck") is None or not Path(args.big).is_file():
            sys.exit(f"bench-wholerun: --big needs cppcheck and {args.big}")
        programs.append((f"cppcheck --quiet --enable=all {Path(args.big).name} "
                         f"({_lines(args.big):,} lines, about 8M heap events)",
                         ["cppcheck", "--quiet", "--enable=all", str(Path(args.big).resolve())],
                         None, args.big_runs, args.guard_valgrind_big))
    for program in programs:
        if not Path(program[1][0]).is_file() and program[2] is not None:
            sys.exit(f"bench-wholerun: {program[1][0]} is not built (make build)")
    load_before = os.getloadavg()[0]
    out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-guard.") as tmp:
        work = Path(tmp)
        for title, program, source, runs, valgrind in programs:
            print(title, file=sys.stderr)
            asan = asan_build(ROOT / "tests" / "programs" / source, work) if source else None
            runs_of = guard_cases(ROOT, program, work, rates, asan,
                                  valgrind and shutil.which("valgrind") is not None)
            cells = interleaved(runs_of, runs, work)
            recorded = cells["recorded, no guard pages"][1]
            out += [f"{title}, median of {runs} interleaved runs:", "",
                    "| run | wall (s) | CPU (s) | CPU against the recording |",
                    "| --- | ---: | ---: | ---: |"]
            for label, (wall, cpu) in cells.items():
                ratio = f"{cpu / recorded:.2f}x" if recorded > 0 else "—"
                out.append(f"| {label} | {wall:.2f} | {cpu:.2f} | {ratio} |")
            out.append("")
    big = f" --big FILE --big-runs {args.big_runs}" if args.big else ""
    table = (f"{machine()}; load average (1 min) {load_before:.2f} before, "
             f"{os.getloadavg()[0]:.2f} after (shared with other jobs: the CPU seconds, user + "
             "system of every process of the run, are the steadier figure). Each variant's runs "
             "interleaved with the others', after one warm-up run each.\n\n" + "\n".join(out)
             + "\nReproduce: `make build && python3 scripts/bench-wholerun.py --guard "
             f"--guard-rates {args.guard_rates} --runs {args.runs}{big}`")
    publish("bench-guard", table, not args.no_write)
    return 0


def _lines(path: str) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def measure(label: str, variants: list[list[Step]], runs: int, work: Path) -> str:
    """The table cells of LABEL: median wall and CPU seconds of each variant (this checkout's
    steps, then --before's), their runs interleaved so that both see the same machine load."""
    for steps in variants:
        timed(steps, work)  # warm-up: the bytecode cache, the page cache
    samples: list[list[tuple[float, float]]] = [[] for _ in variants]
    for _ in range(runs):
        for steps, out in zip(variants, samples, strict=True):
            out.append(timed(steps, work))
    cells = []
    for out in samples:
        wall, cpu = statistics.median(s[0] for s in out), statistics.median(s[1] for s in out)
        cells += [f"{wall:.2f}", f"{cpu:.2f}"]
    print(f"  {label}: {' '.join(cells)}", file=sys.stderr)
    return " | ".join(cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=str(ROOT / "build"))
    parser.add_argument("--before", metavar="DIR",
                        help="another checkout (an earlier commit, built or with a `build` link "
                        "to this one's) measured beside this one, run for run")
    parser.add_argument("--before-label", metavar="TEXT",
                        help="what --before is, for the table (default: its directory's name)")
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument("--big", metavar="FILE",
                        help="a C file for cppcheck --enable=all to check, the real program "
                        "(without it: the small program alone)")
    parser.add_argument("--big-runs", type=int, default=3, help="runs on cppcheck (median)")
    parser.add_argument("--guard", action="store_true",
                        help="the guard pages' table instead (docs/heap-errors.md, \"Cost\")")
    parser.add_argument("--guard-rates", default="0.02%,0.1%,1%,5%", metavar="RATES",
                        help="with --guard: the --guard N%% shares measured beside `all`")
    parser.add_argument("--guard-valgrind-big", action="store_true",
                        help="with --guard --big: cppcheck under valgrind too (minutes a run)")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args()
    if args.guard:
        return guard_main(args)

    roots = [ROOT] + ([Path(args.before).resolve()] if args.before else [])
    small = Path(args.build_dir).resolve() / "tests" / "programs" / "churn_leak"
    if not small.is_file():
        sys.exit(f"bench-wholerun: {small} is not built (make build)")
    for tool in ("gdb", "heaptrack", "heaptrack_print"):
        if shutil.which(tool) is None:
            sys.exit(f"bench-wholerun: {tool} is not installed")
    programs = [("small program: `churn_leak 300` (300 allocations, one leak)",
                 [str(small), "300"], args.runs, True)]
    if args.big:
        if shutil.which("cppcheck") is None or not Path(args.big).is_file():
            sys.exit(f"bench-wholerun: --big needs cppcheck and {args.big}")
        programs.append((f"cppcheck: `cppcheck --quiet --enable=all {Path(args.big).name}`",
                         ["cppcheck", "--quiet", "--enable=all", str(Path(args.big).resolve())],
                         args.big_runs, False))
    # as a user's shell: Python writes its bytecode cache (a test runner may turn it off)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    load_before = os.getloadavg()[0]
    head = "| program | run | wall (s) | CPU (s) |"
    if args.before:
        head += " before: wall (s) | before: CPU (s) |"
    rows = [head, "| --- | --- |" + " ---: |" * (2 * len(roots))]
    with tempfile.TemporaryDirectory(prefix="bench-wholerun.") as tmp:
        work = Path(tmp)
        os.environ["XDG_CACHE_HOME"] = str(work / "cache")  # the runs' own symbol cache
        for title, program, runs, cold in programs:
            print(title, file=sys.stderr)
            variants = [cases(root, program, work, cold) for root in roots]
            for label in variants[0]:
                cells = measure(label, [v[label] for v in variants], runs, work)
                rows.append(f"| {title.split(':')[0]} | {label} | {cells} |")
        print("start-up", file=sys.stderr)
        variants = [parts(root) for root in roots]
        for label in variants[0]:
            cells = measure(label, [v[label] for v in variants], args.runs, work)
            rows.append(f"| start-up | {label} | {cells} |")
    before = (f"; before: {args.before_label or Path(args.before).name}, run for run with this "
              "one" if args.before else "")
    on_big = f" ({args.big_runs} on cppcheck)" if args.big else ""
    table = (f"Median of {args.runs} runs{on_big}{before}; {machine()}. "
             f"Load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
             "(shared with other jobs: the CPU seconds are the steadier figure).\n\n"
             + "\n".join(rows) + "\n\nReproduce: `make build && python3 scripts/bench-wholerun.py "
             f"--runs {args.runs}" + (f" --big FILE --big-runs {args.big_runs}`, FILE a "
                                      f"{_lines(args.big):,}-line C file" if args.big else "`"))
    publish("bench-wholerun", table, not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
