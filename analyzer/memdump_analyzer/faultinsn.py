"""What a faulting x86-64 instruction accessed: read or write, and how many bytes, as valgrind
says it ("Invalid write of size 4"). One rule for both places that need it: GDB's report at the
stop reads the instruction from GDB's disassembly (gdb_ext's accessfault.py), the analyser's
reports of an `ae` record from the module's code with binutils' objdump (the record has the
faulting program counter, not the access's size). A size that cannot be read is said so
(`access_text`): the module's file is gone, or newer than the recording (rebuilt: its code at the
offset is another instruction, whose size would be wrong), or the instruction is not decoded.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable

from .buildid import unchanged_since

__all__ = ["UNKNOWN_SIZE", "access_sizes", "access_text", "describe_access", "disassemble"]

#: seconds one objdump process may take
TIMEOUT = 30
#: AT&T operand size suffixes and register widths
_SUFFIX = {"b": 1, "w": 2, "l": 4, "q": 8}
_WIDE = {"xmm": 16, "ymm": 32, "zmm": 64}
_MEMORY = re.compile(r"(?:-?0x[0-9a-f]+|-?\d+)?\(%[a-z0-9]+(?:,%[a-z0-9]+)?(?:,\d)?\)")
#: x86-64's longest instruction
_LONGEST = 15
#: what is said of an access whose size is not known, where valgrind says "of size N"
UNKNOWN_SIZE = "of unknown size"


def _reg_size(name: str) -> int:
    for prefix, size in _WIDE.items():
        if name.startswith(prefix):
            return size
    if name.startswith("r") and name[1:].isdigit():
        return 8
    if name.endswith(("d",)) and name[:-1].lstrip("r").isdigit():
        return 4
    if name.endswith("w") and name[1:-1].isdigit():
        return 2
    if name.endswith("b") and name[1:-1].isdigit() or name in ("al", "bl", "cl", "dl", "sil",
                                                               "dil", "ah", "bh", "ch", "dh"):
        return 1
    if name.startswith("r"):
        return 8
    if name.startswith("e"):
        return 4
    return 2


def describe_access(asm: str) -> tuple[str, int]:
    """("read" or "write", size in bytes; 0 unknown) of the x86-64 instruction ASM (AT&T
    disassembly, GDB's or objdump's): the memory operand last is a write (a read-modify-write is
    read first, as valgrind says), elsewhere a read; the size from the mnemonic's suffix or a
    register."""
    asm = asm.split("#")[0].strip()
    mnemonic, _, rest = asm.partition(" ")
    operands = [o.strip() for o in re.split(r",(?![^(]*\))", rest.strip()) if o.strip()]
    memory = [i for i, o in enumerate(operands) if _MEMORY.search(o)]
    access = "write" if memory and memory[-1] == len(operands) - 1 and len(operands) > 1 \
        and mnemonic.startswith(("mov", "vmov", "stos", "set")) else "read"
    regs = [o for i, o in enumerate(operands) if i not in memory and o.startswith("%")]
    if mnemonic.startswith(("movz", "movs")) and len(mnemonic) >= 6 and mnemonic[4] in _SUFFIX:
        return access, _SUFFIX[mnemonic[4]]  # movzbl: a byte read
    if regs:
        return access, _reg_size(regs[0][1:])
    if mnemonic[-1] in _SUFFIX and mnemonic not in ("movsb", "movsw"):
        return access, _SUFFIX[mnemonic[-1]]
    return access, 0


def access_text(access: str, size: int | None) -> str:
    """valgrind's words for an access: "Invalid read of size 4"; "Invalid read of unknown size"
    when SIZE is not known (None or 0), rather than a sentence that leaves it out."""
    return f"Invalid {access} " + (f"of size {size:,}" if size else UNKNOWN_SIZE)


def disassemble(program: str, module: str, start: int, stop: int) -> list[str] | None:
    """objdump's lines of `module`'s code from `start` to `stop` (offsets), AT&T without the raw
    bytes; None when objdump cannot be run or fails."""
    try:
        run = subprocess.run(
            [program, "-d", "--no-show-raw-insn", f"--start-address=0x{start:x}",
             f"--stop-address=0x{stop:x}", module],
            capture_output=True, text=True, errors="replace", timeout=TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return run.stdout.splitlines() if run.returncode == 0 else None


def _instruction(program: str, module: str, offset: int) -> str | None:
    """objdump's AT&T text of the instruction at `offset` in `module`, None if unread."""
    head = f"{offset:x}:"
    for line in disassemble(program, module, offset, offset + _LONGEST) or []:
        address, _, asm = line.strip().partition("\t")
        if address == head and asm and not asm.startswith(".byte"):
            return asm
    return None


def _as_recorded(module: str, start: str | None) -> bool:
    """Whether MODULE's file can be the one that ran in a recording that began at START
    (buildid.unchanged_since); without START, nothing tells otherwise."""
    return start is None or unchanged_since(module, start)



def access_sizes(sites: Iterable[tuple[str, int]], *, program: str = "objdump",
                 arch: str | None = "x86_64", start: str | None = None,
                 ) -> dict[tuple[str, int], int]:
    """(module, offset of a faulting instruction) -> the bytes it accessed, for the sites whose
    module is readable and not newer than the recording's START (a module rebuilt since has
    another instruction there), and whose instruction objdump decodes to a known size; x86-64
    only."""
    out: dict[tuple[str, int], int] = {}
    if arch not in (None, "x86_64") or shutil.which(program) is None:
        return out
    for module, offset in sorted(set(sites)):
        if not os.path.isfile(module) or not _as_recorded(module, start):
            continue
        asm = _instruction(program, module, offset)
        size = describe_access(asm)[1] if asm is not None else 0
        if size:
            out[(module, offset)] = size
    return out
