"""bench-recorder.py --ops: the recorder's overhead per event on each entry point, by heaptrack's.

Runs tests/programs/op_bench OP N (N heap events of one entry point, two frames deep, -O2 without
frame pointers) natively, under heaptrack and under memdump (the in-process recorder), the three
interleaved round by round, and tables each tool's overhead per event over native: whole-command
wall and CPU seconds (user + system of the command and every process it waited for: GDB,
heaptrack's interpreter), less the tool's start-up (its run at N = 0), divided by N; medians. The
program's own CPU time of its loop (`OP_BENCH_TIME`) is a third figure: what the tool costs the
program itself, without GDB's or heaptrack's start-up and end, and which a loaded machine does not
inflate (heaptrack's interpreter runs in a process of its own: its CPU is in the CPU column, not in
this one). Every memdump run must say it recorded
exactly N events more than at N = 0. With a baseline (--ops-baseline LIB: another build of the
recorder's library, MEMDUMP_RECORDER) memdump runs with it too, as a fourth tool in each round: its
program's CPU in two more columns, measured in the same conditions as this build's.
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

# op_bench's operations, each with what one iteration does (docs/benchmarks.md's table)
OPS = {
    "malloc": "`malloc` + `free`",
    "calloc": "`calloc` + `free`",
    "realloc": "`realloc(NULL, n)`, `realloc(p, n + 512)`, `realloc(q, 0)`",
    "posix_memalign": "`posix_memalign(64)` + `free`",
    "aligned_alloc": "`aligned_alloc(64)` + `free`",
    "new": "`operator new` + `operator delete`",
    "new[]": "`operator new[]` + `operator delete[]`",
    "sized_delete": "`operator new` + sized `operator delete`",
    "aligned_new": "aligned `operator new` + aligned `operator delete`",
}
TOOLS = ("native", "heaptrack", "memdump")
LOOP_RE = re.compile(r"op_bench: loop_ns (\d+) cpu_ns (\d+)")
EVENTS_RE = re.compile(r"memdump: ([\d,]+) events? recorded")
TIMEOUT = 3600


class OpsError(Exception):
    """A run failed or recorded the wrong number of events."""


@dataclass
class Run:
    wall: float       # seconds, the whole command
    cpu: float        # seconds, user + system of the command and its children
    loop: float       # seconds, the program's process CPU time in its loop


def per_iteration(op: str) -> int:
    return 3 if op == "realloc" else 2


class OpsBench:
    def __init__(self, program: Path, work: Path, root: Path, runs: int,
                 baseline: Path | None = None):
        self.program, self.work, self.root, self.runs = program, work, root, runs
        self.baseline = baseline
        self.tools = TOOLS + (("baseline",) if baseline is not None else ())
        self.dump = work / "ops.memdump"
        self.heaptrack = work / "ht"
        self.startup_events: dict[str, int] = {}

    def command(self, tool: str, op: str, n: int) -> list[str]:
        prog = [str(self.program), op, str(n)]
        if tool == "heaptrack":
            return ["heaptrack", "-o", str(self.heaptrack), *prog]
        if tool in ("memdump", "baseline"):
            return ["gdb", "-nx", "-batch",
                    "-ex", f"source {self.root / 'gdb_ext' / 'memdump.py'}",
                    "-ex", f"memdump -o {self.dump}", "-ex", "r", "--args", *prog]
        return prog

    def once(self, tool: str, op: str, n: int) -> Run:
        self.dump.unlink(missing_ok=True)
        for old in self.work.glob("ht*"):
            old.unlink()
        cmd = self.command(tool, op, n)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        env = {**os.environ, "OP_BENCH_TIME": "1"}
        if tool == "baseline":
            env["MEMDUMP_RECORDER"] = str(self.baseline)
        proc = subprocess.run(cmd, cwd=self.work, capture_output=True,
                              text=True, timeout=TIMEOUT, check=False, env=env)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise OpsError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        loop = LOOP_RE.search(proc.stderr)
        if loop is None:
            raise OpsError(f"{' '.join(cmd)}: op_bench printed no loop time:\n{proc.stderr}")
        if tool in ("memdump", "baseline"):
            self.check_events(tool, cmd, proc.stdout + proc.stderr, n - n % per_iteration(op))
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return Run(wall, cpu, int(loop.group(2)) / 1e9)

    def check_events(self, tool: str, cmd: list[str], stderr: str, made: int) -> None:
        found = EVENTS_RE.search(stderr)
        if found is None:
            raise OpsError(f"{' '.join(cmd)}: memdump said no event count:\n{stderr}")
        events = int(found.group(1).replace(",", ""))
        if made == 0:
            self.startup_events[tool] = events
        elif events - self.startup_events[tool] != made:
            raise OpsError(f"{' '.join(cmd)}: {events} events recorded, "
                           f"{self.startup_events[tool]} at N = 0: expected {made} more")

    def median(self, op: str, n: int) -> dict[str, Run]:
        """Each tool's median run of OP at N events, the tools interleaved round by round."""
        runs: dict[str, list[Run]] = {tool: [] for tool in self.tools}
        for _ in range(self.runs):
            for tool in self.tools:
                runs[tool].append(self.once(tool, op, n))
        return {tool: Run(statistics.median(r.wall for r in rs),
                          statistics.median(r.cpu for r in rs),
                          statistics.median(r.loop for r in rs))
                for tool, rs in runs.items()}


