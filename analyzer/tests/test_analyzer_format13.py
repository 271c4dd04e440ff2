"""Dump format 1.3: `fs` records (late symbols, `fi` after them), NUL padding, `i recorder`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, run_cli
from memdump_analyzer import DumpError, DumpReader, analyze, dumps_json, render_json, render_text

HEADER = (
    "MEMDUMP 1.3\n"
    "i program /src/app\n"
    "i pid 100\n"
    "i recorder in-process\n"
    "s 1 /lib/x86_64-linux-gnu/libc.so.6\n"
    "s 2 /src/app\n"
)
#: the recorder's part: three frames without symbols, used by two stacks and three events
RECORDED = (
    "f 1 0x7ffff7df018a 1 0x2718a 0 0 0\n"
    "n 1 0 1\n"
    "f 2 0x555555555200 2 0x1200 0 0 0\n"
    "n 2 1 2\n"
    "f 3 0x555555555189 2 0x1189 0 0 0\n"
    "n 3 2 3\n"
    "e 1 100 malloc 3 0x10 24\n"
    "f 4 0x5555555551c3 2 0x11c3 0 0 0\n"
    "n 4 1 4\n"
    "e 2 100 malloc 4 0x40 100\n"
    "e 3 100 free 4 - 0x40\n"
)
#: GDB's part: the symbols, frame 3 being `grow` inlined into `make_table`
SYMBOLS = (
    "s 3 __libc_start_call_main\n"
    "s 4 ../sysdeps/nptl/libc_start_call_main.h\n"
    "fs 1 3 4 58\n"
    "s 5 main\n"
    "s 6 /src/app.c\n"
    "fs 2 5 6 15\n"
    "s 7 grow\n"
    "fs 3 7 6 5\n"
    "s 8 make_table\n"
    "fi 3 8 6 10\n"
    "fs 4 5 6 16\n"
)
END = "end 4 exit 0\n"
#: the same dump as GDB's breakpoint recorder writes it: the symbols in the `f` and `fi` records
CLASSIC = HEADER + (
    "s 3 __libc_start_call_main\n"
    "s 4 ../sysdeps/nptl/libc_start_call_main.h\n"
    "f 1 0x7ffff7df018a 1 0x2718a 3 4 58\n"
    "n 1 0 1\n"
    "s 5 main\n"
    "s 6 /src/app.c\n"
    "f 2 0x555555555200 2 0x1200 5 6 15\n"
    "n 2 1 2\n"
    "s 7 grow\n"
    "f 3 0x555555555189 2 0x1189 7 6 5\n"
    "s 8 make_table\n"
    "fi 3 8 6 10\n"
    "n 3 2 3\n"
    "e 1 100 malloc 3 0x10 24\n"
    "f 4 0x5555555551c3 2 0x11c3 5 6 16\n"
    "n 4 1 4\n"
    "e 2 100 malloc 4 0x40 100\n"
    "e 3 100 free 4 - 0x40\n"
) + END


def write(tmp_path: Path, data: bytes | str, name: str = "t.memdump") -> str:
    directory = tmp_path / name.replace(".", "_")
    directory.mkdir(exist_ok=True)
    path = directory / "t.memdump"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def reports(path: str) -> tuple[str, str]:
    a = analyze(path, symbolize=False)
    return render_text(a).replace(path, "DUMP"), dumps_json(render_json(a)).replace(path, "DUMP")


def error_of(path: str) -> str:
    with pytest.raises(DumpError) as info:
        analyze(path)
    return str(info.value)


def test_fs_after_use_reports_as_f_and_fi_records(tmp_path: Path) -> None:
    late = write(tmp_path, HEADER + RECORDED + SYMBOLS + END, "late")
    classic = write(tmp_path, CLASSIC, "classic")
    assert reports(late) == reports(classic)
    text = reports(late)[0]
    assert (
        "    at grow (app.c:5) (inlined)\n    by make_table (app.c:10)\n    by main (app.c:15)\n"
        in text
    )
    assert "allocated at main (app.c:16)" in text  # the peak's stack
    with DumpReader(late) as reader:
        list(reader.records())
        assert [(f.function, f.line, f.inlined) for f in reader.stack(3)] == [
            ("grow", 5, True),
            ("make_table", 10, False),
            ("main", 15, False),
            ("__libc_start_call_main", 58, False),
        ]
        assert reader.info["recorder"] == "in-process"


def test_fs_before_use(tmp_path: Path) -> None:
    dump = HEADER + (
        "s 3 main\n"
        "s 4 /src/app.c\n"
        "f 1 0x555555555200 2 0x1200 0 0 0\n"
        "fs 1 3 4 7\n"
        "n 1 0 1\n"
        "e 1 100 malloc 1 0x10 8\n"
    )
    text = render_text(analyze(write(tmp_path, dump)))
    assert "LEAK 1 of 1: 8 bytes in 1 block\n    at main (app.c:7)\n" in text


def test_fi_right_after_fs_of_a_frame_used_already(tmp_path: Path) -> None:
    dump = HEADER + RECORDED + "s 3 grow\ns 4 /src/app.c\nfs 3 3 4 5\ns 5 make_table\nfi 3 5 4 10\n"
    text = render_text(analyze(write(tmp_path, dump)))
    assert "    at grow (app.c:5) (inlined)\n    by make_table (app.c:10)\n" in text


def test_header_names_the_recorder(tmp_path: Path) -> None:
    text = render_text(analyze(write(tmp_path, HEADER + RECORDED + SYMBOLS + END)))
    assert text.splitlines()[1].endswith("(in-process recorder)")


@pytest.mark.parametrize(
    ("tail", "line", "message"),
    [
        ("fs 9 0 0 0\n", 18, "'fs' record of frame 9, which is not defined"),
        ("fs 2 0 0 7\nfs 2 0 0 8\n", 19, "second 'fs' record of frame 2 (the first is at line 18)"),
        ("fs 2 0 0\n", 18, "'fs' record has 3 fields, expected 4 (ID FUNCTION FILE LINE)"),
        ("fs x 0 0 0\n", 18, "malformed frame id 'x' (expected a number)"),
        ("fs 2 9 0 0\n", 18, "string 9 is used before it is defined"),
        # an `fi` of a used frame: only right after that frame's `fs` (strings apart)
        ("fi 2 0 0 4\n", 18, "'fi' record of frame 2 after a stack node used the frame"),
        ("fs 3 0 0 5\nfi 2 0 0 4\n", 19,
         "'fi' record of frame 2 after a stack node used the frame"),
        ("fs 2 0 0 5\nn 9 1 2\nfi 2 0 0 4\n", 20,
         "'fi' record of frame 2 after a stack node used the frame"),
        ("fs 2 0 0 5\ne 4 100 free 0 - 0x0\nfi 2 0 0 4\n", 20,
         "'fi' record of frame 2 after a stack node used the frame"),
        ("fs 2 0 0 5\nfs 2 0 0 6\n", 19, "second 'fs' record of frame 2 (the first is at line 18)"),
    ],
)
def test_fs_errors(tmp_path: Path, tail: str, line: int, message: str) -> None:
    path = write(tmp_path, HEADER + RECORDED + tail)
    assert error_of(path) == f"{path}:{line}: {message}"


def test_fs_of_a_frame_with_fi_records_is_an_error(tmp_path: Path) -> None:
    dump = HEADER + "f 1 0x10 2 0x10 0 0 0\nfi 1 0 0 3\nfs 1 0 0 4\n"
    path = write(tmp_path, dump)
    assert error_of(path) == (
        f"{path}:9: 'fs' record of frame 1, whose 'f' record has 'fi' records already"
    )


# -- padding ---------------------------------------------------------------------------------------


def test_padding_in_the_middle_is_skipped(tmp_path: Path) -> None:
    late = write(tmp_path, (HEADER + RECORDED).encode() + b"\0" * 5000 + (SYMBOLS + END).encode())
    classic = write(tmp_path, CLASSIC, "classic")
    a = analyze(late)
    assert (a.complete, a.truncated, a.partial_records, a.warnings()) == (True, False, 0, [])
    assert reports(late) == reports(classic)


def test_padding_before_an_event_and_line_numbers_after_it(tmp_path: Path) -> None:
    data = (HEADER + RECORDED).encode() + b"\0" * 100 + b"e 4 100 malloc 4 0x80 8\n"
    data += b"\0\0\0\n"  # a line of padding alone
    data += b"e 6 100 malloc 4 0x90 8\n"
    path = write(tmp_path, data)
    # line 18 is the padded event, 19 the padding alone, 20 the event with the wrong SEQ
    assert error_of(path) == f"{path}:20: event 6 follows event 4 (events are missing)"
    data = data.replace(b"e 6 100", b"e 5 100")
    a = analyze(write(tmp_path, data, "ok"), symbolize=False)
    assert (a.events, a.leaked_blocks, a.truncated, a.partial_records) == (5, 3, False, 0)
    assert [w.split(":")[0] for w in a.warnings()] == ["the dump has no end record"]


def test_padding_that_crosses_a_read_chunk(tmp_path: Path) -> None:
    gap = b"\0" * (3 << 20)  # more than one 1 MiB chunk of the scan
    path = write(tmp_path, (HEADER + RECORDED).encode() + gap + (SYMBOLS + END).encode())
    assert reports(path) == reports(write(tmp_path, CLASSIC, "classic"))


def test_padding_at_the_end_is_unwritten_space(tmp_path: Path) -> None:
    path = write(tmp_path, (HEADER + RECORDED).encode() + b"\0" * 70000)
    a = analyze(path)
    # space never written: no record was cut, only the end record is missing
    assert (a.complete, a.truncated, a.events) == (False, False, 3)
    assert a.warnings()[0] == (
        "the dump has no end record: the recording stopped early (GDB or the machine died); "
        "everything up to the last complete record (event 3) was analysed"
    )


def test_a_partial_record_then_padding_at_the_end(tmp_path: Path) -> None:
    path = write(tmp_path, (HEADER + RECORDED).encode() + b"e 4 100 mal" + b"\0" * 4096)
    a = analyze(path)
    assert (a.complete, a.truncated, a.events, a.partial_records) == (False, True, 3, 0)


def test_a_partial_record_then_padding_then_gdb_s_records(tmp_path: Path) -> None:
    data = (HEADER + RECORDED).encode() + b"e 4 100 malloc 4 0x8" + b"\0" * 300
    data += (SYMBOLS + END).encode()
    path = write(tmp_path, data)
    a = analyze(path)
    assert (a.complete, a.truncated, a.events, a.partial_records, a.partial_line) == (
        True, False, 3, 1, 18,
    )
    assert a.warnings() == [
        "1 partial record before NUL padding (first at line 18) was ignored: the recorder was "
        "killed while writing"
    ]
    assert "    at grow (app.c:5) (inlined)\n" in render_text(a)


def test_double_free_after_padding_finds_the_first_free(tmp_path: Path) -> None:
    data = (HEADER + RECORDED).encode() + b"\0" * 64 + b"e 4 100 free 4 - 0x40\n"
    a = analyze(write(tmp_path, data))
    assert [(e.kind, e.seq, e.freed_seq) for e in a.errors] == [("double-free", 4, 3)]


def test_a_dump_that_is_only_padding_after_its_header(tmp_path: Path) -> None:
    a = analyze(write(tmp_path, b"MEMDUMP 1.3\n" + b"\0" * 100))
    assert (a.events, a.truncated, a.complete) == (0, False, False)


def test_the_in_process_worked_example_and_its_report() -> None:
    result = run_cli("inprocess.memdump", cwd=FIXTURES)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (FIXTURES / "inprocess.report.txt").read_text()
    report = json.loads(run_cli("--format", "json", "inprocess.memdump", cwd=FIXTURES).stdout)
    assert report["symbolized_frames"] == 0
    assert [f["function"] for f in report["leaks"][0]["stack"]] == ["grow", "make_table", "main"]
