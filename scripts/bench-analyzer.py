#!/usr/bin/env python3
"""Benchmark memdump-analyze on large synthetic dumps.

Writes a dump of N heap events (mostly malloc and free, a few calloc, realloc, posix_memalign,
thread exits with glibc's tcache frees, leaks left at the end) into a fresh temporary directory,
once as the in-process recorder writes it (malloc and free as short `+`/`-` records, format 2.0)
and once with `e` records only, as the breakpoint recorder does; runs the leak report
(`scripts/memdump-analyze --format json`) and two views (docs/views.md: one pass computes them, a
view asking only for the parts it shows), `peak` (the parts every view needs), `lifetimes` (the
view that does the most per event) and `timeline` (the series over time, with the fragmentation
of the live blocks sampled), on each several times, interleaved, and prints a markdown table
with the median wall and CPU times, the events per second and the peak resident memory of each.

    scripts/bench-analyzer.py                    # 1,000,000 events, median of 3
    scripts/bench-analyzer.py 100000 1000000 --runs 5
    scripts/bench-analyzer.py --forms in-process --runs 3 100000000

With --recorded it sets memdump against heaptrack instead, on the same runs of real programs
(cppcheck, alloc_bench at 1M, 20M and 100M events: scripts/benchrecorded.py): the files' sizes, the
recordings, and memdump's leak report and each of its views against heaptrack_print.

    scripts/bench-analyzer.py --recorded --runs 3
    scripts/bench-analyzer.py --recorded --alloc-bench 1000000 --runs 1 --no-write

With --views DUMP HEAPTRACK_FILE it times every view and the leak report of a memdump recording
against heaptrack_print on heaptrack's recording of the same run.

    scripts/bench-analyzer.py --views big.memdump ht3.zst --runs 3
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import benchrecorded
from benchlib import machine, write_section

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "analyzer"))
from memdump_analyzer.dumpformat import FORMAT_LINE, escape, format_args  # noqa: E402

ANALYZER = os.path.join(HERE, "memdump-analyze")
#: how the dumps are written: as the in-process recorder writes them (short malloc and free
#: records), and with `e` records only (the breakpoint recorder)
FORMS = ("in-process", "breakpoints")

PROGRAM = "/opt/bench/bin/server"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/lib/x86_64-linux-gnu/libstdc++.so.6"


#: what is timed: the leak report, and three views: `peak` (the part of the views' pass every view
#: needs), `lifetimes` (the view that does the most per event) and `timeline` (the series, with
#: the fragmentation samples)
COMMANDS = {
    "leak report": ["--format", "json"],
    "peak": ["peak", "--format", "json"],
    "lifetimes": ["lifetimes", "--format", "json"],
    "timeline": ["timeline", "--format", "json"],
}


@dataclass
class Run:
    seconds: float
    cpu_seconds: float
    max_rss_kib: int


@dataclass
class Result:
    events: int
    form: str
    dump_bytes: int
    #: command -> (median wall seconds, median CPU seconds, peak RSS KiB)
    timings: dict[str, tuple[float, float, int]]


class _Writer:
    """Writes a plausible dump: definitions are written just before their first use.

    Unlike the recorder's DumpWriter it writes a prebuilt stack tree, a node at a time; the
    format's version line, escaping and ARGS are dumpformat's."""

    def __init__(self, f, seed: int, short: bool) -> None:  # type: ignore[no-untyped-def]
        self.f = f
        self.short = short
        self.short_tid = 0
        self.rng = random.Random(seed)
        self.out: list[bytes] = []
        self.strings: dict[str, int] = {}
        self.frames_written: set[int] = set()
        self.nodes_written: set[int] = set()
        self.seq = 0
        # frames: (pc, module, offset, function, file, line)
        self.frames: list[tuple[int, str, int, str, str | None, int]] = []
        # frame id -> functions its code was inlined into, innermost first (`fi` records)
        self.inlined: dict[int, list[tuple[str, str, int]]] = {}
        self.node_parent: list[int] = [0]
        self.node_frame: list[int] = [0]
        self._make_frames()
        self._make_stacks()

    def _make_frames(self) -> None:
        base = 0x555555554000
        for i in range(400):
            off = 0x1000 + i * 0x40
            self.frames.append(
                (
                    base + off,
                    PROGRAM,
                    off,
                    f"module{i % 37}::function_{i}",
                    f"/src/m{i % 37}.cc",
                    10 + i,
                )
            )
            if i % 5 == 0:  # one program frame in five is inlined code, one or two levels deep
                self.inlined[len(self.frames)] = [
                    (f"module{i % 37}::caller_{i}_{level}", f"/src/m{i % 37}.cc", 200 + i + level)
                    for level in range(1 + i % 2)
                ]
        libc_base = 0x7FFFF7DC9000
        for name, off in (
            ("__libc_start_call_main", 0x2718A),
            ("__libc_start_main_impl", 0x27245),
            ("start_thread", 0x89134),
            ("clone3", 0x1097DC),
            ("tcache_thread_shutdown", 0x9F2C1),
        ):
            self.frames.append((libc_base + off, LIBC, off, name, None, 0))
        self.frames.append(
            (0x7FFFF7E9C1A2, LIBSTDCXX, 0xB21A2, "operator new(unsigned long)", None, 0)
        )
        self.frames.append((base + 0x1010, PROGRAM, 0x1010, "main", "/src/main.cc", 42))

    def _node(self, parent: int, frame: int) -> int:
        self.node_parent.append(parent)
        self.node_frame.append(frame)
        return len(self.node_parent) - 1

    def _make_stacks(self) -> None:
        rng = self.rng
        n_frames = len(self.frames)
        libc_start, thread_start, tcache = n_frames - 7 + 1, n_frames - 7 + 3, n_frames - 7 + 5
        new_frame, main_frame = n_frames - 7 + 6, n_frames - 7 + 7
        root_main = self._node(self._node(0, libc_start), main_frame)
        root_thread = self._node(0, thread_start)
        self.tcache_node = self._node(root_thread, tcache)
        self.alloc_nodes: list[int] = []
        for _ in range(2000):
            node = root_main if rng.random() < 0.7 else root_thread
            for _ in range(rng.randint(2, 18)):
                node = self._node(node, rng.randint(1, 400))
            if rng.random() < 0.3:
                node = self._node(node, new_frame)
            self.alloc_nodes.append(node)
        self.free_nodes = [self._node(self.alloc_nodes[i], rng.randint(1, 400)) for i in range(300)]

    def string(self, text: str | None) -> int:
        if text is None:
            return 0
        ident = self.strings.get(text)
        if ident is None:
            ident = len(self.strings) + 1
            self.strings[text] = ident
            self.out.append(b"s %d %s\n" % (ident, escape(text).encode()))
        return ident

    def define(self, node: int) -> None:
        if node == 0 or node in self.nodes_written:
            return
        self.define(self.node_parent[node])
        frame = self.node_frame[node]
        if frame not in self.frames_written:
            pc, module, off, function, file, line = self.frames[frame - 1]
            m, fn, fi = self.string(module), self.string(function), self.string(file)
            self.out.append(b"f %d 0x%x %d 0x%x %d %d %d\n" % (frame, pc, m, off, fn, fi, line))
            for function, file, line in self.inlined.get(frame, ()):
                fn, fi = self.string(function), self.string(file)
                self.out.append(b"fi %d %d %d %d\n" % (frame, fn, fi, line))
            self.frames_written.add(frame)
        self.out.append(b"n %d %d %d\n" % (node, self.node_parent[node], frame))
        self.nodes_written.add(node)

    def flush(self) -> None:
        self.f.write(b"".join(self.out))
        self.out.clear()

    def event(
        self, tid: int, op: str, node: int, result: int | None, args: tuple[int, ...]
    ) -> None:
        """One `e` record, or a short one; RESULT None is free's `-`."""
        self.define(node)
        self.seq += 1
        res = b"-" if result is None else b"%#x" % result
        if self.short and (op == "malloc" or op == "free"):
            if tid != self.short_tid:
                self.out.append(b"t %d\n" % tid)
                self.short_tid = tid
            if op == "malloc":
                self.out.append(b"+ %d %s %d\n" % (node, res, args[0]))
            else:
                self.out.append(b"- %d %#x\n" % (node, args[0]))
        else:
            self.out.append(b"e %d %d %s %d %s %s\n" % (
                self.seq, tid, op.encode(), node, res, " ".join(format_args(op, args)).encode()))
        if len(self.out) >= 4096:
            self.flush()


