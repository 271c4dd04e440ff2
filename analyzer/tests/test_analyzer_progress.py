"""The progress bar: drawn on a terminal only, after a second, erased at the end; its shape on a
real pseudo-terminal with a generated dump."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from analyzer_testlib import ANALYZER
from memdump_analyzer.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nothing_before_a_second_then_a_bar_then_erased() -> None:
    stream, clock = _Terminal(), _Clock()
    bar = Progress(stream, "memdump-analyze: reading x.memdump", clock=clock)
    bar.total = 4 << 20
    bar.on_read(1 << 20, memoryview(b"a\nb\n"))
    clock.now += 0.5
    bar.on_read(2 << 20, memoryview(b"c\n"))
    assert stream.getvalue() == ""
    clock.now += 0.5  # one second in: 2 MiB of 4 read, 3 records
    bar.on_read(2 << 20, memoryview(b""))
    line = ("memdump-analyze: reading x.memdump: [##########..........] 2.0 / 4.0 MiB, "
            "3 records/s, 0:01 left")
    assert stream.getvalue() == "\r" + line
    clock.now += 0.1  # redrawn at most five times a second
    bar.on_read(3 << 20, memoryview(b"d\n"))
    assert stream.getvalue() == "\r" + line
    bar.done()
    assert stream.getvalue() == "\r" + line + "\r" + " " * len(line) + "\r"


def test_off_when_not_a_terminal() -> None:
    stream, clock = io.StringIO(), _Clock()
    bar = Progress(stream, "x", clock=clock)
    clock.now += 5
    bar.on_read(1, memoryview(b"\n"))
    bar.done()
    assert (bar.enabled, stream.getvalue(), bar.records) == (False, "", 0)


def _big_dump(path: Path, events: int) -> None:
    with path.open("wb") as f:
        f.write(b"MEMDUMP 2.2\ns 1 /src/big\ns 2 main\nf 1 0x1000 1 0x1000 2 0 0\nn 1 0 1\nt 7\n")
        pair = 0
        while pair < events // 2:
            n = min(100_000, events // 2 - pair)
            f.write(b"".join(b"+ 1 0x%x 16\n- 1 0x%x\n" % (a, a)
                             for a in range(0x10000 + pair, 0x10000 + pair + n)))
            pair += n
        f.write(b"end %d exit 0\n" % (events + 1))


@pytest.fixture(scope="module")
def big_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dump = tmp_path_factory.mktemp("progress") / "big.memdump"
    _big_dump(dump, 4_000_000)  # reading it takes more than a second (2M events/s is fast)
    return dump


@pytest.mark.parametrize("command", [["peak"], []], ids=["a view", "the leak report"])
def test_the_bar_on_a_terminal(big_dump: Path, command: list[str]) -> None:
    dump = big_dump
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ANALYZER)}
    env.pop("MEMDUMP_DEBUG", None)
    # The C replay and the views' C pass read these 4M events in about the second the bar
    # waits for: the bar is the Python loops' here (the C ones feed the same bar).
    env["MEMDUMP_NATIVE"] = "0"
    proc = subprocess.Popen([sys.executable, "-m", "memdump_analyzer", *command, str(dump)],
                            stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0
    assert out.startswith(b"peak of " if command else b"memdump report for ")
    text = seen.decode()
    bars = re.findall(r"\r(memdump-analyze: reading \S+: \[[#.]{20}\] [\d,.]+ / ([\d,.]+) MiB, "
                      r"[\d,]+ records/s, \d+:\d\d left) *", text)
    assert bars, repr(text)
    size = f"{dump.stat().st_size / 2**20:,.1f}"
    assert {total for _, total in bars} == {size}
    assert text.endswith("\r" + " " * len(bars[-1][0]) + "\r")  # erased
