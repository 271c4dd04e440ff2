"""The replay: each operation's effect on the live blocks, the counts, the peak and the errors."""

from __future__ import annotations

from pathlib import Path

from analyzer_testlib import FIXTURES, LIBC, Dump, F, main_at
from memdump_analyzer import Analysis, analyze, render_json, render_text


def replayed(d: Dump, tmp_path: Path, *, end: bool = True) -> Analysis:
    if end:
        d.end()
    return analyze(d.write(tmp_path))


def live(a: Analysis) -> dict[int, int]:
    """Bytes and blocks of each group, keyed by the line of the group's first frame."""
    return {g.stack[0].line or 0: (g.bytes, g.blocks) for g in a.groups}  # type: ignore[misc]


def test_example_fixture() -> None:
    a = analyze(str(FIXTURES / "example.memdump"))
    assert (a.leaked_bytes, a.leaked_blocks) == (112, 3)
    assert (a.runtime_bytes, a.runtime_blocks) == (0, 0)
    # the list head leads its node: 96 (40 direct, 56 indirect) bytes, sorted first
    assert [(g.kind, g.leak_kind, g.stack[0].line, g.bytes, g.blocks, g.indirect_bytes,
             g.indirect_blocks) for g in a.leaks] == [
        ("leak", "definite", 9, 40, 1, 56, 1),
        ("leak", "indirect", 10, 56, 1, 0, 0),
        ("leak", "definite", 3, 16, 1, 0, 0),
    ]
    group = a.leaks[2]
    assert [(f.function, f.file, f.line, f.inlined) for f in group.stack] == [
        ("new_node", "/src/leak.c", 3, True), ("main", "/src/leak.c", 7, False)]
    assert group.stack[0].module == "/src/leak"
    assert (a.allocations, a.frees, a.allocated_bytes) == (4, 1, 128)
    assert (a.peak_bytes, a.peak_blocks, a.peak_seq) == (112, 3, 5)
    assert a.events == 5
    assert a.calls["malloc"] == 4 and a.calls["free"] == 1
    assert a.complete and a.end is not None
    assert (a.end.reason, a.end.detail, a.end.seq) == ("exit", "0", 6)
    assert (a.program, a.pid) == ("/src/leak", 4242)
    assert a.errors == [] and a.warnings() == []


