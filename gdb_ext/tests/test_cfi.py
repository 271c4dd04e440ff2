"""CFI parsing and CFA programs, checked against `readelf --debug-dump=frames-interp`, plus the
DWARF expression evaluator and the Unwinder's failure reporting (no GDB needed)."""

from __future__ import annotations

import bisect
import ctypes
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from dbgkit.core import cfi, cfi_exec
from dbgkit.core.cfi import (
    EXPRESSION,
    OFFSET,
    REGISTER,
    SAME_VALUE,
    UNDEFINED,
    VAL_EXPRESSION,
    VAL_OFFSET,
    CfiError,
    ExpressionError,
)
from dbgkit.core.elf import ElfFile
from dbgkit.core.procmaps import ModuleMap
from dbgkit.core.unwind import Unwinder

if TYPE_CHECKING:
    from conftest import Programs

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
REG_NAMES = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
             "r12", "r13", "r14", "r15", "ra"]
REGNO = {name: i for i, name in enumerate(REG_NAMES)}

_FDE_LINE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ "
                       r"pc=([0-9a-f]+)\.\.([0-9a-f]+)$")


def readelf_fdes(path: str) -> list[tuple[int, int, list[str], list[tuple[int, list[str]]]]]:
    """Parse `readelf -wF`: (pc_begin, pc_end, column names, rows of (loc, values))."""
    text = subprocess.run(["readelf", "--debug-dump=frames-interp", path], capture_output=True,
                          text=True, check=False, timeout=120).stdout
    out: list[tuple[int, int, list[str], list[tuple[int, list[str]]]]] = []
    cur: tuple[int, int, list[str], list[tuple[int, list[str]]]] | None = None
    in_eh_frame = False
    for line in text.splitlines():
        if line.startswith("Contents of the "):
            in_eh_frame = ".eh_frame section" in line
            cur = None
            continue
        if not in_eh_frame:
            continue
        m = _FDE_LINE.match(line)
        if m:
            cur = (int(m.group(1), 16), int(m.group(2), 16), [], [])
            out.append(cur)
            continue
        if cur is None:
            continue
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "LOC":
            cur[2].extend(fields[1:])
        elif re.fullmatch(r"[0-9a-f]{16}", fields[0]):
            cur[3].append((int(fields[0], 16), fields[1:]))
        elif " CIE " in line or "ZERO terminator" in line:
            cur = None
    return out


def rule_text(rule: cfi.RegRule | None) -> str:
    """Our rule in readelf's notation ('u' covers unspecified and undefined)."""
    if rule is None or rule.kind == UNDEFINED:
        return "u"
    if rule.kind == REGISTER:
        return REG_NAMES[rule.value] if rule.value < len(REG_NAMES) else f"r{rule.value}"
    return {SAME_VALUE: "s", OFFSET: f"c{rule.value:+d}", VAL_OFFSET: f"v{rule.value:+d}",
            EXPRESSION: "exp", VAL_EXPRESSION: "vexp"}[rule.kind]


def cfa_text(rule: cfi.CfaRule) -> str:
    if rule.expression is not None:
        return "exp"
    return f"{REG_NAMES[rule.register]}{rule.offset:+d}"


def compare_with_readelf(path: str) -> int:
    """Check every FDE row readelf prints against ours; return the number of rows compared."""
    elf = ElfFile.open(path)
    compared = 0
    problems: list[str] = []
    for begin, end, cols, rows in readelf_fdes(path):
        if begin == end or not rows:
            continue
        fde = elf.eh_frame_lookup(begin)
        if fde is None or (fde.pc_begin, fde.pc_end) != (begin, end):
            problems.append(f"{path}: lookup of {begin:#x} gave {fde}")
            continue
        ours = cfi_exec.table(fde)
        locs = [r.loc for r in ours]
        for loc, values in rows:
            if len(values) != len(cols):
                continue  # readelf omits columns a DW_CFA_restore made unreferenced again
            row = ours[bisect.bisect_right(locs, loc) - 1]
            got = [cfa_text(row.cfa)]
            want = [values[0]]
            for name, value in zip(cols[1:], values[1:], strict=True):
                if name in REGNO:  # vector registers etc. are not tracked by the comparison
                    got.append(rule_text(row.registers.get(REGNO[name])))
                    want.append(value)
            if got != want:
                problems.append(f"{path}: FDE {begin:#x} loc {loc:#x}: ours {got} readelf {want}")
            compared += 1
    assert not problems, "\n".join(problems[:20])
    return compared


needs_readelf = pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf is missing")


@needs_readelf
@pytest.mark.parametrize("path", [LIBC, LIBSTDCXX])
def test_rows_match_readelf_for_system_libraries(path: str) -> None:
    if not Path(path).exists():
        pytest.skip(f"{path} is not installed")
    assert compare_with_readelf(path) > 1000


