"""A function called in a stopped process: GDB's own call where it can write the vector
registers, memdump's own with the general registers where GDB 13 cannot (an AMX machine), and the
process going on afterwards as if nothing had happened."""

from __future__ import annotations

import subprocess

import pytest
from gdb_driver import GdbDriver
from memdump_e2e import program

GENERAL = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
           "r12", "r13", "r14", "r15", "rip", "eflags", "orig_rax")

CALLS = """python
import dbgkit.inferior_call as ic
def regs():
    f = gdb.newest_frame()
    return [int(f.read_register(n)) & (2**64 - 1) for n in {general!r}]
before = regs()
weigh = int(gdb.parse_and_eval("(unsigned long) &weigh"))
strlen = int(gdb.parse_and_eval("(unsigned long) &strlen"))
call = ic.{how}
print("weigh", call(weigh, [1, 2, 3, 4, 5, 6], None))
print("strlen", call(strlen, [], b"seventeen letters"))
print("same registers", regs() == before)
end
"""


@pytest.mark.parametrize("how", ["_own_call", "_gdb_call", "call"])
def test_call_returns_and_restores(how: str) -> None:
    proc = subprocess.Popen([str(program("call_target"))], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    gdb = None
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        gdb = GdbDriver(pid=proc.pid)
        if how == "_gdb_call":
            probe = gdb.command("python import dbgkit.inferior_call as ic; "
                                "print('writable', ic._extended_state_writable())")
            if "writable False" in probe:
                out = gdb.command("python print(ic._gdb_call(int(gdb.parse_and_eval("
                                  "'(unsigned long) &weigh')), [1, 2, 3, 4, 5, 6], None))")
                # What the fallback is for: GDB 13's own call fails on this machine.
                assert "Couldn't write extended state status" in out, out
                gdb.command("detach")
                return
        out = gdb.command(*CALLS.format(general=GENERAL, how=how).splitlines())
        assert "weigh 654321\n" in out, out
        assert "strlen 17\n" in out, out
        assert "same registers True\n" in out, out
        gdb.command("detach")
        stdout, _ = proc.communicate("x", timeout=60)
        assert stdout == "resumed x\n"
        assert proc.returncode == 0
    finally:
        if gdb is not None:
            gdb.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
