"""DWARF call frame information as found in .eh_frame: CIE/FDE parsing, CFA programs, expressions.

References: LSB 5.0 Core §10.6 (.eh_frame, pointer encodings, augmentations) and DWARF 5 §6.4
(call frame instructions) and §2.5 (DWARF expressions). Little-endian 64-bit targets only.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

MASK64 = (1 << 64) - 1

# Pointer encodings, LSB 5.0 Core §10.5 ("DWARF Exception Header Encoding").
DW_EH_PE_absptr = 0x00
DW_EH_PE_uleb128 = 0x01
DW_EH_PE_udata2 = 0x02
DW_EH_PE_udata4 = 0x03
DW_EH_PE_udata8 = 0x04
DW_EH_PE_sleb128 = 0x09
DW_EH_PE_sdata2 = 0x0A
DW_EH_PE_sdata4 = 0x0B
DW_EH_PE_sdata8 = 0x0C
DW_EH_PE_pcrel = 0x10
DW_EH_PE_textrel = 0x20
DW_EH_PE_datarel = 0x30
DW_EH_PE_funcrel = 0x40
DW_EH_PE_aligned = 0x50
DW_EH_PE_indirect = 0x80
DW_EH_PE_omit = 0xFF

_FIXED_FORMATS: dict[int, struct.Struct] = {
    DW_EH_PE_absptr: struct.Struct("<Q"),  # absptr is the target's address size: 8 on LP64
    DW_EH_PE_udata2: struct.Struct("<H"),
    DW_EH_PE_udata4: struct.Struct("<I"),
    DW_EH_PE_udata8: struct.Struct("<Q"),
    DW_EH_PE_sdata2: struct.Struct("<h"),
    DW_EH_PE_sdata4: struct.Struct("<i"),
    DW_EH_PE_sdata8: struct.Struct("<q"),
}
_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_S16 = struct.Struct("<h")
_U32 = struct.Struct("<I")
_S32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_S64 = struct.Struct("<q")
_CONST_FORMATS = (_U8, struct.Struct("<b"), _U16, _S16, _U32, _S32, _U64, _S64)

# Register rule kinds, DWARF 5 §6.4.1. "Unspecified" is represented by the absence of a rule.
UNDEFINED = 0
SAME_VALUE = 1
OFFSET = 2
VAL_OFFSET = 3
REGISTER = 4
EXPRESSION = 5
VAL_EXPRESSION = 6
RULE_NAMES = ("undefined", "same_value", "offset", "val_offset", "register", "expression",
              "val_expression")

Buffer = Any  # bytes, bytearray, memoryview or mmap: anything indexable and struct-unpackable


class CfiError(Exception):
    """Call frame information that is malformed or uses a feature this parser does not support."""


class ExpressionError(CfiError):
    """A DWARF expression that cannot be evaluated (unsupported operation, bad stack)."""


class UnknownRegister(ExpressionError):
    """A rule or expression needs the value of a register that is not known in this frame."""

    def __init__(self, regno: int) -> None:
        super().__init__(f"the value of DWARF register {regno} is not known in this frame")
        self.regno = regno


def uleb128(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode an unsigned LEB128 number at pos; return (value, position after it). DWARF 5 §7.6."""
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def sleb128(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a signed LEB128 number at pos; return (value, position after it). DWARF 5 §7.6."""
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos


def read_encoded(buf: Buffer, pos: int, enc: int, delta: int, datarel: int | None = None,
                 funcrel: int | None = None) -> tuple[int, int]:
    """Decode a pointer with DW_EH_PE encoding enc at buf[pos]; delta = vaddr of buf[0].

    Returns (value, new position). DW_EH_PE_indirect is not followed here: the value is then the
    address of the pointer (only personality routines use it, and the unwinder never needs them).
    """
    if enc == DW_EH_PE_omit:
        raise CfiError("an omitted pointer (DW_EH_PE_omit) was read")
    app = enc & 0x70
    fmt = enc & 0x0F
    if app == DW_EH_PE_aligned:
        # LSB §10.5: the value is an absptr aligned to the address size.
        pos = ((pos + delta + 7) & ~7) - delta
        fmt = DW_EH_PE_absptr
    start = pos
    if fmt == DW_EH_PE_uleb128:
        value, pos = uleb128(buf, pos)
    elif fmt == DW_EH_PE_sleb128:
        value, pos = sleb128(buf, pos)
    else:
        st = _FIXED_FORMATS.get(fmt)
        if st is None:
            raise CfiError(f"unknown pointer encoding 0x{enc:02x}")
        if pos + st.size > len(buf):
            raise CfiError("pointer runs past the end of the section")
        value = st.unpack_from(buf, pos)[0]
        pos += st.size
    if app == DW_EH_PE_pcrel:
        value += start + delta
    elif app == DW_EH_PE_datarel:
        if datarel is None:
            raise CfiError("DW_EH_PE_datarel pointer without a data base")
        value += datarel
    elif app == DW_EH_PE_funcrel:
        if funcrel is None:
            raise CfiError("DW_EH_PE_funcrel pointer without a function base")
        value += funcrel
    elif app == DW_EH_PE_textrel:
        raise CfiError("DW_EH_PE_textrel pointers are not supported")
    elif app not in (DW_EH_PE_absptr, DW_EH_PE_aligned):
        raise CfiError(f"unknown pointer encoding 0x{enc:02x}")
    return value & MASK64, pos


def _skip_encoded(buf: Buffer, pos: int, enc: int, delta: int) -> int:
    """Return the position after an encoded pointer without interpreting its base."""
    if enc == DW_EH_PE_omit:
        return pos
    fmt = enc & 0x0F
    if enc & 0x70 == DW_EH_PE_aligned:
        return ((pos + delta + 7) & ~7) - delta + 8
    if fmt == DW_EH_PE_uleb128:
        return uleb128(buf, pos)[1]
    if fmt == DW_EH_PE_sleb128:
        return sleb128(buf, pos)[1]
    st = _FIXED_FORMATS.get(fmt)
    if st is None:
        raise CfiError(f"unknown pointer encoding 0x{enc:02x}")
    return pos + st.size


@dataclass(frozen=True)
class Cie:
    """A Common Information Entry: the parameters and initial rules shared by its FDEs."""

    offset: int
    version: int
    augmentation: str
    code_align: int
    data_align: int
    ra_reg: int
    fde_encoding: int
    lsda_encoding: int
    signal_frame: bool
    initial_instructions: bytes
    has_z: bool


@dataclass(frozen=True)
class FdeInfo:
    """A Frame Description Entry: the CFA program for the link-time range [pc_begin, pc_end)."""

    offset: int
    pc_begin: int
    pc_end: int
    cie: Cie
    instructions: bytes
    instructions_vaddr: int  # needed by DW_CFA_set_loc with a pc-relative encoding

    @property
    def signal_frame(self) -> bool:
        """True for signal trampolines ('S' augmentation): their pc is not a return address."""
        return self.cie.signal_frame


@dataclass(frozen=True)
class CfaRule:
    """How to compute the CFA: register + offset, or a DWARF expression (register is then -1)."""

    register: int
    offset: int = 0
    expression: bytes | None = None


@dataclass(frozen=True)
class RegRule:
    """The rule recovering one register of the caller (DWARF 5 §6.4.1)."""

    kind: int
    value: int = 0  # the offset (OFFSET, VAL_OFFSET) or the source register (REGISTER)
    expression: bytes = b""

    def describe(self) -> str:
        """A short readable form, e.g. 'offset(-8)'."""
        if self.kind in (OFFSET, VAL_OFFSET, REGISTER):
            return f"{RULE_NAMES[self.kind]}({self.value})"
        return RULE_NAMES[self.kind]


@dataclass
class Row:
    """One row of the unwind table: the rules that hold from link-time address loc onwards."""

    loc: int
    cfa: CfaRule
    registers: dict[int, RegRule] = field(default_factory=dict)
    ra_reg: int = 16
    signal_frame: bool = False


def entry_bounds(buf: Buffer, off: int) -> tuple[int, int, bool]:
    """Return (position after the length field, end of entry, is_64bit) for the entry at off.

    LSB §10.6.1.1: a length of 0xffffffff introduces a 64-bit extended length; 0 terminates.
    """
    if off + 4 > len(buf):
        raise CfiError(f"entry at 0x{off:x} runs past the end of .eh_frame")
    length = _U32.unpack_from(buf, off)[0]
    pos = off + 4
    is64 = False
    if length == 0xFFFFFFFF:
        if pos + 8 > len(buf):
            raise CfiError(f"entry at 0x{off:x} runs past the end of .eh_frame")
        length = _U64.unpack_from(buf, pos)[0]
        pos += 8
        is64 = True
    end = pos + length
    if end > len(buf):
        raise CfiError(f"entry at 0x{off:x} claims {length} bytes, past the end of .eh_frame")
    return pos, end, is64


def parse_cie(buf: Buffer, off: int, delta: int) -> Cie:
    """Parse the CIE at file offset off; delta is vaddr - offset (for pc-relative pointers)."""
    try:
        pos, end, _ = entry_bounds(buf, off)
        if _U32.unpack_from(buf, pos)[0] != 0:
            raise CfiError(f"entry at 0x{off:x} is not a CIE")
        pos += 4
        version = buf[pos]
        pos += 1
        if version not in (1, 3, 4):
            raise CfiError(f"CIE at 0x{off:x} has unsupported version {version}")
        nul = buf.find(b"\0", pos, end)
        if nul < 0:
            raise CfiError(f"CIE at 0x{off:x} has an unterminated augmentation string")
        aug = bytes(buf[pos:nul]).decode("ascii", "replace")
        pos = nul + 1
        if aug.startswith("eh"):
            pos += 8  # old GCC: an 'eh' data pointer follows (LSB §10.6.1.1.1)
        if version == 4:
            pos += 2  # address_size and segment_selector_size (DWARF 5 §6.4.1)
        code_align, pos = uleb128(buf, pos)
        data_align, pos = sleb128(buf, pos)
        if version == 1:
            ra_reg = buf[pos]
            pos += 1
        else:
            ra_reg, pos = uleb128(buf, pos)
        fde_enc = DW_EH_PE_absptr
        lsda_enc = DW_EH_PE_omit
        signal = False
        has_z = aug.startswith("z")
        if has_z:
            aug_len, pos = uleb128(buf, pos)
            aug_end = pos + aug_len
            for ch in aug[1:]:
                if ch == "R":
                    fde_enc = buf[pos]
                    pos += 1
                elif ch == "L":
                    lsda_enc = buf[pos]
                    pos += 1
                elif ch == "P":
                    penc = buf[pos]
                    pos = _skip_encoded(buf, pos + 1, penc, delta)
                elif ch == "S":
                    signal = True
                elif ch in "BG":
                    pass  # AArch64 BTI / MTE markers carry no data
                else:
                    break  # unknown letter: the 'z' length still lets us skip the data
            pos = aug_end
        elif aug not in ("", "eh"):
            raise CfiError(f"CIE at 0x{off:x} has augmentation {aug!r} without 'z'")
        if pos > end:
            raise CfiError(f"CIE at 0x{off:x} is truncated")
        return Cie(off, version, aug, code_align, data_align, ra_reg, fde_enc, lsda_enc, signal,
                   bytes(buf[pos:end]), has_z)
    except (IndexError, struct.error) as exc:
        raise CfiError(f"CIE at 0x{off:x} is truncated") from exc


def parse_fde(buf: Buffer, off: int, delta: int, cie_cache: dict[int, Cie] | None = None
              ) -> FdeInfo:
    """Parse the FDE at file offset off (and its CIE, cached in cie_cache by offset)."""
    try:
        pos, end, _ = entry_bounds(buf, off)
        cie_ptr = _U32.unpack_from(buf, pos)[0]
        if cie_ptr == 0:
            raise CfiError(f"entry at 0x{off:x} is a CIE, not an FDE")
        # LSB §10.6.1.2: the CIE pointer is subtracted from the offset of the field itself.
        cie_off = pos - cie_ptr
        pos += 4
        cie = cie_cache.get(cie_off) if cie_cache is not None else None
        if cie is None:
            cie = parse_cie(buf, cie_off, delta)
            if cie_cache is not None:
                cie_cache[cie_off] = cie
        if cie.fde_encoding & DW_EH_PE_indirect:
            raise CfiError(f"FDE at 0x{off:x} uses an indirect pc_begin encoding")
        pc_begin, pos = read_encoded(buf, pos, cie.fde_encoding, delta)
        # The range uses only the value format of the encoding, never its base (LSB §10.6.1.2).
        pc_range, pos = read_encoded(buf, pos, cie.fde_encoding & 0x0F, delta)
        if cie.has_z:
            aug_len, pos = uleb128(buf, pos)
            pos += aug_len
        if pos > end:
            raise CfiError(f"FDE at 0x{off:x} is truncated")
        return FdeInfo(off, pc_begin, (pc_begin + pc_range) & MASK64, cie, bytes(buf[pos:end]),
                       pos + delta)
    except (IndexError, struct.error) as exc:
        raise CfiError(f"FDE at 0x{off:x} is truncated") from exc


def scan_fdes(buf: Buffer, start: int, stop: int, delta: int, cie_cache: dict[int, Cie]
              ) -> list[tuple[int, int, int]]:
    """List (pc_begin, pc_end, offset) of every FDE in buf[start:stop], sorted by pc_begin.

    Used when a file has .eh_frame but no .eh_frame_hdr search table.
    """
    out: list[tuple[int, int, int]] = []
    off = start
    while off + 4 <= stop:
        pos, end, _ = entry_bounds(buf, off)
        if end == pos:  # zero length: terminator (LSB §10.6.1)
            break
        if _U32.unpack_from(buf, pos)[0] != 0:
            fde = parse_fde(buf, off, delta, cie_cache)
            if fde.pc_end > fde.pc_begin:
                out.append((fde.pc_begin, fde.pc_end, off))
        off = end
    out.sort()
    return out


# ---------------------------------------------------------------------------------------------
# CFA programs (DWARF 5 §6.4.2)

class _State:
    """Mutable state of a running CFA program."""

    __slots__ = ("loc", "cfa", "regs")

    def __init__(self, loc: int) -> None:
        self.loc = loc
        self.cfa = CfaRule(-1)
        self.regs: dict[int, RegRule] = {}


def _run(code: bytes, code_vaddr: int, fde: FdeInfo, st: _State, initial: dict[int, RegRule] | None,
         stop_at: int | None, rows: list[Row] | None) -> bool:
    """Execute a CFA program; return True if it stopped because the next row starts past stop_at.

    initial is None while running the CIE's initial instructions (DW_CFA_restore is then invalid);
    rows, when given, receives a Row for every address range the program describes.
    """
    cie = fde.cie
    caf = cie.code_align
    daf = cie.data_align
    stack: list[tuple[CfaRule, dict[int, RegRule]]] = []
    pos = 0
    n = len(code)

    def advance(new_loc: int) -> bool:
        if stop_at is not None and new_loc > stop_at:
            return True
        if rows is not None and new_loc != st.loc:
            _emit(rows, st, fde)
        st.loc = new_loc
        return False

    def restore(reg: int) -> None:
        if initial is None:
            raise CfiError("DW_CFA_restore in a CIE's initial instructions")
        rule = initial.get(reg)
        if rule is None:
            st.regs.pop(reg, None)
        else:
            st.regs[reg] = rule

    while pos < n:
        op = code[pos]
        pos += 1
        hi = op & 0xC0
        if hi == 0x40:  # DW_CFA_advance_loc
            if advance(st.loc + (op & 0x3F) * caf):
                return True
        elif hi == 0x80:  # DW_CFA_offset
            off, pos = uleb128(code, pos)
            st.regs[op & 0x3F] = RegRule(OFFSET, off * daf)
        elif hi == 0xC0:  # DW_CFA_restore
            restore(op & 0x3F)
        elif op == 0x00:  # DW_CFA_nop
            pass
        elif op == 0x01:  # DW_CFA_set_loc
            new, pos = read_encoded(code, pos, cie.fde_encoding, code_vaddr)
            if advance(new):
                return True
        elif op == 0x02:  # DW_CFA_advance_loc1
            if advance(st.loc + code[pos] * caf):
                return True
            pos += 1
        elif op == 0x03:  # DW_CFA_advance_loc2
            if advance(st.loc + _U16.unpack_from(code, pos)[0] * caf):
                return True
            pos += 2
        elif op == 0x04:  # DW_CFA_advance_loc4
            if advance(st.loc + _U32.unpack_from(code, pos)[0] * caf):
                return True
            pos += 4
        elif op == 0x05:  # DW_CFA_offset_extended
            reg, pos = uleb128(code, pos)
            off, pos = uleb128(code, pos)
            st.regs[reg] = RegRule(OFFSET, off * daf)
        elif op == 0x06:  # DW_CFA_restore_extended
            reg, pos = uleb128(code, pos)
            restore(reg)
        elif op == 0x07:  # DW_CFA_undefined
            reg, pos = uleb128(code, pos)
            st.regs[reg] = RegRule(UNDEFINED)
        elif op == 0x08:  # DW_CFA_same_value
            reg, pos = uleb128(code, pos)
            st.regs[reg] = RegRule(SAME_VALUE)
        elif op == 0x09:  # DW_CFA_register
            reg, pos = uleb128(code, pos)
            reg2, pos = uleb128(code, pos)
            st.regs[reg] = RegRule(REGISTER, reg2)
        elif op == 0x0A:  # DW_CFA_remember_state
            # GCC and GDB save the CFA rule too; GCC's epilogues rely on it.
            stack.append((st.cfa, dict(st.regs)))
        elif op == 0x0B:  # DW_CFA_restore_state
            if not stack:
                raise CfiError("DW_CFA_restore_state without a remembered state")
            st.cfa, st.regs = stack.pop()
        elif op == 0x0C:  # DW_CFA_def_cfa
            reg, pos = uleb128(code, pos)
            off, pos = uleb128(code, pos)
            st.cfa = CfaRule(reg, off)
        elif op == 0x0D:  # DW_CFA_def_cfa_register
            reg, pos = uleb128(code, pos)
            if st.cfa.expression is not None:
                raise CfiError("DW_CFA_def_cfa_register while the CFA is an expression")
            st.cfa = CfaRule(reg, st.cfa.offset)
        elif op == 0x0E:  # DW_CFA_def_cfa_offset
            off, pos = uleb128(code, pos)
            if st.cfa.expression is not None:
                raise CfiError("DW_CFA_def_cfa_offset while the CFA is an expression")
            st.cfa = CfaRule(st.cfa.register, off)
        elif op == 0x0F:  # DW_CFA_def_cfa_expression
            ln, pos = uleb128(code, pos)
            st.cfa = CfaRule(-1, 0, bytes(code[pos:pos + ln]))
            pos += ln
        elif op == 0x10 or op == 0x16:  # DW_CFA_expression, DW_CFA_val_expression
            reg, pos = uleb128(code, pos)
            ln, pos = uleb128(code, pos)
            kind = EXPRESSION if op == 0x10 else VAL_EXPRESSION
            st.regs[reg] = RegRule(kind, 0, bytes(code[pos:pos + ln]))
            pos += ln
        elif op == 0x11:  # DW_CFA_offset_extended_sf
            reg, pos = uleb128(code, pos)
            off, pos = sleb128(code, pos)
            st.regs[reg] = RegRule(OFFSET, off * daf)
        elif op == 0x12:  # DW_CFA_def_cfa_sf
            reg, pos = uleb128(code, pos)
            off, pos = sleb128(code, pos)
            st.cfa = CfaRule(reg, off * daf)
        elif op == 0x13:  # DW_CFA_def_cfa_offset_sf
            off, pos = sleb128(code, pos)
            if st.cfa.expression is not None:
                raise CfiError("DW_CFA_def_cfa_offset_sf while the CFA is an expression")
            st.cfa = CfaRule(st.cfa.register, off * daf)
        elif op == 0x14:  # DW_CFA_val_offset
            reg, pos = uleb128(code, pos)
            off, pos = uleb128(code, pos)
            st.regs[reg] = RegRule(VAL_OFFSET, off * daf)
        elif op == 0x15:  # DW_CFA_val_offset_sf
            reg, pos = uleb128(code, pos)
            off, pos = sleb128(code, pos)
            st.regs[reg] = RegRule(VAL_OFFSET, off * daf)
        elif op == 0x1D:  # DW_CFA_MIPS_advance_loc8 (GNU extension)
            if advance(st.loc + _U64.unpack_from(code, pos)[0] * caf):
                return True
            pos += 8
        elif op == 0x2E:  # DW_CFA_GNU_args_size: only matters for landing pads, not for unwinding
            _, pos = uleb128(code, pos)
        elif op == 0x2F:  # DW_CFA_GNU_negative_offset_extended
            reg, pos = uleb128(code, pos)
            off, pos = uleb128(code, pos)
            st.regs[reg] = RegRule(OFFSET, -off * daf)
        else:
            # 0x2d is DW_CFA_GNU_window_save (SPARC) / DW_CFA_AARCH64_negate_ra_state.
            raise CfiError(f"unsupported call frame instruction 0x{op:02x}")
    return False


def _emit(rows: list[Row], st: _State, fde: FdeInfo) -> None:
    """Append the current state as a row (replacing a row at the same address)."""
    row = Row(st.loc, st.cfa, dict(st.regs), fde.cie.ra_reg, fde.cie.signal_frame)
    if rows and rows[-1].loc == st.loc:
        rows[-1] = row
    else:
        rows.append(row)


def _execute(fde: FdeInfo, stop_at: int | None, rows: list[Row] | None) -> _State:
    st = _State(fde.pc_begin)
    try:
        _run(fde.cie.initial_instructions, 0, fde, st, None, None, None)
        initial = dict(st.regs)
        _run(fde.instructions, fde.instructions_vaddr, fde, st, initial, stop_at, rows)
    except (IndexError, struct.error) as exc:
        raise CfiError(f"truncated call frame instructions in FDE at 0x{fde.offset:x}") from exc
    return st


def row_at(fde: FdeInfo, vaddr: int) -> Row:
    """The unwind row in effect at link-time address vaddr, which must lie inside the FDE."""
    if not fde.pc_begin <= vaddr < fde.pc_end:
        raise CfiError(f"address 0x{vaddr:x} is outside the FDE at 0x{fde.offset:x}")
    st = _execute(fde, vaddr, None)
    return Row(st.loc, st.cfa, st.regs, fde.cie.ra_reg, fde.cie.signal_frame)


def table(fde: FdeInfo) -> list[Row]:
    """Every row of the FDE's unwind table, in address order (used by tests and diagnostics)."""
    rows: list[Row] = []
    st = _execute(fde, None, rows)
    _emit(rows, st, fde)
    return rows


# ---------------------------------------------------------------------------------------------
# DWARF expressions (DWARF 5 §2.5.1). This evaluator covers the stack, arithmetic, logic,
# comparison, branch, constant, register (DW_OP_breg*) and memory (DW_OP_deref*) operations,
# which is what GCC and glibc emit in .eh_frame: the PLT's "rsp + 8 + ((rip & 15) >= 11 ? 8 : 0)",
# the __restore_rt signal trampoline (breg7 + offset, deref) and DRAP stack realignment (breg6,
# deref). DW_OP_reg*/piece/call/TLS/entry_value operations are rejected with ExpressionError, which
# the Unwinder reports as an incomplete walk.


def _signed(v: int) -> int:
    v &= MASK64
    return v - (1 << 64) if v >> 63 else v


def evaluate(expr: bytes, regs: Mapping[int, int], read_u64: Callable[[int], int],
             push: int | None = None, bias: int = 0) -> int:
    """Evaluate a DWARF expression and return the value on top of the stack (64 bits).

    push is pushed before evaluation (the CFA, for DW_CFA_expression / val_expression, DWARF 5
    §6.4.2.3). read_u64 reads 8 bytes of target memory. bias relocates DW_OP_addr operands.
    """
    stack: list[int] = [] if push is None else [push & MASK64]
    pos = 0
    n = len(expr)
    try:
        while pos < n:
            op = expr[pos]
            pos += 1
            if 0x70 <= op <= 0x8F:  # DW_OP_breg0..31
                off, pos = sleb128(expr, pos)
                reg = op - 0x70
                if reg not in regs:
                    raise UnknownRegister(reg)
                stack.append((regs[reg] + off) & MASK64)
            elif 0x30 <= op <= 0x4F:  # DW_OP_lit0..31
                stack.append(op - 0x30)
            elif op == 0x92:  # DW_OP_bregx
                reg, pos = uleb128(expr, pos)
                off, pos = sleb128(expr, pos)
                if reg not in regs:
                    raise UnknownRegister(reg)
                stack.append((regs[reg] + off) & MASK64)
            elif op == 0x03:  # DW_OP_addr
                stack.append((_U64.unpack_from(expr, pos)[0] + bias) & MASK64)
                pos += 8
            elif op == 0x06:  # DW_OP_deref
                stack.append(read_u64(stack.pop()) & MASK64)
            elif op == 0x94:  # DW_OP_deref_size (little-endian: keep the low bytes)
                size = expr[pos]
                pos += 1
                if not 1 <= size <= 8:
                    raise ExpressionError(f"DW_OP_deref_size with size {size}")
                stack.append(read_u64(stack.pop()) & ((1 << (8 * size)) - 1))
            elif 0x08 <= op <= 0x0F:  # DW_OP_const{1,2,4,8}{u,s}
                st = _CONST_FORMATS[op - 0x08]
                stack.append(st.unpack_from(expr, pos)[0] & MASK64)
                pos += st.size
            elif op == 0x10:  # DW_OP_constu
                v, pos = uleb128(expr, pos)
                stack.append(v & MASK64)
            elif op == 0x11:  # DW_OP_consts
                v, pos = sleb128(expr, pos)
                stack.append(v & MASK64)
            elif op == 0x12:  # DW_OP_dup
                stack.append(stack[-1])
            elif op == 0x13:  # DW_OP_drop
                stack.pop()
            elif op == 0x14:  # DW_OP_over
                stack.append(stack[-2])
            elif op == 0x15:  # DW_OP_pick
                idx = expr[pos]
                pos += 1
                stack.append(stack[-1 - idx])
            elif op == 0x16:  # DW_OP_swap
                stack[-1], stack[-2] = stack[-2], stack[-1]
            elif op == 0x17:  # DW_OP_rot
                stack[-1], stack[-2], stack[-3] = stack[-2], stack[-3], stack[-1]
            elif op == 0x19:  # DW_OP_abs
                stack.append(abs(_signed(stack.pop())) & MASK64)
            elif op == 0x1F:  # DW_OP_neg
                stack.append(-_signed(stack.pop()) & MASK64)
            elif op == 0x20:  # DW_OP_not
                stack.append(~stack.pop() & MASK64)
            elif op == 0x23:  # DW_OP_plus_uconst
                v, pos = uleb128(expr, pos)
                stack.append((stack.pop() + v) & MASK64)
            elif 0x1A <= op <= 0x2E and op not in (0x1F, 0x20, 0x23, 0x28):
                b = stack.pop()
                a = stack.pop()
                stack.append(_binary(op, a, b))
            elif op == 0x28:  # DW_OP_bra
                off = _S16.unpack_from(expr, pos)[0]
                pos += 2
                if stack.pop() != 0:
                    pos += off
            elif op == 0x2F:  # DW_OP_skip
                off = _S16.unpack_from(expr, pos)[0]
                pos += 2 + off
            elif op == 0x96:  # DW_OP_nop
                pass
            else:
                raise ExpressionError(f"unsupported DWARF expression operation 0x{op:02x}")
    except IndexError as exc:
        raise ExpressionError("DWARF expression underflows its stack or is truncated") from exc
    except struct.error as exc:
        raise ExpressionError("truncated DWARF expression") from exc
    if not stack:
        raise ExpressionError("DWARF expression left an empty stack")
    return stack[-1]


def _binary(op: int, a: int, b: int) -> int:
    """Apply a two-operand DWARF operation; comparisons and division are signed (DWARF 5
    §2.5.1.4)."""
    if op == 0x1A:
        return a & b
    if op == 0x1B:
        sb = _signed(b)
        if sb == 0:
            raise ExpressionError("DW_OP_div by zero")
        sa = _signed(a)
        q = abs(sa) // abs(sb)
        return (q if (sa < 0) == (sb < 0) else -q) & MASK64
    if op == 0x1C:
        return (a - b) & MASK64
    if op == 0x1D:
        if b == 0:
            raise ExpressionError("DW_OP_mod by zero")
        return a % b
    if op == 0x1E:
        return (a * b) & MASK64
    if op == 0x21:
        return a | b
    if op == 0x22:
        return (a + b) & MASK64
    if op == 0x24:
        return (a << b) & MASK64 if b < 64 else 0
    if op == 0x25:
        return a >> b if b < 64 else 0
    if op == 0x26:
        return (_signed(a) >> min(b, 63)) & MASK64
    if op == 0x27:
        return a ^ b
    sa, sb = _signed(a), _signed(b)
    if op == 0x29:
        return int(sa == sb)
    if op == 0x2A:
        return int(sa >= sb)
    if op == 0x2B:
        return int(sa > sb)
    if op == 0x2C:
        return int(sa <= sb)
    if op == 0x2D:
        return int(sa < sb)
    if op == 0x2E:
        return int(sa != sb)
    raise ExpressionError(f"unsupported DWARF expression operation 0x{op:02x}")
