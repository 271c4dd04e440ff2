"""`contention` reading the in-process recorder's lock counts (memdump's default recorder):
exact acquisition counts on targets/monte_carlo_pi (mutex vs atomic) and targets/shmemq (its
enqueues; a normal and an adaptive process-shared mutex contended once, deterministically)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gdb_driver import printed_json
from memdump_analyzer import DumpReader, analyze
from memdump_e2e import REPO, build_dir, program

DBGKIT = REPO / "gdb_ext" / "dbgkit.py"


def _binary(target: str, name: str) -> Path:
    path = build_dir() / "targets" / target / name
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `make build`", pytrace=False)
    return path


def _at_exit(tmp_path: Path, argv: list[str],
             command: str = "contention --json") -> tuple[dict[str, Any], str]:
    """Record ARGV with memdump, stop at _exit, run COMMAND, and return the JSON it printed
    (`contention --json`'s, checked for the recorder's method: {} for another command) and
    stdout."""
    cmd = ["gdb", "-batch", "-nx", "-ex", f"source {DBGKIT}",
           "-ex", "set memdump locks on",
           "-ex", f"memdump -o {tmp_path / 'run.memdump'}", "-ex", "set breakpoint pending on",
           "-ex", "break _exit", "-ex", "run", "-ex", command, "-ex", "kill",
           "--args", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    if "--json" not in command:
        assert "contention: counted by the in-process recorder" in proc.stdout, \
            proc.stdout + proc.stderr
        return {}, proc.stdout
    assert "\n{\n" in proc.stdout, proc.stdout + proc.stderr
    doc: dict[str, Any] = printed_json(proc.stdout)
    assert (doc["format"], doc["version"], doc["method"]) == ("dbgkit-contention", "1.1",
                                                              "recorder")
    assert doc["enabled"] is True and doc["dropped"] == 0
    return doc, proc.stdout


def test_monte_carlo_pi_mutex_counts_every_hit_atomic_no_lock(tmp_path: Path) -> None:
    bench = str(_binary("monte_carlo_pi", "monte_carlo_pi_bench"))
    common = ["--threads", "4", "--points", "100000", "--affinity", "off"]
    doc, out = _at_exit(tmp_path, [bench, *common, "--variant", "mutex"])
    row = re.search(r"^\| mutex \| 4 \| off \| 400000 \| (\d+) \|", out, re.M)
    assert row is not None, out
    (lock,) = doc["locks"]
    # one pthread_mutex_lock per hit, every one counted
    assert (lock["kind"], lock["locked"], lock["read_locked"]) == ("mutex", int(row.group(1)), 0)
    assert 1 <= lock["owner_changes"] <= lock["locked"]
    assert lock["contended"] <= lock["locked"] and lock["max_wait_ns"] <= lock["wait_ns"]
    # the dump's tail has the same counts, as a 2.3 `lk` record
    with DumpReader(str(tmp_path / "run.memdump")) as reader:
        list(reader.records())
        assert reader.version == (2, 7)
        (record,) = reader.locks
    assert (record.address, record.kind, record.locked, record.owner_changes,
            record.contended, record.wait_ns) == (lock["address"], "mutex", lock["locked"],
                                                  lock["owner_changes"], lock["contended"],
                                                  lock["wait_ns"])
    doc, out = _at_exit(tmp_path, [bench, *common, "--variant", "atomic"])
    assert "| atomic | 4 | off | 400000 |" in out
    assert doc["locks"] == []
    with DumpReader(str(tmp_path / "run.memdump")) as reader:
        list(reader.records())
        assert reader.locks == []


def test_shmemq_bench_counts_every_enqueue(tmp_path: Path) -> None:
    bench = str(_binary("shmemq", "shmemq_bench"))
    doc, _ = _at_exit(tmp_path, [bench, "--lock", "normal", "--repetitions", "2000"])
    # the client's two queues: it enqueues each of the 2000 messages once on the server's
    assert len(doc["locks"]) == 2 and {lk["kind"] for lk in doc["locks"]} == {"mutex"}
    assert [lk["locked"] for lk in doc["locks"]].count(2000) == 1, doc["locks"]


def _source_line(path: Path, text: str, nth: int = 1) -> int:
    """The line of PATH holding TEXT the NTH time."""
    found = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return found[nth - 1]


@pytest.mark.parametrize(("kind", "try_busy"), [("normal", 1), ("adaptive", 11)])
def test_shmemq_contended_enqueue_counted_exactly(tmp_path: Path, kind: str,
                                                  try_busy: int) -> None:
    """A process-shared shmemq mutex contended once, whatever the scheduler does
    (tests/programs/shmemq_contend.c): the normal kind tries it once before it blocks, the
    adaptive kind 11 times (its trylock and 10 spins). How much more the normal kind is
    contended in a real ping-pong is scheduling: scripts/bench-shmemq.py measures it."""
    doc, _ = _at_exit(tmp_path, [str(program("shmemq_contend")), kind])
    (lock,) = doc["locks"]
    assert (lock["kind"], lock["locked"], lock["owner_changes"], lock["contended"],
            lock["try_busy"]) == ("mutex", 3, 3, 1, try_busy), lock
    shmemq_c = REPO / "targets" / "shmemq" / "shmemq.c"
    blocks = _source_line(shmemq_c, "rc = pthread_mutex_lock(m);", 2)  # the build without stats
    enqueue = _source_line(shmemq_c, "const int rc = queue_lock(self);")
    (stack,) = lock["stacks"]
    assert stack["contended"] == 1 and stack["wait_ns"] == lock["wait_ns"] > 0
    assert [(f["function"], Path(f["file"]).name, f["line"]) for f in stack["frames"][:3]] == [
        ("queue_lock", "shmemq.c", blocks), ("shmemq_try_enqueue", "shmemq.c", enqueue),
        ("enqueue_one", "shmemq_contend.c", _line("ENQUEUE", "shmemq_contend.c"))]


def test_counting_is_off_unless_asked_for(tmp_path: Path) -> None:
    bench = str(_binary("monte_carlo_pi", "monte_carlo_pi_bench"))
    proc = subprocess.run(["gdb", "-batch", "-nx", "-ex", f"source {DBGKIT}",
                           "-ex", f"memdump -o {tmp_path / 'off.memdump'}",
                           "-ex", "set breakpoint pending on", "-ex", "break _exit", "-ex", "run",
                           "-ex", "contention", "-ex", "kill", "--args", bench, "--threads", "2",
                           "--points", "1000", "--variant", "mutex"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert ("contention: the in-process recorder does not count lock calls: set memdump locks "
            "on before the program runs, or contention --sample SECONDS") in proc.stderr, \
        proc.stderr


def test_without_the_recorder_contention_says_how_to_sample() -> None:
    bench = str(_binary("shmemq", "shmemq_bench"))
    proc = subprocess.run(["gdb", "-batch", "-nx", "-ex", f"source {DBGKIT}", "-ex", "start",
                           "-ex", "contention", "-ex", "kill", "--args", bench],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert ("contention: the in-process recorder is not loaded in this process (memdump loads "
            "it); contention --sample SECONDS samples instead") in proc.stderr, proc.stderr


def test_rw_locks_pthread_every_read_and_write_counted(tmp_path: Path) -> None:
    bench = str(_binary("rw_locks", "rw_locks_bench"))
    doc, out = _at_exit(tmp_path, [bench, "--variant", "pthread", "--readers", "2",
                                   "--writers", "1", "--millis", "200"])
    row = re.search(r"^\| pthread \| 2 \| 1 \| [\d.]+ \| (\d+) \| (\d+) \|", out, re.M)
    assert row is not None, out
    reads, writes = int(row.group(1)), int(row.group(2))
    (lock,) = doc["locks"]
    assert (lock["kind"], lock["read_locked"], lock["locked"]) == ("rwlock", reads,
                                                                   reads + writes)
    # the one writer takes it after readers: each write that waited is contended
    assert lock["owner_changes"] == 1 and lock["contended"] >= 1


def _line(marker: str, name: str = "lock_rounds.c") -> int:
    """The line of tests/programs/NAME that MARKER's comment is on."""
    lines = (REPO / "tests" / "programs" / name).read_text().splitlines()
    (number,) = [i for i, text in enumerate(lines, 1) if f"/* {marker} */" in text]
    return number