@needs_readelf
@pytest.mark.parametrize("name", ["chain_O0", "chain_O2", "vector_cpp", "signal"])
def test_rows_match_readelf_for_test_programs(programs: Programs, name: str) -> None:
    assert compare_with_readelf(str(programs.get(name))) > 10


def test_malloc_rows() -> None:
    """__libc_malloc starts with the psABI entry row and pushes callee-saved registers."""
    elf = ElfFile.open(LIBC)
    malloc = elf.dynamic_symbols()["__libc_malloc"]
    fde = elf.eh_frame_lookup(malloc)
    assert fde is not None and fde.pc_begin == malloc and not fde.signal_frame
    entry = cfi_exec.row_at(fde, malloc)
    assert entry.cfa == cfi.CfaRule(7, 8)
    assert entry.registers[16] == cfi.RegRule(OFFSET, -8)
    later = cfi_exec.row_at(fde, fde.pc_end - 1)
    assert later.cfa.register == 7 and later.registers[16] == cfi.RegRule(OFFSET, -8)


def test_frame_pointer_function_rows(programs: Programs) -> None:
    """At -O0, recurse() moves its CFA to rbp+16 after `push %rbp; mov %rsp,%rbp`."""
    elf = ElfFile.open(str(programs.get("chain_O0")))
    start = elf.dynamic_symbols()["recurse"]
    fde = elf.eh_frame_lookup(start)
    assert fde is not None and fde.pc_begin == start
    rows = cfi_exec.table(fde)
    assert rows[0].cfa == cfi.CfaRule(7, 8)
    assert rows[1].cfa == cfi.CfaRule(7, 16) and rows[1].registers[6] == cfi.RegRule(OFFSET, -16)
    assert rows[2].cfa == cfi.CfaRule(6, 16)
    assert cfi_exec.row_at(fde, rows[2].loc + 3).cfa == cfi.CfaRule(6, 16)
    with pytest.raises(CfiError):
        cfi_exec.row_at(fde, fde.pc_end)


def test_drap_frame_uses_expressions(programs: Programs) -> None:
    """aligned_frame() at -O2 realigns the stack: CFA = *(rbp - 8) (DW_OP_breg6 -8; deref)."""
    elf = ElfFile.open(str(programs.get("chain_O2")))
    start = elf.dynamic_symbols()["aligned_frame"]
    fde = elf.eh_frame_lookup(start)
    assert fde is not None
    exprs = [r for r in cfi_exec.table(fde) if r.cfa.expression is not None]
    assert exprs
    memory = {0x7000 - 8: 0x9000}
    cfa = cfi_exec.evaluate(exprs[0].cfa.expression or b"", {6: 0x7000}, memory.__getitem__)
    assert cfa == 0x9000


@needs_readelf
def test_signal_trampoline_cfi() -> None:
    """glibc's __restore_rt has an 'S' CIE and expression rules for rip/rsp (x86-64 sigcontext)."""
    elf = ElfFile.open(LIBC)
    # __restore_rt is not exported: find it by the signal-frame flag among all FDEs.
    fdes = [elf.eh_frame_lookup(begin) for begin, _, _, _ in readelf_fdes(LIBC)]
    signal = [f for f in fdes if f is not None and f.signal_frame]
    assert len(signal) == 1
    row = cfi_exec.row_at(signal[0], signal[0].pc_begin)
    assert row.signal_frame and row.cfa.expression is not None
    assert row.registers[16].kind == EXPRESSION
    # Evaluate against a fake ucontext: rsp + 160 holds the saved rsp (oRSP), rsp + 168 rip.
    sp = 0x10000
    memory = {sp + 160: 0x20000, sp + 168: 0x401234}
    regs = {7: sp}
    cfa = cfi_exec.evaluate(row.cfa.expression or b"", regs, memory.__getitem__)
    assert cfa == 0x20000
    rip_addr = cfi_exec.evaluate(row.registers[16].expression, regs, memory.__getitem__, push=cfa)
    assert memory[rip_addr] == 0x401234


def test_plt_expression() -> None:
    """The PLT CFA: rsp + 8 + ((rip & 15) >= 11 ? 8 : 0), as emitted by the linker."""
    expr = bytes([0x77, 0x08, 0x80, 0x00, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])
    assert cfi_exec.evaluate(expr, {7: 0x1000, 16: 0x4020}, lambda a: 0) == 0x1008
    assert cfi_exec.evaluate(expr, {7: 0x1000, 16: 0x402B}, lambda a: 0) == 0x1010


def test_plt_fde_of_test_program(programs: Programs) -> None:
    """The test program's .plt FDE defines its CFA with the expression above."""
    elf = ElfFile.open(str(programs.get("chain_O2")))
    plt = elf.section(".plt")
    assert plt is not None
    fde = elf.eh_frame_lookup(plt.addr + 16)
    assert fde is not None
    row = cfi_exec.row_at(fde, plt.addr + 16)
    assert row.cfa.expression is not None
    value = cfi_exec.evaluate(row.cfa.expression, {7: 0x1000, 16: plt.addr + 16}, lambda a: 0)
    assert value == 0x1008


