"""`--format heaptrack` (heaptrackfile.py): a dump as heaptrack's data file, held to the worked
example of docs/exports.md ("heaptrack") and read back by heaptrack_print."""

from __future__ import annotations

import gzip
import random
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, run_cli
from exports_testlib import doc_block
from gendump import Dump, corrupt
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
    first = packed.read_bytes()  # no time nor name in the header: the same bytes every time
    time.sleep(1.1)
    assert _export(tmp_path, "again.heaptrack.gz").read_bytes() == first
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


@pytest.mark.parametrize(("line", "message"), [
    (b"+ 5 0x555555570010 zz", "36: malformed SIZE 'zz' (expected a number)"),
    (b"+ 5 0x555555570010", "36: '+' record has 2 fields, expected 3 (STACK RESULT SIZE)"),
    (b"e 3 4242 malloc 3 0x555555560010", "27: 'malloc' event has 0 arguments, expected 1 (SIZE)"),
])
def test_a_field_it_cannot_read_is_one_line(tmp_path: Path, line: bytes, message: str) -> None:
    """A heap event's field the pass cannot read is the replay's `PATH:LINE: message` (it was
    Python's traceback)."""
    lines = DUMP.read_bytes().split(b"\n")
    number = int(message.split(":")[0])
    lines[number - 1] = line
    dump = tmp_path / "bad.memdump"
    dump.write_bytes(b"\n".join(lines))
    run = run_cli("--format", "heaptrack", "-o", str(tmp_path / "x"), str(dump))
    assert (run.returncode, run.stderr) == (2, f"memdump-analyze: {dump}:{message}\n")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("name", "expected"), [
    ("main", "main"), ("main()", "main"), ("main(int, char**)", "main"),
    ("S::f(int) const", "S::f(int) const"), ("mainly(int)", "mainly(int)"), (None, None)])
def test_main_is_named_as_heaptrack_names_it(name: str | None, expected: str | None) -> None:
    assert function_name(name) == expected


def _written(dump: Path, out: Path) -> bytes | tuple[str, str]:
    """The heaptrack file of DUMP, or the error's type and text."""
    try:
        heaptrackfile.write(str(dump), str(out), symbolize=False)
    except Exception as e:  # noqa: BLE001 (both ways must fail alike, whatever the error)
        return type(e).__name__, str(e)
    return out.read_bytes()


@pytest.mark.parametrize("seed", range(40))
def test_the_quick_operations_are_what_effect_says(seed: int, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass reads free, delete, delete[], malloc, new and new[] without dumpformat.effect:
    on generated dumps (every operation, realloc's edge cases, custom blocks, double and invalid
    frees, exec, clock samples, attached recordings, a cut last line), and on each corrupted, its
    file (or its error) is byte for byte the one made with every operation through effect."""
    rng = random.Random(seed)
    text = Dump(rng).build(rng.choice([60, 400]))
    for i, data in enumerate((text, corrupt(rng, text), corrupt(rng, text))):
        dump = tmp_path / f"{i}.memdump"
        dump.write_bytes(data)
        quick = _written(dump, tmp_path / "quick")
        with monkeypatch.context() as m:  # the reference: only the custom blocks skipped
            m.setattr(heaptrackfile, "_KINDS", {op: kind for op, kind in
                                                heaptrackfile._KINDS.items()
                                                if kind == heaptrackfile._SKIP})
            reference = _written(dump, tmp_path / "reference")
        assert quick == reference
        if i == 0 and b" exec " not in text:  # (an exec empties the file before it)
            assert isinstance(quick, bytes) and b"\n+ " in quick and b"\n- " in quick
