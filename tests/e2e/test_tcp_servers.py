"""tcp_echo_server and tcp_echo_clients together, as processes (targets/tcp_servers).

Each test starts a server on port 0, reads its first line (`listening on 127.0.0.1:PORT pid
PID`), talks to it over loopback and stops it with a signal; every wait has a timeout.
"""

from __future__ import annotations

import re
import resource
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from memdump_e2e import build_dir, read_line

TIMEOUT = 30  # seconds for any one process
MODES = ["threads", "epoll", "epoll-et"]
_FIRST = re.compile(r"^listening on 127\.0\.0\.1:(\d+) pid (\d+)$")


def binary(name: str) -> Path:
    path = build_dir() / "targets" / "tcp_servers" / name
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `make build`", pytrace=False)
    return path


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    mode: str

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> tuple[str, str]:
        """Sends SIG and returns the rest of stdout and all of stderr; the exit status must be 0."""
        self.proc.send_signal(sig)
        raw_out, raw_err = self.proc.communicate(timeout=TIMEOUT)
        out, err = raw_out.decode(), raw_err.decode()
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}\n{out}\n{err}"
        return out, err


def start_server(mode: str, *args: str, nofile: int | None = None) -> Server:
    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen([str(binary("tcp_echo_server")), "--mode", mode, *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, bufsize=0, preexec_fn=limit)
    line = read_line(proc, TIMEOUT)
    match = _FIRST.match(line)
    assert match, line
    assert int(match.group(2)) == proc.pid
    second = read_line(proc, TIMEOUT)
    assert second.startswith(f"mode {mode}, max payload "), second
    return Server(proc, int(match.group(1)), mode)


@pytest.fixture(params=MODES)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    srv = start_server(request.param)
    yield srv
    if srv.proc.poll() is None:
        srv.proc.kill()
        srv.proc.communicate(timeout=TIMEOUT)


def run_clients(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary("tcp_echo_clients")), "--port", str(port), *args],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)


def table_rows(text: str, title: str) -> dict[str, tuple[str, int, int]]:
    """{thread: (state, voluntary, involuntary)} of the context-switch table after TITLE; the
    total row is under "total" (its label, with the thread count, under "total label")."""
    lines = text[text.index(title):].splitlines()[1:]
    assert lines[0].split() == ["thread", "tid", "state", "voluntary", "involuntary"], lines[0]
    rows: dict[str, tuple[str, int, int]] = {}
    for line in lines[1:]:
        name, rest = line[:28].strip(), line[28:]
        fields = rest.split()
        rows[name] = (" ".join(fields[1:-2]), int(fields[-2]), int(fields[-1]))
        if name.startswith("total ("):
            rows["total"] = rows[name]
            rows["total label"] = (name, 0, 0)
            break
    return rows


def request(payload: bytes, kind: int = 1) -> bytes:
    return struct.pack(">IHH", len(payload), kind, 0) + payload


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(5)
    return sock


def server_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def counters(out: str) -> dict[str, int]:
    """The server's last counters line as {name: value}."""
    match = re.search(r"^peers accepted (\d+), closed (\d+), dropped (\d+), refused (\d+), "
                      r"open at shutdown (\d+); requests (\d+)$", out, re.M)
    assert match, out
    names = ["accepted", "closed", "dropped", "refused", "open", "requests"]
    return dict(zip(names, map(int, match.groups()), strict=True))


