"""`--format heaptrack` (heaptrackfile.py): a dump as heaptrack's data file, held to the worked
example of docs/exports.md ("heaptrack") and read back by heaptrack_print."""

from __future__ import annotations

import gzip
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, run_cli
from exports_testlib import doc_block
from memdump_analyzer import heaptrackfile
from memdump_analyzer.cli import main
from memdump_analyzer.heaptrackfile import function_name

DUMP = FIXTURES / "heaptrack.memdump"
EXPECTED = FIXTURES / "heaptrack.heaptrack"


@pytest.fixture(autouse=True)
def _fixed_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `I` line names the machine: the example's is 4 KiB pages, 4 GiB."""
    monkeypatch.setattr(heaptrackfile, "machine", lambda: (0x1000, 0x100000))


def _export(tmp_path: Path, name: str = "out.heaptrack") -> Path:
    out = tmp_path / name
    assert main(["--format", "heaptrack", "--no-symbolize", "-o", str(out), str(DUMP)]) == 0
    return out


def test_the_worked_example_is_the_fixture_and_the_output(tmp_path: Path) -> None:
    assert doc_block("The dump, `analyzer/tests/fixtures/heaptrack.memdump`:") == DUMP.read_text()
    text = _export(tmp_path).read_text()
    assert doc_block("memdump-analyze --format heaptrack -o app.heaptrack heaptrack.memdump") \
        == text
    assert text == EXPECTED.read_text()


def test_the_file_is_private_and_compressed_as_its_name_says(tmp_path: Path) -> None:
    plain = _export(tmp_path).read_bytes()
    packed = _export(tmp_path, "out.heaptrack.gz")
    assert stat.S_IMODE(packed.stat().st_mode) == 0o600
    assert gzip.decompress(packed.read_bytes()) == plain
    if shutil.which("zstd"):
        zst = _export(tmp_path, "out.heaptrack.zst")
        assert subprocess.run(["zstd", "-dc", str(zst)], capture_output=True,
                              check=True).stdout == plain


@pytest.mark.skipif(shutil.which("heaptrack_print") is None, reason="needs heaptrack_print")
def test_heaptrack_print_reads_it(tmp_path: Path) -> None:
    """The events after the exec: 7 allocations (the realloc's new blocks among them, the
    custom block left out), one freed at once, the exception pool freed at exit as heaptrack's
    hooks free it, 128 + 24 + 40 bytes leaked."""
    out = subprocess.run(["heaptrack_print", str(_export(tmp_path, "out.heaptrack.gz"))],
                         capture_output=True, text=True, timeout=60).stdout
    summary = out[out.index("total runtime"):].splitlines()
    assert summary == ["total runtime: 0.01s.",
                       "calls to allocation functions: 7 (538/s)",
                       "temporary memory allocations: 1 (76/s)",
                       "peak heap memory consumption: 72.90K",
                       "peak RSS (including heaptrack overhead): 2.10M",
                       "total memory leaked: 192B"]
    # the inlined frame (an `fi` record) under the frame of its pc, as heaptrack shows its own
    assert ("MOST CALLS TO ALLOCATION FUNCTIONS\n"
            "4 calls to allocation functions with 128B peak consumption from\n"
            "read_row\n  at /src/app.cpp:12\n  in /src/app\n"
            "Cache::load(int) const\n  at /src/app.cpp:21\n"
            "4 calls with 128B peak consumption from:\n"
            "    main\n      at /src/app.cpp:30\n      in /src/app\n") in out


def test_mistakes_are_one_line(tmp_path: Path) -> None:
    run = run_cli("--format", "heaptrack", str(DUMP))
    assert (run.returncode, run.stderr) == (
        2, "memdump-analyze: error: --format heaptrack writes a file: give -o FILE\n")
    run = run_cli("--format", "heaptrack", "--base", str(DUMP), "-o", str(tmp_path / "x"),
                  str(DUMP))
    assert (run.returncode, run.stderr) == (
        2, "memdump-analyze: error: --format heaptrack takes no --base: heaptrack's own tools "
           "compare two files\n")
    run = run_cli("--format", "heaptrack", "-o", str(tmp_path / "no" / "x"), str(DUMP))
    assert (run.returncode, run.stderr) == (
        2, f"memdump-analyze: {tmp_path / 'no' / 'x'}: cannot write the file (No such file or "
           "directory)\n")
    run = run_cli("--format", "heaptrack", "-o", str(tmp_path / "x"), str(tmp_path / "none"))
    assert (run.returncode, run.stderr) == (
        2, f"memdump-analyze: {tmp_path / 'none'}: no such file\n")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("name", "expected"), [
    ("main", "main"), ("main()", "main"), ("main(int, char**)", "main"),
    ("S::f(int) const", "S::f(int) const"), ("mainly(int)", "mainly(int)"), (None, None)])
def test_main_is_named_as_heaptrack_names_it(name: str | None, expected: str | None) -> None:
    assert function_name(name) == expected
