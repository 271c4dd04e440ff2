"""contention's GDB-free core: which libc frames are a lock wait, samples grouped by lock and
stack, and the table and JSON of docs/contention.md (their worked examples are the fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbgkit.core.locks import contention
from dbgkit.core.locks.contention import Frame, Sample, SampleRun
from doc_examples import doc_block
from memdump_analyzer.rules import is_lock_wrapper

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.mark.parametrize(("name", "plain"), [
    ("__GI___lll_lock_wait", "lll_lock_wait"), ("___pthread_mutex_lock", "pthread_mutex_lock"),
    ("__pthread_rwlock_wrlock_full64", "pthread_rwlock_wrlock_full64"), (None, ""),
    ("futex_wait", "futex_wait"),
])
def test_normalise(name: str | None, plain: str) -> None:
    assert contention.normalise(name) == plain


def test_lock_call_with_and_without_glibc_debug_info() -> None:
    # with libc6-dbg: the inlined futex_wait and lll_mutex_lock_optimized are frames
    assert contention.lock_call(["futex_wait", "__GI___lll_lock_wait", "lll_mutex_lock_optimized",
                                 "___pthread_mutex_lock"]) == (3, "mutex", "", True)
    # without: the exported symbols only
    assert contention.lock_call(["__lll_lock_wait", "pthread_mutex_lock"]) == (1, "mutex", "",
                                                                               True)
    # a robust mutex waits in __pthread_mutex_lock_full; the outermost entry point decides
    assert contention.lock_call(["futex_wait", "__pthread_mutex_lock_full",
                                 "___pthread_mutex_lock"]) == (2, "mutex", "", True)
    assert contention.lock_call(["__futex_abstimed_wait_common64", "__futex_abstimed_wait_common",
                                 "__pthread_rwlock_rdlock_full64", "___pthread_rwlock_rdlock"]
                                ) == (3, "rwlock", "read", True)


def test_what_is_not_a_lock_wait() -> None:
    # pthread_join and a condition variable's own wait block in a futex, for no lock
    assert contention.lock_call(["__futex_abstimed_wait_common64", "__futex_abstimed_wait_common",
                                 "__GI___futex_abstimed_wait_cancelable64",
                                 "__pthread_clockjoin_ex"]) is None
    assert contention.lock_call(["__futex_abstimed_wait_common", "___pthread_cond_wait"]) is None
    assert contention.lock_call([]) is None
    # on the CPU in a lock call: seen, not blocked
    assert contention.lock_call(["lll_mutex_lock_optimized", "___pthread_mutex_lock"]
                                ) == (1, "mutex", "", False)
    assert contention.lock_call(["futex_wake", "__pthread_mutex_unlock_full",
                                 "__GI___pthread_mutex_unlock_usercnt", "___pthread_mutex_unlock"]
                                ) == (3, "mutex", "", False)


LOCK_LINE = (Frame("queue_lock", "/src/shmemq.c", 677), Frame("shmemq_try_enqueue",
             "/src/shmemq.c", 739), Frame("main", "/src/bench.cpp", 348))
DEQ = (Frame("queue_lock", "/src/shmemq.c", 677), Frame("shmemq_try_dequeue_len",
       "/src/shmemq.c", 802), Frame("main", "/src/bench.cpp", 348))
RW = (Frame("reader", "/src/rw.c", 12),)
A, B = 0x7FFFF7FBE080, 0x7FFFF7FBC080


def _run() -> SampleRun:
    q = {"name": "q->hdr->mutex", "scope": "queue_lock"}
    run = SampleRun(5, 0.05, 10)
    run.found = [
        [Sample(A, "mutex", "", 100, LOCK_LINE, owner=200, **q),
         Sample(B, "mutex", "", 101, DEQ, owner=201, **q)],
        [Sample(A, "mutex", "", 100, LOCK_LINE, owner=200, **q)],
        [Sample(A, "mutex", "", 101, DEQ, owner=202, **q),
         Sample(0x5000, "rwlock", "read", 102, RW, owner=0, name="table_lock")],
        [Sample(B, "mutex", "", 100, LOCK_LINE, name="q->hdr->mutex", scope="queue_unlock",
                blocked=False)],
        [],
    ]
    return run


def test_aggregate_by_lock_and_stack() -> None:
    locks = contention.aggregate(_run(), is_lock_wrapper)
    assert [(r.address, r.waiting, r.in_call, r.samples) for r in locks] == [
        (A, 3, 0, 3), (B, 1, 1, 1), (0x5000, 1, 0, 1)]
    first = locks[0]
    assert first.stacks.most_common() == [(LOCK_LINE, 2), (DEQ, 1)]
    assert first.owners == {200: 2, 202: 1} and first.waiters == {100, 101}
    # the name stays the waiters' one even when a call in another function named it first
    assert (locks[1].name, locks[1].scope) == ("q->hdr->mutex", "queue_lock")
    assert locks[2].modes == {"read": 1}


def test_aggregate_a_lock_without_address_by_stack() -> None:
    run = SampleRun(2, 0.02, 10)
    run.found = [[Sample(None, "rwlock", "write", 7, RW)], [Sample(None, "rwlock", "write", 7, RW),
                                                            Sample(None, "rwlock", "", 8, RW,
                                                                   blocked=False)]]
    (only,) = contention.aggregate(run, is_lock_wrapper)
    assert (only.address, only.waiting, only.samples) == (None, 2, 2)


def test_aggregate_trims_the_lock_wrappers_it_is_handed() -> None:
    wrapped = (Frame("__gthread_mutex_lock(pthread_mutex_t*)", "/usr/include/gthr-default.h",
                     749), Frame("std::mutex::lock()", "/usr/include/std_mutex.h", 113),
               Frame("std::lock_guard<std::mutex>::lock_guard(std::mutex&)",
                     "/usr/include/std_mutex.h", 249), *LOCK_LINE)
    run = SampleRun(2, 0.02, 10)
    run.found = [[Sample(A, "mutex", "", 100, wrapped)], [Sample(A, "mutex", "", 100, LOCK_LINE)],
                 [Sample(B, "mutex", "", 100, wrapped[:3])]]
    first, second = contention.aggregate(run, is_lock_wrapper)
    assert first.stacks == {LOCK_LINE: 2}
    assert second.stacks == {wrapped[:3]: 1}  # nothing but wrappers: kept whole
    (first, second) = contention.aggregate(run, lambda function: False)
    assert first.stacks == {wrapped: 1, LOCK_LINE: 1}


NAMES = {100: "shmemq_bench", 101: "shmemq_bench", 102: "reader"}
# owners that are no thread of this process (locks.sampler.owner_states)
STATES = {200: "another process", 201: "another process", 202: "no such thread"}


def test_json_is_the_fixture_and_the_docs_example() -> None:
    run = _run()
    locks = contention.aggregate(run, is_lock_wrapper)
    text = json.dumps(contention.render_json(run, locks, NAMES, STATES), indent=2) + "\n"
    assert text == (FIXTURES / "contention.json").read_text()
    assert doc_block("contention.md", "### JSON worked example", "json") == text


def test_table_is_the_docs_example() -> None:
    run = _run()
    text = contention.render_table(run, contention.aggregate(run, is_lock_wrapper), NAMES,
                                   top_stacks=1, states=STATES)
    assert "   1        3        0        3        2  mutex         0x7ffff7fbe080     " \
           "200 (not in this process) q->hdr->mutex in queue_lock" in text
    assert "  ... 1 more stack(s) (--json lists them all)" in text
    assert doc_block("contention.md", "### Table worked example") == text


def test_an_owner_that_is_no_thread_says_so() -> None:
    run = SampleRun(1, 0.01, 10, found=[[Sample(0x5000, "mutex", "", 100, (), owner=2147483632,
                                               name="bad_lock")]])
    text = contention.render_table(run, contention.aggregate(run, is_lock_wrapper), NAMES,
                                   states={2147483632: "no such thread"})
    assert "2147483632 (no such thread) bad_lock" in text
    doc = contention.render_json(run, contention.aggregate(run, is_lock_wrapper), NAMES,
                                 {2147483632: "no such thread"})
    assert doc["locks"][0]["owners"] == [  # type: ignore[index]
        {"tid": 2147483632, "name": None, "thread": "no such thread", "samples": 1}]


def test_nothing_seen_and_an_early_end_say_so() -> None:
    run = SampleRun(3, 0.03, 10, ended="the program exited")
    text = contention.render_table(run, [], {})
    assert text.splitlines()[1:] == ["contention: sampling stopped early: the program exited",
                                     "no thread was seen in a lock call"]
