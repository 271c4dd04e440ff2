"""The printers' GDB-free checks (dbgkit.core.containers): ring indices, deque sizes, bitmaps,
shmemq headers and glibc lock words."""

from __future__ import annotations

import pytest
from dbgkit.core.containers import (
    FUTEX_OWNER_DIED,
    FUTEX_WAITERS,
    bitmap_free,
    c_string,
    deque_size,
    mutex_state,
    ring_state,
    shmemq_count_problem,
    shmemq_magic_problem,
)


def test_a_ring_that_wrapped_lists_its_slots_oldest_first() -> None:
    state = ring_state(head=1, tail=4, slots=6)
    assert (state.size, state.capacity, state.problem) == (3, 5, None)
    assert list(state.indices()) == [4, 5, 0]


def test_empty_and_full_rings() -> None:
    assert ring_state(3, 3, 9).size == 0
    full = ring_state(head=2, tail=3, slots=9)  # head + 1 == tail: full
    assert (full.size, full.capacity) == (8, 8)
    assert list(full.indices()) == [3, 4, 5, 6, 7, 8, 0, 1]


@pytest.mark.parametrize(("head", "tail", "slots", "problem"), [
    (9, 0, 9, "head 9 > capacity 8"),
    (0, 12, 9, "tail 12 > capacity 8"),
    (0, 0, 0, "no slots (not constructed)"),
    (0, 0, (1 << 32) + 1, "4294967297 slots"),
])
def test_inconsistent_rings_are_named_and_list_nothing(head: int, tail: int, slots: int,
                                                       problem: str) -> None:
    state = ring_state(head, tail, slots)
    assert state.problem == problem
    assert state.size == 0 and list(state.indices()) == []


def test_deque_size_is_libstdcxx_iterator_difference() -> None:
    # one node: elements from offset 2 to 7
    assert deque_size(128, 10, 10, 2, 7, 8) == 5
    # three nodes: 126 in the first (from offset 2), 128 in the middle, 3 in the last
    assert deque_size(128, 10, 12, 2, 3, 8) == 126 + 128 + 3
    assert deque_size(128, 10, 10, 0, 0, 1) == 0  # empty


@pytest.mark.parametrize(("fields", "problem"), [
    ((0, 0, 0, 0, 0, 8), "buffer of 0 elements"),
    ((8, 5, 3, 0, 0, 8), "finish node -2 nodes before start"),
    ((8, 5, 13, 0, 0, 8), r"9 nodes past the map's end \(8 left\)"),
    ((8, 5, 6, 8, 0, 8), "start at 8 in a buffer of 8"),
    ((8, 5, 6, 0, -1, 8), "finish at -1 in a buffer of 8"),
])
def test_a_deque_no_libstdcxx_could_build_is_refused(fields: tuple[int, ...],
                                                     problem: str) -> None:
    with pytest.raises(ValueError, match=f"^{problem}$"):
        deque_size(*fields)


def test_bitmap_free_counts_set_bits_of_the_segment_only() -> None:
    assert bitmap_free(0) == 0
    assert bitmap_free(0xFFFFFFFFFFFFFFC0) == 58
    assert bitmap_free((1 << 70) | 0b1011) == 3


def test_shmemq_header_checks() -> None:
    magic = int.from_bytes(b"DBGSHMQ\0", "little")
    assert shmemq_magic_problem(magic, 77) is None
    assert shmemq_magic_problem(0, 4242) == "being initialised by pid 4242"
    assert shmemq_magic_problem(0, 0) == "bad magic 0x0"
    assert shmemq_magic_problem(0x1234, 5) == "bad magic 0x1234"
    assert shmemq_count_problem(3, 1, 8) is None
    assert shmemq_count_problem(3, 5, 8) == "read_count 5 > write_count 3"
    assert shmemq_count_problem(20, 1, 8) == "19 queued > max_count 8"


def test_mutex_state_reads_normal_and_robust_lock_words() -> None:
    assert mutex_state(0, 0) == "unlocked"
    assert mutex_state(1, 4321) == "locked by LWP 4321"
    assert mutex_state(2, 4321) == "locked by LWP 4321, waiters"
    assert mutex_state(4321 | FUTEX_WAITERS, 4321) == "locked by LWP 4321, waiters"
    assert mutex_state(4321 | FUTEX_OWNER_DIED, 4321) == "locked by LWP 4321, owner died"
    assert mutex_state(1, 0) == "locked (no owner recorded)"


def test_c_string_stops_at_nul_and_escapes_what_is_not_printable() -> None:
    assert c_string(b"/queue\0garbage") == '"/queue"'
    assert c_string(b"a\nb\x1b[31m\xff") == '"a\\x0ab\\x1b[31m\\xff"'
    assert c_string(b'say "\\hi"') == '"say \\"\\\\hi\\""'
    assert c_string(b"") == '""'