def write_dump(path: str, n_events: int, seed: int = 1, short: bool = True) -> None:
    with open(path, "wb") as f:
        w = _Writer(f, seed, short)
        rng = w.rng
        f.write(
            FORMAT_LINE.encode() + b"i program %s\ni pid 31337\ni arch x86_64\ni depth 32\n"
            b"i attached 0\ni start 2026-11-21T19:40:00Z\ni gdb 13.1\n" % PROGRAM.encode()
        )
        tids = [31337, 31338, 31339, 31340]
        free_addrs: list[int] = []
        next_addr = 0x5555555A0000
        live: list[tuple[int, int]] = []  # (addr, tid)
        alloc_nodes, free_nodes = w.alloc_nodes, w.free_nodes
        target_live = 20000
        while w.seq < n_events - 20:
            r = rng.random()
            tid = tids[rng.randrange(4)]
            if live and (len(live) > target_live or r < 0.47):
                i = rng.randrange(len(live))
                addr, _ = live[i]
                live[i] = live[-1]
                live.pop()
                free_addrs.append(addr)
                w.event(tid, "free", rng.choice(free_nodes), None, (addr,))
                continue
            if free_addrs:
                addr = free_addrs.pop()
            else:
                addr = next_addr
                next_addr += 0x40
            node = alloc_nodes[int(rng.paretovariate(1.2)) % len(alloc_nodes)]
            size = rng.choice((8, 16, 24, 32, 48, 64, 100, 128, 256, 1024, 4096))
            if r < 0.93:
                w.event(tid, "malloc", node, addr, (size,))
            elif r < 0.95:
                w.event(tid, "calloc", node, addr, (size // 8 or 1, 8))
            elif r < 0.99 and live:
                i = rng.randrange(len(live))
                old, _ = live[i]
                live[i] = live[-1]
                live.pop()
                free_addrs.append(old)
                w.event(tid, "realloc", node, addr, (old, size * 2))
            else:
                w.event(tid, "posix_memalign", node, addr, (64, size, 0))
            live.append((addr, tid))
        # a thread exits: glibc frees its tcache chunks again, and the tcache itself
        for addr in free_addrs[-8:]:
            w.event(31338, "free", w.tcache_node, None, (addr,))
        w.event(31338, "free", w.tcache_node, None, (next_addr + 0x10000,))
        while w.seq < n_events - 1:
            w.event(31337, "malloc", alloc_nodes[0], next_addr, (32,))
            next_addr += 0x40
        w.seq += 1
        w.out.append(b"end %d exit 0\n" % w.seq)
        w.flush()


def _analyser_python() -> str:
    """The version of the Python that scripts/memdump-analyze runs (the system's)."""
    return subprocess.run(["/usr/bin/python3", "-c", "import platform; "
                           "print(platform.python_version())"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _done_with(tmp: str, keep: bool) -> None:
    """Remove the temporary directory, or say where it is kept (--keep)."""
    if keep:
        sys.stderr.write(f"bench-analyzer: kept {tmp}\n")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def run_once(dump: str, report: str, what: str = "leak report") -> Run:
    cmd = [ANALYZER, *COMMANDS[what], "-o", report, dump]
    # As installed or after a checkout's first run: with the modules' bytecode cached.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"bench-analyzer: {' '.join(cmd)} exited with {proc.returncode}")
    return Run(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "events",
        nargs="*",
        type=int,
        default=[1_000_000],
        help="numbers of events of the dumps (1000000)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per dump; the median is shown")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    parser.add_argument("--forms", default=",".join(FORMS),
                        help=f"the dump forms to measure, comma-separated ({','.join(FORMS)})")
    parser.add_argument("--recorded", action="store_true",
                        help="memdump against heaptrack on recordings of real programs")
    parser.add_argument("--alloc-bench", default="1000000,20000000,100000000",
                        help="with --recorded: alloc_bench's numbers of events, comma-separated")
    parser.add_argument("--build-dir", default=os.path.join(os.path.dirname(HERE), "build"),
                        help="with --recorded: the build directory (alloc_bench)")
    parser.add_argument("--views", nargs=2, metavar=("DUMP", "HEAPTRACK_FILE"),
                        help="every view of DUMP against heaptrack_print HEAPTRACK_FILE")
    parser.add_argument("--exports", nargs=2, metavar=("DUMP", "HEAPTRACK_FILE"),
                        help="every export of DUMP against heaptrack_print -F and -M")
    args = parser.parse_args()
    if args.recorded:
        return recorded(args)
    if args.views:
        return views(args)
    if args.exports:
        return exports(args)
    forms = [form for form in args.forms.split(",") if form]
    if not forms or any(form not in FORMS for form in forms):
        parser.error(f"--forms: one or more of {', '.join(FORMS)}")
    tmp = tempfile.mkdtemp(prefix="memdump-bench-")
    results = []
    load_before = os.getloadavg()[0]
    try:
        report = os.path.join(tmp, "report.json")
        warm = os.path.join(tmp, "warm-up.memdump")
        write_dump(warm, 10_000)
        for what in COMMANDS:  # warm-up: the modules' bytecode cached, as after a first run
            run_once(warm, report, what)
        for n, form in ((n, form) for n in args.events for form in forms):
            dump = os.path.join(tmp, f"bench-{n}-{form}.memdump")
            sys.stderr.write(f"bench-analyzer: writing {n:,} events to {dump}\n")
            write_dump(dump, n, short=form == "in-process")
            runs: dict[str, list[Run]] = {what: [] for what in COMMANDS}
            for _ in range(args.runs):  # interleaved: the shared machine's drift weighs on both
                for what in COMMANDS:
                    runs[what].append(run_once(dump, report, what))
            timings = {what: (statistics.median(r.seconds for r in done),
                              statistics.median(r.cpu_seconds for r in done),
                              max(r.max_rss_kib for r in done))
                       for what, done in runs.items()}
            size = os.path.getsize(dump)
            os.unlink(dump)
            results.append(Result(n, form, size, timings))
    finally:
        _done_with(tmp, args.keep)
    lines = [
        f"memdump-analyze on {machine()}, Python {_analyser_python()}, median of "
        f"{args.runs} runs of the whole command (start-up with cached bytecode, analysis, JSON "
        "output), the commands interleaved; goal: 1,000,000 events/s, for each. Load average "
        f"(1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
        f"({os.cpu_count()} cores, shared with other jobs: the CPU seconds are the steadier "
        "figure).",
        "",
        "| events | written as | dump MiB | "
        + " | ".join(f"{what} s | CPU s | events/s | peak RSS MiB" for what in COMMANDS) + " |",
        "| ---: | --- | ---: |" + " ---: | ---: | ---: | ---: |" * len(COMMANDS),
    ]
    for r in results:
        row = f"| {r.events:,} | {r.form} | {r.dump_bytes / 2**20:,.1f} "
        for what in COMMANDS:
            seconds, cpu, rss = r.timings[what]
            row += f"| {seconds:.2f} | {cpu:.2f} | {r.events / seconds:,.0f} | {rss / 1024:,.1f} "
        lines.append(row + "|")
    sizes = " ".join(str(n) for n in args.events)
    lines += ["", "Reproduce: `python3 scripts/bench-analyzer.py "
              f"--forms {','.join(forms)} --runs {args.runs} {sizes}`"]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        write_section("bench-analyzer", table)
    return 0


def recorded(args: argparse.Namespace) -> int:
    """--recorded: memdump against heaptrack on the same runs of real programs."""
    try:
        sizes = [int(n) for n in args.alloc_bench.split(",") if n]
    except ValueError:
        sys.exit(f"bench-analyzer: --alloc-bench: numbers of events, not {args.alloc_bench!r}")
    for tool in ("gdb", "heaptrack", "heaptrack_print"):
        if shutil.which(tool) is None:
            sys.exit(f"bench-analyzer: --recorded needs {tool} (scripts/setup.sh --bench)")
    tmp = tempfile.mkdtemp(prefix="memdump-bench-")
    load_before = os.getloadavg()[0]
    try:
        work = benchrecorded.Path(tmp)
        loads = benchrecorded.workloads(work, benchrecorded.Path(args.build_dir), sizes)
        for load in loads:
            sys.stderr.write(f"bench-analyzer: {load.name}\n")
            benchrecorded.measure(load, work, args.runs)
    except benchrecorded.BenchError as e:
        sys.exit(f"bench-analyzer: {e}")
    finally:
        _done_with(tmp, args.keep)
    lines = [
        f"memdump against heaptrack on {machine()}, Python {_analyser_python()}: each program "
        "recorded once by each tool, then the analyses timed, median of "
        f"{args.runs} interleaved runs (CPU: user + system). Load average (1 min) "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after.",
        "",
        *benchrecorded.table(loads),
        "",
        "Reproduce: `python3 scripts/bench-analyzer.py --recorded "
        f"--alloc-bench {args.alloc_bench} --runs {args.runs}`",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section("bench-analyzer-recorded", text)
    return 0


def views(args: argparse.Namespace) -> int:
    """--views: every view of a recording against heaptrack_print on the same run's."""
    return _against_heaptrack(args, "views", "Every view", "text output")


def exports(args: argparse.Namespace) -> int:
    """--exports: every export of a recording against heaptrack_print -F and -M on the same
    run's."""
    return _against_heaptrack(args, "exports", "Every export", "`-o FILE` in a temporary directory")


def _against_heaptrack(args: argparse.Namespace, what: str, title: str, output: str) -> int:
    dump, zst = (benchrecorded.Path(p) for p in getattr(args, what))
    for path in (dump, zst):
        if not path.is_file():
            sys.exit(f"bench-analyzer: --{what}: {path} is not a file")
    if shutil.which("heaptrack_print") is None:
        sys.exit(f"bench-analyzer: --{what} needs heaptrack_print (scripts/setup.sh --bench)")
    load_before = os.getloadavg()[0]
    tmp = tempfile.mkdtemp(prefix="memdump-bench-")
    try:
        if what == "views":
            rows = benchrecorded.views(dump, zst, args.runs)
        else:
            rows = benchrecorded.exports(dump, zst, args.runs, benchrecorded.Path(tmp))
    except benchrecorded.BenchError as e:
        sys.exit(f"bench-analyzer: {e}")
    finally:
        _done_with(tmp, args.keep)
    text = "\n".join([
        f"{title} of {dump.name} ({dump.stat().st_size / 2**20:,.0f} MiB) against "
        f"heaptrack_print on {zst.name} ({zst.stat().st_size / 2**20:,.2f} MiB), on {machine()}, "
        f"Python {_analyser_python()}: whole commands ({output}), median of {args.runs} "
        f"interleaved runs, CPU user + system. Load average (1 min) {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after.",
        "",
        *rows,
        "",
        f"Reproduce: `python3 scripts/bench-analyzer.py --{what} {' '.join(getattr(args, what))} "
        f"--runs {args.runs}`",
    ])
    print(text)
    if not args.no_write:
        write_section(f"bench-analyzer-{what}", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
