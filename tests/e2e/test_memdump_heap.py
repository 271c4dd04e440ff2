"""`memdump leaks` without a recording and `memdump heap` (gdb_ext/dbgkit/memdump/heapcmd.py) in
GDB: on heapwalk_types stopped by itself, attached late (`gdb -p PID`) and from its core (`gdb
PROGRAM CORE`): the leaks by type in the report's voice, bytes and blocks exact, as the heap
walk's driver gives them; the heap by type, size class and arena; the process left as it was
(still stopped, then it runs on to its end with its output unchanged); the bad cases one line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import GDB_TIMEOUT, REPO, Commanded, gdb_argv, program, run_gdb
from test_heapwalk_types import GROUPS, TEXT, Stopped

pytestmark = [pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed"),
              pytest.mark.one_recorder]  # nothing is recorded

TITLE = ("memdump leaks: the heap walked (nothing recorded: blocks of unknown origin, grouped by "
         "type)")
HEAD = "heap of the {}: 29 blocks in use, 77,944 bytes; glibc's layout from its debug symbols"

def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(") ", 1)[1][0]

@pytest.fixture(scope="module")
def stopped():
    prog = Stopped("heapwalk_types")
    yield prog
    prog.end()  # continued, it ends with status 0 and prints nothing more

@pytest.fixture(scope="module")
def core(stopped: Stopped, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("core") / "types.core"
    subprocess.run(["gdb", "-nx", "-batch", "-p", str(stopped.proc.pid), "-ex",
                    f"generate-core-file {path}"], capture_output=True, timeout=120, check=True)
    return path

def _gdb(commands: list[str], stopped: Stopped | None = None, core: Path | None = None,
         target: list[str] | None = None):
    argv = gdb_argv(commands, attach=stopped.proc.pid if stopped is not None else None)
    if core is not None:
        argv += [str(program("heapwalk_types")), str(core)]
    elif target is not None:
        argv += target
    run = run_gdb(argv)
    if stopped is not None:  # GDB detached: the process is as it was, stopped at its checkpoint
        assert _state(stopped.proc.pid) == "T"
    return run

def _json(stdout: str) -> dict:
    """The JSON document GDB printed (then its `detached` line)."""
    return json.JSONDecoder().raw_decode(stdout, stdout.index("{"))[0]


def _report(stdout: str) -> str:
    """memdump leaks' report: from its title to its totals."""
    start = stdout.index("memdump leaks: ")
    end = stdout.index("\n", stdout.index("totals: ", start)) + 1
    return stdout[start:end]

@pytest.mark.parametrize("where", ["process", "core"])
def test_leaks_without_a_recording(stopped: Stopped, core: Path, where: str) -> None:
    run = _gdb(["memdump leaks"], **({"stopped": stopped} if where == "process"
                                     else {"core": core}))
    assert run.returncode == 0, run.describe()
    assert _report(run.stdout) == f"{TITLE}\n{HEAD.format(where)}\n{TEXT}"

def test_leaks_json_and_kinds(stopped: Stopped) -> None:
    run = _gdb(["memdump leaks --json --show-leak-kinds definite,indirect"], stopped=stopped)
    doc = _json(run.stdout)
    assert (doc["format"], doc["version"], doc["source"], doc["origin"]) == \
        ("memdump-heap-leaks", "1.0", "process", "unknown")
    assert (doc["blocks"], doc["bytes"], doc["reachable"], doc["problems"]) == (29, 77944, [], [])
    assert [[g["number"], g["kind"], g["type"], g["how"], g["bytes"], g["blocks"]]
            for g in doc["leaks"]] == [
        [1, "definite", "Connection", "vtable", 280, 5],
        [2, "definite", "Session", "vtable", 72, 3],
        [3, "indirect", "graph::Node", "vtable", 48, 2],
        [4, "definite", "graph::Node", "vtable", 24, 1]]
    assert doc["totals"] == {"definite": [376, 9], "indirect": [48, 2], "possible": [0, 0],
                             "reachable": [77520, 18]}

def test_leaks_top_and_kinds_in_text(stopped: Stopped, tmp_path: Path) -> None:
    out = tmp_path / "leaks.txt"
    run = _gdb([f"memdump leaks --top 2 --show-leak-kinds definite -o {out}"], stopped=stopped)
    assert "memdump: 424 bytes in 11 blocks lost; report in " + str(out) in run.stdout
    lines = out.read_text().splitlines()
    assert lines[2:4] == ["LEAK 1: 280 bytes in 5 blocks of `Connection` (vtable), definitely lost",
                          "LEAK 2: 72 bytes in 3 blocks of `Session` (vtable), definitely lost"]
    assert lines[4].startswith("totals: definitely lost 376 bytes in 9 blocks")

def _by_type() -> list[list]:
    """GROUPS summed over the kinds, largest first, as memdump heap lists them."""
    sums: dict[tuple[str, str], list[int]] = {}
    for groups in GROUPS.values():
        for name, how, nbytes, blocks in groups:
            entry = sums.setdefault((name, how), [0, 0])
            entry[0] += nbytes
            entry[1] += blocks
    return sorted(([n, h, b, c] for (n, h), (b, c) in sums.items()),
                  key=lambda g: (-g[2], -g[3], g[0]))

