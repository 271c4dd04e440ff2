"""The reference answers for heap errors: valgrind's and ASan's first error on each of our programs.

tests/programs/heap_errors.c and heap_errors_cpp.cpp make one heap error per mode (an overflow, a
read past the end in a loop, an underflow before a `new[]` array, a memcpy overflow, an overflow
inside malloc's rounding slack, uses after free, a stale write into a chunk glibc handed to another
module, double and interior frees, `delete` of `new[]`, a read that lands in a live neighbour) and
a heavy correct program per language.
tests/fixtures/heap_errors.tsv holds, for each, valgrind memcheck's first error (kind, what, the
size and offset against the block, the faulting line, the lines of the allocation and the free, the
thread), an ASan build's report (class, access, offset, the same lines, the thread) and what the
program does natively. This module holds both tools to every row, so that the table stays the
truth on this toolchain; issue 27's memdump compares its own reports with the same rows.

Neither tool sees a read that jumps past a block's end into a live neighbour (neighbour-read): both
mark only the bytes between blocks (valgrind's red zones, ASan's shadow), and the neighbour's bytes
are addressable; memdump's guard pages miss it too (the read touches none). Both see every other
error here: the slack overflow (byte 21 of a 20-byte block, inside the 24 bytes glibc gives it) is
visible to both, which track the requested size, and the stale
write that natively lands in the other module's record (and crashes it later, in its callback) is a
use after free to both, because their quarantine keeps the freed chunk from being handed out again:
the tests check that the other module's record is the freed chunk natively and not under either
tool. What only the tools' quarantine catches is what memdump can catch only while its own
quarantine holds the block.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from memdump_e2e import REPO, Site, build_dir, marker, program

TABLE = REPO / "tests" / "fixtures" / "heap_errors.tsv"
SOURCES = {"heap_errors": "heap_errors.c", "heap_errors_cpp": "heap_errors_cpp.cpp"}
TIMEOUT = 300  # seconds: a second or two each on a quiet machine, tens on a loaded one
VALGRIND_ERROR_EXIT = 99
NONE = "-"


@dataclass(frozen=True)
class Row:
    """One program mode's reference answers (the columns of tests/fixtures/heap_errors.tsv)."""

    program: str
    mode: str
    alloc: str
    free: str
    vg_kind: str
    vg_what: str
    vg_aux: str
    vg_top: str
    vg_tid: str
    asan_class: str
    asan_access: str
    asan_aux: str
    asan_top: str
    asan_thread: str
    native: str
    native_at: str

    @property
    def source(self) -> str:
        return SOURCES[self.program]

    def site(self, kind: str) -> Site | None:
        name = {"ERROR": self.mode, "ALLOC": self.alloc, "FREE": self.free}[kind]
        return None if name == NONE else marker(self.source, name, kind)


def _rows() -> list[Row]:
    lines = [line for line in TABLE.read_text(encoding="utf-8").splitlines()
             if not line.startswith("#")]
    reader = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    return [Row(**record) for record in reader]


ROWS = _rows()
IDS = [f"{row.program}:{row.mode}" for row in ROWS]


@dataclass
class Answer:
    """A tool's first error, as the table's columns see it."""

    kind: str
    what: str
    aux: str
    top: str
    thread: str
    error: Site | None  # the first frame in the program's source, of the error's stack
    alloc: Site | None  # ... of the block's allocation stack
    free: Site | None  # ... of the stack that freed it (a use after free, a double free)


def _first_in(source: str, frames: list[tuple[str, str | None, int]]) -> Site | None:
    return next((Site(file, line) for _, file, line in frames if file == source), None)


def _top(source: str, frames: list[tuple[str, str | None, int]]) -> str:
    return NONE if not frames or frames[0][1] == source else frames[0][0]


# -- valgrind --------------------------------------------------------------------------------------


def _xml_frames(stack: ET.Element) -> list[tuple[str, str | None, int]]:
    return [(frame.findtext("fn") or "?", frame.findtext("file"), int(frame.findtext("line") or 0))
            for frame in stack.findall("frame")]


