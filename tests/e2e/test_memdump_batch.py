"""Batch mode must not pass a failure: a memdump that cannot record stops `gdb -batch` with status 1
before the program runs; interactively it stays an error message and GDB goes on."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from memdump_e2e import GDB_EXTENSION, GDB_TIMEOUT, REPO, program

BATCH_EXIT = "memdump: nothing is recorded: GDB exits with status 1 (batch mode)"
NO_DIR = "memdump: cannot write the dump to /nonexistent/x: No such file or directory"


def _static_message(path: Path | str) -> str:
    return (f"memdump: {path} is statically linked: its allocator has no dynamic symbols to hook "
            "(link it dynamically to record it)")


def _gdb(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["gdb", "-nx", *(str(a) for a in args)], cwd=cwd,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=GDB_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"GDB did not finish within {GDB_TIMEOUT} s: {args}\n{exc.stderr!r}")


def test_bad_output_path_from_the_issue() -> None:
    """The issue's command line, from the repository root: the program (which would print its
    argument) never runs, and GDB exits with 1."""
    proc = _gdb("-batch", "-ex", "source gdb_ext/memdump.py", "-ex", "memdump -o /nonexistent/x",
                "-ex", "r", "--args", program("stdio_echo"), "ran")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"{NO_DIR}\n{BATCH_EXIT}\n")


def test_static_program_from_the_issue() -> None:
    static = program("leak_malloc_static")
    proc = _gdb("-batch", "-ex", "source gdb_ext/memdump.py", "-ex", "memdump", "-ex", "r", static)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        1, "", f"{_static_message(static)}\n{BATCH_EXIT}\n")
    assert list(REPO.glob("leak_malloc_static.*.memdump")) == []


def _foreign_elf(tmp_path: Path) -> Path:
    """A copy of an x86-64 test program whose ELF header says AArch64 (e_machine 183)."""
    path = tmp_path / "aarch64_app"
    data = bytearray(program("stdio_echo").read_bytes())
    data[18:20] = (183).to_bytes(2, "little")
    path.write_bytes(bytes(data))
    path.chmod(0o755)
    return path


# (memdump command, program or None, expected message); {tmp}, {static}, {foreign} filled in.
FAILURES = {
    "missing-directory": ("memdump -o /nonexistent/x", "stdio_echo", NO_DIR),
    "directory": ("memdump -o {tmp}", "stdio_echo",
                  "memdump: cannot write the dump to {tmp}: it is a directory"),
    "static": ("memdump", "static", _static_message("{static}")),
    "not-x86-64": ("memdump -o {tmp}/x.memdump", "foreign",
                   "memdump: {foreign} is aarch64; memdump records x86-64 programs only"),
    "unknown-option": ("memdump --frobnicate", "stdio_echo",
                       "memdump: unrecognized arguments: --frobnicate"),
    "missing-value": ("memdump -o", "stdio_echo",
                      "memdump: argument -o/--output: expected one argument"),
    "unknown-subcommand": ("memdump stats", "stdio_echo",
                           "memdump: argument {{status,leaks,heap,who-points-at,block-list,"
                           "break,stop,check-heap}}: invalid choice: 'stats' (choose from "
                           "'status', 'leaks', 'heap', 'who-points-at', 'block-list', 'break', "
                           "'stop', 'check-heap')"),
    "no-program": ("memdump", None,
                   "memdump: no program to record: start GDB with one (gdb ./app), use "
                   "'file ./app', or attach to a process (gdb -p PID)"),
}


@pytest.mark.parametrize("flag", ["-batch", "--batch", "-batch-silent"])
@pytest.mark.parametrize("case", list(FAILURES))
def test_every_failure_to_record_exits_1(tmp_path: Path, case: str, flag: str) -> None:
    command, target, message = FAILURES[case]
    paths = {"tmp": tmp_path, "static": program("leak_malloc_static"),
             "foreign": _foreign_elf(tmp_path) if target == "foreign" else ""}
    command = command.format(**paths)
    message = message.format(**paths)
    argv: list[str | Path] = [flag, "-ex", f"source {GDB_EXTENSION}", "-ex", command, "-ex", "run",
                              "-ex", "echo still here\\n"]
    if target is not None:
        argv += ["--args", paths.get(target) or program(target), "ran"]
    proc = _gdb(*argv, cwd=tmp_path)
    # -batch-silent sends GDB's stdout nowhere; the program's would still show: it never ran.
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"{message}\n{BATCH_EXIT}\n")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".memdump")] == []


def test_attached_static_process_is_detached_not_killed(tmp_path: Path) -> None:
    """`gdb -batch -p PID -ex memdump` on a process memdump cannot record: GDB exits with 1 and
    leaves the process running, as it was."""
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to build a static program (scripts/setup.sh installs it)",
                    pytrace=False)
    src = tmp_path / "wait.c"
    src.write_text("#include <unistd.h>\nint main(void) { char c;\n"
                   "  write(1, \"ready\\n\", 6); return read(0, &c, 1) == 1 ? 7 : 1; }\n")
    exe = tmp_path / "wait_static"
    subprocess.run(["gcc", "-static", "-o", str(exe), str(src)], check=True, timeout=120)
    target = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        ready, _, _ = select.select([target.stdout], [], [], 60)
        assert ready and target.stdout.readline() == b"ready\n"
        proc = _gdb("-batch", "-ex", f"source {GDB_EXTENSION}", "-p", str(target.pid),
                    "-ex", "memdump", "-ex", "continue", cwd=tmp_path)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert proc.stderr.endswith(f"{_static_message(exe)}\n{BATCH_EXIT}\n"), proc.stderr
        assert target.poll() is None  # still alive: detached
        target.stdin.write(b"x")
        target.stdin.close()
        assert target.wait(timeout=60) == 7
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
    assert list(tmp_path.glob("*.memdump")) == []


# -- interactively, the same failure is an error message and GDB goes on --------------------------


def test_not_batch_stays_an_error(tmp_path: Path) -> None:
    """Without -batch (commands from -ex, stdin not a terminal), GDB prints the error, goes on to
    the next commands and exits with the status `quit` gives it."""
    proc = _gdb("-q", "-ex", f"source {GDB_EXTENSION}", "-ex", "memdump -o /nonexistent/x",
                "-ex", "echo still here\\n", "-ex", "quit 0", "--args", program("stdio_echo"),
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"{NO_DIR}\n"
    assert proc.stdout.endswith("still here\n"), proc.stdout


def test_interactive_session_on_a_terminal(tmp_path: Path) -> None:
    """GDB reading commands from a terminal: the error is printed and the session goes on; a
    static program is refused the same way, and `run` then runs it unrecorded."""
    static = program("leak_malloc_static")
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="dumb", NO_COLOR="1")
    gdb = subprocess.Popen(["gdb", "-nx", "-q", "-iex", "set style enabled off",
                            "-iex", "set pagination off", str(static)],
                           stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path, env=env,
                           close_fds=True)
    os.close(slave)
    seen = b""

    def expect(text: bytes) -> None:
        nonlocal seen
        deadline = time.monotonic() + GDB_TIMEOUT
        while text not in seen:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([master], [], [], left)[0], seen.decode()
            try:
                chunk = os.read(master, 4096)
            except OSError:
                chunk = b""
            assert chunk, f"GDB ended before {text!r}:\n{seen.decode()}"
            seen += chunk

    try:
        expect(b"(gdb) ")
        for command in (f"source {GDB_EXTENSION}", "memdump -o /nonexistent/x", "memdump"):
            seen = b""
            os.write(master, command.encode() + b"\n")
            expect(b"(gdb) ")
            text = seen.decode().replace("\r\n", "\n")
            if command.startswith("memdump"):
                assert BATCH_EXIT not in text
                assert (f"{_static_message(static)}\n") in text, text
        seen = b""
        os.write(master, b"run\n")
        expect(b"exited normally")
        expect(b"(gdb) ")
        os.write(master, b"quit\n")
        assert gdb.wait(timeout=GDB_TIMEOUT) == 0
    finally:
        os.close(master)
        if gdb.poll() is None:
            gdb.kill()
            gdb.wait()
    assert list(tmp_path.glob("*.memdump")) == []


def test_memdump_sh_exits_125_with_the_message(tmp_path: Path) -> None:
    """scripts/memdump.sh turns GDB's status 1 into its own 125 and shows what GDB said."""
    proc = subprocess.run([str(REPO / "scripts" / "memdump.sh"), "-o", "/nonexistent/x", "--",
                           str(program("stdio_echo")), "ran"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=GDB_TIMEOUT, cwd=tmp_path)
    assert proc.returncode == 125
    assert proc.stdout == ""  # the program never ran
    assert proc.stderr == ("memdump.sh: recording failed (gdb exited with 1); GDB said:\n"
                           f"    {NO_DIR}\n    {BATCH_EXIT}\n")



def test_failure_when_a_later_run_starts(tmp_path: Path) -> None:
    """A recording that can only fail when the program starts (the next run's dump next to the
    first one, whose directory is gone by then): GDB kills the program before it runs its own
    code and exits with 1."""
    folder = tmp_path / "dumps"
    folder.mkdir()
    proc = _gdb("-batch", "-ex", f"source {GDB_EXTENSION}",
                "-ex", f"memdump -o {folder}/app.memdump", "-ex", "run",
                "-ex", f"shell rm -r {folder}", "-ex", "run",
                "-ex", "echo still here\\n", "--args", program("stdio_echo"), "ran", cwd=tmp_path)
    assert proc.returncode == 1
    # The first run was recorded and printed its argument; the second never got to print it.
    assert proc.stdout.count("[ran]\n") == 1 and "still here" not in proc.stdout, proc.stdout
    assert proc.stderr == (
        "stderr line\n"
        f"memdump: cannot write the dump to {folder}/app-2.memdump: No such file or directory\n"
        f"{BATCH_EXIT}\n")
