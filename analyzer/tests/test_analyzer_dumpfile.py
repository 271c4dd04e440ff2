"""The reader: the first line, definitions, escaping, truncation and every error it reports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, LIBC, REPO, Dump, F, main_at
from memdump_analyzer import DumpError, DumpReader, analyze
from memdump_analyzer.dumpfile import unescape


def error_of(path: str) -> str:
    with pytest.raises(DumpError) as info:
        analyze(path)
    return str(info.value)


@pytest.mark.parametrize(
    ("heading", "fixture"),
    [("### Recorded with breakpoints", "example"), ("### Recorded in-process", "inprocess"),
     ("### Recorded after a late attach", "attach")],
)
def test_the_spec_worked_examples_are_the_fixtures_byte_for_byte(
    heading: str, fixture: str
) -> None:
    """Byte for byte; the doc writes each NUL byte of the padding as `␀` (SYMBOL FOR NULL)."""
    doc = (REPO / "docs" / "dump-format.md").read_bytes()
    section = doc.split(heading.encode(), 1)[1]
    m = re.search(rb"```\n(.*?)```", section, re.S)
    assert m is not None
    data = (FIXTURES / f"{fixture}.memdump").read_bytes()
    assert m.group(1).replace("␀".encode(), b"\0") == data
    assert b"\0" not in m.group(1)


def test_example_reads_its_tables() -> None:
    with DumpReader(str(FIXTURES / "example.memdump")) as reader:
        records = list(reader.records())
        assert reader.version == (2, 7)
        assert reader.info["program"] == "/src/leak"
        assert reader.info["gdb"] == "13.1"
        assert reader.strings[6] == "/src/leak.c"
        assert reader.frames[3].line == 3
        assert reader.frames[3].pc == 0x55555555518C
        assert reader.frames[3].inlined
        assert reader.frames[1].function == "__libc_start_call_main"
        assert [f.function for f in reader.stack(2)] == ["main", "__libc_start_call_main"]
        # frame 3: new_node inlined into main, one program counter
        assert [(f.function, f.line, f.pc, f.inlined) for f in reader.stack(3)] == [
            ("new_node", 3, 0x55555555518C, True),
            ("main", 7, 0x55555555518C, False),
            ("__libc_start_call_main", 58, 0x7FFFF7DF018A, False),
        ]
        assert reader.stack(0) == []
        assert reader.kinds == {b"0x5555555592c0": ("definite", None),
                                b"0x5555555592e0": ("definite", None),
                                b"0x555555559310": ("indirect", None)}
        assert reader.leaders == {b"0x555555559310": b"0x5555555592e0"}
    assert [r[0] for r in records] == [b"e", b"e", b"e", b"e", b"e", b"end"]
    assert records[0] == b"e 1 4242 malloc 2 0x5555555592a0 16".split()
    assert records[5] == [b"end", b"6", b"exit", b"", b"0"]


def test_unescape() -> None:
    assert unescape(rb"a\nb\\c\rd") == "a\nb\\c\rd"
    assert unescape(rb"no escapes here") == "no escapes here"
    assert unescape(rb"\\n is not a newline") == "\\n is not a newline"
    assert unescape(b"\xff\xfe") == "\udcff\udcfe"  # bytes that are not UTF-8 survive


def test_strings_keep_their_spaces_and_escapes(tmp_path: Path) -> None:
    d = Dump()
    d.raw("s 1  two  spaces and a trailing one ")
    d.raw("s 2 line\\nbreak")
    path = d.write(tmp_path)
    with DumpReader(path) as reader:
        list(reader.records())
        assert reader.strings[1] == " two  spaces and a trailing one "
        assert reader.strings[2] == "line\nbreak"


def test_newer_minor_version_is_read(tmp_path: Path) -> None:
    d = Dump(header="MEMDUMP 1.7")
    d.malloc("0x10", 8, main_at(3))
    d.end()
    assert analyze(d.write(tmp_path)).leaked_bytes == 8


def test_newer_major_version_is_refused(tmp_path: Path) -> None:
    path = Dump(header="MEMDUMP 3.0").write(tmp_path)
    assert error_of(path) == f"{path}:1: dump format 3.0 is newer than this analyser (reads 2.x)"


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        (b"hello\n", "hello"),
        (b"MEMDUMP\n", "MEMDUMP"),
        (b"MEMDUMP 1\n", "MEMDUMP 1"),
        (b"\x7fELF\x02\x01\x01\x00\n", "\\x7fELF\\x02\\x01\\x01\\x00"),
        (b"\nMEMDUMP 1.0\n", ""),
    ],
)
def test_not_a_dump(tmp_path: Path, content: bytes, shown: str) -> None:
    path = tmp_path / "x.memdump"
    path.write_bytes(content)
    assert error_of(str(path)) == f"{path}:1: not a memdump dump (first line is '{shown}')"


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.memdump"
    path.write_bytes(b"")
    assert error_of(str(path)) == f"{path}: the file is empty (not a memdump dump)"


def test_first_line_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "cut.memdump"
    path.write_bytes(b"MEMDUMP 1.")
    assert error_of(str(path)) == (
        f"{path}:1: the dump ends inside its first line (the recording stopped at once)"
    )


def test_missing_file_and_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.memdump"
    assert error_of(str(missing)) == f"{missing}: no such file"
    assert error_of(str(tmp_path)) == f"{tmp_path}: is a directory, not a dump file"


def test_unreadable_file() -> None:
    # Root reads any file, so as root (CI) the analyser runs as `nobody` through util-linux setpriv.
    work = tempfile.mkdtemp(prefix="memdump-unreadable-")
    try:
        os.chmod(work, 0o755)
        path = os.path.join(work, "secret.memdump")
        with open(path, "wb") as fh:
            fh.write(b"MEMDUMP 1.0\n")
        os.chmod(path, 0)
        # A copy of the package beside it: `nobody` may not be able to reach the checkout.
        shutil.copytree(REPO / "analyzer" / "memdump_analyzer",
                        os.path.join(work, "memdump_analyzer"))
        drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        cmd = [*(drop if os.geteuid() == 0 else []), "/usr/bin/python3", "-m", "memdump_analyzer",
               path]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False,
                              cwd=work, env={**os.environ, "PYTHONPATH": work})
        assert proc.returncode == 2
        assert proc.stderr == (
            f"memdump-analyze: {path}: cannot read the file (permission denied)\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_not_a_regular_file() -> None:
    assert error_of("/dev/null") == "/dev/null: is not a regular file (a dump is a file on disk)"


def test_truncated_last_line_is_ignored(tmp_path: Path) -> None:
    text = (FIXTURES / "example.memdump").read_text()
    path = tmp_path / "cut.memdump"
    # the recorder died while writing the free: both blocks are still live
    path.write_text(text[: text.index("e 3 ")] + "e 3 4242 free 4 - 0x55555")
    a = analyze(str(path))
    assert a.truncated
    assert not a.complete
    assert (a.leaked_bytes, a.leaked_blocks) == (32, 2)
    assert a.last_seq == 2
    warnings = a.warnings()
    assert any("last line is incomplete" in w for w in warnings)
    assert any("stopped early" in w for w in warnings)


def test_truncated_end_record(tmp_path: Path) -> None:
    path = tmp_path / "cut.memdump"
    path.write_bytes((FIXTURES / "example.memdump").read_bytes()[:-1])
    a = analyze(str(path))
    assert a.truncated and not a.complete and a.end is None
    assert a.leaked_bytes == 112


def test_missing_end_record(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 16, main_at(3))
    d.malloc("0x20", 4, main_at(4))
    d.free("0x20", main_at(5))
    a = analyze(d.write(tmp_path))
    assert not a.complete and not a.truncated
    assert a.end is None
    assert a.leaked_bytes == 16
    assert a.warnings() == [
        "the dump has no end record: the recording stopped early (GDB or the machine died); "
        "everything up to the last complete record (event 3) was analysed"
    ]
    assert a.warnings(live=True) == []


def test_unknown_tags_warn_once_each(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 16, main_at(3))
    first = d.raw("zz 1 something new")
    d.raw("zz 2 again")
    other = d.raw("q")
    d.end()
    a = analyze(d.write(tmp_path))
    assert a.leaked_bytes == 16
    assert a.warnings() == [
        f"skipped records with unknown tag 'zz' (first at line {first}): "
        "the dump was written by a newer memdump",
        f"skipped records with unknown tag 'q' (first at line {other}): "
        "the dump was written by a newer memdump",
    ]


def test_comments_are_skipped(tmp_path: Path) -> None:
    d = Dump()
    d.raw("# a comment")
    d.raw("#no space either")
    d.malloc("0x10", 16, main_at(3))
    d.end()
    a = analyze(d.write(tmp_path))
    assert a.leaked_bytes == 16 and a.warnings() == []


def corrupt(tmp_path: Path, bad: str, *, before_end: bool = True) -> tuple[str, int]:
    """A dump with a malloc, then `bad` at some line, then a free: (path, line of `bad`)."""
    d = Dump()
    d.malloc("0x10", 16, main_at(3))
    line = d.raw(bad)
    if bad.startswith(("e 2 ", "p 2 ")):
        d.seq += 1
    d.free("0x10", main_at(4))
    if before_end:
        d.end()
    return d.write(tmp_path), line


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("e 2 100 malloc 1 0x20 sixteen", "malformed SIZE 'sixteen' (expected a number)"),
        ("e 2 100 malloc 1 0x20", "'malloc' event has 0 arguments, expected 1 (SIZE)"),
        ("e 2 100 malloc 1 0x20 16 17", "'malloc' event has 2 arguments, expected 1 (SIZE)"),
        ("e 2 100 free 1 - 0x20 16", "'free' event has 2 arguments, expected 1 (PTR)"),
        ("e 2 100 free 1 0x0 0x20", "malformed RESULT '0x0' (free has '-')"),
        ("e 2 100 free 1 - banana", "malformed PTR 'banana' (expected a hex number like 0x1f)"),
        ("e 2 100 calloc 1 0x20 3 x", "malformed SIZE 'x' (expected a number)"),
        ("e 2 100 calloc 1 0x20 3", "'calloc' event has 1 argument, expected 2 (NMEMB SIZE)"),
        ("e 2 100 realloc 1 0x20 0x10", "'realloc' event has 1 argument, expected 2 (PTR SIZE)"),
        ("e 2 100 realloc 1 0x20 0x10 -4", "malformed SIZE '-4' (expected a number)"),
        ("e 2 100 realloc 1 0x20 zz 4", "malformed PTR 'zz' (expected a hex number like 0x1f)"),
        ("e 2 100 posix_memalign 1 0x20 64 32 x", "malformed RC 'x' (expected a number)"),
        ("e 2 100 memalign 1 0x20 x 32", "malformed ALIGN 'x' (expected a number)"),
        ("e 2 100 valloc 1 0x20 4096 1", "'valloc' event has 2 arguments, expected 1 (SIZE)"),
        ("e 2 100 mallocx 1 0x20 16", "unknown heap operation 'mallocx'"),
        ("e 2 tid free 1 - 0x30", "malformed TID 'tid' (expected a number)"),
        ("e 2 tid valloc 1 0x20 4096", "malformed TID 'tid' (expected a number)"),
        ("e 2 100 malloc 1 0x20 -16", "malformed SIZE '-16' (expected a number)"),
        ("e 2 100 calloc 1 0x20 -1 -16", "malformed NMEMB '-1' (expected a number)"),
        ("e 2 100 malloc 1 0xg0 16", "malformed RESULT '0xg0' (expected a hex number like 0x1f)"),
        ("e 2 100 malloc 99 0x20 16", "stack 99 is used before it is defined"),
        ("e 2 100 malloc x 0x20 16", "malformed STACK 'x' (expected a number)"),
        (
            "e 2 100 malloc",
            "'e' record has 3 fields, expected at least 5 (SEQ TID OP STACK RESULT ARGS...)",
        ),
        ("e two 100 malloc 1 0x20 16", "malformed SEQ 'two' (expected a number)"),
        ("e", "'e' record has no SEQ"),
        ("e 3 100 malloc 1 0x20 16", "event 3 follows event 1 (events are missing)"),
        ("e 1 100 malloc 1 0x20 16", "event 1 follows event 1 (events are out of order)"),
        ("p 2 exec", "'p' record has 2 fields, expected 3 (SEQ WHAT DETAIL)"),
        ("end 2 exit", "'end' record has 2 fields, expected 3 (SEQ REASON DETAIL)"),
        ("p 4 exec /bin/true", "event 4 follows event 1 (events are missing)"),
        ("end x exit 0", "malformed SEQ 'x' (expected a number)"),
        ("", "empty line (expected a record)"),
        ("\x01\x01\x01\x01", "malformed record (tag '\\x01\\x01\\x01\\x01')"),
        (
            "f 50 0x10 1 0x10 2 3",
            "'f' record has 6 fields, expected 7 (ID PC MODULE OFFSET FUNCTION FILE LINE)",
        ),
        ("f 50 0xZZ 1 0x10 2 3 4", "malformed PC '0xZZ' (expected a hex number like 0x1f)"),
        ("f 50 0x10 1 16 2 3 4", "malformed OFFSET '16' (expected a hex number like 0x1f)"),
        ("f 50 0x10 1 0x10 2 3 x", "malformed LINE 'x' (expected a number)"),
        ("f 50 0x10 99 0x10 2 3 4", "string 99 is used before it is defined"),
        ("f 1 0x10 1 0x10 2 3 4", "frame 1 is defined twice"),
        ("f 0 0x10 1 0x10 2 3 4", "frame id 0 is reserved for 'none'"),
        ("n 50 1 99", "frame 99 is used before it is defined"),
        ("n 50 77 1", "stack 77 is used before it is defined"),
        ("n 50 1 0", "stack node needs a frame (FRAME is 0)"),
        ("n 50 1", "'n' record has 2 fields, expected 3 (ID PARENT FRAME)"),
        ("s 1 again", "string 1 is defined twice"),
        ("s x text", "malformed string id 'x' (expected a number)"),
        ("s", "'s' record has 0 fields, expected 2 (ID TEXT)"),
        ("i", "'i' record has 0 fields, expected 2 (KEY VALUE)"),
        ("fi 1 2 3", "'fi' record has 3 fields, expected 4 (ID FUNCTION FILE LINE)"),
        ("fi 99 2 3 4", "frame 99 is used before it is defined"),
        ("fi x 2 3 4", "malformed frame id 'x' (expected a number)"),
        ("fi 1 2 3 4", "'fi' record of frame 1 after a stack node used the frame"),
    ],
)
def test_corrupt_record_in_the_middle(tmp_path: Path, bad: str, message: str) -> None:
    path, line = corrupt(tmp_path, bad)
    assert error_of(path) == f"{path}:{line}: {message}"


def test_first_event_must_be_one(tmp_path: Path) -> None:
    path = tmp_path / "t.memdump"
    path.write_text("MEMDUMP 1.0\ne 2 1 malloc 0 0x10 1\n")
    assert error_of(str(path)) == (
        f"{path}:2: the first event is numbered 2, not 1 (events are missing)"
    )


def test_spec_error_examples(tmp_path: Path) -> None:
    # docs/dump-format.md: `app.memdump:7: frame 9 is used before it is defined`
    path = tmp_path / "app.memdump"
    path.write_text(
        "MEMDUMP 1.0\ni program /a\ns 1 /a\ns 2 main\nf 1 0x10 1 0x10 2 0 0\nn 1 0 1\nn 2 1 9\n"
    )
    assert error_of(str(path)) == f"{path}:7: frame 9 is used before it is defined"


def test_errors_are_found_after_many_definitions_and_events(tmp_path: Path) -> None:
    d = Dump()
    for i in range(300):
        d.malloc(f"0x{0x1000 + i * 16:x}", 8, main_at(10 + i % 50))
        if i % 3 == 0:
            d.p("thread-exit", "101")
    line = d.raw(f"e {d.seq + 2} 100 free 1 - 0x1000")
    assert error_of(d.write(tmp_path)) == (
        f"{tmp_path / 'test.memdump'}:{line}: event {d.seq + 2} follows event {d.seq} "
        "(events are missing)"
    )


def test_malformed_pointer_of_a_live_block(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 16, main_at(3))
    line = d.raw("e 2 100 malloc 1 banana 16")
    d.seq += 1
    d.end()
    path = d.write(tmp_path)
    assert (
        error_of(path)
        == f"{path}:{line}: malformed RESULT 'banana' (expected a hex number like 0x1f)"
    )


def test_records_of_a_corrupt_dump_raise_with_the_line(tmp_path: Path) -> None:
    path, line = corrupt(tmp_path, "e 3 100 malloc 1 0x20 16")
    with DumpReader(path) as reader, pytest.raises(DumpError) as info:
        list(reader.records())
    assert str(info.value) == f"{path}:{line}: event 3 follows event 1 (events are missing)"


def test_non_utf8_names_survive(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 16, [F("caf\udce9", "/src/caf\udce9.c", 3), *main_at(9)])
    d.end()
    a = analyze(d.write(tmp_path))
    assert a.leaks[0].stack[0].function == "caf\udce9"


def test_reader_marks_stacks_through_their_parents(tmp_path: Path) -> None:
    d = Dump()
    inner = d.stack(
        [
            F("free_all", module=LIBC),
            F("tcache_thread_shutdown", module=LIBC),
            F("start_thread", module=LIBC),
        ]
    )
    plain = d.stack(main_at(3))
    path = d.write(tmp_path)
    with DumpReader(path, mark_functions=frozenset({"tcache_thread_shutdown"})) as reader:
        list(reader.records())
        assert reader.node_ids[str(inner).encode()] < 0
        assert reader.node_ids[str(plain).encode()] > 0
