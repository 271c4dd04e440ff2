"""dumpformat: the format's one table of constants agrees with the spec, and what it writes the
reader reads back. (`gdb_ext/tests/test_track.py` ties `apply` to the replay's fast path.)"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, REPO
from memdump_analyzer import DumpReader
from memdump_analyzer.dumpformat import (
    CUSTOM,
    CXX_ENTRY_POINTS,
    FAMILY,
    FORMAT_LINE,
    KIND_BY_CODE,
    KIND_CODES,
    KIND_WORDS,
    KINDS,
    NO_RESULT,
    OPERATIONS,
    RECORDS,
    RELEASES,
    VERSION,
    apply,
    escape,
    event_args,
    format_args,
    public_name,
    source_path,
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
