"""`deadlocks` on hung programs: GDB attaches (gdb -p), reports, detaches; the program is killed.

The programs (tests/programs/deadlock_cases.c, deadlock_std.cpp, and the targets' rw_locks_bench
--variant 1.4-flawed) put their threads in place with barriers and say "ready" once every thread
sleeps in futex(2): each hang is deterministic. Lines marked `// WAIT: name` are where a thread
waits; the expectations never hard-code a line number.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hung_programs import DBGKIT, gdb_on, hung, json_doc, still_waiting
from memdump_e2e import REPO, SOURCES, build_dir, marker, program, run_gdb


@pytest.fixture(params=[True, False], ids=["libc6-dbg", "no-libc6-dbg"])
def libc_debug(request: pytest.FixtureRequest) -> bool:
    """Each report is checked with glibc's debug information and without it."""
    return bool(request.param)


def layouts(libc_debug: bool) -> str:
    """Without libc6-dbg, sem_t's `struct new_sem` is not described: the table is used."""
    return "debug info" if libc_debug else "table"


def cycles(doc: dict[str, Any]) -> list[list[tuple[str, str, str, bool]]]:
    """Each cycle as (waiter's name, lock's name or "joins", holder's name, inferred)."""
    names = {t["num"]: t["name"] for t in doc["threads"]}
    locks = {lock["address"]: lock["name"] for lock in doc["locks"]}
    locks[None] = "joins"
    for cycle in doc["cycles"]:
        assert all(e["join"] == (e["lock"] is None) for e in cycle), cycle
    return [[(names[e["waiter"]], locks[e["lock"]], names[e["holder"]], e["inferred"])
             for e in cycle] for cycle in doc["cycles"]]


def wait_sites(doc: dict[str, Any]) -> dict[str, str]:
    """Thread name -> file:line where it waits."""
    return {t["name"]: f"{t['where']['file']}:{t['where']['line']}" for t in doc["threads"]
            if t["waits"] is not None}


