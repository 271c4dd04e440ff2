"""procfs: /proc/PID/maps, /proc/PID/mem, signal dispositions and blocked threads, read from this
test process and from a child it starts, without GDB."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from dbgkit.core.procfs import (
    Mapping,
    ProcessMemory,
    blocked_in_syscall,
    caught,
    exe_of,
    parse_maps,
    read_maps,
)

# A child that catches SIGUSR1, ignores SIGUSR2, leaves SIGTERM alone, then blocks in read(0);
# -I: no PYTHONFAULTHANDLER from the environment, which would catch SIGSEGV.
_CHILD = """
import os, signal, sys
signal.signal(signal.SIGUSR1, lambda *a: None)
signal.signal(signal.SIGUSR2, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
os.write(1, b"ready\\n")
os.read(0, 1)
"""


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-I", "-c", _CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=30)
    return proc.pid  # reaped: no process has it (until the kernel reuses it)


def test_parse_maps_fields_order_and_paths() -> None:
    text = (
        "7ffff7fc3000-7ffff7fc7000 r--p 00000000 00:00 0                          [vvar]\n"
        "555555554000-555555556000 r-xp 00001000 08:01 1234                       /usr/bin/my app\n"
        "7ffff7dd0000-7ffff7dd1000 rw-p 00000000 00:00 0 \n"
        "7ffff7a00000-7ffff7a01000 ---p 00002000 08:01 99   /lib/old.so (deleted)\n"
        "garbage\n"
    )
    maps = parse_maps(text)
    assert [m.start for m in maps] == sorted(m.start for m in maps)
    app, old, anon, vvar = maps
    assert app == Mapping(0x555555554000, 0x555555556000, "r-xp", 0x1000, 1234, "/usr/bin/my app")
    assert app.executable and app.readable and not app.writable and app.file_backed
    assert old.path == "/lib/old.so (deleted)" and old.offset == 0x2000 and old.reserved
    assert anon.path == "" and anon.writable and not anon.file_backed
    assert vvar.path == "[vvar]" and not vvar.file_backed


def test_read_maps_of_this_process() -> None:
    buf = ctypes.create_string_buffer(b"mapped", 16)
    address = ctypes.addressof(buf)
    maps = read_maps(os.getpid())
    holding = [m for m in maps if m.start <= address < m.end]
    assert len(holding) == 1 and holding[0].readable and holding[0].writable
    assert any(m.path == "[stack]" for m in maps)
    assert any(m.executable and m.path == os.path.realpath(sys.executable) for m in maps)
    with pytest.raises(OSError):
        read_maps(_gone_pid())


def test_process_memory_reads_this_process() -> None:
    buf = ctypes.create_string_buffer(b"unwind-me", 16)
    memory = ProcessMemory(os.getpid())
    try:
        assert memory.read(ctypes.addressof(buf), 9) == b"unwind-me"
        assert memory.read_some(ctypes.addressof(buf), 9) == b"unwind-me"
        with pytest.raises(OSError):
            memory.read(8, 8)
        with pytest.raises(OSError):
            memory.read_some(8, 8)
        # across the end of a mapping: read_some gives what is there, read refuses
        stack = next(m for m in read_maps(os.getpid()) if m.path == "[stack]")
        assert len(memory.read_some(stack.end - 4, 16)) == 4
        with pytest.raises(OSError):
            memory.read(stack.end - 4, 16)
        memory.reopen()
        assert memory.read(ctypes.addressof(buf), 6) == b"unwind"
    finally:
        memory.close()
    assert memory.fd is None
    memory.close()  # twice is harmless


def test_process_memory_of_a_child(child: subprocess.Popen[bytes]) -> None:
    maps = read_maps(child.pid)
    stack = next(m for m in maps if m.path == "[stack]")
    memory = ProcessMemory(child.pid)
    try:
        assert len(memory.read(stack.end - 8, 8)) == 8
    finally:
        memory.close()


def test_caught_reads_the_signal_masks(child: subprocess.Popen[bytes]) -> None:
    assert caught(child.pid, "SIGUSR1")  # a handler: SigCgt
    assert caught(child.pid, "SIGUSR2")  # ignored: SigIgn
    assert not caught(child.pid, "SIGTERM")
    assert not caught(child.pid, "SIGSEGV")
    assert not caught(child.pid, "SIGNOTASIGNAL")
    assert caught(_gone_pid(), "SIGSEGV")  # unknown: taken as caught


def test_blocked_in_syscall(child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    blocked = blocked_in_syscall(child.pid, child.pid)
    while blocked is None and time.monotonic() < deadline:
        # "ready" is written just before read(0): the child may not have entered it yet
        time.sleep(0.01)
        blocked = blocked_in_syscall(child.pid, child.pid)
    assert blocked is not None
    sp, args = blocked
    assert len(args) == 6 and args[0] == 0  # read(0, buf, 1)
    assert args[2] == 1
    stack = next(m for m in read_maps(child.pid) if m.path == "[stack]")
    assert stack.start <= sp < stack.end


def test_blocked_in_syscall_of_a_running_or_gone_thread() -> None:
    code = "import os\nos.write(1, b'go\\n')\nwhile 1: pass"
    busy = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert busy.stdout is not None and busy.stdout.readline() == b"go\n"
        # proc(5): "running" while the thread runs in user space
        assert blocked_in_syscall(busy.pid, busy.pid) is None
    finally:
        busy.kill()
        busy.wait(timeout=10)
    assert blocked_in_syscall(_gone_pid(), 1) is None


def test_exe_of() -> None:
    assert exe_of(os.getpid()) == os.path.realpath(sys.executable)
    assert exe_of(_gone_pid()) == "program"
