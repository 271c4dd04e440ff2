"""scripts/memdump.sh's reports made in GDB's Python (shreport.in_gdb) are those its analyser after
GDB makes (shreport.main): the same text, byte for byte, the same JSON file, the same compacted
dump, the same failures; a dump over the size bound is left to the analyser."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from analyzer_testlib import ANALYZER, FIXTURES
from memdump_analyzer import shreport

EXAMPLE = FIXTURES / "example.memdump"


def _after_gdb(cwd: Path, *args: str) -> tuple[bytes, int]:
    """What memdump.sh shows of `main` (its stdout and stderr both on memdump.sh's stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["PYTHONPATH"] = str(ANALYZER)
    proc = subprocess.run(
        [sys.executable, "-P", "-S", "-c",
         "import sys\nfrom memdump_analyzer.shreport import main\nsys.exit(main(sys.argv[1:]))",
         "memdump.sh", *args],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    return proc.stdout, proc.returncode


def _in_gdb(cwd: Path, dump: str, report: bool, json_file: str, dumps: list[str],
            terminal: bool = False) -> tuple[bytes, int] | None:
    for name in ("out", "status"):
        (cwd / name).unlink(missing_ok=True)
    here = os.getcwd()
    os.chdir(cwd)
    try:
        made = shreport.in_gdb("memdump.sh", dump, report, json_file, dumps,
                               str(cwd / "out"), str(cwd / "status"), terminal)
    finally:
        os.chdir(here)
    if not made:
        assert not (cwd / "out").exists() and not (cwd / "status").exists()
        return None
    return (cwd / "out").read_bytes(), int((cwd / "status").read_text())


def _two(tmp_path: Path) -> tuple[Path, Path]:
    dirs = (tmp_path / "after", tmp_path / "gdb")
    for d in dirs:
        d.mkdir()
        shutil.copy(EXAMPLE, d / "run.memdump")
    return dirs


def test_report_json_and_compaction_equal_the_analysers_after_gdb(tmp_path: Path) -> None:
    after, gdb = _two(tmp_path)
    expected = _after_gdb(after, "run.memdump", "1", "r.json", "run.memdump")
    got = _in_gdb(gdb, "run.memdump", True, "r.json", ["run.memdump"])
    assert got == expected
    text, status = expected
    assert status == 0
    assert b"LEAK 2 of 2: 16 bytes in 1 block, definitely lost\n" in text
    assert text.endswith(b"memdump.sh: run.memdump: compacted, 830 bytes of text in 493\n")
    assert (after / "run.memdump").stat().st_size == 493
    assert (gdb / "r.json").read_bytes() == (after / "r.json").read_bytes()
    assert (gdb / "run.memdump").read_bytes() == (after / "run.memdump").read_bytes()
    assert b"\033[" not in text


def test_compaction_alone(tmp_path: Path) -> None:
    after, gdb = _two(tmp_path)
    expected = _after_gdb(after, "run.memdump", "0", "", "run.memdump")
    assert _in_gdb(gdb, "run.memdump", False, "", ["run.memdump"]) == expected
    assert expected[1] == 0 and expected[0].startswith(b"memdump.sh: run.memdump: compacted, ")


def test_a_json_report_that_cannot_be_written_fails_alike(tmp_path: Path) -> None:
    after, gdb = _two(tmp_path)
    expected = _after_gdb(after, "run.memdump", "1", "no/r.json")
    assert _in_gdb(gdb, "run.memdump", True, "no/r.json", []) == expected
    assert expected[1] == shreport.JSON_FAILED
    assert expected[0].endswith(b"memdump-analyze: no/r.json: cannot write the report "
                                b"(No such file or directory)\n")


def test_colours_follow_memdump_shs_terminal(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, gdb = _two(tmp_path)
    text, status = _in_gdb(gdb, "run.memdump", True, "", [], terminal=True) or (b"", -1)
    assert status == 0 and b"\033[" in text
    monkeypatch.setenv("NO_COLOR", "1")
    text, status = _in_gdb(gdb, "run.memdump", True, "", [], terminal=True) or (b"", -1)
    assert status == 0 and b"\033[" not in text


def test_a_dump_over_the_bound_is_left_to_the_analyser(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _, gdb = _two(tmp_path)
    size = (gdb / "run.memdump").stat().st_size
    monkeypatch.setattr(shreport, "IN_GDB_MAX_BYTES", size - 1)
    assert _in_gdb(gdb, "run.memdump", True, "", ["run.memdump"]) is None
    monkeypatch.setattr(shreport, "IN_GDB_MAX_BYTES", size)
    assert _in_gdb(gdb, "run.memdump", True, "", ["run.memdump"]) is not None
    assert _in_gdb(gdb, "missing.memdump", True, "", []) is None


def test_a_dump_name_that_is_not_utf8_is_written_alike(tmp_path: Path) -> None:
    """A file name's undecodable bytes are said alike both ways (the report escapes them)."""
    name = os.fsdecode(b"run\xff.memdump")
    after, gdb = _two(tmp_path)
    for d in (after, gdb):
        os.rename(d / "run.memdump", d / name)
    expected = _after_gdb(after, name, "1", "", name)
    assert expected[1] == 0 and b"dump: run\\xff.memdump (recorded" in expected[0]
    assert _in_gdb(gdb, name, True, "", [name]) == expected
