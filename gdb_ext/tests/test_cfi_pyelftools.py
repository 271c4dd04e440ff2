"""Our ELF/CFI readers checked against pyelftools, an independent DWARF implementation.

pyelftools is a test-only dependency (requirements-dev.txt, installed into .venv by
scripts/setup.sh; imported here without a skip, so a venv without it fails rather than passes):
gdb_ext never imports it (GDB's Python has no third-party packages; docs/memdump.md, "Why the ELF
and DWARF readers are ours").
For the test programs, libc, libstdc++ and ld.so, every test compares exact values:

- the FDE list: every FDE of .eh_frame, its section offset and its [pc_begin, pc_end), as our
  scanner (cfi.scan_fdes) and pyelftools read it;
- FDE lookups through .eh_frame_hdr (ElfFile.eh_frame_lookup): the first, a middle and the last
  pc of every FDE give that FDE, and pcs in the gaps between FDEs and outside them give None;
- the decoded unwind table of every FDE: at each location where either table starts a row, the
  CFA rule and every register rule in effect, from the whole table (cfi_exec.table) and from the row
  lookup the unwinder uses (cfi_exec.row_at), and the CIE's return-address column;
- .debug_frame (which ours does not read: memdump unwinds with .eh_frame only): our CFA program
  interpreter (cfi_exec.table) on the FDEs of a program built without unwind tables, against
  pyelftools' decoding of the same FDEs.

pyelftools 0.33 is wrong or fails on two instructions, worked around in decoded(): it cannot
decode a table holding DW_CFA_GNU_args_size (its decoder has no case for it and fails formatting
its own error message; the instruction changes no rule), and it factors DW_CFA_def_cfa_sf's offset
by the code alignment factor where DWARF, readelf, GDB and ours use the data alignment factor.
GCC's and glibc's CFI hold few uncommon instructions, so programs/cfi_synth.S has those
(same_value, undefined, register, val_offset[_sf], val_expression, offset_extended,
restore_extended, def_cfa_sf, def_cfa_offset_sf, advance_loc4).
"""

from __future__ import annotations

import bisect
import copy
import re
import shutil
import struct
import subprocess
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from dbgkit.core import cfi, cfi_exec
from dbgkit.core.elf import ElfFile
from elftools.dwarf import callframe, constants
from elftools.elf import elffile

if TYPE_CHECKING:
    from conftest import Programs


LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
LD_SO = "/lib64/ld-linux-x86-64.so.2"
PROGRAMS_DIR = Path(__file__).resolve().parent / "programs"

# A normalised rule: (kind, argument) with the argument an int, bytes (an expression) or None.
Rule = tuple[str, Any]


# --- pyelftools' side ---------------------------------------------------------------------------

class Theirs:
    """pyelftools' reading of one file's .eh_frame (or .debug_frame)."""

    def __init__(self, path: str, debug_frame: bool = False) -> None:
        with open(path, "rb") as fh:
            elf = elffile.ELFFile(fh)
            dwarf = elf.get_dwarf_info()
            name = ".debug_frame" if debug_frame else ".eh_frame"
            sec = elf.get_section_by_name(name)
            assert sec is not None, f"{path}: pyelftools finds no {name}"
            self.section_offset = sec["sh_offset"]
            self.section_data = sec.data()
            entries = dwarf.CFI_entries() if debug_frame else dwarf.EH_CFI_entries()
            self.fdes = [e for e in entries if isinstance(e, callframe.FDE)]
            # Decode now, while the file is open (pyelftools reads lazily from the stream).
            self.tables = [decoded(e) for e in self.fdes]

    @staticmethod
    def range(fde: Any) -> tuple[int, int]:
        return fde["initial_location"], fde["initial_location"] + fde["address_range"]


def decoded(fde: Any) -> list[dict[Any, Any]]:
    """pyelftools' decoded table of an FDE, around two faults of pyelftools 0.33.

    It has no case for DW_CFA_GNU_args_size, which changes no rule: dropped. It multiplies
    DW_CFA_def_cfa_sf's offset by the code alignment factor instead of the data alignment factor
    (DWARF 5 §6.4.2.2; readelf and GDB use the data factor): the operand is rescaled so that its
    product is the data-factored offset (test_pyelftools_def_cfa_sf_fault checks the fault is
    still there).
    """
    cie = fde.cie
    args_size, def_cfa_sf = constants.DW_CFA.GNU_args_size, constants.DW_CFA.def_cfa_sf
    if not any(i.opcode in (args_size, def_cfa_sf) for i in fde.instructions):
        return fde.get_decoded().table
    fixed = []
    for instr in fde.instructions:
        if instr.opcode == args_size:
            continue
        if instr.opcode == def_cfa_sf:
            reg, off = instr.args
            scaled, rest = divmod(off * cie["data_alignment_factor"],
                                  cie["code_alignment_factor"])
            assert rest == 0, "a DW_CFA_def_cfa_sf offset pyelftools cannot be made to decode"
            instr = callframe.CallFrameInstruction(opcode=def_cfa_sf, args=[reg, scaled])
        fixed.append(instr)
    fde = copy.copy(fde)
    fde.__dict__.pop("_decode_CFI_table", None)
    fde.instructions = fixed
    return fde.get_decoded().table


