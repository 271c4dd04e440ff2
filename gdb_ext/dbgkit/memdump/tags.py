"""memdump_api.h's categories and phases, as GDB sees them (docs/memdump.md, "Categories and
phases").

Each module that includes the header holds its own `memdump_api_enabled` (a weak variable, in
its symbol table): the macros do nothing while it is 0. memdump writes 1 into every one it finds,
in both recorders, as modules load, and 0 when the recording stops. The calls then reach the
in-process recorder's functions, which write the records themselves, or, in the breakpoint
design, the header's empty hooks (or the recorder's functions when it is preloaded without
recording), where GDB breaks and writes the same records: `g TID STRING` (a tag pushed), `u TID`
(popped), `p SEQ phase NAME`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import gdb

from ..core import ptrace
from ..core.dumpwriter import DumpWriter
from ..core.elf import STT_OBJECT, ElfError, ElfFile

#: the variable the macros test
FLAG = "memdump_api_enabled"
#: memdump_api.h's functions -> what a call marks: the in-process recorder's, which the breakpoint
#: design breaks on too (it may be preloaded without recording), and the header's hooks
MARKS = {
    "memdump_api_tag_push": "push", "memdump_api_tag_push_hook": "push",
    "memdump_api_tag_pop": "pop", "memdump_api_tag_pop_hook": "pop",
    "memdump_api_phase": "phase", "memdump_api_phase_hook": "phase",
}
_MARK_NAMES = frozenset(MARKS)
#: the longest name read (the recorder cuts there too)
NAME_MAX = 255


class Marker(Protocol):
    def on_mark(self, bp: MarkBreakpoint) -> None: ...


class MarkBreakpoint(gdb.Breakpoint):
    """Internal breakpoint on a tag or phase function of memdump_api.h."""

    def __init__(self, session: Marker, address: int, kind: str) -> None:
        super().__init__(f"*{address:#x}", gdb.BP_BREAKPOINT, internal=True)
        self.session = session
        self.kind = kind

    def stop(self) -> bool:
        self.session.on_mark(self)
        return False


def module_api(elf: ElfFile, dynamic: dict[str, int]) -> tuple[int | None, dict[str, int]]:
    """(offset of the module's memdump_api_enabled or None, its mark functions: name -> offset),
    from .dynsym (DYNAMIC, functions) and .symtab (an executable exports nothing by default)."""
    marks = {name: dynamic[name] for name in _MARK_NAMES if dynamic.get(name)}
    flag = None
    try:
        found = elf.symtab_functions(frozenset({FLAG}), (STT_OBJECT,))
        flag = found.get(FLAG)
        if len(marks) < len(MARKS):
            marks = {**elf.symtab_functions(_MARK_NAMES), **marks}
    except (ElfError, OSError):
        pass
    return flag, marks


def set_flags(write: Callable[[int, bytes], None], addresses: Iterable[int], on: bool) -> int:
    """Writes 1 (ON) or 0 into each module's memdump_api_enabled; how many were written."""
    done = 0
    for address in addresses:
        try:
            write(address, (1 if on else 0).to_bytes(4, "little"))
            done += 1
        except (gdb.MemoryError, gdb.error, OSError):
            continue
    return done


def read_name(read: Callable[[int, int], bytes], address: int) -> str:
    """The NUL-terminated name at ADDRESS, at most NAME_MAX bytes ("" when null or unreadable)."""
    if not address:
        return ""
    data = b""
    for size in (64, NAME_MAX + 1):  # most names are short; a page end may cut a long read
        try:
            data = read(address, size)
        except (gdb.MemoryError, OSError):
            continue
        if b"\0" in data or size > NAME_MAX:
            break
    return data.split(b"\0", 1)[0][:NAME_MAX].decode("utf-8", "surrogateescape")


class ApiTags:
    """The breakpoint design's side of memdump_api.h's tags and phases: each thread's stack of
    tags (which `memdump break --tag` tests) and the records its mark breakpoints write. Handed
    what it works with: the dump's WRITER, READ (the process's memory), ON_ERROR (an error on
    the hot path: the recording's, which stops it when the disk is full)."""

    def __init__(self, writer: DumpWriter, read: Callable[[int, int], bytes],
                 on_error: Callable[[Exception], None]) -> None:
        self.writer = writer
        self.read = read
        self.on_error = on_error
        #: each thread's tags, innermost last
        self.stacks: dict[int, list[str]] = {}

    def innermost(self, tid: int) -> str | None:
        """Thread TID's innermost tag, None when it has none."""
        tags = self.stacks.get(tid)
        return tags[-1] if tags else None

    def on_mark(self, bp: MarkBreakpoint) -> None:
        """A stop on a tag or phase function: its record."""
        try:
            tid = gdb.selected_thread().ptid[1]
            regs = ptrace.get_regs(tid)
            if regs is None:
                return
            tags = self.stacks.setdefault(tid, [])
            if bp.kind == "pop":
                self.writer.tag(tid, None)
                if tags:
                    tags.pop()
                return
            name = read_name(self.read, regs.rdi)
            if bp.kind == "push":
                self.writer.tag(tid, name)
                tags.append(name)
            else:
                self.writer.process("phase", name)
        except Exception as exc:  # noqa: BLE001
            self.on_error(exc)
