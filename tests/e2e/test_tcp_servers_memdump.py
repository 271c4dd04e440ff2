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


def test_hunting_a_leak_in_a_running_server(tmp_path: Path, dump: Path) -> None:
    """docs/memdump.md's walkthrough: a server started with --leak-per-peer 256 (each connection
    replaces its greeting buffer without freeing the previous one) is attached to by GDB; memdump
    leaks after 8 clients finds the 7 buffers lost, at their line, and the current one still
    reachable through the server object, a block from before the attach (the heap around the
    known blocks is a root); --increased after 4 more shows the groups that grew."""
    server = subprocess.Popen([str(binary("tcp_echo_server")), "--leak-per-peer", "256"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, bufsize=0)
    try:
        match = _FIRST.match(read_line(server, GDB_TIMEOUT))
        assert match
        port, pid = match.group(1), int(match.group(2))
        clients = [str(binary("tcp_echo_clients")), "--port", port, "--pingpongs", "5",
                   "--timeout-ms", "30000", "--clients"]
        script = tmp_path / "hunt.gdb"
        script.write_text(
            f"source {REPO / 'gdb_ext' / 'memdump.py'}\n"
            "handle SIGSTOP stop print nopass\n"
            f"memdump -o {dump}\n"
            "python\n"
            "import os, signal, subprocess, threading, time\n"
            "def load(n):\n"
            f"    subprocess.run({clients!r} + [str(n)], stdout=subprocess.DEVNULL, timeout=60)\n"
            "    time.sleep(0.5)  # the server closes the connections\n"
            f"    os.kill({pid}, signal.SIGSTOP)\n"
            "threading.Thread(target=load, args=(8,)).start()\n"
            "end\n"
            "continue\n"
            "memdump leaks\n"
            "python threading.Thread(target=load, args=(4,)).start()\n"
            "continue\n"
            "echo ==increased==\\n\n"
            "memdump leaks --increased\n"
            "detach\n")
        run = subprocess.run(["gdb", "-nx", "-batch", "-x", str(script), "-p", str(pid)],
                             capture_output=True, text=True, timeout=GDB_TIMEOUT,
                             stdin=subprocess.DEVNULL)
        first, increased = run.stdout.split("==increased==\n", 1)
        line = _marker_line("the bug: the previous greeting is never freed") + 1
        assert re.search(r"LIVE \d of \d: 1,792 bytes in 7 blocks, definitely lost\n"
                         r"    at dbgkit::targets::TCPServer::add_peer\(int, sockaddr_in const&\) "
                         rf"\(tcp_servers\.hpp:{line}\)", first), run.stdout + run.stderr
        assert re.search(r"LIVE \d of \d: 256 bytes in 1 block, still reachable\n"
                         r"    at dbgkit::targets::TCPServer::add_peer", first), first
        assert "    definitely lost: 1,792 bytes in 7 blocks\n" in first
        # 12 greetings then, 11 of them lost: one may still look reachable, through a stale copy
        # of its pointer in the heap's free memory, which an attached scan reads as a root
        # (docs/memdump.md); the groups grew, and only they are listed
        lost = re.search(r"LIVE 1 of \d: ([\d,]+) \(\+[\d,]+\) bytes in (\d+) \(\+\d+\) blocks, "
                         r"definitely lost\n    at dbgkit::targets::TCPServer::add_peer", increased)
        assert lost is not None and int(lost.group(2)) in (10, 11), increased
        assert lost.group(1) == f"{int(lost.group(2)) * 256:,}"
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.terminate()
        server.communicate(timeout=GDB_TIMEOUT)


def _marker_line(text: str) -> int:
    source = REPO / "targets" / "tcp_servers" / "tcp_servers.hpp"
    return next(n for n, line in enumerate(source.read_text().splitlines(), 1) if text in line)
