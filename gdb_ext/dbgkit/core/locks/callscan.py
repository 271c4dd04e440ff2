"""Which locks a stack frame took and still holds, read from its function's machine code.

glibc records no readers of an rwlock and no holder of a semaphore, so `deadlocks` infers them:
a frame holds lock L when the x86-64 code of its function, from the entry to the frame's
current call, calls an acquire function (glibc.CALLS) on L and no release of L
follows. The lock is the call's argument register, evaluated by replaying the simple moves that
set it (mov, lea, add, rip-relative data) on top of the frame's current registers: a
callee-saved register (rbx, rbp, r12-r15, rsp) holds, after its last write before the call, the
value it has now. The code is read in address order, not along the branches the thread took,
so the result is a guess (docs/deadlocks.md, "The inferred holders"), and is always marked so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .glibc import CALLS, LockCall, normalize_function

CALLEE_SAVED = ("rbx", "rbp", "rsp", "r12", "r13", "r14", "r15")
CALLER_SAVED = ("rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11")
_NAMES32 = {"eax": "rax", "ebx": "rbx", "ecx": "rcx", "edx": "rdx", "esi": "rsi", "edi": "rdi",
            "ebp": "rbp", "esp": "rsp", **{f"r{n}d": f"r{n}" for n in range(8, 16)}}
_REGS64 = {*CALLEE_SAVED, *CALLER_SAVED}
_MEM = re.compile(r"^(-?(?:0x[0-9a-f]+|\d+))?\((%\w+)?(?:,(%\w+)(?:,(\d))?)?\)$")
_TARGET = re.compile(r"<([^>]+(?:<[^<>]*(?:<[^<>]*>[^<>]*)*>[^<>]*)*)>\s*$")
_COMMENT_ADDR = re.compile(r"#\s*(0x[0-9a-f]+)")

ReadWord = Callable[[int], "int | None"]


@dataclass(frozen=True)
class Insn:
    """One disassembled instruction: its address, length and AT&T text as GDB prints it."""

    address: int
    length: int
    text: str


@dataclass(frozen=True)
class LockEvent:
    """A call to a lock function in a frame's code: what it does and to which address."""

    address: int
    function: str
    call: LockCall
    lock: int | None


def _split_operands(text: str) -> tuple[str, list[str]]:
    code = text.split("#", 1)[0].strip()
    parts = code.split(None, 1)
    mnemonic = parts[0] if parts else ""
    if len(parts) < 2:
        return mnemonic, []
    ops, depth, cur = [], 0, ""
    for c in parts[1]:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            ops.append(cur.strip())
            cur = ""
        else:
            cur += c
    ops.append(cur.strip())
    return mnemonic, ops


def _reg(operand: str) -> tuple[str, bool] | None:
    """(64-bit register, whether the operand is its full or 32-bit form) for a register operand."""
    if not operand.startswith("%"):
        return None
    name = operand[1:]
    if name in _REGS64:
        return name, True
    if name in _NAMES32:
        return _NAMES32[name], True
    return (name, False) if name else None


