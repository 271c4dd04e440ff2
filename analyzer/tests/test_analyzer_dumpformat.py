"""dumpformat: the format's one table of constants agrees with the spec, and what it writes the
reader reads back. (`gdb_ext/tests/test_track.py` ties `apply` to the replay's fast path.)"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, REPO
from memdump_analyzer import DumpReader, dumpdefs
from memdump_analyzer.dumpformat import (
    COMMENT,
    CUSTOM,
    CXX_ENTRY_POINTS,
    DEC,
    EVENT,
    FAMILY,
    FORMAT_LINE,
    GRAMMAR,
    HEX,
    KIND_BY_CODE,
    KIND_CODES,
    KIND_WORDS,
    KINDS,
    NO_RESULT,
    OPERATIONS,
    PROCESS,
    PROCESS_EVENTS,
    RECORDS,
    RELEASES,
    SEQUENCED,
    SHORT,
    SHORT_OPS,
    VERSION,
    Numbering,
    apply,
    escape,
    event_args,
    format_args,
    public_name,
    source_path,
    split_record,
    unescape,
)
from memdump_analyzer.replay import replay

SPEC = (REPO / "docs" / "dump-format.md").read_text(encoding="utf-8")


def _table(heading: str) -> list[list[str]]:
    """The body rows of the first table after `heading` in the spec, as cells."""
    lines = SPEC.split(heading, 1)[1].split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    rows = lines[start + 2 : end]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


def test_the_version_is_the_spec_s_and_the_example_s() -> None:
    assert f"This version writes `{FORMAT_LINE.strip()}`" in SPEC
    assert SPEC.startswith(f"# The memdump dump format, version {VERSION[0]}.{VERSION[1]}\n")
    assert (FIXTURES / "example.memdump").read_text().startswith(FORMAT_LINE)


def test_operations_are_the_spec_s_table() -> None:
    spec: dict[str, tuple[str, ...]] = {}
    for row in _table("### Heap operations"):
        args = tuple(row[1].strip("`").split())
        for op in re.findall(r"`([\w\[\]]+)`", row[0]):
            spec[op] = args
    assert spec == OPERATIONS
    assert list(spec) == list(OPERATIONS)  # the order names aliases (aligned_alloc first)


def test_cxx_entry_points_are_the_spec_s_table_and_libstdcxx_s() -> None:
    spec = {}
    for row in _table("### C++ operators (2.1)"):
        for name in re.findall(r"`(\w+)`", row[1]):
            spec[name] = row[0].strip("`")
    assert spec == CXX_ENTRY_POINTS
    assert set(FAMILY.values()) == set(RELEASES.values()) == {"malloc", "new", "new[]"}
    assert {op for op in OPERATIONS if op not in CUSTOM} == set(FAMILY) | set(RELEASES)
    lib = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    if not lib.exists() or shutil.which("nm") is None:
        pytest.skip("no libstdc++.so.6 to compare with")
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib.resolve())], capture_output=True,
                         text=True, check=True).stdout
    exported = {m.group(1) for m in re.finditer(r" T (_Z(?:nw|na|dl|da)\w+)@", out)}
    assert exported == set(CXX_ENTRY_POINTS)


def test_records_are_the_spec_s_table() -> None:
    spec = {}
    for row in _table("## Records"):
        tag = row[0].strip("`")
        if " " not in tag:  # `r` (`I`, 1.2) is a second row of `r`
            spec[tag] = row[1].replace("`", "").replace("\\|", "|")
    spec["#"] = "TEXT"
    assert spec == RECORDS


def test_process_events_are_the_spec_s() -> None:
    """The `p` row of the "Records" table names every WHAT of PROCESS_EVENTS with its DETAIL,
    in order, and the version of those added after 1.0; the writer refuses any other WHAT."""
    row = next(r for r in _table("## Records") if r[0] == "`p`")
    found = re.findall(r"(?:\((\d+)\.(\d+)\) )?`(\w+) (\w+)`", row[2])
    assert [(what, detail, (int(major), int(minor)) if major else (1, 0))
            for major, minor, what, detail in found] == [
        (ev.what, ev.detail, ev.since) for ev in PROCESS_EVENTS.values()]
    assert list(PROCESS_EVENTS) == ["exec", "signal", "phase"]


def test_kinds() -> None:
    assert KINDS == ("definite", "indirect", "possible", "reachable")
    assert {code.encode(): kind for kind, code in KIND_CODES.items()} == KIND_BY_CODE
    for kind, code in KIND_CODES.items():
        assert f"`{code}` {KIND_WORDS[kind]}" in SPEC


@pytest.mark.parametrize("text", ["plain", "a\\b", "two\nlines\r", "\\n", "caf\u00e9 \udcff"])
def test_escape_round_trips(text: str) -> None:
    written = escape(text)
    assert "\n" not in written and "\r" not in written
    assert unescape(written.encode("utf-8", "surrogateescape")) == text


def test_public_name() -> None:
    assert public_name("__GI___libc_malloc") == "__libc_malloc"
    assert public_name("malloc") == "malloc"
    assert public_name(None) is None


# (first three integer arguments, return value of posix_memalign) of one call of each operation
CALLS: dict[str, tuple[tuple[int, int, int], int]] = {
    "malloc": ((24, 7, 7), 0),
    "calloc": ((3, 8, 7), 0),
    "realloc": ((0x5000, 48, 7), 0),
    "reallocarray": ((0x5040, 4, 16), 0),
    "free": ((0x5080, 7, 7), 0),
    "posix_memalign": ((0x7FF0, 64, 100), 0),
    "aligned_alloc": ((32, 64, 7), 0),
    "memalign": ((16, 40, 7), 0),
    "valloc": ((10, 7, 7), 0),
    "pvalloc": ((20, 7, 7), 0),
    "custom_alloc": ((56, 7, 7), 0),
    # the object custom_alloc made in test_apply_is_the_replay_s_effect (SEQ 14)
    "custom_free": ((0x9380, 7, 7), 0),
    "new": ((4, 7, 7), 0),
    "new[]": ((40, 7, 7), 0),
    # the blocks new and new[] made in test_apply_is_the_replay_s_effect (SEQ 16 and 17)
    "delete": ((0x9400, 7, 7), 0),
    "delete[]": ((0x9440, 7, 7), 0),
}


def test_every_operation_s_args_round_trip_through_the_reader(tmp_path: Path) -> None:
    assert set(CALLS) == set(OPERATIONS)
    path = tmp_path / "ops.memdump"
    lines = [FORMAT_LINE]
    expected = {}
    for seq, (op, (regs, rc)) in enumerate(CALLS.items(), 1):
        args = event_args(op, regs, rc)
        assert len(args) == len(OPERATIONS[op])
        expected[seq] = (op, args)
        result = "-" if op in NO_RESULT else f"{0x9000 + 0x40 * seq:#x}"
        lines.append(f"e {seq} 1 {op} 0 {result} {' '.join(format_args(op, args))}\n")
    path.write_text("".join(lines))
    with DumpReader(str(path)) as reader:
        for fl in reader.records():
            op, args = expected[int(fl[1])]
            assert fl[3].decode() == op
            read = tuple(
                int(tok, 16) if name == "PTR" else int(tok)
                for tok, name in zip(fl[6:], OPERATIONS[op], strict=True)
            )
            assert read == args
    assert event_args("posix_memalign", (0x7FF0, 64, 100), 12) == (64, 100, 12)
    assert format_args("realloc", (0x5000, 48)) == ("0x5000", "48")


def test_apply_is_the_replay_s_effect(tmp_path: Path) -> None:
    """Each operation applied to a live set holding the blocks it names, as the replay sees it."""
    live = {0x5000: 1, 0x5040: 2, 0x5080: 3}
    path = tmp_path / "apply.memdump"
    lines = [FORMAT_LINE]
    for seq, (op, (regs, rc)) in enumerate(CALLS.items(), 4):
        args = event_args(op, regs, rc)
        result = 0 if op in NO_RESULT else 0x9000 + 0x40 * seq
        apply(live, op, result, args)
        lines.append(
            f"e {seq} 1 {op} 0 {'-' if op in NO_RESULT else f'{result:#x}'} "
            f"{' '.join(format_args(op, args))}\n"
        )
    # the blocks of the first three lines are those `live` started with
    head = [f"e {n} 1 malloc 0 {p:#x} {s}\n" for n, (p, s) in enumerate(
        {0x5000: 1, 0x5040: 2, 0x5080: 3}.items(), 1)]
    path.write_text(lines[0] + "".join(head) + "".join(lines[1:]))
    with DumpReader(str(path)) as reader:
        r = replay(reader)
    assert r.error_count == 0
    assert {int(p, 16): size for p, (size, _) in r.live.items()} == live
    assert 0x5000 not in live and 0x5040 not in live and 0x5080 not in live


def test_apply_failures_and_zero_sizes() -> None:
    live = {0x10: 5}
    apply(live, "realloc", 0, (0x10, 8))  # failed: the block stays
    assert live == {0x10: 5}
    apply(live, "realloc", 0, (0x10, 0))  # realloc(p, 0): freed, glibc returns NULL
    assert live == {}
    apply(live, "posix_memalign", 0x20, (16, 8, 12))  # RC 12: RESULT means nothing
    assert live == {}
    apply(live, "free", 0, (0,))  # free(NULL)
    assert live == {}
    with pytest.raises(ValueError, match="unknown heap operation"):
        apply(live, "mmap", 0, (1,))


@pytest.mark.parametrize(("recorded", "shown"), [
    ("./libio/./libio/filedoalloc.c", "./libio/filedoalloc.c"),
    ("./csu/../csu/libc-start.c", "./csu/libc-start.c"),
    ("./csu/../sysdeps/nptl/libc_start_call_main.h", "./sysdeps/nptl/libc_start_call_main.h"),
    ("/build/glibc/./libio/fileops.c", "/build/glibc/libio/fileops.c"),
    ("/src/lib/../app.c", "/src/lib/../app.c"),
    ("/src/app.c", "/src/app.c"),
    ("app.c", "app.c"),
    (None, None),
])
def test_source_paths_as_the_compiler_named_them(recorded: str | None, shown: str | None) -> None:
    """GDB's fullname() joins glibc's relative unit directory to its relative file name."""
    assert source_path(recorded) == shown


def test_the_grammar_s_versions_are_the_spec_s() -> None:
    """A row of the "Records" table that says which version added the record says GRAMMAR's."""
    noted = {}
    for row in _table("## Records"):
        m = re.match(r"\((\d+)\.(\d+)\)", row[2])
        if m and " " not in row[0]:
            noted[row[0].strip("`")] = (int(m.group(1)), int(m.group(2)))
    assert noted == {rec.tag: rec.since for rec in GRAMMAR if rec.tag in noted}
    assert len(noted) >= 12
    assert {rec.tag: rec.since for rec in GRAMMAR if rec.tag in ("scan", "r", "fi")} == {
        "scan": (1, 1), "r": (1, 1), "fi": (1, 2)}  # the "First line" section's history
    assert max(rec.since for rec in GRAMMAR) == VERSION


