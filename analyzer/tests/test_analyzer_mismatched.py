"""Dump format 2.1: the C++ operators (`new`, `new[]`, `delete`, `delete[]`) and the mismatched
deallocation, a block released by another family's operation (valgrind's "Mismatched free() /
delete / delete []"), in both stacks; malformed operator records."""

from __future__ import annotations

from pathlib import Path

import pytest
from analyzer_testlib import Dump, main_at
from memdump_analyzer import DumpError, analyze, render_json, render_text

V21 = "MEMDUMP 2.1"


def _errors(path: str) -> list[tuple[str, str, int, str | None, int | None, int | None]]:
    """(kind, op, seq, the block's allocating op, its SEQ, its size) of each error."""
    return [(e.kind, e.op, e.seq, e.alloc_op, e.alloc_seq, e.alloc_size)
            for e in analyze(path, symbolize=False).errors]


@pytest.mark.parametrize("short", [False, True], ids=["e-records", "short-records"])
def test_every_mismatch_and_the_matching_pairs(tmp_path: Path, short: bool) -> None:
    """The same events as `e` records, and as the in-process recorder writes them (2.1's `+n`,
    `+a`, `-n`, `-a` with 2.0's `+` and `-`): the same errors and figures."""
    d = Dump(header=V21, short=short)
    d.e("new", "0x1000", 4, stack=main_at(10))            # 1
    d.free("0x1000", stack=main_at(11))                   # 2: free of new
    d.e("new[]", "0x1000", 10, stack=main_at(12))         # 3
    d.free("0x1000", stack=main_at(13))                   # 4: free of new[]
    d.e("new", "0x2000", 8, stack=main_at(14))            # 5
    d.e("realloc", "0x3000", "0x2000", 64, stack=main_at(15))  # 6: realloc of new
    d.free("0x3000", stack=main_at(16))                   # 7: fine (realloc made it malloc's)
    d.e("calloc", "0x2000", 3, 4, stack=main_at(17))      # 8
    d.e("delete", "-", "0x2000", stack=main_at(18))       # 9: delete of calloc
    d.e("new[]", "0x2000", 14, stack=main_at(19))         # 10
    d.e("delete", "-", "0x2000", stack=main_at(20))       # 11: delete of new[]
    d.e("new", "0x2000", 8, stack=main_at(21))            # 12
    d.e("delete[]", "-", "0x2000", stack=main_at(22))     # 13: delete[] of new
    d.malloc("0x2000", 20, stack=main_at(23))             # 14
    d.e("delete[]", "-", "0x2000", stack=main_at(24))     # 15: delete[] of malloc
    d.e("new", "0x4000", 4, stack=main_at(25))            # 16
    d.e("delete", "-", "0x4000", stack=main_at(26))       # 17: fine
    d.e("new[]", "0x4000", 33, stack=main_at(27))         # 18
    d.e("delete[]", "-", "0x4000", stack=main_at(28))     # 19: fine
    d.e("delete", "-", "0x0", stack=main_at(29))          # 20: delete of NULL: fine
    d.end()
    path = d.write(tmp_path)
    tags = {line.split()[0] for line in d.text().splitlines()}
    assert tags >= {"+n", "+a", "-n", "-a", "+", "-"} if short else not tags & {"+n", "+", "-"}
    assert _errors(path) == [
        ("mismatched-free", "free", 2, "new", 1, 4),
        ("mismatched-free", "free", 4, "new[]", 3, 10),
        ("mismatched-free", "realloc", 6, "new", 5, 8),
        ("mismatched-free", "delete", 9, "calloc", 8, 12),
        ("mismatched-free", "delete", 11, "new[]", 10, 14),
        ("mismatched-free", "delete[]", 13, "new", 12, 8),
        ("mismatched-free", "delete[]", 15, "malloc", 14, 20),
    ]
    a = analyze(path, symbolize=False)
    # every release took effect, as valgrind's do: nothing is left
    assert (a.leaked_bytes, a.allocations, a.frees, a.delete_frees) == (0, 10, 10, 6)
    assert a.calls["new"] == 4 and a.calls["new[]"] == 3
    assert (a.calls["delete"], a.calls["delete[]"]) == (4, 3)
    assert a.free_calls == {"released": 3, "null": 0, "runtime": 0, "errors": 0, "untracked": 0}
    text = render_text(a)
    assert "frees:       10 blocks (3 by free; 6 by delete and delete[]; 1 by realloc)\n" in text
    assert ("ERROR 1 of 7: mismatched free of 0x1000 (event 2, thread 100): the block was "
            "allocated by new\n    at main (app.c:11)\n  Address 0x1000 is 0 bytes inside a block "
            "of size 4 alloc'd by new at event 1:\n    at main (app.c:10)\n") in text
    assert ("  Address 0x2000 is 0 bytes inside a block of size 12 alloc'd by calloc at event 8:\n"
            "    at main (app.c:17)\n") in text
    errors = render_json(a)["errors"]
    assert errors[3]["allocated_at"]["op"] == "calloc"
    assert (errors[3]["allocated_at"]["seq"], errors[3]["allocated_at"]["bytes"]) == (8, 12)
    assert [f["line"] for f in errors[3]["allocated_at"]["stack"]][:1] == [17]
    assert [f["line"] for f in errors[3]["stack"]][:1] == [18]