def ns(x: float) -> str:
    return f"{x:.0f}" if x >= 0.5 else "—"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a >= 0.5 and b >= 0.5 else "—"


def measure(program: Path, work: Path, root: Path, runs: int, n: int, ops: list[str],
            baseline: Path | None = None) -> list[str]:
    """The per-operation table's rows (markdown), after each tool's start-up at N = 0."""
    bench = OpsBench(program, work, root, runs, baseline)
    startup = bench.median("malloc", 0)
    rows = []
    for op in ops:
        t = bench.median(op, n)
        made = n - n % per_iteration(op)
        over = {tool: {key: (getattr(t[tool], key) - getattr(startup[tool], key)
                             - (getattr(t["native"], key) - getattr(startup["native"], key)))
                       / made * 1e9
                       for key in ("wall", "cpu", "loop")}
                for tool in bench.tools if tool != "native"}
        ht, md = over["heaptrack"], over["memdump"]
        native = (t["native"].loop - startup["native"].loop) / made * 1e9  # CPU ns/event
        rows.append(f"| {op} | {OPS[op]} | {native:.1f} | {ns(ht['wall'])} | {ns(md['wall'])} | "
                    f"{ratio(md['wall'], ht['wall'])} | {ns(ht['cpu'])} | {ns(md['cpu'])} | "
                    f"{ratio(md['cpu'], ht['cpu'])} | {ns(ht['loop'])} | {ns(md['loop'])} | "
                    f"{ratio(md['loop'], ht['loop'])} |")
        if baseline is not None:
            bl = over["baseline"]["loop"]
            rows[-1] += f" {ns(bl)} | {ratio(bl, ht['loop'])} |"
    head = [
        "| entry point | one iteration | native ns/event | heaptrack ns/event (wall) "
        "| memdump ns/event (wall) | ratio (wall) | heaptrack ns/event (CPU) "
        "| memdump ns/event (CPU) | ratio (CPU) | heaptrack ns/event (program's CPU) "
        "| memdump ns/event (program's CPU) | ratio (program's CPU) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    if baseline is not None:
        head[0] += (" baseline memdump ns/event (program's CPU) | baseline ratio (program's CPU) |")
        head[1] += " ---: | ---: |"
    start = [f"Start-up (N = 0, subtracted): native {startup['native'].wall:.3f} s, heaptrack "
             f"{startup['heaptrack'].wall:.3f} s, memdump {startup['memdump'].wall:.3f} s wall "
             f"({startup['memdump'].cpu:.3f} s CPU).", ""]
    legend = ["", "—: no overhead left after the start-up's subtraction (below 0.5 ns an event: "
              "lost in the run-to-run spread of a loaded machine's wall clock)."]
    return start + head + rows + legend
