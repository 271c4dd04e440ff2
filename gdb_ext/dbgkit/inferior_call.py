"""Calling a function in the stopped process, also where GDB's own inferior call cannot.

GDB saves every register before an inferior call and writes them all back after it. GDB 13 reads
and writes the x86 extended state (XSAVE: the vector registers) through a buffer of a fixed size;
on a processor with AMX the kernel's extended state is larger, Linux refuses to write a buffer of
another size, and every `call` fails with "Couldn't write extended state status: Bad address"
(GDB 14 sizes the buffer from CPUID). Debian 12's GDB on a Sapphire Rapids machine is such a case.

`call` uses GDB's inferior call where GDB can write the extended state, and otherwise makes the
call itself with only the general registers, which Linux writes with PTRACE_SETREGS: it saves
them, lowers the stack below the red zone, pushes the thread's own pc as the return address, puts
the arguments in the System V registers, runs the selected thread alone until the function
returns there (a breakpoint conditioned on the stack pointer), reads %rax and
writes every general register back, orig_rax included (so a system call the thread was stopped in
is restarted as after GDB's own call). What that cannot restore is the vector registers: a
function that changes them (dlopen may) leaves them changed. At the points memdump calls a
function (a thread stopped in a system call, or at a breakpoint on an allocator's entry) the
System V ABI lets every call clobber them, so the thread's code does not depend on them there.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import gdb

# The general registers the fallback saves and restores, all in Linux's user_regs_struct.
GENERAL = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12",
           "r13", "r14", "r15", "rip", "eflags", "orig_rax")
ARGUMENTS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")
RED_ZONE = 128

# pid -> whether GDB can write that process's extended state.
_writable: dict[int, bool] = {}


class CallError(gdb.error):
    """The function did not return to the caller (a signal, the process exited)."""


def call(address: int, args: Sequence[int] = (), text: bytes | None = None) -> int:
    """Call the function at ADDRESS in the selected thread with the integer ARGS and return %rax.
    TEXT, if given, is put on the thread's stack below the red zone, NUL-terminated, and its
    address is passed before ARGS. Run inside memdump_attach's scheduler-locked context."""
    gdb.newest_frame().select()
    if len(args) + (text is not None) > len(ARGUMENTS):
        raise ValueError("at most six arguments")
    if _extended_state_writable():
        return _gdb_call(address, args, text)
    return _own_call(address, args, text)


def _register(name: str) -> int:
    return int(gdb.newest_frame().read_register(name)) & 0xFFFFFFFFFFFFFFFF


def _set(name: str, value: int) -> None:
    gdb.execute(f"set ${name} = {value:#x}", to_string=True)


def _extended_state_writable() -> bool:
    """Whether GDB can write the extended state here: one bit of %xmm15 flipped and set back."""
    lane = "$xmm15.v4_int32[0]"
    pid = gdb.selected_inferior().pid
    if pid not in _writable:
        try:
            saved = int(gdb.parse_and_eval(lane))
        except gdb.error:
            _writable[pid] = True   # no vector registers GDB knows of: nothing to write
            return True
        try:
            gdb.execute(f"set {lane} = {saved ^ 1}", to_string=True)
        except gdb.error:
            _writable[pid] = False
        else:
            gdb.execute(f"set {lane} = {saved}", to_string=True)
            _writable[pid] = True
    return _writable[pid]


def _put_text(sp: int, text: bytes) -> int:
    """TEXT below SP's red zone, NUL-terminated; its address."""
    at = (sp - 512 - len(text) - 1) & ~15
    gdb.selected_inferior().write_memory(at, text + b"\0")
    return at


def _gdb_call(address: int, args: Sequence[int], text: bytes | None) -> int:
    sp = _register("rsp")
    values = list(args)
    if text is not None:
        at = _put_text(sp, text)
        values.insert(0, at)
        _set("sp", (at - 256) & ~15)
    params = ", ".join("unsigned long" for _ in values) or "void"
    actuals = ", ".join(f"{v:#x}" for v in values)
    try:
        return int(gdb.parse_and_eval(f"((unsigned long (*)({params})) {address:#x})({actuals})"))
    finally:
        if text is not None:
            _set("sp", sp)


def _own_call(address: int, args: Sequence[int], text: bytes | None) -> int:
    inferior = gdb.selected_inferior()
    thread = gdb.selected_thread()
    saved = {name: _register(name) for name in GENERAL}
    back = saved["rip"]
    sp = saved["rsp"] - RED_ZONE
    values = list(args)
    if text is not None:
        sp = _put_text(sp, text)
        values.insert(0, sp)
    sp = (sp - 256) & ~15
    sp -= 8                       # the return address: the stack is 16-aligned at the call
    inferior.write_memory(sp, struct.pack("<Q", back))
    # The function returns to where the thread stopped, and stops there (the stack pointer tells
    # its return from a pass of the function through that address): GDB then knows the thread
    # stopped there, and steps over a breakpoint of the user's there when it resumes, instead
    # of reporting it hit again. Those breakpoints are off meanwhile: the return is no hit.
    stop = gdb.Breakpoint(f"*{back:#x}", internal=True)
    stop.silent = True
    stop.condition = f"$rsp == {sp + 8:#x}"
    off = [bp for bp in gdb.breakpoints() if bp.enabled and bp.number != stop.number
           and any(loc.address == back for loc in bp.locations)]
    try:
        for bp in off:
            bp.enabled = False
        for name, value in zip(ARGUMENTS, values, strict=False):
            _set(name, value)
        _set("rax", 0)            # no vector arguments, for a variadic callee
        _set("orig_rax", -1 & 0xFFFFFFFFFFFFFFFF)   # no system call to restart into the callee
        _set("rsp", sp)
        _set("rip", address)
        gdb.execute("continue", to_string=True)
        returned = (inferior.pid != 0 and thread.is_valid() and gdb.selected_thread() == thread
                    and _register("rip") == back and _register("rsp") == sp + 8)
        if not returned:
            raise CallError(f"the function at {address:#x} called in the process did not return")
        return _register("rax")
    finally:
        if stop.is_valid():
            stop.delete()
        for bp in off:
            if bp.is_valid():
                bp.enabled = True
        if inferior.pid and thread.is_valid():
            thread.switch()
            for name in GENERAL:
                _set(name, saved[name])