def test_short_free_of_new_and_address_reuse(tmp_path: Path) -> None:
    """A `-` record's mismatch; a new'd address reused by malloc (its free is fine) and a
    malloc'd address reused by new without its free recorded."""
    d = Dump(header=V21, short=True)
    d.e("new", "0x1000", 16, stack=main_at(10))
    d.free("0x1000", stack=main_at(11))                   # 2: mismatched, short
    d.malloc("0x1000", 8, stack=main_at(12))              # 3
    d.free("0x1000", stack=main_at(13))                   # 4: fine
    d.e("new", "0x1000", 4, stack=main_at(14))            # 5
    d.malloc("0x1000", 4, stack=main_at(15))              # 6: its delete was not recorded
    d.free("0x1000", stack=main_at(16))                   # 7: fine, malloc's now
    d.malloc("0x1000", 4, stack=main_at(17))              # 8
    d.e("new[]", "0x1000", 4, stack=main_at(18))          # 9: its free was not recorded
    d.e("delete[]", "-", "0x1000", stack=main_at(19))     # 10: fine
    d.end()
    path = d.write(tmp_path)
    assert "\n- " in d.text()
    assert _errors(path) == [("mismatched-free", "free", 2, "new", 1, 16)]
    assert analyze(path, symbolize=False).leaked_blocks == 0


def test_delete_errors_are_free_s(tmp_path: Path) -> None:
    """delete of a freed block is a double free, of an unknown pointer an invalid free; an
    exec forgets the families with the blocks; in an attached recording an unknown pointer's
    delete is untracked."""
    d = Dump(header=V21)
    d.e("new", "0x1000", 4, stack=main_at(10))
    d.e("delete", "-", "0x1000", stack=main_at(11))
    d.e("delete", "-", "0x1000", stack=main_at(12))       # 3: double free
    d.e("delete[]", "-", "0x9000", stack=main_at(13))     # 4: invalid free
    d.e("new", "0x2000", 4, stack=main_at(14))
    d.p("exec", "/src/other")
    d.malloc("0x2000", 4, stack=main_at(15))
    d.free("0x2000", stack=main_at(16))                   # fine: the new block went with exec
    d.end()
    path = d.write(tmp_path)
    assert [(e.kind, e.op, e.seq, e.freed_seq) for e in analyze(path, symbolize=False).errors] == [
        ("double-free", "delete", 3, 2), ("invalid-free", "delete[]", 4, None)]
    d = Dump(header=V21, attached=True)
    d.e("delete", "-", "0x5000", stack=main_at(10))
    d.end()
    a = analyze(d.write(tmp_path, "attached.memdump"), symbolize=False)
    assert (a.errors, a.untracked_frees) == ([], 1)


@pytest.mark.parametrize("record,message", [
    ("e 1 100 new 0 0x10", "'new' event has 0 arguments, expected 1 (SIZE)"),
    ("e 1 100 new[] 0 0x10 4 5", "'new[]' event has 2 arguments, expected 1 (SIZE)"),
    ("e 1 100 new 0 0x10 -4", "malformed SIZE '-4' (expected a number)"),
    ("e 1 100 new 0 16 4", "malformed RESULT '16' (expected a hex number like 0x1f)"),
    ("e 1 100 delete 0 0x10 0x10", "malformed RESULT '0x10' (delete has '-')"),
    ("e 1 100 delete[] 0 - 16", "malformed PTR '16' (expected a hex number like 0x1f)"),
    ("e 1 100 delete 0 -", "'delete' event has 0 arguments, expected 1 (PTR)"),
    ("e 1 100 new() 0 0x10 4", "unknown heap operation 'new()'"),
    ("t 100\n+n 0 0x10", "'+n' record has 2 fields, expected 3 (STACK RESULT SIZE)"),
    ("t 100\n-a 0 0x10 4", "'-a' record has 3 fields, expected 2 (STACK PTR)"),
    ("-n 0 0x10", "'-n' record before any 't' record (the thread of its event is unknown)"),
    ("t 100\n+a 0 0x10 x", "malformed SIZE 'x' (expected a number)"),
    ("t 100\n-n 0 16", "malformed PTR '16' (expected a hex number like 0x1f)"),
    ("t 100\n+n 7 0x10 4", "stack 7 is used before it is defined"),
])
def test_malformed_operator_records(tmp_path: Path, record: str, message: str) -> None:
    d = Dump(header=V21)
    *threads, record = record.split("\n")
    for t in threads:
        d.raw(t)
    line = d.raw(record)
    d.raw("end 2 exit 0")
    path = d.write(tmp_path)
    with pytest.raises(DumpError) as info:
        analyze(path, symbolize=False)
    assert str(info.value) == f"{path}:{line}: {message}"