class _Machine:
    """Register values while replaying a function's instructions in address order."""

    def __init__(self, insns: Sequence[Insn], frame_regs: dict[str, int], read_word: ReadWord):
        self.read_word = read_word
        self.frame_regs = frame_regs
        self.values: dict[str, int | None] = {}
        # after the last write to a callee-saved register its value is the frame's current one
        self.last_write: dict[str, int] = {}
        for i, insn in enumerate(insns):
            for reg in self._written(insn.text):
                if reg in CALLEE_SAVED:
                    self.last_write[reg] = i
        self.index = 0

    @staticmethod
    def _written(text: str) -> list[str]:
        mnemonic, ops = _split_operands(text)
        if mnemonic.startswith(("push", "pop", "call", "ret", "leave")):
            return ["rsp"] + (["rbp"] if mnemonic.startswith("leave") else []) + (
                [r[0] for r in (_reg(ops[0]),) if r] if mnemonic.startswith("pop") and ops else [])
        if ops and mnemonic and not mnemonic.startswith(("cmp", "test", "j", "nop")):
            reg = _reg(ops[-1])
            return [reg[0]] if reg else []
        return []

    def get(self, reg: str) -> int | None:
        if reg == "rip":
            return None
        if reg in CALLEE_SAVED and self.index > self.last_write.get(reg, -1):
            return self.frame_regs.get(reg)
        return self.values.get(reg)

    def address(self, operand: str, comment_addr: int | None) -> int | None:
        """The address a memory operand names, or None when it cannot be known."""
        if ":" in operand:  # %fs:... thread-local
            return None
        m = _MEM.match(operand)
        if not m:
            return None
        disp = int(m.group(1), 0) if m.group(1) else 0
        base = m.group(2)[1:] if m.group(2) else None
        if base == "rip":
            return comment_addr
        if m.group(3):
            return None
        value = self.get(base) if base else 0
        return None if value is None else (value + disp) & 0xFFFFFFFFFFFFFFFF

    def source(self, operand: str, comment_addr: int | None) -> int | None:
        """The value of a source operand (immediate, register, or a word in memory)."""
        if operand.startswith("$"):
            try:
                return int(operand[1:], 0) & 0xFFFFFFFFFFFFFFFF
            except ValueError:
                return None
        reg = _reg(operand)
        if reg:
            return self.get(reg[0]) if reg[1] else None
        addr = self.address(operand, comment_addr)
        return None if addr is None else self.read_word(addr)

    def step(self, insn: Insn) -> None:
        mnemonic, ops = _split_operands(insn.text)
        comment = _COMMENT_ADDR.search(insn.text)
        comment_addr = int(comment.group(1), 16) if comment else None
        written = self._written(insn.text)
        new: int | None = None
        if mnemonic.startswith("call"):
            for reg in CALLER_SAVED:
                self.values[reg] = None
        elif len(ops) == 2 and (dest := _reg(ops[1])) and dest[1]:
            src = ops[0]
            if mnemonic in ("mov", "movq", "movl"):
                new = self.source(src, comment_addr)
                src_reg = _reg(src)
                if (new is None and src_reg and src_reg[1] and dest[0] in CALLEE_SAVED
                        and self.index == self.last_write.get(dest[0])):
                    # `mov %rdi,%rbp` as rbp's last write: rdi held rbp's current value
                    new = self.frame_regs.get(dest[0])
                    self.values[src_reg[0]] = new
                if new is not None and (mnemonic == "movl" or ops[1][1:] in _NAMES32):
                    new &= 0xFFFFFFFF
            elif mnemonic in ("lea", "leaq"):
                new = self.address(src, comment_addr)
            elif mnemonic in ("add", "addq", "sub", "subq"):
                value, amount = self.get(dest[0]), self.source(src, comment_addr)
                if value is not None and amount is not None and src.startswith("$"):
                    sign = 1 if mnemonic.startswith("add") else -1
                    new = (value + sign * amount) & 0xFFFFFFFFFFFFFFFF
            elif mnemonic.startswith("xor") and ops[0] == ops[1]:
                new = 0
        dest_reg = _reg(ops[-1]) if ops else None
        for reg in written:
            self.values[reg] = new if dest_reg is not None and reg == dest_reg[0] else None
        self.index += 1


_JUMP = re.compile(r"^(j\w+)\s+(0x[0-9a-f]+)")
DETOUR_MAX = 64  # instructions of an out-of-line block followed from a branch


def _jump(text: str) -> tuple[str, int] | None:
    m = _JUMP.match(text.strip())
    return (m.group(1), int(m.group(2), 16)) if m else None


def trace(code: Sequence[Insn], pc: int) -> list[Insn]:
    """The instructions from the function's entry to PC (exclusive) in address order, with the
    out-of-line blocks a branch before PC jumps to spliced in at the branch when they jump back
    into the code before PC (GCC moves an `if` body past the rest of the function)."""
    index = {insn.address: i for i, insn in enumerate(code)}
    out: list[Insn] = []
    for insn in code:
        if insn.address >= pc:
            break
        out.append(insn)
        jump = _jump(insn.text)
        if jump is None or jump[0] == "jmp" or jump[1] < pc or jump[1] not in index:
            continue
        detour: list[Insn] = []
        for other in code[index[jump[1]]:index[jump[1]] + DETOUR_MAX]:
            detour.append(other)
            back = _jump(other.text)
            if other.text.startswith("ret"):
                break
            if back and code[0].address <= back[1] < pc:
                out.extend(detour)
                break
            if back and back[0] == "jmp":
                break
    return out


def call_target(text: str, demangle: Callable[[str], str] = str) -> str | None:
    """The function a call instruction names (`call 0x... <pthread_mutex_lock@plt>`),
    demangled by DEMANGLE and normalised."""
    if not text.split(None, 1)[0].startswith("call"):
        return None
    m = _TARGET.search(text)
    return normalize_function(demangle(normalize_function(m.group(1)))) if m else None


def lock_events(insns: Sequence[Insn], frame_regs: dict[str, int], read_word: ReadWord,
                demangle: Callable[[str], str] = str) -> list[LockEvent]:
    """Every call to a lock function in INSNS (a function's code up to and including the call the
    frame is in), with the lock address evaluated as the call passes it."""
    machine = _Machine(insns, frame_regs, read_word)
    events = []
    for insn in insns:
        target = call_target(insn.text, demangle)
        if target is not None and target in CALLS:
            call = CALLS[target]
            lock = machine.get(call.arg)
            if lock is not None and call.deref:
                lock = read_word(lock)
            events.append(LockEvent(insn.address, target, call, lock))
        machine.step(insn)
    return events


def still_held(events: Sequence[LockEvent]) -> list[LockEvent]:
    """The acquisitions no later release of the same lock undoes (in address order)."""
    held: list[LockEvent] = []
    for event in events:
        if event.lock is None:
            continue
        if event.call.op == "acquire":
            held.append(event)
        elif event.call.op == "release":
            for i in range(len(held) - 1, -1, -1):
                if held[i].lock == event.lock:
                    del held[i]
                    break
    return held
