"""Helpers of the memdump end-to-end tests: programs, source markers, GDB runs, dumps, reports.

The test programs live in tests/programs; CMake builds them into
$MEMDUMP_BUILD_DIR/tests/programs (default: <repo>/build). An allocating line is marked
`// LEAK: name` (or FREE:, BREAK:, ...); tests turn markers into `file:line` and never hard-code a
line number.
"""

from __future__ import annotations

import functools
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analyzer"))
from memdump_analyzer.dumpfile import DumpReader  # noqa: E402
from memdump_analyzer.dumpformat import unescape  # noqa: E402

SOURCES = REPO / "tests" / "programs"
GDB_EXTENSION = REPO / "gdb_ext" / "memdump.py"
ANALYZER_PATH = REPO / "analyzer"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"

#: the recorder of this test's GDB runs (conftest's memdump_mode sets it): in-process or breakpoints
MODE = "in-process"
#: whether GDB compacts the dumps it writes (`set memdump compact`): the tests read the text
COMPACT = False

GDB_TIMEOUT = 120  # seconds for one GDB run; every program here finishes in a second or two
ANALYZE_TIMEOUT = 60
POLL_DEADLINE = 60  # seconds to wait for something to appear in a dump
POLL_INTERVAL = 0.05


def build_dir() -> Path:
    return Path(os.environ.get("MEMDUMP_BUILD_DIR") or REPO / "build").resolve()


def program(name: str) -> Path:
    """Path of a built test program (or the plugin); fail, not skip, when it is missing."""
    path = build_dir() / "tests" / "programs" / name
    if not path.is_file():
        pytest.fail(
            f"test program {path} is not built: run `cmake -S {REPO} -B {build_dir()} -G Ninja && "
            f"cmake --build {build_dir()}` (or point MEMDUMP_BUILD_DIR at your build directory)",
            pytrace=False,
        )
    return path


# -- markers ---------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Site:
    """A source location as `file:line` with the file's basename."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


_MARKER = re.compile(r"//\s*([A-Z][A-Z-]*):\s*(\S+)")


@functools.cache
def _markers(source: str) -> dict[tuple[str, str], Site]:
    path = SOURCES / source
    found: dict[tuple[str, str], Site] = {}
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for match in _MARKER.finditer(text):
            key = (match.group(1), match.group(2))
            if key in found:
                raise AssertionError(
                    f"{path}:{number}: marker {key} is also on line {found[key].line}"
                )
            found[key] = Site(path.name, number)
    return found


def marker(source: str, name: str, kind: str = "LEAK") -> Site:
    """The line of `// KIND: name` in tests/programs/SOURCE."""
    try:
        return _markers(source)[(kind, name)]
    except KeyError:
        raise AssertionError(f"no marker '// {kind}: {name}' in {SOURCES / source}") from None


# -- GDB -------------------------------------------------------------------------------------------


@dataclass
class GdbRun:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    dump: Path | None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def describe(self) -> str:
        return (f"$ {' '.join(self.argv)}\nexit status {self.returncode}\n--- stdout\n{self.stdout}"
                f"--- stderr\n{self.stderr}")

    def memdump_lines(self) -> list[str]:
        return [line for line in self.output.splitlines() if line.startswith("memdump:")]


def gdb_argv(
    commands: Sequence[str],
    target: Sequence[str | Path] = (),
    attach: int | None = None,
) -> list[str]:
    """`gdb -nx -batch` sourcing the extension, then COMMANDS (each an -ex), on TARGET or a pid."""
    argv = ["gdb", "-nx", "-batch", "-ex", f"source {GDB_EXTENSION}"]
    if not COMPACT:  # the tests read the text records (test_memdump_compact.py: compact dumps)
        argv += ["-ex", "set memdump compact off"]
    if MODE == "breakpoints":
        argv += ["-ex", "set memdump recorder breakpoints"]
    for command in commands:
        argv += ["-ex", command]
    if attach is not None:
        argv += ["-p", str(attach)]
    elif target:
        argv += ["--args", *(str(t) for t in target)]
    return argv


def run_gdb(argv: list[str], dump: Path | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> GdbRun:
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", timeout=GDB_TIMEOUT, env=env, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"GDB did not finish within {GDB_TIMEOUT} s: {' '.join(argv)}\n"
                    f"stdout: {exc.stdout!r}\nstderr: {exc.stderr!r}")
    run = GdbRun(argv, proc.returncode, proc.stdout, proc.stderr, dump)
    assert "Traceback" not in run.output, run.describe()
    assert "internal error" not in run.output, run.describe()
    return run


def record(
    name: str,
    *args: str | Path,
    dump: Path,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
    run: str | None = "run",
) -> GdbRun:
    """Record test program NAME: BEFORE commands, `memdump -o DUMP`, `run`, AFTER commands."""
    commands = [*before, f"memdump -o {dump}"]
    if run:
        commands.append(run)
    commands += after
    result = run_gdb(gdb_argv(commands, [program(name), *args]), dump)
    assert dump.is_file(), f"no dump written\n{result.describe()}"
    return result


# -- the dump itself -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DumpFrame:
    """One frame of a stack as the dump's `f` and `fi` records give it (file: basename)."""

    function: str | None
    file: str | None
    line: int
    inlined: bool = False  # inlined into the next frame (same program counter)


