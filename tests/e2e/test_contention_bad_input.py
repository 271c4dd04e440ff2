"""Bad input for the lock commands other than `deadlocks` (test_deadlocks.py has its own):
`contention` (sampled and counted by the recorder), `ctxswitches` and the glibc lock printers, on
a process with no threads library, a corrupt lock word, a lock in shared memory owned by another
process, and a program without debug information (-g0, and stripped). Each gives exact output or
one line, never a traceback (run_gdb checks), and GDB leaves the process as it was: its threads
asleep again in the calls the program put them in (still_waiting), or, where nothing had to run,
stopped at the same pc.

The programs hang deterministically (tests/programs/deadlock_cases.c, deadlock_nothreads.c).
The glibc printers have nothing to print in deadlock_nothreads (no C library, no lock type).
"""

from __future__ import annotations

import re
from pathlib import Path

from hung_programs import DBGKIT, gdb_on, hung, json_doc, still_waiting
from memdump_e2e import SOURCES, marker, program, run_gdb

NOT_LOADED = ("contention: the in-process recorder is not loaded in this process (memdump loads "
              "it); contention --sample SECONDS samples instead")
SAMPLE = "contention --sample 0.2 --interval 10"


def _pcs(out: str) -> list[str]:
    return re.findall(r"^pc (0x[0-9a-f]+)$", out, re.M)


def _ctx_rows(out: str) -> list[tuple[str, str]]:
    """ctxswitches' rows: (tid, name)."""
    return re.findall(r"^ +\d+ +(\d+)  (\S+) +t \(tracing stop\)", out, re.M)


def test_no_threads_library() -> None:
    with hung(program("deadlock_nothreads")) as pid:
        out = gdb_on(pid, 'printf "pc %#lx\\n", $pc', "contention", 'printf "pc %#lx\\n", $pc',
                     SAMPLE, "ctxswitches")
        still_waiting(pid)
    lines = out.splitlines()
    pcs = _pcs(out)
    assert len(pcs) == 2 and pcs[0] == pcs[1]  # the refusal ran nothing
    assert NOT_LOADED in lines
    assert "no thread was seen in a lock call" in lines
    assert _ctx_rows(out) == [(str(pid), "deadlock_nothre")]
    assert "            -  total (1 threads)" in out


def test_no_thread_but_main_and_no_lock_taken(tmp_path: Path) -> None:
    """glibc 2.34+ has libpthread in libc: a single-threaded program that takes no lock."""
    run = run_gdb(["gdb", "-nx", "-batch", "-ex", f"source {DBGKIT}",
                   "-ex", "set memdump locks on", "-ex", f"memdump -o {tmp_path / 'x.memdump'}",
                   "-ex", "set breakpoint pending on", "-ex", "break _exit", "-ex", "run",
                   "-ex", "contention", "-ex", SAMPLE, "-ex", "kill", program("no_leak")])
    assert ("contention: counted by the in-process recorder (every pthread mutex and rwlock "
            "call while it records); 0 lock(s)\nno lock was taken\n") in run.stdout, run.output
    assert "no thread was seen in a lock call" in run.stdout
    assert "contention: sampling stopped early: the program exited" in run.stdout


def test_corrupt_lock_word() -> None:
    with hung(program("deadlock_cases"), "corrupt") as pid:
        out = gdb_on(pid, f"{SAMPLE} --json", SAMPLE, "contention", "ctxswitches",
                     "print bad_lock")
        still_waiting(pid)
    doc = json_doc(out)
    (lock,) = doc["locks"]
    assert (lock["name"], lock["kind"], lock["threads"]) == ("bad_lock", "mutex",
                                                            [lock["threads"][0]])
    assert [(o["tid"], o["name"], o["thread"]) for o in lock["owners"]] == [
        (2147483632, None, "no such thread")]
    wait = marker(SOURCES / "deadlock_cases.c", "bad-waiter", "WAIT").line
    assert lock["stacks"][0]["frames"][0] == {
        "function": "bad_waiter", "file": str(SOURCES / "deadlock_cases.c"), "line": wait}
    assert re.search(r"^   1 +\d+ +0 +\d+ +1  mutex +0x[0-9a-f]+ +2147483632 \(no such thread\) "
                     r"bad_lock$", out, re.M), out
    assert NOT_LOADED in out.splitlines()
    assert [name for _, name in _ctx_rows(out)] == ["deadlock_cases", "bad-waiter"]
    assert "$1 = pthread_mutex_t <corrupt: owner field 2147483632 is no thread id>" in out