def lock_named(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(lock for lock in doc["locks"] if lock["name"] == name)


def site(source: str, name: str) -> str:
    return str(marker(source, name, "WAIT"))


def test_abba_pair_of_pthread_mutexes(libc_debug: bool) -> None:
    with hung(program("deadlock_cases"), "abba") as pid:
        out = gdb_on(pid, "deadlocks", "deadlocks --json", libc_debug=libc_debug)
        still_waiting(pid)
    doc = json_doc(out)
    assert doc["format"] == "dbgkit-deadlocks" and doc["version"] == "1.1"
    assert doc["layouts"] == layouts(libc_debug) and doc["glibc"] == "2.36"
    assert cycles(doc) == [[("abba-1", "lock_b", "abba-2", False),
                            ("abba-2", "lock_a", "abba-1", False)]]
    assert wait_sites(doc) == {"abba-1": site("deadlock_cases.c", "abba-1"),
                               "abba-2": site("deadlock_cases.c", "abba-2")}
    a = lock_named(doc, "lock_a")
    assert a["type"] == "pthread_mutex_t" and a["state"]["kind"] == "normal"
    assert a["state"]["waiters"] is True
    tids = {t["name"]: t["lwp"] for t in doc["threads"]}
    assert a["state"]["owner"] == tids["abba-1"]
    assert "Deadlock 1 of 1: 2 threads" in out
    nums = {t["name"]: t["num"] for t in doc["threads"]}
    assert (f'thread {nums["abba-1"]} "abba-1" (LWP {tids["abba-1"]}) at '
            f'{site("deadlock_cases.c", "abba-1")} waits for pthread_mutex_t lock_b '
            f'({lock_named(doc, "lock_b")["address"]}), held by thread {nums["abba-2"]}') in out


def test_three_thread_cycle_through_array_members(libc_debug: bool) -> None:
    with hung(program("deadlock_cases"), "ring") as pid:
        doc = json_doc(gdb_on(pid, "deadlocks --json", libc_debug=libc_debug))
        still_waiting(pid)
    assert cycles(doc) == [[("ring-0", "ring[1].guard", "ring-1", False),
                            ("ring-1", "ring[2].guard", "ring-2", False),
                            ("ring-2", "ring[0].guard", "ring-0", False)]]
    assert set(wait_sites(doc).values()) == {site("deadlock_cases.c", "ring")}


def test_writer_waits_for_reader_waiting_for_writers_mutex(libc_debug: bool) -> None:
    with hung(program("deadlock_cases"), "rwlock") as pid:
        out = gdb_on(pid, "deadlocks", "deadlocks --json", libc_debug=libc_debug)
    doc = json_doc(out)
    assert cycles(doc) == [[("reader", "state_lock", "writer", False),
                            ("writer", "table_lock", "reader", True)]]
    table = lock_named(doc, "table_lock")
    assert table["state"]["readers"] == 1 and table["state"]["writer"] is None
    assert table["notes"] == ["1 reader holds it (glibc keeps their count, not who they are)"]
    writer = next(t for t in doc["threads"] if t["name"] == "writer")
    assert writer["mode"] == "write"
    reader = next(t["num"] for t in doc["threads"] if t["name"] == "reader")
    assert f"held (inferred) by thread {reader}" in out


def test_reader_waits_for_the_writer_of_an_rwlock(libc_debug: bool) -> None:
    with hung(program("deadlock_cases"), "wrcycle") as pid:
        doc = json_doc(gdb_on(pid, "deadlocks --json", libc_debug=libc_debug))
    assert cycles(doc) == [[("table-writer", "state_lock", "state-owner", False),
                            ("state-owner", "table_lock", "table-writer", False)]]
    writer = next(t for t in doc["threads"] if t["name"] == "table-writer")
    table = lock_named(doc, "table_lock")
    # the reader registered in the write phase: it waits, it does not hold
    assert (table["state"]["writer"], table["state"]["readers"],
            table["state"]["waiting_readers"]) == (writer["lwp"], 0, 1)
    assert table["notes"] == []
    assert writer["holds"] == [{"lock": table["address"], "mode": "write", "inferred": False}]
    assert wait_sites(doc) == {"table-writer": site("deadlock_cases.c", "table-writer"),
                               "state-owner": site("deadlock_cases.c", "state-owner")}


def test_std_mutex_members_named_through_this(libc_debug: bool) -> None:
    with hung(program("deadlock_std"), "mutex") as pid:
        doc = json_doc(gdb_on(pid, "deadlocks --json", libc_debug=libc_debug))
    assert cycles(doc) == [[("teller-in", "this->audit_", "teller-out", False),
                            ("teller-out", "this->accounts_", "teller-in", False)]]
    assert lock_named(doc, "this->audit_")["type"] == "std::mutex"
    assert wait_sites(doc) == {"teller-in": site("deadlock_std.cpp", "transfer_in"),
                               "teller-out": site("deadlock_std.cpp", "transfer_out")}


def test_std_shared_mutex_reader_inferred(libc_debug: bool) -> None:
    with hung(program("deadlock_std"), "shared") as pid:
        doc = json_doc(gdb_on(pid, "deadlocks --json", libc_debug=libc_debug))
    assert cycles(doc) == [[("auditor", "this->accounts_", "clerk", False),
                            ("clerk", "this->ledger_", "auditor", True)]]
    assert lock_named(doc, "this->ledger_")["type"] == "std::shared_mutex"
    assert wait_sites(doc) == {"auditor": site("deadlock_std.cpp", "read_ledger"),
                               "clerk": site("deadlock_std.cpp", "write_ledger")}


def test_shared_lock_taken_in_the_frame_that_calls_the_waiting_function(
        libc_debug: bool) -> None:
    """The reader's std::shared_lock is in read_with_config's frame; it waits for config_mutex
    in load_config, which it called: the shared lock is held (the frame's call returned)."""
    with hung(program("deadlock_std"), "callee") as pid:
        doc = json_doc(gdb_on(pid, "deadlocks --json", libc_debug=libc_debug))
    config = "(anonymous namespace)::config_mutex"
    assert cycles(doc) == [[("auditor", config, "clerk", False),
                            ("clerk", "this->ledger_", "auditor", True)]]
    assert wait_sites(doc) == {"auditor": site("deadlock_std.cpp", "load_config"),
                               "clerk": site("deadlock_std.cpp", "write_with_config")}
    ledger = lock_named(doc, "this->ledger_")
    assert ledger["notes"] == ["1 reader holds it (glibc keeps their count, not who they are)"]


def test_reader_asleep_in_pause_holds_its_read_lock(libc_debug: bool) -> None:
    with hung(program("deadlock_cases"), "rdpause") as pid:
        out = gdb_on(pid, "deadlocks", "deadlocks --json", libc_debug=libc_debug)
        still_waiting(pid)
    doc = json_doc(out)
    table = lock_named(doc, "table_lock")
    threads = {t["name"]: t for t in doc["threads"]}
    sleeper = threads["rd-sleeper"]
    assert (sleeper["waits"], sleeper["holds"]) == (
        None, [{"lock": table["address"], "mode": "read", "inferred": True}])
    assert threads["wr-waiter"]["waits"] == table["address"]
    assert table["notes"] == ["1 reader holds it (glibc keeps their count, not who they are)"]
    assert f"    holds for read pthread_rwlock_t table_lock ({table['address']}) (inferred)" in \
        out.splitlines()
    assert doc["cycles"] == []


def test_more_read_candidates_than_readers_is_said(libc_debug: bool) -> None:
    """The bystander's code reads table_lock on a branch it did not take: glibc counts one
    reader, the code shows two."""
    with hung(program("deadlock_cases"), "candidates") as pid:
        doc = json_doc(gdb_on(pid, "deadlocks --json", libc_debug=libc_debug))
    table = lock_named(doc, "table_lock")
    nums = {t["name"]: t["num"] for t in doc["threads"]}
    assert (nums["rd-sleeper"], nums["bystander"]) == (2, 4)
    assert table["state"]["readers"] == 1
    assert table["notes"] == ["1 reader, 2 candidates (threads 2 and 4): glibc keeps the "
                              "readers' count, not who they are; not every candidate holds it"]
    readers = {t["name"] for t in doc["threads"]
               if {"lock": table["address"], "mode": "read", "inferred": True} in t["holds"]}
    assert readers == {"rd-sleeper", "bystander"}
    assert doc["cycles"] == []


def _check_join(out: str, source: str, lock: str) -> None:
    """Thread 1 holds LOCK and joins thread 2 "worker", which waits for LOCK."""
    doc = json_doc(out)
    name = source.split(".")[0]  # the main thread's name is the program's
    assert cycles(doc) == [[(name, "joins", "worker", False), ("worker", lock, name, False)]]
    main = doc["threads"][0]
    assert (main["num"], main["waits"], main["joins"], main["note"]) == (1, None, 2, None)
    assert f"{main['where']['file']}:{main['where']['line']}" == site(source, "join")
    assert wait_sites(doc) == {"worker": site(source, "worker")}
    assert [lk["name"] for lk in doc["locks"]] == [lock]  # the join is no futex "lock"
    assert doc["cycles"][0][0] == {"waiter": 1, "lock": None, "holder": 2, "inferred": False,
                                   "join": True}
    worker_lwp = doc["threads"][1]["lwp"]
    lines = out.splitlines()
    assert any(line.startswith(f'thread 1 "{main["name"]}" (LWP {main["lwp"]}): joins thread 2 '
                               f'"worker" (LWP {worker_lwp}) in ') for line in lines), out
    assert (f'  thread 1 "{main["name"]}" (LWP {main["lwp"]}) at {site(source, "join")} joins '
            'thread 2 "worker"') in lines


def test_main_joins_a_thread_waiting_for_its_mutex(libc_debug: bool) -> None:
    with hung(program("deadlock_cases"), "join") as pid:
        out = gdb_on(pid, "deadlocks", "deadlocks --json", libc_debug=libc_debug)
        still_waiting(pid)
    _check_join(out, "deadlock_cases.c", "join_lock")


def test_std_thread_join_waits_for_the_thread(libc_debug: bool) -> None:
    with hung(program("deadlock_std"), "join") as pid:
        out = gdb_on(pid, "deadlocks", "deadlocks --json", libc_debug=libc_debug)
    _check_join(out, "deadlock_std.cpp", "(anonymous namespace)::config_mutex")


def test_output_file_holds_the_report_alone(tmp_path: Path) -> None:
    """`gdb -p PID -batch` prints GDB's own lines around a report; -o FILE has it alone."""
    report, text = tmp_path / "report.json", tmp_path / "report.txt"
    with hung(program("deadlock_cases"), "abba") as pid:
        out = gdb_on(pid, "deadlocks", f"deadlocks --json -o {report}", f"deadlocks -o {text}",
                     "deadlocks -o /nonexistent/report.txt")
        still_waiting(pid)
    doc = json.loads(report.read_text())
    assert cycles(doc) == [[("abba-1", "lock_b", "abba-2", False),
                            ("abba-2", "lock_a", "abba-1", False)]]
    assert report.stat().st_mode & 0o777 == 0o600 and text.stat().st_mode & 0o777 == 0o600
    printed = out[out.index(f"deadlocks: process {pid}"):]
    assert printed.startswith(text.read_text())
    lines = out.splitlines()
    assert lines.count(f"deadlocks: 1 deadlock, 3 threads; report in {report}") == 1
    assert f"deadlocks: 1 deadlock, 3 threads; report in {text}" in lines
    assert ("deadlocks: cannot write /nonexistent/report.txt: No such file or directory"
            in lines)


def _line_of(path: Path, text: str, after: int = 0) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if i > after and text in line)