def test_malloc_failure_and_free_null(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x0", 1 << 50, main_at(3))
    dump.free("0x0", main_at(4))
    a = replayed(dump, tmp_path)
    assert a.groups == [] and a.errors == []
    assert a.calls["malloc"] == 1 and a.calls["free"] == 1
    assert (a.allocations, a.frees, a.allocated_bytes) == (0, 0, 0)
    assert a.peak_seq is None and a.peak_stack == ()


def test_realloc_null_is_malloc(tmp_path: Path, dump: Dump) -> None:
    dump.e("realloc", "0x10", "0x0", 24, stack=main_at(3))
    a = replayed(dump, tmp_path)
    assert live(a) == {3: (24, 1)}
    assert (a.allocations, a.frees, a.allocated_bytes) == (1, 0, 24)
    assert a.calls["realloc"] == 1


def test_realloc_moves_a_block(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, main_at(3))
    dump.e("realloc", "0x20", "0x10", 40, stack=main_at(4))
    dump.e("realloc", "0x20", "0x20", 50, stack=main_at(5))  # grown in place
    a = replayed(dump, tmp_path)
    assert live(a) == {5: (50, 1)}
    assert (a.allocations, a.frees, a.allocated_bytes) == (3, 2, 106)
    assert (a.peak_bytes, a.peak_blocks, a.peak_seq) == (50, 1, 3)
    assert a.errors == []


def test_realloc_to_zero_frees(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, main_at(3))
    dump.e("realloc", "0x0", "0x10", 0, stack=main_at(4))
    dump.free("0x10", main_at(5))  # freed by the realloc: a double free
    a = replayed(dump, tmp_path)
    assert a.groups == []
    assert (a.allocations, a.frees) == (1, 1)
    [error] = a.errors
    assert (error.kind, error.seq, error.freed_seq) == ("double-free", 3, 2)


def test_realloc_to_zero_returning_a_block(tmp_path: Path, dump: Dump) -> None:
    # not glibc: the old block is freed, the new one is live with 0 bytes
    dump.malloc("0x10", 16, main_at(3))
    dump.e("realloc", "0x30", "0x10", 0, stack=main_at(4))
    a = replayed(dump, tmp_path)
    assert live(a) == {4: (0, 1)}
    assert a.frees == 1


def test_failed_realloc_keeps_the_block(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, main_at(3))
    dump.e("realloc", "0x0", "0x10", 1 << 60, stack=main_at(4))
    a = replayed(dump, tmp_path)
    assert live(a) == {3: (16, 1)}
    assert (a.allocations, a.frees, a.allocated_bytes) == (1, 0, 16)
    assert a.errors == []


def test_reallocarray(tmp_path: Path, dump: Dump) -> None:
    dump.e("reallocarray", "0x10", "0x0", 4, 10, stack=main_at(3))  # as malloc(40)
    dump.e("reallocarray", "0x20", "0x10", 8, 10, stack=main_at(4))
    dump.e("reallocarray", "0x0", "0x20", 1 << 40, 1 << 40, stack=main_at(5))  # overflow: fails
    a = replayed(dump, tmp_path)
    assert live(a) == {4: (80, 1)}
    assert (a.allocations, a.frees, a.allocated_bytes) == (2, 1, 120)
    assert a.calls["reallocarray"] == 3


def test_reallocarray_to_zero_frees(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, main_at(3))
    dump.e("reallocarray", "0x0", "0x10", 0, 8, stack=main_at(4))
    a = replayed(dump, tmp_path)
    assert a.groups == [] and a.frees == 1 and a.errors == []


def test_calloc_sizes(tmp_path: Path, dump: Dump) -> None:
    dump.e("calloc", "0x10", 3, 8, stack=main_at(3))
    dump.e("calloc", "0x0", 1 << 40, 1 << 40, stack=main_at(4))  # nmemb*size overflows: fails
    dump.e("calloc", "0x7f0000000000", 70000, 70000, stack=main_at(5))  # 4.9 GB, no overflow
    a = replayed(dump, tmp_path)
    assert live(a) == {5: (4_900_000_000, 1), 3: (24, 1)}
    assert a.allocated_bytes == 4_900_000_024
    assert a.calls["calloc"] == 3 and a.allocations == 2


def test_posix_memalign_rc(tmp_path: Path, dump: Dump) -> None:
    dump.e("posix_memalign", "0x40", 64, 100, 0, stack=main_at(3))
    dump.e("posix_memalign", "0x0", 64, 1 << 60, 12, stack=main_at(4))
    # RESULT means nothing when RC is not 0 (the pointer was not stored)
    dump.e("posix_memalign", "0x7ffc0000", 3, 100, 22, stack=main_at(5))
    a = replayed(dump, tmp_path)
    assert live(a) == {3: (100, 1)}
    assert a.calls["posix_memalign"] == 3 and a.allocations == 1


def test_aligned_and_page_allocations(tmp_path: Path, dump: Dump) -> None:
    dump.e("aligned_alloc", "0x40", 64, 128, stack=main_at(3))
    dump.e("memalign", "0x80", 32, 96, stack=main_at(4))
    dump.e("valloc", "0x1000", 10, stack=main_at(5))
    dump.e("pvalloc", "0x2000", 10, stack=main_at(6))  # counts what was asked for
    dump.e("memalign", "0x0", 32, 1 << 60, stack=main_at(7))
    a = replayed(dump, tmp_path)
    assert live(a) == {3: (128, 1), 4: (96, 1), 5: (10, 1), 6: (10, 1)}
    assert [a.calls[op] for op in ("aligned_alloc", "memalign", "valloc", "pvalloc")] == [
        1,
        2,
        1,
        1,
    ]
    assert a.events == 5


def test_exec_drops_every_live_block(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, main_at(3))
    dump.free("0x10", main_at(4))
    dump.malloc("0x20", 64, main_at(5))
    seq = dump.p("exec", "/usr/bin/other program\\n2")  # escaped like a string
    dump.malloc("0x30", 8, main_at(6))
    dump.free("0x10", main_at(7))  # the old image's block: unknown in the new one
    a = replayed(dump, tmp_path)
    assert live(a) == {6: (8, 1)}
    assert a.execs == [(seq, "/usr/bin/other program\n2")]
    assert [e.kind for e in a.errors] == ["invalid-free"]
    assert a.peak_bytes == 64


def test_process_events(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, main_at(3))
    seq = dump.p("signal", "SIGSEGV")
    dump.p("thread-exit", "101")
    dump.p("phase", "level 2")  # memdump_api.h's phases (2.2) are known: no warning
    dump.p("new-kind-of-event", "x")
    dump.p("new-kind-of-event", "y")
    a = replayed(dump, tmp_path)
    assert a.signals == [(seq, "SIGSEGV")]
    assert a.warnings() == [  # no writer emits `thread-exit`: it is skipped like any unknown
        f"skipped process events of unknown kind 'thread-exit' (first at event {seq + 1})",
        f"skipped process events of unknown kind 'new-kind-of-event' (first at event {seq + 3})",
    ]


def test_records_after_the_end_make_the_dump_incomplete(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, main_at(3))
    dump.end()
    dump.malloc("0x20", 16, main_at(4))
    a = replayed(dump, tmp_path, end=False)
    assert not a.complete and a.end is None
    assert a.leaked_blocks == 2


def test_peak(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 100, main_at(3))
    dump.malloc("0x20", 50, main_at(4))
    dump.free("0x10", main_at(5))
    peak = dump.malloc("0x30", 120, main_at(6))  # 170 bytes in 2 blocks
    dump.free("0x30", main_at(7))
    dump.malloc("0x40", 120, main_at(8))  # 170 again: not a new peak
    a = replayed(dump, tmp_path)
    assert (a.peak_bytes, a.peak_blocks, a.peak_seq) == (170, 2, peak)
    assert a.peak_stack[0].line == 6


def test_double_free_shows_where_it_was_freed(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, main_at(10))
    freed = dump.free("0x10", main_at(11))
    again = dump.e("free", "-", "0x10", stack=main_at(12), tid=101)
    dump.malloc("0x10", 16, main_at(13))  # the address is reused: freeing it now is fine
    dump.free("0x10", main_at(14))
    a = replayed(dump, tmp_path)
    [error] = a.errors
    assert (error.kind, error.op, error.seq, error.tid, error.pointer) == (
        "double-free",
        "free",
        again,
        101,
        0x10,
    )
    assert [(f.function, f.line) for f in error.stack] == [("main", 12)]
    assert error.freed_seq == freed
    assert error.freed_stack is not None
    assert [(f.function, f.line) for f in error.freed_stack] == [("main", 11)]
    assert a.error_count == 1 and a.frees == 2


def test_invalid_free(tmp_path: Path, dump: Dump) -> None:
    seq = dump.free("0x1234", main_at(3))
    a = replayed(dump, tmp_path)
    [error] = a.errors
    assert (error.kind, error.seq, error.pointer, error.freed_stack) == (
        "invalid-free",
        seq,
        0x1234,
        None,
    )
    assert error.stack[0].line == 3
    assert a.frees == 0


def test_invalid_realloc(tmp_path: Path, dump: Dump) -> None:
    seq = dump.e("realloc", "0x20", "0x99", 8, stack=main_at(3))
    dump.malloc("0x30", 4, main_at(4))
    dump.free("0x30", main_at(5))
    freed = dump.e("realloc", "0x40", "0x30", 8, stack=main_at(6))
    dump.e("realloc", "0x0", "0x77", 0, stack=main_at(7))
    a = replayed(dump, tmp_path)
    assert [(e.kind, e.op, e.seq, e.pointer) for e in a.errors] == [
        ("invalid-realloc", "realloc", seq, 0x99),
        ("invalid-realloc", "realloc", freed, 0x30),
        ("invalid-realloc", "realloc", freed + 1, 0x77),
    ]
    assert a.errors[1].freed_seq == freed - 1
    assert a.errors[0].freed_stack is None
    assert live(a) == {3: (8, 1), 6: (8, 1)}  # the new blocks are live all the same


def test_invalid_reallocarray(tmp_path: Path, dump: Dump) -> None:
    dump.e("reallocarray", "0x20", "0x99", 2, 4, stack=main_at(3))
    a = replayed(dump, tmp_path)
    assert [(e.kind, e.op) for e in a.errors] == [("invalid-realloc", "reallocarray")]


def test_errors_beyond_the_limit_are_counted(tmp_path: Path, dump: Dump) -> None:
    for i in range(1005):
        dump.free(f"0x{0x1000 + i:x}", main_at(3))
    a = replayed(dump, tmp_path)
    assert a.error_count == 1005 and len(a.errors) == 1000
    assert "only the first 1000 of 1005 heap errors are listed" in a.warnings()


def test_attached_recording_tolerates_older_blocks(tmp_path: Path) -> None:
    d = Dump(attached=True)
    d.free("0x99", main_at(3))  # allocated before recording began
    d.e("realloc", "0x20", "0x98", 8, stack=main_at(4))
    d.free("0x99", main_at(5))  # but freeing it twice is still an error
    d.malloc("0x30", 4, main_at(6))
    a = replayed(d, tmp_path)
    assert a.attached
    assert a.untracked_frees == 2
    assert [e.kind for e in a.errors] == ["double-free"]
    assert a.errors[0].freed_seq == 1
    assert live(a) == {4: (8, 1), 6: (4, 1)}
    assert a.frees == 0


def test_tcache_thread_shutdown_frees_are_ignored(tmp_path: Path, dump: Dump) -> None:
    thread = [
        F("worker", "/src/app.c", 40),
        F("start_thread", module=LIBC),
        F("clone3", module=LIBC),
    ]
    shutdown = [
        F("tcache_thread_shutdown", module=LIBC),
        F("__libc_thread_freeres", module=LIBC),
        F("start_thread", module=LIBC),
        F("clone3", module=LIBC),
    ]
    # the cache's chunks are freed deeper inside the shutdown, too
    deeper = [F("__libc_free", module=LIBC), *shutdown]
    dump.malloc("0x10", 16, thread)
    dump.free("0x10", thread)
    dump.free("0x10", shutdown)  # a chunk of the thread's cache, freed again
    dump.free("0x5000", shutdown)  # the cache itself, never malloc'ed through the API
    dump.free("0x10", deeper)
    dump.malloc("0x20", 8, main_at(3))
    dump.free("0x20", shutdown)  # ignored even when it names a live block
    a = replayed(dump, tmp_path)
    assert a.errors == [] and a.error_count == 0
    assert a.runtime_internal_frees == 4
    assert a.frees == 1
    assert a.calls["free"] == 5
    assert live(a) == {3: (8, 1)}


def test_allocation_of_a_block_still_live(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, main_at(3))
    dump.malloc("0x10", 32, main_at(4))  # its free was not recorded
    a = replayed(dump, tmp_path)
    assert live(a) == {4: (32, 1)}
    assert a.peak_bytes == 32
    assert any("still live" in w for w in a.warnings())


def test_unknown_stack(tmp_path: Path, dump: Dump) -> None:
    dump.malloc("0x10", 16, 0)
    a = replayed(dump, tmp_path)
    [group] = a.groups
    assert (group.kind, group.stack, group.bytes) == ("leak", (), 16)


def test_freed_at_names_the_latest_real_release(tmp_path: Path, dump: Dump) -> None:
    """The SEQ of "freed at" comes from a second scan: it must agree with the first pass, which
    counts neither errors nor the C library's internal frees as releases, and forgets at exec."""
    shutdown = [F("tcache_thread_shutdown", module=LIBC), F("start_thread", module=LIBC)]
    dump.malloc("0x10", 16, main_at(10))
    dump.free("0x10", main_at(11))
    dump.malloc("0x10", 16, main_at(12))  # the address comes back
    second = dump.free("0x10", main_at(13))
    dump.free("0x10", shutdown)  # glibc's own: not a release, not an error
    first_error = dump.free("0x10", main_at(14))
    second_error = dump.free("0x10", main_at(15))  # an error is not a release either
    dump.p("exec", "/bin/true")
    dump.malloc("0x10", 8, main_at(16))
    after_exec = dump.free("0x10", main_at(17))
    third_error = dump.free("0x10", main_at(18))
    a = replayed(dump, tmp_path)
    assert [(e.kind, e.seq, e.freed_seq) for e in a.errors] == [
        ("double-free", first_error, second),
        ("double-free", second_error, second),
        ("double-free", third_error, after_exec),
    ]
    assert [[(f.function, f.line) for f in e.freed_stack] for e in a.errors] == [
        [("main", 13)], [("main", 13)], [("main", 17)]]


def test_runtime_only_frees_are_not_errors(tmp_path: Path, dump: Dump) -> None:
    """Without libc's debug information the thread cache's frees have no names, only libc
    frames: a free of a dead pointer with no frame outside the runtime is not the program's."""
    unnamed = [F(None, module=LIBC, pc=0x7FFFF7E62052), F(None, module=LIBC, pc=0x7FFFF7E5203A)]
    dump.malloc("0x10", 16, main_at(3))
    dump.free("0x10", main_at(4))
    dump.free("0x10", unnamed)  # glibc emptying a thread's cache
    dump.free("0x5000", unnamed)  # the cache itself, never malloc'ed through the API
    user = dump.free("0x10", main_at(5))  # the program's own double free is still one
    a = replayed(dump, tmp_path)
    assert [(e.kind, e.seq) for e in a.errors] == [("double-free", user)]
    assert a.runtime_internal_frees == 2


def test_free_calls_explain_the_frees(tmp_path: Path, dump: Dump) -> None:
    """Why `calls: free 8` and `frees: 5 blocks` differ, computed: 4 free calls released
    blocks, 2 freed NULL, 1 was the C library's thread cache, 1 a double free; realloc released
    one more block. The figures sum to the free calls."""
    dump.malloc("0x10", 8, main_at(3))
    dump.malloc("0x20", 8, main_at(3))
    dump.malloc("0x30", 8, main_at(3))
    dump.malloc("0x40", 8, main_at(3))
    dump.malloc("0x50", 8, main_at(3))
    dump.e("realloc", "0x60", "0x50", 16, stack=main_at(4))  # releases 0x50
    for p in ("0x10", "0x20", "0x30", "0x0", "0x60", "0x0", "0x30"):
        dump.free(p, main_at(5))
    dump.free("0x777", [F("tcache_thread_shutdown", module=LIBC), F("start_thread", module=LIBC)])
    a = replayed(dump, tmp_path)
    assert a.calls["free"] == 8 and a.frees == 5
    assert a.free_calls == {"released": 4, "null": 2, "runtime": 1, "errors": 1, "untracked": 0}
    assert sum(a.free_calls.values()) == a.calls["free"]
    text = render_text(a)
    assert ("    frees:       5 blocks (4 of the 8 free calls released blocks; 2 freed NULL, "
            "1 freed the C/C++ runtime's own memory, 1 was an invalid or double free; "
            "1 by realloc)\n") in text
    assert "    calls:       malloc 5, realloc 1, free 8\n" in text
    assert render_json(a)["summary"]["free_calls"] == a.free_calls
    # every free call released a block: nothing to explain, or only realloc's share
    d = Dump()
    d.malloc("0x10", 8, main_at(3))
    d.free("0x10", main_at(4))
    assert "    frees:       1 block\n" in render_text(replayed(d, tmp_path))
