"""`ctxswitches` on targets/tcp_servers, attached with GDB while clients talk to the server:
thread-per-client makes switches on every worker for every request; the epoll reactor is
one thread (plus main) whatever the number of clients. Counts vary run to run, so the test
asserts names, which threads are new, and bounds that hold on any machine."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from gdb_driver import GdbDriver
from test_tcp_servers import Server, recv_exact, request, start_server

CLIENTS = 6
ROUNDS = 20


@pytest.fixture(params=["threads", "epoll"])
def attached(request: pytest.FixtureRequest) -> Iterator[tuple[Server, GdbDriver]]:
    server = start_server(request.param)
    gdb = GdbDriver(pid=server.proc.pid)
    try:
        yield server, gdb
    finally:
        server.proc.kill()
        server.proc.communicate(timeout=30)
        gdb.close()


def _threads_mid_run(server: Server, gdb: GdbDriver) -> dict[str, dict]:
    gdb.command("ctxswitches --mark before", "continue &")
    socks_done = _run_and_measure(server, gdb)
    return socks_done


def _run_and_measure(server: Server, gdb: GdbDriver) -> dict[str, dict]:
    """Ping-pong with the connections still open when ctxswitches reads the threads."""
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=30)
             for _ in range(CLIENTS)]
    try:
        for n in range(ROUNDS):
            payload = struct.pack(">I", n)
            for s in socks:
                s.sendall(request(payload))
            for s in socks:
                assert recv_exact(s, 8 + len(payload))[8:] == payload
        doc = gdb.json("ctxswitches --since before --sort name --json")
    finally:
        for s in socks:
            s.close()
    assert doc["format"] == "dbgkit-ctxswitches" and doc["version"] == "1.0"
    assert doc["pid"] == server.proc.pid and doc["since"] == "mark before"
    return {t["name"]: t for t in doc["threads"]}


def test_thread_per_client_switches_per_request_epoll_few_threads(
        attached: tuple[Server, GdbDriver]) -> None:
    server, gdb = attached
    threads = _threads_mid_run(server, gdb)
    main = threads.pop("tcp_echo_server")
    assert main["id"] == 1 and not main["delta"]["new"]
    requests = CLIENTS * ROUNDS
    if server.mode == "threads":
        assert sorted(threads) == ["tpc-accept"] + [f"tpc-client-{i}"
                                                    for i in range(1, CLIENTS + 1)]
        assert not threads.pop("tpc-accept")["delta"]["new"]
        for name, t in threads.items():
            # a worker blocks in poll for (nearly) every request of its client; on a loaded
            # machine the request may be there before it polls, and the core taken from it
            # instead: its switches, of either kind, still follow its requests
            assert t["delta"]["new"], name
            switches = t["delta"]["voluntary"] + t["delta"]["involuntary"]
            assert ROUNDS // 2 <= switches and t["delta"]["voluntary"] <= 4 * ROUNDS + 10, \
                (name, t)
        assert sum(t["delta"]["voluntary"] for t in threads.values()) >= requests // 2
    else:
        assert sorted(threads) == ["reactor"]
        reactor = threads["reactor"]
        assert not reactor["delta"]["new"]
        # one epoll_wait returns at least one event, so at most one block per request
        # (plus the accepts): a single thread serves every client
        assert reactor["delta"]["voluntary"] <= requests + CLIENTS + 2, reactor
    assert main["delta"]["voluntary"] <= 2


def test_marks_and_errors(attached: tuple[Server, GdbDriver]) -> None:
    server, gdb = attached
    out = gdb.command("ctxswitches --since nowhere")
    assert "ctxswitches: no mark named 'nowhere' (marks: none yet; ctxswitches --mark nowhere " \
           "sets it)" in out
    out = gdb.command("ctxswitches --sort size")
    assert "ctxswitches: argument --sort: invalid choice: 'size'" in out
    out = gdb.command("ctxswitches --mark a")
    assert "ctxswitches: marked this moment as 'a'" in out
    assert f"context switches of process {server.proc.pid}:" in out
    doc = gdb.json("ctxswitches --json")
    assert doc["since"] == "previous call"
    assert doc["threads"][0]["state"] == "t (tracing stop)"
    assert "Traceback" not in gdb.command("kill", "ctxswitches")
    out = gdb.command("ctxswitches")
    assert "ctxswitches: needs a live process (run the program or attach)" in out
