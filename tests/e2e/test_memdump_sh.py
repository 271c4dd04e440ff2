"""scripts/memdump.sh: the program runs as if by itself (stdio, arguments, environment, status)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import (
    GDB_TIMEOUT,
    REPO,
    analyze,
    expect_leaks,
    marker,
    program,
    read_dump,
)

SCRIPT = REPO / "scripts" / "memdump.sh"


def memdump_sh(*args: str | Path, stdin: bytes = b"", env: dict[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = subprocess.run([str(SCRIPT), *(str(a) for a in args)], input=stdin,
                              capture_output=True, timeout=GDB_TIMEOUT, env=env, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"memdump.sh did not finish within {GDB_TIMEOUT} s: {args}\n{exc.stderr!r}")
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    return proc


ARGS = ["two words", "", "it's", '"double"', "$HOME", "*", "new\nline", "; ls", "back\\slash",
        "tab\there", "-o", "--"]
STDIN = b"first line\n\x00binary\xff\xfe\r\nno final newline"


def test_stdio_and_arguments_pass_through(dump: Path) -> None:
    proc = memdump_sh("-o", dump, "--", program("stdio_echo"), *ARGS, stdin=STDIN)
    expected = b"".join(b"[" + a.encode() + b"]\n" for a in ARGS) + STDIN
    assert proc.stdout == expected
    assert proc.stderr.decode() == f"stderr line\nmemdump.sh: dump: {dump}\n"
    assert proc.returncode == 0
    assert read_dump(dump).end == ("exit", "0")


def test_exit_status(dump: Path) -> None:
    env = dict(os.environ, ECHO_STATUS="3")
    proc = memdump_sh("-o", dump, "--", program("stdio_echo"), env=env)
    assert proc.returncode == 3, proc.stderr
    assert read_dump(dump).end == ("exit", "3")


def test_killed_by_sigsegv_exits_139(dump: Path) -> None:
    proc = memdump_sh("-o", dump, "--", program("crash_segv"))
    assert proc.returncode == 139, proc.stderr
    facts = read_dump(dump)
    assert ("signal", "SIGSEGV") in facts.process
    assert facts.end == ("killed", "SIGSEGV")
    expect_leaks(analyze(dump), {marker("crash_segv.c", "before-crash"): (64, 1)})


def test_json_and_text_reports(tmp_path: Path, dump: Path) -> None:
    report_path = tmp_path / "report.json"
    proc = memdump_sh("-o", dump, "--report", "--json", report_path, "--",
                      program("leak_malloc"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    site = marker("leak_malloc.c", "block")
    report = json.loads(report_path.read_text())
    assert report["summary"]["leaked"] == {"bytes": 24, "blocks": 1}
    assert [g["bytes"] for g in report["leaks"] if g["kind"] == "leak"] == [24]
    assert str(site) in proc.stderr.decode()


def test_default_dump_path(tmp_path: Path) -> None:
    proc = memdump_sh("--depth", "4", "--", program("leak_malloc"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    dumps = list(tmp_path.glob("leak_malloc.*.memdump"))
    assert len(dumps) == 1, proc.stderr
    facts = read_dump(dumps[0])
    assert dumps[0].name == f"leak_malloc.{facts.info['pid']}.memdump"
    assert facts.info["depth"] == "4"
    assert proc.stderr.decode().splitlines()[-1] == f"memdump.sh: dump: {dumps[0].name}"


def test_environment_unchanged(dump: Path) -> None:
    """GDB adds LINES and COLUMNS and starts the program through a shell; none of that shows."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MARKER": "x y", "HOME": "/nonexistent"}
    direct = subprocess.run(["/usr/bin/env", "-0"], capture_output=True, env=env, check=True)
    proc = memdump_sh("-o", dump, "--", "/usr/bin/env", "-0", env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split(b"\0")) == sorted(direct.stdout.split(b"\0"))


@pytest.mark.parametrize("args", [
    [],
    ["--bogus", "--", "true"],
    ["-o"],
    ["--depth", "many", "--", "true"],
    ["--", "/nonexistent/program"],
    ["--", "no-such-command-anywhere"],
    ["--", "NOT_EXECUTABLE"],
    ["--report"],
], ids=["nothing", "unknown-option", "missing-value", "bad-depth", "no-such-file",
        "not-in-path", "not-executable", "no-program"])
def test_bad_arguments(tmp_path: Path, args: list[str]) -> None:
    plain = tmp_path / "plain-file"
    plain.write_text("not a program\n")
    plain.chmod(stat.S_IRUSR | stat.S_IWUSR)
    args = [str(plain) if a == "NOT_EXECUTABLE" else a for a in args]
    proc = memdump_sh(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memdump.sh: "), lines
    assert list(tmp_path.glob("*.memdump")) == []


def test_help() -> None:
    proc = memdump_sh("--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith(b"usage: scripts/memdump.sh")


def test_static_program_fails_with_memdumps_message(dump: Path) -> None:
    proc = memdump_sh("-o", dump, "--", program("leak_malloc_static"))
    assert proc.returncode == 125
    assert proc.stdout == b""
    assert "statically linked" in proc.stderr.decode()
