"""`contention --sample`: stopping the program from GDB and finding the threads blocked in
glibc's lock waits, on targets/shmemq (a process-shared mutex held by another process) and
targets/rw_locks (a writer waiting on a pthread rwlock). Counts vary run to run: the tests
assert names, stacks, owners and modes, never a time."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from gdb_driver import GdbDriver, printed_json
from memdump_e2e import REPO, build_dir

SOURCE = REPO / "targets" / "shmemq" / "shmemq.c"
SECONDS = 3


def _bench() -> Path:
    path = build_dir() / "targets" / "shmemq" / "shmemq_bench"
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `make build`", pytrace=False)
    return path


def _lock_lines() -> set[int]:
    """The lines of shmemq.c where queue_lock blocks in pthread_mutex_lock."""
    lines = SOURCE.read_text().splitlines()
    return {n for n, text in enumerate(lines, 1) if "rc = pthread_mutex_lock(m);" in text}


def _sample(lock: str) -> dict[str, Any]:
    argv = ["gdb", "-batch", "-nx", "-ex", f"source {REPO / 'gdb_ext' / 'dbgkit.py'}",
            "-ex", "start", "-ex", f"contention --sample {SECONDS} --interval 10 --json",
            "-ex", "kill", "--args", str(_bench()), "--lock", lock,
            "--repetitions", "100000000"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert "\n{\n" in proc.stdout, proc.stdout + proc.stderr
    doc: dict[str, Any] = printed_json(proc.stdout)
    assert doc["format"] == "dbgkit-contention" and doc["version"] == "1.1"
    assert doc["method"] == "sampling" and doc["samples"] > 0 and doc["ended_early"] is None
    assert "Traceback" not in proc.stderr
    return doc


def _check_locks(doc: dict[str, Any]) -> int:
    """Every lock seen is a queue's mutex named from queue_lock's argument; waits are in
    queue_lock's pthread_mutex_lock, and the owner is the server: not a thread of the client.
    Returns the waiting samples."""
    waiting = 0
    for lock in doc["locks"]:
        assert (lock["kind"], lock["name"]) == ("mutex", "q->hdr->mutex"), lock
        # named as the waiters' frames name it; a lock only seen in calls, by the first call
        scopes = {"queue_lock"} if lock["waiting"] else {"queue_lock", "queue_unlock"}
        assert lock["scope"] in scopes, lock
        waiting += lock["waiting"]
        for stack in lock["stacks"]:
            top = stack["frames"][0]
            assert top["function"] == "queue_lock" and top["file"].endswith("shmemq.c")
            assert top["line"] in _lock_lines(), top
            assert stack["frames"][1]["function"] in ("shmemq_try_enqueue",
                                                      "shmemq_try_dequeue_len")
        for owner in lock["owners"]:
            assert owner["name"] is None and owner["tid"] > 0
    return waiting


def test_shmemq_queue_locks_named_with_their_waiting_line() -> None:
    """Both mutex kinds: every lock seen is a queue's, named and waited for where queue_lock
    calls pthread_mutex_lock. How often each kind is waited for is not asserted here: sampled,
    it depends on the two processes running at once, which a loaded machine rarely lets them do
    (a full test run measured 99 waits for normal against 100 for adaptive; a quiet one 18
    against 3). The contrast is asserted on exact counts, in test_contention_recorder.py."""
    for kind in ("normal", "adaptive"):
        doc = _sample(kind)
        # the client takes a queue lock millions of times a second: seen in every run
        assert doc["locks"], (kind, doc)
        _check_locks(doc)


def test_bad_arguments_and_states_are_one_line() -> None:
    bench = str(_bench())
    dbgkit = f"source {REPO / 'gdb_ext' / 'dbgkit.py'}"
    cases = [
        (["contention --sample 1"], "contention: needs a live process (run the program or "
                                    "attach)"),
        (["start", "contention --sample 0"],
         "contention: --sample takes a positive number of seconds, not 0"),
        (["start", "contention --sample 1 --interval 0"],
         "contention: --interval takes at least 1 millisecond, not 0"),
        (["start", "contention --sample soon"],
         "contention: argument --sample: invalid float value: 'soon'"),
    ]
    for commands, line in cases:
        argv = ["gdb", "-batch", "-nx", "-ex", dbgkit]
        for c in commands:
            argv += ["-ex", c]
        proc = subprocess.run([*argv, "-ex", "kill", "--args", bench], capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert line in proc.stderr, (commands, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_a_program_that_exits_while_sampled_ends_early() -> None:
    argv = ["gdb", "-batch", "-nx", "-ex", f"source {REPO / 'gdb_ext' / 'dbgkit.py'}",
            "-ex", "start", "-ex", "contention --sample 30", "--args", str(_bench()),
            "--repetitions", "1000", "--size", "16"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert "contention: sampling stopped early: the program exited" in proc.stdout, proc.stdout


def test_rw_locks_writer_waits_on_the_pthread_rwlock() -> None:
    """rw_locks' pthread variant: 2 readers keep the rwlock read-held, so its writer spends
    nearly all its time in pthread_rwlock_wrlock; every sample of it waits there."""
    bench = build_dir() / "targets" / "rw_locks" / "rw_locks_bench"
    argv = ["gdb", "-batch", "-nx", "-ex", f"source {REPO / 'gdb_ext' / 'dbgkit.py'}",
            "-ex", "start", "-ex", "contention --sample 1 --json", "-ex", "kill",
            "--args", str(bench), "--variant", "pthread", "--readers", "2", "--writers", "1",
            "--millis", "20000"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    doc = printed_json(proc.stdout)
    waited = [lk for lk in doc["locks"] if lk["waiting"]]
    assert len(waited) == 1, doc["locks"]
    (lock,) = waited
    assert lock["kind"] == "rwlock" and lock["modes"].get("write", 0) > 0, lock
    # named from the worker lambda's captured reference to the PthreadRwLock
    assert lock["name"] == "lock.lock_", lock
    assert lock["stacks"][0]["frames"][0]["function"].startswith(
        "dbgkit::targets::PthreadRwLock::lock")


def test_a_running_program_and_non_stop_mode_are_refused() -> None:
    gdb = GdbDriver(argv=[str(_bench()), "--repetitions", "100000000"])
    try:
        gdb.command("start", "continue &")
        out = gdb.command("contention --sample 1")
        assert "contention: the program is running (interrupt it first)" in out, out
        assert "Traceback" not in out
    finally:
        gdb.command("kill")
        gdb.close()
    gdb = GdbDriver(argv=[str(_bench()), "--repetitions", "1000"])
    try:
        out = gdb.command("set non-stop on", "start", "contention --sample 1")
        assert ("contention: --sample needs GDB's all-stop mode (set non-stop off before the "
                "program runs)") in out, out
    finally:
        gdb.command("kill")
        gdb.close()