@pytest.mark.parametrize("where", ["process", "core"])
def test_heap_by_type_size_and_arena(stopped: Stopped, core: Path, where: str) -> None:
    run = _gdb(["memdump heap --json"], **({"stopped": stopped} if where == "process"
                                          else {"core": core}))
    doc = _json(run.stdout)
    assert (doc["format"], doc["source"], doc["blocks"], doc["bytes"], doc["problems"]) == \
        ("memdump-heap", where, 29, 77944, [])
    assert doc["types"] == _by_type()
    assert sum(b for *_, b, _ in doc["sizes"]) == 77944
    assert sum(n for *_, n in doc["sizes"]) == 29
    assert all(lo <= hi for lo, hi, _, _ in doc["sizes"])
    [arena] = doc["arenas"]  # one thread: the main arena alone
    assert (arena["main"], arena["heaps"], arena["live_blocks"]) == (True, 1, 29 - doc["mmapped"])
    free = arena["free_by_list"]
    assert sum(b for b, _ in free.values()) == arena["free_bytes"]
    assert sum(n for _, n in free.values()) == arena["free_chunks"]
    assert arena["top_bytes"] == free["top"][0]
    assert arena["fragmentation"] == round(
        (arena["free_bytes"] - arena["top_bytes"]) / arena["free_bytes"], 4)

def test_heap_text(stopped: Stopped) -> None:
    run = _gdb(["memdump heap"], stopped=stopped)
    text = run.stdout[run.stdout.index("heap of the process"):]
    lines = text.splitlines()
    assert lines[0] == HEAD.format("process")
    assert lines[1].startswith("arena 0x") and " (main): 1 heap, " in lines[1]
    start = lines.index("by type:") + 1
    assert lines[start:start + 3] == ["  77,016 bytes in 5 blocks of `?` (unknown)",
                                      "  280 bytes in 5 blocks of `Connection` (vtable)",
                                      "  216 bytes in 9 blocks of `Session` (vtable)"]
    assert lines[lines.index("by size (usable bytes):") + 1].startswith("  1-32: ")

def test_bad_cases_are_one_line(tmp_path: Path) -> None:
    """No process and no core; a static program (no glibc C library); another allocator."""
    run = _gdb(["memdump heap"], target=[str(program("heapwalk_types"))])
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        "memdump: no process and no core file: run the program, attach to one (gdb -p PID) or "
        "open a core (gdb PROGRAM CORE)")
    run = _gdb(["break main", "run", "memdump leaks"],
               target=[str(program("leak_malloc_static"))])
    assert run.stderr.strip().splitlines()[-1] == (
        "memdump: no glibc C library (libc.so.6) is mapped: a static program or another C "
        "library; its heap is not walked")
    fake = tmp_path / "libjemalloc.so.2"  # any library by that name: detected by its name
    shutil.copy("/lib/x86_64-linux-gnu/libm.so.6", fake)
    run = _gdb([f"set environment LD_PRELOAD {fake}", "break main", "run", "memdump heap"],
               target=[str(program("heapwalk_types"))])
    assert run.stderr.strip().splitlines()[-1] == (
        f"memdump: {fake} is mapped: another allocator replaces glibc's malloc; its heap is not "
        "walked")
    run = _gdb(["break main", "run", "memdump leaks --older-than 1"],
               target=[str(program("heapwalk_types"))])
    assert run.stderr.strip().splitlines()[-1] == (
        "memdump: leaks --older-than needs a recording (memdump, then run); without one the "
        "heap walk knows no stacks or times")


def _sh(pid: int, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "scripts" / "memdump.sh"), "-p", str(pid), "--heap",
                           *(str(a) for a in args)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=GDB_TIMEOUT)


def test_memdump_sh_heap_leaves_the_process_running(tmp_path: Path) -> None:
    """memdump.sh -p PID --heap on a running program, twice with three blocks of 1,000 bytes
    kept between: the heap on stdout, the leaks on stderr (--report), their JSON in FILE; the
    second walk finds exactly 3,000 bytes in 3 blocks more; the program answers on, untraced, and
    ends as it would have."""
    target = Commanded("alloc_on_command")
    try:
        walks = []
        for n in range(2):
            json_path = tmp_path / f"leaks{n}.json"
            proc = _sh(target.proc.pid, "--report", "--json", json_path)
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.startswith("heap of the process: ")
            assert "\nby type:\n" in proc.stdout and "\nby size (usable bytes):\n" in proc.stdout
            assert proc.stderr.startswith(TITLE + "\nheap of the process: ")
            walks.append(json.loads(json_path.read_text()))
            assert not target.traced()
            for _ in range(3 if n == 0 else 0):
                assert target.ask("leak 1000") == "ok"
        assert (walks[1]["bytes"] - walks[0]["bytes"], walks[1]["blocks"] - walks[0]["blocks"]) \
            == (3000, 3)
        assert target.ask("leak 400") == "ok"
        target.send("exit")
        out, _ = target.proc.communicate(timeout=GDB_TIMEOUT)
        assert (target.proc.returncode, out) == (0, b"")
    finally:
        target.kill()


def test_memdump_sh_heap_bad_use() -> None:
    for args, line in ((["--heap"], "memdump.sh: --heap needs -p PID (the heap of a running "
                                    "process)"),
                       (["--heap", "-p", "1", "--for", "2"], "memdump.sh: --heap records "
                        "nothing: -o, --for, --depth and --breakpoints do not apply")):
        proc = subprocess.run([str(REPO / "scripts" / "memdump.sh"), *args],
                              capture_output=True, text=True, timeout=GDB_TIMEOUT)
        assert (proc.returncode, proc.stderr) == (2, line + "\n")