def their_cfa(line: dict[Any, Any]) -> Rule:
    rule = line["cfa"]
    if rule.expr is not None:
        return ("expr", bytes(rule.expr))
    return ("reg", (rule.reg, rule.offset))


def their_regs(line: dict[Any, Any]) -> dict[int, Rule]:
    out: dict[int, Rule] = {}
    for key, rule in line.items():
        if key in ("pc", "cfa"):
            continue
        arg = rule.arg
        if rule.type in ("EXPRESSION", "VAL_EXPRESSION"):
            arg = bytes(arg)
        elif rule.type in ("UNDEFINED", "SAME_VALUE"):
            arg = None
        out[key] = (rule.type, arg)
    return out


# --- ours ---------------------------------------------------------------------------------------

def our_cfa(row: cfi.Row) -> Rule:
    if row.cfa.expression is not None:
        return ("expr", bytes(row.cfa.expression))
    return ("reg", (row.cfa.register, row.cfa.offset))


def our_regs(row: cfi.Row) -> dict[int, Rule]:
    out: dict[int, Rule] = {}
    for reg, rule in row.registers.items():
        kind = cfi.RULE_NAMES[rule.kind].upper()
        arg: Any = None
        if rule.kind in (cfi.OFFSET, cfi.VAL_OFFSET, cfi.REGISTER):
            arg = rule.value
        elif rule.kind in (cfi.EXPRESSION, cfi.VAL_EXPRESSION):
            arg = bytes(rule.expression)
        out[reg] = (kind, arg)
    return out


def compare_tables(what: str, begin: int, end: int, ours: list[cfi.Row],
                   theirs: list[dict[Any, Any]]) -> list[str]:
    """Compare the rules in effect at every location where either table starts a row."""
    problems: list[str] = []
    our_locs = [r.loc for r in ours]
    # pyelftools emits a line at every advance, so one pc may have several: the last one holds.
    their_by_pc: dict[int, dict[Any, Any]] = {}
    for line in theirs:
        their_by_pc[line["pc"]] = line
    their_locs = sorted(their_by_pc)
    for loc in sorted(set(our_locs) | set(their_locs)):
        if not begin <= loc < end:
            continue
        i = bisect.bisect_right(our_locs, loc) - 1
        j = bisect.bisect_right(their_locs, loc) - 1
        if i < 0 or j < 0:
            problems.append(f"{what}: at {loc:#x} ours has {'no' if i < 0 else 'a'} row, "
                            f"pyelftools {'no' if j < 0 else 'a'} row")
            continue
        row, line = ours[i], their_by_pc[their_locs[j]]
        if our_cfa(row) != their_cfa(line):
            problems.append(f"{what}: at {loc:#x} CFA ours {our_cfa(row)} "
                            f"pyelftools {their_cfa(line)}")
        mine, other = our_regs(row), their_regs(line)
        if mine != other:
            diff = {reg: (mine.get(reg), other.get(reg)) for reg in sorted(set(mine) | set(other))
                    if mine.get(reg) != other.get(reg)}
            problems.append(f"{what}: at {loc:#x} register rules differ (reg: (ours, "
                            f"pyelftools)): {diff}")
    return problems


# --- .eh_frame ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def files(programs: Programs) -> dict[str, str]:
    out = {name: str(programs.get(name)) for name in ("chain_O2", "vector_cpp")}
    synth = programs.dir / "libcfi_synth.so"
    if not synth.exists():
        proc = subprocess.run(["gcc", "-shared", "-nostdlib", str(PROGRAMS_DIR / "cfi_synth.S"),
                               "-o", str(synth)], capture_output=True, text=True, timeout=300,
                              check=False)
        assert proc.returncode == 0, proc.stderr
    out["cfi_synth"] = str(synth)
    for name, path in (("libc", LIBC), ("libstdc++", LIBSTDCXX), ("ld.so", LD_SO)):
        if Path(path).exists():
            out[name] = path
    return out