def test_targets_rw_1_4_deadlock(libc_debug: bool) -> None:
    bench = build_dir() / "targets" / "rw_locks" / "rw_locks_bench"
    if not bench.is_file():
        pytest.fail(f"{bench} is not built", pytrace=False)
    header = REPO / "targets" / "rw_locks" / "rw_locks.hpp"
    with hung(bench, "--variant", "1.4-flawed", ready="rw_locks_bench: RW 1.4 deadlocked") as pid:
        doc = json_doc(gdb_on(pid, "deadlocks --json", libc_debug=libc_debug))
    assert {t["name"] for t in doc["threads"]} == {"rw_locks_bench"}
    locks = {lock["address"]: lock["name"] for lock in doc["locks"]}
    # the threads by the lock each waits on: reader A (the main thread), reader B, the writer
    role = {t["num"]: {"this->mutex_rcount_": "A", "this->sema_writer_pending_": "B",
                       "this->sema_w_": "W"}[locks[t["waits"]]] for t in doc["threads"]}
    assert next(t["lwp"] for t in doc["threads"] if role[t["num"]] == "A") == pid
    # A -> B -> the writer -> A, as the benchmark says; A, the main thread, is thread 1
    assert [[(role[e["waiter"]], locks[e["lock"]], role[e["holder"]], e["inferred"]) for e in c]
            for c in doc["cycles"]] == [[("A", "this->mutex_rcount_", "B", False),
                                         ("B", "this->sema_writer_pending_", "W", True),
                                         ("W", "this->sema_w_", "A", True)]]
    assert doc["cycles"][0][0]["waiter"] == 1
    unlock = _line_of(header, "call(Point::reader_unlock_begins);") + 1
    sem_wait = _line_of(header, "while (sem_wait(&sem_) != 0 && errno == EINTR)")
    where = {role[t["num"]]: f"{t['where']['file']}:{t['where']['line']}"
             for t in doc["threads"]}
    assert where == {"A": f"rw_locks.hpp:{unlock}", "B": f"rw_locks.hpp:{sem_wait}",
                     "W": f"rw_locks.hpp:{sem_wait}"}


