"""What GDB knows of a program counter: its function, inlined calls and source line, and GDB's own
stack walk for the frames memdump's unwinder cannot walk.

GDB glue only: each lookup costs a call into GDB, so the recorder makes them once per distinct
program counter (DumpWriter interns frames) or, for gdb_backtrace, once per stack it cannot walk.
"""

from __future__ import annotations

import gdb
from memdump_analyzer.dumpformat import public_name

from .core.dumpwriter import FrameInfo, InlinedInto
from .core.procmaps import ModuleMap

__all__ = ["MIN_PC", "call_site", "demangle", "gdb_backtrace", "minimal_symbol", "resolve"]

# Below this, a "program counter" is a null or small integer read from a corrupt or foreign frame.
MIN_PC = 0x1000


def gdb_backtrace(depth: int) -> tuple[int, ...]:
    """Return addresses of the current function's callers from GDB's own unwinder (slow, exact)."""
    pcs: list[int] = []
    frame = gdb.newest_frame().older()
    while frame is not None and len(pcs) < depth:
        if frame.type() != gdb.INLINE_FRAME:
            pc = frame.pc()
            if pc < MIN_PC:
                break
            pcs.append(pc)
        frame = frame.older()
    return tuple(pcs)


def call_site(inlined: gdb.Symbol) -> tuple[str | None, int]:
    """(file, line) of the call an inlined function's block stands for (its DW_AT_call_file and
    DW_AT_call_line, which GDB gives the block's function symbol); (None, 0) when unknown."""
    try:
        symtab = inlined.symtab
        line = inlined.line
        if symtab is None or not line:
            return None, 0
        return symtab.fullname(), line
    except (RuntimeError, gdb.error):
        return None, 0


def minimal_symbol(pc: int) -> str | None:
    """Name from the ELF symbol tables (`0x... <name+off>`), for code without debug information."""
    try:
        text = gdb.format_address(pc)
    except (RuntimeError, gdb.error):
        return None
    start = text.find(" <")
    if start < 0 or not text.endswith(">"):
        return None
    name = text[start + 2 : -1]
    plus = name.rfind("+")
    if plus > 0 and name[plus + 1 :].isdigit():
        name = name[:plus]
    return name or None


def demangle(name: str) -> str:
    """A C++ symbol's name as GDB prints it for code with debug information; NAME if GDB cannot.
    (Minimal symbols come mangled: `print asm-demangle` is off by default, and it is the user's.)"""
    try:
        text = gdb.execute(f"demangle -l c++ -- {name}", to_string=True).strip()
    except gdb.error:
        return name
    return text if text and "\n" not in text else name


def resolve(pc: int, modules: ModuleMap) -> FrameInfo:
    """Symbolise one program counter: it is a return address, so look up pc - 1.

    Code inlined there gives several frames, as GDB's `bt` and valgrind show them: the
    innermost function with the line of pc - 1, then each function it was inlined into with
    the line of the inlined call (GDB gives a DW_TAG_inlined_subroutine block's function
    symbol the call's DW_AT_call_file and DW_AT_call_line as its symtab and line).
    """
    module = modules.find(pc)
    path = module.path if module else None
    offset = pc - module.bias if module else pc
    look = pc - 1
    function = file = None
    line = 0
    try:
        sal = gdb.find_pc_line(look)
        if sal.symtab is not None and sal.line:
            file = sal.symtab.fullname()
            line = sal.line
    except (RuntimeError, gdb.error):
        pass
    symbols = []
    try:
        block = gdb.block_for_pc(look)
        while block is not None and not block.is_static:
            if block.function is not None:
                symbols.append(block.function)
            block = block.superblock
    except (RuntimeError, gdb.error):
        pass
    inlined_into = []
    if symbols:
        function = symbols[0].print_name
        # the block of symbols[i] is the inlined call of it, inside symbols[i + 1]
        for inner, outer in zip(symbols, symbols[1:], strict=False):
            inlined_into.append(InlinedInto(public_name(outer.print_name), *call_site(inner)))
    if function is None:
        function = minimal_symbol(look)
        if function is not None and function.startswith("_Z"):
            function = demangle(function)
    return FrameInfo(path, offset, public_name(function), file, line, tuple(inlined_into))