def test_waiting_stacks_exact_by_call_site(tmp_path: Path) -> None:
    """lock_rounds sites: 3 contended acquisitions from wait_at_x, 2 from wait_at_y, each made
    deterministic (the waiter sleeps on the held mutex before main lets it go): GDB's table,
    the dump's `lw` records and memdump-analyze's section all give them by stack."""
    prog = str(program("lock_rounds"))
    doc, out = _at_exit(tmp_path, [prog, "sites"])
    assert doc["stacks_dropped"] == 0
    (lock,) = doc["locks"]
    assert (lock["name"], lock["locked"], lock["owner_changes"], lock["contended"]) == \
        ("site_lock", 10, 10, 5)
    source = str(REPO / "tests" / "programs" / "lock_rounds.c")
    header = str(REPO / "tests" / "programs" / "contend_at.h")
    waiter = {"function": "contend_waiter", "file": header,
              "line": _line("WAITER_CALL", "contend_at.h")}
    assert [(s["contended"], s["frames"][:2]) for s in lock["stacks"]] == [
        (3, [{"function": "wait_at_x", "file": source, "line": _line("WAIT_AT_X")}, waiter]),
        (2, [{"function": "wait_at_y", "file": source, "line": _line("WAIT_AT_Y")}, waiter])]
    assert sum(s["wait_ns"] for s in lock["stacks"]) == lock["wait_ns"]
    assert max(s["max_wait_ns"] for s in lock["stacks"]) == lock["max_wait_ns"]
    assert [s["partial"] for s in lock["stacks"]] == [False, False]

    # the dump: the `lk` record, then one `lw` per stack, its stack a node with these frames
    dump = str(tmp_path / "run.memdump")
    with DumpReader(dump) as reader:
        list(reader.records())
        assert reader.version == (2, 7) and reader.unknown_tags == {}
        (record,) = reader.locks
        waits = [(w.address, w.contended, w.wait_ns, w.max_wait_ns,
                  [(f.function, f.line) for f in reader.stack(w.stack)[:2]])
                 for w in reader.lock_waits]
    assert (record.address, record.contended) == (lock["address"], 5)
    assert waits == [(lock["address"], s["contended"], s["wait_ns"], s["max_wait_ns"],
                      [(f["function"], f["line"]) for f in s["frames"][:2]])
                     for s in lock["stacks"]]

    # memdump-analyze: the lock contention section, stacks cut by --max-frames
    report = subprocess.run([str(REPO / "scripts" / "memdump-analyze"), "--max-frames", "2",
                             dump], capture_output=True, text=True, timeout=120, check=True)
    section = report.stdout.split("LOCK CONTENTION: 1 lock,", 1)[1].split("\nSUMMARY\n")[0]
    assert (f"   1 mutex             10        10          5         0 "
            f"{lock['wait_ns'] / 1e6:>11,.3f}") in section
    # named as contention names it, from the program's symbol table
    assert section.splitlines()[2].split()[-2:] == [f"0x{lock['address']:x}", "site_lock"]
    assert "lock 1 (site_lock), waiting stack 1 of 2" in section
    analysed = subprocess.run([str(REPO / "scripts" / "memdump-analyze"), "--format", "json",
                               dump], capture_output=True, text=True, timeout=120, check=True)
    assert [lk["name"] for lk in json.loads(analysed.stdout)["locks"]] == ["site_lock"]
    assert (f"lock 1 (site_lock), waiting stack 1 of 2: 3 contended, "
            f"{lock['stacks'][0]['wait_ns'] / 1e6:,.3f} ms waited") in section
    stack_1 = section.split("waiting stack 1 of 2", 1)[1].splitlines()[1:4]
    called = _line("WAITER_CALL", "contend_at.h")
    assert stack_1 == [f"    at wait_at_x (lock_rounds.c:{_line('WAIT_AT_X')})",
                       f"    by contend_waiter (contend_at.h:{called})",
                       "    ... 2 more frames"]
    # --stacks 1: the first stack, and how many more
    _, out = _at_exit(tmp_path, [prog, "sites"], command="contention --stacks 1")
    assert "  3 contended, " in out and "  2 contended, " not in out
    assert "  ... 1 more stack(s) (--json lists them all)" in out