def test_expression_errors() -> None:
    with pytest.raises(ExpressionError):
        # DW_OP_regx: a location, not a value
        cfi_exec.evaluate(bytes([0x90, 0x00]), {}, lambda a: 0)
    with pytest.raises(cfi.UnknownRegister):
        cfi_exec.evaluate(bytes([0x73, 0x00]), {7: 1}, lambda a: 0)  # breg3 unknown
    with pytest.raises(ExpressionError):
        cfi_exec.evaluate(bytes([0x22]), {}, lambda a: 0)  # plus on an empty stack
    assert cfi_exec.evaluate(bytes([0x31, 0x32, 0x1C]), {}, lambda a: 0) == (1 - 2) & cfi.MASK64
    assert cfi_exec.evaluate(bytes([0x08, 0xFF, 0x09, 0xFF, 0x2D]), {}, lambda a: 0) == 0


def test_leb128_and_encodings() -> None:
    assert cfi.uleb128(bytes([0xE5, 0x8E, 0x26]), 0) == (624485, 3)
    assert cfi.sleb128(bytes([0xC0, 0xBB, 0x78]), 0) == (-123456, 3)
    assert cfi.sleb128(bytes([0x7F]), 0) == (-1, 1)
    data = struct.pack("<i", -16)
    assert cfi.read_encoded(data, 0, cfi.DW_EH_PE_pcrel | cfi.DW_EH_PE_sdata4, 0x1000) == \
        (0x1000 - 16, 4)
    assert cfi.read_encoded(data, 0, cfi.DW_EH_PE_datarel | cfi.DW_EH_PE_sdata4, 0,
                            datarel=0x2000) == (0x2000 - 16, 4)
    with pytest.raises(CfiError):
        cfi.read_encoded(data, 0, 0x07, 0)


def test_truncated_cfi_is_an_error() -> None:
    with pytest.raises(CfiError):
        cfi.parse_fde(b"\x20\x00\x00\x00\x10\x00\x00\x00", 0, 0)
    cie = struct.pack("<IIB", 12, 0, 1) + b"zR\0" + bytes([1, 0x78, 16, 1, 0x1B])
    with pytest.raises(CfiError):
        cfi.parse_cie(cie, 0, 0)


# --- Unwinder failure reporting (no GDB): real libc rows, fake stack memory ---------------------

def _libc_module_of_this_process() -> tuple[ModuleMap, int]:
    import os

    mods = ModuleMap(os.getpid())
    malloc = ctypes.cast(ctypes.CDLL("libc.so.6").malloc, ctypes.c_void_p).value or 0
    mod = mods.find(malloc)
    assert mod is not None and mod.elf is not None
    assert mod.bias + mod.elf.dynamic_symbols()["malloc"] == malloc
    return mods, malloc


def test_unwinder_stops_on_unknown_module() -> None:
    mods, malloc = _libc_module_of_this_process()
    stack = {0x7000: 0x10}  # the return address 0x10 is in no mapping

    def read(addr: int, size: int) -> bytes:
        if not 0x7000 <= addr < 0x8000:
            raise OSError(5, "Input/output error")
        return b"".join(struct.pack("<Q", stack.get(a, 0)) for a in range(addr, 0x8000, 8))

    uw = Unwinder(read, mods)
    assert uw.backtrace(malloc, 0x7000, 0, 10) == ([0x10], False)
    assert uw.last_status == "no-module"
    assert uw.backtrace(malloc, 0x7000, 0, 1) == ([0x10], True)
    assert uw.last_status == "limit"
    assert uw.backtrace(malloc, 0x7000, 0, 0) == ([], True)


def test_unwinder_stops_on_unreadable_stack() -> None:
    mods, malloc = _libc_module_of_this_process()

    def read(addr: int, size: int) -> bytes:
        raise OSError(5, "Input/output error")

    uw = Unwinder(read, mods)
    assert uw.backtrace(malloc, 0x7000, 0, 10) == ([], False)
    assert uw.last_status == "unreadable"


@needs_readelf
def test_unwinder_rejects_a_cfa_that_does_not_grow() -> None:
    """A rbp-based row with a garbage rbp must not walk downwards (or loop)."""
    mods, malloc = _libc_module_of_this_process()
    elf = ElfFile.open(LIBC)
    bias = malloc - elf.dynamic_symbols()["malloc"]
    # Find a libc pc whose row is rbp-based.
    for _, _, _, rows in readelf_fdes(LIBC):
        for loc, values in rows:
            if values and values[0] == "rbp+16":
                pc = loc + bias
                break
        else:
            continue
        break
    else:
        pytest.skip("no rbp-based row found")
    uw = Unwinder(lambda a, n: bytes(n), mods)
    assert uw.backtrace(pc, 0x9000, 0x100, 10) == ([], False)
    assert uw.last_status == "bad-cfa"
