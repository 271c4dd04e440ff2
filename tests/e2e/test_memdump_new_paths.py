"""The C++ operators' two paths through the in-process recorder (docs/recorder.md, "C++
operators"): with libstdc++'s operators it calls malloc, aligned_alloc and free itself; with a
library's own operator new and delete before libstdc++'s it calls them. Either way the program
gets what its operators give (the library's counts, the new_handler's calls before bad_alloc) and
the dump has the same events at the same lines, as the breakpoint recorder writes them too."""

from __future__ import annotations

from pathlib import Path

import pytest
from memdump_e2e import analyze, marker, read_dump, record

SOURCE = "new_paths.cpp"
OPERATORS = ("new", "new[]", "delete", "delete[]")

#: (operation, size, marker) of each C++ operator event, in program order
EXPECTED = [
    ("new", "4", ("new-int", "ALLOC")),
    ("new[]", "32", ("new-array", "ALLOC")),
    ("new[]", "100", ("new-array-chars", "ALLOC")),
    ("new", "64", ("aligned-new", "ALLOC")),
    ("new", "8", ("new-double", "ALLOC")),
    ("new", "4", ("new-leak", "LEAK")),
    ("new", str(1 << 62), ("huge-new", "FAIL")),
    ("delete", "-", ("delete-int", "FREE")),
    ("delete[]", "-", ("delete-array", "FREE")),
    ("delete[]", "-", ("delete-array-chars", "FREE")),
    ("delete", "-", ("aligned-delete", "FREE")),
    ("delete", "-", ("sized-delete", "FREE")),
]


@pytest.mark.parametrize(("name", "printed"), [
    ("new_paths", ""),
    ("new_paths_counting", "counting library: 6 new, 4 delete\n"),
])
def test_operators_events_and_results(tmp_path: Path, name: str, printed: str) -> None:
    dump = tmp_path / f"{name}.memdump"
    run = record(name, dump=dump)
    assert f"bad_alloc after 2 new_handler calls\n{printed}" in run.stdout, run.describe()
    facts = read_dump(dump)
    events = [e for e in facts.events if e[3] in OPERATORS]
    got = [(e[3], e[-1] if e[3].startswith("new") else "-", facts.stack(int(e[4]))[0])
           for e in events]
    want = [(op, size, marker(SOURCE, *where)) for op, size, where in EXPECTED]
    assert [(op, size, (frame.file, frame.line)) for op, size, frame in got] == [
        (op, size, (site.file, site.line)) for op, size, site in want]
    assert [e[5] == "0x0" for e in events if e[3].startswith("new")] == [False] * 6 + [True]
    report = analyze(dump)
    assert report.errors() == []
    assert report.leak_sites() == {marker(SOURCE, "new-leak"): (4, 1)}