def test_the_table_gives_the_same_report_as_debug_info() -> None:
    with hung(program("deadlock_cases"), "rwlock") as pid:
        out = gdb_on(pid, "deadlocks --json", "deadlocks --json --layouts table")
    first, _, rest = out.partition("\n}\n")
    debug, table = json_doc(first + "\n}\n"), json_doc(rest)
    assert debug["layouts"] == "debug info" and table["layouts"] == "table"
    assert {**debug, "layouts": "table"} == table


def test_robust_mutexes(libc_debug: bool) -> None:
    with hung(program("deadlock_cases"), "robust") as pid:
        doc = json_doc(gdb_on(pid, "deadlocks --json", libc_debug=libc_debug))
    assert cycles(doc) == [[("abba-1", "lock_b", "abba-2", False),
                            ("abba-2", "lock_a", "abba-1", False)]]
    assert lock_named(doc, "lock_a")["state"]["kind"] == "normal, robust"


def test_condition_variable_and_semaphore_waits_are_no_cycle(libc_debug: bool) -> None:
    with hung(program("deadlock_cases"), "waits") as pid:
        out = gdb_on(pid, "deadlocks", "deadlocks --json", libc_debug=libc_debug)
    doc = json_doc(out)
    assert doc["cycles"] == []
    assert "No deadlock: the wait-for graph has no cycle." in out
    waits = {t["name"]: (t["waits"], t["where"]["line"]) for t in doc["threads"]
             if t["waits"] is not None}
    cond, sem = lock_named(doc, "ready_cond"), lock_named(doc, "slots")
    word = lock_named(doc, "door_word")
    assert waits == {"cond-waiter": (cond["address"],
                                     marker("deadlock_cases.c", "cond-waiter", "WAIT").line),
                     "sem-waiter": (sem["address"],
                                    marker("deadlock_cases.c", "sem-waiter", "WAIT").line),
                     "futex-waiter": (word["address"],
                                      marker("deadlock_cases.c", "futex-waiter", "WAIT").line)}
    assert (word["kind"], word["type"], word["state"]) == ("futex", "unsigned int", {})
    assert cond["type"] == "pthread_cond_t" and cond["state"] == {"waiters": 1}
    assert sem["type"] == "sem_t" and sem["state"] == {"value": 0, "waiters": 1}


