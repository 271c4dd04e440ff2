#!/usr/bin/env python3
"""Benchmark the TCP echo servers (targets/tcp_servers) and write the `tcp-servers` section.

For 4, 128 and 1024 clients x 100 ping-pongs (seed 000 §7), runs tcp_echo_clients against each
server (thread-per-client, epoll level-triggered, epoll edge-triggered), a fresh server process per
run, the variants interleaved run by run. Prints one markdown table: the median over the runs of
the round-trip time (average, p50, p99) beside the seed's average, and of the server's context
switches during the run (voluntary + involuntary, every server thread, read from /proc by
`tcp_echo_clients --server-pid`). All load stays on 127.0.0.1; every subprocess has a timeout.

Each configuration runs twice: with server and clients free to run on every CPU (as the seed), and
split, the server pinned to CPU 0 and the clients to the other CPUs. On a machine with few cores
the split isolates the servers' own costs: unpinned, a single reactor thread competes with 1024
client threads for the CPU and gets about 1/1025 of it, the thread-per-client server half.

    scripts/bench-servers.py                      # 5 runs of 18 configurations, ~1 min on 2 cores
    scripts/bench-servers.py --quick --runs 1     # 4, 32, 128 clients x 20, a few seconds
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import selectors
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchlib import BENCHMARKS_MD, machine, write_section

ROOT = Path(__file__).resolve().parents[1]
SERVER_TIMEOUT = 10.0  # seconds for the server's first line and for its exit after SIGTERM
CLIENTS_TIMEOUT = 180.0  # seconds for one tcp_echo_clients run

MODES = {"threads": "thread-per-client", "epoll": "epoll (LT)", "epoll-et": "epoll (ET)"}
# Where the processes run: None, anywhere; else (server CPUs, client CPUs).
PLACEMENTS: dict[str, tuple[set[int], set[int]] | None] = {"shared": None}
_CPUS = sorted(os.sched_getaffinity(0))
if len(_CPUS) >= 2:
    PLACEMENTS["split"] = ({_CPUS[0]}, set(_CPUS[1:]))
# Seed 000 §7: average RTT in microseconds for 100 ping-pongs; it measured no edge-triggered server.
SEED_RTT_US = {
    ("epoll", 4): 20.0, ("epoll", 128): 23.0, ("epoll", 1024): 30.0,
    ("threads", 4): 62.5, ("threads", 128): 95.0, ("threads", 1024): 148.0,
}

_FIRST = re.compile(r"^listening on (\S+):(\d+) pid (\d+)$")
_RTT = re.compile(r"^rtt avg ([\d.]+) us, p50 ([\d.]+) us, p99 ([\d.]+) us, max ([\d.]+) us$", re.M)
_TRIPS = re.compile(r"^round trips (\d+) of (\d+)$", re.M)
_DISC = re.compile(r"^disconnections (\d+) ", re.M)
_ERRORS = re.compile(r"^errors (\d+) ", re.M)
_TOTAL = re.compile(r"^total \((\d+) threads\)\s+-\s+(\d+)\s+(\d+)$", re.M)


@dataclass(frozen=True)
class Result:
    """One tcp_echo_clients run against one fresh server."""

    avg_us: float
    p50_us: float
    p99_us: float
    voluntary: int
    involuntary: int
    disconnections: int
    errors: int
    missing: int


class BenchError(RuntimeError):
    """A run that failed outright (no first line, a timeout, unparsable output)."""


def read_first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The server's first stdout line, within TIMEOUT seconds."""
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not selector.select(timeout):
            raise BenchError(f"no first line from the server within {timeout:.0f} s")
        return proc.stdout.readline().rstrip("\n")
    finally:
        selector.close()