def test_lock_in_shared_memory_owned_by_another_process() -> None:
    with hung(program("deadlock_cases"), "pshared") as pid:
        child = int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])
        out = gdb_on(pid, f"{SAMPLE} --json", SAMPLE, "ctxswitches", "thread 2",
                     "frame function shared_waiter", "print *(pthread_mutex_t *) arg")
        still_waiting(pid)
    (lock,) = json_doc(out)["locks"]
    assert [(o["tid"], o["name"], o["thread"]) for o in lock["owners"]] == [
        (child, None, "another process")]
    assert lock["kind"] == "mutex" and lock["name"] is None  # a `void *` argument names nothing
    assert re.search(rf"^   1 +\d+ +0 +\d+ +1  mutex +0x[0-9a-f]+ +{child} \(not in this "
                     r"process\) \?$", out, re.M), out
    assert [name for _, name in _ctx_rows(out)] == ["deadlock_cases", "shm-waiter"]
    assert (f"$1 = pthread_mutex_t: locked by LWP {child} of another process, normal, "
            "process-shared, waiters") in out


def test_program_without_debug_info() -> None:
    with hung(program("deadlock_cases_nodebug"), "abba") as pid:
        out = gdb_on(pid, f"{SAMPLE} --json", "ctxswitches", "print lock_a",
                     "print (pthread_mutex_t) lock_a")
        still_waiting(pid)
    names = {tid: name for tid, name in _ctx_rows(out)}
    assert sorted(names.values()) == ["abba-1", "abba-2", "deadlock_cases_"]
    locks = {lk["name"]: lk for lk in json_doc(out)["locks"]}
    assert sorted(locks) == ["lock_a", "lock_b"]
    # waits from functions without lines; the owner is the other thread of the pair
    assert locks["lock_a"]["stacks"][0]["frames"][0] == {"function": "abba_second",
                                                         "file": None, "line": None}
    assert locks["lock_b"]["stacks"][0]["frames"][0] == {"function": "abba_first",
                                                         "file": None, "line": None}
    holder = {v: int(k) for k, v in names.items()}
    assert [o["tid"] for o in locks["lock_a"]["owners"]] == [holder["abba-1"]]
    assert "'lock_a' has unknown type; cast it to its declared type" in out
    assert (f"$1 = pthread_mutex_t: locked by LWP {holder['abba-1']}, normal, waiters"
            in out)


def test_stripped_program() -> None:
    with hung(program("deadlock_cases_stripped"), "abba") as pid:
        out = gdb_on(pid, f"{SAMPLE} --json", "ctxswitches", "print lock_a")
        still_waiting(pid)
    locks = json_doc(out)["locks"]
    assert [(lk["kind"], lk["name"]) for lk in locks] == [("mutex", None), ("mutex", None)]
    for lk in locks:
        inner = lk["stacks"][0]["frames"][0]
        assert re.fullmatch(r"0x[0-9a-f]+ in deadlock_cases_stripped", inner["function"]), inner
        assert (inner["file"], inner["line"]) == (None, None)
    assert sorted(name for _, name in _ctx_rows(out)) == ["abba-1", "abba-2",
                                                         "deadlock_cases_"]
    assert 'No symbol "lock_a" in current context.' in out
