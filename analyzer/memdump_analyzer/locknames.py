"""The names of a dump's locks, found offline: the global or static variable of a module that
holds the lock (its symbol table, read with binutils' `nm`: `site_lock`, `table+40` for a lock
40 bytes into `table`), else the heap block live at the end that holds it (`+16 in the 64-byte
block from make_account (bank.c:12)`).

GDB's `contention` names the same locks while the program runs, from debug information: member
paths (`ring[1].guard`) and the variables of the waiting frames (`this->mutex_`). The dump keeps
neither, so a lock only a frame knows (on a stack) stays unnamed here.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence

from .dumpfile import Frame
from .symbolize import sized_symbols

__all__ = ["lock_names", "module_bases"]

#: nm's types of data symbols (initialised, zeroed, weak, small, unique)
DATA_TYPES = "BbDdVvGgSsu"


def module_bases(frames: Iterable[Frame]) -> dict[str, int]:
    """Each module's load bias, from the frames the dump placed in it (PC minus OFFSET)."""
    bases: dict[str, int] = {}
    for f in frames:
        if f.module is not None and f.pc is not None:
            bases.setdefault(f.module, f.pc - f.offset)
    return bases


def lock_names(addresses: Sequence[int], bases: Mapping[str, int],
               live: Iterable[tuple[int, int, int]], stack_of: Callable[[int], Sequence[Frame]],
               symbols: Callable[[str], list[tuple[int, int, str]]] | None = None
               ) -> dict[int, str]:
    """{address: name} of the locks at `addresses` that have one: a data symbol of a module
    (`bases`: each module's load bias), else a block of `live` ((address, size, stack node) of
    the blocks live at the end; `stack_of(node)`: the allocation stack as the report shows
    it)."""
    table = symbols or (lambda module: sized_symbols(module, DATA_TYPES))
    found: dict[int, str] = {}
    loaded = [(module, base, table(module)) for module, base in bases.items()
              if os.path.isfile(module)]
    for address in addresses:
        for _, base, syms in loaded:
            name = _symbol_at(syms, address - base)
            if name is not None:
                found[address] = name
                break
    rest = sorted(a for a in addresses if a not in found)
    if rest:
        blocks = sorted(live)
        starts = [b[0] for b in blocks]
        for address in rest:
            i = bisect.bisect_right(starts, address) - 1
            if i >= 0 and address < blocks[i][0] + blocks[i][1]:
                start, size, node = blocks[i]
                stack = stack_of(node)
                where = f" from {_where(stack[0])}" if stack else ""
                found[address] = f"+{address - start} in the {size:,}-byte block{where}"
    return found


def _symbol_at(symbols: list[tuple[int, int, str]], vaddr: int) -> str | None:
    i = bisect.bisect_right(symbols, (vaddr, float("inf"), "")) - 1
    while i >= 0 and symbols[i][0] <= vaddr:
        start, end, name = symbols[i]
        if vaddr < end:
            return name if vaddr == start else f"{name}+{vaddr - start}"
        i -= 1
        if start < vaddr - (1 << 20):  # no symbol spans a megabyte back
            break
    return None


def _where(frame: Frame) -> str:
    name = frame.function or f"{os.path.basename(frame.module or '?')}+0x{frame.offset:x}"
    if frame.file and frame.line:
        return f"{name} ({os.path.basename(frame.file)}:{frame.line})"
    return name