def test_process_shared_mutex_owned_by_another_process() -> None:
    with hung(program("deadlock_cases"), "pshared") as pid:
        child = int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])
        doc = json_doc(gdb_on(pid, "deadlocks --json"))
        still_waiting(pid)
    lock = next(lock for lock in doc["locks"] if lock["kind"] == "mutex")
    assert lock["state"]["kind"] == "normal, process-shared" and lock["state"]["owner"] == child
    assert lock["notes"] == [f"owned by LWP {child} of another process, {child} "
                             f"(deadlock_cases): a process-shared lock; run `deadlocks` in "
                             f"process {child} to see what it waits for"]
    assert doc["cycles"] == []


def test_corrupt_lock_word() -> None:
    with hung(program("deadlock_cases"), "corrupt") as pid:
        doc = json_doc(gdb_on(pid, "deadlocks --json"))
        still_waiting(pid)
    assert lock_named(doc, "bad_lock")["notes"] == [
        "the lock word looks corrupt: owner field 2147483632 is no thread id"]
    assert doc["cycles"] == []


def test_program_without_debug_info() -> None:
    with hung(program("deadlock_cases_nodebug"), "abba") as pid:
        out = gdb_on(pid, "deadlocks", "deadlocks --json")
        still_waiting(pid)
    doc = json_doc(out)
    note = ("the program has no debug information: lock names come from its symbol table only, "
            "and there are no source lines")
    assert doc["notes"] == [note] and out.count(f"note: {note}") == 1
    assert cycles(doc) == [[("abba-1", "lock_b", "abba-2", False),
                            ("abba-2", "lock_a", "abba-1", False)]]
    where = {t["name"]: t["where"] for t in doc["threads"] if t["waits"]}
    assert where == {"abba-1": {"function": "abba_first", "file": None, "line": None},
                     "abba-2": {"function": "abba_second", "file": None, "line": None}}


def test_stripped_program() -> None:
    """No symbol table either: the locks have no names and the waits are shown by address, in
    which file, never as `??`."""
    with hung(program("deadlock_cases_stripped"), "abba") as pid:
        out = gdb_on(pid, "deadlocks", "deadlocks --json")
        still_waiting(pid)
    doc = json_doc(out)
    assert len(doc["cycles"]) == 1 and "??" not in out
    where = [t["where"] for t in doc["threads"] if t["waits"]]
    assert len(where) == 2
    for w in where:
        assert re.fullmatch(r"0x[0-9a-f]+ in deadlock_cases_stripped", w["function"]), w
        assert (w["file"], w["line"]) == (None, None)


def test_no_threads_library() -> None:
    with hung(program("deadlock_nothreads")) as pid:
        out = gdb_on(pid, "deadlocks")
        still_waiting(pid)
    assert (f"deadlocks: process {pid} has no threads library (no pthread_mutex_lock in it): "
            "no locks to inspect") in out.splitlines()


