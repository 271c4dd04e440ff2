"""The GDB-free logic of `deadlocks`: glibc's lock layouts and states, the lock calls read from
machine code, the wait-for graph and its cycles, the report (and docs/deadlocks.md's examples)."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
from dbgkit.core.locks import glibc as gl
from dbgkit.core.locks.callscan import Insn, lock_events, still_held, trace
from dbgkit.core.locks.progress import parse_stat_times
from dbgkit.core.locks.waitgraph import (
    Hold,
    Report,
    ThreadState,
    Where,
    readers_note,
    render_json,
    render_text,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def mutex_bytes(lock: int, owner: int, kind: int, count: int = 0) -> bytes:
    return struct.pack("<IIiIi", lock, count, owner, 1, kind) + bytes(20)


def rwlock_bytes(readers: int, flags: int = 0, cur_writer: int = 0, shared: int = 0) -> bytes:
    data = bytearray(56)
    struct.pack_into("<I", data, 0, readers)
    struct.pack_into("<ii", data, 24, cur_writer, shared)
    struct.pack_into("<I", data, 48, flags)
    return bytes(data)


# -- layouts and states ------------------------------------------------------------------------


def test_mutex_states() -> None:
    m = gl.decode_mutex(mutex_bytes(2, 4242, 0), gl.TABLE_236)
    assert (m.locked, m.waiters, m.owner, m.kind, m.problem()) == (True, True, 4242, "normal",
                                                                    None)
    robust = gl.decode_mutex(mutex_bytes(0x80000000 | 4242, 4242, 16 | 128), gl.TABLE_236)
    assert robust.kind == "normal, robust" and robust.waiters and robust.problem() is None
    shared = gl.decode_mutex(mutex_bytes(1, 7, 1 | 128, count=3), gl.TABLE_236)
    assert (shared.kind, shared.waiters, shared.count) == ("recursive, process-shared", False, 3)
    assert gl.decode_mutex(mutex_bytes(1, 7, 2 | 32), gl.TABLE_236).kind == \
        "errorcheck, priority-inherit"


def test_corrupt_mutex_words_say_what_is_wrong() -> None:
    def problem(lock: int, owner: int, kind: int = 0) -> str | None:
        return gl.decode_mutex(mutex_bytes(lock, owner, kind), gl.TABLE_236).problem()

    assert problem(2, 0x7FFFFFF0) == "owner field 2147483632 is no thread id"
    assert problem(7, 10) == "lock word 0x7 is none of 0, 1, 2"
    assert problem(0, 10) == "unlocked but owner field 10"
    assert problem(0x80000000 | 11, 10, 16) == \
        "lock word 0x8000000b names thread 11, the owner field 10"
    assert problem(0, -1) is None  # a robust mutex made unusable: PTHREAD_MUTEX_NOTRECOVERABLE


def test_rwlock_sem_cond_states() -> None:
    r = gl.decode_rwlock(rwlock_bytes((2 << 3) | 2, flags=1, cur_writer=0), gl.TABLE_236)
    assert (r.readers, r.write_locked, r.write_phase, r.preference) == (2, True, False,
                                                                         "prefer writers")
    assert gl.decode_rwlock(rwlock_bytes(0, flags=9), gl.TABLE_236).problem() == \
        "flags field 9 is none of 0, 1, 2"
    # a write phase: the reader counted has registered and waits; it holds nothing
    w = gl.decode_rwlock(rwlock_bytes((1 << 3) | 3, cur_writer=5), gl.TABLE_236)
    assert (w.readers, w.waiting_readers) == (0, 1)
    assert gl.rwlock_words(w) == ["1 reader waiting", "write-locked by LWP 5", "prefer readers"]
    assert gl.rwlock_words(gl.decode_rwlock(rwlock_bytes(0, shared=1), gl.TABLE_236)) == \
        ["unlocked", "prefer readers", "process-shared"]
    sem = gl.decode_sem(struct.pack("<QII", (3 << 32) | 0, 0, 0) + bytes(16), gl.TABLE_236)
    assert (sem.value, sem.waiters) == (0, 3)
    cond = bytearray(48)
    struct.pack_into("<I", cond, 36, 2 << 3)
    assert gl.decode_cond(bytes(cond), gl.TABLE_236).waiters == 2


def test_futex_words_lead_back_to_their_lock() -> None:
    assert gl.futex_candidates("mutex", 0x1000, gl.TABLE_236) == [0x1000]
    assert gl.futex_candidates("rwlock", 0x1008, gl.TABLE_236) == [0x1000, 0xFFC]
    assert gl.futex_candidates("cond", 0x1028, gl.TABLE_236) == [0x1000, 0xFFC]


def test_glibc_version_and_table(tmp_path: Path) -> None:
    lib = tmp_path / "libc.so.6"
    lib.write_bytes(b"\0junk GNU C Library (Debian GLIBC 2.36-9) stable release version 2.36.\n")
    assert gl.glibc_version(str(lib)) == "2.36"
    assert gl.glibc_version("/lib/libc-2.31.so") == "2.31"
    assert gl.glibc_version(str(tmp_path / "missing.so")) is None
    assert gl.table_for("2.36", "x86_64") is gl.TABLE_236
    with pytest.raises(gl.LayoutError, match=re.escape(
            "no layout table for glibc 2.31 (the table has 2.36): install its debug info "
            "(libc6-dbg)")):
        gl.table_for("2.31", "x86_64")
    with pytest.raises(gl.LayoutError, match="no glibc layout table for aarch64 "):
        gl.table_for("2.36", "aarch64")


def test_names_normalised_as_the_tables_write_them() -> None:
    assert gl.normalize_function("pthread_mutex_lock@plt") == "pthread_mutex_lock"
    assert gl.normalize_function("sem_wait@@GLIBC_2.34+12") == "sem_wait"
    assert gl.normalize_function("std::lock_guard<std::mutex>::lock_guard(std::mutex&)") == \
        "std::lock_guard<std::mutex>::lock_guard"
    assert gl.normalize_function("operator()") == "operator"  # no table holds it: harmless


# -- lock calls in machine code ----------------------------------------------------------------


def code(*lines: str, base: int = 0x1000) -> list[Insn]:
    return [Insn(base + 4 * i, 4, text) for i, text in enumerate(lines)]


def test_o0_code_rip_relative_locks_and_guards() -> None:
    memory = {0x7000 - 0x18: 0x5000}  # `this` spilled at -0x18(%rbp)
    insns = code(
        "lea    0x2e9e(%rip),%rax        # 0x4040 <lock_a>",
        "mov    %rax,%rdi",
        "call   0x1030 <pthread_mutex_lock@plt>",
        "mov    -0x18(%rbp),%rax",
        "lea    0x28(%rax),%rdx",
        "lea    -0x20(%rbp),%rax",
        "mov    %rdx,%rsi",
        "mov    %rax,%rdi",
        "call   0x2000 <_ZNSt10lock_guardISt5mutexEC2ERS0_>",
        "lea    0x2e9e(%rip),%rax        # 0x4040 <lock_a>",
        "mov    %rax,%rdi",
        "call   0x1040 <pthread_mutex_unlock@plt>",
        "lea    0x2e9e(%rip),%rax        # 0x4080 <lock_b>",
        "mov    %rax,%rdi",
        "call   0x1030 <pthread_mutex_lock@plt>",
    )
    demangled = {"_ZNSt10lock_guardISt5mutexEC2ERS0_":
                 "std::lock_guard<std::mutex>::lock_guard(std::mutex&)"}
    events = lock_events(insns, {"rbp": 0x7000}, memory.get,
                         lambda n: demangled.get(n, n))
    assert [(e.function, e.lock) for e in events] == [
        ("pthread_mutex_lock", 0x4040), ("std::lock_guard<std::mutex>::lock_guard", 0x5028),
        ("pthread_mutex_unlock", 0x4040), ("pthread_mutex_lock", 0x4080)]
    # the last call is the one the frame is in: what it holds is what came before
    assert [e.lock for e in still_held(events[:-1])] == [0x5028]


def test_o2_code_registers_from_the_frame_and_out_of_line_branches() -> None:
    # the shape GCC gives RW 1.4's writer: `this` kept in rbx, loaded from the closure in rbp,
    # the first writer's sem_wait moved past the rest of the function
    insns = code(
        "push   %rbp",
        "mov    %rdi,%rbp",
        "push   %rbx",
        "mov    0x8(%rdi),%rbx",
        "lea    0x28(%rbx),%r12",
        "mov    %r12,%rdi",
        "call   0x3000 <pthread_mutex_lock@plt>",
        "test   %rax,%rax",
        "je     0x1040 <f+64>",
        "mov    %r12,%rdi",
        "call   0x3010 <pthread_mutex_unlock@plt>",
        "add    $0x50,%rbx",
        "mov    %rbx,%rdi",
        "call   0x3020 <sem_wait@plt>",
        "ret",
        "nop",
        "lea    0x70(%rbx),%rdi",        # 0x1040: the out-of-line block
        "call   0x3020 <sem_wait@plt>",
        "jmp    0x1024 <f+36>",
    )
    pc = insns[13].address + 4  # the frame is in the last sem_wait
    memory = {0x9000 + 8: 0x5000}
    frame_regs = {"rbp": 0x9000, "rbx": 0x5050, "r12": 0x5028}
    traced = trace(insns, pc)
    assert [i.address for i in traced] == [*(0x1000 + 4 * n for n in range(9)), 0x1040, 0x1044,
                                           0x1048, *(0x1024 + 4 * n for n in range(5))]
    events = lock_events(traced, frame_regs, memory.get)
    assert [(e.function, e.lock) for e in events] == [
        ("pthread_mutex_lock", 0x5028), ("sem_wait", 0x5070), ("pthread_mutex_unlock", 0x5028),
        ("sem_wait", 0x5050)]
    assert [(e.call.kind, e.lock) for e in still_held(events[:-1])] == [("sem", 0x5070)]


def test_unknown_arguments_stay_unknown() -> None:
    insns = code("mov    (%rax,%rcx,8),%rdi", "call   0x3000 <pthread_mutex_lock@plt>",
                 "mov    %fs:0x28,%rdi", "call   0x3020 <sem_post@plt>",
                 "call   *%rax")
    events = lock_events(insns, {}, lambda a: None)
    assert [(e.function, e.lock) for e in events] == [("pthread_mutex_lock", None),
                                                      ("sem_post", None)]
    assert still_held(events) == []


def test_guards_release_the_mutex_they_hold() -> None:
    insns = code("lea    -0x20(%rbp),%rax", "mov    %rax,%rdi",
                 "call   0x2000 <std::lock_guard<std::mutex>::~lock_guard()>",
                 "lea    -0x30(%rbp),%rdi",
                 "call   0x2100 <std::unique_lock<std::mutex>::unlock()>",
                 "lea    -0x30(%rbp),%rdi",
                 "call   0x2200 <std::shared_lock<std::shared_mutex>::lock()>")
    memory = {0x7000 - 0x20: 0x5028, 0x7000 - 0x30: 0x5050}
    events = lock_events(insns, {"rbp": 0x7000}, memory.get)
    assert [(e.call.op, e.call.mode, e.lock) for e in events] == [
        ("release", "", 0x5028), ("release", "", 0x5050), ("acquire", "read", 0x5050)]


# -- the graph ---------------------------------------------------------------------------------


def rwlock_report() -> Report:
    """The report of `deadlock_cases rwlock` (tests/programs), as one real run gave it."""
    table, state = 0x55A096F24200, 0x55A096F24240
    locks = {
        table: gl.LockInfo(table, "rwlock", gl.RwlockState((1 << 3) | 2, 0, 0, 0, 0),
                           "table_lock", "pthread_rwlock_t",
                           [readers_note(1, [2])]),
        state: gl.LockInfo(state, "mutex", gl.MutexState(2, 0, 7836, 1, 0), "state_lock",
                           "pthread_mutex_t"),
    }
    threads = [
        ThreadState(1, 7834, "deadlock_cases", note="in __libc_pause"),
        ThreadState(2, 7835, "reader", state, "", Where("rw_reader", "deadlock_cases.c", 96),
                    [Hold(table, "read", True)]),
        ThreadState(3, 7836, "writer", table, "write",
                    Where("rw_writer", "deadlock_cases.c", 106), [Hold(state, "", False)]),
    ]
    return Report(7834, "debug info", "2.36", threads, locks)


def join_report() -> Report:
    """The report of `deadlock_cases join`, as one real run gave it: the main thread holds
    join_lock and joins the worker, which waits for it."""
    lock = 0x561D6827A360
    locks = {lock: gl.LockInfo(lock, "mutex", gl.MutexState(2, 0, 8018, 1, 0), "join_lock",
                               "pthread_mutex_t")}
    threads = [
        ThreadState(1, 8018, "deadlock_cases", where=Where("main", "deadlock_cases.c", 291),
                    holds=[Hold(lock, "", False)], joins=8019),
        ThreadState(2, 8019, "worker", lock, "", Where("join_worker", "deadlock_cases.c", 161)),
        ThreadState(3, 8020, "announcer", note="in __libc_pause"),
    ]
    return Report(8018, "debug info", "2.36", threads, locks)


def test_a_join_is_an_edge_to_the_joined_thread() -> None:
    report = join_report()
    assert [(e.waiter, e.holder, e.lock) for e in report.edges()] == [
        (1, 2, None), (2, 1, 0x561D6827A360)]
    assert [[(e.waiter, e.holder) for e in c] for c in report.cycles()] == [[(1, 2), (2, 1)]]
    # a join of an LWP that is none of the threads is no edge
    report.threads[0].joins = 9999
    assert [(e.waiter, e.holder) for e in report.edges()] == [(2, 1)]


def test_join_report_is_the_fixture() -> None:
    assert render_text(join_report()) == (FIXTURES / "deadlocks.join.txt").read_text()
    assert doc_block("joins the worker") == (FIXTURES / "deadlocks.join.txt").read_text()
    rendered = json.dumps(render_json(join_report()), indent=2, sort_keys=True) + "\n"
    assert rendered == (FIXTURES / "deadlocks.join.json").read_text()


def test_readers_against_the_threads_that_took_the_lock() -> None:
    assert readers_note(2, [3, 5]) == ("2 readers hold it (glibc keeps their count, not who "
                                       "they are)")
    assert readers_note(1, [2, 4]) == ("1 reader, 2 candidates (threads 2 and 4): glibc keeps "
                                       "the readers' count, not who they are; not every "
                                       "candidate holds it")
    assert readers_note(3, [2]) == ("3 readers, 1 candidate (thread 2): glibc keeps the "
                                    "readers' count, not who they are; some readers' code does "
                                    "not show it (taken in a function that has returned)")
    assert readers_note(1, []).startswith("1 reader, 0 candidates: ")


def test_cycles_start_at_the_lowest_thread_and_follow_the_edges() -> None:
    report = rwlock_report()
    assert [[(e.waiter, e.holder, e.inferred) for e in c] for c in report.cycles()] == \
        [[(2, 3, False), (3, 2, True)]]
    # a reader waiting for the rwlock does not wait for the thread reading it (no 4 -> 2)
    reader2 = ThreadState(4, 7837, "reader-2", 0x55A096F24200, "read", None,
                          [Hold(0x55A096F24240, "", False)])
    report.threads.append(reader2)
    assert [(e.waiter, e.holder) for e in report.edges()] == [(2, 3), (2, 4), (3, 2)]


def test_three_cycles_sharing_threads_each_once() -> None:
    a, b, c = 0x10, 0x20, 0x30
    locks = {x: gl.LockInfo(x, "mutex") for x in (a, b, c)}
    threads = [ThreadState(5, 105, "t5", a, holds=[Hold(c, "", False)]),
               ThreadState(6, 106, "t6", b, holds=[Hold(a, "", False)]),
               ThreadState(7, 107, "t7", c, holds=[Hold(b, "", False)]),
               ThreadState(8, 108, "t8", a, holds=[])]
    report = Report(1, "table", "2.36", threads, locks)
    assert [[e.waiter for e in cyc] for cyc in report.cycles()] == [[5, 6, 7]]


def doc_block(title: str) -> str:
    """The first fenced block after the heading TITLE in docs/deadlocks.md."""
    text = (REPO / "docs" / "deadlocks.md").read_text()
    after = text[text.index(title):]
    match = re.search(r"```[a-z]*\n(.*?)```", after, re.S)
    assert match, f"no fenced block after {title!r}"
    return match.group(1)


def test_json_report_is_the_fixture_and_the_docs_example() -> None:
    fixture = (FIXTURES / "deadlocks.rwlock.json").read_text()
    rendered = json.dumps(render_json(rwlock_report()), indent=2, sort_keys=True) + "\n"
    assert rendered == fixture
    assert doc_block("### Worked example") == fixture


def test_text_report_is_the_fixture_and_the_docs_example() -> None:
    fixture = (FIXTURES / "deadlocks.rwlock.txt").read_text()
    assert render_text(rwlock_report()) == fixture
    assert doc_block("## The report") == fixture


def test_stat_times_with_a_name_holding_parentheses() -> None:
    line = "42 (a) (b c) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 100 0 0"
    assert parse_stat_times(line) == 12