def test_the_grammar_s_views() -> None:
    assert SEQUENCED == ("e", "+", "-", "+n", "+a", "-n", "-a", "+c", "+r", "+p", "+l", "+m",
                         "p", "end")
    assert SHORT_OPS == {"+": "malloc", "-": "free", "+n": "new", "+a": "new[]",
                         "-n": "delete", "-a": "delete[]", "+c": "calloc", "+r": "realloc",
                         "+p": "posix_memalign", "+l": "aligned_alloc", "+m": "memalign"}
    short = [rec for rec in GRAMMAR if rec.kind == SHORT]
    assert [rec.text for rec in short] == ["STACK RESULT SIZE", "STACK PTR"] + [
        "STACK RESULT SIZE"] * 2 + ["STACK PTR"] * 2 + [
        "STACK RESULT NMEMB SIZE", "STACK RESULT PTR SIZE", "STACK RESULT ALIGN SIZE RC"] + [
        "STACK RESULT ALIGN SIZE"] * 2
    # each short record's fields are its `e` record's after OP, typed as the operation's ARGS
    for rec in short:
        if rec.op not in NO_RESULT:
            assert [f.name for f in rec.fields[2:]] == list(OPERATIONS[rec.op])
            assert [f.type for f in rec.fields[2:]] == [
                HEX if name == "PTR" else DEC for name in OPERATIONS[rec.op]]
    assert {rec.tag: rec.required for rec in GRAMMAR if rec.tag in ("e", "r", "lk", "#")} == {
        "e": 5, "r": 2, "lk": 9, "#": 1}