@dataclass
class DumpFacts:
    """What a test checks directly in a dump: header, events, process records, end, stacks."""

    version: str = ""  # of the first line, `MEMDUMP <version>`
    info: dict[str, str] = field(default_factory=dict)
    events: list[list[str]] = field(default_factory=list)  # `e` records split on spaces
    process: list[tuple[str, str]] = field(default_factory=list)  # (what, detail)
    end: tuple[str, str] | None = None  # (reason, detail)
    torn: bool = False  # last line without its newline
    strings: dict[int, str] = field(default_factory=dict)
    #: frame id -> its frames: the `f` record's, then one per `fi` record
    frames: dict[int, list[DumpFrame]] = field(default_factory=dict)
    nodes: dict[int, tuple[int, int]] = field(default_factory=dict)  # id -> (parent, frame)

    def sizes(self, op: str = "malloc") -> list[int]:
        return [int(e[-1]) for e in self.events if e[3] == op]

    def stack(self, node: int) -> list[DumpFrame]:
        """The frames of stack node NODE, innermost first, inlined frames expanded."""
        out: list[DumpFrame] = []
        while node:
            node, frame = self.nodes[node]
            out += self.frames[frame]
        return out


def read_dump(path: Path) -> DumpFacts:
    """The facts of a dump as the analyser's reader reads it: a dump it rejects fails the test."""
    facts = DumpFacts()
    with DumpReader(str(path)) as reader:
        for fl in reader.records():
            if fl[0] == b"e":
                facts.events.append([tok.decode("utf-8", "surrogateescape") for tok in fl])
            elif fl[0] == b"p":
                facts.process.append((fl[2].decode(), unescape(fl[4])))
            else:
                facts.end = (fl[2].decode(), unescape(fl[4]))
    facts.version = ".".join(map(str, reader.version))
    facts.torn = reader.truncated
    facts.info = reader.info
    facts.strings = reader.strings
    facts.nodes = {n: link for n, link in reader.nodes.items() if n}
    for ident, frame in reader.frames.items():
        facts.frames[ident] = [
            DumpFrame(f.function, os.path.basename(f.file) if f.file else None, f.line or 0,
                      f.inlined)
            for f in (frame, *reader.inlined_into.get(ident, ()))
        ]
    return facts