def stop_server(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then wait; SIGKILL if it does not exit in time (and say so)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=SERVER_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise BenchError("the server did not exit within 10 s of SIGTERM") from None
    if proc.returncode != 0:
        raise BenchError(f"the server exited with {proc.returncode}")


def pinned(cpus: set[int] | None):  # noqa: ANN201 - a preexec_fn or None
    """A preexec_fn that restricts the child to CPUS (None: no restriction)."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def run_once(build: Path, mode: str, clients: int, pingpongs: int, placement: str) -> Result:
    """Starts a server of MODE, runs the clients against it, stops it."""
    binaries = build / "targets" / "tcp_servers"
    cpus = PLACEMENTS[placement]
    proc = subprocess.Popen(
        [str(binaries / "tcp_echo_server"), "--mode", mode],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=pinned(cpus[0] if cpus else None),
    )
    try:
        first = read_first_line(proc, SERVER_TIMEOUT)
        match = _FIRST.match(first)
        if not match or int(match.group(3)) != proc.pid:
            raise BenchError(f"unexpected first line from the server: {first!r}")
        argv = [str(binaries / "tcp_echo_clients"), "--port", match.group(2), "--clients",
                str(clients), "--pingpongs", str(pingpongs), "--server-pid", str(proc.pid)]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=CLIENTS_TIMEOUT,
                                 stdin=subprocess.DEVNULL,
                                 preexec_fn=pinned(cpus[1] if cpus else None))
        except subprocess.TimeoutExpired:
            raise BenchError(f"tcp_echo_clients took over {CLIENTS_TIMEOUT:.0f} s") from None
    finally:
        stop_server(proc)
    rtt, trips = _RTT.search(out.stdout), _TRIPS.search(out.stdout)
    disc, errors, total = _DISC.search(out.stdout), _ERRORS.search(out.stdout), \
        _TOTAL.search(out.stdout)
    if not (rtt and trips and disc and errors and total):
        raise BenchError(f"cannot read tcp_echo_clients' output:\n{out.stdout}{out.stderr}")
    return Result(float(rtt.group(1)), float(rtt.group(2)), float(rtt.group(3)),
                  int(total.group(2)), int(total.group(3)), int(disc.group(1)),
                  int(errors.group(1)), int(trips.group(2)) - int(trips.group(1)))


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(results: dict[tuple[str, int, str], list[Result]], counts: list[int], pingpongs: int,
          runs: int) -> str:
    """The markdown section: machine line, explanation, one row per (clients, server)."""
    lines = [
        f"Machine: {machine()}",
        "",
        f"TCP echo servers, {pingpongs} ping-pongs per client, 32-byte payload, loopback "
        f"(seed 000 §7); median of {runs} run(s), a fresh server per run, variants interleaved. "
        "RTT from tcp_echo_clients; server context switches (voluntary / involuntary, all server "
        "threads) from /proc/PID/task/*/status, between the first ping and the last reply. "
        "CPUs: shared, every process may run anywhere (as the seed); split, the server on CPU "
        f"{_CPUS[0]} and the clients on the others.",
        "",
        "| clients | CPUs | server | RTT avg (us) | p50 (us) | p99 (us) "
        "| seed RTT avg, 100 ping-pongs (us) | server ctx switches (vol / invol) "
        "| disconnections | errors + missing |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for clients in counts:
        for placement in PLACEMENTS:
            for mode, label in MODES.items():
                lines.append(row(results.get((mode, clients, placement), []), clients, placement,
                                 mode, label))
    return "\n".join(lines)


def row(rs: list[Result], clients: int, placement: str, mode: str, label: str) -> str:
    """One table row: the medians of RS."""
    if not rs:
        return f"| {clients} | {placement} | {label} | failed | | | | | | |"
    seed = SEED_RTT_US.get((mode, clients))
    return (f"| {clients} | {placement} | {label} | {median([r.avg_us for r in rs]):.1f} "
            f"| {median([r.p50_us for r in rs]):.1f} | {median([r.p99_us for r in rs]):.1f} "
            f"| {'-' if seed is None else f'{seed:g}'} "
            f"| {median([float(r.voluntary) for r in rs]):.0f} / "
            f"{median([float(r.involuntary) for r in rs]):.0f} "
            f"| {sum(r.disconnections for r in rs)} "
            f"| {sum(r.errors + r.missing for r in rs)} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build",
                        help="CMake build directory with the tcp_servers programs (default: build)")
    parser.add_argument("--runs", type=int, default=5, help="runs per configuration (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help="4, 32 and 128 clients x 20 ping-pongs instead of 4, 128, 1024 x 100")
    parser.add_argument("--output", type=Path, default=BENCHMARKS_MD,
                        help="markdown file whose tcp-servers section is written "
                             "(default: docs/benchmarks.md)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    binaries = args.build_dir / "targets" / "tcp_servers"
    for name in ("tcp_echo_server", "tcp_echo_clients"):
        if not os.access(binaries / name, os.X_OK):
            parser.error(f"{binaries / name} is not built (cmake --build {args.build_dir})")

    counts, pingpongs = ([4, 32, 128], 20) if args.quick else ([4, 128, 1024], 100)
    results: dict[tuple[str, int, str], list[Result]] = {}
    failures = 0
    started = time.monotonic()
    for run in range(1, args.runs + 1):
        for clients, placement, mode in itertools.product(counts, PLACEMENTS, MODES):
            try:
                r = run_once(args.build_dir, mode, clients, pingpongs, placement)
            except BenchError as exc:
                failures += 1
                print(f"run {run}, {mode}, {clients} clients, {placement}: {exc}",
                      file=sys.stderr)
                continue
            results.setdefault((mode, clients, placement), []).append(r)
            print(f"run {run}/{args.runs}: {mode:8} {clients:5} clients {placement:6}: avg "
                  f"{r.avg_us:8.1f} us, p99 {r.p99_us:9.1f} us, ctx {r.voluntary}/{r.involuntary}",
                  file=sys.stderr)
    text = table(results, counts, pingpongs, args.runs)
    print(text)
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    write_section("tcp-servers", text, args.output)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