def test_watch_runs_until_the_program_hangs() -> None:
    argv = ["gdb", "-nx", "-batch", "-ex", f"source {DBGKIT}", "-ex", "break main", "-ex", "run",
            "-ex", "deadlocks --watch --quiet-seconds 1 --json", "-ex", "kill",
            "--args", str(program("deadlock_cases")), "ring"]
    out = run_gdb(argv).output
    assert "deadlocks: watching process" in out and "made no progress for 1 s: stopped it" in out
    assert cycles(json_doc(out))[0][0] == ("ring-0", "ring[1].guard", "ring-1", False)


def test_needs_a_process_and_good_arguments() -> None:
    prog = str(program("deadlock_cases"))
    out = run_gdb(["gdb", "-nx", "-batch", "-ex", f"source {DBGKIT}", "-ex", "deadlocks",
                   "-ex", "deadlocks --layouts nope", "-ex", "deadlocks -h", prog]).output
    lines = out.splitlines()
    assert "deadlocks: needs a live process (run the program or attach)" in lines
    assert ("deadlocks: argument --layouts: invalid choice: 'nope' (choose from 'auto', "
            "'table')") in lines
    assert any(line.startswith("usage: deadlocks [-h] [--json]") for line in lines)


def test_sources_have_their_markers() -> None:
    assert (SOURCES / "deadlock_cases.c").is_file() and (SOURCES / "deadlock_std.cpp").is_file()


def test_the_table_matches_glibcs_debug_info() -> None:
    """The glibc 2.36 table is what libc6-dbg's types say (scripts/setup.sh installs it)."""
    check = ("python from dbgkit.core.locks import glibc as gl; "
             "from dbgkit.locks.deadlock_probe import _debug_layout; l = _debug_layout(); "
             "print('layout', l.source, l.offsets == gl.TABLE_236.offsets, "
             "l.sizes == gl.TABLE_236.sizes)")
    out = run_gdb(["gdb", "-nx", "-batch", "-ex", f"source {DBGKIT}", "-ex", "break main",
                   "-ex", "run", "-ex", check, "-ex", "kill",
                   "--args", str(program("deadlock_cases")), "abba"]).output
    assert "layout debug info True True" in out.splitlines(), out


def test_watch_says_when_the_program_exits_instead() -> None:
    argv = ["gdb", "-nx", "-batch", "-ex", f"source {DBGKIT}", "-ex", "break main", "-ex", "run",
            "-ex", "deadlocks --watch --quiet-seconds 0", "-ex", "python print('pid', "
            "gdb.selected_inferior().pid)", "-ex", "deadlocks --watch --quiet-seconds 1",
            "--args", str(program("deadlock_cases")), "no-such-case"]
    lines = run_gdb(argv).output.splitlines()
    pid = next(line.split()[1] for line in lines if line.startswith("pid "))
    assert "deadlocks: --quiet-seconds must be above 0, not 0" in lines
    assert f"deadlocks: process {pid} exited before it hung" in lines


def test_a_core_dump(tmp_path: Path) -> None:
    """A core dump of the hung program (gcore) gives the same cycle; it has no thread names."""
    core = tmp_path / "core"
    with hung(program("deadlock_cases"), "abba") as pid:
        gdb_on(pid, f"gcore {core}")
    argv = ["gdb", "-nx", "-batch", "-ex", f"source {DBGKIT}", "-ex", "deadlocks --json",
            "-ex", "deadlocks --watch", str(program("deadlock_cases")), str(core)]
    out = run_gdb(argv).output
    doc = json_doc(out)
    nums = {t["lwp"]: t["num"] for t in doc["threads"]}
    locks = {lock["address"]: lock["name"] for lock in doc["locks"]}
    assert {t["name"] for t in doc["threads"]} == {""}
    owner = {lock["name"]: nums[lock["state"]["owner"]] for lock in doc["locks"]}
    [cycle] = doc["cycles"]
    assert {(e["waiter"], locks[e["lock"]], e["holder"]) for e in cycle} == {
        (owner["lock_a"], "lock_b", owner["lock_b"]), (owner["lock_b"], "lock_a", owner["lock_a"])}
    assert cycle[0]["waiter"] == min(owner.values())
    assert "deadlocks: --watch needs a live process, not a core dump" in out.splitlines()
