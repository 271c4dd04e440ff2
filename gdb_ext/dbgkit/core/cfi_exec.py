"""Running DWARF call frame information: CFA programs into unwind rows (DWARF 5 §6.4.2) and DWARF
expressions into values (DWARF 5 §2.5). Parsing the records they come from is cfi's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

from .cfi import (
    EXPRESSION,
    MASK64,
    OFFSET,
    REGISTER,
    SAME_VALUE,
    UNDEFINED,
    VAL_EXPRESSION,
    VAL_OFFSET,
    CfaRule,
    CfiError,
    ExpressionError,
    FdeInfo,
    RegRule,
    Row,
    UnknownRegister,
    read_encoded,
    sleb128,
    uleb128,
)

__all__ = ["evaluate", "row_at", "table"]

_U16 = struct.Struct("<H")
_S16 = struct.Struct("<h")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
# DW_OP_const1u ... DW_OP_const8s, in opcode order
_CONST_FORMATS = (struct.Struct("<B"), struct.Struct("<b"), _U16, _S16, _U32, struct.Struct("<i"),
                  _U64, struct.Struct("<q"))


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
