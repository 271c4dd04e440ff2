"""scripts/ubsan-gdb.sh stops at the line the behaviour is on, in batch mode and at GDB's prompt."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
import ubsanlib

SCRIPT = ubsanlib.ROOT / "scripts" / "ubsan-gdb.sh"


@pytest.mark.parametrize(
    ("demo", "variant", "marker"),
    [
        ("signed_mul_overflow", "gcc-ubsan", "signed-mul"),
        ("null_deref", "clang-ubsan", "null-load"),
        ("array_bounds", "gcc-ubsan", "index"),
        ("shift_exponent", "clang-ubsan-abort", "shift-exponent"),
    ],
)
def test_stops_at_the_marker(build_dir: Path, demo: str, variant: str, marker: str) -> None:
    program = ubsanlib.binary(build_dir, demo, variant)
    out = subprocess.run([str(SCRIPT), str(program)], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    line = ubsanlib.markers(demo)[marker]
    source = ubsanlib.DEMO_DIR / f"{demo}.cpp"
    stops = out.stdout.split("==== ubsan-gdb: undefined behaviour here ====")[1:]
    assert stops, out.stdout
    frame, _, rest = stops[0].strip().partition("\n")
    assert frame.startswith("#1  ") and frame.endswith(f" at {source}:{line}")
    assert rest.startswith(f"{line}\t")
    assert "---- backtrace ----" in stops[0] and " in main () at " in stops[0]


def test_usage_without_program() -> None:
    out = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 2
    assert out.stderr.startswith("usage: scripts/ubsan-gdb.sh")


class Prompt:
    """GDB at its prompt on a pseudo-terminal, as a user runs ubsan-gdb.sh (no -batch)."""

    DEADLINE = 120.0

    def __init__(self, argv: list[str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a plain terminal, wide enough that GDB wraps no frame line
            os.execve(argv[0], argv, dict(os.environ, TERM="dumb", UBSAN_OPTIONS="color=never"))
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
        self.text = ""

    def wait_for_prompt(self) -> str:
        """What GDB printed up to its next prompt."""
        start = len(self.text)
        deadline = time.monotonic() + self.DEADLINE
        while not self.text[start:].endswith("(gdb) "):
            ready, _, _ = select.select([self.fd], [], [], 1.0)
            if not ready:
                assert time.monotonic() < deadline, f"no GDB prompt; GDB said:\n{self.text}"
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: GDB is gone
                chunk = b""
            assert chunk, f"GDB ended before its prompt; it said:\n{self.text}"
            self.text += chunk.decode(errors="replace").replace("\r\n", "\n")
        return self.text[start:]

    def command(self, line: str) -> str:
        os.write(self.fd, line.encode() + b"\n")
        return self.wait_for_prompt()

    def close(self) -> None:
        try:
            os.write(self.fd, b"kill\nquit\n")
        except OSError:
            pass
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        assert os.waitstatus_to_exitcode(status) == 0


def shown_stop(output: str) -> tuple[str, str]:
    """The frame line and the source line ubsan-gdb shows for one stop."""
    stops = output.split("==== ubsan-gdb: undefined behaviour here ====\n")
    assert len(stops) == 2, output
    frame, source, _ = stops[1].split("\n", 2)
    return frame, source


def test_every_stop_at_the_prompt_is_at_the_line(build_dir: Path) -> None:
    """After `continue` at the prompt, the next report shows its source line too, not the
    handler's PLT stub: the frame and line of each behaviour, in order, each report printed by the
    `continue` that leaves its stop."""
    demo = "bad_downcast"
    program = ubsanlib.binary(build_dir, demo, "clang-ubsan")
    source = ubsanlib.DEMO_DIR / f"{demo}.cpp"
    lines = ubsanlib.markers(demo)
    gdb = Prompt([str(SCRIPT), str(program)])
    try:
        first = gdb.wait_for_prompt()
        second = gdb.command("continue")
        third = gdb.command("continue")
    finally:
        gdb.close()
    stops = [shown_stop(first), shown_stop(second)]
    for (frame, text), marker in zip(stops, ["downcast", "member-call"], strict=True):
        line = lines[marker]
        assert frame.startswith("#1  ") and " in use_as_derived (" in frame, frame
        assert frame.endswith(f" at {source}:{line}"), frame
        assert text.startswith(f"{line}\t") and text.endswith(f"// UB: {marker}"), text
    assert f"\n{source}:{lines['downcast']}:18: runtime error: downcast of address " in second
    assert f"\n{source}:{lines['member-call']}:15: runtime error: member call on address " in third
