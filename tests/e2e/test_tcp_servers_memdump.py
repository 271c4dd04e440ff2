"""Each TCP echo server runs clean under memdump: clients served, SIGTERM, exit 0, nothing leaked.

The server runs under scripts/memdump.sh (GDB; its stdout is the server's); the test reads the
first line for the port and pid, runs a few clients with a few ping-pongs (every allocation is a
breakpoint stop, so a few hundred at most), then sends SIGTERM to the server itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from memdump_e2e import GDB_TIMEOUT, REPO, analyze, build_dir, read_line

SCRIPT = REPO / "scripts" / "memdump.sh"
_FIRST = re.compile(r"^listening on 127\.0\.0\.1:(\d+) pid (\d+)$")


def binary(name: str) -> Path:
    path = build_dir() / "targets" / "tcp_servers" / name
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `make build`", pytrace=False)
    return path


@pytest.mark.parametrize("mode", ["threads", "epoll", "epoll-et"])
def test_server_runs_clean_under_memdump(mode: str, dump: Path) -> None:
    proc = subprocess.Popen(
        [str(SCRIPT), "-o", str(dump), "--", str(binary("tcp_echo_server")), "--mode", mode],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
    )
    pid = 0
    try:
        first = read_line(proc, GDB_TIMEOUT)
        match = _FIRST.match(first)
        assert match, first
        port, pid = match.group(1), int(match.group(2))
        clients = subprocess.run(
            [str(binary("tcp_echo_clients")), "--port", port, "--clients", "3", "--pingpongs", "4",
             "--payload", "40", "--timeout-ms", "30000"],
            capture_output=True, text=True, timeout=GDB_TIMEOUT, stdin=subprocess.DEVNULL,
        )
        assert clients.returncode == 0, clients.stdout + clients.stderr
        assert "round trips 12 of 12" in clients.stdout.splitlines()
        os.kill(pid, signal.SIGTERM)
        raw_out, raw_err = proc.communicate(timeout=GDB_TIMEOUT)
    finally:
        if proc.poll() is None:
            # the server is GDB's child, not ours: killing memdump.sh alone would orphan it
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.communicate()
    out, err = raw_out.decode(), raw_err.decode()
    assert proc.returncode == 0, out + err
    assert "shutting down on SIGTERM" in out.splitlines(), out
    assert re.search(r"^peers accepted 3, closed \d, dropped 0, refused 0, open at shutdown \d; "
                     r"requests 12$", out, re.M), out
    assert f"context switches (shutdown, pid {pid}, mode {mode}):" in out
    report = analyze(dump)
    assert report.complete, report.dumps()
    assert report.leaked == (0, 0), report.dumps()
    assert report.summary["errors"] == 0, report.dumps()
    assert report.errors() == [], report.dumps()
    assert report.summary["untracked_frees"] == 0, report.dumps()
    assert report.summary["allocations"] > 0, "memdump saw no allocation at all"
