"""What GDB knows of a program counter: its function, inlined calls and source line, and GDB's own
stack walk for the frames memdump's unwinder cannot walk.

GDB glue only: each lookup costs a call into GDB, so the recorder makes them once per distinct
program counter (DumpWriter interns frames) or, for gdb_backtrace, once per stack it cannot walk.
"""

from __future__ import annotations

import os

import gdb
from memdump_analyzer.dumpformat import public_name

from ..core import builtfiles
from ..core.dumpwriter import FrameInfo, InlinedInto
from ..core.procmaps import ModuleMap

__all__ = [
    "MIN_PC", "call_site", "debug_file", "demangle", "from_debug_files", "gdb_backtrace",
    "minimal_symbol", "resolve", "symbolizer",
]

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


#: where addr2line (binutils) and Debian's -dbg and -dbgsym packages keep separate debug files
DEBUG_ROOT = "/usr/lib/debug"


def debug_file(objfile: gdb.Objfile, roots: tuple[str, ...] = (DEBUG_ROOT,)) -> str | None:
    """The separate debug file of OBJFILE's module under one of ROOTS (GDB's
    `debug-file-directory`), by build id (`.build-id/xx/rest.debug`, as libc6-dbg installs
    them) or by its path (ROOT + the module's real path); None when there is none."""
    build_id = getattr(objfile, "build_id", None)
    name = objfile.filename or ""
    for root in roots:
        if build_id and len(build_id) > 2:
            path = os.path.join(root, ".build-id", build_id[:2], build_id[2:] + ".debug")
            if os.path.isfile(path):
                return path
        real = os.path.realpath(name) if name.startswith("/") else ""
        if real and os.path.isfile(root + real) and os.path.realpath(root + real) != real:
            return root + real
    return None


def _executable(path: str) -> bool:
    """A file this process may run (a directory is searchable, not runnable)."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


def symbolizer() -> str | None:
    """memdump-symbolize (gdb_ext/symbolize/): $MEMDUMP_SYMBOLIZE, else where builtfiles.py
    looks (the build tree, the installed lib/dbgkit/); None when it was not built (no libdw)."""
    explicit = os.environ.get("MEMDUMP_SYMBOLIZE")
    if explicit:
        return explicit if _executable(explicit) else None
    for path in builtfiles.candidates("gdb_ext/symbolize", "memdump-symbolize"):
        if _executable(path):
            return path
    return None


def from_debug_files(frames: dict[int, FrameInfo]) -> dict[int, FrameInfo]:
    """Frames GDB found no source line for, in modules whose separate debug files GDB did not
    read (`scripts/memdump.sh` clears GDB's `debug-file-directory`: reading and indexing glibc's
    debug information is most of GDB's time on a small program), symbolised from those files by
    memdump-symbolize (libdw), once per module, in place: function, file, line and inlined calls
    replace GDB's answer from the symbol tables (whose function name stays for code without DWARF
    functions); the other frames keep GDB's answer. Returns FRAMES."""
    by_module: dict[str, list[int]] = {}
    for fid, info in frames.items():
        if info is not None and info.file is None and info.module:
            by_module.setdefault(info.module, []).append(fid)
    program = symbolizer() if by_module else None
    if program is None:
        return frames
    # GDB names a module by the path the dynamic linker used (/lib/...), /proc/PID/maps by the
    # file's (/usr/lib/... on a merged /usr)
    debug = {os.path.realpath(o.filename): o for o in gdb.objfiles()
             if o.owner is None and o.filename and o.filename.startswith("/")}
    for module, fids in by_module.items():
        objfile = debug.get(os.path.realpath(module))
        if objfile is None or _has_debug_info(objfile) or debug_file(objfile) is None:
            continue
        from memdump_analyzer import symbolize  # noqa: PLC0415 - only when a module needs it

        offsets = sorted({max(frames[f].offset - 1, 0) for f in fids})
        try:
            found = symbolize.addr2line(program, module, offsets)
        except symbolize.AddrLineError:
            continue
        for fid in fids:
            chain = found.get(max(frames[fid].offset - 1, 0))
            if not chain or chain[0][1] is None:
                continue
            (function, file, line), outer = chain[0], chain[1:]
            old = frames[fid]
            frames[fid] = FrameInfo(
                module, old.offset, public_name(function) if function else old.function, file,
                line or 0, tuple(InlinedInto(public_name(f) if f else None, p, n or 0)
                                 for f, p, n in outer))
    return frames


def _has_debug_info(objfile: gdb.Objfile) -> bool:
    """Whether GDB read a separate debug file for OBJFILE."""
    return any(o.owner is objfile for o in gdb.objfiles())