def valgrind_answer(row: Row, tmp: Path) -> tuple[Answer | None, subprocess.CompletedProcess[str]]:
    """valgrind's first <error> (None when it found none) and the process."""
    xml = tmp / "valgrind.xml"
    proc = subprocess.run(
        ["valgrind", "-q", f"--error-exitcode={VALGRIND_ERROR_EXIT}", "--xml=yes",
         f"--xml-file={xml}", str(program(row.program)), row.mode],
        cwd=tmp, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT,
        check=False)
    error = ET.parse(xml).getroot().find("error")
    if error is None:
        return None, proc
    # the error's stack, then pairs of an <auxwhat> and the stack it introduces
    stacks: dict[str, list[tuple[str, str | None, int]]] = {}
    aux: list[str] = []
    for child in error:
        if child.tag == "auxwhat":
            aux.append(child.text or "")
        elif child.tag == "stack":
            label = "error" if not stacks else ("free" if aux[-1].endswith("free'd") else "alloc")
            stacks[label] = _xml_frames(child)
    first = re.sub(r"^Address 0x[0-9a-f]+ is ", "", aux[0]) if aux else NONE
    source = row.source
    return Answer(
        kind=error.findtext("kind") or "", what=error.findtext("what") or "", aux=first,
        top=_top(source, stacks["error"]), thread=error.findtext("tid") or "",
        error=_first_in(source, stacks["error"]), alloc=_first_in(source, stacks.get("alloc", [])),
        free=_first_in(source, stacks.get("free", [])),
    ), proc


# -- ASan ------------------------------------------------------------------------------------------

_ASAN_FRAME = re.compile(r"^\s+#\d+ 0x[0-9a-f]+ in (.+?) (\S+)$")
_ASAN_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+) at 0x[0-9a-f]+ thread (T\d+)")
_ASAN_THREAD = re.compile(r"\bin thread (T\d+)")
_ASAN_LOCATED = re.compile(r"^0x[0-9a-f]+ is located (.*?)(?: \[0x[0-9a-f]+,0x[0-9a-f]+\))?$")
_ASAN_SUMMARY = re.compile(r"^SUMMARY: AddressSanitizer: (\S+)")


def _asan_frame(text: str) -> tuple[str, str | None, int]:
    match = _ASAN_FRAME.match(text)
    assert match, text
    function, where = match.groups()
    file, _, line = where.rpartition(":")
    if not line.isdigit():  # a module and offset, or a column after the line
        file, _, line = file.rpartition(":")
    if not line.isdigit():
        return function, None, 0
    return function, os.path.basename(file), int(line)


def asan_answer(row: Row, report: str) -> Answer | None:
    """The first report in an ASan build's stderr (None when it made none)."""
    start = report.find("ERROR: AddressSanitizer:")
    if start < 0:
        return None
    stacks: dict[str, list[tuple[str, str | None, int]]] = {}
    label = "error"
    kind = access = aux = NONE
    thread = ""
    for line in report[start:].splitlines():
        if (match := _ASAN_SUMMARY.match(line)) is not None:
            kind = match.group(1)
            break
        if (match := _ASAN_ACCESS.match(line)) is not None:
            access = f"{match.group(1)} of size {match.group(2)}"
            thread = match.group(3)
        elif not thread and (match := _ASAN_THREAD.search(line)) is not None and label == "error":
            thread = match.group(1)
        elif (match := _ASAN_LOCATED.match(line)) is not None:
            aux = match.group(1)
        elif line.startswith("freed by thread"):
            label = "free"
        elif line.startswith(("allocated by thread", "previously allocated by thread")):
            label = "alloc"
        elif _ASAN_FRAME.match(line):
            stacks.setdefault(label, []).append(_asan_frame(line))
    source = row.source
    return Answer(
        kind=kind, what=access, aux=aux, top=_top(source, stacks["error"]), thread=thread or NONE,
        error=_first_in(source, stacks["error"]), alloc=_first_in(source, stacks.get("alloc", [])),
        free=_first_in(source, stacks.get("free", [])),
    )


def asan_program(name: str) -> Path:
    path = build_dir() / "tests" / "programs" / f"{name}_asan"
    if not path.is_file():
        pytest.skip(f"{path.name} is not built: the compiler cannot link -fsanitize=address "
                    "(tests/programs/CMakeLists.txt says so when it configures)")
    return path


# -- the tests -------------------------------------------------------------------------------------


