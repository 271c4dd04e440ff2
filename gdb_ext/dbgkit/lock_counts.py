"""The in-process recorder's lock counts from GDB: where its table is, turning counting on
(`set memdump locks on`, written when the recorder configures itself), reading it at a stop."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

import gdb

from .core import locktable
from .core.procmaps import ModuleMap
from .core.recorder import LIBRARY
from .memdump import symbols as memdump_symbols

if TYPE_CHECKING:
    from .core.locks.contention import Resolved

SYMBOL = "memdump_recorder_locks"
_ENABLED_OFFSET = 8 * 4          # the header's field 4 (gdb_ext/recorder/locks.c)


class NotLoaded(Exception):
    """The process has no recorder (memdump loads it)."""


def header_address() -> int:
    """The address of the recorder's lock table header in the selected inferior: from the
    recorder's own symbols (GDB's search of every module's for the name takes up to ~20 ms)."""
    for objfile in gdb.objfiles():
        if os.path.basename(objfile.filename or "") == LIBRARY:
            symbol = objfile.lookup_global_symbol(SYMBOL)  # None: built without debug information
            if symbol is not None:
                return int(symbol.value().address)
    try:
        return int(gdb.parse_and_eval(f"(unsigned long) &{SYMBOL}"))
    except gdb.error:
        raise NotLoaded(SYMBOL) from None


def configure(enabled: bool, write: Callable[[int, bytes], None]) -> None:
    """Write the setting into the recorder that has just configured itself; a recorder built
    before lock counting existed has no table, and nothing is written."""
    try:
        address = header_address()
    except NotLoaded:
        return
    write(address + _ENABLED_OFFSET, struct.pack("<Q", int(enabled)))


def read() -> locktable.LockTable:
    """The counts now; NotLoaded, or LockTableError / gdb.MemoryError for a bad table."""
    inferior = gdb.selected_inferior()
    return locktable.read_table(lambda a, n: bytes(inferior.read_memory(a, n)), header_address())


def at_end() -> list[locktable.LockCounts]:
    """The counts to write into the dump at the program's end: none when counting is off or
    the table cannot be read (the dump then simply has no `lk` records)."""
    try:
        table = read()
    except (NotLoaded, locktable.LockTableError, gdb.MemoryError, gdb.error):
        return []
    return table.locks if table.enabled or table.locks else []


def resolve(table: locktable.LockTable) -> Resolved:
    """The frames of every return address of the table's waiting stacks, as GDB knows them
    (the function and line of pc - 1, and the functions it was inlined into); a pc GDB cannot
    resolve is left out (shown as its address)."""
    from .core.locks.contention import Frame  # the contention command's, not a recording's

    pcs = {pc for c in table.locks for s in c.stacks for pc in s.pcs}
    if not pcs:
        return {}
    modules = ModuleMap(gdb.selected_inferior().pid)
    resolved: Resolved = {}
    for pc in sorted(pcs):
        try:
            info = memdump_symbols.resolve(pc, modules)
        except (gdb.error, RuntimeError, OSError):
            continue
        if info.function is None:
            where = f" in {os.path.basename(info.module)}+{info.offset:#x}" if info.module else ""
            resolved[pc] = (Frame(f"{pc:#x}{where}"),)
            continue
        resolved[pc] = (Frame(info.function, info.file or "", info.line or 0),
                        *(Frame(i.function or "?", i.file or "", i.line or 0)
                          for i in info.inlined_into))
    return resolved