def test_clients_against_each_server(server: Server) -> None:
    mode = server.mode
    proc = run_clients(server.port, "--clients", "16", "--pingpongs", "50", "--payload", "200",
                       "--server-pid", str(server.proc.pid))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0] == (f"clients 16, ping-pongs 50, payload 200 bytes, "
                        f"server 127.0.0.1:{server.port}")
    assert "round trips 800 of 800" in lines
    assert "disconnections 0 (connection reset 0, closed by server 0)" in lines
    assert ("errors 0 (wrong replies 0, timeouts 0, connect failures 0, other 0, "
            "threads not started 0)") in lines
    assert re.search(r"^rtt avg [\d.]+ us, p50 [\d.]+ us, p99 [\d.]+ us, max [\d.]+ us$",
                     proc.stdout, re.M)
    during = table_rows(proc.stdout,
                        f"server context switches during the run (pid {server.proc.pid}):")
    if mode == "threads":
        # "live" when the server had accepted the connection before the first snapshot, "new"
        # when its thread started after (the kernel completes connect() before accept()).
        states = dict(reversed(part.split(" ")) for part in
                      during["tpc-client-* (16 threads)"][0].split(", "))
        assert set(states) <= {"live", "new"} and sum(map(int, states.values())) == 16, states
        assert during["tpc-accept"][0] == "live"
        assert during["total"][1] > 0
    else:
        assert during["reactor"][0] == "live"
        assert during["total"][1] + during["total"][2] > 0

    # SIGUSR1: a table now, while the server keeps serving.
    server.proc.send_signal(signal.SIGUSR1)
    title = read_line(server.proc, TIMEOUT)
    assert title.startswith(f"context switches (SIGUSR1, pid {server.proc.pid}, mode {mode}):")
    again = run_clients(server.port, "--clients", "2", "--pingpongs", "5")
    assert again.returncode == 0, again.stdout

    out, err = server.stop()
    assert err == ""
    assert "shutting down on SIGTERM" in out.splitlines()
    got = counters(out)
    assert got["closed"] + got["open"] == 18, got  # closed if noticed before SIGTERM
    assert (got["accepted"], got["dropped"], got["refused"], got["requests"]) == (18, 0, 0, 810)
    rows = table_rows(out, f"context switches (shutdown, pid {server.proc.pid}, mode {mode}):")
    if mode == "threads":
        assert rows["tpc-client-* (18 threads)"][0] == "18 exited"
        assert rows["tpc-accept"][0] == "exited"
    else:
        assert rows["reactor"][0] == "exited"
    # The main thread and the server's threads (a sanitizer may add a thread of its own).
    threads = int(re.fullmatch(r"total \((\d+) threads\)", rows["total label"][0]).group(1))
    assert threads - (20 if mode == "threads" else 2) in (0, 1), rows


@pytest.mark.parametrize("mode", MODES)
def test_sigint_shuts_down_with_clients_connected(mode: str) -> None:
    srv = start_server(mode)
    socks = [connect(srv.port) for _ in range(3)]
    for sock in socks:  # a reply: the server has accepted the connection
        sock.sendall(request(b"hi"))
        assert recv_exact(sock, 10) == request(b"hi", 2)
    socks[1].sendall(b"\x00\x00")  # mid-message
    out, err = srv.stop(signal.SIGINT)
    assert "shutting down on SIGINT" in out.splitlines()
    assert counters(out) == {"accepted": 3, "closed": 0, "dropped": 0, "refused": 0, "open": 3,
                             "requests": 3}
    assert err == ""
    for sock in socks:
        assert server_closed(sock)
        sock.close()


@pytest.mark.parametrize("mode", MODES)
def test_bad_peers_get_one_log_line_each(mode: str) -> None:
    srv = start_server(mode, "--max-payload", "1000")
    good = connect(srv.port)
    good.sendall(request(b"x" * 1000))  # exactly the maximum
    assert recv_exact(good, 1008) == request(b"x" * 1000, 2)
    bad_inputs: Sequence[bytes] = [b"GET / HTTP/1.1\r\n\r\n", request(b"y" * 1001),
                                   request(b"", 7)]
    addresses = []
    for data in bad_inputs:
        bad = connect(srv.port)
        addresses.append("{}:{}".format(*bad.getsockname()))
        bad.sendall(data)
        assert server_closed(bad)
        bad.close()
        good.sendall(request(b"still here"))
        assert recv_exact(good, 18) == request(b"still here", 2)
    out, err = srv.stop()
    assert err.splitlines() == [
        f"tcp_echo_server: peer 2 ({addresses[0]}) dropped: reserved header field is 0x4854, not 0",
        f"tcp_echo_server: peer 3 ({addresses[1]}) dropped: payload length 1001 exceeds the "
        "maximum 1000",
        f"tcp_echo_server: peer 4 ({addresses[2]}) dropped: unknown message type 0x0007",
    ]
    assert counters(out) == {"accepted": 4, "closed": 0, "dropped": 3, "refused": 0, "open": 1,
                             "requests": 4}
    good.close()