def wait_for_dump(path: Path, ready: Callable[[str], bool], what: str,
                  alive: Callable[[], bool] = lambda: True) -> str:
    """Poll PATH until its content satisfies READY (bounded by POLL_DEADLINE)."""
    deadline = time.monotonic() + POLL_DEADLINE
    text = ""
    while time.monotonic() < deadline:
        if path.exists():
            text = path.read_text(encoding="utf-8", errors="replace")
            if ready(text):
                return text
        if not alive():
            break
        time.sleep(POLL_INTERVAL)
    pytest.fail(f"{what} did not appear in {path} within {POLL_DEADLINE} s; dump so far:\n{text}")


def kill_pid(pid: int) -> None:
    """SIGKILL a process that may already be gone (not our child: nothing to reap)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# -- the analyser ----------------------------------------------------------------------------------


def analyzer_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ANALYZER_PATH), env.get("PYTHONPATH", "")) if p
    )
    env.pop("NO_COLOR", None)
    return env


def analyze_raw(dump: Path, *options: str) -> subprocess.CompletedProcess[str]:
    argv = [PYTHON, "-m", "memdump_analyzer", *options, str(dump)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=ANALYZE_TIMEOUT,
                          env=analyzer_env(), stdin=subprocess.DEVNULL)


def analyze(dump: Path, *options: str) -> Report:
    """`memdump-analyze --format json --show-runtime --show-leak-kinds all DUMP`, parsed."""
    proc = analyze_raw(dump, "--format", "json", "--show-runtime", "--show-leak-kinds", "all",
                       *options)
    assert proc.returncode == 0, (
        f"memdump-analyze failed on {dump} ({proc.returncode}):\n{proc.stderr}\n--- dump:\n"
        + dump.read_text(errors="replace")
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return Report(json.loads(proc.stdout), proc.stderr)


def frame_site(frame: dict[str, Any]) -> Site | None:
    if not frame.get("file") or not frame.get("line"):
        return None
    return Site(os.path.basename(frame["file"]), int(frame["line"]))


@dataclass
class Report:
    """The analyser's JSON report and helpers to compare it with marker sites."""

    data: dict[str, Any]
    stderr: str = ""

    @property
    def summary(self) -> dict[str, Any]:
        return self.data["summary"]

    def groups(self, kind: str = "leak") -> list[dict[str, Any]]:
        return [g for g in self.data["leaks"] if g["kind"] == kind]

    @property
    def leaked(self) -> tuple[int, int]:
        leaked = self.summary["leaked"]
        return leaked["bytes"], leaked["blocks"]

    @property
    def runtime(self) -> tuple[int, int]:
        runtime = self.summary["runtime"]
        return runtime["bytes"], runtime["blocks"]

    def leak_sites(self, kind: str = "leak") -> dict[Site | None, tuple[int, int]]:
        """{allocation site (stack[0]): (bytes, blocks)} of the groups of KIND, one per site."""
        sites: dict[Site | None, tuple[int, int]] = {}
        for group in self.groups(kind):
            stack = group["stack"]
            site = frame_site(stack[0]) if stack else None
            assert site not in sites, f"two {kind} groups at {site}:\n{self.dumps()}"
            sites[site] = (group["bytes"], group["blocks"])
        return sites

    def group_at(self, site: Site, kind: str = "leak") -> dict[str, Any]:
        found = [g for g in self.groups(kind) if g["stack"] and frame_site(g["stack"][0]) == site]
        assert len(found) == 1, f"{len(found)} {kind} groups at {site}:\n{self.dumps()}"
        return found[0]

    def errors(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.data["errors"] if kind is None or e["kind"] == kind]

    @property
    def complete(self) -> bool:
        return bool(self.data["complete"])

    @property
    def end(self) -> dict[str, Any] | None:
        return self.data.get("end")

    def dumps(self) -> str:
        return json.dumps(self.data, indent=1)[:20000]