def test_std_mutex_stacks_start_at_the_programs_call(tmp_path: Path) -> None:
    """mpmc_queue's coarse queue: one std::mutex taken by a lock_guard in push and a unique_lock
    in pop, 16 threads. The C++ library's inlined wrappers (__gthread_mutex_lock,
    std::mutex::lock, the guards) are trimmed (rule lock-wrapper-frame): each waiting stack
    starts at the line that takes the lock, in GDB's table and in memdump-analyze's section."""
    prog = str(_binary("mpmc_queue", "mpmc_queue_bench"))
    # 20,000 items a thread: with fewer, a loaded machine can run the 16 threads one after the
    # other within their time slices, and only close() waits (the run costs the same 0.9 s)
    doc, _ = _at_exit(tmp_path, [prog, "--writers", "8", "--readers", "8", "--items", "20000",
                                 "--variant", "coarse"])
    (lock,) = doc["locks"]
    assert lock["locked"] >= 320000 and lock["contended"] > 0  # 160,000 pushes and pops each
    header = str(REPO / "targets" / "mpmc_queue" / "mpmc_queue.hpp")
    text = Path(header).read_text().splitlines()
    guard = [i for i, t in enumerate(text, 1) if "std::lock_guard<std::mutex> lock(mutex_)" in t]
    unique = [i for i, t in enumerate(text, 1) if "std::unique_lock<std::mutex> lock(mutex_)" in t]
    # close() takes the lock once too, with a lock_guard: on a loaded machine it may wait
    calls = {("dbgkit::targets::CoarseQueue<unsigned long>::push(unsigned long)", guard[0]),
             ("dbgkit::targets::CoarseQueue<unsigned long>::pop()", unique[0])}
    sites = calls | {("dbgkit::targets::CoarseQueue<unsigned long>::close()", guard[1])}
    firsts = {(s["frames"][0]["function"], s["frames"][0]["line"]) for s in lock["stacks"]}
    assert firsts and firsts <= sites and firsts & calls, firsts
    assert all(s["frames"][0]["file"] == header for s in lock["stacks"])
    assert sum(s["contended"] for s in lock["stacks"]) == lock["contended"]
    report = analyze(str(tmp_path / "run.memdump"))
    (row,) = report.locks
    assert {(s.stack[0].function, s.stack[0].line) for s in row.stacks} == firsts
