"""One interactive GDB driven through a pipe: commands in, their output back, while the
program may run in the background (`continue &`), so a test can do things to it in between.

Each `command()` ends with an `echo` of a marker and reads up to it, so no sleep is needed to
know GDB is done; every read has a deadline.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from typing import Any

from memdump_e2e import REPO

DBGKIT = REPO / "gdb_ext" / "dbgkit.py"
_MARKER = "@@dbgkit-test-done@@"


class GdbDriver:
    """`gdb -nx -q` attached to PID (or running ARGV), reading commands from a pipe."""

    def __init__(self, *, pid: int | None = None, argv: list[str] | None = None,
                 timeout: float = 120) -> None:
        cmd = ["gdb", "-nx", "-q"]
        cmd += ["-p", str(pid)] if pid is not None else ["--args", *(argv or [])]
        self.timeout = timeout
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.command("set confirm off", "set pagination off", f"source {DBGKIT}")

    def command(self, *lines: str) -> str:
        """Run LINES; GDB's output (stdout and stderr) until they are done."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        text = "\n".join(lines) + f"\necho {_MARKER}\\n\n"
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        data = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while _MARKER.encode() not in data:
                left = deadline - time.monotonic()
                assert left > 0 and selector.select(left), f"GDB did not finish: {data!r}"
                chunk = os.read(fd, 65536)
                assert chunk, f"GDB ended: {data.decode(errors='replace')}"
                data += chunk
        return data.decode(errors="replace").split(_MARKER)[0]

    def json(self, line: str) -> Any:
        """The JSON document LINE prints (the text from its first '{' to its last '}')."""
        out = self.command(line)
        start, end = out.find("{"), out.rfind("}")
        assert start >= 0 and end > start, out
        return json.loads(out[start:end + 1])

    def close(self) -> None:
        """Quit GDB (kill the program first: GDB 13 can fail an assertion when it detaches
        from a process that runs in the background)."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def printed_json(stdout: str) -> Any:
    """The JSON document a `gdb -batch` run printed among other lines (from a line that is
    `{` alone to the next line that is `}` alone)."""
    start = stdout.find("\n{\n")
    assert start >= 0, stdout
    end = stdout.index("\n}\n", start)
    return json.loads(stdout[start:end + 3])
