"""Micro benchmark of the Unwinder: µs per frame on a warm row cache for a 20-frame stack.

Run with plain Python (`/usr/bin/python3 gdb_ext/tests/bench_unwind.py`): it compiles
programs/bench.c, then re-runs itself inside `gdb -nx -batch -x`, stops at *__libc_malloc with
the 20-frame stack, and times Unwinder.backtrace() with registers from ptrace and memory from
/proc/PID/mem, exactly as the extension does. Not a test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ITERATIONS = 20000


def run_inside_gdb(gdb: object) -> None:
    """GDB side: stop at malloc from b15, check the walk against GDB, then time it."""
    cfg = json.loads(os.environ["BENCH_UNWIND_CONFIG"])
    sys.path.insert(0, cfg["gdb_ext"])
    from dbgkit.core import procfs, procmaps, ptrace, unwind

    ex = gdb.execute  # type: ignore[attr-defined]
    for cmd in ("set pagination off", "set confirm off", "set backtrace past-main on",
                "set debuginfod enabled off"):
        try:
            ex(cmd, to_string=True)
        except gdb.error:  # type: ignore[attr-defined]
            pass
    ex("file " + cfg["program"], to_string=True)
    ex("break b15", to_string=True)
    ex("run", to_string=True)
    pid = gdb.selected_inferior().pid  # type: ignore[attr-defined]
    modules = procmaps.ModuleMap(pid)
    libc = next(m for m in modules.modules() if os.path.basename(m.path).startswith("libc.so"))
    malloc = libc.elf.dynamic_symbols()["__libc_malloc"] + libc.bias
    ex(f"break *{malloc:#x}", to_string=True)
    ex("continue", to_string=True)
    lwp = gdb.selected_thread().ptid[1]  # type: ignore[attr-defined]
    read = procfs.ProcessMemory(pid).read_some
    uw = unwind.Unwinder(read, modules)

    regs = ptrace.get_regs(lwp)
    t0 = time.perf_counter()
    pcs, ok = uw.backtrace(regs.rip, regs.rsp, regs.rbp, 64)
    cold = time.perf_counter() - t0
    frames = []
    f = gdb.newest_frame().older()  # type: ignore[attr-defined]
    while f is not None:
        frames.append(f.pc())
        f = f.older()
    if pcs != frames or not ok:
        raise RuntimeError(f"walk differs from GDB: {pcs} vs {frames}")

    n = len(pcs)
    t0 = time.perf_counter()
    for _ in range(ITERATIONS):
        uw.backtrace(regs.rip, regs.rsp, regs.rbp, 64)
    warm = (time.perf_counter() - t0) / ITERATIONS
    t0 = time.perf_counter()
    for _ in range(ITERATIONS):
        r = ptrace.get_regs(lwp)
        uw.backtrace(r.rip, r.rsp, r.rbp, 64)
    with_regs = (time.perf_counter() - t0) / ITERATIONS
    t0 = time.perf_counter()
    for _ in range(ITERATIONS):
        read(regs.rsp, 8192)
    one_read = (time.perf_counter() - t0) / ITERATIONS
    print(f"frames per walk:             {n}")
    print(f"cold walk (empty row cache): {cold * 1e6:8.1f} µs  ({cold * 1e6 / n:.1f} µs/frame)")
    print(f"warm walk:                   {warm * 1e6:8.2f} µs  ({warm * 1e6 / n:.3f} µs/frame)")
    print(f"get_regs + warm walk:        {with_regs * 1e6:8.2f} µs")
    print(f"  of which one 8 KiB pread:  {one_read * 1e6:8.2f} µs")
    ex("kill", to_string=True)


def main() -> int:
    """Plain-Python side: build the program and run this file inside GDB."""
    gdb = shutil.which("gdb")
    if gdb is None or shutil.which("gcc") is None:
        print("bench_unwind: gdb and gcc are required", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "bench"
        subprocess.run(["gcc", "-O2", "-g", "-fomit-frame-pointer", str(HERE / "programs/bench.c"),
                        "-o", str(prog)], check=True)
        cfg = {"gdb_ext": str(HERE.parent), "program": str(prog)}
        env = {**os.environ, "BENCH_UNWIND_CONFIG": json.dumps(cfg)}
        proc = subprocess.run([gdb, "-nx", "-batch", "-x", str(Path(__file__).resolve())],
                              env=env, stdin=subprocess.DEVNULL, text=True, capture_output=True,
                              timeout=600)
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0 or "warm walk" not in proc.stdout:
            sys.stderr.write(proc.stderr)
            return 1
    return 0


try:
    import gdb as _gdb
except ImportError:
    _gdb = None

if __name__ == "__main__":
    if _gdb is not None:
        run_inside_gdb(_gdb)
    else:
        raise SystemExit(main())