@pytest.mark.parametrize("mode", MODES)
def test_clients_count_disconnections_and_fail(mode: str) -> None:
    srv = start_server(mode, "--max-payload", "10")
    proc = run_clients(srv.port, "--clients", "4", "--pingpongs", "3", "--payload", "11")
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    assert "round trips 0 of 12" in lines
    assert re.search(r"^disconnections 4 \(connection reset \d, closed by server \d\)$",
                     proc.stdout, re.M), proc.stdout
    assert "errors 0 (wrong replies 0, timeouts 0, connect failures 0, other 0, " \
           "threads not started 0)" in lines
    _, err = srv.stop()
    assert len(err.splitlines()) == 4
    assert all(line.endswith("dropped: payload length 11 exceeds the maximum 10")
               for line in err.splitlines()), err


@pytest.mark.parametrize("mode", MODES)
def test_server_out_of_fds_refuses_and_keeps_serving(mode: str) -> None:
    srv = start_server(mode, nofile=24)
    socks = [connect(srv.port) for _ in range(30)]
    served = refused = 0
    for sock in socks:
        try:
            sock.sendall(request(b"ping"))
            reply = recv_exact(sock, 12)
        except (ConnectionResetError, BrokenPipeError):
            reply = b""
        if reply == request(b"ping", 2):
            served += 1
        else:
            assert reply == b"", reply
            refused += 1
    assert served + refused == 30
    assert 10 <= served < 24, (served, refused)
    for sock in socks:
        sock.close()
    # The server closes its ends as it notices; until then a new connection may be refused too.
    deadline = time.monotonic() + 5
    answered = served
    while True:
        after = run_clients(srv.port, "--clients", "2", "--pingpongs", "3")
        trips = re.search(r"^round trips (\d+) of 6$", after.stdout, re.M)
        assert trips, after.stdout
        answered += int(trips.group(1))
        if after.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert after.returncode == 0, after.stdout + after.stderr
    out, err = srv.stop()
    lines = err.splitlines()
    assert len(lines) >= refused
    assert set(lines) == {
        "tcp_echo_server: accept: Too many open files (RLIMIT_NOFILE 24): refused a connection"
    }
    got = counters(out)
    assert (got["refused"], got["requests"], got["dropped"]) == (len(lines), answered, 0), got


def test_clients_report_too_few_fds() -> None:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (50, 50))

    proc = subprocess.run([str(binary("tcp_echo_clients")), "--port", "9", "--clients", "40"],
                          capture_output=True, text=True, timeout=TIMEOUT, preexec_fn=limit)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == (
        "tcp_echo_clients: --clients 40 needs about 56 file descriptors, but RLIMIT_NOFILE is 50 "
        "(hard limit 50, which an unprivileged process cannot raise); use fewer clients or raise "
        "the hard limit (ulimit -Hn)\n"
    )


def test_clients_without_a_server_say_no_connection_was_made() -> None:
    """Every connect refused: no round-trip time, said so (not "0.0 us"), and exit 1."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound but not listening: connect() is refused
        proc = run_clients(bound.getsockname()[1], "--clients", "2", "--pingpongs", "3")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "round trips 0 of 6" in lines
    assert "rtt none: no connection was made (2 connect failures)" in lines
    assert " us" not in proc.stdout
    assert ("errors 2 (wrong replies 0, timeouts 0, connect failures 2, other 0, "
            "threads not started 0)") in lines
    assert proc.stderr.count(": connect: Connection refused\n") == 2, proc.stderr


def test_port_in_use_exits_1_with_a_sentence() -> None:
    srv = start_server("epoll")
    proc = subprocess.run([str(binary("tcp_echo_server")), "--port", str(srv.port)],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)
    srv.stop()
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == (f"tcp_echo_server: cannot listen on 127.0.0.1:{srv.port}: "
                           "Address already in use\n")
