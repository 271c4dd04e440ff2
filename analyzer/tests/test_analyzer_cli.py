"""The command line, run as a user runs it: exit codes, one-line errors, warnings, output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from analyzer_testlib import FIXTURES, REPO, Dump, main_at, run_cli
from memdump_analyzer import cli
from memdump_analyzer.colour import colour_wanted

EXAMPLE = str(FIXTURES / "example.memdump")


def test_exit_0_with_a_report() -> None:
    result = run_cli(EXAMPLE)
    assert result.returncode == 0
    assert result.stderr == ""
    expected = (
        "LEAK 2 of 2: 16 bytes in 1 block, definitely lost\n"
        "    at new_node (leak.c:3) (inlined)\n    by main (leak.c:7)\n"
    )
    assert expected in result.stdout
    assert "\033[" not in result.stdout


def test_fail_on_leak() -> None:
    assert run_cli("--fail-on-leak", EXAMPLE).returncode == 1
    assert run_cli("--fail-on-leak", "--format", "json", EXAMPLE).returncode == 1


def test_fail_on_leak_refuses_to_pass_a_cut_recording(tmp_path: Path) -> None:
    """A dump without an end record, whose recording was cut before its first event or after
    events that leaked nothing, is exit status 3 with --fail-on-leak (no verdict), with one
    line; leaks found in a cut recording are still 1; an ended recording without leaks is 0."""
    header = Dump().write(tmp_path, "header.memdump")
    ran = Dump()
    ran.malloc("0x10", 16, main_at(3))
    ran.free("0x10", main_at(4))
    cut = ran.write(tmp_path, "cut.memdump")
    ran.end()
    ended = ran.write(tmp_path, "ended.memdump")
    leaky = Dump()
    leaky.malloc("0x10", 16, main_at(3))
    leaky_cut = leaky.write(tmp_path, "leaky.memdump")
    for path, what in ((header, "before its first event"), (cut, "after 2 events")):
        for options in ((), ("--format", "json"), ("--format", "collapsed")):
            result = run_cli("--fail-on-leak", *options, path)
            assert result.returncode == 3, result.stderr
            assert result.stderr.splitlines()[-1] == (
                f"memdump-analyze: {path}: the recording was cut {what} (no end record): "
                "--fail-on-leak has no verdict (exit status 3)")
        assert run_cli(path).returncode == 0
    assert run_cli("--fail-on-leak", leaky_cut).returncode == 1
    assert run_cli("--fail-on-leak", ended).returncode == 0
    assert run_cli("diff", "--fail-on-leak", ended, header).returncode == 3
    assert run_cli("diff", "--fail-on-leak", header, ended).returncode == 3
    assert run_cli("diff", "--fail-on-leak", ended, ended).returncode == 0
    assert run_cli("diff", ended, header).returncode == 0
    for command in ((), ("diff",)):
        assert "3 with --fail-on-leak" in " ".join(run_cli(*command, "--help").stdout.split())


def test_fail_on_leak_ignores_runtime_blocks(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 16, main_at(3))
    d.free("0x10", main_at(4))
    d.end()
    assert run_cli("--fail-on-leak", d.write(tmp_path)).returncode == 0
    # mixed.memdump has runtime blocks and leaks
    assert run_cli("--fail-on-leak", str(FIXTURES / "mixed.memdump")).returncode == 1


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "{path}: the file is empty (not a memdump dump)"),
        (b"hello\n", "{path}:1: not a memdump dump (first line is 'hello')"),
        (b"MEMDUMP 3.0\n", "{path}:1: dump format 3.0 is newer than this analyser (reads 2.x)"),
        (
            b"MEMDUMP 1.0\ne 1 1 malloc 0 0x10 1\ne 3 1 free 0 - 0x10\n",
            "{path}:3: event 3 follows event 1 (events are missing)",
        ),
    ],
)
def test_bad_dumps_exit_2_with_one_line(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.memdump"
    path.write_bytes(content)
    result = run_cli(str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"memdump-analyze: {problem.format(path=path)}\n"


def test_missing_file_and_directory(tmp_path: Path) -> None:
    result = run_cli(str(tmp_path / "none.memdump"))
    assert (result.returncode, result.stderr) == (
        2,
        f"memdump-analyze: {tmp_path / 'none.memdump'}: no such file\n",
    )
    result = run_cli(str(tmp_path))
    assert (result.returncode, result.stderr) == (
        2,
        f"memdump-analyze: {tmp_path}: is a directory, not a dump file\n",
    )


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--format", "xml", EXAMPLE],
        ["--top", "0", EXAMPLE],
        ["--max-frames", "x", EXAMPLE],
        [EXAMPLE, EXAMPLE],
        ["--bogus", EXAMPLE],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("memdump-analyze: error: ")


def test_help() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert result.stdout.startswith(
        "usage: memdump-analyze [-h]\n"
        "                       [--format {text,json,sarif,valgrind,valgrind-xml,pprof,collapsed,"
        "massif,html,heaptrack}]\n"
    )


def test_warnings_go_to_stderr_and_into_the_report(tmp_path: Path) -> None:
    d = Dump()
    d.malloc("0x10", 16, main_at(3))
    line = d.raw("zz new record")
    path = d.write(tmp_path)
    result = run_cli(path)
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        f"memdump-analyze: warning: skipped records with unknown tag 'zz' (first at line {line}): "
        "the dump was written by a newer memdump",
        "memdump-analyze: warning: the dump has no end record: the recording stopped early (GDB or "
        "the machine died); everything up to the last complete record (event 1) was analysed",
    ]
    assert "note: the dump has no end record" in result.stdout
    assert "stopped early at event 1 (GDB or the machine died)" in result.stdout
    report = json.loads(run_cli("--format", "json", path).stdout)
    assert len(report["warnings"]) == 2 and report["complete"] is False and report["end"] is None


def test_output_file(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = run_cli("--format", "json", "-o", str(out), "example.memdump", cwd=FIXTURES)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert out.read_text() == (FIXTURES / "example.report.json").read_text()
    bad = tmp_path / "no" / "such" / "dir" / "r.txt"
    result = run_cli("-o", str(bad), EXAMPLE)
    assert result.returncode == 2
    assert result.stderr == (
        f"memdump-analyze: {bad}: cannot write the report (No such file or directory)\n"
    )


def test_show_runtime(tmp_path: Path) -> None:
    mixed = str(FIXTURES / "mixed.memdump")
    assert "RUNTIME" not in run_cli(mixed).stdout
    assert "--show-runtime lists them" in run_cli(mixed).stdout
    shown = run_cli("--show-runtime", mixed).stdout
    title = "RUNTIME 1 of 1: 1,024 bytes in 1 block, still reachable\n"
    assert title + "    at _IO_file_doallocate" in shown


def test_no_colour_when_asked_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli.main([EXAMPLE]) == 0
    assert "\033[" not in capsys.readouterr().out


def test_unexpected_failure_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    def boom(path: str, **options: object) -> None:
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(cli, "analyze", boom)
    monkeypatch.delenv("MEMDUMP_DEBUG", raising=False)
    assert cli.main([EXAMPLE]) == 2
    err = capsys.readouterr().err
    assert err == (
        "memdump-analyze: internal error: RuntimeError: something broke "
        "(run with MEMDUMP_DEBUG=1 for the traceback)\n"
    )
    monkeypatch.setenv("MEMDUMP_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main([EXAMPLE])


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_script_runs_from_anywhere(tmp_path: Path) -> None:
    script = REPO / "scripts" / "memdump-analyze"
    link = tmp_path / "memdump-analyze"
    link.symlink_to(script)
    for command in (str(script), str(link)):
        result = subprocess.run(
            [command, "--fail-on-leak", EXAMPLE],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 1, result.stderr
        assert "LEAK 2 of 2: 16 bytes in 1 block" in result.stdout
    result = subprocess.run(
        [str(script), "/nonexistent.memdump"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stderr) == (
        2,
        "memdump-analyze: /nonexistent.memdump: no such file\n",
    )


def test_colour_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """One policy for the analyser and GDB's commands: a terminal, and NO_COLOR unset or empty."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert colour_wanted(True) and not colour_wanted(False)
    monkeypatch.setenv("NO_COLOR", "")
    assert colour_wanted(True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colour_wanted(True)


def test_several_reports_read_the_dump_once(monkeypatch: pytest.MonkeyPatch, capsys,  # type: ignore[no-untyped-def]
                                            tmp_path: Path) -> None:
    """scripts/memdump.sh --report --json FILE: the text and JSON reports, each as its own
    command writes it, from one reading of the dump."""
    read: list[str] = []
    analyze = cli.analyze

    def counted(path: str, **options: object):  # type: ignore[no-untyped-def]
        read.append(path)
        return analyze(path, **options)

    monkeypatch.setattr(cli, "analyze", counted)
    monkeypatch.chdir(FIXTURES)
    out = tmp_path / "report.json"
    json_run = ["--format", "json", "-o", str(out), "example.memdump"]
    assert cli.several(["example.memdump"], json_run) == (0, 0)
    assert read == ["example.memdump"]
    assert capsys.readouterr().out == (FIXTURES / "example.report.txt").read_text()
    assert out.read_text() == (FIXTURES / "example.report.json").read_text()
    # each command alone reads the dump again; the first to fail stops the rest
    assert cli.main(["example.memdump"]) == 0
    assert read == ["example.memdump"] * 2
    bad = ["--format", "json", "-o", str(tmp_path / "no" / "r.json"), "example.memdump"]
    assert cli.several(["example.memdump"], bad, json_run) == (2, 2)
    assert capsys.readouterr().err.startswith(f"memdump-analyze: {tmp_path}/no/r.json: cannot "
                                              "write the report")
    assert read == ["example.memdump"] * 3


def test_the_view_subcommands_are_the_views() -> None:
    """cli.VIEW_NAMES tells a view's subcommand from a dump without importing the views."""
    from memdump_analyzer.views import VIEWS

    assert cli.VIEW_NAMES == tuple(VIEWS)


def test_the_script_starts_python_without_site(tmp_path: Path) -> None:
    """scripts/memdump-analyze runs Python without `site` (-S): the analyser uses the standard
    library only, and the site-packages directories' .pth files cost every start-up; a
    sitecustomize on the path, which `site` would run, stays unrun. The report is the same."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.stderr.write('site ran\\n')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tmp_path)
    run = subprocess.run([str(REPO / "scripts" / "memdump-analyze"),
                          "example.memdump"], capture_output=True, text=True,
                         env=env, cwd=FIXTURES, timeout=60)
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout == (FIXTURES / "example.report.txt").read_text()