def expect_leaks(report: Report, expected: dict[Site, tuple[int, int]]) -> None:
    """The report's leak groups are exactly EXPECTED, and the summary adds them up."""
    assert report.leak_sites() == expected, report.dumps()
    total_bytes = sum(b for b, _ in expected.values())
    total_blocks = sum(n for _, n in expected.values())
    assert report.leaked == (total_bytes, total_blocks), report.dumps()


def functions(group: dict[str, Any]) -> list[str | None]:
    return [frame.get("function") for frame in group["stack"]]


def base_name(function: str | None) -> str:
    """`make_widget()` or `make_widget(int)` -> `make_widget` (GDB names C++ functions so)."""
    return (function or "").split("(", 1)[0]


def all_paths(items: Iterable[str]) -> list[str]:
    return [os.path.basename(i) for i in items]


def read_line(proc: subprocess.Popen[bytes], timeout: float, stderr: bool = False) -> str:
    """One line of PROC's stdout (its stderr with STDERR), read a byte at a time (unbuffered:
    nothing is read ahead, so later lines stay for the next call or communicate()), within
    TIMEOUT seconds."""
    stream = proc.stderr if stderr else proc.stdout
    assert stream is not None
    fd = stream.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            assert left > 0 and selector.select(left), f"no whole line within {timeout} s: {data!r}"
            byte = os.read(fd, 1)
            assert byte, f"end of output after {data!r}"
            data += byte
    return data.decode().rstrip("\n")


def wait_for_output(stream: subprocess.Popen[str], what: tuple[str, ...]) -> list[str]:
    """GDB's output lines up to the first holding one of WHAT (it started recording)."""
    assert stream.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + POLL_DEADLINE
    while time.monotonic() < deadline:
        line = stream.stdout.readline()
        if not line:
            pytest.fail("GDB ended before recording:\n" + "".join(lines))
        lines.append(line)
        if any(w in line for w in what):
            return lines
    pytest.fail("GDB did not start recording:\n" + "".join(lines))


class Commanded:
    """A test program to attach to (alloc_on_command, alloc_threads, stop_kinds): it says "ready",
    then answers each command line on its stdin with one line."""

    def __init__(self, name: str) -> None:
        self.proc = subprocess.Popen([str(program(name))], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        assert read_line(self.proc, POLL_DEADLINE) == "ready"

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def ask(self, line: str) -> str:
        self.send(line)
        return read_line(self.proc, POLL_DEADLINE)

    def traced(self) -> bool:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return "\nTracerPid:\t0\n" not in status

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def expect_stop_kinds(dump: Path) -> None:
    """DUMP recorded tests/programs/stop_kinds's `keep 40`, `keep 24`, `lose 48` and ended before
    the program (memdump stop, detach): its blocks have their kinds from a scan at that end, and
    --fail-on-leak counts the lost one only, not the reachable ones (without a scan it counted
    every live block)."""
    keep, lose = marker("stop_kinds.c", "keep"), marker("stop_kinds.c", "lose")
    report = analyze(dump)
    groups = {(Path(g["stack"][0]["file"]).name, g["stack"][0]["line"], g["leak_kind"]):
              (g["bytes"], g["blocks"]) for g in report.groups()}
    assert groups == {(keep.file, keep.line, "reachable"): (64, 2),
                      (lose.file, lose.line, "definite"): (48, 1)}, report.dumps()
    kinds = {k: (v["bytes"], v["blocks"]) for k, v in report.summary["leak_kinds"].items()}
    assert kinds == {"definite": (48, 1), "indirect": (0, 0), "possible": (0, 0),
                     "reachable": (64, 2), "unknown": (0, 0)}, report.dumps()
    lost = analyze_raw(dump, "--fail-on-leak")
    assert lost.returncode == 1, lost.stderr
    reachable_only = analyze_raw(dump, "--fail-on-leak", "--errors-for-leak-kinds",
                                 "indirect,possible")
    assert (reachable_only.returncode, reachable_only.stderr) == (0, "")