def test_the_reader_reads_every_record_of_the_grammar() -> None:
    """`other()` has a way to read each record that `records()` does not read itself."""
    own = {rec.tag for rec in GRAMMAR if rec.kind in (EVENT, SHORT, PROCESS, COMMENT)} | {"t"}
    assert {tag.decode() for tag in dumpdefs.READ} == {rec.tag for rec in GRAMMAR} - own


def test_split_record_keeps_the_rest_of_the_line() -> None:
    assert split_record(b"s 4 a b  c\n") == [b"s", b"4", b"a b  c"]
    assert split_record(b"\0\0i key\n") == [b"i", b"key"]
    assert split_record(b"p 3 exec /bin/my prog\n") == [b"p", b"3", b"exec", b"/bin/my prog"]
    assert split_record(b"end 9 exit 0\n") == [b"end", b"9", b"exit", b"0"]
    assert split_record(b"f 1 0x10 2 0x10 0 0 0\n") == [b"f", b"1", b"0x10", b"2", b"0x10",
                                                         b"0", b"0", b"0"]
    assert split_record(b"zz 1  2\n") == [b"zz", b"1", b"2"]


@pytest.mark.parametrize("name", ["example", "inprocess", "mixed", "locks", "tags", "views"])
def test_numbering_counts_as_the_reader(name: str) -> None:
    """Numbering (GDB's reading of the recorder's records) finds the reader's SEQs and events."""
    path = FIXTURES / f"{name}.memdump"
    with DumpReader(str(path)) as reader:
        recs = list(reader.records())
    with path.open("rb") as f:
        f.readline()
        numbering = Numbering()
        defined = [fl[1] for fl in numbering.records(f, ("n",))]
    assert numbering.seq == len(recs)
    assert numbering.events == sum(1 for fl in recs if fl[0] == b"e")
    assert defined == [b"%d" % ident for ident in reader.nodes if ident]


def test_numbering_reads_a_run_from_its_seq() -> None:
    lines = [b"t 7\n", b"+ 1 0x10 8\n", b"\0\0- 1 0x10\n", b"c 5 0\n",
             b"e 13 7 calloc 1 0x20 1 8\n", b"zz 9\n", b"-a 1 0x20\n", b"p 15 signal SIGSEGV\n",
             b"s 3 x y\n"]
    numbering = Numbering(seq=10, events=2)
    seen = [(numbering.seq, fl) for fl in numbering.records(lines, ("s", "-a"))]
    assert seen == [(14, [b"-a", b"1", b"0x20"]), (15, [b"s", b"3", b"x y"])]
    assert (numbering.seq, numbering.events) == (15, 6)
