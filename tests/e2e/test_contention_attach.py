"""`contention` on a process GDB attaches to (`gdb -p`, `set memdump locks on`, `memdump`): the
recorder, loaded into the running process, redirects the modules' GOT slots of the pthread lock
calls to its hooks (gdb_ext/recorder/got.c), and counts every acquisition from then on, exactly.

tests/programs/lock_rounds (rounds): 2 threads take `round_lock` 1000 times each per round and
meet main at a barrier, which then calls round_done(). Stopped there, no thread is between a
lock call and its count, so the program's own `acquisitions` and the recorder's `locked` must
grow by the same amount: 2000 a round.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from gdb_driver import printed_json
from memdump_analyzer import DumpReader
from memdump_e2e import REPO, program

DBGKIT = REPO / "gdb_ext" / "dbgkit.py"
ROUNDS = 5


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return 0


def test_attach_counts_every_lock_after_the_attach(tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    proc = subprocess.Popen([str(program("lock_rounds")), "rounds", str(stop)],
                            stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(500):  # main and its 2 workers
            if _threads(proc.pid) == 3:
                break
            time.sleep(0.01)
        dump = tmp_path / "attach.memdump"
        gdb = subprocess.run(
            ["gdb", "-p", str(proc.pid), "-batch", "-nx", "-ex", f"source {DBGKIT}",
             "-ex", "set memdump locks on", "-ex", "break round_done", "-ex", "continue",
             "-ex", f"memdump -o {dump}", "-ex", r'printf "before %lu\n", acquisitions',
             "-ex", f"ignore 1 {ROUNDS - 1}", "-ex", "continue",
             "-ex", r'printf "after %lu\n", acquisitions',
             "-ex", "contention --json", "-ex", f"shell touch {stop}", "-ex", "detach"],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, gdb.stdout + gdb.stderr
    before = re.search(r"^before (\d+)$", gdb.stdout, re.M)
    after = re.search(r"^after (\d+)$", gdb.stdout, re.M)
    assert before is not None and after is not None, gdb.stdout + gdb.stderr
    delta = int(after.group(1)) - int(before.group(1))
    assert delta == ROUNDS * 2 * 1000
    assert re.search(r"^memdump: in-process recorder: loaded into process \d+, \d+ allocator "
                     r"and lock call sites redirected in \d+ modules", gdb.stdout, re.M), gdb.stdout
    doc = printed_json(gdb.stdout)
    (lock,) = doc["locks"]
    assert (lock["name"], lock["kind"], lock["locked"], lock["read_locked"]) == \
        ("round_lock", "mutex", delta, 0)
    assert lock["contended"] == sum(s["contended"] for s in lock["stacks"])
    assert all(s["frames"][0]["function"] == "worker" for s in lock["stacks"])
    # the program went on after the detach, and ended when told to
    assert out == f"acquisitions {int(after.group(1))}\n"
    # the recording ended at the detach: the counts so far are in the dump
    with DumpReader(str(dump)) as reader:
        list(reader.records())
        (record,) = reader.locks
    assert (record.address, record.locked) == (lock["address"], delta)
