"""bench-analyzer.py --recorded: memdump against heaptrack on the same runs of real programs.

Each workload is recorded once by memdump (`scripts/memdump.sh`, its in-process recorder) and
once by heaptrack; then the analyses of both recordings are timed, interleaved, several times:
memdump's leak report (`memdump-analyze DUMP`, text), each of its views, and `heaptrack_print FILE`
(which prints every one of heaptrack's views at once). The tables give the files' sizes (memdump's
as `memdump.sh` leaves it: compacted, docs/dump-format.md), the recordings' seconds, and each
analysis' median CPU seconds (user + system of the command and its children) with its ratio to
heaptrack_print's, and the peak RSS.

Workloads: `cppcheck --enable=all` on a C file made of three of the recorder's own sources (so the
file is in every checkout; its line count is printed) and `alloc_bench N` (tests/programs) at the
given numbers of events.

`views` times every view and the leak report of one memdump recording against `heaptrack_print` on
heaptrack's recording of the same run, each view's ratio to it in CPU seconds; `exports` each
export against `heaptrack_print -F` and `-M` (its flame graph stacks and massif file) likewise.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEMDUMP_SH = ROOT / "scripts" / "memdump.sh"
ANALYZER = ROOT / "scripts" / "memdump-analyze"
#: the C file cppcheck checks: the recorder's sources, concatenated
CPPCHECK_SOURCES = ("recorder.c", "unwind.c", "intern.c")
#: the views (docs/views.md), each a whole command on the dump
VIEWS = ("peak", "hotspots", "temporary", "lifetimes", "timeline", "sizes")
#: the report's views by tag, phase and growth, and the heap map at the peak (two passes)
TAG_VIEWS = (("--by-tag",), ("--phases",), ("--growth",), ("--heap-map", "--at", "peak"))
#: the exports (docs/exports.md), the SARIF report and heaptrack's data file, each written to a
#: file
EXPORTS = ("pprof", "collapsed", "massif", "html", "sarif", "heaptrack")


class BenchError(Exception):
    """A workload could not be recorded or analysed."""


@dataclass
class Timed:
    seconds: float
    cpu: float
    rss_kib: int


def timed(argv: list[str], *, env: dict[str, str] | None = None) -> Timed:
    """Run argv (its output discarded), with the CPU seconds and peak RSS of it and its children."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise BenchError(f"{' '.join(argv)} exited with {code}: {' / '.join(tail)}")
    return Timed(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


@dataclass
class Workload:
    name: str
    argv: list[str]
    #: what is measured -> the runs
    runs: dict[str, list[Timed]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)

    def median(self, what: str) -> Timed:
        done = self.runs[what]
        return Timed(statistics.median(t.seconds for t in done),
                     statistics.median(t.cpu for t in done), max(t.rss_kib for t in done))


def workloads(work: Path, build_dir: Path, alloc_bench: list[int]) -> list[Workload]:
    found = []
    if shutil.which("cppcheck"):
        source = work / "checked.c"
        text = "".join((ROOT / "gdb_ext" / "recorder" / name).read_text()
                       for name in CPPCHECK_SOURCES)
        source.write_text(text)
        lines = text.count("\n")
        found.append(Workload(f"cppcheck --enable=all, {lines:,}-line C file",
                              ["cppcheck", "--quiet", "--enable=all", str(source)]))
    program = build_dir / "tests" / "programs" / "alloc_bench"
    if not program.exists():
        raise BenchError(f"{program} is not built (make build)")
    found += [Workload(f"alloc_bench {n:,}", [str(program), str(n)]) for n in alloc_bench]
    return found


def measure(load: Workload, work: Path, runs: int) -> None:
    dump, heap = work / "w.memdump", work / "w"
    for old in work.glob("w*"):
        old.unlink()
    load.runs["record memdump"] = [timed([str(MEMDUMP_SH), "-o", str(dump), "--", *load.argv])]
    load.runs["record heaptrack"] = [timed(["heaptrack", "-o", str(heap), *load.argv])]
    zst = work / "w.zst"
    if not zst.exists():
        raise BenchError(f"heaptrack left no {zst}")
    load.sizes = {"memdump": dump.stat().st_size, "heaptrack": zst.stat().st_size}
    commands = {
        "leak report": [str(ANALYZER), str(dump)],
        **{f"`{view}`": [str(ANALYZER), view, str(dump)] for view in VIEWS},
        "heaptrack_print": ["heaptrack_print", str(zst)],
    }
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for what in commands:
        load.runs[what] = []
    for _ in range(runs):  # interleaved: the shared machine's drift weighs on each alike
        for what, argv in commands.items():
            load.runs[what].append(timed(argv, env=env))
    dump.unlink()


def table(loads: list[Workload]) -> list[str]:
    """The recordings' table (sizes, recording seconds), then the analyses' (CPU seconds of
    each command and its ratio to heaptrack_print's)."""
    lines = [
        "| workload | memdump file MiB | heaptrack file MiB | size ratio | record: memdump s "
        "| CPU s | heaptrack s | CPU s |",
        "| --- |" + " ---: |" * 7,
    ]
    for w in loads:
        rec_md, rec_ht = w.median("record memdump"), w.median("record heaptrack")
        mib = {k: v / 2**20 for k, v in w.sizes.items()}
        lines.append(
            f"| {w.name} | {mib['memdump']:,.2f} | {mib['heaptrack']:,.2f} "
            f"| {mib['memdump'] / mib['heaptrack']:.2f}x | {rec_md.seconds:.2f} "
            f"| {rec_md.cpu:.2f} | {rec_ht.seconds:.2f} | {rec_ht.cpu:.2f} |")
    analyses = ["leak report", *(f"`{view}`" for view in VIEWS)]
    lines += [
        "",
        "| workload | heaptrack_print CPU s | RSS MiB | "
        + " | ".join(f"{what} CPU s (ratio)" for what in analyses)
        + " | memdump's largest RSS MiB |",
        "| --- |" + " ---: |" * (3 + len(analyses)),
    ]
    for w in loads:
        ht = w.median("heaptrack_print")
        cells = []
        for what in analyses:
            t = w.median(what)
            cells.append(f"{t.cpu:.2f} ({t.cpu / ht.cpu:.2f}x)")
        rss = max(w.median(what).rss_kib for what in analyses)
        lines.append(f"| {w.name} | {ht.cpu:.2f} | {ht.rss_kib / 1024:.0f} | "
                     + " | ".join(cells) + f" | {rss / 1024:.0f} |")
    return lines


def views(dump: Path, zst: Path, runs: int) -> list[str]:
    """Every view and the leak report of `dump` against `heaptrack_print zst`, `runs` times
    interleaved: the table's lines (median wall and CPU seconds, peak RSS, CPU ratio)."""
    python = "`peak`, the Python pass (MEMDUMP_NATIVE=0)"
    commands = {"leak report": [str(ANALYZER), str(dump)],
                **{f"`{view}`": [str(ANALYZER), view, str(dump)] for view in VIEWS},
                **{f"`{' '.join(opts)}`": [str(ANALYZER), *opts, str(dump)]
                   for opts in TAG_VIEWS},
                python: [str(ANALYZER), "peak", str(dump)],
                "heaptrack_print": ["heaptrack_print", str(zst)]}
    return _compared(dump.name, commands, runs, "heaptrack_print",
                     {python: {"MEMDUMP_NATIVE": "0"}})


def exports(dump: Path, zst: Path, runs: int, out: Path) -> list[str]:
    """Every export of `dump` (`--format F -o FILE`, files in `out`) and `heaptrack_print`'s
    massif file (`-M`) and flame graph stacks (`-F`) on `zst`, `runs` times interleaved: the
    table's lines, each export's CPU ratio to `heaptrack_print -F`."""
    commands = {f"`--format {fmt}`": [str(ANALYZER), "--format", fmt, "-o",
                                      str(out / f"out.{fmt}"), str(dump)] for fmt in EXPORTS}
    commands |= {f"`heaptrack_print {opt}`": ["heaptrack_print", opt, str(out / f"ht{opt}"),
                                              str(zst)] for opt in ("-M", "-F")}
    return _compared(dump.name, commands, runs, "`heaptrack_print -F`", {})


def _compared(name: str, commands: dict[str, list[str]], runs: int, against: str,
              envs: dict[str, dict[str, str]]) -> list[str]:
    """`commands` run `runs` times interleaved (`envs`: a command's added environment): the
    table's lines (median wall and CPU seconds, peak RSS, CPU ratio to `against`)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    load = Workload(name, [], {what: [] for what in commands})
    for _ in range(runs):
        for what, argv in commands.items():
            load.runs[what].append(timed(argv, env={**env, **envs.get(what, {})}))
    ht = load.median(against)
    lines = ["| command | CPU s | wall s | peak RSS MiB | CPU ratio to "
             f"{against.strip('`')} |", "| --- | ---: | ---: | ---: | ---: |"]
    for what in commands:
        t = load.median(what)
        lines.append(f"| {what} | {t.cpu:.2f} | {t.seconds:.2f} | {t.rss_kib / 1024:.0f} "
                     f"| {t.cpu / ht.cpu:.2f}x |")
    return lines