FILES = ["chain_O2", "vector_cpp", "cfi_synth", "libc", "libstdc++", "ld.so"]
_theirs_cache: dict[str, Theirs] = {}


def both(files: dict[str, str], name: str) -> tuple[str, ElfFile, Theirs]:
    if name not in files:
        pytest.fail(f"{name} is not installed (scripts/setup.sh installs it)", pytrace=False)
    path = files[name]
    if path not in _theirs_cache:
        _theirs_cache[path] = Theirs(path)
    return path, ElfFile.open(path), _theirs_cache[path]


@pytest.mark.parametrize("name", FILES)
def test_fde_list_matches_pyelftools(files: dict[str, str], name: str) -> None:
    """Our .eh_frame scanner finds exactly pyelftools' FDEs (offset and pc range)."""
    path, elf, theirs = both(files, name)
    sec = elf.section(".eh_frame")
    assert sec is not None
    data = Path(path).read_bytes()
    ours = cfi.scan_fdes(data, sec.offset, sec.offset + sec.size, sec.addr - sec.offset, {})
    want = sorted((*Theirs.range(e), theirs.section_offset + e.offset) for e in theirs.fdes
                  if e["address_range"] > 0)  # scan_fdes drops empty FDEs, as lookups must
    assert len(ours) == len(want) > 0
    mismatched = [(o, w) for o, w in zip(ours, want, strict=True) if o != w]
    assert not mismatched, (f"{path}: {len(mismatched)} FDEs differ, (begin, end, offset) "
                            f"ours vs pyelftools, first: {mismatched[:5]}")


