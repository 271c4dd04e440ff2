"""scripts/memdump.sh: the program runs as if by itself (stdio, argv, environment, #! scripts,
status); -p PID records a running process for a while and detaches."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import memdump_e2e
import pytest
from memdump_e2e import (
    GDB_TIMEOUT,
    POLL_DEADLINE,
    POLL_INTERVAL,
    REPO,
    Commanded,
    analyze,
    expect_leaks,
    expect_stop_kinds,
    marker,
    program,
    read_dump,
    read_line,
    wait_for_dump,
)

SCRIPT = REPO / "scripts" / "memdump.sh"


def memdump_sh(*args: str | Path, stdin: bytes = b"", env: dict[str, str] | None = None,
               cwd: Path | None = None, script: Path = SCRIPT,
               as_user: Sequence[str] = ()) -> subprocess.CompletedProcess[bytes]:
    """Run memdump.sh (or `script`, a copy of it) with the recorder of this test, through the
    `as_user` command (setpriv ...) when given."""
    mode = ["--breakpoints"] if memdump_e2e.MODE == "breakpoints" else []
    try:
        proc = subprocess.run([*as_user, str(script), *mode, *(str(a) for a in args)],
                              input=stdin, capture_output=True, timeout=GDB_TIMEOUT, env=env,
                              cwd=cwd)
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


@pytest.mark.one_recorder
def test_children(dump: Path) -> None:
    """--children: fork_leak's child (80 bytes leaked) gets its own dump beside the program's."""
    proc = memdump_sh("-o", dump, "--children", "--", program("fork_leak"))
    assert proc.returncode == 0, proc.stderr
    [child] = [p for p in dump.parent.glob(f"{dump.stem}.*.memdump")]
    facts = read_dump(child)
    assert (facts.info["parent"], facts.end) == (read_dump(dump).info["pid"], ("exit", "0"))
    assert facts.sizes() == [80, 90]
    # every dump written is named, the program's and its child's
    assert [line for line in proc.stderr.decode().splitlines() if "dump:" in line] == [
        f"memdump.sh: dump: {dump}",
        f"memdump.sh: dump: {child} (child process {facts.info['pid']})"]


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
    # both read from one reading of the dump, each as its own command writes it
    text = memdump_e2e.analyze_raw(dump)
    assert proc.stderr.decode().endswith(f"memdump.sh: dump: {dump}\n{text.stdout}")
    assert report_path.read_text() == memdump_e2e.analyze_raw(dump, "--format", "json").stdout
    # a JSON report that cannot be written: the text report, then the failure, exit 125
    unwritable = tmp_path / "no" / "report.json"
    proc = memdump_sh("-o", dump, "--report", "--json", unwritable, "--",
                      program("leak_malloc"))
    assert proc.returncode == 125, proc.stderr
    assert proc.stderr.decode().endswith(
        f"{memdump_e2e.analyze_raw(dump).stdout}memdump-analyze: {unwritable}: cannot write the "
        "report (No such file or directory)\nmemdump.sh: the JSON report failed\n")


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


# -- the program sees what it would see alone ----------------------------------------------------


def test_argv0_as_typed(dump: Path) -> None:
    """A shell runs `cat` with argv[0] "cat"; GDB would pass /usr/bin/cat."""
    argv = ["cat", "/proc/self/cmdline"]
    native = subprocess.run(argv, capture_output=True, check=True)
    assert native.stdout.startswith(b"cat\0")
    proc = memdump_sh("-o", dump, "--", *argv)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == native.stdout


def test_environment_exact_and_in_order(dump: Path) -> None:
    """Names that are no shell identifiers survive (sh drops them), the order is kept, GDB's LINES
    and COLUMNS do not appear, and a COLUMNS of the caller's keeps its value."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "A-B": "1", "Z": "last but two",
           "COLUMNS": "7", "a.b": "dotted", "MULTI": "line\nbreak", "EMPTY": ""}
    native = subprocess.run(["env", "-0"], capture_output=True, env=env, check=True)
    proc = memdump_sh("-o", dump, "--", "env", "-0", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == native.stdout
    assert proc.stdout.split(b"\0")[:3] == [b"PATH=" + env["PATH"].encode(), b"A-B=1",
                                            b"Z=last but two"]


SCRIPT_BODY = 'tr "\\000" "\\n" </proc/$$/cmdline\nprintf "[%s]\\n" "$0" "$@"\n'


def test_hashbang_script_runs_its_interpreter(tmp_path: Path, dump: Path) -> None:
    """A #! script is run by its interpreter with argv as the kernel builds it, and memdump records
    the interpreter; a script whose interpreter is a script too is followed again."""
    script = tmp_path / "show-args"
    script.write_text("#!/bin/sh -e \n" + SCRIPT_BODY)
    script.chmod(0o755)
    outer = tmp_path / "outer"
    outer.write_text(f"#!{script}  first word  \nignored\n")
    outer.chmod(0o755)
    for argv in (["./show-args", "a b", ""], ["./outer", "x"]):
        native = subprocess.run(argv, capture_output=True, cwd=tmp_path, check=True)
        proc = memdump_sh("-o", dump, "--", *argv, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == native.stdout
        assert read_dump(dump).info["program"] in ("/usr/bin/dash", "/bin/dash")
    assert native.stdout.decode().splitlines()[:5] == ["/bin/sh", "-e", str(script),
                                                       "first word", "./outer"]


def test_text_file_without_hashbang_runs_with_sh(tmp_path: Path, dump: Path) -> None:
    """An executable text file without #! is run by /bin/sh, as a shell runs it (execve fails
    with ENOEXEC): its output as from the shell, the program it executes recorded."""
    plain = tmp_path / "plain"
    plain.write_text(f'printf "[%s]\\n" "$0" "$@"\nexec {program("churn_leak")} 10\n')
    plain.chmod(0o755)
    native = subprocess.run(["/bin/sh", "-c", './plain "$@"', "sh", "a b"], capture_output=True,
                            cwd=tmp_path, check=True)
    assert native.stdout == b"[./plain]\n[a b]\n"
    proc = memdump_sh("-o", dump, "--", "./plain", "a b", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == native.stdout
    facts = read_dump(dump)
    assert facts.info["program"] in ("/usr/bin/dash", "/bin/dash")
    assert [(what, os.path.basename(detail)) for what, detail in facts.process] == \
        [("exec", "churn_leak")]
    expect_leaks(analyze(dump), {marker("churn_leak.c", "after-exec"): (77, 1)})


def test_script_without_interpreter_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "binary"
    binary.write_bytes(b"\x00\x01not ELF\n")
    binary.chmod(0o755)
    bad = tmp_path / "bad"
    bad.write_text("#!/nonexistent/interpreter\n")
    bad.chmod(0o755)
    for path, why in ((binary, "binary: cannot execute binary file (neither ELF nor a #! script)"),
                      (bad, "bad interpreter")):
        proc = memdump_sh("--", path, cwd=tmp_path)
        assert proc.returncode == 125
        lines = proc.stderr.decode().splitlines()
        assert len(lines) == 1 and why in lines[0], lines
    assert list(tmp_path.glob("*.memdump")) == []


# -- attach: memdump.sh -p PID ------------------------------------------------------------------


class Target(Commanded):
    """tests/programs/alloc_on_command (or another program that answers commands)."""

    def __init__(self, name: str = "alloc_on_command") -> None:
        super().__init__(name)

    def exit(self) -> tuple[int, bytes]:
        self.send("exit")
        out, _ = self.proc.communicate(timeout=GDB_TIMEOUT)
        return self.proc.returncode, out


@pytest.fixture
def target() -> Iterator[Target]:
    t = Target()
    try:
        yield t
    finally:
        t.kill()


def attach(target: Target, *args: str | Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(SCRIPT), *(str(a) for a in args), "-p", str(target.proc.pid)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def finish(script: subprocess.Popen[bytes]) -> tuple[str, str]:
    try:
        out, err = script.communicate(timeout=GDB_TIMEOUT)
    except subprocess.TimeoutExpired:
        script.kill()
        out, err = script.communicate()
        pytest.fail(f"memdump.sh -p did not finish within {GDB_TIMEOUT} s: {err!r}")
    assert b"Traceback" not in err, err.decode(errors="replace")
    return out.decode(), err.decode()


def recording(dump: Path, script: subprocess.Popen[bytes]) -> None:
    wait_for_dump(dump, lambda text: "\ni gdb " in text, "the dump header",
                  alive=lambda: script.poll() is None)


def test_attach_for_seconds(tmp_path: Path, dump: Path, target: Target) -> None:
    """Recorded: what the program does during the window; then it runs on, untraced, never sees
    the SIGINT that stopped it, and exits normally. Freeing a block from before is no error.
    (The window is 3 s so that four commands fit in it even on a loaded machine.)"""
    report_path = tmp_path / "report.json"
    script = attach(target, "-o", dump, "--report", "--json", report_path, "--for", "3")
    recording(dump, script)
    began = time.monotonic()
    for command in ("leak 100", "temp 200", "free-first", "leak 300"):
        assert target.ask(command) == "ok"
    assert time.monotonic() - began < 3, "too slow: the window was over before the commands"
    out, err = finish(script)
    assert script.returncode == 0, err
    assert out == ""
    assert not target.traced()
    assert target.ask("leak 400") == "ok"
    assert target.exit() == (0, b"")  # no "SIGINT" line: the signal never reached it
    facts = read_dump(dump)
    assert facts.info["attached"] == "1"
    assert facts.info["pid"] == str(target.proc.pid)
    assert facts.end == ("detach", "-")
    assert facts.sizes() == [100, 200, 300]
    report = analyze(dump)
    # scanned at the detach: the two blocks have kinds (the one whose pointer main's stack still
    # holds reachable), each site's groups adding up to the blocks allocated there
    assert [(g["stack"][0]["line"], g["leak_kind"] != "unknown") for g in report.groups()] \
        == [(marker("alloc_on_command.c", "leak").line, True)] * len(report.groups())
    assert report.leaked == (400, 2)
    assert report.errors() == []
    summary = report.summary
    assert (summary["allocations"], summary["frees"], summary["untracked_frees"]) == (3, 1, 1)
    assert json.loads(report_path.read_text())["summary"]["leaked"] == {"bytes": 400, "blocks": 2}
    lines = err.splitlines()
    assert lines[0] == (f"memdump.sh: recording process {target.proc.pid} for 3 s (or until "
                        "SIGINT or SIGTERM)")
    assert f"memdump.sh: dump: {dump}" in lines
    assert str(marker("alloc_on_command.c", "leak")) in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_attach_until_signalled_inside_an_allocator_call(dump: Path, target: Target,
                                                         sig: signal.Signals) -> None:
    """SIGINT (or SIGTERM) to the script stops the recording; the program is stopped inside a
    malloc call, which is let return (and recorded) before the detach."""
    script = attach(target, "-o", dump)
    recording(dump, script)
    assert target.ask("leak 100") == "ok"
    target.send("hold 77")
    assert read_line(target.proc, POLL_DEADLINE) == "holding"
    script.send_signal(sig)
    assert script.stderr is not None
    waiting = ""
    while "allocator call in progress" not in waiting:
        waiting = read_line(script, GDB_TIMEOUT, stderr=True) + "\n"
    assert waiting == ("memdump: stopping once the 1 allocator call in progress returns (stop "
                       "again, or wait 10 s, to stop without)\n")
    target.send("go")
    assert read_line(target.proc, POLL_DEADLINE) == "ok"
    _, err = finish(script)
    assert script.returncode == 0, err
    assert not target.traced()
    assert target.ask("temp 5") == "ok"
    assert target.exit() == (0, b"")
    facts = read_dump(dump)
    assert facts.end == ("detach", "-")
    assert facts.sizes() == [100, 77]
    expect_leaks(analyze(dump), {marker("alloc_on_command.c", "leak"): (100, 1),
                                 marker("alloc_on_command.c", "hold"): (77, 1)})


def test_attach_second_signal_stops_without_the_call_in_progress(dump: Path,
                                                                 target: Target) -> None:
    """A second SIGINT while waiting for a call in progress detaches at once: the call is left
    out of the dump (said on stderr), and the program, let go, finishes it by itself."""
    script = attach(target, "-o", dump)
    recording(dump, script)
    target.send("hold 77")
    assert read_line(target.proc, POLL_DEADLINE) == "holding"
    script.send_signal(signal.SIGINT)
    assert script.stderr is not None
    waiting = ""
    while "allocator call in progress" not in waiting:
        waiting = read_line(script, GDB_TIMEOUT, stderr=True) + "\n"
    script.send_signal(signal.SIGINT)
    _, err = finish(script)
    assert script.returncode == 0, err
    assert ("memdump: warning: 1 allocator call still in progress at the detach: not in the dump"
            in err.splitlines()), err
    assert not target.traced()
    target.send("go")
    assert read_line(target.proc, POLL_DEADLINE) == "ok"
    assert target.exit() == (0, b"")
    facts = read_dump(dump)
    assert facts.end == ("detach", "-")
    assert facts.sizes() == []


def test_attach_program_exits_during_the_window(dump: Path, target: Target) -> None:
    """The program's exit ends the recording as for a launched program, with its status."""
    script = attach(target, "-o", dump, "--for", "60")
    recording(dump, script)
    assert target.ask("leak 100") == "ok"
    assert target.exit() == (0, b"")
    _, err = finish(script)
    assert script.returncode == 0, err
    facts = read_dump(dump)
    assert facts.end == ("exit", "0")
    expect_leaks(analyze(dump), {marker("alloc_on_command.c", "leak"): (100, 1)})


def _traceme() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME: the test is its debugger


@contextlib.contextmanager
def nobody_readable_copy() -> Iterator[Path]:
    """memdump.sh and the GDB extension copied where another user can read them, whatever the
    checkout's own permissions (a clone in a 0700 home directory): a fresh directory in /tmp
    (not $TMPDIR, which may be private too), owned by us, readable by all, writable by us only."""
    copy = Path(tempfile.mkdtemp(prefix="memdump-sh-copy.", dir="/tmp"))
    try:
        shutil.copytree(REPO / "gdb_ext", copy / "gdb_ext",
                        ignore=shutil.ignore_patterns("__pycache__", "tests"))
        (copy / "scripts").mkdir()
        shutil.copy(SCRIPT, copy / "scripts" / SCRIPT.name)
        for path in [copy, *copy.rglob("*")]:
            executable = path.is_dir() or path.stat().st_mode & stat.S_IXUSR
            path.chmod(0o755 if executable else 0o644)
        yield copy
    finally:
        shutil.rmtree(copy)


def test_attach_refusals(tmp_path: Path) -> None:
    """A PID that is no running process, or a process that cannot be attached to: one line."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    zombie = subprocess.Popen(["true"])
    traced = subprocess.Popen(["sleep", "60"], preexec_fn=_traceme)  # noqa: PLW1509
    plain = subprocess.Popen(["sleep", "60"])
    try:
        deadline = time.monotonic() + POLL_DEADLINE
        while Path(f"/proc/{zombie.pid}/stat").read_text().split(") ")[1][0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(POLL_INTERVAL)
        cases = [
            (["-p", "12ab"], 2, "memdump.sh: -p needs a process id, not '12ab'"),
            (["-p", str(pid_max + 1)], 2, f"memdump.sh: no process {pid_max + 1}"),
            (["-p", str(zombie.pid)], 2, f"memdump.sh: process {zombie.pid} has exited (it is a "
                                         "zombie until its parent waits for it)"),
            (["-p", str(traced.pid)], 125, f"memdump.sh: cannot attach to process {traced.pid}: "
                                           f"it is already traced by process {os.getpid()}"),
            (["-p", "1", "--", "true"], 2, "memdump.sh: -p records a running process: no "
                                           "program to run as well ('true')"),
            (["--for", "1", "--", "true"], 2, "memdump.sh: --for needs -p PID"),
            (["--children", "-p", "1"], 2, "memdump.sh: --children needs a program to run (a "
                                           "running process's children are its own)"),
            (["-p", "1", "--for", "soon"], 2, "memdump.sh: --for needs a number of seconds, "
                                              "not 'soon'"),
        ]
        for args, status, line in cases:
            proc = memdump_sh(*args, cwd=tmp_path)
            lines = proc.stderr.decode().splitlines()
            assert (proc.returncode, len(lines)) == (status, 1), (args, lines)
            assert lines[0].startswith(line), (args, lines)
            assert proc.stdout == b""
        if os.geteuid() == 0 and shutil.which("setpriv"):
            # not permitted: the script (and GDB) run as nobody, the process is root's
            with nobody_readable_copy() as copy:
                proc = memdump_sh("-p", plain.pid, script=copy / "scripts" / "memdump.sh",
                                  cwd=copy, env=dict(os.environ, TMPDIR="/tmp"),
                                  as_user=["setpriv", "--reuid=65534", "--regid=65534",
                                           "--clear-groups"])
            assert (proc.returncode, proc.stderr.decode()) == (
                125, f"memdump.sh: cannot attach to process {plain.pid}: Operation not permitted\n")
    finally:
        zombie.wait()
        plain.kill()
        plain.wait()
        # Its stops are reported to us, its tracer: Popen would take one for its end and not kill
        # it, nor wait for it.
        os.kill(traced.pid, signal.SIGKILL)
        while True:
            _, status = os.waitpid(traced.pid, 0)
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                traced.returncode = -signal.SIGKILL
                break
    assert list(tmp_path.glob("*.memdump")) == []


def test_attach_passes_the_programs_own_sigint(dump: Path, target: Target) -> None:
    """A SIGINT someone else sends the program during the window reaches it, as without GDB; only
    memdump.sh's own interrupt is kept from it."""
    script = attach(target, "-o", dump)
    recording(dump, script)
    target.proc.send_signal(signal.SIGINT)
    assert read_line(target.proc, POLL_DEADLINE) == "SIGINT"
    assert target.ask("leak 10") == "ok"
    script.send_signal(signal.SIGINT)
    _, err = finish(script)
    assert script.returncode == 0, err
    assert target.exit() == (0, b"")  # one SIGINT line, read above: no second one
    assert read_dump(dump).end == ("detach", "-")
    expect_leaks(analyze(dump), {marker("alloc_on_command.c", "leak"): (10, 1)})


def test_attach_window_scans_at_its_end(dump: Path) -> None:
    """memdump.sh -p until SIGINT, on stop_kinds: the window's dump is scanned at its detach,
    so its kept blocks are still reachable, not leaked."""
    target = Target("stop_kinds")
    try:
        script = attach(target, *(["--breakpoints"] if memdump_e2e.MODE == "breakpoints" else []),
                        "-o", dump)
        recording(dump, script)
        for command in ("keep 40", "keep 24", "lose 48"):
            assert target.ask(command) == "ok"
        script.send_signal(signal.SIGINT)
        _, err = finish(script)
        assert script.returncode == 0, err
        assert read_dump(dump).end == ("detach", "-")
        expect_stop_kinds(dump)
        assert target.exit() == (0, b"")
    finally:
        target.kill()
