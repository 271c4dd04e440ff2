"""Reference test: the Unwinder's return addresses equal GDB's own frames at every malloc/free stop.

Each test runs one GDB (`gdb -nx -batch -x script`) on a test program. The script stops at
*__libc_malloc and *__libc_free, reads registers with ptrace.get_regs(LWP) and memory through
/proc/PID/mem, walks with the Unwinder and records GDB's frames 1..N (`frame.older()`), skipping
inline and tail-call frames, which GDB synthesizes from debug info for the same stack frame.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Programs

GDB_EXT_DIR = Path(__file__).resolve().parent.parent

GDB_TIMEOUT = 300
MAX_STOPS = 400

GDB_SCRIPT = r'''
import json, os, sys
import gdb

cfg = json.loads(os.environ["UNWIND_CHECK_CONFIG"])
sys.path.insert(0, cfg["gdb_ext"])
from dbgkit.core import procfs, procmaps, ptrace, unwind

def ex(cmd):
    return gdb.execute(cmd, to_string=True)

for cmd in ("set pagination off", "set confirm off", "set backtrace past-main on",
            "set debuginfod enabled off", "set startup-with-shell off",
            "handle SIGUSR1 SIGUSR2 SIGALRM nostop noprint pass"):
    try:
        ex(cmd)
    except gdb.error:
        pass
ex("file " + cfg["program"])
ex("tbreak main")
ex("run")
pid = gdb.selected_inferior().pid
modules = procmaps.ModuleMap(pid)
unwinder = unwind.Unwinder(procfs.ProcessMemory(pid).read_some, modules)
libc = next(m for m in modules.modules() if os.path.basename(m.path).startswith("libc.so"))
syms = libc.elf.dynamic_symbols()
records = []


class Stop(gdb.Breakpoint):
    def stop(self):
        if len(records) >= cfg["max_stops"]:
            return False
        lwp = gdb.selected_thread().ptid[1]
        rec = {"func": self.func_name, "lwp": lwp, "main_thread": lwp == pid}
        regs = ptrace.get_regs(lwp)
        if regs is None:
            rec["error"] = "ptrace.get_regs failed"
            records.append(rec)
            return False
        ours, ok = unwinder.backtrace(regs.rip, regs.rsp, regs.rbp, cfg["limit"])
        rec.update(ours=ours, ok=ok, status=unwinder.last_status,
                   heuristic=unwinder.last_heuristic)
        frame = gdb.newest_frame()
        rec["pc0"] = [regs.rip, frame.pc()]
        pcs, names = [], []
        last = frame
        try:
            f = frame.older()
            while f is not None:
                last = f
                if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
                    pcs.append(f.pc())
                    names.append(f.name() or "??")
                f = f.older()
        except gdb.error as exc:
            rec["gdb_error"] = str(exc)
        rec["gdb"] = pcs
        rec["gdb_names"] = names
        rec["gdb_stop"] = gdb.frame_stop_reason_string(last.unwind_stop_reason())
        records.append(rec)
        return False


for name in cfg["functions"]:
    bp = Stop("*0x%x" % (syms[name] + libc.bias), internal=True)
    bp.func_name = name
try:
    ex("continue")
finally:
    with open(cfg["out"], "w") as fh:
        json.dump(records, fh)
'''


RunGdb = Callable[..., list[dict]]


@pytest.fixture
def run_gdb(gdb_path: str, tmp_path: Path) -> RunGdb:
    """run_gdb(program, functions=..., limit=...): run the checking script, return its stops."""

    def run(program: Path, functions: tuple[str, ...] = ("__libc_malloc", "__libc_free"),
            limit: int = 512) -> list[dict]:
        return _run_gdb(gdb_path, program, tmp_path, functions, limit)

    return run


def _run_gdb(gdb_path: str, program: Path, tmp_path: Path, functions: tuple[str, ...],
             limit: int) -> list[dict]:
    """Run the checking script under GDB on program; return one record per breakpoint stop."""
    script = tmp_path / "check.py"
    script.write_text(GDB_SCRIPT)
    out = tmp_path / "stops.json"
    cfg = {"gdb_ext": str(GDB_EXT_DIR), "program": str(program), "out": str(out),
           "functions": list(functions), "max_stops": MAX_STOPS, "limit": limit}
    env = {**os.environ, "UNWIND_CHECK_CONFIG": json.dumps(cfg)}
    env.pop("DEBUGINFOD_URLS", None)
    proc = subprocess.run([gdb_path, "-nx", "-batch", "-x", str(script)],
                          capture_output=True, text=True, timeout=GDB_TIMEOUT, env=env,
                          stdin=subprocess.DEVNULL)
    if not out.exists():
        raise AssertionError(f"GDB wrote no results (rc {proc.returncode}):\n{proc.stdout}\n"
                             f"{proc.stderr}")
    records = json.loads(out.read_text())
    assert records, f"no breakpoint stops recorded:\n{proc.stdout}\n{proc.stderr}"
    return records


def describe(rec: dict) -> str:
    """A readable side-by-side of one stop for assertion messages."""
    lines = [f"{rec['func']} lwp {rec['lwp']}: ok={rec.get('ok')} status={rec.get('status')} "
             f"gdb_stop={rec.get('gdb_stop')!r} {rec.get('gdb_error', '')}"]
    ours, theirs, names = rec.get("ours", []), rec.get("gdb", []), rec.get("gdb_names", [])
    for i in range(max(len(ours), len(theirs))):
        a = f"{ours[i]:#x}" if i < len(ours) else "-"
        b = f"{theirs[i]:#x} {names[i]}" if i < len(theirs) else "-"
        lines.append(f"  {i:3d} {'  ' if a == b.split(' ')[0] else '!='} {a:>18} {b}")
    return "\n".join(lines)


def check_exact(records: list[dict]) -> None:
    """Every stop: same registers as GDB, same return addresses, and a normal end."""
    bad = []
    for rec in records:
        assert "error" not in rec, rec["error"]
        assert rec["pc0"][0] == rec["pc0"][1], "ptrace rip differs from GDB's frame 0 pc"
        if rec["ours"] != rec["gdb"] or not rec["ok"]:
            bad.append(describe(rec))
    assert not bad, f"{len(bad)} of {len(records)} stops differ:\n" + "\n\n".join(bad[:5])


def test_chain_O0(programs: Programs, run_gdb: RunGdb) -> None:
    records = run_gdb(programs.get("chain_O0"))
    check_exact(records)
    depths = [len(r["gdb"]) for r in records]
    assert max(depths) >= 30  # the 25-deep recursion was seen
    # main's outermost frame is _start, whose CFI marks the return address undefined.
    assert all(r["status"] == "outermost" for r in records)


def test_chain_O2_omit_frame_pointer(programs: Programs, run_gdb: RunGdb) -> None:
    records = run_gdb(programs.get("chain_O2"))
    check_exact(records)
    assert max(len(r["gdb"]) for r in records) >= 28
    # The stop in finish(), reached through a noreturn call at the very end of last_call():
    assert any("last_call" in r["gdb_names"] for r in records)
    # The DRAP (realigned) frame went through the expression path.
    assert any("aligned_frame" in r["gdb_names"] for r in records)


def test_chain_limit(programs: Programs, run_gdb: RunGdb) -> None:
    records = run_gdb(programs.get("chain_O2"), functions=("__libc_malloc",), limit=5)
    for rec in records:
        assert rec["ours"] == rec["gdb"][:5], describe(rec)
        assert rec["ok"], describe(rec)
        if len(rec["gdb"]) > 5:
            assert rec["status"] == "limit"


def test_cpp_operator_new_and_vector(programs: Programs, run_gdb: RunGdb) -> None:
    records = run_gdb(programs.get("vector_cpp"))
    check_exact(records)
    names = {n for r in records for n in r["gdb_names"]}
    assert "operator new(unsigned long)" in names or any("operator new" in n for n in names)
    assert any("__cxa_allocate_exception" in n for n in names)


def test_signal_handler(programs: Programs, run_gdb: RunGdb) -> None:
    records = run_gdb(programs.get("signal"))
    in_handler = [r for r in records if "handler" in r["gdb_names"]]
    assert len(in_handler) >= 4  # raise, kill, timer, sigaltstack
    for rec in records:
        if rec["ours"] == rec["gdb"] and rec["ok"]:
            continue
        # Where a signal frame cannot be followed, the walk must say so rather than invent.
        assert not rec["ok"], describe(rec)
        assert rec["gdb"][:len(rec["ours"])] == rec["ours"], describe(rec)
    # This unwinder evaluates glibc's __restore_rt CFI expressions, so all stops match exactly.
    check_exact(records)


def test_second_thread(programs: Programs, run_gdb: RunGdb) -> None:
    records = run_gdb(programs.get("thread"))
    check_exact(records)
    workers = [r for r in records if not r["main_thread"]]
    assert workers, "no stop in the second thread"
    for rec in workers:
        assert rec["status"] == "outermost"  # clone3's child frame: rip undefined
        assert "start_thread" in rec["gdb_names"]


def test_module_without_cfi_uses_flagged_heuristic(programs: Programs, run_gdb: RunGdb) -> None:
    records = run_gdb(programs.get("nocfi"), functions=("__libc_malloc",))
    through = [r for r in records if "nocfi_alloc" in r["gdb_names"]]
    assert through, "no stop through the no-CFI library"
    for rec in through:
        assert rec["heuristic"] and not rec["ok"], describe(rec)
        assert rec["ours"] == rec["gdb"], describe(rec)