@pytest.mark.parametrize("name", FILES)
def test_fde_lookup_matches_pyelftools(files: dict[str, str], name: str) -> None:
    """eh_frame_lookup (through .eh_frame_hdr) finds pyelftools' FDE for first, middle and last
    pcs, and nothing in gaps and outside."""
    path, elf, theirs = both(files, name)
    ranges = sorted((*Theirs.range(e), theirs.section_offset + e.offset) for e in theirs.fdes
                    if e["address_range"] > 0)
    problems: list[str] = []
    checked = 0
    for begin, end, offset in ranges:
        for pc in (begin, (begin + end) // 2, end - 1):
            fde = elf.eh_frame_lookup(pc)
            got = None if fde is None else (fde.pc_begin, fde.pc_end, fde.offset)
            if got != (begin, end, offset):
                problems.append(f"lookup {pc:#x}: ours {got}, pyelftools {(begin, end, offset)}")
            checked += 1
    outside = [0, ranges[0][0] - 1, ranges[-1][1], ranges[-1][1] + 0x1000, 1 << 40]
    for (_, end, _), (begin, _, _) in pairwise(ranges):
        if end < begin:  # a gap between two FDEs: its first and last byte
            outside += [end, begin - 1]
    for pc in outside:
        fde = elf.eh_frame_lookup(pc)
        if fde is not None:
            problems.append(f"lookup {pc:#x} (no FDE per pyelftools): ours "
                            f"{(fde.pc_begin, fde.pc_end, fde.offset)}")
        checked += 1
    assert not problems, f"{path}: {len(problems)} of {checked} lookups differ:\n" + \
        "\n".join(problems[:20])


@pytest.mark.parametrize("name", FILES)
def test_rows_match_pyelftools(files: dict[str, str], name: str) -> None:
    """Every FDE's decoded table: CFA rule and register rules equal at every row start."""
    path, elf, theirs = both(files, name)
    problems: list[str] = []
    rows = 0
    for e, table in zip(theirs.fdes, theirs.tables, strict=True):
        begin, end = Theirs.range(e)
        if begin == end:
            continue
        fde = elf.eh_frame_lookup(begin)
        assert fde is not None and fde.offset == theirs.section_offset + e.offset, \
            f"{path}: no FDE of ours for pyelftools' FDE at {begin:#x}"
        if fde.cie.ra_reg != e.cie["return_address_register"]:
            problems.append(f"FDE {begin:#x}: return address column ours {fde.cie.ra_reg}, "
                            f"pyelftools {e.cie['return_address_register']}")
        ours = cfi_exec.table(fde)
        rows += len(ours)
        problems += compare_tables(f"FDE {begin:#x}..{end:#x}", begin, end, ours, table)
        # The unwinder's path: cfi_exec.row_at stops the program at the pc, at every row start.
        locs = sorted({r.loc for r in ours} | {line["pc"] for line in table
                                                if begin <= line["pc"] < end})
        at = [cfi_exec.row_at(fde, loc) for loc in locs]
        problems += compare_tables(f"FDE {begin:#x}..{end:#x} (row_at)", begin, end,
                                   [cfi.Row(loc, r.cfa, r.registers) for loc, r in zip(locs, at,
                                                                                      strict=True)],
                                   table)
    assert not problems, f"{path}: {len(problems)} differences:\n" + "\n".join(problems[:20])
    assert rows > 10


# --- .debug_frame: our CFA program interpreter on another container ----------------------------

def debug_frame_fde(data: bytes, off: int, cies: dict[int, cfi.Cie]) -> cfi.FdeInfo:
    """Parse a 32-bit DWARF .debug_frame FDE (DWARF 5 §6.4.1) into our FdeInfo, for cfi_exec.table
    on it (our readers take .eh_frame only)."""
    length, cie_off = struct.unpack_from("<II", data, off)
    end = off + 4 + length
    if cie_off not in cies:
        cie_len, cie_id, version = struct.unpack_from("<IIB", data, cie_off)
        assert cie_id == 0xFFFFFFFF and version in (1, 3, 4)
        pos = data.index(b"\0", cie_off + 9)
        aug = data[cie_off + 9:pos].decode()
        assert aug == "", f"augmentation {aug!r} in .debug_frame"
        pos += 1 + (2 if version == 4 else 0)
        code_align, pos = cfi.uleb128(data, pos)
        data_align, pos = cfi.sleb128(data, pos)
        if version == 1:
            ra_reg, pos = data[pos], pos + 1
        else:
            ra_reg, pos = cfi.uleb128(data, pos)
        cies[cie_off] = cfi.Cie(cie_off, version, aug, code_align, data_align, ra_reg,
                                cfi.DW_EH_PE_absptr, cfi.DW_EH_PE_omit, False,
                                data[pos:cie_off + 4 + cie_len], False)
    begin, size = struct.unpack_from("<QQ", data, off + 8)
    return cfi.FdeInfo(off, begin, begin + size, cies[cie_off], data[off + 24:end], 0)


@pytest.fixture(scope="module")
def debug_frame_program(tmp_path_factory: pytest.TempPathFactory) -> str:
    """chain.c built with -g and no unwind tables: GCC then emits .debug_frame."""
    if shutil.which("gcc") is None:
        pytest.fail("gcc is not installed (scripts/setup.sh installs it)", pytrace=False)
    out = tmp_path_factory.mktemp("debug_frame") / "chain_debug_frame"
    proc = subprocess.run(["gcc", "-O2", "-g", "-fno-asynchronous-unwind-tables",
                           "-fno-unwind-tables", str(PROGRAMS_DIR / "chain.c"), "-o", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return str(out)


def test_debug_frame_rows_match_pyelftools(debug_frame_program: str) -> None:
    theirs = Theirs(debug_frame_program, debug_frame=True)
    assert len(theirs.fdes) > 5
    cies: dict[int, cfi.Cie] = {}
    problems: list[str] = []
    for e, table in zip(theirs.fdes, theirs.tables, strict=True):
        fde = debug_frame_fde(theirs.section_data, e.offset, cies)
        begin, end = Theirs.range(e)
        assert (fde.pc_begin, fde.pc_end) == (begin, end)
        assert fde.cie.ra_reg == e.cie["return_address_register"]
        problems += compare_tables(f".debug_frame FDE {begin:#x}..{end:#x}", begin, end,
                                   cfi_exec.table(fde), table)
    assert not problems, "\n".join(problems[:20])


def test_pyelftools_def_cfa_sf_fault(files: dict[str, str]) -> None:
    """Who is right about DW_CFA_def_cfa_sf rsp, -2 (cfi_synth+12, data alignment -8): ours and
    readelf say rsp+16, unpatched pyelftools 0.33 says rsp-2. When a pyelftools upgrade fixes
    this, drop the workaround in decoded()."""
    path, elf, theirs = both(files, "cfi_synth")
    loc = elf.dynamic_symbols()["cfi_synth"] + 12
    fde = elf.eh_frame_lookup(loc)
    assert fde is not None
    assert cfi_exec.row_at(fde, loc).cfa == cfi.CfaRule(7, 16)
    (raw,) = theirs.fdes
    lines = [line for line in raw.get_decoded().table if line["pc"] == loc]
    assert [(line["cfa"].reg, line["cfa"].offset) for line in lines] == [(7, -2)]
    if shutil.which("readelf") is not None:
        text = subprocess.run(["readelf", "--debug-dump=frames-interp", path],
                              capture_output=True, text=True, check=True, timeout=60).stdout
        assert re.search(rf"^{loc:016x} rsp\+16 ", text, re.MULTILINE), text
