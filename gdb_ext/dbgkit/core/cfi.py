"""DWARF call frame information as found in .eh_frame: its encodings, records and CIE/FDE parsing.

Running what it parses (CFA programs into unwind rows, DWARF expressions into values) is
cfi_exec's.

References: LSB 5.0 Core §10.6 (.eh_frame, pointer encodings, augmentations) and DWARF 5 §6.4
(call frame instructions) and §2.5 (DWARF expressions). Little-endian 64-bit targets only.
"""

from __future__ import annotations

import struct
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
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

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