def _expected(row: Row, tool: str) -> Answer:
    if tool == "valgrind":
        columns = (row.vg_kind, row.vg_what, row.vg_aux, row.vg_top, row.vg_tid)
    else:
        columns = (row.asan_class, row.asan_access, row.asan_aux, row.asan_top, row.asan_thread)
    return Answer(*columns, error=row.site("ERROR"), alloc=row.site("ALLOC"),
                  free=row.site("FREE"))


def _stale_addresses(stdout: str) -> tuple[str, str]:
    match = re.search(r"stale-reused: mine (0x[0-9a-f]+), the other module's record (0x[0-9a-f]+)",
                      stdout)
    assert match, stdout
    return match.group(1), match.group(2)


@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is missing (scripts/setup.sh installs it)")
@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_valgrind_first_error(row: Row, tmp_path: Path) -> None:
    answer, proc = valgrind_answer(row, tmp_path)
    if row.vg_kind == NONE:  # the correct runs, and the read that lands in a live neighbour
        assert answer is None, answer
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode == VALGRIND_ERROR_EXIT, proc.stderr
    assert answer == _expected(row, "valgrind")
    if row.mode == "stale-reused":
        # valgrind's queue of freed blocks (--freelist-vol, 20 MB) keeps the chunk from the other
        mine, other = _stale_addresses(proc.stdout)
        assert mine != other


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_asan_first_report(row: Row, tmp_path: Path) -> None:
    exe = asan_program(row.program)
    env = {**os.environ, "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:symbolize=1"}
    proc = subprocess.run([str(exe), row.mode], cwd=tmp_path, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False, env=env)
    answer = asan_answer(row, proc.stderr)
    if row.asan_class == NONE:
        assert answer is None, proc.stderr
        assert proc.returncode == 0, proc.stderr  # LeakSanitizer too: nothing is left
        return
    assert proc.returncode == 1, proc.stderr
    assert answer == _expected(row, "asan"), proc.stderr
    if row.mode == "stale-reused":
        mine, other = _stale_addresses(proc.stdout)  # ASan's quarantine, as valgrind's
        assert mine != other


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_native_outcome(row: Row, tmp_path: Path) -> None:
    """Without a tool: the overflows into the slack or a chunk header and the uses after free go
    unnoticed; glibc aborts on the double and the interior free; the stale write crashes later, in
    the other module's call of its callback; `delete` of a `new[]` array of a class with a
    destructor crashes in `free` (the element count 4 before the pointer reads as a chunk size with
    glibc's bit for a chunk of another arena, whose heap it then looks for)."""
    proc = subprocess.run([str(program(row.program)), row.mode], cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    if row.native == "exit 0":
        assert proc.returncode == 0, proc.stderr
        return
    name, _, message = row.native.partition(" ")
    assert proc.returncode == -signal.Signals[name], (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == message
    if row.mode == "stale-reused":
        mine, other = _stale_addresses(proc.stdout)  # glibc's tcache: the same chunk, at once
        assert mine == other
    kind, _, name = row.native_at.partition(" ")
    assert _crash_site(row) == marker(row.source, name, kind)


_GDB_FRAME = re.compile(r"^#\d+\s.* at (\S+):(\d+)$", re.MULTILINE)


def _crash_site(row: Row) -> Site | None:
    """The first frame in the program's source of the backtrace where the signal stopped it."""
    gdb = shutil.which("gdb")
    if gdb is None:
        pytest.skip("gdb is missing (scripts/setup.sh installs it)")
    proc = subprocess.run([gdb, "-nx", "-batch", "-ex", "run", "-ex", "bt", "--args",
                           str(program(row.program)), row.mode], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)
    sites = [Site(os.path.basename(file), int(line))
             for file, line in _GDB_FRAME.findall(proc.stdout)]
    return next((site for site in sites if site.file == row.source), None)


def test_table_covers_every_mode() -> None:
    """Every mode of a program's MODES table has its row, and every marked error line a row."""
    for name, source in SOURCES.items():
        text = (REPO / "tests" / "programs" / source).read_text(encoding="utf-8")
        modes = set(re.findall(r'\{"([a-z-]+)", \w+\}', text))
        errors = set(re.findall(r"// ERROR: (\S+)", text))
        rows = {row.mode for row in ROWS if row.program == name}
        assert "clean" in modes, source
        assert modes == rows, (source, modes ^ rows)
        assert errors == rows - {"clean"}, (source, errors ^ rows)
