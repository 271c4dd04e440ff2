#!/usr/bin/env python3
"""The cost of the red-zone check at a GDB stop (`set memdump check-at-stop`, docs/heap-errors.md).

tests/programs/redzone_stops.c `many N` makes N live 32-byte blocks, then stops 20 times at its
BREAK: many line. Two measures, each a median of --runs runs, the settings interleaved:

- one check: at the first stop, the check `StopCheck.at_stop` makes, called 50 times in a row
  (nothing to find: the heap is intact), per call: the program's CPU (the stopped thread's
  /proc schedstat run time: the recorder's walk of the live blocks), GDB's CPU and the wall time;
- the whole run under GDB (its start-up, the blocks, the 20 stops, the frees) with the setting
  on and off: CPU (user + system of GDB and the program) and wall.

Usage: scripts/bench-check-at-stop.py [--build DIR] [--runs N] [--write]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import machine, publish  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "programs" / "redzone_stops.c"
CALLS = 50
STOPS = 20
SIZES = (1_000, 10_000, 100_000)

MEASURE = """
import os, time, gdb
from dbgkit.memdump.stopcheck import StopCheck
pid = gdb.selected_inferior().pid
def program_cpu():
    tid = gdb.selected_thread().ptid[1]
    return int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0]) / 1e9
check = StopCheck()
check.at_stop()
p0, g0, w0 = program_cpu(), time.process_time(), time.perf_counter()
for _ in range(CALLS):
    check.at_stop()
print("measured", (program_cpu() - p0) / CALLS, (time.process_time() - g0) / CALLS,
      (time.perf_counter() - w0) / CALLS)
"""


def break_line() -> int:
    for number, line in enumerate(SOURCE.read_text(encoding="utf-8").splitlines(), 1):
        if line.rstrip().endswith("// BREAK: many"):
            return number
    raise SystemExit(f"bench-check-at-stop: no '// BREAK: many' line in {SOURCE}")


def gdb_argv(build: Path, tmp: Path, blocks: int, commands: list[str]) -> list[str]:
    argv = ["gdb", "-nx", "-batch", "-ex", f"source {REPO / 'gdb_ext' / 'memdump.py'}",
            "-ex", "set memdump compact off", "-ex", "set environment MEMDUMP_REDZONE 16",
            "-ex", f"memdump -o {tmp / 'bench.memdump'}",
            "-ex", f"break redzone_stops.c:{break_line()}", "-ex", "run"]
    for command in commands:
        argv += ["-ex", command]
    return argv + ["--args", str(build / "tests" / "programs" / "redzone_stops"), "many",
                   str(blocks)]


def one_check(build: Path, tmp: Path, blocks: int) -> tuple[float, float, float]:
    script = tmp / "measure.py"
    script.write_text(MEASURE.replace("CALLS", str(CALLS)), encoding="utf-8")
    proc = subprocess.run(gdb_argv(build, tmp, blocks, [f"source {script}", "kill"]),
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "MEMDUMP_BUILD_DIR": str(build)})
    for line in proc.stdout.splitlines():
        if line.startswith("measured "):
            program, gdb_cpu, wall = (float(x) for x in line.split()[1:])
            return program, gdb_cpu, wall
    raise SystemExit(f"bench-check-at-stop: no measure from GDB:\n{proc.stdout}\n{proc.stderr}")


def whole_run(build: Path, tmp: Path, blocks: int, setting: str) -> tuple[float, float]:
    commands = ["continue"] * (STOPS - 1) + ["delete", "continue"]
    argv = gdb_argv(build, tmp, blocks, commands)
    argv[argv.index("run") - 1:argv.index("run") - 1] = ["-ex",
                                                         f"set memdump check-at-stop {setting}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if "exited normally" not in proc.stdout + proc.stderr:
        raise SystemExit(f"bench-check-at-stop: the run did not end:\n{proc.stdout}\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, default=REPO / "build")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()
    if not (args.build / "tests" / "programs" / "redzone_stops").is_file():
        raise SystemExit(f"bench-check-at-stop: no redzone_stops in {args.build} (build first)")
    with tempfile.TemporaryDirectory(prefix="bench-check-at-stop-") as name:
        tmp = Path(name)
        checks = {n: [one_check(args.build, tmp, n) for _ in range(args.runs)] for n in SIZES}
        runs: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        for _ in range(args.runs):
            for setting in ("on", "off"):
                runs[setting].append(whole_run(args.build, tmp, SIZES[-1], setting))
    load = os.getloadavg()[0]
    lines = [f"{machine()}; load average {load:.1f} at the end; median of {args.runs} runs.",
             "", f"One check at a stop (mean of {CALLS} calls a run):", "",
             "| live blocks | the program's CPU | GDB's CPU | wall |", "| --- | --- | --- | --- |"]
    for n in SIZES:
        program, gdb_cpu, wall = (statistics.median(s[i] for s in checks[n]) for i in range(3))
        lines.append(f"| {n:,} | {ms(program)} | {ms(gdb_cpu)} | {ms(wall)} |")
    lines += ["", f"The whole run under GDB, {SIZES[-1]:,} live blocks, {STOPS} stops:", "",
              "| check-at-stop | CPU (user + system) | wall | a stop's share |",
              "| --- | --- | --- | --- |"]
    off_cpu = statistics.median(c for c, _ in runs["off"])
    for setting in ("off", "on"):
        cpu = statistics.median(c for c, _ in runs[setting])
        wall = statistics.median(w for _, w in runs[setting])
        share = "" if setting == "off" else f"{ms((cpu - off_cpu) / STOPS)} CPU"
        lines.append(f"| {setting} | {cpu:.2f} s | {wall:.2f} s | {share} |")
    publish("bench-check-at-stop", "\n".join(lines), args.write)


if __name__ == "__main__":
    main()
