"""Dump format 2.2: clock samples (`c MILLIS RSS`), read by this reader, and skipped with one
warning by a 2.1 reader (the analyser of the commit before 2.2, taken from git)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, Dump, analyser_before, main_at, run_cli
from memdump_analyzer import DumpError, DumpReader, analyze
from memdump_analyzer.dumpformat import FORMAT_LINE, RECORDS, VERSION


def test_the_version_and_the_record() -> None:
    assert (VERSION, FORMAT_LINE, RECORDS["c"]) == ((2, 7), "MEMDUMP 2.7\n", "MILLIS RSS")


def _clocked(tmp_path: Path, *clock_lines: str) -> str:
    d = Dump(header="MEMDUMP 2.2", short=True)
    d.raw("c 0 1048576")
    d.malloc("0x10", 24, main_at(3))
    for line in clock_lines:
        d.raw(line)
    d.malloc("0x40", 8, main_at(4))
    d.end()
    return d.write(tmp_path)


def test_the_reader_keeps_the_last_sample(tmp_path: Path) -> None:
    with DumpReader(_clocked(tmp_path, "c 7 2097152", "c 9 0")) as reader:
        assert len(list(reader.records())) == 3
        assert (reader.clock, reader.clocks) == ((9, 0), 3)


@pytest.mark.parametrize(("line", "message"), [
    ("c 7", "'c' record has 1 field, expected 2 (MILLIS RSS)"),
    ("c 7 1 2", "'c' record has 3 fields, expected 2 (MILLIS RSS)"),
    ("c seven 1", "malformed MILLIS 'seven' (expected a number)"),
    ("c 7 -1", "malformed RSS '-1' (expected a number)"),
])
def test_malformed_samples(tmp_path: Path, line: str, message: str) -> None:
    path = _clocked(tmp_path, line)
    number = Path(path).read_text().splitlines().index(line) + 1
    with pytest.raises(DumpError) as e:
        analyze(path)
    assert str(e.value) == f"{path}:{number}: {message}"


def test_a_sample_earlier_than_the_one_before(tmp_path: Path) -> None:
    path = _clocked(tmp_path, "c 120 1", "c 90 1")
    number = Path(path).read_text().splitlines().index("c 90 1") + 1
    result = run_cli("timeline", path)
    assert (result.returncode, result.stderr) == (2, (
        f"memdump-analyze: {path}:{number}: clock sample at 90 ms is earlier than the one "
        "before (120 ms)\n"))
    assert run_cli(path).stderr == result.stderr


def test_samples_change_nothing_in_the_leak_report(tmp_path: Path) -> None:
    clocked = _clocked(tmp_path, "c 7 2097152")
    plain = tmp_path / "plain.memdump"
    plain.write_text("".join(line for line in Path(clocked).read_text().splitlines(True)
                             if not line.startswith("c ")))
    with_c, without = run_cli("--format", "json", clocked), run_cli("--format", "json", str(plain))
    assert (with_c.returncode, with_c.stderr) == (0, "")
    assert with_c.stdout.replace(clocked, "X") == without.stdout.replace(str(plain), "X")


def test_a_21_reader_skips_the_samples_with_one_warning(tmp_path: Path) -> None:
    old = analyser_before((2, 2), tmp_path)
    assert "VERSION: tuple[int, int] = (2, 1)" in (
        old / "memdump_analyzer" / "dumpformat.py").read_text()
    example = FIXTURES / "views.memdump"
    result = subprocess.run([sys.executable, "-m", "memdump_analyzer", "--format", "json",
                             str(example)], cwd=tmp_path, env={"PYTHONPATH": str(old)},
                            capture_output=True, text=True, check=False)
    first = example.read_text().splitlines().index("c 0 1048576") + 1
    warning = (f"skipped records with unknown tag 'c' (first at line {first}): the dump was "
               "written by a newer memdump")
    assert (result.returncode, result.stderr) == (0, f"memdump-analyze: warning: {warning}\n")
    now = run_cli("--format", "json", str(example))
    assert (now.returncode, now.stderr) == (0, "")
    old_report, new_report = json.loads(result.stdout), json.loads(now.stdout)
    assert (old_report.pop("warnings"), new_report.pop("warnings")) == ([warning], [])
    # the report's own version moved on (1.7 added `locks`, 1.8 the access errors, 1.9 GDB's
    # `before_recording`, absent here): all else is the same
    assert (old_report.pop("version"), new_report.pop("version")) == ("1.6", "1.9")
    assert old_report == new_report
